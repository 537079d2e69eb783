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


@contextlib.contextmanager
def locked(lockfile: Path, what: str, busy: str | None = None) -> Iterator[None]:
    """Hold `lockfile` exclusively while doing `what`; if another process holds it, print
    "<busy> (<holder>); waiting for it to finish" (nothing when busy is None) and wait."""
    lockfile.parent.mkdir(parents=True, exist_ok=True)
    with open(lockfile, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            if busy:
                _console.get().warn(f"{busy} ({holder}); waiting for it to finish")
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(mask(f"pid {os.getpid()}: {what}"))
        fh.flush()
        try:
            yield
        finally:
            fh.truncate(0)
            fcntl.flock(fh, fcntl.LOCK_UN)
