"""What changed in the checkout, read without git's filters.

The working tree as git lists it, with every submodule's own files whatever its `ignore =` line says
(PyTorch marks several `ignore = dirty`), recorded as a build begins; and a source saved while the build
ran, whose objects ninja would otherwise never compile again.
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Mapping

from ... import console as _console
from ...digest import digest
from ...run import run
from ..cachestats import compile_commands
from ..evidence import index_hidden
from ..plan import COMPILER_ENVIRONMENT
from .channels import tracked
from .cmaketrees import ninja_of
from .records import OWN


def worktree(checkout: Path, prefix: str = "") -> dict[str, list[int] | None]:
    """Every file git lists as changed, new or deleted, by size and mtime; a submodule with changes by
    its own files, recursively, whatever its `ignore =` line in .gitmodules says (PyTorch marks several
    `ignore = dirty`: git status hides their edits); and every file an index bit hides from git status
    (assume-unchanged, skip-worktree: sparse checkouts set it), whether it changed or not. torchbuild's and
    the build's own folders (OWN: build/, nox's .nox/ of `torchbuild matrix`) are left out by pathspec, so git
    never walks them."""
    own = [f":(exclude,top){name}" for name in OWN] if not prefix else []
    with ThreadPoolExecutor(1) as beside:  # git's two answers at once: the no-op waits for one
        hidden = beside.submit(index_hidden, checkout)
        out = run(["git", "status", "--porcelain", "-z", "--untracked-files=all", "--ignore-submodules=none", "--",
                   ".", *own], cwd=checkout, capture=True, echo=False, check=False).stdout
        entries = status_entries(checkout, out, prefix)
        for name in hidden.result():  # assume-unchanged, skip-worktree: git status never lists their edits
            if prefix + name not in entries:
                entries[prefix + name] = stat_entry(checkout / name)
    return entries


def status_entries(checkout: Path, out: str, prefix: str) -> dict[str, list[int] | None]:
    """`git status --porcelain -z`'s entries by size and mtime; a changed submodule by its commit and its own
    files (worktree, recursively)."""
    entries: dict[str, list[int] | None] = {}
    fields = iter(out.split("\0"))
    for entry in fields:
        if not entry:
            continue
        name = entry[3:]
        if entry[0] in "RC":  # a rename's second field is where it came from: changed too
            entries[prefix + next(fields, "")] = None
        where = os.path.join(checkout, name)
        if entry[:2] != "??" and os.path.isdir(where) and os.path.exists(os.path.join(where, ".git")):
            head = run(["git", "rev-parse", "HEAD"], cwd=Path(where), capture=True, echo=False, check=False).stdout
            entries[prefix + name] = [int(head.strip()[:12] or "0", 16)]  # its commit, and its files:
            entries.update(worktree(Path(where), f"{prefix}{name}/"))
            continue
        try:  # untracked entries are files (--untracked-files=all): one stat each, no more
            st = os.stat(where)
        except OSError:
            st = None
        entries[prefix + name] = [st.st_size, st.st_mtime_ns] if st and not os.path.isdir(where) else None
    return entries


def stat_entry(path: Path) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return None if os.path.isdir(path) else [st.st_size, st.st_mtime_ns]


def worktree_state(checkout: Path, changes: bool) -> list[object]:
    """The commit, and with `changes` every changed or new file (submodules' too) by size and mtime."""
    if not (checkout / ".git").exists():
        return []
    state: list[object] = [run(["git", "rev-parse", "HEAD"], cwd=checkout, capture=True, echo=False,
                               check=False).stdout.strip()]
    if changes:
        state.extend(sorted(worktree(checkout).items()))
    return state


def edited_meanwhile(checkout: Path, before: Mapping[str, object] | None, files: Mapping[str, object],
                     trees: list[Path], now: Mapping[str, object] | None = None) -> list[str]:
    """Sources edited while the build ran (after it began, before it ended: the compiler may have read the
    old text, and ninja, seeing the object newer, would never compile it again). Their objects are removed
    from the trees, so the next build compiles them, and the build is not recorded as complete. (Any other
    change is seen by the next build against the working tree recorded as this one began.) `now`: the working
    tree after the build, where it was taken already."""
    if before is None:
        return []
    now = worktree(checkout) if now is None else now
    changed = {p for p in set(before) | set(now) if before.get(p) != now.get(p) and p not in files}
    raced = sorted(p for p in changed if p in before or p in tracked(checkout, changed))
    stale = invalidate(trees, [checkout / p for p in raced]) if raced else 0
    if stale:
        _console.get().warn(f"{', '.join(raced[:3])}{' ...' if len(raced) > 3 else ''} changed while the build ran: "
                            f"what it built may hold the old text; the {stale} output(s) made from it are removed, "
                            "so the next `inv build` builds them again (until then this configuration is not up "
                            "to date)")
    return raced if stale else []


def invalidate(trees: list[Path], sources: list[Path]) -> int:
    """Remove every output of the trees' ninja graphs that the deps log says was made from one of `sources`
    (the trees' own files); how many."""
    wanted = {os.path.normpath(s) for s in sources}
    removed = 0
    for tree in trees:
        ninja = ninja_of(tree)
        if ninja is None or not (tree / "build.ninja").is_file():
            continue
        listed = run([ninja, "-C", str(tree), "-t", "deps"], capture=True, echo=False, check=False).stdout
        output = None
        for line in listed.splitlines():
            if line and not line.startswith(" "):
                output = line.split(": #deps", 1)[0]
            elif output and line.strip() and os.path.normpath(tree / line.strip()) in wanted:
                with contextlib.suppress(OSError):
                    (tree / output).unlink()
                    removed += 1
                output = None
    return removed


def compiler_environment(old: Mapping[str, object] | None, new: Mapping[str, str]) -> str | None:
    """Where a variable the compiler reads as it runs changed since the tree's last configure (CPATH, ...:
    ninja never sees it, so a rebuild would keep every object): what must be done, for the terminal (the
    verdict then removes every output of the trees, `recompile_all`); None: none changed."""
    if old is None:
        return None
    changed = [k for k in COMPILER_ENVIRONMENT if old.get(k) != new.get(k)]
    if not changed:
        return None
    return (f"{', '.join(changed)} changed: the compiler reads {'them' if len(changed) > 1 else 'it'} as it runs "
            "and ninja does not, so every object is compiled again (the compiler cache serves what is the same)")


def recompile_all(trees: Iterable[Path]) -> None:
    """Remove every output of the trees' ninja graphs (`ninja -t clean`): each compiles again."""
    for tree in trees:
        ninja = ninja_of(tree)
        if ninja and (tree / "build.ninja").is_file():
            run([ninja, "-C", str(tree), "-t", "clean"], capture=True, echo=False, check=False)


SOURCE = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".inc", ".S", ".s", ".asm", ".mm")


