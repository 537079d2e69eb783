"""The build record: exactly what produced a build, written next to its log, for bug reports.

Like PyTorch's `collect_env` output, but of this build: the checkout's commit and the applied
patches (by patch-id), the env's packages, cmake/ninja/compiler/nvcc versions and paths, the
build environment (secrets masked), MAX_JOBS, the duration and the result.
"""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Mapping, Sequence

from ..console import mask
from ..git import PATCH_BASE_REF
from ..run import merged_env, run
from .plan import Plan

SUFFIX = ".record.json"


def path_for(log: Path) -> Path:
    return log.with_suffix(SUFFIX)


def _out(argv: list[str], cwd: Path, env: Mapping[str, str] | None = None, stdin: str | None = None) -> str:
    res = run(argv, cwd=cwd, capture=True, echo=False, check=False, base_env=env, input=stdin)
    return res.stdout.strip() if res.returncode == 0 else ""


def tool(name: str, env: Mapping[str, str], cwd: Path) -> dict[str, str] | None:
    """{path, version} of a program as the build finds it on its PATH (None: not there)."""
    program = shutil.which(name, path=env.get("PATH"))
    if program is None:
        return None
    lines = (_out([program, "--version"], cwd) or "?").splitlines()
    return {"path": program, "version": lines[-1] if name == "nvcc" else lines[0]}


def patches_applied(checkout: Path) -> list[dict[str, str]]:
    """The commits of the torchbuild patch series in the checkout, each with its subject and patch-id."""
    if not _out(["git", "rev-parse", "--verify", "-q", PATCH_BASE_REF], checkout):
        return []
    out = []
    for commit in _out(["git", "rev-list", "--reverse", f"{PATCH_BASE_REF}..HEAD"], checkout).split():
        shown = _out(["git", "show", "--no-color", "--format=%s", commit], checkout)
        patch_id = _out(["git", "patch-id", "--stable"], checkout, stdin=shown + "\n").split()[:1]
        out.append({"commit": commit, "subject": shown.split("\n", 1)[0], "patch_id": "".join(patch_id)})
    return out


def packages(prefix: Path) -> list[str]:
    """The env's packages as `pip list --format=freeze` names them, read from their metadata folders
    (starting pip costs the build ~0.5 s of a core)."""
    found = set()
    for info in [*prefix.glob("lib/python*/site-packages/*.dist-info"),
                 *prefix.glob("lib/python*/site-packages/*.egg-info")]:
        name, _, rest = info.name.rsplit(".", 1)[0].partition("-")
        if rest:
            found.add(f"{name}=={rest.split('-')[0]}")
    return sorted(found, key=str.lower)


def facts(plan: Plan, base_env: Mapping[str, str]) -> dict[str, object]:
    """What produced the build, probed while it runs (a thread): commit, patches, packages, tools."""
    env = merged_env(base_env, plan.changes)
    checkout = plan.checkout
    compiler = (env.get("CXX") or "g++").split()[0]
    return {
        "config": plan.key,
        "checkout": str(checkout),
        "commit": _out(["git", "rev-parse", "HEAD"], checkout),
        "patches": patches_applied(checkout),
        "command": list(plan.command),
        "MAX_JOBS": plan.changes.get("MAX_JOBS"),
        "python": {"path": str(plan.env.python), "version": plan.env.version, "env": plan.env.reason},
        "packages": packages(plan.env.prefix),
        "tools": {name: tool(name, env, checkout) for name in ("cmake", "ninja", compiler)
                  + (("nvcc",) if plan.toolkit else ())},
        "log": str(plan.log),
    }


def start(plan: Plan, base_env: Mapping[str, str]) -> Future[dict[str, object]]:
    """Begin probing the record's facts beside the build, so that it costs the build no time."""
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(facts, plan, base_env)
    pool.shutdown(wait=False)  # the thread runs on; write() waits for its result
    return future


def write(found: Future[dict[str, object]], plan: Plan, seconds: float, result: str, exit_code: int,
          remedies: Mapping[str, str] | None = None, profile: Mapping[str, object] | None = None,
          command: list[str] | None = None, debug_files: Sequence[str] = ()) -> Path:
    """Write the record of this build next to its log (with its profile, and the command that ran where it
    was the loop's shortcut, in build/); returns its path."""
    ran = {"command": command, "command_dir": "build"} if command else {}
    record = {**found.result(), **ran, "result": result, "exit_code": exit_code, "seconds": round(seconds, 2),
              "remedies": dict(remedies or {}), "profile": dict(profile or {}),
              **({"debug_files": sorted(debug_files)} if debug_files else {}),
              "environment": {k: v for k, v in sorted(plan.changes.items()) if v is not None}}
    path = path_for(plan.log)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(mask(json.dumps(record, indent=2)) + "\n")
    tmp.replace(path)  # whole or absent: a reader never sees half a record
    return path


def latest(logs: Path) -> Path | None:
    """The newest record under the logs folder."""
    records = sorted(logs.glob(f"*/*{SUFFIX}"), key=lambda p: p.stat().st_mtime)
    return records[-1] if records else None
