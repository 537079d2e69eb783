"""A configuration's files outside its build tree: in the checkout, and in the env.

PyTorch's build writes into the checkout: CMake installs into the package folder (`torch/lib`,
`torch/include`, `torch/share`, `torch/bin`), build_ext copies `torch/_C*.so` there, and CMake's
custom commands write generated files (`torch/version.py`) (PYTORCH_FACTS.md). So a configuration is
its tree *and* these files. A file is the configuration's only when its build made it through a
channel that says so (`claimed`): a CMake install manifest of one of its trees, a ninja output of one
of its trees, setuptools' "copying X -> Y" of an extension into the source tree, a CMake tree whose
configure ("Build files have been written to") ran in the build's log; never a file git tracks, never
one merely written while the build ran. They are recorded by path relative to the checkout (size,
mtime; one behind a link, a package's lib/ linked to another disk, is recorded but never moved, so its
configuration is up to date only while that file is as its build left it), moved into the kept tree
(`<tree>/.torchbuild-outputs/`) when another configuration takes the checkout, and back when it returns.
The env side is the editable install's RECORD (`env_files`),
recorded relative to the env and moved only while the env's install is this checkout's.

Every move of a switch is journaled (`Moves`): one that fails (another file system, a full disk)
puts back what moved before it, so a switch is all or nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from pathlib import Path, PurePosixPath
from typing import Iterable, Mapping

from ..errors import TorchbuildError
from ..run import run
from .slots import source_files

STASH = ".torchbuild-outputs"  # inside a kept tree: its configuration's files from the checkout
ENV_STASH = ".torchbuild-env"  # inside a kept tree: the files its editable install put into the env
OWN = ("build", ".torchbuild", ".git", "dist")  # top-level folders that are never a configuration's files
CACHE = "CMakeCache.txt"

WRITTEN_TO = re.compile(r"(?m)^\s*-- Build files have been written to: (.+?)\s*$")  # CMake's configure
COPIED = re.compile(r"(?m)^\s*copying (\S+) -> (\S+)\s*$")  # setuptools' build_ext into the source tree
EXTENSION = re.compile(r"\.(?:so|pyd|dylib)$")

Stats = dict[str, list[int]]


def safe_name(name: object) -> bool:
    """A path a record may hold: relative, normal, inside (no `..`), not in torchbuild's or git's folders."""
    if not isinstance(name, str) or not name or "\\" in name or "\0" in name:
        return False
    path = PurePosixPath(name)
    return not path.is_absolute() and ".." not in path.parts and str(path) == name and path.parts[0] not in OWN


def valid_stats(files: object) -> bool:
    """A record's files: safe relative names, each with [size, mtime_ns]."""
    return isinstance(files, dict) and all(
        safe_name(k) and isinstance(v, list) and len(v) == 2 and all(type(x) is int for x in v)
        for k, v in files.items())


def stat_of(path: Path) -> list[int] | None:
    """A regular file's [size, mtime_ns] (None: missing, a link, a folder)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns] if os.path.isfile(path) and not os.path.islink(path) else None


def within(path: Path, root: Path) -> bool:
    """Whether `path` lies inside `root` with no link on the way (a link could lead outside)."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return False
    here = root
    for part in rel.parts[:-1]:
        here = here / part
        if here.is_symlink():
            return False
    return ".." not in rel.parts


# ----------------------------------------------------------------------------- the channels