def source_folders(checkout: Path, trees: list[Path]) -> dict[str, str]:
    """Each folder of the checkout holding a unit the trees compile (compile_commands.json), by a digest of the
    source files' names in it: a plain `file(GLOB)` reads them at configure time only, and a new one where
    git does not look (an ignored file, a submodule marked `ignore = all`) is seen by nothing else."""
    root, folders = checkout.resolve(), set()
    built = [t.resolve() for t in trees]
    parents = {os.path.dirname(source) for tree in trees for source in compile_commands(tree)}  # a few, of thousands
    for parent in parents:
        folder = Path(parent)
        if folder.is_relative_to(root) and not any(folder.is_relative_to(t) for t in built):
            folders.add(folder.relative_to(root).as_posix())
    return {f: listing(checkout / f) for f in sorted(folders)}


def listing(folder: Path) -> str:
    with contextlib.suppress(OSError):
        return digest(sorted(n for n in os.listdir(folder) if n.endswith(SOURCE) and not n.startswith(".")))
    return ""


def sources_added(checkout: Path, recorded: object) -> str | None:
    """Why the tree's compiled folders are not as its last build left them (None: they are, or none recorded)."""
    if not isinstance(recorded, dict):
        return None
    for folder, was in recorded.items():
        if isinstance(folder, str) and listing(checkout / folder) != was:
            return f"a source file was added to or removed from {folder} since its last build (a glob may read it)"
    return None
