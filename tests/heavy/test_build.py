"""The heavy tier's scenarios of tests/integration/test_build.py's area, half a minute or more each (`nox -s heavy`,
and CI after README's test command): switching python imports each pythons own bindings; every variable that reaches
the build takes effect; a corrupt compiler cache costs hits not a wrong build."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ..helpers import (
    REAL_HOME,
    build,
    edit,
    file_digest,
    in_checkout,
    last_log,
    run_python,
)


@pytest.mark.slow
def test_switching_python_imports_each_pythons_own_bindings(small_demo, tmp_path, monkeypatch):
    """libtorch_python.so has one name for every Python: switching Python moves it with its tree, so each
    Python's env imports bindings built for it, and the switch back builds nothing."""
    other = next((v for v in ("3.12", "3.10", "3.13") if v != f"{sys.version_info[0]}.{sys.version_info[1]}"
                  and list((REAL_HOME / ".pyenv/versions").glob(f"{v}.*/bin/python3"))), None)
    if other is None:
        pytest.skip("needs a second pyenv Python (3.12, 3.10 or 3.13)")
    monkeypatch.setenv("PIP_CACHE_DIR", str(REAL_HOME / ".cache/pip"))
    monkeypatch.setenv("HOME", str(REAL_HOME))  # pyenv's Pythons are found under the real home
    demo = small_demo
    bindings = demo / "minitorch/lib/libtorch_python.so"
    build(demo, "--cuda", "none")
    mine = file_digest(bindings)
    build(demo, "--cuda", "none", "--python", other)
    theirs = file_digest(bindings)
    assert theirs != mine and not list((demo / "minitorch").glob("_C.cpython-3%d*.so" % sys.version_info[1]))
    envs = Path(os.environ["TORCHBUILD_PATHS_ENVS"])
    code = "import minitorch, sys; print(sys.version_info[:2], minitorch.checksum())"
    out = subprocess.run([str(envs / f"py{other}" / "bin/python"), "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip().endswith("132875") and other.split(".")[1] in out.split(")")[0]
    back = build(demo, "--cuda", "none")
    assert "up to date" in back.stderr and file_digest(bindings) == mine
    assert run_python("import minitorch; print(minitorch.checksum())", tmp_path) == "132875"


def test_every_variable_that_reaches_the_build_takes_effect(small_demo):
    """The shell's CXXFLAGS and USE_* reconfigure, both ways; --set PYTORCH_BUILD_VERSION (with its number)
    rebuilds and lands in version.py; CMAKE_FRESH is done by torchbuild; cache.tool none turns USE_CCACHE off."""
    build(small_demo, "--cuda", "none")
    cache = small_demo / "build/CMakeCache.txt"
    flags = build(small_demo, "--cuda", "none", env={"CXXFLAGS": "-DDEMO_FLAG=1"})
    assert "reconfiguring: CXXFLAGS: (unset) -> -DDEMO_FLAG=1" in flags.stderr
    assert "DEMO_FLAG" in cache.read_text()
    dropped = build(small_demo, "--cuda", "none")
    assert "reconfiguring: CXXFLAGS: -DDEMO_FLAG=1 -> (unset)" in dropped.stderr
    assert "DEMO_FLAG" not in cache.read_text()
    use = build(small_demo, "--cuda", "none", env={"USE_DEMO_OPTION": "1"})
    assert "reconfiguring: USE_DEMO_OPTION: (unset) -> 1" in use.stderr
    assert "USE_DEMO_OPTION:UNINITIALIZED=1" in cache.read_text()
    versioned = build(small_demo, "--cuda", "none", "--set", "PYTORCH_BUILD_VERSION=3.0.0",
                      "--set", "PYTORCH_BUILD_NUMBER=2", env={"USE_DEMO_OPTION": "1"})
    assert "up to date" not in versioned.stderr and in_checkout(small_demo)["version"] == "3.0.0.post2"
    fresh = build(small_demo, "--cuda", "none", env={"USE_DEMO_OPTION": "1", "CMAKE_FRESH": "1"})
    assert "CMAKE_FRESH=1: a fresh CMake configure" in fresh.stderr and "up to date" not in fresh.stderr
    assert "-- Configuring done" in last_log(small_demo)
    assert re.search(r"CMAKE_CXX_COMPILER_LAUNCHER:\w+=\S*ccache", cache.read_text())
    off = build(small_demo, "--cuda", "none", env={"USE_DEMO_OPTION": "1", "TORCHBUILD_CACHE_TOOL": "none"})
    assert "reconfiguring" in off.stderr and re.search(r"USE_CCACHE:\w+=OFF", cache.read_text())
    assert not re.search(r"CMAKE_CXX_COMPILER_LAUNCHER:\w+=\S*ccache", cache.read_text())


def test_a_provisioned_ccache_left_empty_by_a_crash_is_provisioned_again_not_trusted(small_demo, tmp_path,
                                                                                    monkeypatch):
    """Issue 68 finding 3: a provisioned ccache that is an empty file (what a crash soon after provisioning left: it
    was written and renamed without fsync) gave "built", exit 0, with the old objects kept."""
    monkeypatch.setenv("TORCHBUILD_PATHS_CACHE_DIR", str(tmp_path / "cache"))  # a cache dir of its own
    build(small_demo, "--cuda", "none")
    binary = tmp_path / "cache" / "tools" / "ccache" / "ccache"
    assert binary.stat().st_size > 100_000 and (binary.parent / "SHA256").is_file()
    binary.unlink()  # never written through: another test's may be a link to the same file
    binary.write_bytes(b"")
    binary.chmod(0o755)
    edit(small_demo / "c10" / "core" / "unit_00.cpp", "{ return work", "{ return 1000 + work")
    done = build(small_demo, "--cuda", "none")
    assert "is not its wheel's or does not run (a crash while it was written?): provisioned again" in done.stderr
    assert binary.stat().st_size > 100_000
    assert run_python("import minitorch; print(minitorch.checksum())", small_demo.parent) == str(132875 + 1000)


def test_a_corrupt_compiler_cache_costs_hits_not_a_wrong_build(small_demo, tmp_path, monkeypatch):
    """Every entry of the compiler cache overwritten with garbage: the next build from nothing compiles
    (ccache takes a bad entry as a miss) and imports the right result."""
    monkeypatch.setenv("TORCHBUILD_PATHS_CACHE_DIR", str(tmp_path / "cache"))  # a cache of its own to spoil
    demo = small_demo
    build(demo, "--cuda", "none")
    entries = [p for p in (tmp_path / "cache" / "ccache").rglob("*") if p.is_file() and p.stat().st_size > 64]
    assert entries
    for entry in entries:
        entry.write_bytes(os.urandom(entry.stat().st_size))
    done = build(demo, "--cuda", "none", "--clean")
    assert "cpu-release built in" in done.stderr
    assert run_python("import minitorch; print(minitorch.checksum())", demo.parent) == "132875"  # 4 units
