"""The heavy tier's scenarios of tests/integration/test_ownership.py's area, half a minute or more each (`nox -s
heavy`, and CI after README's test command): hostile or damaged records are never trusted; a source saved while it
compiles is compiled again; kept trees on another file system and a linked build folder; main era a copy a stripped
install a dirty submodule and an ignored source."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ..helpers import (
    UP_TO_DATE,
    build,
    checksum,
    compiled,
    edit,
    env_python,
    git,
    imported,
    inv,
    last_log,
    tmpfs,
)

PY = f"py{sys.version_info[0]}.{sys.version_info[1]}"


def files_of(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root`, by size and mtime (equal means untouched)."""
    out = {}
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts:
            st = path.stat()
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


def no_traceback(*done) -> None:
    for d in done:
        assert "Traceback" not in d.output, d.output


@pytest.mark.slow
def test_hostile_or_damaged_records_are_never_trusted(small_demo, tmp_path):  # noqa: F811
    co, trees = small_demo, small_demo / ".torchbuild" / "trees"
    build(co, "--cuda", "none")
    victim = co.parent / "victim"  # where `.torchbuild/trees/../../../victim` leads
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    outside = co.parent / "outside.txt"
    outside.write_text("mine")
    st = outside.stat()
    markers = [
        {"key": "../../../victim", "outputs": {}},
        {"key": f"{PY}-cpu-debug", "outputs": {"../outside.txt": [st.st_size, st.st_mtime_ns]}},
        {"key": f"{PY}-cpu-debug", "outputs": {}, "env_prefix": "/", "env_files": {
            str(outside).lstrip("/"): [st.st_size, st.st_mtime_ns], "../outside.txt": [st.st_size, st.st_mtime_ns]}},
        {"outputs": {}},  # no key: a KeyError on every switch, once
        {},
    ]
    for marker in markers:
        trees.mkdir(parents=True, exist_ok=True)
        os.replace(co / "build", trees / f"{PY}-cpu-release")  # ours waits as a kept tree
        (co / "build").mkdir()
        (co / "build" / ".torchbuild.json").write_text(json.dumps(marker))
        done = build(co, "--cuda", "none")
        no_traceback(done)
        assert "build/ was not made by torchbuild: moved it, untouched" in done.stderr, marker
        assert UP_TO_DATE in done.stderr  # its own tree came back, its files never left
    (co / "build" / ".torchbuild-step-memory.json").write_text('{"unit.o": null}')
    (co / "build" / ".torchbuild-step-seconds.json").write_text("[1, 2")
    no_traceback(build(co, "--cuda", "none", "--rerun"))
    record = sorted(Path(os.environ["TORCHBUILD_PATHS_LOGS"]).rglob("*.record.json"))[-1]
    record.write_text(record.read_text()[:40])  # truncated
    profile = inv("build", "--path", str(co), "--profile", check=False)
    assert profile.returncode != 0 and "is damaged" in profile.stderr
    no_traceback(profile)
    mine = co / "build" / "cp312-mine"  # the user's own `pip install -e .` into a project's default build-dir
    mine.mkdir()
    (mine / "CMakeCache.txt").write_text(f"CMAKE_HOME_DIRECTORY:INTERNAL={co.resolve()}\n")
    cleaned = inv("clean", "--path", str(co), "--all", check=True)
    no_traceback(cleaned)
    assert (mine / "CMakeCache.txt").is_file() and f"kept {mine}: torchbuild did not make it" in cleaned.stderr
    assert sorted(p.name for p in (co / "build").iterdir()) == ["cp312-mine"]  # the rest of its tree is gone
    assert (victim / "keep.txt").read_text() == "mine" and outside.read_text() == "mine"
    assert outside.stat().st_mtime_ns == st.st_mtime_ns
    foreign = sorted(p.name for p in trees.iterdir())
    assert len(foreign) == len(markers) and all(name.startswith("foreign-") for name in foreign)  # kept, not removed
    assert "minitorch/_C." in cleaned.stderr and "minitorch/lib/libc10.so" in cleaned.stderr  # every file it removed


