"""`inv nightly`: Python-only development over prebuilt nightly binaries."""

from __future__ import annotations

import os

from .. import console as _console
from .. import envs
from ..config import Config
from ..nightly import NightlyRequest, nightly, plan_lines


def run_nightly(cfg: Config, version: str | None = None, branch: str | None = None, dry_run: bool = False) -> int:
    """Install the checkout's nightly into a managed env and its compiled outputs into the checkout."""
    con = _console.get()
    if dry_run:
        for line in plan_lines(cfg, NightlyRequest(cfg.build.python, cfg.build.cuda, version, branch), os.environ):
            con.result(line)
        return 0
    out = nightly(cfg, NightlyRequest(cfg.build.python, cfg.build.cuda, version, branch), os.environ)
    wheel = out.wheel
    if out.ahead:
        con.warn(f"the checkout is {out.ahead} commit(s) ahead of {out.commit[:12]}, the commit {wheel.version} was "
                 "built from: their Python changes are in, their C++ changes are not")
        if out.native:
            shown = ", ".join(out.native[:8]) + (f" and {len(out.native) - 8} more" if len(out.native) > 8 else "")
            con.warn(f"not in the binaries (C++/CUDA/CMake changed since): {shown}; `inv build` compiles them")
    state = "already in place" if out.up_to_date else "placed"
    con.ok(f"{wheel.path.name} {state}: {out.imported_from} imports from the checkout in env {out.env.name}, "
           "nothing compiled")
    con.info(f"activate: {envs.activation(out.env)}")
    return 0
