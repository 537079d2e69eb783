"""The edit-compile loop's shortcut: setup.py's own `cmake --build . --target install`, without pip, only
where it gives what the whole build gives."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..helpers import SHORTCUT, build, checksum, edit, git, last_log, run_python


def test_an_edited_unit_rebuilds_without_pip_and_imports_what_the_whole_build_makes(small_demo):  # noqa: F811
    build(small_demo, "--cuda", "none")
    first = checksum(small_demo)
    edit(small_demo / "c10/core/unit_01.cpp", "(n / 2)", "(n / 3)")
    done = build(small_demo, "--cuda", "none")
    assert SHORTCUT in done.stderr and "1 compile step(s)" in done.stderr
    log = last_log(small_demo)
    assert "--target install" in log.splitlines()[0] and "-m pip" not in log and "build_ext" not in log
    kept = json.loads(sorted(Path(os.environ["TORCHBUILD_PATHS_LOGS"]).rglob("*.record.json"),
                             key=lambda p: p.stat().st_mtime)[-1].read_text())
    assert kept["command"][1:3] == ["--build", "."] and kept["command_dir"] == "build"  # what ran, on record
    quick = checksum(small_demo)
    assert quick != first
    edit(small_demo / "minitorch/csrc/module.cpp", "static PyObject* checksum", "/* the loop */ static PyObject* "
         "checksum")  # the bindings, built by CMake into libtorch_python as PyTorch's are
    (small_demo / "minitorch/__init__.py").write_text((small_demo / "minitorch/__init__.py").read_text() + "\nX = 1\n")
    assert SHORTCUT in build(small_demo, "--cuda", "none").stderr
    assert run_python("import minitorch; print(minitorch.X, minitorch.checksum())", small_demo.parent) == f"1 {quick}"
    assert "up to date" in build(small_demo, "--cuda", "none").stderr
    whole = build(small_demo, "--cuda", "none", "--clean")  # from nothing (the compiler cache): the same library
    assert SHORTCUT not in whole.stderr and checksum(small_demo) == quick


def test_a_switch_back_at_another_commit_gives_pip_this_configurations_version(small_demo):
    """Issue 58, item 1: every configuration of one Python shares the editable install's dist-info; a build of
    another configuration at another commit left its version there, and switching back said "up to date" while
    `pip list` and importlib.metadata named the other's commit."""
    co = small_demo
    versions = "import importlib.metadata as m, minitorch as t; print(m.version('minitorch'), t.__version__)"
    build(co, "--cuda", "none")
    build(co, "--cuda", "none", "--debug")
    (co / "c10/core/unit_01.cpp").write_text((co / "c10/core/unit_01.cpp").read_text() + "// the next commit\n")
    git(co, "commit", "-qam", "the next commit")
    build(co, "--cuda", "none", "--debug")
    metadata, package = run_python(versions, co.parent).split()
    assert metadata == package and package.endswith(git(co, "rev-parse", "--short=7", "HEAD"))
    git(co, "checkout", "-q", "HEAD~1")
    back = build(co, "--cuda", "none")
    assert "the version of another configuration's build: the build re-stamps it" in back.stderr
    metadata, package = run_python(versions, co.parent).split()
    assert metadata == package and package.endswith(git(co, "rev-parse", "--short=7", "HEAD"))
    again = build(co, "--cuda", "none")
    assert "up to date" in again.stderr and "re-stamps" not in again.stderr
