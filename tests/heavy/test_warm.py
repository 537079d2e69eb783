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

from ..helpers import compilers_in, wait_for

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


def _states(pids: list[int]) -> set[str]:
    found = set()
    for pid in pids:
        try:
            found.add((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue
    return found


def test_ctrl_z_stops_the_warm_build_a_changed_dependency_is_never_served_and_warm_stop_ends_it(
        small_demo, warm, tmp_path, monkeypatch):  # noqa: F811
    """Issue 54: Ctrl-Z left the warm build's compilers running; an upgraded dependency (PyYAML edited) was
    served by the process that had imported the old one; `torchbuild warm --status/--stop` say and end it."""
    runtime, calls = warm
    deps = tmp_path / "deps"  # a dependency the build imports, where the test can change it
    shutil.copytree(Path(__import__("yaml").__file__).parent, deps / "yaml")
    monkeypatch.setenv("PYTHONPATH", str(deps))
    monkeypatch.setenv("TORCHBUILD_PATHS_CACHE_DIR", str(small_demo.parent / "cold-cache"))  # really compile
    assert command(small_demo).returncode == 0
    wait_for_socket(runtime)
    status = subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['torchbuild', 'warm']; "
                             "from torchbuild.program import main; main()"], capture_output=True, text=True)
    assert re.search(r"warm pid \d+: up [\d.]+ min, 0 build\(s\) served", status.stdout), status

    proc = subprocess.Popen([sys.executable, "-c", ENTRY, "--path", str(small_demo), "--cuda", "none", "--jobs", "2",
                             "--set", "CXXFLAGS=-DTB_WARM_Z=1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    logs = Path(os.environ["TORCHBUILD_PATHS_LOGS"])
    before, deadline = set(logs.rglob("*.log")), time.monotonic() + 120
    while not any(re.search(r"\[\d+/\d+\] Building CXX object \S+unit_", p.read_text())
                  for p in set(logs.rglob("*.log")) - before) and time.monotonic() < deadline:
        assert proc.poll() is None, "the build ended before it could be stopped"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTSTP)  # Ctrl-Z: the terminal's foreground group is the command
    deadline = time.monotonic() + 10
    while _states(compilers_in(small_demo)) - {"T", "t"} and time.monotonic() < deadline:
        time.sleep(0.1)
    stopped = compilers_in(small_demo)
    assert stopped and _states(stopped) <= {"T", "t"}, (stopped, _states(stopped))  # all stopped
    proc.send_signal(signal.SIGCONT)  # fg
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "cpu-release built in" in err, err
    assert ran_warm(calls, runtime)

    (deps / "yaml" / "__init__.py").write_text((deps / "yaml" / "__init__.py").read_text() + "\n# upgraded\n")
    after = command(small_demo)
    assert after.returncode == 0 and not ran_warm(calls, runtime)  # the old process did not serve it
    wait_for_socket(runtime)
    stopped = subprocess.run([sys.executable, "-c", "import sys; sys.argv = ['torchbuild', 'warm', '--stop']; "
                              "from torchbuild.program import main; main()"], capture_output=True, text=True)
    assert "stopped pid" in stopped.stdout, stopped
    deadline = time.monotonic() + 10
    while list(runtime.glob("torchbuild-*/warm-*.sock")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not list(runtime.glob("torchbuild-*/warm-*.sock"))


def test_ctrl_c_or_a_killed_command_stops_the_warm_build_and_its_compilers(small_demo, warm, monkeypatch):  # noqa: F811
    runtime, calls = warm
    monkeypatch.setenv("TORCHBUILD_PATHS_CACHE_DIR", str(small_demo.parent / "cold-cache"))  # really compile
    assert command(small_demo).returncode == 0
    wait_for_socket(runtime)
    logs = Path(os.environ["TORCHBUILD_PATHS_LOGS"])
    for flag, stop in (("-DTB_WARM_A=1", signal.SIGINT), ("-DTB_WARM_B=1", signal.SIGKILL)):
        proc = subprocess.Popen([sys.executable, "-c", ENTRY, "--path", str(small_demo), "--cuda", "none",
                                 "--jobs", "2", "--set", f"CXXFLAGS={flag}"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        wait_for(logs, r"\[\d+/\d+\] Building CXX", proc)
        time.sleep(0.5)
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=60)
        if stop == signal.SIGINT:
            assert proc.returncode == 130 and "interrupted" in err, err
        assert ran_warm(calls, runtime)
        deadline = time.monotonic() + 10
        while compilers_in(small_demo) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert compilers_in(small_demo) == []  # the command killed: its warm build stopped as on Ctrl-C
