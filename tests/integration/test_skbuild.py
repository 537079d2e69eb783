"""scikit-build-core projects (PyTorch 2.14 and main build this way): the build driver is read from the
checkout, the CMake tree is build/ (kept per configuration), the compiled outputs live in the env's
site-packages, and "up to date" means exactly those files, from this checkout."""

from __future__ import annotations

import pytest

from ..helpers import UP_TO_DATE, build, edit, sk_imported


@pytest.mark.slow
def test_a_configure_depends_glob_hides_no_change_behind_its_check(skproject):
    """PyTorch main's CMake globs with CONFIGURE_DEPENDS (torch_cuda): `ninja -n` stops at the glob check it
    runs on every build, so an edit no git status shows (a header the user's .git/info/exclude hides) must
    still be seen behind it, by the no-op check and by --explain."""
    cmake, module = skproject / "CMakeLists.txt", skproject / "src/module.cpp"
    text = cmake.read_text()
    listed = text.split("add_library(skcore STATIC ", 1)[1].split(")", 1)[0]
    cmake.write_text(text.replace(f"add_library(skcore STATIC {listed})", "file(GLOB skunits CONFIGURE_DEPENDS "
                                  "src/core/*.cpp)\nadd_library(skcore STATIC ${skunits})"))
    edit(module, '#include "c10/core.h"', '#include "c10/core.h"\n#include "c10/local.h"')
    edit(module, "return PyLong_FromLong(", "return PyLong_FromLong(LOCAL_OFFSET + ")
    local = skproject / "include/c10/local.h"
    local.write_text("#define LOCAL_OFFSET 0\n")
    with open(skproject / ".git/info/exclude", "a") as exclude:
        exclude.write("/include/c10/local.h\n")
    build(skproject, "--cuda", "none")
    before = int(sk_imported(skproject)[0])
    assert UP_TO_DATE in build(skproject, "--cuda", "none").stderr  # the glob check alone is no work
    local.write_text("#define LOCAL_OFFSET 1000\n")
    explained = build(skproject, "--cuda", "none", "--explain").output
    assert "include/c10/local.h: 1 step(s)" in explained, explained
    rebuilt = build(skproject, "--cuda", "none")
    assert UP_TO_DATE not in rebuilt.stderr and int(sk_imported(skproject)[0]) == before + 1000
