"""What a configuration owns outside its tree: the files its build made through a channel that says so.

A CMake install manifest of one of its trees, a ninja output of one of its trees (CMake's custom commands:
PyTorch's version.py, its codegen into the source tree; never a phony target, which names CMake's own
inputs), setuptools' "copying X -> Y" of an extension into the source tree, and a CMake tree whose
configure ("Build files have been written to") is in the build's log, whole. Never a file git tracks (in
the checkout or a submodule), never one merely written while the build ran.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Iterable, Mapping

from ...run import run
from ..profile import Step
from ..slots import source_files
from .cmaketrees import CACHE, found, ninja_of, tree_ninja
from .records import DIGEST, SMALL, Stats, as_built, content_of, safe_name, stat_of, tree_name, unpacked

WRITTEN_TO = re.compile(r"(?m)^\s*-- Build files have been written to: (.+?)\s*$")  # CMake's configure
COPIED = re.compile(r"(?m)^\s*copying (\S+) ->[ \t]*(\S*)[ \t]*$")  # build_ext into the source tree ("-> ": its top)
EXTENSION = re.compile(r"\.(?:so|pyd|dylib)$")


def cmake_trees(checkout: Path, log_text: str) -> list[str]:
    """The CMake trees inside the checkout that the build's log says it configured (build/'s included)."""
    root = checkout.resolve()
    found = []
    for written in WRITTEN_TO.findall(log_text):
        path = Path(os.path.normpath(written))
        with contextlib.suppress(ValueError):
            rel = path.relative_to(root).as_posix()
            if tree_name(rel) and rel not in found:
                found.append(rel)
    return found


def manifest(tree: Path, checkout: Path) -> set[str]:
    """The checkout's files CMake's install step placed (the tree's install_manifest.txt)."""
    listed = tree / "install_manifest.txt"
    if not listed.is_file():
        return set()
    root = str(checkout.resolve()) + os.sep
    return {line[len(root):] for line in listed.read_text(errors="replace").splitlines() if line.startswith(root)}


def ninja_outputs(tree: Path, checkout: Path, ninja: str | None) -> set[str]:
    """The checkout's files the tree's ninja graph writes outside the tree (CMake's custom commands and
    byproducts: PyTorch's version.py, its codegen into the source tree)."""
    if ninja is None or not (tree / "build.ninja").is_file():
        return set()
    listed = run([ninja, "-C", str(tree), "-t", "targets", "all"], capture=True, echo=False, check=False).stdout
    root, inside = checkout.resolve(), tree.resolve()
    found = set()
    for line in listed.splitlines():
        target, _, rule = line.rpartition(": ")
        if not target or rule == "phony" or not os.path.isabs(target):  # phony: CMake's inputs, never made
            continue
        path = Path(os.path.normpath(target))
        if path.is_relative_to(root) and not path.is_relative_to(inside):
            found.add(path.relative_to(root).as_posix())
    return found


def copied(checkout: Path, log_text: str) -> set[str]:
    """The extensions setuptools' build_ext copied into the checkout, as its log says it (`copying
    build/lib.*/pkg/_C.so -> pkg`; a top-level module's line ends in `-> `)."""
    root = checkout.resolve()
    found = set()
    for src, dest in COPIED.findall(log_text):
        if not EXTENSION.search(src):
            continue
        target = Path(dest) if os.path.isabs(dest) else root / dest
        if not EXTENSION.search(dest):
            target = target / Path(src).name
        with contextlib.suppress(ValueError):
            found.add(Path(os.path.normpath(target)).relative_to(root).as_posix())
    return found


def tree_files(checkout: Path, tree: str) -> set[str]:
    """Every file of a CMake tree the build configured in the checkout outside build/ (its own, whole)."""
    out = set()
    for root, dirs, files in os.walk(checkout / tree):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        rel = Path(root).relative_to(checkout).as_posix()
        out |= {f"{rel}/{f}" for f in files}
    return out


def tracked(checkout: Path, names: Iterable[str]) -> set[str]:
    """The names git tracks, in the checkout or a submodule (a build never owns one; none without git). Asked
    by their folders, few, and not name by name: git matches each pathspec against each index entry, and 9,000
    headers' names took 0.8 s where their folder takes milliseconds. A top-level name is asked as itself (its
    folder would be the whole tree, every submodule's files included)."""
    names = set(names)
    if not names or not (checkout / ".git").exists():
        return set()
    asked = sorted({name.rpartition("/")[0] or name for name in names})
    found: set[str] = set()
    for i in range(0, len(asked), 2000):
        listed = run(["git", "--literal-pathspecs", "ls-files", "-z", "--recurse-submodules", "--",
                      *asked[i:i + 2000]], cwd=checkout, capture=True, echo=False, check=False).stdout
        found |= set(filter(None, listed.split("\0")))
    return found & names


def claimed(checkout: Path, build: Path, log: Path, previous: Mapping[str, object], previous_trees: Iterable[str],
            path: str | None = None) -> tuple[Stats, list[str]]:
    """The configuration's files in the checkout after its build, and the CMake trees its builds configured
    (in build/ and outside it, as CMake's log says): what the channels name (see the module's doc) in its
    trees and its log, with the files recorded before that are still as they were. A file of the user's,
    tracked or merely written meanwhile, is never among them (one behind a link, torch/lib linked to another
    disk, is: checked, never moved)."""
    log_text = log.read_text(errors="replace") if log.is_file() else ""
    configured = list(dict.fromkeys(t for t in [*previous_trees, *cmake_trees(checkout, log_text)]
                                    if (checkout / t / CACHE).is_file()))
    outside = [t for t in configured if not (checkout / t).resolve().is_relative_to(build.resolve())]
    trees = found(checkout, build, outside)
    ninja = next(filter(None, map(tree_ninja, trees)), None) or ninja_of(build, path)
    names: set[str] = copied(checkout, log_text)
    for folder in trees:
        names |= manifest(folder, checkout) | ninja_outputs(folder, checkout, ninja)
    for tree in outside:
        names |= tree_files(checkout, tree)
    base = str(checkout)  # each name's stat taken once, on plain strings: 11,000 names at PyTorch's size
    now = {name: stat_of(os.path.join(base, name)) if safe_name(name) else None for name in {*names, *previous}}
    names = {n for n in names if now[n] is not None} | {n for n, st in previous.items() if now[n] == st is not None}
    names -= tracked(checkout, names) | synced(checkout)
    return {n: st for n in sorted(names) if (st := now[n]) is not None}, configured


def synced(checkout: Path) -> set[str]:
    """A build slot's files from the source checkout, its submodules' too (none in a checkout itself)."""
    return source_files(checkout)


def in_place(checkout: Path, recorded: Mapping[str, list[int]], packed: str = "") -> bool:
    """Whether every recorded file is in the checkout as the build left it: its stat, else (a small one written
    again: PyTorch's gen_torch_version rewrites version.py at every ninja run) its content. Plain strings: 11,000
    of them at PyTorch's size, where a Path each costs more than the stat."""
    base, known = str(checkout), None
    for name, stat in recorded.items():
        path = os.path.join(base, name)
        if stat_of(path) != stat:
            known = known if known is not None else unpacked(recorded, packed)
            if not as_built(path, name, stat, known):
                return False
    return True


def packed_contents(checkout: Path, owned: Mapping[str, list[int]], before: Mapping[str, list[int]],
                    packed: str) -> str:
    """The digests of the small files among `owned`, in the order of their names, as one string (9,000 headers
    at PyTorch's size: a name each again would double the record). The last record's (`before`, `packed`) where
    a file's stat is as it was, else read now: a build rewrites few (version.py), the first reads them all once."""
    known = unpacked(before, packed)
    return "".join(known[name] if name in known and before.get(name) == st else
                   content_of(os.path.join(str(checkout), name)) or "-" * DIGEST
                   for name, st in sorted(owned.items()) if st[0] <= SMALL)


UP_TO_DATE = re.compile(r"(?m)^\s*-- Up-to-date: (.+?)\s*$")  # CMake's install, a file it did not copy
INSTALLING = re.compile(r"(?m)^\s*-- Installing: (.+?)\s*$")  # and one it copied


def skipped_installs(log_text: str, steps: Iterable[Step]) -> list[Path]:
    """The files CMake's install left as "Up-to-date" though this build remade them: CMake skips a copy whose
    mtime is within a second of the installed one (which keeps the build's mtime, stripped too: stripping.py),
    so a relink under a second after the last keeps the old library (verified against what ninja ran, by
    file name). A file the same install copied first (a project that installs it twice, as spglib does) is not."""
    remade, copied = {os.path.basename(step.output) for step in steps}, set(INSTALLING.findall(log_text))
    return [Path(p) for p in dict.fromkeys(UP_TO_DATE.findall(log_text))  # strings: 9,000 headers' lines
            if os.path.basename(p) in remade and p not in copied]
