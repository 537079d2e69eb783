"""One verdict: `--explain`, `--dry-run` and the build say the same way and the same compile steps for every kind of
change, and freshness comes from content recorded at build time where a clock or git's filters would lie."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from torchbuild.builder.ownership.cmaketrees import tree_ninja

from ..helpers import build, compiled, edit, env_python, git, last_log

UP_TO_DATE = "up to date:"


def test_an_edit_only_setup_py_builds_from_is_never_served_stale(small_demo, monkeypatch):  # noqa: F811
    """(issue 29)"""
    monkeypatch.setenv("TORCHBUILD_BUILD_SHORTCUT", "false")  # it predates the shortcut: both ways must see it
    build(small_demo, "--cuda", "none")
    edit(small_demo / "minitorch/csrc/stub.c", "{ return initModule(); }",
         "{ PyObject* m = initModule(); if (m) PyModule_AddIntConstant(m, \"STUB_EDIT\", 7); return m; }")
    done = build(small_demo, "--cuda", "none")
    assert UP_TO_DATE not in done.stderr
    assert "minitorch/csrc/stub.c changed and ninja does not build from it" in done.stderr
    probe = "import minitorch._C as c; print(c.STUB_EDIT)"
    assert subprocess.run([str(env_python()), "-c", probe], cwd=small_demo.parent, capture_output=True,
                          text=True).stdout.strip() == "7"
    assert UP_TO_DATE in build(small_demo, "--cuda", "none").stderr  # built: that edit is the tree's now
    helper = next((small_demo / "tools").rglob("*.py"))
    helper.write_text(helper.read_text() + "\n# a change setup.py runs\n")
    done = build(small_demo, "--cuda", "none")
    assert UP_TO_DATE not in done.stderr and f"{helper.relative_to(small_demo)} changed" in done.stderr
    monkeypatch.delenv("TORCHBUILD_BUILD_SHORTCUT")
    (small_demo / "minitorch/csrc/new_helper.c").write_text("int helper(void) { return 1; }\n")
    assert UP_TO_DATE not in build(small_demo, "--cuda", "none").stderr  # a new file: not proven, the whole way


VERDICT = re.compile(r"verdict: (up to date|switch|shortcut|in place|the whole way)\b")


COMPILES = re.compile(r"ninja would run \d+ step\(s\), (\d+) of them compile step\(s\)")


def way(text: str) -> str:
    found = VERDICT.findall(text)
    assert found, text
    return found[-1]


def three_ways(co: Path, *args: str) -> tuple[tuple[str, str, str], tuple[int | None, int | None, int]]:
    """`--explain`, `--dry-run`, then the build: the way each says, and the compile steps the first two promise
    and the build's log shows."""
    explained = build(co, "--cuda", "none", *args, "--explain").stdout
    dry = build(co, "--cuda", "none", *args, "--dry-run").stdout
    logs = len(list(Path(os.environ["TORCHBUILD_PATHS_LOGS"]).rglob("*.log")))
    done = build(co, "--cuda", "none", *args).stderr
    ran = len(list(Path(os.environ["TORCHBUILD_PATHS_LOGS"]).rglob("*.log"))) > logs
    built = "switch" if "restored the" in done else way(done)
    promised = [int(m.group(1)) if (m := COMPILES.search(t)) else None for t in (explained, dry)]
    return (way(explained), way(dry), built), (*promised, len(compiled(last_log(co))) if ran else 0)


def commit(co: Path, message: str) -> None:
    git(co, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", message)


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


CHANGES = [  # (what changes, how, the way the build must take)
    ("nothing", lambda co: None, "up to date"),
    ("ninja run by hand: version.py written again, its content the same", lambda co: ninja_by_hand(co),
     "up to date"),
    ("a .cpp", lambda co: edit(co / "c10/core/unit_01.cpp", "(n / 2)", "(n / 3)"), "shortcut"),
    ("a header", lambda co: append(co / "c10/include/c10/core.h", "// every unit\n"), "shortcut"),
    ("a codegen input", lambda co: append(co / "aten/src/ATen/native/native_functions.yaml",
                                          "- func: unit_new(int n) -> int\n"), "shortcut"),
    ("a Python-only edit", lambda co: append(co / "minitorch/__init__.py", "\n# a comment\n"), "up to date"),
    ("a commit crossing", lambda co: (edit(co / "c10/core/unit_02.cpp", "(n / 2)", "(n / 5)"),
                                      commit(co, "unit 2")), "shortcut"),
    ("an edit in an ignored folder, its time set back", lambda co: backdated(
        co / "third_party/eigen/include/Eigen/Core", "// an edit\n"), "shortcut"),
    ("git index bits", lambda co: (git(co, "update-index", "--assume-unchanged", "minitorch/csrc/stub.c"),
                                   append(co / "minitorch/csrc/stub.c", "/* an edit */\n")), "the whole way"),
    ("version.txt", lambda co: append(co / "version.txt", "\n"), "the whole way"),
    ("setup.py", lambda co: append(co / "setup.py", "\n# a comment\n"), "the whole way"),
    ("CMakeLists.txt", lambda co: append(co / "CMakeLists.txt", "# a comment\n"), "the whole way"),
    ("a submodule bump", lambda co: bump(co / "third_party/fbgemm"), "the whole way"),
]


def ninja_by_hand(co: Path) -> None:
    """The tree's own ninja, as a developer runs it: PyTorch's gen_torch_version target runs at every build and
    writes version.py again (issue 55: the next build went the whole way, and a switch left it behind)."""
    version = co / "minitorch" / "version.py"
    before = (version.read_bytes(), version.stat().st_mtime_ns)
    subprocess.run([tree_ninja(co / "build") or "ninja", "-C", str(co / "build")], check=True, capture_output=True)
    assert (version.read_bytes(), version.stat().st_mtime_ns != before[1]) == (before[0], True)


def backdated(path: Path, text: str) -> None:
    """An edit whose file keeps its old time (as CMake's install, `cp -a` or `tar x` leave one)."""
    st = path.stat()
    append(path, text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 10**9))


