"""The warm process behind the installed `torchbuild build` (warm.py): the build runs in a fork of a process
that has the build path imported, with the command's terminal, folder and environment, and says, builds
and stops exactly as the command itself would."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ..helpers import REPO, compiled, last_log, run_python

pytestmark = pytest.mark.slow


ENTRY = "import sys; sys.argv = ['torchbuild', 'build', *sys.argv[1:]]; from torchbuild.program import main; main()"


@pytest.fixture
def warm(tmp_path, monkeypatch):
    """Warm processes on, their sockets in a folder of this test's; a `git` that notes which process ran it
    (the check's `git status`); every warm process of the test stopped at its end."""
    runtime, bin_dir = Path(tempfile.mkdtemp(prefix="tbw-")), tmp_path / "bin"  # short: a socket's name is
    bin_dir.mkdir()  # 107 bytes at most
    calls = tmp_path / "git-callers"
    (bin_dir / "git").write_text(f"#!/bin/sh\ntr '\\0' ' ' < /proc/$PPID/cmdline >> {calls}\necho >> {calls}\n"
                                 f"exec {shutil.which('git')} \"$@\"\n")
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("TORCHBUILD_WARM", "1")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    yield runtime, calls
    for pid in _warm_processes(runtime):
        os.kill(pid, signal.SIGTERM)
    shutil.rmtree(runtime, ignore_errors=True)


def _warm_processes(runtime: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(runtime) in (proc / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def command(checkout: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", ENTRY, "--path", str(checkout), "--cuda", "none", *args],
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                          env={**os.environ, **env})


def ran_warm(calls: Path, runtime: Path) -> bool:
    """Whether the last command's check (its `git status`) ran in a warm process: a fork keeps its parent's
    command line (the build's own git calls run under setup.py or CMake)."""
    lines = calls.read_text().splitlines() if calls.exists() else []
    calls.unlink(missing_ok=True)
    return any(str(runtime) in line for line in lines)


def wait_for_socket(runtime: Path) -> None:
    deadline = time.monotonic() + 30
    while not list(runtime.glob("torchbuild-*/warm-*.sock")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(runtime.glob("torchbuild-*/warm-*.sock")), "no warm process was left for the next build"


def test_a_build_runs_warm_and_says_builds_and_fails_as_the_command_would(small_demo, warm):  # noqa: F811
    runtime, calls = warm
    first = command(small_demo)
    assert first.returncode == 0 and "cpu-release built in" in first.stderr, first.stderr
    assert not ran_warm(calls, runtime)  # nothing warm yet: the command ran it, and left one for the next
    wait_for_socket(runtime)
    (folder,) = runtime.glob("torchbuild-*")
    assert folder.stat().st_mode & 0o077 == 0  # this user's only

    served = command(small_demo)
    assert ran_warm(calls, runtime)
    cold = command(small_demo, TORCHBUILD_WARM="0")
    assert not ran_warm(calls, runtime)
    assert "up to date" in served.stderr and served.returncode == cold.returncode == 0

    def timeless(text: str) -> str:
        return re.sub(r"\d+\.\d+s", "Ns", text)

    assert timeless(served.stderr) == timeless(cold.stderr) and served.stdout == cold.stdout

    unit = small_demo / "c10/core/unit_01.cpp"
    unit.write_text(unit.read_text().replace("return work<1>(n)", "return 1 + work<1>(n)"))
    edited = command(small_demo, TORCHBUILD_BUILD_JOBS="1")  # the command's environment is the build's
    assert ran_warm(calls, runtime) and edited.returncode == 0, edited.stderr
    assert "with MAX_JOBS=1" in edited.stderr and len(compiled(last_log(small_demo))) == 1
    assert run_python("import minitorch; print(minitorch.checksum())", small_demo.parent) == "132876"

    wrong, wrong_cold = (command(small_demo, "--jobs", "none-such", TORCHBUILD_WARM=on) for on in ("1", "0"))
    assert wrong.returncode == wrong_cold.returncode != 0 and wrong.stderr == wrong_cold.stderr
    assert "none-such" in wrong.stderr and "Traceback" not in wrong.stderr


def test_the_socket_name_changes_with_the_code_and_with_what_a_process_keeps_from_its_start(tmp_path):
    """A warm process never serves a command that differs from the one that started it: the socket is named
    by the package's files, the interpreter's start-up environment and the process's limits."""
    copy = tmp_path / "pkg"
    shutil.copytree(REPO / "torchbuild", copy / "torchbuild",
                    ignore=shutil.ignore_patterns("__pycache__", "demo_project"))

    def key(*shell: str, **env: str) -> str:
        script = f"{' '.join(shell)} {sys.executable} -c 'from torchbuild import warm; print(warm.code_key())'"
        return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(copy), **env}).stdout.strip()

    first = key()
    assert key() == first  # the same command: the same process serves it
    module = copy / "torchbuild" / "builder" / "execute.py"
    module.write_text(module.read_text() + "\n")
    edited = key()
    assert edited != first
    assert key(PYTHONUTF8="1") != edited and key(LC_ALL="C") != edited
    assert key("ulimit -n 512;") != edited and key("nice -n 5") != edited


def test_the_socket_name_changes_with_the_namespaces_the_command_runs_in(tmp_path):
    """Issue 54: a fork keeps its parent's cgroup and namespaces, not the command's: they name the socket too."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-U", "true"]).returncode != 0:
        pytest.skip("no user namespaces here (unshare -U)")
    script = f"{sys.executable} -c 'from torchbuild import warm; print(warm.code_key())'"
    here = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    inside = subprocess.run(["unshare", "-U", "sh", "-c", script], capture_output=True, text=True, check=True).stdout
    assert here.strip() and inside.strip() and here != inside
