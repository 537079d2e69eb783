"""The heavy tier's scenarios of tests/integration/test_bisect.py's area, half a minute or more each (`nox -s heavy`,
and CI after README's test command): bisect finds the regression in its own worktree at incremental cost; bisect
takes a nightly built from the commit or differing from it in python only."""

from __future__ import annotations

import datetime
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchbuild.demo import make_history, make_upstream

from ..helpers import build, env_python, free_port, git, inv, tree_state, wait_for_port

# good: a positive checksum, and pip's record saying the version version.py says; bytecode written (a step
# comes within the second of the last, and a cached version.py of the same size would pass for the new one)
POSITIVE = ["env", "-u", "PYTHONDONTWRITEBYTECODE", "python", "-c",
            "import importlib.metadata as m, minitorch, minitorch.version as v, sys; print(minitorch.checksum(10)); "
            "sys.exit(0 if minitorch.checksum(10) > 0 and m.version('minitorch') == v.__version__ else 1)"]


SECRET = "ghp_B1sectS3cret77"


USER = "import minitorch, minitorch.version as v; print(minitorch.checksum(10), minitorch.__file__, v.__version__)"


def bisect(co: Path, *args: str, check: bool | None = True) -> subprocess.CompletedProcess[str] | object:
    return inv("bisect", "--path", str(co), *args, check=check, timeout=600)


def state(co: Path) -> dict:
    return json.loads((co / ".torchbuild" / "bisect" / "state.json").read_text())


def descends(co: Path, commit: str, ancestor: str) -> bool:
    return subprocess.run(["git", "merge-base", "--is-ancestor", ancestor, commit], cwd=co).returncode == 0


