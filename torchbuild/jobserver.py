"""One budget of compile jobs for builds side by side: a GNU make jobserver (the fifo kind).

`inv matrix` serves one (`serve`) and names it in MAKEFLAGS, as make does for its sub-makes. A build
under it takes part (`take`): with ninja 1.13 or newer, ninja joins the jobserver by itself
(MAX_JOBS is left unset, so PyTorch's setup.py lets ninja decide) and one token is held for ninja's
own first job, as make's recipe does for a sub-make. Where setup.py drives CMake, that token is held
only while cmake configures or builds: the jobserver's folder has a `cmake` (`shim`) that goes ahead
of the real one on the build's PATH. Configuring compiles too (compiler identification, then every
try_compile check: hundreds on PyTorch), one program at a time, so it holds one token; `cmake
--version`, `-E`, `-P` and packaging wait for none and keep none from the others. With an older ninja,
the build takes the tokens that are free (at least one) for its whole run and sets MAX_JOBS to their
number.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .run import passthrough

FIFO_AUTH = re.compile(r"--jobserver-auth=fifo:(\S+)")
JOINS_BY_ITSELF = (1, 13)  # ninja 1.13.0: "Ninja now automatically joins a GNU Make jobserver as a client"
SHIMS = ("cmake",)  # not cmake3: PyTorch's setup.py runs `cmake3 --version` whenever PATH has one
# The shim: sh for what compiles nothing (a cmake start costs no Python start); a configure or a `cmake --build`
# goes to `shim`, which holds a token while the real cmake runs.
SHIM = """#!/bin/sh
# torchbuild: cmake for a build under `inv matrix`; configuring or building holds a job token (torchbuild/jobserver.py)
case "$1" in
  --version|-E|-P|-N|--help*|--system-information|--find-package|--install) ;;
  *) [ -z "$TORCHBUILD_JOB_HELD" ] && exec "{python}" -c \\
    'import sys; from torchbuild.jobserver import shim; sys.exit(shim(sys.argv[1:]))' "$0" "$@" ;;
esac
IFS=:
for d in $PATH; do
  if [ -n "$d" ] && [ "$d" != "${0%/*}" ] && [ -x "$d/${0##*/}" ] && [ ! -d "$d/${0##*/}" ]; then
    exec "$d/${0##*/}" "$@"
  fi
done
echo "torchbuild: no ${0##*/} on PATH besides the jobserver's shim in ${0%/*}" >&2
exit 127
"""
HELD = "TORCHBUILD_JOB_HELD"  # set for what a configure or `cmake --build` starts: a cmake it runs takes no second
WAITS = "TORCHBUILD_JOB_WAITS"  # a file the shim adds its seconds of waiting for a token to


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
        shims = Path(tmp) / "bin"
        shims.mkdir()
        for name in SHIMS:
            (shims / name).write_text(SHIM.replace("{python}", sys.executable))
            (shims / name).chmod(0o755)
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


def shims_of(fifo: Path) -> Path | None:
    """The folder of `cmake` shims beside a jobserver `serve` made (None for another's, e.g. make's)."""
    folder = fifo.parent / "bin"
    return folder if (folder / "cmake").is_file() else None


def shim(argv: list[str]) -> int:
    """A configuring cmake or `cmake --build` run through the jobserver's folder (SHIM): hold one token while
    the real cmake, the next of the name on PATH, runs (the configure's one compiler at a time; ninja's first
    job, for which ninja asks the jobserver for no token)."""
    here = Path(argv[0]).parent
    rest = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != here)
    name = Path(argv[0]).name
    real = shutil.which(name, path=rest)
    if real is None:
        print(f"torchbuild: no {name} on PATH besides the jobserver's shim in {here}", file=sys.stderr)
        return 127
    fifo = fifo_of(os.environ.get("MAKEFLAGS"))
    if fifo is None:
        os.execv(real, [real, *argv[1:]])
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # give the token back
    try:
        with take(fifo, 1) as held:
            if os.environ.get(WAITS) and held.waited >= 0.05:
                with open(os.environ[WAITS], "a") as f:
                    f.write(f"{held.waited:.3f}\n")
            return passthrough([real, *argv[1:]], {**os.environ, HELD: "1"})
    except KeyboardInterrupt:
        return 130


def waited(path: str | None) -> float:
    """The seconds the shims of one build waited for tokens (from its WAITS file, then removed)."""
    if not path or not os.path.exists(path):
        return 0.0
    with open(path) as f:
        total = sum(float(line) for line in f if line.strip())
    os.unlink(path)
    return total
