"""The warm process behind the installed `torchbuild build` (warm.py): the build runs in a fork of a process
that has the build path imported, with the command's terminal, folder and environment, and says, builds
and stops exactly as the command itself would."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from ..helpers import REPO, command, compiled, last_log, ran_warm, run_python, wait_for_socket

pytestmark = pytest.mark.slow


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
