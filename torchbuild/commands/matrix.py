"""`inv matrix`: nox's build sessions, then the summary table."""

from __future__ import annotations

import sys
from typing import Sequence

from .. import console as _console
from .. import matrix as m
from ..config import Config
from ..run import run
from . import table


def matrix(cfg: Config, failed: bool = False, sessions: Sequence[str] = (), force: bool = False) -> int:
    """Run nox's build sessions (all, some, or the failed ones), then print the summary table."""
    con = _console.get()
    names = list(sessions)
    if failed:
        names = [r.session for r in m.read_summary(cfg.root) if r.result == "failed"]
        if not names:
            con.info("no failed session in dist/matrix-summary.json: nothing to run again")
            return 0
    argv = [sys.executable, "-m", "nox", "--noxfile", str(cfg.root / "noxfile.py"), "-s", *(names or ["build"])]
    if force:
        argv += ["--", "--force"]
    result = run(argv, cwd=cfg.root, check=False, on_line=con.result)
    records = m.read_summary(cfg.root)
    if records:
        header = ("session", "python", "cuda", "result", "time", "ccache hits", "path", "wheel / reason")
        table(m.table(records), header)
        con.info(f"summary: {cfg.root / 'dist' / m.SUMMARY}")
    if result.returncode:
        con.warn("some sessions failed; `inv matrix --failed` runs only those again")
    return result.returncode