def cmake_trees(checkout: Path, log_text: str) -> list[str]:
    """The CMake trees inside the checkout that the build's log says it configured, outside build/."""
    root = checkout.resolve()
    found = []
    for written in WRITTEN_TO.findall(log_text):
        path = Path(os.path.normpath(written))
        with contextlib.suppress(ValueError):
            rel = path.relative_to(root).as_posix()
            if safe_name(rel) and rel not in found:
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
    build/lib.*/pkg/_C.so -> pkg`)."""
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
    """The names git tracks, in the checkout or a submodule (a build never owns one; none without git)."""
    names = sorted(names)
    if not names or not (checkout / ".git").exists():
        return set()
    found: set[str] = set()
    for i in range(0, len(names), 2000):  # PyTorch installs ten thousand headers: a command line each 2000
        listed = run(["git", "ls-files", "-z", "--recurse-submodules", "--", *names[i:i + 2000]], cwd=checkout,
                     capture=True, echo=False, check=False).stdout
        found |= set(filter(None, listed.split("\0")))
    return found


def claimed(checkout: Path, build: Path, trees: Iterable[Path], log_text: str, ninja: str | None,
            previous: Mapping[str, object], previous_trees: Iterable[str] = ()) -> tuple[Stats, list[str]]:
    """The configuration's files in the checkout after its build, and its CMake trees outside build/:
    what the channels name (see the module's doc), with the files recorded before that are still as
    they were. A file of the user's, tracked or merely written meanwhile, is never among them."""
    outside = [t for t in [*previous_trees, *cmake_trees(checkout, log_text)]
               if not (checkout / t).resolve().is_relative_to(build.resolve()) and (checkout / t / CACHE).is_file()]
    outside = list(dict.fromkeys(outside))
    names: set[str] = copied(checkout, log_text)
    for folder in {*trees, *(checkout / t for t in outside)}:
        names |= manifest(folder, checkout) | ninja_outputs(folder, checkout, ninja)
    for tree in outside:
        names |= tree_files(checkout, tree)
    names |= {n for n, st in previous.items() if stat_of(checkout / n) == st}
    names = {n for n in names if safe_name(n)}  # one behind a link (torch/lib linked elsewhere) is checked, never moved
    names -= tracked(checkout, names) | synced(checkout)
    stats = {n: st for n in sorted(names) if (st := stat_of(checkout / n)) is not None}
    return stats, outside


def synced(checkout: Path) -> set[str]:
    """A build slot's files from the source checkout (none in a git checkout, where git tells)."""
    return set() if (checkout / ".git").exists() else source_files(checkout)


def in_place(checkout: Path, recorded: Mapping[str, object]) -> bool:
    """Whether every recorded file is in the checkout as the build left it."""
    return all(stat_of(checkout / name) == stat for name, stat in recorded.items())


# ----------------------------------------------------------------------------- moves, all or nothing


class Moves:
    """A journal of file moves: `undo` puts back, newest first, what moved (a switch is all or nothing)."""

    def __init__(self) -> None:
        self.done: list[tuple[Path, Path]] = []

    def move(self, src: Path, dest: Path) -> None:
        made = []
        for parent in reversed([dest.parent, *dest.parent.parents]):
            if not parent.exists():
                made.append(parent)
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.move(str(src), str(dest))  # a rename, or a copy keeping the mtime across file systems
        except OSError as exc:
            with contextlib.suppress(OSError):
                if dest.exists() and src.exists():
                    dest.unlink()
            for folder in reversed(made):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise TorchbuildError(
                f"could not move {src} to {dest}: {exc.strerror or exc}; nothing was changed",
                "free space there (or put .torchbuild/ and build/ on one file system), then run the command again"
            ) from None
        self.done.append((src, dest))

    def undo(self) -> None:
        for src, dest in reversed(self.done):
            with contextlib.suppress(OSError):
                src.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(dest), str(src))
        self.done.clear()


def stash(checkout: Path, tree: Path, recorded: Mapping[str, object], moves: Moves) -> int:
    """Move the configuration's files (those still as its build left them) out of the checkout into its
    tree; how many moved."""
    moved = 0
    for name, stat in recorded.items():
        src = checkout / name
        if not within(src, checkout) or stat_of(src) != stat:
            continue
        moves.move(src, tree / STASH / name)
        moved += 1
    return moved


def tidy(checkout: Path, names: Iterable[str]) -> None:
    """Remove the folders the moved files left empty, up to the checkout (a folder git tracks files in is
    never empty), and top-level folders of them that hold no file any more (a CMake tree outside build/
    keeps a few empty ones, CMakeFiles/CMakeScratch)."""
    for name in names:
        prune((checkout / name).parent, checkout)
    for top in sorted({name.split("/", 1)[0] for name in names if "/" in name}):
        folder = checkout / top
        if folder.is_dir() and not folder.is_symlink() and not any(files for _, _, files in os.walk(folder)):
            shutil.rmtree(folder, ignore_errors=True)


def kept_files(folder: Path) -> list[str]:
    """The files a kept tree's stash holds, relative to it (a link in it is nobody's: never followed)."""
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        out += [(Path(root) / f).relative_to(folder).as_posix() for f in files]
    return sorted(n for n in out if safe_name(n))


def restore(checkout: Path, tree: Path, moves: Moves) -> tuple[int, str | None]:
    """Move a kept tree's files back into the checkout, all of them or none (a file or folder standing
    where one goes is someone's: nothing is put over it, and the build goes the whole way); how many
    moved, and why none did."""
    kept = tree / STASH
    names = kept_files(kept)
    blocked = [n for n in names if os.path.lexists(checkout / n) or not within(checkout / n, checkout)]
    if blocked:
        return 0, f"{blocked[0]} stands where one of its files goes"
    for name in names:
        moves.move(kept / name, checkout / name)
    shutil.rmtree(kept, ignore_errors=True)
    return len(names), None


def remove(checkout: Path, recorded: Mapping[str, object]) -> list[str]:
    """Delete the configuration's files from the checkout (the ones still as its build left them); their names."""
    gone = []
    for name, stat in recorded.items():
        path = checkout / name
        if within(path, checkout) and stat_of(path) == stat:
            with contextlib.suppress(OSError):
                path.unlink()
                gone.append(name)
    tidy(checkout, gone)
    return gone


def prune(folder: Path, checkout: Path) -> None:
    """Remove folders left empty up to the checkout."""
    while folder != checkout and checkout in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


# ----------------------------------------------------------------------------- the env side


def env_owner(prefix: Path, names: Iterable[str]) -> str | None:
    """The checkout the env's editable install of these files serves (its dist-info's direct_url.json among
    them), as a file URL; None when the record names none."""
    for name in names:
        if name.endswith(".dist-info/direct_url.json"):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                url = json.loads((prefix / name).read_text()).get("url")
                return str(url) if url else None
    return None


def stash_env(tree: Path, prefix: Path, checkout: Path, recorded: Mapping[str, object], moves: Moves) -> int:
    """Move the files this checkout's editable install put into the env (scikit-build-core: its compiled
    outputs in site-packages, the redirect hook, the dist-info) into its tree, the ones still as its build
    left them, and only while the env's install is this checkout's (a copied checkout's record names
    another's); how many moved. Taking them out uninstalls the configuration."""
    if env_owner(prefix, recorded) != checkout.resolve().as_uri():
        return 0
    moved = []
    for name, stat in recorded.items():
        src = prefix / name
        if within(src, prefix) and stat_of(src) == stat:
            moves.move(src, tree / ENV_STASH / name)
            moved.append(name)
    for name in moved:  # the dist-info's folder and the package's, where nothing else is left in them
        prune((prefix / name).parent, prefix)
    return len(moved)


def restore_env(tree: Path, prefix: Path, checkout: Path, moves: Moves) -> tuple[int, str | None]:
    """Put a kept tree's env files back into the env its install was in, all or none: never over a file
    there now, never beside another install of the project (the build then goes the whole way); how many
    moved, and why none did."""
    kept = tree / ENV_STASH
    names = kept_files(kept)
    if not names:
        return 0, None
    if env_owner(kept, names) != checkout.resolve().as_uri():
        return 0, "its kept install is another checkout's"
    projects = {n.split("/")[-2].split("-")[0].lower() for n in names if n.endswith(".dist-info/RECORD")}
    for info in prefix.glob("lib/python*/site-packages/*.dist-info"):
        if info.name.split("-")[0].lower() in projects:
            return 0, f"the env holds another install of it ({info.name})"
    blocked = [n for n in names if os.path.lexists(prefix / n) or not within(prefix / n, prefix)]
    if blocked:
        return 0, f"{blocked[0]} is in the env already"
    for name in names:
        moves.move(kept / name, prefix / name)
    shutil.rmtree(kept, ignore_errors=True)
    return len(names), None
