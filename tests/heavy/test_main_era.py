"""The heavy tier's scenarios of tests/integration/test_main_era.py's area, half a minute or more each (`nox -s heavy`,
and CI after README's test command): inv matrix makes main wheels that import in a fresh env; the loop strips what
scikit-build-core strips."""

from __future__ import annotations

import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from torchbuild.demo import make_upstream

from ..helpers import (
    REAL_HOME,
    build,
    edit,
    env_python,
    git,
    has_python,
    imported,
    inv,
    last_log,
    project,
)
from ..integration.test_debugfiles import debug_files_round_trip
from ..integration.test_sanitize import address_sanitizer_round_trip


@pytest.mark.slow
def test_inv_matrix_makes_main_wheels_that_import_in_a_fresh_env(tmp_path):
    """The matrix over PyTorch main's shape: the session's wheel comes from the backend (never setup.py's
    bdist_wheel, which the shim refuses), named by PYTORCH_BUILD_VERSION, and imports in a fresh env with
    what it requires."""
    if not has_python("3.12"):
        pytest.skip("needs pyenv's Python 3.12")
    up = make_upstream(tmp_path / "upstream", units=4, era="main")
    proj = project(tmp_path, f"source:\n  url: {up.url('pytorch')}\n  path: {tmp_path / 'co'}\n"
                             'matrix:\n  pythons: ["3.12"]\n  cudas: ["none"]\n'
                             f"paths:\n  cache_dir: {tmp_path / 'cache'}\nbuild:\n  min_free_gb: 1\n"
                             "  env:\n    PYTORCH_EXTRA_INSTALL_REQUIREMENTS: packaging>=20\n")
    env = {"HOME": str(REAL_HOME), "PIP_CACHE_DIR": str(REAL_HOME / ".cache" / "pip")}
    inv("clone", root=proj, env=env, check=True)
    planned = inv("matrix", "--dry-run", root=proj, env=env, check=True)
    assert "1 session(s) would run; nothing was run" in planned.stderr and not (proj / "dist").exists()
    done = inv("matrix", root=proj, env=env, check=True, timeout=900)
    (session,) = json.loads((proj / "dist/matrix-summary.json").read_text())["sessions"]
    wheel = Path(session["wheel"])
    assert session["result"] == "ok"
    assert re.match(r"minitorch-2\.15\.0a0\+git[0-9a-f]{7}\.cpu-cp312-cp312-linux_x86_64", wheel.name)
    assert "imports in a fresh env" in done.output and "the split build is not used" in done.output
    assert "minitorch/version.py" in zipfile.ZipFile(wheel).namelist()
    # a runtime requirement (tools/metadata's dependencies provider) is installed with the wheel, as pip would
    metadata = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/METADATA"))
    assert "Requires-Dist: packaging>=20" in zipfile.ZipFile(wheel).read(metadata).decode()
    assert "into the fresh env: packaging>=20" in done.output


@pytest.mark.slow
def test_debug_files_round_trip_in_the_scikit_build_core_era(main_demo):  # noqa: F811
    """Issue 57's --debug-files in the 2.14+ era: the unit's debug info in the env's libc10 (no --strip)."""
    debug_files_round_trip(main_demo)


@pytest.mark.slow
def test_address_sanitizer_round_trip_in_the_scikit_build_core_era(main_demo):  # noqa: F811
    """Issue 57's --sanitize address in the 2.14+ era (cmake/EnvVarForwarding.cmake forwards USE_ASAN)."""
    address_sanitizer_round_trip(main_demo)


