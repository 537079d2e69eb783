"""A setuptools project whose build_ext runs CMake in build_temp (pybind's cmake_example): under PEP 660,
setuptools' editable_wheel points build_temp at a new temporary folder on every build, so the project's
CMake tree is thrown away and each build configures, compiles (from the compiler cache at best) and links
from nothing. Once the editable install maps the checkout, torchbuild runs the project's own build_ext
in place instead (`setup.py build_ext --inplace`, setuptools' in-place build, with build_temp kept inside
build/): CMake's tree stays, ninja rebuilds what changed, and a no-op is "up to date". build_ext is all
such a rebuild runs under pip too; what it leaves out is the install's metadata and mapping, so pip
goes the whole way again where those could change: a file the inputs stamp holds (setup.py,
pyproject.toml, setup.cfg, ...), a new or deleted file, --rerun. `--force` recompiles any extension
setuptools builds itself (its own check skips a unit whose header changed).

Where setuptools compiles the extensions itself (pybind's python_example, mmh3: no CMake, no ninja), the
compiler's depfiles (`-MMD`, in CPPFLAGS) beside each object of the kept build_temp name every file it read,
headers in the env included: a no-op is one whose objects are newer than all of them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Mapping

from ..run import run
from .drivers.pep517 import KEPT_BUILD_TEMP
from .ownership import uptodate
from .ownership.records import Record
from .plan import Plan
from .shortcut import changed_since


def thrown_away(trees: Iterable[Path], checkout: Path) -> bool:
    """Whether the project's CMake trees are nowhere in the checkout but the kept build_temp (its editable
    builds configure in setuptools' temporary folder), so building in place is what keeps one."""
    kept = (checkout / KEPT_BUILD_TEMP).resolve()
    return all(tree.resolve().is_relative_to(kept) for tree in trees)


def ninja_trees(checkout: Path, trees: Iterable[Path]) -> list[Path]:
    """The configuration's ninja trees: its CMake trees, and the kept build_temp where the project's build_ext
    compiles through a build.ninja of its own there (cpp_extension's)."""
    temp = checkout / KEPT_BUILD_TEMP
    trees = list(trees)
    return trees + [temp] if (temp / "build.ninja").is_file() and temp not in trees else trees


def refusal(checkout: Path, marker: Record, now: Mapping[str, object],
            outputs: Mapping[str, object]) -> str | None:
    """Why the in-place build would not leave what pip's editable install leaves (None: it would). The
    caller has checked the stamp and the install; `outputs`: the build's own files in the checkout (an
    extension in a folder no .gitignore names shows as a new file)."""
    before = marker.worktree
    if before is None:
        return "the last build did not record the working tree"
    changed = [p for p in changed_since(before, now) if p not in outputs]
    gone = [p for p in changed if now.get(p) is None and not (checkout / p).exists()]  # absent: back to HEAD's
    if gone:
        return f"{gone[0]} was deleted since the last build: the install's files may change"
    tracked = set(run(["git", "ls-files", "-z", "--", *changed], cwd=checkout, capture=True, echo=False,
                      check=False).stdout.split("\0")) if changed else set()
    new = [p for p in changed if p not in tracked]
    return f"{new[0]} is new since the last build: the install's mapping may change" if new else None


def pending(checkout: Path, plan: Plan, base_env: Mapping[str, str]) -> uptodate.NinjaWork | None:
    """What the in-place build would redo, and what says so: ninja in the kept build_temp where the project's
    build_ext compiles through a build.ninja of its own there (torch's cpp_extension BuildExtension: its
    depfiles are ninja's, `deps = gcc`, read into .ninja_deps and deleted), else the objects' depfiles."""
    temp = checkout / KEPT_BUILD_TEMP
    if (temp / "build.ninja").is_file():
        return uptodate.ninja_work([temp], plan, base_env, "ninja has no work in build_ext's build.ninja")
    lines = stale_objects(checkout)
    if lines is None:
        return None
    steps = tuple(dict.fromkeys(m.group(1) for m in map(uptodate.NEWEST_INPUT.match, lines) if m))
    return uptodate.NinjaWork(tuple(lines), steps, source="no input its compiler's depfiles name is newer")


def stale_objects(checkout: Path) -> list[str] | None:
    """Each object of the kept build_temp older than an input its depfile names (a missing input counts), in
    `ninja -d explain`'s words; None where nothing proves the objects current (none, or one without a depfile)."""
    temp = checkout / KEPT_BUILD_TEMP
    objects = sorted(temp.rglob("*.o")) if temp.is_dir() else []
    if not objects:
        return None
    lines = []
    for obj in objects:
        inputs = depfile_inputs(obj.with_suffix(".d"))
        if inputs is None:
            return None
        built = obj.stat().st_mtime_ns
        for name in inputs:
            path = checkout / name
            try:
                newer = path.stat().st_mtime_ns
            except OSError:
                lines.append(f"ninja explain: {path} (an input of {obj.name}) is missing")
                continue
            if newer > built:
                lines.append(f"ninja explain: output {obj} older than most recent input {path} ({built} vs {newer})")
    return lines


DEPFILE_WORD = re.compile(r"(?:\\.|[^\s\\])+")


def depfile_inputs(depfile: Path) -> list[str] | None:
    """The inputs a Makefile-style depfile names for its one target (paths relative to where the compiler ran);
    None without a readable one."""
    try:
        text = depfile.read_text(errors="replace").replace("\\\n", " ")
    except OSError:
        return None
    target, sep, inputs = text.partition(": ")
    if not sep:
        return None
    return [w.replace("\\ ", " ").replace("$$", "$") for w in DEPFILE_WORD.findall(inputs.split("\n\n")[0])]
