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
from .records import as_built, parts_of, safe_name, stat_of

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
        made: list[Path] = []
        parent = dest.parent
        while not parent.exists():  # one stat where it is there (thousands of files into one folder)
            made.insert(0, parent)
            parent = parent.parent
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


def stash(checkout: Path, tree: Path, recorded: Mapping[str, object], moves: Moves,
          known: Mapping[str, str] | None = None) -> int:
    """Move the configuration's files (those still as its build left them, by stat or by the content `known`
    has for them) out of the checkout into its tree, a folder holding nothing else in one rename; how many
    files moved."""
    names, count = still_ours(checkout, recorded, known)
    cleared(tree / STASH)
    for name in names:
        moves.move(checkout / name, tree / STASH / name)
    return count


def cleared(stash: Path) -> None:
    """Remove what a stash holds from before: the files a blocked move back left in the tree, which its build
    has made anew since (a folder moved onto one that is there would land inside it)."""
    if stash.is_symlink():
        stash.unlink()
    elif stash.exists():
        shutil.rmtree(stash)


def still_ours(root: Path, recorded: Mapping[str, object], known: Mapping[str, str] | None = None) \
        -> tuple[list[str], int]:
    """What of `root` to move for a configuration: each of its files still as its build left them, and in their
    stead each folder that holds nothing else (PyTorch's 9,000 headers in include/: one rename, not 9,000).
    Never anything behind a link: each folder on the way is looked at once. The names, and how many files."""
    names, count, _ = owned_in(str(root), "", folders_of(recorded), known or {})
    return names, count


def folders_of(recorded: Mapping[str, object]) -> dict[str, object]:
    """A record's names as nested folders: a name to its recorded stat (a file) or to a dict (a folder)."""
    top: dict[str, object] = {}
    for name, stat in recorded.items():
        parts = parts_of(name)
        node: object = top
        for part in (parts or [])[:-1]:
            node = node.setdefault(part, {}) if isinstance(node, dict) else None
        if parts and isinstance(node, dict) and not isinstance(node.get(parts[-1]), dict):
            node[parts[-1]] = stat
    return top


def owned_in(root: str, rel: str, node: dict[str, object], known: Mapping[str, str]) -> tuple[list[str], int, bool]:
    """In the real folder `rel` of `root`: the names to move, how many files they hold, and whether the folder
    holds nothing but them (a file of someone's, a file changed since, an empty folder: it does not)."""
    try:
        with os.scandir(os.path.join(root, rel)) as found:
            present = {entry.name: entry for entry in found}
    except OSError:
        return [], 0, False
    names, count, whole = [], 0, present.keys() == node.keys()
    for name, sub in node.items():
        entry, path = present.get(name), f"{rel}/{name}" if rel else name
        if entry is None:
            continue
        if isinstance(sub, dict):
            inner, n, all_ours = owned_in(root, path, sub, known) if entry.is_dir(follow_symlinks=False) else \
                ([], 0, False)
            names += [path] if all_ours else inner
            count, whole = count + n, whole and all_ours
        elif as_built(entry.path, path, sub, known):
            names.append(path)
            count += 1
        else:
            whole = False
    return names, count, whole


def tidy(checkout: Path, names: Iterable[str]) -> None:
    """Remove the folders the moved files left empty, up to the checkout (a folder git tracks files in is
    never empty), and top-level folders of them that hold no file any more (a CMake tree outside build/
    keeps a few empty ones, CMakeFiles/CMakeScratch)."""
    names = list(names)
    for folder in sorted({(checkout / name).parent for name in names}, key=lambda f: -len(f.parts)):
        prune(folder, checkout)
    for top in sorted({name.split("/", 1)[0] for name in names if "/" in name}):
        folder = checkout / top
        if folder.is_dir() and not folder.is_symlink() and not any(files for _, _, files in os.walk(folder)):
            shutil.rmtree(folder, ignore_errors=True)


def restore(checkout: Path, tree: Path, moves: Moves) -> tuple[int, str | None]:
    """Move a kept tree's files back into the checkout, all of them or none (a file or folder standing
    where one goes is someone's: nothing is put over it, and the build goes the whole way); how many
    moved, and why none did."""
    return all_back(tree / STASH, checkout, moves, "{} stands where one of its files goes")