@pytest.mark.slow
def test_a_source_saved_while_it_compiles_is_compiled_again(small_demo, tmp_path):  # noqa: F811
    co = small_demo
    build(co, "--cuda", "none")
    before = checksum(co)
    flag, source = tmp_path / "saved", co / "c10/core/unit_01.cpp"
    wrapper = tmp_path / "c++"  # the compiler, then the user's editor saving the unit it just read
    wrapper.write_text(f"""#!/bin/sh
/usr/bin/c++ "$@"; rc=$?
out=""; prev=""; for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
case " $* " in *" -E "*) ;; *" -c "*unit_01.cpp*)
  if [ ! -e {flag} ]; then touch {flag}; sed -i 's|(n / 2)|(n / 3)|' {source}; sleep 0.05; touch "$out"; fi ;; esac
exit $rc
""")  # the object is newer than the save, as when the compiler writes it after the editor saved
    wrapper.chmod(0o755)
    edit(source, "long unit_01", "/* first edit */ long unit_01")  # the unit compiles in this build
    raced = build(co, "--cuda", "none", "--set", f"CXX={wrapper}", "--rerun")
    assert flag.exists() and "changed while the build ran" in raced.stderr
    after = build(co, "--cuda", "none", "--set", f"CXX={wrapper}")
    assert UP_TO_DATE not in after.stderr and "the whole way: the last build of this configuration did not finish" \
        in after.stderr
    assert any("unit_01" in unit for unit in compiled(last_log(co)))
    assert checksum(co) != before
    assert UP_TO_DATE in build(co, "--cuda", "none", "--set", f"CXX={wrapper}").stderr
    edit(source, "(n / 3)", "(n / 2)")
    edit(source, "/* first edit */ long unit_01", "long unit_01")
    build(co, "--cuda", "none", "--set", f"CXX={wrapper}")
    assert checksum(co) == before  # what it compiled is what the source says


@pytest.mark.slow
def test_kept_trees_on_another_file_system_and_a_linked_build_folder(small_demo, tmp_path):  # noqa: F811
    co = small_demo
    with tmpfs(co / ".torchbuild" / "trees", "size=256m"):
        build(co, "--cuda", "none")
        no_traceback(build(co, "--cuda", "none", "--debug"))
        back = build(co, "--cuda", "none")
        no_traceback(back)
        assert f"restored the {PY}-cpu-release tree" in back.stderr and UP_TO_DATE in back.stderr
        inv("clean", "--path", str(co), "--all", check=True)
    with tmpfs(co / ".torchbuild" / "trees", "size=64k"):  # a full disk while the switch moves build/ there
        build(co, "--cuda", "none")
        full = build(co, "--cuda", "none", "--debug", check=False)
        assert full.returncode != 0 and "Traceback" not in full.output
        assert "No space left on device; nothing was changed" in full.stderr
        assert UP_TO_DATE in build(co, "--cuda", "none").stderr  # the release configuration, whole, in place
        inv("clean", "--path", str(co), "--all", check=True)
    disk2 = tmp_path / "disk2-build"
    disk2.mkdir()
    (co / "build").symlink_to(disk2)
    build(co, "--cuda", "none")
    cleaned = inv("clean", "--path", str(co), check=True)
    no_traceback(cleaned)
    assert (co / "build").is_symlink() and disk2.is_dir() and not any(disk2.iterdir())
    assert not list((co / "minitorch").glob("_C*.so"))


