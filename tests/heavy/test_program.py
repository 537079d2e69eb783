"""The heavy tier's scenarios of tests/integration/test_program.py's area, half a minute or more each (`nox -s heavy`,
and CI after README's test command): torchbuild lists clones and builds in a checkout without config; torchbuild
matrix runs the packaged sessions for a project with config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchbuild.demo import make_upstream

from ..helpers import git

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
