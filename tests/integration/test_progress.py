"""The progress line, the compile count, and the processes the watchers count (from the lines builds print)."""

from __future__ import annotations

from pathlib import Path


def test_an_exited_compiler_not_yet_reaped_is_not_counted():
    import subprocess
    import time

    from torchbuild import usage

    child = subprocess.Popen(["true"])  # exits at once; not waited for: a zombie until reaped
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child.pid}/stat").read_text().split(") ", 1)[1][0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert child.pid not in usage.processes()  # `inv matrix`'s "most compilers at once" never counts one
    child.wait()
