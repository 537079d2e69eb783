"""What a hostile probe found (issue 15): paths from input stay inside, secrets never show,
broken mirror caches are repaired, and concurrent runs take turns. Real git, real processes."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from torchbuild.demo import make_upstream
from torchbuild.toolchain.system import check_writable

from .conftest import REAL_HOME, REPO, copy_project, git, inv
from .test_patches import make_patch, patch
from .upstreams import serve

TOKEN = "ghp_S3cretT0ken4242"
PASSWORD = "hunter2-Pa55word"


@pytest.fixture
def checkout(upstream, tmp_path):
    dest = tmp_path / "co"
    inv("clone", "--url", upstream.url("pytorch"), "--path", str(dest), check=True)
    return dest


def files_under(*roots: Path) -> list[Path]:
    return [p for root in roots if root.exists() for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


# ----------------------------------------------------------------------------- paths from input stay inside


@pytest.mark.parametrize("config", ["../..", "..", "/ABS"])
def test_clean_config_must_name_a_tree_torchbuild_made(checkout, tmp_path, config):
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    before = sorted(str(p) for p in files_under(checkout) if ".git" not in p.parts)
    done = inv("clean", "--path", str(checkout), "--config", config.replace("/ABS", str(outside)), check=False)
    assert done.returncode != 0 and "Traceback" not in done.output
    assert "is not a configuration name" in done.stderr or "no build tree for configuration" in done.stderr
    assert (outside / "keep.txt").read_text() == "mine"
    assert sorted(str(p) for p in files_under(checkout) if ".git" not in p.parts) == before


def test_series_entries_that_leave_the_checkout_or_the_patches_folder_are_refused(upstream, checkout, tmp_path):
    sibling = tmp_path / "other"
    git(tmp_path, "clone", "-q", upstream.url("pybind11"), str(sibling))
    sibling_head = git(sibling, "rev-parse", "HEAD")
    out = tmp_path / "patches"
    name = make_patch(tmp_path, sibling, out, {"LICENSE": "changed\n"}, "sibling change")
    (tmp_path / "loose.patch").write_text((out / name).read_text())
    escaping = make_patch(tmp_path, checkout, out, {"README.md": "x\n"}, "escape")
    text = (out / escaping).read_text().replace("README.md", "../escaped.txt")
    (out / escaping).write_text(text)
    cases = {
        f"../other: {name}": "'../other' leaves the checkout",
        f"{tmp_path}/other: {name}": "leaves the checkout",
        "../loose.patch": "'../loose.patch' leaves the patches folder",
        f"{tmp_path / 'loose.patch'}": "leaves the patches folder",
        f"third_party/nothere: {name}": "third_party/nothere is not a submodule checkout",
        escaping: "writes outside its repo (../escaped.txt)",
    }
    for line, message in cases.items():
        (out / "series").write_text(line + "\n")
        done = patch("apply", checkout, out, check=False)
        assert done.returncode == 1 and message in done.stderr, (line, done.output)
    assert git(sibling, "rev-parse", "HEAD") == sibling_head
    assert "torchbuild/patches" not in git(sibling, "branch", "-a")
    assert not (tmp_path / "escaped.txt").exists() and git(checkout, "status", "--porcelain") == ""


def test_plain_unified_diff_without_git_headers_applies(checkout, tmp_path):
    out = tmp_path / "patches"
    name = make_patch(tmp_path, checkout, out, {"README.md": "# patched by a plain diff\n"}, "plain", plain=True)
    text = "".join(ln for ln in (out / name).read_text().splitlines(keepends=True)
                   if not ln.startswith(("diff --git", "index ")))
    assert text.startswith("--- a/README.md")
    (out / name).write_text(text)
    (out / "series").write_text(name + "\n")
    patch("apply", checkout, out, check=True)
    assert (checkout / "README.md").read_text() == "# patched by a plain diff\n"


def test_a_refused_patch_shows_gits_cause_not_its_advice(checkout, tmp_path):
    out = tmp_path / "patches"
    name = make_patch(tmp_path, checkout, out, {"README.md": "one\n"}, "first")
    (checkout / "README.md").write_text("conflicting\n")
    git(checkout, "commit", "-qam", "local change")
    (out / "series").write_text(name + "\n")
    done = patch("apply", checkout, out, check=False)
    assert done.returncode == 1 and "README.md" in done.stderr
    assert "git am --abort" not in done.stderr.split("next:")[0]


def test_env_name_and_git_jobs_are_bounded(tmp_path):
    bad_env = inv("env.activate", "../../etc", check=False)
    assert bad_env.returncode == 1 and "is not a plain name" in bad_env.stderr
    jobs = inv("clone", "--jobs", "100000000000000000000000", "--dry-run", check=False)
    assert jobs.returncode == 2 and "must be at most 256" in jobs.stderr


# ----------------------------------------------------------------------------- secrets


@pytest.fixture
def private_upstream(tmp_path):
    """The demo upstream served over http on loopback; every request needs user:TOKEN."""
    up = make_upstream(tmp_path / "upstream", url_base="https://github.example/org", units=4)
    for name in ("pytorch", "fbgemm", "pybind11", "asmjit", "nccl", "gitlab/eigen"):
        git(up.repo(name), "update-server-info")
    with contextlib.contextmanager(serve)(up.root, TOKEN) as base:
        yield up, base.replace("http://", f"http://user:{TOKEN}@")


def test_tokens_never_reach_the_terminal_logs_or_the_cache(private_upstream, tmp_path):
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


# ----------------------------------------------------------------------------- broken mirror caches


def _mirror(cache: Path, name: str) -> Path:
    return next(p for p in (cache / "git").glob(f"*{name}-*.git") if p.is_dir())


@pytest.mark.parametrize("damage", ["deleted pack", "truncated pack", "half-made mirror"])
def test_a_broken_mirror_is_repaired_and_never_cloned_from(upstream, tmp_path, isolated_env, damage):
    inv("clone", "--url", upstream.url("pytorch"), "--path", str(tmp_path / "first"), check=True)
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "torchbuild"
    name = "fbgemm" if damage == "deleted pack" else "pytorch"
    mirror = _mirror(cache, name)
    packs = sorted((mirror / "objects/pack").glob("*.pack"), key=lambda p: p.stat().st_size)
    if damage == "deleted pack":
        for pack in packs:
            pack.unlink()
            pack.with_suffix(".idx").unlink()
    elif damage == "truncated pack":
        data = packs[-1].read_bytes()
        packs[-1].write_bytes(data[: len(data) // 2])
    else:
        (mirror / "HEAD").unlink()
    done = inv("clone", "--url", upstream.url("pytorch"), "--path", str(tmp_path / "second"), check=True)
    assert "is broken" in done.stderr and "making it again from the upstream" in done.stderr
    second = tmp_path / "second"
    for repo in (second, second / "third_party/fbgemm", second / "third_party/fbgemm/third_party/asmjit"):
        subprocess.run(["git", "fsck", "--no-progress"], cwd=repo, check=True, capture_output=True)
    assert (second / "third_party/fbgemm/third_party/asmjit/LICENSE").exists()
    assert git(second, "submodule", "status", "--recursive").count("-") == 0
    assert subprocess.run(["git", "fsck", "--connectivity-only"], cwd=_mirror(cache, name),
                          capture_output=True).returncode == 0


def test_checkouts_share_no_object_files_with_the_cache(upstream, tmp_path, isolated_env):
    inv("clone", "--url", upstream.url("pytorch"), "--path", str(tmp_path / "co"), check=True)
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "torchbuild" / "git"
    cached = {(p.stat().st_dev, p.stat().st_ino) for p in files_under(cache)}
    mine = {(p.stat().st_dev, p.stat().st_ino) for p in files_under(tmp_path / "co")}
    assert cached and not cached & mine


# ----------------------------------------------------------------------------- concurrent runs


def _two_at_once(*args: str) -> list[subprocess.CompletedProcess[str]]:
    argv = [sys.executable, "-m", "invoke", "--search-root", str(REPO), *args]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    return [subprocess.CompletedProcess(argv, p.returncode, o, e) for p, (o, e) in zip(procs, outs)]


def test_two_clones_into_one_path_take_turns(upstream, tmp_path):
    dest = tmp_path / "co"
    first, second = _two_at_once("clone", "--url", upstream.url("pytorch"), "--path", str(dest))
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "Traceback" not in first.stderr + second.stderr
    assert "nothing to do" in first.stderr + second.stderr  # the later one found it complete
    assert (dest / "third_party/fbgemm/third_party/asmjit/LICENSE").exists()
    assert not list(tmp_path.glob(".co.partial*"))


def test_two_env_creations_take_turns(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHBUILD_PATHS_ENVS", str(tmp_path / "envs"))
    monkeypatch.setenv("TORCHBUILD_SOURCE_PATH", str(tmp_path / "none"))
    first, second = _two_at_once("env.create", "--name", "twice", "--backend", "uv")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    both = first.stderr + second.stderr
    assert "another torchbuild is creating env twice" in both and "is up to date: nothing to install" in both
    assert subprocess.run([str(tmp_path / "envs/twice/bin/python"), "-c", "import yaml"]).returncode == 0


def test_many_env_dir_checks_at_once_never_trip_over_each_other(tmp_path):
    with ThreadPoolExecutor(8) as pool:  # a shared probe file made one of two `env.create`s fail in CI
        list(pool.map(lambda _: check_writable(tmp_path / "envs", "env dir", "paths.envs"), range(2000)))
    assert list((tmp_path / "envs").iterdir()) == []


def test_clean_waits_for_a_running_build(checkout):
    tree = checkout / "build"
    tree.mkdir()
    (tree / ".torchbuild.json").write_text('{"key": "py3.12-cpu-release", "configure": {}, "done": null}')
    lock = checkout / ".torchbuild" / "lock"
    lock.parent.mkdir(exist_ok=True)
    with open(lock, "a+") as held:  # what a running build holds
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("pid 1: building")
        held.flush()
        proc = subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), "clean", "--path",
                                 str(checkout)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            if tree.exists() and time.monotonic() > deadline - 25:
                break
        assert proc.poll() is None and tree.exists()  # it waits; the tree is not removed under the build
        fcntl.flock(held, fcntl.LOCK_UN)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "another build is running" in err and not tree.exists()
    assert re.search(r"removed py3\.12-cpu-release", err)
    shutil.rmtree(checkout / ".torchbuild")


WRITER = """
import sys
from pathlib import Path
from torchbuild.summary import SessionRecord, write_summary
for i in range(25):
    write_summary(Path(sys.argv[1]), SessionRecord(f"build-{sys.argv[2]}-{i}", "3.12", "none"))
