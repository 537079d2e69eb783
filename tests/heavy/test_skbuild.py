"""The heavy tier's scenarios of tests/integration/test_skbuild.py's area, half a minute or more each (`nox -s heavy`,
and CI after README's test command): a scikit build core project builds in build and its no op runs nothing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ..helpers import UP_TO_DATE, build, edit, env_python, inv, sk_imported


@pytest.mark.slow
def test_a_scikit_build_core_project_builds_in_build_and_its_no_op_runs_nothing(skproject, tmp_path):
    doctor = inv("doctor", env={"TORCHBUILD_SOURCE_PATH": str(skproject)}, check=True)
    assert "build driver" in doctor.stdout and "scikit-build-core" in doctor.stdout
    planned = build(skproject, "--cuda", "none", "--dry-run")  # not PyTorch: none of PyTorch's words or variables
    assert not [w for w in ("USE_CUDA", "BUILD_TEST", "USE_NINJA", "USE_CCACHE", "PyTorch") if w in planned.output]
    first = build(skproject, "--cuda", "none")
    assert "setup.py" not in first.stderr and "pip and the backend" in first.stderr  # no setup.py phase
    assert "the build backend asks for setuptools-scm" in first.stderr  # as pip's isolated build would install
    assert (skproject / "build" / "CMakeCache.txt").is_file()  # the tree is kept, not a temporary folder
    checksum, where = sk_imported(skproject)
    site = str(env_python().parent.parent)
    assert where.startswith(site)  # the redirect install: the extension in the env, the .py from the checkout

    again = build(skproject, "--cuda", "none")
    assert UP_TO_DATE in again.stderr and "built in" not in again.stderr

    edit(skproject / "src/core/unit_01.cpp", "(n / 2)", "(n / 3)")
    edited = build(skproject, "--cuda", "none")
    assert UP_TO_DATE not in edited.stderr and "1 compile step(s)" in edited.stderr
    changed, _ = sk_imported(skproject)
    assert changed != checksum
    assert UP_TO_DATE in build(skproject, "--cuda", "none").stderr

    # another checkout of the project installed into the same env: this one is no longer "up to date"
    other = tmp_path / "co-other"
    shutil.copytree(skproject, other, symlinks=True, ignore=shutil.ignore_patterns("build", ".torchbuild"))
    build(other, "--cuda", "none")
    assert UP_TO_DATE not in build(skproject, "--cuda", "none").stderr
    assert sk_imported(skproject)[0] == changed and os.path.exists(sk_imported(skproject)[1])

    # a debug build replaces the env's install; back to release, its files come back into the env: nothing runs
    build(skproject, "--cuda", "none")
    mine = skproject / "build" / "cp312-mine"  # the user's own `pip install -e .` into the project's build-dir
    mine.mkdir()
    (mine / "CMakeCache.txt").write_text(f"CMAKE_HOME_DIRECTORY:INTERNAL={skproject.resolve()}\n")
    debug = build(skproject, "--cuda", "none", "--debug")
    assert "from the env" in debug.stderr and sk_imported(skproject)[0] == changed
    assert "left 1 tree(s) of the project's own builds where they are (build/cp312-mine)" in debug.stderr
    assert (mine / "CMakeCache.txt").is_file()  # never moved with a configuration's tree
    debug_lib = Path(sk_imported(skproject)[1]).read_bytes()
    back = build(skproject, "--cuda", "none")
    assert "restored the" in back.stderr and "in the env" in back.stderr and UP_TO_DATE in back.stderr
    assert (mine / "CMakeCache.txt").is_file()
    assert sk_imported(skproject)[0] == changed and Path(sk_imported(skproject)[1]).read_bytes() != debug_lib
    again = build(skproject, "--cuda", "none", "--debug")  # and the debug one, as its build left it
    assert UP_TO_DATE in again.stderr and Path(sk_imported(skproject)[1]).read_bytes() == debug_lib
