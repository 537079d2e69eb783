"""`inv matrix`: nox's build sessions side by side under one job budget, then the summary table.

Sessions whose fingerprint is unchanged since they last succeeded are not run again (nox is not
even started when none is left). The rest run in nox's parallel mode; a GNU make jobserver holds the
job budget from cores and free memory, so N sessions never start N x MAX_JOBS compilers.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import Sequence

from .. import console as _console
from .. import freshness, jobserver, summary, usage
from .. import matrix as m
from ..builder.drivers import detect
from ..builder.ownership.changes import worktree_state
from ..builder.request import split_refusal
from ..builder.slots import SLOTS_ENV
from ..config import Config
from ..run import run
from ..toolchain import system
from . import table

NOXFILE = Path(__file__).resolve().parents[1] / "noxfile.py"  # the build sessions, for any project

# Sessions at once by default, at least: much of a session's time is outside the compiler (nox, pip,
# configure, packaging, the import check), and the jobserver bounds the compilers whatever the number.
AT_ONCE = 4
HEADER = ("session", "python", "cuda", "result", "time", "waited", "ccache hits", "path", "wheel / reason")


def matrix(cfg: Config, failed: bool = False, sessions: Sequence[str] = (), force: bool = False,
           rerun: bool = False, parallel: int | None = None, dry_run: bool = False) -> int:
    """Run nox's build sessions (all, some, or the failed ones) that are not up to date, side by side,
    then print the summary table (`dry_run`: say which would run and how, run nothing)."""
    con = _console.get()
    pairs = m.combos(cfg)
    names = wanted(cfg, failed, sessions, pairs)
    if names is None:
        con.info("no failed session in dist/matrix-summary.json: nothing to run again")
        return 0
    todo = to_run(cfg, names, rerun or force)
    if not todo:
        show(cfg, names, set())
        con.ok(f"all {len(names)} sessions are up to date: nothing they depend on changed since they last ran "
               "(--rerun runs them anyway)")
        return 0
    jobs, reason = m.budget(cfg, pairs)
    at_once = max(1, min(len(todo), parallel or cfg.matrix.parallel or max(AT_ONCE, jobs)))
    argv = [sys.executable, "-m", "nox", "--noxfile", str(NOXFILE), "--envdir", str(cfg.nox_envs), "-s", *todo]
    argv += ["-j", str(at_once)] if at_once > 1 else []
    argv += ["--", "--force"] if force else []
    con.info(f"{len(todo)} session(s), {at_once} at a time, sharing {jobs} compile jobs: {reason}")
    say_split(cfg)
    if dry_run:
        con.result(f"command: (cd {cfg.root} && {' '.join(argv)})")
        con.info(f"--dry-run: {len(todo)} session(s) would run; nothing was run")
        return 0
    code = run_sessions(cfg, argv, todo, at_once, jobs, reason)
    show(cfg, names, set(todo))
    if code:
        con.warn("some sessions failed; `inv matrix --failed` runs only those again")
    return code


def wanted(cfg: Config, failed: bool, sessions: Sequence[str], pairs: list[tuple[str, str]]) -> list[str] | None:
    """The sessions asked for: the named ones, the failed ones (None: none failed), else every pair's."""
    if failed:
        return [r.session for r in summary.read_summary(cfg.root) if r.result == "failed"] or None
    return list(sessions) or [m.session_name(p, c) for p, c in pairs]


def to_run(cfg: Config, names: list[str], anyway: bool) -> list[str]:
    """The sessions whose last result no longer holds (all of them `anyway`), each saying why."""
    records = {r.session: r for r in summary.read_summary(cfg.root)}
    source = worktree_state(cfg.source_path, True)
    why = {n: freshness.changed(cfg, records[n], source) if n in records else ["it never ran"] for n in names}
    todo = [n for n in names if anyway or why[n]]
    con = _console.get()
    if todo and len(todo) < len(names):
        con.info(f"{len(names) - len(todo)} of {len(names)} sessions are up to date; running {len(todo)}")
    for name in todo:
        if name in records and why[name]:
            con.info(f"{name} runs again: {', '.join(why[name])}")
    return todo


def say_split(cfg: Config) -> None:
    """Whether the sessions take the split build (the core built once) or share the compiler cache instead."""
    refused = split_refusal(cfg.source_path) if cfg.matrix.split else None
    if refused:
        pytorch = detect(cfg.source_path).pytorch() if (cfg.source_path / ".git").exists() else True
        _console.get().info((f"the split build is not used: {refused}" if pytorch else "each session builds the "
                             "whole project (the split build is PyTorch's)") + "; the sessions share the compiler "
                            "cache instead (one builds first, the others compile what differs)")


def run_sessions(cfg: Config, argv: list[str], todo: list[str], at_once: int, jobs: int, reason: str) -> int:
    """nox's sessions under the jobserver (the cores built ahead beside them); the run's figures written into
    the summary and said."""
    free = system.available_memory(cfg.build.memory_gb)
    start = time.monotonic()
    outer = os.environ.get("MAKEFLAGS", "")  # under `make -j`: take part in make's budget instead
    served = jobserver.serve(jobs) if jobserver.fifo_of(outer) is None else contextlib.nullcontext(outer)
    ahead = m.cores_ahead(cfg, [pair for pair in m.combos(cfg) if m.session_name(*pair) in todo])
    with served as makeflags, usage.Watch() as watch:
        env = {freshness.ROOT_ENV: str(cfg.root), "MAKEFLAGS": makeflags, freshness.STARTED: f"{time.time():.3f}",
               SLOTS_ENV: str(at_once)}
        cores = [threading.Thread(target=m.build_core_ahead, args=(cfg, cuda, venv, {**os.environ, **env}))
                 for cuda, venv in ahead.items()]
        for thread in cores:
            thread.start()
        try:
            result = run(argv, cwd=cfg.root, env=env, check=False, on_line=_console.get().result)
        finally:
            for thread in cores:
                thread.join()
    info = {"sessions run": len(todo), "at once": at_once, "job budget": jobs, "budget reason": reason,
            "wall seconds": round(time.monotonic() - start, 2), "most compilers at once": watch.peak.compilers,
            "peak rss bytes": watch.peak.rss, "peak compilers rss bytes": watch.peak.compilers_rss,
            "free memory bytes at start": free}
    summary.write_summary(cfg.root / "dist" / summary.SUMMARY, run_info=info)
    _console.get().info(f"wall {info['wall seconds']}s for {len(todo)} session(s), {at_once} at a time; at most "
                        f"{watch.peak.compilers} compiles at once (budget {jobs}; nvcc's own processes are one "
                        "compile); peak memory "
                        f"{watch.peak.rss / system.GIB:.2f} GiB of {free / system.GIB:.1f} GiB free at the start")
    return result.returncode


def show(cfg: Config, names: list[str], fresh: set[str]) -> None:
    order = {name: i for i, name in enumerate(names)}
    records = sorted((r for r in summary.read_summary(cfg.root) if r.session in order), key=lambda r: order[r.session])
    if records:
        table(summary.table(records, fresh), HEADER)
        _console.get().info(f"summary: {cfg.root / 'dist' / summary.SUMMARY}")