"""


def test_two_matrices_writing_one_summary_lose_no_record(tmp_path):
    summary = tmp_path / "dist" / "matrix-summary.json"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(summary), name]) for name in ("a", "b", "c")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    sessions = {s["session"] for s in __import__("json").loads(summary.read_text())["sessions"]}
    assert sessions == {f"build-{n}-{i}" for n in "abc" for i in range(25)}


def test_two_checkouts_sharing_one_cache_dir_build_at_once(upstream, tmp_path, monkeypatch):
    """What two matrices share (mirrors, the compiler cache, the envs) under concurrent use."""
    for key, value in {"TORCHBUILD_PATHS_ENVS": tmp_path / "envs", "TORCHBUILD_BUILD_MIN_FREE_GB": "1",
                       "TORCHBUILD_PATHS_LOGS": tmp_path / "logs", "TORCHBUILD_BUILD_CUDA": "none",
                       "PIP_CACHE_DIR": REAL_HOME / ".cache" / "pip"}.items():
        monkeypatch.setenv(key, str(value))
    argv = [sys.executable, "-m", "invoke", "--search-root", str(REPO)]
    clones = [subprocess.Popen([*argv, "clone", "--url", upstream.url("pytorch"), "--path", str(tmp_path / n)],
                               stderr=subprocess.PIPE, text=True) for n in ("one", "two")]
    assert [c.wait(timeout=300) for c in clones] == [0, 0]
    builds = [subprocess.Popen([*argv, "build", "--path", str(tmp_path / n)], stderr=subprocess.PIPE, text=True)
              for n in ("one", "two")]
    errs = [b.communicate(timeout=600)[1] for b in builds]
    assert [b.returncode for b in builds] == [0, 0], errs
    assert all("built in" in e for e in errs)
