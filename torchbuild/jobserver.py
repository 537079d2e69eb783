"""One budget of compile jobs for builds side by side: a GNU make jobserver (the fifo kind).

`inv matrix` serves one (`serve`) and names it in MAKEFLAGS, as make does for its sub-makes. A build
under it takes part (`take`): with ninja 1.13 or newer, ninja joins the jobserver by itself
(MAX_JOBS is left unset, so PyTorch's setup.py lets ninja decide) and the build holds one token
for ninja's own first job, as make's recipe does for a sub-make. With an older ninja, the build
takes the tokens that are free (at least one) and sets MAX_JOBS to their number.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

FIFO_AUTH = re.compile(r"--jobserver-auth=fifo:(\S+)")
JOINS_BY_ITSELF = (1, 13)  # ninja 1.13.0: "Ninja now automatically joins a GNU Make jobserver as a client"


def fifo_of(makeflags: str | None) -> Path | None:
    """The jobserver fifo named in MAKEFLAGS (None: no fifo jobserver, or it is gone)."""
    found = FIFO_AUTH.search(makeflags or "")
    path = Path(found.group(1)) if found else None
    return path if path is not None and path.is_fifo() else None


def joins_by_itself(ninja_version: str | None) -> bool:
    """Whether this ninja takes its jobs from a jobserver on its own."""
    nums = [int(n) for n in re.findall(r"\d+", ninja_version or "")[:2]]
    return len(nums) == 2 and (nums[0], nums[1]) >= JOINS_BY_ITSELF


@contextlib.contextmanager
def serve(tokens: int) -> Iterator[str]:
    """A jobserver with `tokens` job slots for the builds started inside; yields the MAKEFLAGS value."""
    with tempfile.TemporaryDirectory(prefix="tb-jobs-") as tmp:
        fifo = Path(tmp) / "jobserver"
        os.mkfifo(fifo, 0o600)
        fd = os.open(fifo, os.O_RDWR)  # held open, so a reader never sees end-of-file
        try:
            os.write(fd, b"+" * max(1, tokens))
            yield f"-j{max(1, tokens)} --jobserver-auth=fifo:{fifo}"
        finally:
            os.close(fd)


@dataclass
class Held:
    count: int = 0
    waited: float = 0.0  # seconds spent waiting for the first token


@contextlib.contextmanager
def take(fifo: Path, most: int) -> Iterator[Held]:
    """Hold one token (waiting for it) and up to `most` - 1 more that are free now; give them back after."""
    fd = os.open(fifo, os.O_RDWR)
    held = Held()
    got = b""
    try:
        start = time.monotonic()
        got = os.read(fd, 1)
        held.waited = time.monotonic() - start
        if most > 1:
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
            with contextlib.suppress(BlockingIOError):
                got += os.read(fd, most - 1)
        held.count = len(got)
        yield held
    finally:
        if got:
            os.write(fd, got)
        os.close(fd)
