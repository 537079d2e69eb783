"""The heavy tier's scenarios of tests/integration/test_explain.py's area, half a minute or more each (`nox -s heavy`,
and CI after README's test command): explain names the cause counts the steps and builds nothing; the profile says
why the compiler cache missed; a miss names the path outside ccache basedir that keeps a tree from hitting."""

from __future__ import annotations

import re

import pytest

from ..helpers import build, edit, objects


def test_explain_names_the_cause_counts_the_steps_and_builds_nothing(small_demo):  # noqa: F811
    co = small_demo
    build(co, "--cuda", "none")
    assert "ninja has no work in the tree" in build(co, "--cuda", "none", "--explain").stdout
    (co / "c10/include/c10/core.h").write_text((co / "c10/include/c10/core.h").read_text() + "// every unit\n")
    edit(co / "c10/core/unit_01.cpp", "(n / 2)", "(n / 4)")
    before = objects(co)
    said = build(co, "--cuda", "none", "--explain").stdout
    assert objects(co) == before  # nothing compiled, nothing touched
    header = re.search(r"c10/include/c10/core\.h: (\d+) step\(s\) \(a header", said)
    total = re.search(r"ninja would run (\d+) step\(s\)", said)
    assert header and total and int(header.group(1)) >= 4, said  # 3 other units and checksum.cpp include it
    assert "c10/core/unit_01.cpp: 1 step(s) (a source file)" in said  # edited last: its newest input
    assert re.search(r"estimate: \d+ step\(s\) \(\d+ C\+\+(, \d+ link)?\), [\d.]+s of compile and link work, "
                     r"about [\d.]+s at MAX_JOBS=\d", said), said  # counted by kind, each priced at its kind's
    assert re.search(r"plus [\d.]+s around the compile \(the build driver, install, packaging: the median of the "
                     r"earlier builds that went the same way\): about [\d.]+s$", said.strip()), said  # the first's
    done = build(co, "--cuda", "none")
    compiles = int(re.search(r"(\d+) compile step\(s\)", done.stderr).group(1))
    assert compiles == int(header.group(1)) + 1  # what ninja said it would compile, it compiled
    yaml = co / "aten/src/ATen/native/native_functions.yaml"  # the codegen input, as native_functions.yaml is
    yaml.write_text(yaml.read_text() + "- func: unit_new(int n) -> int\n")
    said = build(co, "--cuda", "none", "--explain").stdout
    assert "aten/src/ATen/native/native_functions.yaml: 1 step(s) (a codegen input: the headers generated" in said
    assert int(re.search(r"ninja would run (\d+) step\(s\)", said).group(1)) >= 5  # it, then the 4 units
    generated = build(co, "--cuda", "none")
    assert "4 compile step(s)" in generated.stderr  # every unit including the generated header, nothing else
    cmake = co / "CMakeLists.txt"  # CMake runs again first: ninja -n stops there, the steps behind it still count
    cmake.write_text(cmake.read_text() + "# a comment\n")
    edit(co / "c10/core/unit_01.cpp", "(n / 4)", "(n / 5)")
    said = build(co, "--cuda", "none", "--explain").stdout
    assert "CMake configures again first" in said and "c10/core/unit_01.cpp: 1 step(s) (a source file)" in said, said
    assert re.search(r"plus [\d.]+s of CMake configure \(the median of (the earlier builds'|this (checkout|machine)'s "
                     r"builds that configure a CPU tree again)\)", said), said
    fresh = build(co, "--cuda", "none", "--debug", "--explain").stdout
    assert "no tree of py" in fresh and "-cpu-debug yet: a build from nothing" in fresh
    assert not (co / ".torchbuild" / "trees").exists() or not any((co / ".torchbuild" / "trees").glob("*debug*"))


def test_the_profile_says_why_the_compiler_cache_missed(small_demo):  # noqa: F811
    co = small_demo
    build(co, "--cuda", "none")
    flag = "CXXFLAGS=-fno-omit-frame-pointer"  # a code-generation flag: an unused -D would hit the cache
    flagged = build(co, "--cuda", "none", "--set", flag)
    assert "why the compiler cache missed:" in flagged.stderr and "flag or define changed: " \
        "+-fno-omit-frame-pointer" in flagged.stderr, flagged.stderr
    header = co / "c10/include/c10/core.h"  # code, not a comment (that preprocesses away: a hit)
    header.write_text(header.read_text() + "namespace c10 { inline long why_missed() { return 2; } }\n")
    build(co, "--cuda", "none", "--set", flag)
    shown = build(co, "--profile").stdout
    assert "miss(es): the same command: the source or a header it includes changed" in shown, shown


def test_a_miss_names_the_path_outside_ccache_basedir_that_keeps_a_tree_from_hitting(small_demo, tmp_path,  # noqa: F811
                                                                                      monkeypatch):
    """A second Python's tree: its core hits the first tree's entries; the bindings' compile names that Python's
    headers, outside the checkout (CCACHE_BASEDIR), which ccache hashes as they are, and says so."""
    from ..helpers import has_python

    if not has_python("3.12"):
        pytest.skip("needs pyenv's Python 3.12 beside this one")
    monkeypatch.setenv("TORCHBUILD_PATHS_CACHE_DIR", str(tmp_path / "cache"))  # no other test's 3.12 bindings in it
    co = small_demo
    build(co, "--cuda", "none")
    other = build(co, "--cuda", "none", "--python", "3.12").stderr
    reason = re.search(r"(\d+) miss\(es\): not compiled in this tree before; its command names (\S+), outside "
                       r"CCACHE_BASEDIR", other)
    assert reason and "3.12" in reason.group(2) and not reason.group(2).startswith(str(co)), other
