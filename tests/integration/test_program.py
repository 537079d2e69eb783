"""The installed `torchbuild` command, from torchbuild's wheel in a fresh venv outside the repo, run in
folders that are not torchbuild's: a checkout with no torchbuild.yaml, and a project that has one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchbuild.demo import make_upstream

from ..helpers import REPO, git, inv

pytestmark = pytest.mark.slow


MINOR = f"{sys.version_info[0]}.{sys.version_info[1]}"


def torchbuild(program: Path, *args: str, cwd: Path, check: bool = True, timeout: float = 600) -> str:
    done = subprocess.run([str(program), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    output = done.stdout + done.stderr
    assert (done.returncode == 0) == check, f"torchbuild {' '.join(args)} ({done.returncode}):\n{output}"
    return output


def test_torchbuild_lists_clones_and_builds_in_a_checkout_without_config(installed, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHBUILD_BUILD_MIN_FREE_GB", "1")
    listed = torchbuild(installed, "--list", cwd=tmp_path)
    for name in ("build", "clone", "matrix", "nightly", "patch.apply", "cuda.list"):
        assert f"  {name} " in listed
    up = make_upstream(tmp_path / "upstream", units=4)
    work = tmp_path / "work"
    work.mkdir()
    torchbuild(installed, "clone", "--url", up.url("pytorch"), "--path", "co", cwd=work)
    co = work / "co"
    assert (co / "setup.py").is_file() and not (work / "torchbuild.yaml").exists()

    deep = co / "minitorch" / "csrc"  # anywhere inside the checkout
    shown = torchbuild(installed, "config", cwd=deep)
    assert f"# project: {co}" in shown and "checkout without torchbuild.yaml" in shown
    out = torchbuild(installed, "build", "--cuda", "none", "--python", MINOR, cwd=deep)
    assert "built in" in out
    py = co / ".torchbuild" / "envs" / f"py{MINOR}" / "bin" / "python"
    done = subprocess.run([str(py), "-c", "import minitorch; print(minitorch.checksum())"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.stdout.strip() == "132875", done.stderr
    assert list((co / ".torchbuild" / "logs").rglob("*.log"))  # logs and envs stay in torchbuild's own folder
    assert git(co, "status", "--porcelain") == ""  # which git is told to ignore: the checkout looks untouched


def test_torchbuild_matrix_runs_the_packaged_sessions_for_a_project_with_config(installed, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHBUILD_BUILD_MIN_FREE_GB", "1")
    up = make_upstream(tmp_path / "upstream", units=4)
    project = tmp_path / "project"
    project.mkdir()
    (project / "torchbuild.yaml").write_text(
        f"source:\n  url: {up.url('pytorch')}\n  path: src\nmatrix:\n  pythons: ['{MINOR}']\n  cudas: [none]\n")
    torchbuild(installed, "clone", cwd=project)
    sub = project / "src" / "tools"
    out = torchbuild(installed, "matrix", cwd=sub, timeout=900)
    session = f"build-{MINOR}(cuda='none')"
    assert session in out and "ok" in out, out
    assert list((project / "dist" / f"build-{MINOR}-cuda-none").glob("minitorch-*.whl")), out
    (kept,) = json.loads((project / "dist" / "matrix-summary.json").read_text())["sessions"]
    assert kept["profile"].endswith(".profile.html") and Path(kept["profile"]).is_file()  # the session's timeline
    assert (project / ".nox").is_dir() and not (Path(installed).parent.parent / ".nox").exists()
    again = torchbuild(installed, "matrix", cwd=project)
    assert "up to date" in again


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


TORCHBUILD = [sys.executable, "-c", "import sys; from torchbuild.program import main; sys.argv[0] = 'torchbuild'; "
              "main()"]


def run_torchbuild(*args: str, cwd: Path, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TORCHBUILD, *args], cwd=cwd, stdout=stdout, stderr=subprocess.PIPE, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


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
