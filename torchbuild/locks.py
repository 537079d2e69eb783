"""File locks for everything two torchbuild processes may do at once (clone, env, build, mirrors).

`locked` takes an exclusive flock; when another process holds it, it says who and waits. The lock
file records the holder's pid and what it is doing, so the waiting side can name it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator

from . import console as _console
from .console import mask
from .errors import TorchbuildError

STATE = ".torchbuild"  # a checkout's own state folder: its locks, its kept build trees


@contextlib.contextmanager
def locked(lockfile: Path, what: str, busy: str | None = None) -> Iterator[None]:
    """Hold `lockfile` exclusively while doing `what`; if another process holds it, print
    "<busy> (<holder>); waiting for it to finish" (nothing when busy is None) and wait."""
    lockfile.parent.mkdir(parents=True, exist_ok=True)
    with open(lockfile, "a+b", buffering=0) as fh:  # unbuffered: nothing is left to flush at close on a full disk
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().decode(errors="replace").strip() or "another process"
            if busy:
                _console.get().warn(f"{busy} ({holder}); waiting for it to finish")
            fcntl.flock(fh, fcntl.LOCK_EX)
        with contextlib.suppress(OSError):  # who holds it is a courtesy: a full disk must not stop the lock
            fh.seek(0)
            fh.truncate()
            fh.write(mask(f"pid {os.getpid()}: {what}").encode())
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                fh.truncate(0)
            fcntl.flock(fh, fcntl.LOCK_UN)


def state_dir(checkout: Path) -> Path:
    """The checkout's .torchbuild/ (locks, kept trees), which git is told to ignore before it is made:
    `git status` (and so a matrix session's fingerprint) never sees its files come and go."""
    if not checkout.is_dir():
        raise TorchbuildError(f"{checkout} is not a folder: there is no checkout here",
                              "run the command inside a checkout, pass --path, or run `torchbuild clone` first")
    exclude_state(checkout)
    (checkout / STATE).mkdir(exist_ok=True)
    return checkout / STATE


def exclude_file(checkout: Path) -> Path | None:
    """The info/exclude git reads for the checkout (`git rev-parse --git-path info/exclude`): a worktree's
    and a submodule's .git file points at their own git dir, and info/ lives in its common dir."""
    git_dir = checkout / ".git"
    if git_dir.is_file():
        text = git_dir.read_text(errors="replace").strip()
        git_dir = (checkout / text.split(":", 1)[1].strip()).resolve() if text.startswith("gitdir:") else git_dir
    if not git_dir.is_dir():
        return None
    common = git_dir / "commondir"  # a linked worktree: git reads info/exclude from the main git dir
    if common.is_file():
        git_dir = (git_dir / common.read_text(errors="replace").strip()).resolve()
    return git_dir / "info" / "exclude"


def exclude_state(checkout: Path) -> None:
    """Keep .torchbuild/ out of the checkout's `git status` (in info/exclude, not .gitignore)."""
    exclude = exclude_file(checkout)
    if exclude is None:
        return
    try:
        current = exclude.read_text() if exclude.exists() else ""
        if f"/{STATE}/" not in current.split():
            exclude.parent.mkdir(parents=True, exist_ok=True)
            with open(exclude, "a") as fh:  # appended, never rewritten: a build beside us may be reading it
                fh.write(("" if current.endswith("\n") or not current else "\n") + f"/{STATE}/\n")
    except OSError as exc:  # immutable, read-only, or a folder in the file's place
        raise TorchbuildError(f"cannot tell git to ignore {checkout / STATE}: {exclude} is not writable "
                              f"({exc.strerror or exc})", f"make {exclude} a writable file (or add the line "
                              f"/{STATE}/ to it yourself), then run the command again") from exc


def checkout_lock(checkout: Path, what: str, busy: str | None = None) -> contextlib.AbstractContextManager[None]:
    """The one lock of a checkout's build/ and branches: builds, cleans and patching take turns on it."""
    return locked(state_dir(checkout) / "lock", what, busy)
