"""A configuration's files in the checkout, beside its build tree.

PyTorch's build writes into the checkout: CMake installs into the package folder (`torch/lib`,
`torch/include`, `torch/share`, `torch/bin`), build_ext links `torch/_C*.so`, and the build
generates `torch/version.py` (PYTORCH_FACTS.md). So a configuration is its tree *and* these files.
After each build they are recorded in the tree's marker (path, size, mtime): the files git ignores
that the build wrote or changed, the ones CMake's install_manifest.txt lists, and the ones recorded
before that are still there. When another configuration takes the checkout they move, by rename,
into the kept tree (`<tree>/.torchbuild-outputs/`), and back when it returns; a build is up to date
only when the files in place are the ones recorded. A checkout without git (a build slot) counts
every file the build wrote.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Iterable, Mapping

from ..run import run
from .slots import source_files

STASH = ".torchbuild-outputs"  # inside a kept tree: its configuration's files from the checkout
ENV_STASH = ".torchbuild-env"  # inside a kept tree: the files its editable install put into the env
OWN = ("build", ".torchbuild", ".git", "dist")  # top-level folders that are never a configuration's files

Stats = dict[str, tuple[int, int]]


def snapshot(checkout: Path) -> Stats:
    """The files a build may write into the checkout, by size and mtime: those git ignores (every file
    without git), outside build/, dist/ and torchbuild's own folder; never bytecode, never a nested repo
    (the build's own clones, NCCL and Eigen, serve every configuration)."""
    if (checkout / ".git").exists():
        listed = run(["git", "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--", ".",
                      *(f":!{top}" for top in OWN)], cwd=checkout, capture=True, echo=False, check=False).stdout
        names = [n for n in listed.split("\0") if n and not n.endswith("/")]  # "x/": a nested repo
    else:  # a build slot: every file but those synced from the source checkout
        names = []
        source = synced(checkout)
        for root, dirs, files in os.walk(checkout):
            rel = os.path.relpath(root, checkout)
            dirs[:] = [d for d in dirs
                       if not (rel == "." and d in OWN) and not os.path.exists(os.path.join(root, d, ".git"))]
            names += [name for f in files if (name := f if rel == "." else f"{rel}/{f}") not in source]
    stats: Stats = {}
    for name in names:
        if "__pycache__" in name.split("/") or name.endswith(".pyc"):
            continue
        with contextlib.suppress(OSError):
            st = os.lstat(checkout / name)
            if os.path.isfile(checkout / name) and not os.path.islink(checkout / name):
                stats[name] = (st.st_size, st.st_mtime_ns)
    return stats


def synced(checkout: Path) -> set[str]:
    """A build slot's files from the source checkout (none in a git checkout, where git tells)."""
    return set() if (checkout / ".git").exists() else source_files(checkout)


def manifest(build: Path, checkout: Path) -> set[str]:
    """The checkout's files CMake's install step placed (build/install_manifest.txt)."""
    listed = build / "install_manifest.txt"
    if not listed.is_file():
        return set()
    root = str(checkout.resolve()) + os.sep
    return {line[len(root):] for line in listed.read_text(errors="replace").splitlines() if line.startswith(root)}


def record(checkout: Path, build: Path, before: Stats, previous: Mapping[str, object]) -> dict[str, list[int]]:
    """The configuration's files after its build: written or changed by it, installed by CMake, or
    recorded before and still there."""
    after = snapshot(checkout)
    names = {n for n, st in after.items() if before.get(n) != st} | set(previous) | manifest(build, checkout)
    return {n: list(after[n]) for n in sorted(names) if n in after}


def in_place(checkout: Path, recorded: Mapping[str, object]) -> bool:
    """Whether every recorded file is in the checkout as the build left it."""
    for name, stat in recorded.items():
        try:
            st = os.lstat(checkout / name)
        except OSError:
            return False
        if [st.st_size, st.st_mtime_ns] != stat:
            return False
    return True


def stash(checkout: Path, tree: Path, recorded: Mapping[str, object]) -> int:
    """Move the configuration's files out of the checkout into its tree; how many moved."""
    moved = 0
    source = synced(checkout)
    for name in recorded:
        if name in source:  # recorded by an older torchbuild: the source checkout's file stays
            continue
        src = checkout / name
        if not src.is_file() or src.is_symlink():
            continue
        dest = tree / STASH / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dest)
        moved += 1
        prune(src.parent, checkout)
    sweep(checkout, recorded)
    return moved


def restore(checkout: Path, tree: Path) -> int:
    """Move a kept tree's files back into the checkout; how many moved."""
    kept = tree / STASH
    moved = 0
    for root, _dirs, files in os.walk(kept):
        for f in files:
            src = Path(root) / f
            dest = checkout / src.relative_to(kept)
            if dest.is_dir() and not dest.is_symlink():
                continue  # a folder took the file's place: the build will make it anew
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dest)
            moved += 1
    for root, dirs, _files in os.walk(kept, topdown=False):
        for d in dirs:
            with contextlib.suppress(OSError):
                os.rmdir(Path(root) / d)
    with contextlib.suppress(OSError):
        kept.rmdir()
    return moved


def remove(checkout: Path, recorded: Mapping[str, object]) -> None:
    """Delete the configuration's files from the checkout (the ones still as its build left them)."""
    source = synced(checkout)
    for name, stat in recorded.items():
        path = checkout / name
        if name in source:
            continue
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if [st.st_size, st.st_mtime_ns] == stat:
                path.unlink()
                prune(path.parent, checkout)
    sweep(checkout, recorded)


def sweep(checkout: Path, names: Iterable[str]) -> None:
    """Remove the top-level folders of these files that hold no file any more, only empty folders (a CMake tree
    outside build/ keeps a few, CMakeFiles/CMakeScratch, that no file kept alive)."""
    for top in sorted({name.split("/", 1)[0] for name in names if "/" in name}):
        folder = checkout / top
        if folder.is_dir() and not folder.is_symlink() and not any(files for _, _, files in os.walk(folder)):
            shutil.rmtree(folder, ignore_errors=True)


def prune(folder: Path, checkout: Path) -> None:
    """Remove folders left empty up to the checkout (a folder git tracks files in is never empty)."""
    while folder != checkout and checkout in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def stash_env(tree: Path, recorded: Mapping[str, object]) -> int:
    """Move the files a configuration's editable install put into the env (scikit-build-core: its compiled
    outputs in site-packages, the redirect hook, the dist-info) into its tree, the ones still as its build
    left them (another install's file stays); how many moved. Taking them out uninstalls the configuration."""
    moved = 0
    for name, stat in recorded.items():
        src = Path(name)
        try:
            st = os.lstat(src)
        except OSError:
            continue
        if [st.st_size, st.st_mtime_ns] != stat or not src.is_absolute():
            continue
        dest = tree / ENV_STASH / name.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(src, dest)  # a rename, or a copy keeping the mtime across file systems
        moved += 1
        folder = src.parent
        while folder.name != "site-packages" and folder != folder.parent:
            try:
                folder.rmdir()
            except OSError:
                break
            folder = folder.parent
    return moved


def restore_env(tree: Path) -> int:
    """Put a kept tree's env files back where its install had them (never over a file there now: that is
    another install's, and the build then goes the whole way); how many moved."""
    kept = tree / ENV_STASH
    moved = 0
    for root, _dirs, files in os.walk(kept):
        for f in files:
            src = Path(root) / f
            dest = Path("/") / src.relative_to(kept)
            if dest.exists() or dest.is_symlink():
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(src, dest)
            moved += 1
    shutil.rmtree(kept, ignore_errors=True)
    return moved
