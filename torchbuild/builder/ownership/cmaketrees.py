"""A configuration's CMake trees, wherever its build configures them.

PyTorch configures in build/ (scikit-build-core in its build-dir, which torchbuild sets to build/); a
setuptools project's build_ext configures inside build/ (pybind's cmake_example: build/temp.*/); others
configure elsewhere in the checkout (onnx: .setuptools-cmake-build/, which its .gitignore names). Each is
named by CMake itself in the build's log ("Build files have been written to"). One outside build/ is the
configuration's whole, so it travels with it as its other files do (kept with the tree, restored, removed
by clean); a tree the user configured by hand is never one;
here every tree is reconfigured from scratch when the configuration changes, and every tree is asked whether
ninja has work before a build is called up to date.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Iterable

from ...locks import STATE
from ...run import run

CACHE = "CMakeCache.txt"
NINJA = "Ninja"
NESTED_DEPTH = 4  # build/temp.linux-x86_64-cpython-312/<ext>/: a tree build_ext made inside build/


def cache_entry(build: Path, name: str) -> str | None:
    """A variable's value in the tree's CMakeCache.txt (None: no cache, or not in it)."""
    cache = build / CACHE
    found = re.search(rf"(?m)^{re.escape(name)}:\w+=(.*)$", cache.read_text(errors="replace")) \
        if cache.is_file() else None
    return found.group(1).strip() if found else None


def tree_ninja(build: Path) -> str | None:
    """The ninja CMake configured the tree for (CMAKE_MAKE_PROGRAM): another version on PATH would find
    the tree's logs in a format it does not read, and start over (a rebuild of everything)."""
    program = cache_entry(build, "CMAKE_MAKE_PROGRAM")
    return program if program and "ninja" in Path(program).name and Path(program).is_file() else None



def ninja_of(tree: Path, path: str | None = None) -> str | None:
    """The ninja to ask about the tree: the one it was configured for, else the first on `path` (or PATH)."""
    return tree_ninja(tree) or shutil.which("ninja", path=path)


def configured_for(build: Path) -> Path | None:
    """The source folder the tree's CMakeCache.txt was configured for (None without one)."""
    home = cache_entry(build, "CMAKE_HOME_DIRECTORY")
    return Path(home).resolve() if home else None


def found(checkout: Path, build: Path, outside: Iterable[str]) -> list[Path]:
    """The configuration's trees: build/ where it is one (PyTorch's; the trees of its ExternalProjects are
    part of it), else those inside it, then those elsewhere in the checkout its builds configured (the
    marker's `trees`, from CMake's own words in the build's log)."""
    trees = [build] if (build / CACHE).is_file() else _inside(build, NESTED_DEPTH)
    for tree in sorted({checkout / name for name in outside if not (checkout / name).is_relative_to(build)}):
        if (tree / CACHE).is_file() and not any(tree.is_relative_to(t) for t in trees):
            trees.append(tree)
    return trees


def inside(folder: Path) -> list[Path]:
    """The CMake trees under `folder` (not itself), none inside another."""
    return _inside(folder, NESTED_DEPTH)


def _inside(folder: Path, depth: int) -> list[Path]:
    """Trees under `folder`, at most `depth` levels down, none inside another (nor in torchbuild's stashes)."""
    trees: list[Path] = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return trees
    for entry in entries:
        if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".torchbuild"):
            path = Path(entry.path)
            if (path / CACHE).is_file():
                trees.append(path)
            elif depth > 1:
                trees += _inside(path, depth - 1)
    return trees


def moved_away(trees: Iterable[Path], checkout: Path) -> list[tuple[Path, str]]:
    """Trees configured for sources outside this checkout (a copied or moved checkout: they would build the
    other one), each with what was found, for the terminal: their CMake files must go (`start_over`)."""
    found = []
    for tree in trees:
        source = configured_for(tree)
        if source is not None and not source.is_relative_to(checkout.resolve()):
            name = "" if tree == checkout / "build" else f" {tree.relative_to(checkout).as_posix()}"
            found.append((tree, f"the tree{name} was configured for {source}"))
    return found


def forget(trees: Iterable[Path]) -> bool:
    """Remove each tree's CMakeCache.txt, so the next configure starts from the defaults and what is set now
    (an option no longer given goes back to its default); whether there was one."""
    caches = [tree / CACHE for tree in trees if (tree / CACHE).is_file()]
    for cache in caches:
        cache.unlink()
    return bool(caches)


def scan(checkout: Path) -> list[Path]:
    """The CMake trees in a git checkout now, whoever made them: the folders of the CMakeCache.txt files git
    ignores, outside torchbuild's own folder, none inside another (build/'s ExternalProject trees are build/'s)."""
    if not (checkout / ".git").exists():
        return []
    listed = run(["git", "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--", f"*{CACHE}",
                  f":!{STATE}"], cwd=checkout, capture=True, echo=False, check=False).stdout
    trees = sorted({(checkout / name).parent for name in listed.split("\0") if Path(name).name == CACHE})
    return [tree for i, tree in enumerate(trees) if not any(tree.is_relative_to(t) for t in trees[:i])]


def since(checkout: Path, start: float) -> list[Path]:
    """The trees in the checkout whose CMakeCache.txt was written after `start`, configured for it: a configure
    that failed says no "Build files have been written", so these are the failed attempt's (never a tree the
    user had before the build began)."""
    trees = []
    for tree in scan(checkout):
        try:
            written = (tree / CACHE).stat().st_mtime >= start
        except OSError:
            continue
        home = configured_for(tree)
        if written and home is not None and home.is_relative_to(checkout.resolve()):
            trees.append(tree)
    return trees


def generator(checkout: Path, ninja: str | None) -> tuple[str | None, str]:
    """The CMake generator for a project whose build calls cmake without naming one (onnx, sentencepiece), and
    why: Ninja, which PyTorch's setup.py and scikit-build-core choose by themselves, so that ninja can say when
    a build is up to date; none while a tree in the checkout holds another (CMake refuses to switch a tree)."""
    if ninja is None:
        return None, "CMake's default generator: no ninja in the env or on PATH"
    for tree in scan(checkout):
        other = cache_entry(tree, "CMAKE_GENERATOR")
        if other and other != NINJA:
            return None, (f"CMake's default generator: the tree {tree.relative_to(checkout).as_posix()} was "
                          f"configured with {other} (without it, builds use Ninja and can be up to date)")
    return NINJA, "CMake generator: Ninja (CMAKE_GENERATOR), so ninja can say when the build is up to date"


def start_over(trees: Iterable[Path]) -> None:
    """Remove the CMakeCache.txt and CMakeFiles of the configuration's trees (a known failure's `fresh`
    remedy: build/, the recorded ones, and those the failed attempt's log says it configured), never a
    tree of the user's."""
    for tree in trees:
        (tree / CACHE).unlink(missing_ok=True)
        shutil.rmtree(tree / "CMakeFiles", ignore_errors=True)