def all_back(kept: Path, root: Path, moves: Moves, blocked_by: str) -> tuple[int, str | None]:
    """Move every file of a stash back under `root`, or none where one would go over a file or through a link;
    how many moved, and (`blocked_by`, with the first in the way) why none did."""
    if kept.is_symlink() or not kept.is_dir():
        return 0, None
    planned, count, blocked = back_to(str(kept), str(root), "")
    if blocked:
        return 0, blocked_by.format(blocked)
    for name in planned:
        moves.move(kept / name, root / name)
    shutil.rmtree(kept, ignore_errors=True)
    return count, None


def back_to(kept: str, root: str, rel: str) -> tuple[list[str], int, str | None]:
    """The names of the stash's folder `rel` to move back under `root`: a folder missing there in one rename
    (where nothing in it is a link), else its files; a link in the stash is nobody's and stays. The names, how
    many files they hold, and the first name in the way (a file there, or a link where a folder goes)."""
    names: list[str] = []
    count = 0
    with os.scandir(os.path.join(kept, rel)) as found:
        entries = sorted(found, key=lambda e: e.name)
    for entry in entries:
        name = f"{rel}/{entry.name}" if rel else entry.name
        dest = os.path.join(root, name)
        if entry.is_symlink() or not safe_name(name):
            continue
        if not entry.is_dir():
            if os.path.lexists(dest):
                return [], 0, name
            names.append(name)
            count += 1
            continue
        files = None if os.path.lexists(dest) else plain_files(entry.path)
        if os.path.islink(dest) or os.path.lexists(dest) and not os.path.isdir(dest):
            return [], 0, name
        inner, n, blocked = ([name], files, None) if files is not None else back_to(kept, root, name)
        if blocked:
            return [], 0, blocked
        names += inner
        count += n
    return names, count, None


def plain_files(folder: str) -> int | None:
    """How many files a folder holds, where nothing in it is a link (None: one is, or it cannot be read)."""
    count, todo = 0, [folder]
    try:
        while todo:
            with os.scandir(todo.pop()) as found:
                for entry in found:
                    if entry.is_symlink():
                        return None
                    if entry.is_dir():
                        todo.append(entry.path)
                    else:
                        count += 1
    except OSError:
        return None
    return count


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
    left them, a folder holding nothing else in one rename, and only while the env's install is this
    checkout's (a copied checkout's record names another's); how many moved. Taking them out uninstalls the
    configuration."""
    if env_owner(prefix, recorded) != checkout.resolve().as_uri():
        return 0
    sources = [prefix / name for name in recorded if name.endswith(".py")]
    drop_bytecode(sources)  # else <package>/__pycache__ stays: an empty namespace package that shadows the next
    for folder in {source.parent / "__pycache__" for source in sources}:  # install
        with contextlib.suppress(OSError):
            folder.rmdir()
    names, count = still_ours(prefix, recorded)
    cleared(tree / ENV_STASH)
    for name in names:
        moves.move(prefix / name, tree / ENV_STASH / name)
    for folder in sorted({(prefix / name).parent for name in names}, key=lambda f: -len(f.parts)):
        prune(folder, prefix)  # the dist-info's folder and the package's, where nothing else is left
    return count


def restore_env(tree: Path, prefix: Path, checkout: Path, moves: Moves) -> tuple[int, str | None]:
    """Put a kept tree's env files back into the env its install was in, all or none: never over a file
    there now, never beside another install of the project (the build then goes the whole way); how many
    moved, and why none did."""
    kept = tree / ENV_STASH
    if kept.is_symlink() or not kept.is_dir():
        return 0, None
    infos = [p.relative_to(kept).as_posix() for p in kept.glob("lib/python*/site-packages/*.dist-info/*")]
    if env_owner(kept, infos) != checkout.resolve().as_uri():
        return 0, "its kept install is another checkout's"
    projects = {n.split("/")[-2].split("-")[0].lower() for n in infos if n.endswith(".dist-info/RECORD")}
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
    cache was written (version.py at another commit) would import as before. Each `__pycache__` is listed once
    (2,000 modules in one package). How many were removed."""
    stems: dict[Path, set[str]] = {}
    for source in sources:
        stems.setdefault(source.parent / "__pycache__", set()).add(source.stem)
    dropped = 0
    for cache, wanted in stems.items():
        with contextlib.suppress(OSError), os.scandir(cache) as found:
            for entry in list(found):
                if entry.name.endswith(".pyc") and entry.name.split(".", 1)[0] in wanted:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
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
