"""Moving a configuration's files out of the checkout and the env into its kept tree, and back.

Every move is journaled (`Moves`): one that fails (another file system, a full disk) puts back what moved
before it, so a switch is all or nothing. Nothing is moved through a link (a file behind one is checked,
never moved), nothing is put over a file that stands where one goes, and the env's files move only while
the env's editable install is this checkout's (a copied checkout's record names the original's).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from ...errors import TorchbuildError
from .records import safe_name, stat_of

STASH = ".torchbuild-outputs"  # inside a kept tree: its configuration's files from the checkout


ENV_STASH = ".torchbuild-env"  # inside a kept tree: the files its editable install put into the env


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
                if dest.is_dir() and not dest.is_symlink() and src.exists():  # half a tree copied: never kept
                    shutil.rmtree(dest)
                elif dest.exists() and src.exists():
                    dest.unlink()
            for folder in reversed(made):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise TorchbuildError(
                f"could not move {src} to {dest}: {reason(exc)}; nothing was changed",
                "free space there (or put .torchbuild/ and build/ on one file system), then run the command again"
            ) from None
        self.done.append((src, dest))

    def undo(self) -> None:
        for src, dest in reversed(self.done):
            with contextlib.suppress(OSError):
                src.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(dest), str(src))
        self.done.clear()


def reason(exc: OSError) -> str:
    """An OS error in a word or three: copying a tree (shutil.Error) lists every file's; the first says it."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list) and exc.args[0]:
        return str(exc.args[0][0][-1]).split("] ", 1)[-1].split(":")[0]
    return exc.strerror or str(exc)


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
    """The files a kept tree's stash holds, relative to it. A link in it (or the stash itself a link) is
    nobody's: never followed, never moved back (the build would write through it, outside the checkout)."""
    if folder.is_symlink():
        return []
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        out += [(Path(root) / f).relative_to(folder).as_posix() for f in files
                if not os.path.islink(os.path.join(root, f))]
    return sorted(n for n in out if safe_name(n))


def restore(checkout: Path, tree: Path, moves: Moves) -> tuple[int, str | None]:
    """Move a kept tree's files back into the checkout, all of them or none (a file or folder standing
    where one goes is someone's: nothing is put over it, and the build goes the whole way); how many
    moved, and why none did."""
    return all_back(tree / STASH, checkout, moves, "{} stands where one of its files goes")


def all_back(kept: Path, root: Path, moves: Moves, blocked_by: str) -> tuple[int, str | None]:
    """Move every file of a stash back under `root`, or none where one would go over a file or through a link;
    how many moved, and (`blocked_by`, with the first in the way) why none did."""
    names = kept_files(kept)
    blocked = [n for n in names if os.path.lexists(root / n) or not within(root / n, root)]
    if blocked:
        return 0, blocked_by.format(blocked[0])
    for name in names:
        moves.move(kept / name, root / name)
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
    drop_bytecode(prefix / name for name in moved if name.endswith(".py"))  # else <package>/__pycache__ stays:
    for name in moved:  # an empty namespace package that shadows the next install. Then the dist-info's folder
        prune((prefix / name).parent / "__pycache__", prefix)  # and the package's, where nothing else is left
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
    return all_back(kept, prefix, moves, "{} is in the env already")


@contextlib.contextmanager
def python_side_kept(checkout: Path, recorded: Mapping[str, object]) -> Iterator[None]:
    """While a wheel is made in the tree of a develop configuration: its generated Python files (version.py,
    which the wheel's PYTORCH_BUILD_VERSION rewrites) are put back as they were after, content and mtime, so
    the develop env imports its own version, and its record still holds."""
    kept = {}
    for name, stat in recorded.items():
        path = checkout / name
        if name.endswith((".py", ".pyi")) and within(path, checkout) and stat_of(path) == stat:
            kept[name] = (path.read_bytes(), path.stat().st_atime_ns, path.stat().st_mtime_ns)
    try:
        yield
    finally:
        for name, (data, atime, mtime) in kept.items():
            path = checkout / name
            with contextlib.suppress(OSError):
                if not path.is_file() or path.read_bytes() != data:
                    path.write_bytes(data)
                os.utime(path, ns=(atime, mtime))


def drop_bytecode(sources: Iterable[Path]) -> int:
    """Remove Python's cached bytecode of these sources (`__pycache__/<stem>.*.pyc`): Python trusts a cache by
    its source's size and mtime in whole seconds, so a file rewritten at the same size within the second the
    cache was written (version.py at another commit) would import as before. How many were removed."""
    dropped = 0
    for source in sources:
        for cached in source.parent.glob(f"__pycache__/{source.stem}.*.pyc"):
            with contextlib.suppress(OSError):
                cached.unlink()
                dropped += 1
    return dropped


def dist_metadata(record: Path | None) -> dict[str, str]:
    """The Name and Version a dist-info's METADATA says (the dist-info of `record`, its RECORD); {} without one."""
    meta = record.with_name("METADATA") if record else None
    text = meta.read_text(errors="replace") if meta and meta.is_file() else ""
    return dict(re.findall(r"(?m)^(Name|Version): (\S+)$", text.split("\n\n", 1)[0]))


def editable_record(prefix: Path, checkout: Path) -> Path | None:
    """The RECORD of the editable install of `checkout` in the env at `prefix` (its direct_url.json names it)."""
    uri = f'"{checkout.resolve().as_uri()}"'
    for direct in prefix.glob("lib/python*/site-packages/*.dist-info/direct_url.json"):
        with contextlib.suppress(OSError):
            if uri in direct.read_text(errors="replace") and (direct.parent / "RECORD").is_file():
                return direct.parent / "RECORD"
    return None