@pytest.mark.slow
def test_the_loop_strips_what_scikit_build_core_strips(main_demo):  # noqa: F811
    """scikit-build-core strips a Release build's install unless SKBUILD_INSTALL_STRIP (or the pyproject) says
    not to. The loop's `cmake --install` follows the same setting as pip's build, so the env holds the same
    files either way; a change of the setting is a change of the build's inputs."""
    co = main_demo
    build(co, "--cuda", "none")
    lib = Path(imported(co)["binary"]).parent / "lib" / "libc10.so"
    assert not symbols(lib)  # pip's build stripped it
    edit(co / "c10/core/unit_01.cpp", "(n / 2)", "(n / 3)")
    loop = build(co, "--cuda", "none").stderr
    assert "stripping what it copies" in loop and not symbols(lib), loop
    # an edit that relinks libtorch_python (and _C) only: libc10 is neither copied nor stripped again
    python_lib, kept = lib.parent / "libtorch_python.so", lib.stat()
    edit(co / "minitorch/csrc/module.cpp", "static PyObject* checksum", "/* the loop */ static PyObject* checksum")
    assert "then strip:  what that install copies" in build(co, "--cuda", "none", "--dry-run").stdout
    assert "stripping what it copies" in build(co, "--cuda", "none").stderr
    stripped = [Path(p).name for p in re.findall(r"(?m)/strip (\S+)\)$", last_log(co))]  # the strip commands run
    assert "libtorch_python.so" in stripped and "libc10.so" not in stripped, stripped
    assert not symbols(python_lib) and (lib.stat().st_ino, lib.stat().st_mtime_ns) == (kept.st_ino, kept.st_mtime_ns)
    assert "up to date" in build(co, "--cuda", "none").stderr
    off = {"SKBUILD_INSTALL_STRIP": "false"}
    whole = build(co, "--cuda", "none", env=off).stderr
    assert "SKBUILD_INSTALL_STRIP" in whole and "cmake --install" not in whole and symbols(lib), whole
    edit(co / "c10/core/unit_01.cpp", "(n / 3)", "(n / 5)")
    assert "then strip:" not in build(co, "--cuda", "none", "--dry-run", env=off).stdout
    loop = build(co, "--cuda", "none", env=off).stderr
    assert "`cmake --install . --config Release --prefix" in loop and "--strip" not in loop and symbols(lib), loop
    assert "up to date" in build(co, "--cuda", "none", env=off).stderr


def symbols(lib: Path) -> bool:
    """Whether a library keeps its symbol table (`strip` removes it)."""
    return ".symtab" in subprocess.run(["readelf", "-S", "-W", str(lib)], capture_output=True, text=True,
                                       check=True).stdout


@pytest.mark.slow
def test_a_commit_drops_the_bytecode_of_what_the_install_rewrote_in_the_env(main_demo):  # noqa: F811
    """Issue 68 finding 2: after a commit, the loop left the env's cached bytecode of the installed version.py (CMake's
    install gives it a whole-second mtime, and the new one has the old one's size): `import` named the previous
    commit (2 runs of 10), and the next build said "up to date"."""
    co = main_demo
    build(co, "--cuda", "none")
    before = imported(co)  # Python caches the bytecode of every module it imports: the env's version.py too
    site = env_python().parent.parent
    cached = [p for p in site.rglob("minitorch/__pycache__/version.*.pyc")]
    assert cached, "the import left no bytecode of the env's version.py to go stale"
    edit(co / "c10/core/unit_01.cpp", "(n / 2)", "(n / 3)")
    git(co, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "an edit")
    loop = build(co, "--cuda", "none")
    assert "`cmake --install" in loop.stderr  # the loop, not pip
    assert not [p for p in cached if p.exists()]
    after = imported(co)
    assert after["version"] != before["version"] and git(co, "rev-parse", "--short=7", "HEAD") in after["version"]


@pytest.mark.slow
def test_a_wheel_after_debug_files_leaves_no_debug_library_called_up_to_date(main_demo):  # noqa: F811
    """Issue 68 finding 4: `--debug-files`, then `--wheel`, then a plain build: the env kept the `-O0 -g` library
    while the build said "up to date" and the record listed no debug unit."""
    co = main_demo
    build(co, "--cuda", "none")
    debugged = build(co, "--cuda", "none", "--debug-files", "c10/core/unit_01.cpp").stderr
    assert "verdict: shortcut" in debugged and "stripping" not in debugged, debugged  # installed unstripped, said so
    lib = Path(imported(co)["binary"]).parent / "lib" / "libc10.so"
    assert symbols(lib)  # the debug unit's library, unstripped, in the env
    build(co, "--cuda", "none", "--wheel", "--dist", str(co.parent / "dist"))
    after = build(co, "--cuda", "none")
    assert "up to date:" not in after.stderr, after.stderr
    assert not symbols(lib)  # the env holds the optimized, stripped library again
    assert "up to date:" in build(co, "--cuda", "none").stderr
