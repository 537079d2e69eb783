"""The heavy tier's scenarios of tests/integration/test_secrets.py's area, half a minute or more each (`nox -s heavy`,
and CI after README's test command): tokens never reach the terminal logs or the cache."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from torchbuild.demo import make_upstream

from ..helpers import copy_project, git, inv
from ..upstreams import serve

TOKEN = "ghp_S3cretT0ken4242"


PASSWORD = "hunter2-Pa55word"


def files_under(*roots: Path) -> list[Path]:
    return [p for root in roots if root.exists() for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


@pytest.fixture
def private_upstream(tmp_path):
    """The demo upstream served over http on loopback; every request needs user:TOKEN."""
    up = make_upstream(tmp_path / "upstream", url_base="https://github.example/org", units=4)
    for name in ("pytorch", "fbgemm", "pybind11", "asmjit", "nccl", "gitlab/eigen"):
        git(up.repo(name), "update-server-info")
    with contextlib.contextmanager(serve)(up.root, TOKEN) as base:
        yield up, base.replace("http://", f"http://user:{TOKEN}@")


def test_tokens_never_reach_the_terminal_logs_or_the_cache(private_upstream, tmp_path):
    """(issue 15)"""
    up, base = private_upstream
    proj = copy_project(tmp_path / "proj")
    cache = tmp_path / "cache"
    (proj / "torchbuild.yaml").write_text(
        f"source:\n  url: {base}/pytorch\n  path: {tmp_path / 'co'}\n"
        f"mirrors:\n  git:\n    'https://github.example/org/': '{base}/'\n"
        f"    'https://gitlab.github.example/org/': '{base}/gitlab/'\n"
        f"  pip_extra_index_urls: ['https://user:{PASSWORD}@pypi.example/simple']\n"
        f"paths:\n  cache_dir: {cache}\n  logs: {tmp_path / 'logs'}\n  envs: {tmp_path / 'envs'}\n"
        "build:\n  min_free_gb: 1\n  cuda: none\npatches:\n  auto: false\n")
    outputs = []
    wrong = inv("clone", "--url", base.replace(str(base.rsplit(":", 1)[1]), "1") + "/pytorch",
                "--path", str(tmp_path / "nowhere"), root=proj, check=False)
    outputs.append(wrong.output)
    assert wrong.returncode != 0 and "cannot" in wrong.stderr
    outputs.append(inv("clone", root=proj, check=True).output)
    assert (tmp_path / "co" / "third_party/fbgemm/third_party/asmjit/LICENSE").exists()
    env = {"TORCHBUILD_CACHE_PASSWORD": PASSWORD, "PIP_RETRIES": "0"}  # the extra index is nowhere: ask it once
    outputs.append(inv("config", root=proj, env=env, check=True).output)
    outputs.append(inv("doctor", "--json", root=proj, env=env).output)
    outputs.append(inv("build", "--set", f"MY_TOKEN={TOKEN}x", "--dry-run", root=proj, env=env, check=True).output)
    outputs.append(inv("build", "--set", f"MY_TOKEN={TOKEN}x", root=proj, env=env, check=True, timeout=600).output)
    outputs.append(inv("build", "--record", root=proj, check=True).output)
    assert "***" in "".join(outputs)
    for text in outputs:
        assert TOKEN not in text and PASSWORD not in text
    leaks = [p for p in files_under(cache, tmp_path / "logs", proj / "dist")
             if TOKEN.encode() in p.read_bytes() or PASSWORD.encode() in p.read_bytes()]
    assert leaks == []
    assert TOKEN in git(tmp_path / "co", "config", "remote.origin.url")  # the checkout keeps what git needs