@pytest.mark.slow
def test_bisect_finds_the_regression_in_its_own_worktree_at_incremental_cost(tmp_path, shared, monkeypatch):  # noqa: F811
    for key, value in {**shared, "TORCHBUILD_PATHS_LOGS": str(tmp_path / "logs")}.items():
        monkeypatch.setenv(key, value)
    up = make_upstream(tmp_path / "upstream", units=4, era="main")
    shas = make_history(up)
    co = tmp_path / "co"
    inv("clone", "--url", up.url("pytorch"), "--path", str(co), check=True)
    assert git(co, "rev-list", "--count", f"{shas['good']}..HEAD") == "64"

    # bad input: one line naming the flag, nothing made
    wrong = bisect(co, "--good", "no-such-ref", "--", "true", check=False)
    assert wrong.returncode == 1 and "--good 'no-such-ref' is not a commit of" in wrong.stderr
    backwards = bisect(co, "--good", "HEAD", "--bad", shas["good"], "--", "true", check=False)
    assert backwards.returncode == 1 and "is not an ancestor of --bad" in backwards.stderr
    assert "are the same commit" in bisect(co, "--good", "HEAD", "--", "true", check=False).stderr
    assert "no command to judge" in bisect(co, "--good", shas["good"], check=False).stderr
    assert "no bisection to resume" in bisect(co, "--resume", check=False).stderr
    assert not (co / ".torchbuild" / "bisect" / "worktree").exists()

    # the user's uncommitted work and own build
    (co / "minitorch" / "history.py").write_text((co / "minitorch" / "history.py").read_text() + "# my work\n")
    (co / "notes.txt").write_text("mine\n")
    build(co, "--cuda", "none")
    user = subprocess.run([str(env_python()), "-c", USER], cwd=tmp_path, capture_output=True, text=True,
                          check=True).stdout
    custom = str(up.repo("fbgemm"))  # the user's own url for a submodule (a path, where .gitmodules says file://)
    git(co, "config", "submodule.third_party/fbgemm.url", custom)
    before = tree_state(co)

    done = bisect(co, "--cuda", "none", "--good", shas["good"], "--bad", "HEAD", "--set", f"MY_TOKEN={SECRET}", "--",
                  *POSITIVE)
    assert f"first bad commit: {shas['regression']} regression: change 45 (#1045) (PR #1045)" in done.stderr
    # its env: a copy of the user's (the same requirements) less the user's torch, its scripts its own
    own = co / ".torchbuild" / "bisect" / "envs" / env_python().parent.parent.name
    assert f"its env {own}: a copy of {env_python().parent.parent}" in done.stderr
    assert (own / "bin" / "pip").read_text().startswith(f"#!{own}/bin/python")
    # the commit that does not build is skipped, naming the compiler's error
    assert re.search(rf"{shas['32'][:10]} does not build, skipped \(git bisect skip\): \S*unit_00\.cpp:\d+:\d+: "
                     "error: expected", done.stderr)
    steps = state(co)["steps"]
    for step in steps:  # every verdict is the truth about that commit's binaries
        broken = step["commit"] == shas["32"]
        assert step["verdict"] == ("skip" if broken else "bad" if descends(co, step["commit"], shas["regression"])
                                   else "good"), step
        assert broken or f"+git{step['commit'][:7]}" in step["version"]
    ways = [s["way"] for s in steps]
    assert "a build of another commit" in done.stderr and "without pip" in done.stderr  # CMake's build, no pip
    assert ways.count("build") >= 3 and 1 <= sum(1 for s in steps if s["compiled"]) < len(steps)
    built = [s for s in steps if s["way"] == "build" and s["verdict"] != "skip"]
    assert built[0]["compiled"] > max(s["compiled"] for s in built[1:])  # incremental after the first build
    log = (co / ".torchbuild" / "bisect" / "bisect.log").read_text()
    assert log.count("== step") == len(steps) and "-999995" in log  # COMMAND's own output is in the log
    # a secret given with --set reaches the builds, never the terminal or a file the bisection writes
    assert state(co)["sets"] == ["MY_TOKEN=***"] and SECRET not in done.output
    written = [p for p in (co / ".torchbuild" / "bisect").rglob("*") if p.is_file() and "worktree" not in p.parts
               and "envs" not in p.parts]
    assert written and [p for p in written if SECRET.encode() in p.read_bytes()] == []

    # the user's checkout, config, work, env and tree are as they were: the same import, and the build is a no-op
    assert git(co, "config", "submodule.third_party/fbgemm.url") == custom  # its worktree shares .git/config
    assert tree_state(co) == before and (co / "notes.txt").read_text() == "mine\n"
    assert subprocess.run([str(env_python()), "-c", USER], cwd=tmp_path, capture_output=True, text=True,
                          check=True).stdout == user
    assert "up to date:" in build(co, "--cuda", "none").stderr

    # a second bisection over Python-only commits: the kept binaries with each commit's Python, nothing
    # compiled; killed (kill -9) while its command runs, --resume goes on from that step
    marker = tmp_path / "killed-once"
    judge = tmp_path / "judge.sh"
    judge.write_text(f"#!/bin/sh\nif [ ! -e {marker} ]; then touch {marker}; kill -9 $PPID; sleep 1; exit 0; fi\n"
                     "exec python -c \"import minitorch.history as h, sys; sys.exit(1 if hasattr(h, 'helper_50') "
                     "else 0)\"\n")
    judge.chmod(0o755)
    killed = bisect(co, "--cuda", "none", "--good", shas["46"], "--bad", shas["51"], "--", str(judge), check=False)
    assert killed.returncode == -9 and marker.exists()
    assert "in progress" in bisect(co, "--good", shas["46"], "--", "true", check=False).stderr
    resumed = bisect(co, "--resume")
    assert "resuming the bisection" in resumed.stderr
    assert f"first bad commit: {shas['50']} python: change 50 (#1050)" in resumed.stderr
    steps = state(co)["steps"]
    python_only = [s for s in steps if s["way"] == "python"]
    assert python_only and all(s["compiled"] == 0 for s in python_only)
    assert all(f"+git{s['commit'][:7]}" in s["version"] for s in steps)  # the version check passed each step

    reset = bisect(co, "--reset")
    assert "bisection reset" in reset.stderr and not (co / ".torchbuild" / "bisect").exists()
    assert git(co, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert tree_state(co) == before and "up to date:" in build(co, "--cuda", "none").stderr


@pytest.mark.slow
def test_bisect_takes_a_nightly_built_from_the_commit_or_differing_from_it_in_python_only(tmp_path, shared,  # noqa: F811
                                                                                          monkeypatch):
    for key, value in {**shared, "TORCHBUILD_PATHS_LOGS": str(tmp_path / "logs")}.items():
        monkeypatch.setenv(key, value)
    up = make_upstream(tmp_path / "upstream", units=4)
    shas = make_history(up, commits=16)  # C++ at 8 and 16, the header at 12, Python elsewhere
    at9 = tmp_path / "at9"
    inv("clone", "--url", up.url("pytorch"), "--ref", shas["9"], "--path", str(at9), check=True)
    day = datetime.datetime.fromtimestamp(int(git(at9, "show", "-s", "--format=%ct", "HEAD")),
                                          tz=datetime.timezone.utc).strftime("%Y%m%d")
    build(at9, "--cuda", "none", "--wheel", "--dist", str(tmp_path / "dist"), "--set",
          f"PYTORCH_BUILD_VERSION=0.1.0.dev{day}")
    index = tmp_path / "index" / "minitorch"
    index.mkdir(parents=True)
    for wheel in (tmp_path / "dist").glob("minitorch-*.whl"):
        shutil.copy(wheel, index)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                              cwd=tmp_path / "index", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, server, "the index")
        monkeypatch.setenv("TORCHBUILD_NIGHTLY_INDEX_URL", f"http://127.0.0.1:{port}/")
        co = tmp_path / "co"
        inv("clone", "--url", up.url("pytorch"), "--path", str(co), check=True)
        check = ["python", "-c", "import minitorch, minitorch.history as h, sys; minitorch.checksum(); "
                 "sys.exit(1 if hasattr(h, 'helper_10') else 0)"]
        done = bisect(co, "--cuda", "none", "--nightly", "--good", shas["good"], "--bad", "HEAD", "--", *check)
    finally:
        server.terminate()
        server.wait()
    assert f"first bad commit: {shas['10']} python: change 10 (#1010)" in done.stderr
    steps = {s["commit"]: s for s in state(co)["steps"]}
    # 8 and 10 differ from 9 in Python only: the nightly's binaries, their own Python and version, nothing compiled
    for n in ("8", "10"):
        assert steps[shas[n]]["way"] == "nightly" and steps[shas[n]]["compiled"] == 0
        assert f"built from {shas['9'][:10]}, whose difference from this commit is Python only" in steps[shas[n]]["why"]
        assert f"git_version {shas[n][:10]}" in steps[shas[n]]["version"] and ".dev" in steps[shas[n]]["version"]
    assert steps[shas["12"]]["way"] == "build"  # the header changed since 9: no nightly holds it
    assert steps[shas["9"]]["way"] == "kept" and steps[shas["9"]]["verdict"] == "good"
