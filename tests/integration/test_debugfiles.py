"""`--debug-files` (issue 57): named units of a configuration compiled again with -O0 -g by its own ninja, the
libraries relinked and installed, nothing configured; the next plain build puts them back optimized."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import small_demo  # noqa: F401
from ..helpers import UP_TO_DATE, build, checksum, imported, inv, last_log

UNIT = "c10/core/unit_01.cpp"


def debug_sources(library: Path) -> set[str]:
    """The source files the library's DWARF compile units name (readelf, as a user would check)."""
    out = subprocess.run(["readelf", "--debug-dump=info", str(library)], capture_output=True, text=True).stdout
    return {line.rsplit(": ", 1)[-1].strip() for line in out.splitlines()
            if "DW_AT_name" in line and line.rstrip().endswith((".cpp", ".c"))}


def libc10(checkout: Path) -> Path:
    """The libc10 beside the extension the import loads: the checkout's (setup.py era) or the env's
    (scikit-build-core)."""
    library = Path(imported(checkout)["binary"]).parent / "lib" / "libc10.so"
    assert library.is_file(), library
    return library


@pytest.mark.slow
def test_debug_files_compiles_named_units_with_debug_info_and_puts_them_back(small_demo):  # noqa: F811
    """The setup.py era here; the scikit-build-core era in the heavy tier (tests/heavy/test_main_era.py)."""
    debug_files_round_trip(small_demo)


def debug_files_round_trip(co: Path) -> None:
    build(co, "--cuda", "none")
    value, cache = checksum(co), co / "build" / "CMakeCache.txt"
    configured = cache.stat().st_mtime_ns
    assert not any(s.endswith("unit_01.cpp") for s in debug_sources(libc10(co)))

    planned = build(co, "--cuda", "none", "--debug-files", UNIT, "--dry-run").output
    assert "1 unit(s) compiled again with -O0 -g" in planned and "verdict: shortcut" in planned, planned
    done = build(co, "--cuda", "none", "--debug-files", UNIT)
    assert "1 compile step(s)" in done.stderr, done.stderr
    ran = re.findall(r"(?m)^\[\d+/\d+\] (?:Building|Linking) ", last_log(co))  # the unit and what holds it
    assert f"ninja would run {len(ran)} step(s), 1 of them compile step(s)" in planned and len(ran) > 2, planned
    assert f"debug info (--debug-files) in {UNIT}; break in them: gdb" in done.stderr
    assert f"break {UNIT}:" in done.stderr  # a line the object's line table maps
    assert f'"debug_files": [\n    "{UNIT}"' in inv("build", "--path", str(co), "--record", check=True).stdout
    assert cache.stat().st_mtime_ns == configured  # no configure
    names = debug_sources(libc10(co))
    assert any(s.endswith("unit_01.cpp") for s in names) and not any(s.endswith("unit_02.cpp") for s in names)
    assert checksum(co) == value  # importable at once, the same numbers
    again = build(co, "--cuda", "none", "--debug-files", UNIT)
    assert UP_TO_DATE in again.stderr and f"1 unit(s) carry debug info (--debug-files): {UNIT}" in again.stderr
    explained = build(co, "--cuda", "none", "--explain").stdout
    assert "1 unit(s) an earlier --debug-files built go back to CMake's flags" in explained

    back = build(co, "--cuda", "none")
    assert "go back to CMake's flags" in back.stderr and "1 compile step(s)" in back.stderr
    assert not any(s.endswith("unit_01.cpp") for s in debug_sources(libc10(co)))
    assert UP_TO_DATE in build(co, "--cuda", "none").stderr and checksum(co) == value


@pytest.mark.slow
def test_debug_files_refuses_what_it_cannot_do_with_one_line_and_changes_nothing(small_demo):  # noqa: F811
    co = small_demo
    build(co, "--cuda", "none")
    ninja = (co / "build" / "build.ninja").read_bytes()
    missing = build(co, "--cuda", "none", "--debug-files", "c10/core/unit_1.cpp", check=False)
    assert missing.returncode == 1 and "no unit of this configuration's tree compiles 'c10/core/unit_1.cpp'" \
        in missing.stderr and "closest: c10/core/unit_01.cpp" in missing.stderr, missing.stderr
    many = build(co, "--cuda", "none", "--debug-files", "c10/core/*.cpp", check=False,
                 env={"TORCHBUILD_BUILD_DEBUG_FILES_MAX": "2"})
    count = len(list((co / "c10/core").glob("*.cpp")))
    assert many.returncode == 1 and f"names {count} units, over build.debug_files_max (2)" in many.stderr
    debug = build(co, "--cuda", "none", "--debug", "--debug-files", UNIT, check=False)
    assert debug.returncode == 1 and "a debug build already" in debug.stderr
    assert (co / "build" / "build.ninja").read_bytes() == ninja and "Traceback" not in missing.output
    listed = co.parent / "units.txt"
    listed.write_text(f"# the units to debug\n{UNIT}\n")
    assert "1 unit(s) compiled again" in build(co, "--cuda", "none", "--debug-files", str(listed), "--dry-run").output
    assert inv("build", "--help", check=True).stdout.count("--debug-files") == 1


KILLED_AFTER_THE_REWRITE = """
import os, sys
from torchbuild.builder import debugfiles
rewrite = debugfiles.apply
def apply(checkout, changes):
    rewrite(checkout, changes)
    if changes:
        os._exit(137)  # kill -9 the instant build.ninja holds the rewrite, before anything else is written
debugfiles.apply = apply
sys.argv = ["torchbuild", "build", *sys.argv[1:]]
from torchbuild.program import main
main()
"""


@pytest.mark.slow
def test_a_kill_right_after_build_ninja_is_rewritten_leaves_a_record_the_next_build_undoes(small_demo):  # noqa: F811
    """Issue 68 finding 5: `kill -9` between build.ninja's rewrite and the record's write left the units `-O0 -g` in
    the Release tree for good, "up to date"."""
    co = small_demo
    build(co, "--cuda", "none")
    killed = subprocess.run([sys.executable, "-c", KILLED_AFTER_THE_REWRITE, "--path", str(co), "--cuda", "none",
                             "--debug-files", UNIT], capture_output=True, text=True,
                            env={**os.environ, "TORCHBUILD_WARM": "0"})
    assert killed.returncode == 137, killed.stderr
    assert "-O0 -g" in (co / "build" / "build.ninja").read_text()  # the rewrite is there, nothing after it
    after = build(co, "--cuda", "none")
    assert UP_TO_DATE not in after.stderr and "go back to CMake's flags" in after.stderr, after.stderr
    assert "-O0 -g" not in (co / "build" / "build.ninja").read_text()
    assert not any(s.endswith("unit_01.cpp") for s in debug_sources(libc10(co)))
    assert UP_TO_DATE in build(co, "--cuda", "none").stderr
