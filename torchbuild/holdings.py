"""Everything torchbuild keeps on disk for a checkout, measured once: its configurations and the budget on them
(builder/ownership/keeping.py), then the matrix's slots of it, its bisection, the store and the compiler cache,
each with its size and what removes it. `torchbuild trees` prints it (`--json` for scripts); `clean --all`
removes what it names as idle: slots no matrix holds, a finished bisection, store entries no env links to.

A slot is a copy of the checkout torchbuild syncs (its `.torchbuild/slot-files.json` names it), the bisection its
own folder under the checkout's `.torchbuild/`, a store entry a wheel it unpacked: each is torchbuild's by the
channel that made it. Anything else in the cache dir is never counted or removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .bisection.worktree import read_state
from .bisection.worktree import remove as remove_worktree
from .builder.ownership import keeping
from .builder.ownership.keeping import Kept, Usage, ago, shown
from .builder.ownership.trees import clean
from .builder.slots import SLOT_FILES, slot_path
from .config import Config
from .envs import shared
from .errors import TorchbuildError
from .locks import STATE, locked


@dataclass(frozen=True)
class Holding:
    """One thing kept beside the configurations: a slot, the bisection, the store, the compiler cache."""

    kind: str
    path: Path
    bytes: int
    state: str  # what it is now, in words
    removed_by: str  # the command that removes it
    idle: tuple[Path, ...] = ()  # what `clean --all` removes of it now
    trees: tuple[Kept, ...] = ()  # a slot's configurations


@dataclass(frozen=True)
class Holdings:
    checkout: Path
    configurations: tuple[Kept, ...]
    budget: int
    budget_from: str
    recent_hours: float
    others: tuple[Holding, ...]
    now: float = field(default_factory=time.time)


def survey(cfg: Config) -> Holdings:
    """Look once: every tree and folder torchbuild keeps for the checkout, sized on disk (each inode once)."""
    checkout, usage, now = cfg.source_path, Usage(), time.time()
    trees = keeping.configurations(checkout, usage, now)
    others = [*slots(cfg, usage, now), *filter(None, [bisection(checkout, usage),
                                                      store(cfg.cache_root / "store", usage),
                                                      compiler_cache(cfg, usage)])]
    origin = cfg.origins.get("trees.max_gb")
    where = f", {origin}" if origin else ", by default half the disk the checkout is on"
    return Holdings(checkout, tuple(trees), keeping.budget_bytes(cfg.trees.max_gb, checkout), f"trees.max_gb{where}",
                    cfg.trees.keep_recent_hours, tuple(others), now)


@contextlib.contextmanager
def slot_free(slot: Path) -> Iterator[bool]:
    """Hold the slot's lock (as `matrix` does while a session uses it) when no one else does; yields whether."""
    lockfile = slot.with_suffix(".lock")  # made if missing, as `matrix` makes it: a matrix starting now waits
    with open(lockfile, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True


def slot_folders(cfg: Config) -> list[Path]:
    """The checkout's matrix slots: the folders `slot_path` names that a sync made (their listing of files)."""
    parent = slot_path(cfg.cache_root, cfg.source_path, 1).parent
    if not parent.is_dir() or parent.is_symlink():
        return []
    return sorted((p for p in parent.iterdir() if p.name.isdigit() and p.is_dir() and not p.is_symlink()
                   and (p / STATE / SLOT_FILES).is_file()), key=lambda p: int(p.name))


def slots(cfg: Config, usage: Usage, now: float) -> list[Holding]:
    out = []
    for slot in slot_folders(cfg):
        trees = tuple(keeping.configurations(slot, usage, now))
        size = sum(t.bytes for t in trees) + usage.tree(slot)
        with slot_free(slot) as free:
            out.append(Holding("slot", slot, size, "idle" if free else "in use by a running matrix",
                               "torchbuild clean --all", (slot,) if free else (), trees))
    return out


def bisection(checkout: Path, usage: Usage) -> Holding | None:
    place = checkout / STATE / "bisect"  # bisection.worktree.home's, which makes .torchbuild/ where it asks: a look
    if not place.is_dir() or place.is_symlink():
        return None
    state = finished(place)
    done = state is True
    said = state if isinstance(state, str) and state else "finished" if done else \
        "no state (a bisection that never started)"
    return Holding("bisection", place, usage.tree(place), said,
                   "torchbuild clean --all" if done else "torchbuild bisect --reset", (place,) if done else ())


def finished(place: Path) -> bool | str:
    """True where the bisection found its commit; else what it is, in words."""
    try:
        state = read_state(place)
    except TorchbuildError:
        return "its state is damaged"
    if not state:
        return ""
    return True if state.get("result") else f"in progress, {len(state.get('steps') or [])} step(s) done"


def store(path: Path, usage: Usage) -> Holding | None:
    """The store of big build requirements (envs/shared.py), shared by every checkout's envs."""
    found = shared.entries(path)
    if not found:
        return None
    size = usage.tree(path)
    idle = tuple(e for e in found if not shared.referenced(e))
    return Holding("store", path, size, f"{len(found)} unpacked wheel(s), {len(idle)} linked by no env",
                   "torchbuild clean --all (the entries no env links to)", idle)


def compiler_cache(cfg: Config, usage: Usage) -> Holding | None:
    folders = [cfg.cache_root / name for name in ("ccache", "sccache") if (cfg.cache_root / name).is_dir()]
    if not folders:
        return None
    size = sum(usage.tree(f) for f in folders)
    return Holding("compiler cache", folders[0] if len(folders) == 1 else cfg.cache_root, size,
                   f"bounded by cache.max_size_gb ({cfg.cache.max_size_gb:g} GiB), which the cache keeps itself",
                   "; ".join(f"CCACHE_DIR={f} ccache -C" if f.name == "ccache" else
                             f"rm -r {f} (sccache has no command that empties it)" for f in folders)
                   + " (or a lower cache.max_size_gb)")


# ----------------------------------------------------------------------------- what it says (pure)


def tree_line(tree: Kept, now: float) -> str:
    built = ago(tree.built, now) if tree.built else "its last build did not finish"
    used = "current" if tree.current else f"last used {ago(tree.used, now)}"
    return f"{tree.key:<32} {shown(tree.bytes):>11}  {used}; built {built}; env {tree.env or '-'}"


def lines(h: Holdings) -> list[str]:
    """What `torchbuild trees` prints."""
    total = keeping.total(h.configurations)
    out = [f"configurations of {h.checkout}: {shown(total)} of a budget of {shown(h.budget)} ({h.budget_from}); a kept "
           f"tree used within {h.recent_hours:g} hour(s) stays (trees.keep_recent_hours)"]
    out += [f"  {tree_line(t, h.now)}" for t in h.configurations] or ["  none"]
    if total > h.budget:
        out.append(f"  over the budget by {shown(total - h.budget)}: the next build drops the least recently used "
                   "kept trees it may")
    for held in h.others:
        out.append(f"{held.kind} {held.path}: {shown(held.bytes)}, {held.state}; removed by {held.removed_by}")
        out += [f"  {tree_line(t, h.now)}" for t in held.trees]
    out.append(f"in all: {shown(total + sum(o.bytes for o in h.others))}")
    return out


def as_json(h: Holdings) -> dict[str, Any]:
    """What `torchbuild trees --json` prints: sizes in bytes, times as seconds since the epoch."""
    def tree(t: Kept) -> dict[str, Any]:
        return {"key": t.key, "path": str(t.path), "bytes": t.bytes, "built": t.built, "used": t.used,
                "current": t.current, "env": t.env}
    return {"checkout": str(h.checkout), "budget": h.budget, "budget_from": h.budget_from,
            "keep_recent_hours": h.recent_hours, "configurations": [tree(t) for t in h.configurations],
            "others": [{"kind": o.kind, "path": str(o.path), "bytes": o.bytes, "state": o.state,
                        "removed_by": o.removed_by, "idle": [str(p) for p in o.idle],
                        "configurations": [tree(t) for t in o.trees]} for o in h.others]}


# ----------------------------------------------------------------------------- clean --all


def clean_idle(h: Holdings, dry_run: bool) -> list[tuple[str, int]]:
    """Remove what `clean --all` reaches beyond the checkout's trees (`h.others`' idle parts): (what, bytes)."""
    out = []
    for held in h.others:
        for path in held.idle:
            size = Usage().tree(path)
            if not dry_run and not remove(held, path):
                continue
            out.append((f"{held.kind} {path.name if held.kind == 'store' else path}", size))
    return out


def remove(held: Holding, path: Path) -> bool:
    """Remove one idle thing, each under the lock its user takes; False where it became busy meanwhile."""
    if held.kind == "store":
        shared.prune(path)
        return not path.exists()
    if held.kind == "bisection":
        with locked(path.parent / "bisect.lock", "removing the finished bisection", "a bisection is running"):
            if finished(path) is not True:  # a new one began since it was looked at
                return False
            remove_worktree(path.parent.parent, path)
        return True
    with slot_free(path) as free:
        if free:
            clean(path, all_trees=True, locked=False)
            shutil.rmtree(path)
        return free
