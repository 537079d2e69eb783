"""Runs at once take turns: two clones into one path, two env creations, clean beside a running build, two
matrices writing one summary, two checkouts sharing one cache dir. Real git, real processes."""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
import sys
import time

import pytest

from ..helpers import REPO, inv


@pytest.fixture
def checkout(upstream, tmp_path):
    dest = tmp_path / "co"
    inv("clone", "--url", upstream.url("pytorch"), "--path", str(dest), check=True)
    return dest


def _two_at_once(*args: str) -> list[subprocess.CompletedProcess[str]]:
    argv = [sys.executable, "-m", "invoke", "--search-root", str(REPO), *args]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    return [subprocess.CompletedProcess(argv, p.returncode, o, e) for p, (o, e) in zip(procs, outs)]


def test_two_clones_into_one_path_take_turns(upstream, tmp_path):
    """(issue 15)"""
    dest = tmp_path / "co"
    first, second = _two_at_once("clone", "--url", upstream.url("pytorch"), "--path", str(dest))
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "Traceback" not in first.stderr + second.stderr
    assert "nothing to do" in first.stderr + second.stderr  # the later one found it complete
    assert (dest / "third_party/fbgemm/third_party/asmjit/LICENSE").exists()
    assert not list(tmp_path.glob(".co.partial*"))


def test_two_env_creations_take_turns(tmp_path, monkeypatch):
    """(issue 15)"""
    monkeypatch.setenv("TORCHBUILD_PATHS_ENVS", str(tmp_path / "envs"))
    monkeypatch.setenv("TORCHBUILD_SOURCE_PATH", str(tmp_path / "none"))
    first, second = _two_at_once("env.create", "--name", "twice", "--backend", "uv")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    both = first.stderr + second.stderr
    assert "another torchbuild is creating env twice" in both and "is up to date: nothing to install" in both
    assert subprocess.run([str(tmp_path / "envs/twice/bin/python"), "-c", "import yaml"]).returncode == 0


def test_clean_waits_for_a_running_build(checkout):
    """(issue 15)"""
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
    """(issue 15)"""
    summary = tmp_path / "dist" / "matrix-summary.json"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(summary), name]) for name in ("a", "b", "c")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    sessions = {s["session"] for s in __import__("json").loads(summary.read_text())["sessions"]}
    assert sessions == {f"build-{n}-{i}" for n in "abc" for i in range(25)}
