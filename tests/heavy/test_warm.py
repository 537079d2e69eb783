"""The heavy tier's scenarios of tests/integration/test_warm.py's area, half a minute or more each (`nox -s heavy`, and
CI after README's test command): ctrl z stops the warm build a changed dependency is never served and warm stop ends
it; ctrl c or a killed command stops the warm build and its compilers."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..helpers import ENTRY, command, compilers_in, ran_warm, sigint_default, wait_for, wait_for_socket

pytestmark = pytest.mark.slow


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
                                stderr=subprocess.PIPE, text=True, preexec_fn=sigint_default)
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
