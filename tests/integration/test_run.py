"""The one runner: literal arguments, echo of changed env only, dry-run, errors, Ctrl-C stops the tree."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from ..helpers import sigint_default


def _alive(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def test_sigint_stops_the_whole_tree_and_exits_130(tmp_path):
    marker = "61.7531"  # a sleep length no other process uses
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from torchbuild.errors import Interrupted
        from torchbuild.run import run
        try:
            run(["sh", "-c", "sleep {marker} & sleep {marker} & echo started; wait"], on_line=print)
        except Interrupted as exc:
            print(exc.message, flush=True)
            sys.exit(exc.code)
    """))
    proc = subprocess.Popen([sys.executable, "-u", str(script)], stdout=subprocess.PIPE, text=True,
                            preexec_fn=sigint_default)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    assert len(_alive(marker)) >= 2
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "process tree was stopped" in out
    deadline = time.monotonic() + 5
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive(marker) == []
