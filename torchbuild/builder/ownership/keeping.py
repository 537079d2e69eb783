"""What a checkout keeps of its configurations on disk, and the budget on it: observe, decide, act.

    observe  configurations(checkout) -> [Kept]: each tree of torchbuild's (a valid marker), its size on disk
             (allocated blocks, each inode once, no link followed), when it was last built and last used
    decide   over_budget() and chosen() are pure: which kept trees go, least recently used first, never the
             current one, never one used within the recent hours
    act      trees.enforce(): each tree it drops through trees.clean, which renames a kept tree out of the
             configurations' names before it deletes it (a kill halfway leaves `.removing-*`, never a half tree a
             switch brings back)

Last built is the marker's mtime: a build writes it when it finishes. Last used is when the tree was last the
checkout's current one: build/ now; a kept tree when it was set aside, which is the ctime of its folder, set by
the rename that kept it (a rename sets the ctime of what it moves, and nothing writes into a kept tree's top).
Nothing else is stored: a copy of the folder (cp -a, a restore) makes it look recent, which only keeps it longer.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ...locks import STATE
from .records import MARKER, env_prefix, env_recorded, read_marker, recorded_outputs

GIB = 1024 ** 3
REMOVING = ".removing-"  # a kept tree renamed for removal: no configuration's name, finished by the next clean


def trees_dir(checkout: Path) -> Path:
    return checkout / STATE / "trees"


@dataclass(frozen=True)
class Kept:
    """One configuration's tree, as observed."""

    key: str
    path: Path
    bytes: int  # on disk: the tree, and for the current one its files in the checkout and the env
    built: float | None  # when its last complete build finished (None: the last one did not finish)
    used: float  # when it was last the current configuration
    current: bool
    env: str | None  # the env its editable install went into


class Usage:
    """Bytes on disk of files and folders, each inode counted once across every call (hard links, a file both
    in a tree and named by a record), never through a link."""

    def __init__(self) -> None:
        self.seen: set[tuple[int, int]] = set()

    def of(self, st: os.stat_result) -> int:
        ident = (st.st_dev, st.st_ino)
        if ident in self.seen:
            return 0
        self.seen.add(ident)
        return st.st_blocks * 512

    def files(self, paths: Iterable[str]) -> int:
        total = 0
        for path in paths:
            try:
                total += self.of(os.lstat(path))
            except OSError:
                continue
        return total

    def tree(self, top: Path) -> int:
        """A folder's bytes; `top` itself may be a link (build/ put on another disk), nothing below it is followed."""
        total, stack = 0, [str(top.resolve() if top.is_symlink() else top)]
        while stack:
            try:
                entries = os.scandir(stack.pop())
            except OSError:
                continue
            with entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += self.of(st)
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(entry.path)
        return total


def configurations(checkout: Path, usage: Usage | None = None, now: float | None = None) -> list[Kept]:
    """Every configuration tree of torchbuild's in the checkout: build/ first, then the kept ones by name."""
    usage = usage or Usage()
    now = time.time() if now is None else now
    out = []
    build = checkout / "build"
    places = [build] if build.is_dir() else []
    places += sorted(p for p in trees_dir(checkout).glob("*") if p.is_dir() and not p.is_symlink()
                     and not p.name.startswith("."))
    for place in places:
        marker = read_marker(place)
        if marker is None:
            continue  # not torchbuild's: never counted
        current = place == build
        size = usage.tree(place)
        if current:  # its files outside build/: in the checkout, and in the env
            size += usage.files(str(checkout / name) for name in recorded_outputs(marker))
            prefix = env_prefix(marker)
            if prefix is not None:
                size += usage.files(str(prefix / name) for name in env_recorded(marker))
        out.append(Kept(marker.key, place, size, built_at(place) if marker.done else None,
                        now if current else os.lstat(place).st_ctime, current,
                        str(env_prefix(marker) or "") or None))
    return out


def built_at(tree: Path) -> float | None:
    try:
        return os.stat(tree / MARKER).st_mtime
    except OSError:
        return None


def leftovers(checkout: Path) -> list[Path]:
    """Kept trees a removal was stopped in (renamed `.removing-*` first): the next clean finishes them."""
    return sorted(p for p in trees_dir(checkout).glob(f"{REMOVING}*") if p.is_dir() and not p.is_symlink())


def budget_bytes(max_gb: float | None, checkout: Path) -> int:
    """trees.max_gb in bytes; unset: half the disk the checkout is on."""
    if max_gb is not None:
        return int(max_gb * GIB)
    return shutil.disk_usage(checkout).total // 2


# ----------------------------------------------------------------------------- deciding (pure)


def droppable(kept: Sequence[Kept], recent_s: float, now: float) -> list[Kept]:
    """The kept trees a budget or a clean may take, least recently used first: never the current one, never one
    used within `recent_s`."""
    return sorted((k for k in kept if not k.current and now - k.used >= recent_s), key=lambda k: (k.used, k.key))


def over_budget(kept: Sequence[Kept], budget: int, recent_s: float, now: float) -> list[Kept]:
    """The trees that go so that the rest fit `budget`: least recently used first, as few as that takes."""
    total = sum(k.bytes for k in kept)
    out = []
    for tree in droppable(kept, recent_s, now):
        if total <= budget:
            break
        out.append(tree)
        total -= tree.bytes
    return out


def chosen(kept: Sequence[Kept], now: float, older_than_days: float | None = None, keep: int | None = None
           ) -> list[Kept]:
    """What `clean --older-than DAYS` and `clean --keep N` remove: the kept trees unused for that long, and those
    past the N most recently used (the current one is one of the N, and always stays)."""
    ranked = sorted(kept, key=lambda k: (not k.current, -k.used, k.key))
    out = [k for k in ranked if not k.current and older_than_days is not None
           and now - k.used > older_than_days * 86400]
    if keep is not None:
        out += [k for k in ranked[keep:] if not k.current and k not in out]
    return sorted(out, key=lambda k: (k.used, k.key))


def total(kept: Sequence[Kept]) -> int:
    return sum(k.bytes for k in kept)


def shown(n: int) -> str:
    """Bytes as the terminal shows them."""
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / 1024 ** 2:.1f} MiB"


def ago(when: float | None, now: float) -> str:
    if when is None:
        return "never"
    seconds = max(0.0, now - when)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count > 1 else ''} ago"
    return "just now"
