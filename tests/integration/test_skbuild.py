"""scikit-build-core projects (PyTorch 2.14 and main build this way): the build driver is read from the
checkout, the CMake tree is build/ (kept per configuration), the compiled outputs live in the env's
site-packages, and "up to date" means exactly those files, from this checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ..helpers import UP_TO_DATE, build, edit, env_python, git, run_python, sk_imported


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


def scm_says(checkout: Path) -> str:
    """What setuptools-scm, the backend's own library, computes for the checkout now."""
    return subprocess.run([str(env_python()), "-m", "setuptools_scm"], cwd=checkout, capture_output=True, text=True,
                          check=True).stdout.strip().splitlines()[-1]


def installed_version() -> str:
    return run_python("import importlib.metadata as m; print(m.version('skdemo'))", Path("/"))


@pytest.mark.slow
def test_a_setuptools_scm_version_is_the_backends_after_an_edit_or_a_commit_built_without_pip(skproject):
    """Item 9 and 15 of issue 58: the version setuptools-scm derives from git (a dirty tree's date, another
    commit's distance and hash) is what the install's metadata and the version file say after a build that
    skips pip, as pip's build would write them; a project whose CMake reads the version goes through pip."""
    pyproject = skproject / "pyproject.toml"
    edit(pyproject, "[tool.setuptools_scm]\n", '[tool.setuptools_scm]\nversion_file = "src/skdemo/_version.py"\n')
    with open(skproject / ".gitignore", "a") as ignore:
        ignore.write("/src/skdemo/_version.py\n")
    git(skproject, "commit", "-qam", "a version file")
    build(skproject, "--cuda", "none")
    first = installed_version()
    assert first == scm_says(skproject) and "+g" in first

    edit(skproject / "src/core/unit_01.cpp", "(n / 2)", "(n / 3)")  # a dirty tree: pip's version gets the date
    edited = build(skproject, "--cuda", "none")
    assert "verdict: shortcut" in edited.stderr and "the version is setuptools-scm's" in edited.stderr
    dirty = scm_says(skproject)
    assert dirty != first and installed_version() == dirty
    assert f"version = '{dirty}'" in (skproject / "src/skdemo/_version.py").read_text()

    git(skproject, "commit", "-qam", "a third of n")  # another commit: a new distance and hash
    committed = build(skproject, "--cuda", "none")
    assert "a build of another commit" in committed.stderr and "verdict: shortcut" in committed.stderr
    now = scm_says(skproject)
    assert now not in (first, dirty) and installed_version() == now
    assert f"version = '{now}'" in (skproject / "src/skdemo/_version.py").read_text()
    assert UP_TO_DATE in build(skproject, "--cuda", "none").stderr

    cmake = skproject / "CMakeLists.txt"  # the version compiled in: only a configure puts the new one there
    edit(cmake, "target_link_libraries(_core PRIVATE skcore)",
         'target_link_libraries(_core PRIVATE skcore)\ntarget_compile_definitions(_core PRIVATE '
         'V="${SKBUILD_PROJECT_VERSION_FULL}")')
    git(skproject, "commit", "-qam", "the version compiled in")
    build(skproject, "--cuda", "none")
    edit(skproject / "src/core/unit_02.cpp", "(n / 2)", "(n / 5)")
    again = build(skproject, "--cuda", "none")
    assert "the whole way through pip" in again.stderr and "reads SKBUILD_PROJECT_VERSION" in again.stderr
    assert installed_version() == scm_says(skproject)



@pytest.mark.slow
def test_an_unnormalized_setuptools_scm_version_is_restamped_as_pip_writes_it(skproject):
    """Issue 69 item 8: setuptools-scm with `normalize = false` says `2.0.0-Beta2.post1.dev1+g...`; the loop's
    re-stamp wrote that into METADATA, where pip writes `2.0.0b2.post1.dev1+g...`."""
    from packaging.version import Version

    edit(skproject / "pyproject.toml", "[tool.setuptools_scm]\n", "[tool.setuptools_scm]\nnormalize = false\n")
    git(skproject, "commit", "-qam", "versions as the tags say them")
    git(skproject, "tag", "v2.0.0-Beta2")
    build(skproject, "--cuda", "none")
    edit(skproject / "src/core/unit_01.cpp", "(n / 2)", "(n / 3)")
    git(skproject, "commit", "-qam", "a third of n")
    raw = scm_says(skproject)
    assert raw != str(Version(raw)), raw  # what setuptools-scm says is not what pip writes
    loop = build(skproject, "--cuda", "none")
    assert "verdict: shortcut" in loop.stderr and installed_version() == str(Version(raw))
    assert UP_TO_DATE in build(skproject, "--cuda", "none").stderr
