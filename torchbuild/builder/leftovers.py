"""What a build killed with -9 leaves running, found and stopped by the next build of the checkout.

`kill -9` of `inv build` gives it no chance to stop its children: pip, setup.py, cmake, ninja and the
compilers go on, and the next build would run a second `cmake --build` in the same build/ beside them.
So the build's command runs with an id in its environment (every process it starts inherits it), the id
is recorded under the build lock in `.torchbuild/running`, and the next build, holding the lock (so the
recorder is gone), stops whatever still carries it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from ..locks import STATE

BUILD_ID = "TORCHBUILD_BUILD_ID"  # in the environment of every process a build starts (they inherit it)
RUNNING = "running"  # .torchbuild/running: the id of the build under way, while its command runs


def mark_running(checkout: Path) -> str:
    """Record, under the build lock, the id the build command's process tree carries in its environment."""
    build_id = f"{os.getpid()}-{time.time_ns()}"
    (checkout / STATE / RUNNING).write_text(build_id)
    return build_id


def finished(checkout: Path) -> None:
    """The build's command is over: nothing of it is left to stop."""
    (checkout / STATE / RUNNING).unlink(missing_ok=True)


def stop_leftovers(checkout: Path) -> int:
    """Stop what a build killed with -9 left running (pip, setup.py, cmake, ninja, compilers keep going
    without it): the processes whose environment carries its recorded id. Run under the build lock, so
    the build that recorded it is gone. How many were stopped."""
    marker = checkout / STATE / RUNNING
    try:
        build_id = marker.read_text().strip()
    except OSError:
        return 0
    needle = f"{BUILD_ID}={build_id}".encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 3
        while sig == signal.SIGTERM and time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in found):
            time.sleep(0.05)
    marker.unlink(missing_ok=True)
    return len(found)
