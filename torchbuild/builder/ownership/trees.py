"""Build trees: one per configuration (Python, CUDA, build type), with its files (moves.py).

PyTorch always builds in `build/`, so the tree of the configuration being built is moved into `build/` and
the others wait in `.torchbuild/trees/<key>`, each holding its files from the checkout (`torch/lib`,
`torch/_C*.so`, `torch/version.py`, ...) and from the env. Switching back to a configuration is then an
incremental no-op that imports that configuration's own binaries, instead of a rebuild.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path
from typing import Sequence

from ...errors import TorchbuildError
from ...locks import checkout_lock
from ...run import run
from . import cmaketrees, keeping, moves
from .keeping import REMOVING
from .keeping import trees_dir as trees_dir  # where the kept trees are, asked of this module too
from .records import (
    FOREIGN,
    KEY_RE,
    Record,
    configured_trees,
    env_prefix,
    env_recorded,
    read_marker,
    recorded_outputs,
    unpacked,
)


class Switched(str):
    """What a switch of trees did, for the terminal; `whole`: the tree's files are all back in the checkout and
    env (False: some were not put back, and the configuration is not importable as it was)."""

    whole: bool

    def __new__(cls, text: str, whole: bool = True) -> Switched:
        said = super().__new__(cls, text)
        said.whole = whole
        return said


def activate_tree(checkout: Path, key: str, env: Path | None = None) -> Switched | None:
    """Put `key`'s tree at build/ (keeping the current one, with its files from the checkout, in
    .torchbuild/trees/); return what happened, or None. The current one's files in an env go with it only
    when `key` installs into that same env (its kept record's env, else `env`): configurations of different
    envs (another Python) coexist, each importable in its own. All or nothing: a move that fails puts back
    every move before it and raises."""
    build = checkout / "build"
    stash = trees_dir(checkout)
    current = read_marker(build) if build.exists() else None
    if build.exists() and current and current.key == key:
        return None
    refuse_links([stash, stash / key, *([stash / current.key] if current else [])])
    stash.mkdir(parents=True, exist_ok=True)
    journal = moves.Moves()
    kept = (stash / key).exists()
    empty = build.is_dir() and not any(build.iterdir())  # nothing of anyone's: used as it is (a link to a disk)
    if empty and kept and not build.is_symlink():
        build.rmdir()
    users = not_ours(build, current, checkout) if current else []  # the project's own trees in build/: they stay
    held = stash / f".held-{os.getpid()}"
    coming = (env_prefix(read_marker(stash / key)) if kept else None) or env
    try:
        for tree in users:
            journal.move(tree, held / tree.relative_to(build))
        message = [keep_current(checkout, current, coming, journal)] \
            if (build.exists() or build.is_symlink()) and not (empty and not kept) else []
        back = bring_back(checkout, key, journal) if read_marker(stash / key) else Switched(f"new tree for {key}")
        message.append(back)
        for tree in users:
            journal.move(held / tree.relative_to(build), tree)
        if users:
            shutil.rmtree(held)  # the folders that held them, empty
            message.append(f"left {len(users)} tree(s) of the project's own builds where they are "
                           f"({', '.join(t.relative_to(checkout).as_posix() for t in users)})")
    except BaseException:
        journal.undo()
        raise
    return Switched("; ".join(message), back.whole)


def keep_current(checkout: Path, current: Record | None, coming: Path | None,
                 journal: moves.Moves) -> str:
    """Move build/ into the kept trees with its files from the checkout, and from the env where the coming
    configuration installs into that env (`coming`: its env; None: not known); a build/ torchbuild did not
    make is moved aside whole, untouched. What happened, for the terminal."""
    build, stash = checkout / "build", trees_dir(checkout)
    old = current.key if current else f"{FOREIGN}{time.strftime('%Y%m%d-%H%M%S')}"
    target = stash / old
    while not current and (target.exists() or target.is_symlink()):  # two in one second: never onto another
        target = stash / f"{old}-{time.time_ns() % 10 ** 6}"
    if current is None:
        journal.move(build, target)
        return f"build/ was not made by torchbuild: moved it, untouched, to {target} (to bring it back: inv " \
               f"clean && mv {target} {build})"
    if target.exists():
        shutil.rmtree(target)
    moved = moves.stash(checkout, build, recorded_outputs(current), journal,
                        unpacked(current.outputs, current.contents))
    prefix = env_prefix(current)
    same_env = prefix is not None and coming in (None, prefix)
    from_env = moves.stash_env(build, prefix, checkout, env_recorded(current), journal) if prefix and same_env \
        else 0
    journal.move(build, target)
    moves.tidy(checkout, recorded_outputs(current))
    return f"kept the {old} tree in {target}" + (f" with its {moved} file(s) from the checkout" if moved else "") \
        + (f" and its {from_env} file(s) from the env" if from_env else "")


def bring_back(checkout: Path, key: str, journal: moves.Moves) -> Switched:
    """Move `key`'s kept tree to build/ and its files back into the checkout and its env, all or none of each.
    What happened, for the terminal."""
    build = checkout / "build"
    journal.move(trees_dir(checkout) / key, build)
    moved, why = moves.restore(checkout, build, journal)
    prefix = env_prefix(read_marker(build))
    to_env, env_why = moves.restore_env(build, prefix, checkout, journal) if prefix else (0, None)
    return Switched(f"restored the {key} tree" + (f" and its {moved} file(s) in the checkout" if moved else "")
                    + (f" and its {to_env} in the env" if to_env else "")
                    + "".join(f" (its files were not put back: {w}; the build goes the whole way)"
                              for w in (why, env_why) if w), not (why or env_why))


def refuse_links(places: Sequence[Path]) -> None:
    """A kept tree's place that is a link torchbuild did not make (it keeps trees by renaming folders): never
    followed, so nothing is built, moved or removed through it."""
    for place in places:
        if place.is_symlink():
            raise TorchbuildError(f"{place} is a link to {os.path.realpath(place)}, which torchbuild did not make: "
                                  "a kept tree is a folder; nothing was moved",
                                  f"remove the link (rm {place}), then run the command again")


def build_lock(checkout: Path) -> contextlib.AbstractContextManager[None]:
    """One build (or clean, or patching) per checkout at a time; the second waits and says so."""
    return checkout_lock(checkout, f"building in {checkout}", f"another build is running in {checkout}")


def remove_tree(checkout: Path, key: str) -> int:
    """Remove `key`'s tree (build/ or kept) and its files in the checkout; the bytes freed."""
    return sum(gone[1] for gone in clean(checkout, key=key, locked=False, missing_ok=True, unmap_install=False)[0])


def unmap(checkout: Path, marker: Record) -> str | None:
    """Uninstall the editable install of the checkout from the env the configuration built into (its marker's
    python), once its compiled files in the checkout are gone: it would import a package without them. The
    env named where it was uninstalled; None where it holds no install of this checkout."""
    configure = marker.configure
    python = Path(configure["python"]) if configure.get("python") else None
    prefix = python.parent.parent if python else None
    record = moves.editable_record(prefix, checkout) if prefix and python and python.is_file() else None
    if record is None or python is None:
        return None
    name = record.parent.name.split("-")[0]
    run([str(python), "-m", "pip", "uninstall", "-y", "-q", name], capture=True, echo=False)
    return f"{name} from {prefix}"


def tree_size(path: Path) -> int:
    """A folder's bytes on disk (keeping.Usage: each inode once, no link followed)."""
    return keeping.Usage().tree(path)


def retired(tree: Path) -> Path:
    """A kept tree renamed out of the configurations' names before it is deleted: a kill while it is deleted
    leaves `.removing-*`, which no switch takes for a configuration and the next `clean --all` finishes."""
    target = tree.with_name(f"{REMOVING}{tree.name}-{os.getpid()}")
    tree.rename(target)
    return target


def remove_tree_folder(tree: Path, keep: Sequence[Path] = ()) -> None:
    """Delete a tree torchbuild made, but the trees in `keep` inside it; through a link (build/ put on another
    disk), what is in the folder it points to, which stays, with the link."""
    if not keep and not tree.is_symlink():
        shutil.rmtree(tree)
        return
    for entry in list(tree.resolve().iterdir() if tree.is_symlink() else tree.iterdir()):
        inside = tree / entry.name
        if any(inside == k for k in keep):
            continue
        if any(k.is_relative_to(inside) for k in keep):
            remove_tree_folder(inside, keep)
        elif entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def not_ours(tree: Path, marker: Record, checkout: Path) -> list[Path]:
    """CMake trees of this project inside a configuration's tree that none of its builds configured (the user's
    own `pip install -e .` into a project's default build-dir, `build/{wheel_tag}`): never removed."""
    ours = set(configured_trees(marker))
    return [t for t in cmaketrees.inside(tree) if cmaketrees.configured_for(t) == checkout.resolve()
            and f"build/{t.relative_to(tree).as_posix()}" not in ours]


def clean(checkout: Path, all_trees: bool = False, key: str | None = None, dry_run: bool = False,
          locked: bool = True, missing_ok: bool = False, unmap_install: bool = True
          ) -> tuple[list[tuple[str, int, list[str], str | None]], list[Path]]:
    """Remove build trees torchbuild made (never sources, never a tree without a valid marker): the
    current one, `key`'s, or all (`dry_run`: only say which), and the editable install that imports the
    current one's files (`unmap`). Returns ((what, bytes, the checkout's files removed with it, the install
    uninstalled) for each tree, the trees kept as not torchbuild's)."""
    if key is not None and (not KEY_RE.fullmatch(key) or ".." in key):
        raise TorchbuildError(f"--config '{key}' is not a configuration name (like py3.12-cpu-release)",
                              "run `inv clean --all`, or pass a name from .torchbuild/trees/")
    build = checkout / "build"
    trees = [build] if build.is_dir() else []
    trees += sorted(p for p in trees_dir(checkout).glob("*") if p.is_dir() and not p.is_symlink()
                    and not p.name.startswith(REMOVING))
    removed: list[tuple[str, int, list[str], str | None]] = []
    kept: list[Path] = []
    with build_lock(checkout) if locked else contextlib.nullcontext():
        for half in keeping.leftovers(checkout) if all_trees else []:
            removed.append((f"what a stopped removal left ({half})", tree_size(half), [], None))
            if not dry_run:
                shutil.rmtree(half)
        for tree in trees:
            marker = read_marker(tree)
            name = marker.key if marker else tree.name
            wanted = all_trees or (name == key if key else tree == build)
            if not wanted:
                continue
            if marker is None:
                kept.append(tree)
                continue
            size = tree_size(tree)
            files = sorted(recorded_outputs(marker)) if tree == build else []  # the checkout holds them now
            users = not_ours(tree, marker, checkout)
            kept += users
            uninstalled = None
            if not dry_run:
                files = moves.remove(checkout, recorded_outputs(marker)) if tree == build else []
                remove_tree_folder(retired(tree) if tree != build and not users else tree, users)
                uninstalled = unmap(checkout, marker) if files and unmap_install else None
            removed.append((f"{name} ({tree})", size - sum(tree_size(u) for u in users), files, uninstalled))
    if key and not removed and not missing_ok:
        known = sorted(m.key for tree in trees if (m := read_marker(tree)))
        raise TorchbuildError(f"no build tree for configuration '{key}'", f"known: {', '.join(known) or 'none'}")
    return removed, kept


def cannot_exceed(checkout: Path, budget: int) -> bool:
    """Whether the trees fit the budget without measuring them: the disks that hold them use less than it
    (a default budget, half the disk, on a disk less than half full: no walk after each build)."""
    build = checkout / "build"
    marker = read_marker(build) if build.is_dir() else None
    places = [checkout, build.resolve() if build.exists() else checkout, env_prefix(marker) or checkout]
    disks: dict[int, Path] = {}
    for place in places:
        try:
            disks.setdefault(os.stat(place).st_dev, place)
        except OSError:
            return False
    return sum(shutil.disk_usage(place).used for place in disks.values()) <= budget


def enforce(checkout: Path, max_gb: float | None, recent_hours: float) -> list[str]:
    """After a build: drop the least recently used kept trees until the checkout's trees fit trees.max_gb;
    what was dropped, for the terminal."""
    budget = keeping.budget_bytes(max_gb, checkout)
    if cannot_exceed(checkout, budget):
        return []
    with build_lock(checkout):
        now = time.time()
        kept = keeping.configurations(checkout, now=now)
        going = keeping.over_budget(kept, budget, recent_hours * 3600, now)
        for tree in going:
            clean(checkout, key=tree.key, locked=False, missing_ok=True, unmap_install=False)
    lines = [f"dropped the kept tree of {tree.key} ({keeping.shown(tree.bytes)}, last used "
             f"{keeping.ago(tree.used, now)}) to fit trees.max_gb ({keeping.shown(budget)}): its next build starts "
             "from nothing, its units from the compiler cache" for tree in going]
    left = keeping.total(kept) - keeping.total(going)
    if left > budget:
        lines.append(f"the trees still take {keeping.shown(left)}, over trees.max_gb ({keeping.shown(budget)}): the "
                     f"current one and those used within trees.keep_recent_hours ({recent_hours:g}) stay "
                     "(`torchbuild trees` lists them; `torchbuild clean --config KEY` removes one)")
    return lines