@pytest.mark.slow
def test_main_era_a_copy_a_stripped_install_a_dirty_submodule_and_an_ignored_source(main_demo, tmp_path):  # noqa: F811
    """One main-era checkout (scikit-build-core: the compiled outputs in the env) through four findings."""
    original = main_demo
    installed = env_python().parent.parent / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / \
        "site-packages" / "minitorch" / "lib" / "libc10.so"
    wrapper = tmp_path / "c++"  # links libc10.so, then gives it the installed copy's time, to the nanosecond
    wrapper.write_text(f"""#!/bin/sh
/usr/bin/c++ "$@"; rc=$?
out=""; prev=""; for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
case "$out" in *libc10.so) [ -e {installed} ] && touch -r {installed} "$out" ;; esac
exit $rc
""")
    wrapper.chmod(0o755)
    flags = ("--cuda", "none", "--set", f"CXX={wrapper}")
    first = build(original, *flags, env={"USE_CUDAA": "1"})  # from the shell: --set would be refused before
    assert "CMake did not use USE_CUDAA" in first.stderr  # every USE_* reaches CMake's cache; no code reads it
    first = build(original, *flags)  # and without it again: what follows builds from here

    # a copy (cp -a) switching configuration, its build then failing: the original's install is untouched
    site = env_python().parent.parent  # the one env both checkouts build into
    before, binary = files_of(site), imported(original)["binary"]
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(original), str(copy)], check=True)
    switched = build(copy, "--cuda", "none", "--debug", "--set", "CXX=/nonexistent/c++", check=False)
    assert switched.returncode != 0 and "Traceback" not in switched.output
    assert "`inv build --cuda none --debug --set CXX=/nonexistent/c++` again" in switched.stderr  # the same build
    assert not re.search(r"its \d+ (?:file\(s\) )?(?:from|in) the env", switched.stderr)  # nothing moved there
    no_traceback(inv("clean", "--path", str(copy), "--all", check=True))
    assert files_of(site) == before  # not one of the original's installed files moved, changed or deleted
    assert imported(original)["binary"] == binary
    assert UP_TO_DATE in build(original, *flags).stderr

    # nox run in the checkout (the user's own, or an earlier torchbuild's matrix) leaves its envs in .nox/ (untracked,
    # thousands of files): none of them is the configuration's, nor read by its build
    site = original / ".nox" / "build-3-12" / "lib" / "site-packages" / "pkg"
    site.mkdir(parents=True)
    for i in range(200):
        (site / f"mod{i}.py").write_text("x = 1\n")
    assert ".nox/" in git(original, "status", "--porcelain")
    assert UP_TO_DATE in build(original, *flags).stderr

    # the loop's `cmake --install` calling a library remade within its second "Up-to-date"
    co = original
    checksum = imported(co)["checksum"]
    edit(co / "c10/core/unit_01.cpp", "(n / 2)", "(n / 3)")
    loop = build(co, *flags)
    assert "only files ninja builds from changed" in loop.stderr  # the loop: cmake --build, cmake --install, strip
    assert imported(co)["checksum"] != checksum  # the new library, not the one the install called up to date
    assert "installed again" in loop.stderr

    # a new source in a submodule git status is told to ignore, which a glob reads
    git(co, "config", "submodule.third_party/fbgemm.ignore", "dirty")  # as PyTorch marks several
    (co / "third_party/fbgemm/src/extra.cpp").write_text("int fbgemm_extra() { return 42; }\n")
    assert "fbgemm" not in git(co, "status", "--porcelain")  # git says nothing changed there
    done = build(co, *flags)
    assert UP_TO_DATE not in done.stderr
    assert any("extra.cpp" in unit for unit in compiled(last_log(co)))

    # a new source git ignores, in a folder the c10 glob reads
    with open(co / ".git" / "info" / "exclude", "a") as exclude:
        exclude.write("/c10/core/unit_mine.cpp\n")
    (co / "c10/core/unit_mine.cpp").write_text("int unit_mine() { return 7; }\n")
    assert "unit_mine" not in git(co, "status", "--porcelain")
    mine = build(co, *flags)
    assert "the whole way: a source file was added to or removed from c10/core" in mine.stderr
    assert any("unit_mine.cpp" in unit for unit in compiled(last_log(co)))