def bump(submodule: Path) -> None:
    source = next(submodule.rglob("*.cpp"))
    append(source, "// a new commit of the submodule\n")
    commit(submodule, "bump")


@pytest.mark.slow
def test_explain_dry_run_and_the_build_take_the_same_way_for_every_kind_of_change(small_demo, tmp_path):  # noqa: F811
    """Issue 54: one verdict, from evidence. Each kind of change once through `--explain`, `--dry-run` and the build;
    then, on the same trees, what a clock or a link would have hidden (kept here: one demo built, not four)."""
    co = small_demo
    build(co, "--cuda", "none")
    seen = []
    for name, change, expected in CHANGES:
        if name == "a commit crossing":
            cached = imported_version(co)  # its bytecode written now, within the second of the crossing below
        change(co)
        ways, compiles = three_ways(co)
        seen.append((name, ways, compiles))
        assert ways == (expected,) * 3, (name, ways)
        if expected != "the whole way":  # the driver may compile more than ninja's steps (build_ext's stub.c)
            assert compiles[0] == compiles[1] == compiles[2] or (expected == "up to date" and compiles[2] == 0), \
                (name, compiles)
        else:
            assert compiles[0] == compiles[1], (name, compiles)
        if name == "a commit crossing":
            version = co / "minitorch" / "version.py"
            built = version.stat()
            same_second(version, cached[1])
            now = imported_version(co)[0]
            assert git(co, "rev-parse", "--short=7", "HEAD") in now and now != cached[0], (now, cached)
            os.utime(version, ns=(built.st_atime_ns, built.st_mtime_ns))  # as the build left it, for the next rows
    assert ("a .cpp", ("shortcut",) * 3, (1, 1, 1)) in seen
    # a configuration switch: another configuration built, then this one back (its tree kept)
    build(co, "--cuda", "none", "--debug")
    ninja_by_hand(co)
    ways, compiles = three_ways(co)
    assert ways == ("switch", "switch", "switch") and compiles[2] == 0
    for args in (("--debug",), ()):  # each configuration's version.py goes with its tree, and comes back
        ninja_by_hand(co)
        there = build(co, "--cuda", "none", *args).stderr
        assert "restored the" in there and "not put back" not in there and UP_TO_DATE in there, there
    links_are_never_followed(co, tmp_path)


def imported_version(co: Path) -> tuple[str, os.stat_result]:
    """What `import minitorch.version` says with bytecode written (as a developer's Python does), and the file's
    stat then."""
    import subprocess

    from ..helpers import env_python

    read = ["env", "-u", "PYTHONDONTWRITEBYTECODE", str(env_python()), "-c",
            "import minitorch.version as v; print(v.__version__)"]
    said = subprocess.run(read, cwd=co.parent, capture_output=True, text=True, check=True).stdout.strip()
    return said, (co / "minitorch" / "version.py").stat()


def same_second(version: Path, before: os.stat_result) -> None:
    """Issue 54: version.py keeps its size across commits and Python trusts its cached bytecode by size and
    whole-second mtime: within the second of the last import the new commit imported as the old one. The
    rewritten file given the old time, as when the crossing's build comes within that second."""
    assert version.stat().st_size == before.st_size
    os.utime(version, ns=(before.st_atime_ns, before.st_mtime_ns))


def links_are_never_followed(co: Path, tmp_path: Path) -> None:
    """Issue 54: a link in a kept tree's stored files was moved back into the checkout (the build wrote
    version.py through it, outside); a kept tree that is a link was followed (its tree built, then emptied by
    clean). With release in build/ and debug kept."""

    from ..helpers import inv

    py = next(p.name.split("-")[0] for p in (co / ".torchbuild" / "trees").iterdir())
    trees = co / ".torchbuild" / "trees"
    stored = trees / f"{py}-cpu-debug" / ".torchbuild-outputs" / "minitorch" / "version.py"
    assert stored.is_file()
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text("x = 1\n")
    stored.unlink()
    stored.symlink_to(elsewhere)
    back = build(co, "--cuda", "none", "--debug")
    assert "Traceback" not in back.output and "cpu-debug built in" in back.stderr  # its file missing: built again
    assert elsewhere.read_text() == "x = 1\n" and not (co / "minitorch" / "version.py").is_symlink()
    assert "debug = True" in (co / "minitorch" / "version.py").read_text()
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    shutil.move(trees / f"{py}-cpu-release", tmp_path / "the-release-tree")
    (trees / f"{py}-cpu-release").symlink_to(victim)
    refused = build(co, "--cuda", "none", check=False)
    assert refused.returncode != 0 and "Traceback" not in refused.output
    assert "is a link to" in refused.stderr and "nothing was moved" in refused.stderr
    assert "up to date:" in build(co, "--cuda", "none", "--debug").stderr  # debug in place, untouched
    assert "Traceback" not in inv("clean", "--path", str(co), "--all", check=True).output
    assert sorted(p.name for p in victim.iterdir()) == ["keep.txt"] and (victim / "keep.txt").read_text() == "mine"
