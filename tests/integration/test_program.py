"""The installed `torchbuild` command, from torchbuild's wheel in a fresh venv outside the repo, run in
folders that are not torchbuild's: a checkout with no torchbuild.yaml, and a project that has one."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ..helpers import REPO, inv, run_torchbuild

pytestmark = pytest.mark.slow


def test_build_takes_the_lean_path_and_reads_its_flags_as_invoke_does(tmp_path):
    """`torchbuild build` with long flags runs without importing Invoke (a tenth of a second before a no-op's
    check); what only Invoke's parser can answer still goes there, and both take the same flags."""
    import inspect

    from torchbuild import buildflags, tasks

    params = inspect.signature(tasks.build.body).parameters
    assert {k: p.default for k, p in params.items() if k != "c"} == buildflags.DEFAULTS
    assert set(tasks.build.help) == set(buildflags.HELP)
    assert buildflags.parse(["--cuda", "none", "--set", "A=1", "--set=B=2", "--debug", "--dry-run"]) == \
        {"cuda": "none", "set": ["A=1", "B=2"], "debug": True, "dry_run": True}
    for odd in (["-c", "none"], ["--help"], ["--bogus"], ["--cuda"], ["--cuda", "--debug"], ["--debug=1"]):
        assert buildflags.parse(odd) is None, odd

    entry = ("import sys; sys.argv = ['torchbuild', 'build', *sys.argv[1:]]; "
             "from torchbuild.program import main; main()")

    def command(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-X", "importtime", "-c", entry, *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)

    lean = command("--path", str(tmp_path / "nothing-here"), "--cuda", "none")
    assert lean.returncode != 0 and "| invoke" not in lean.stderr  # torchbuild's own answer, no Invoke
    assert "nothing-here" in lean.stderr and "Traceback" not in lean.stderr
    full = command("--bogus")
    assert full.returncode != 0 and "No idea what '--bogus' is!" in full.stderr and "| invoke" in full.stderr


def test_output_read_by_a_pipe_that_closes_early_ends_without_a_traceback(tmp_path):
    """(issue 31)"""
    for args in (["config"], ["--list"]):
        head = subprocess.Popen(["head", "-1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        done = run_torchbuild(*args, cwd=tmp_path, stdout=head.stdin.fileno())  # type: ignore[union-attr]
        head.stdin.close()  # type: ignore[union-attr]
        head.wait()
        assert done.returncode == 0 and "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, args


def test_list_shows_each_task_in_a_whole_sentence():
    """(issue 31)"""
    listed = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "--list"], capture_output=True,
                            text=True, check=True).stdout
    from invoke.util import helpline

    from torchbuild.tasks import namespace

    def walk(collection, prefix=""):  # type: ignore[no-untyped-def]
        for name, task in collection.tasks.items():
            yield prefix + name, task
        for name, sub in collection.collections.items():
            yield from walk(sub, f"{prefix}{name}.")

    for name, task in walk(namespace(None)):
        line = helpline(task)
        assert line and line.rstrip().endswith((".", ")")), f"{name}: {line!r} stops mid-sentence in --list"
        assert name in listed


def test_hints_name_the_command_the_user_ran(tmp_path):
    """(issue 31)"""
    installed = run_torchbuild("build", cwd=tmp_path)
    assert installed.returncode != 0 and "run `torchbuild clone` first" in installed.stderr
    assert "`inv " not in installed.stderr
    doctor = run_torchbuild("doctor", cwd=tmp_path)
    assert "torchbuild clone" in doctor.stdout + doctor.stderr and "inv clone" not in doctor.stdout + doctor.stderr
    repo = inv("build", "--path", str(tmp_path / "nothing"))
    assert "run `inv clone` first" in repo.stderr  # in torchbuild's repo, `inv` is the command
