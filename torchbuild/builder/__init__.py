"""The build in three steps: gather the facts (probes), make the plan (pure), execute it.

    request.py  flags + Config -> BuildRequest, resolved once
    facts.py    gather(): toolkit, env, host compiler, GPUs, compiler cache, release checks
    plan.py     make_plan() -> Plan (pure data; --dry-run prints it), describe()
    ownership/  what a configuration owns and when it is up to date, in one place: its record, the channels
                that name its files, the moves of a switch, its trees and their CMake configures, what changed
    execute.py  execute(plan) -> BuildResult: lock, reconfigure on change, up-to-date check, log
    split.py    the core for the Python part; leftovers.py what a killed build left running; slots.py, record.py
    explain.py  --explain: what the build would run and why, the estimate; a long build asks first
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .. import console as _console
from ..config import Config
from ..errors import TorchbuildError
from ..run import format_command
from ..toolchain import sanitizers
from . import against
from .drivers.pep517 import KEPT_BUILD_TEMP
from .execute import BuildResult, execute
from .explain import confirmed, could_take, explain
from .facts import BuildFacts, gather
from .ownership.trees import clean
from .ownership.trees import enforce as enforce_budget
from .plan import Plan, describe, make_plan
from .request import BuildRequest
from .verdict import Verdict, Way, decide

__all__ = ["BuildFacts", "BuildRequest", "BuildResult", "Outcome", "Plan", "build", "clean", "describe", "gather",
           "make_plan", "report"]


@dataclass(frozen=True)
class Outcome:
    plan: Plan
    result: BuildResult | None  # None: a dry run


def build(cfg: Config, request: BuildRequest, base_env: Mapping[str, str]) -> Outcome:
    """The build behind `inv build`, `inv demo` and the nox sessions."""
    con = _console.get()
    facts = gather(cfg, request, base_env)
    plan = make_plan(cfg, request, facts, base_env)
    con.info(f"environment: {plan.env.python} (Python {plan.env.version}; {plan.env.reason})")
    con.info(f"build driver: {plan.driver.describe() if plan.driver else 'unknown'}")
    for note in plan.notes:
        con.info(note)
    if request.explain:
        for line in explain(plan, base_env, request)[0]:
            con.result(line)
        return Outcome(plan, None)
    if not request.dry_run and asking(request) and could_take(plan, cfg.build.confirm_over):
        lines, wall = explain(plan, base_env, request)
        if not confirmed(lines, wall, cfg.build.confirm_over):
            raise TorchbuildError(f"not building {plan.key}: not confirmed", "run it again and answer y, pass "
                                  "--yes, or raise build.confirm_over")
    if request.dry_run:
        for line in [*describe(plan, base_env), *described(plan, decide(plan, request, base_env), base_env)]:
            con.result(line)
        return Outcome(plan, None)
    with con.timed(f"build {plan.key}"):  # its ✓ only once what the build owes is checked too
        outcome = Outcome(plan, execute(plan, request, base_env))
        up_to_date = bool(outcome.result and outcome.result.up_to_date)
        after_build(plan, up_to_date)
    for line in [] if up_to_date else enforce_budget(plan.checkout, cfg.trees.max_gb, cfg.trees.keep_recent_hours):
        con.info(line)  # an up-to-date build grew no tree
    return outcome


def after_build(plan: Plan, up_to_date: bool) -> None:
    """What a finished build owes the stack around torch (against.py): a CUDA extension's device code is
    checked, up to date or not (its label is the truth); a torch just built into a managed env is pinned there."""
    from .ownership.records import env_recorded, read_marker, recorded_outputs

    if plan.torch_folder is not None and plan.toolkit is not None:
        marker = read_marker(plan.checkout / "build")
        outputs = [*(plan.checkout / rel for rel in recorded_outputs(marker)),
                   *(plan.env.prefix / rel for rel in env_recorded(marker))]
        names = against.without_device_code(outputs)
        if names:
            raise TorchbuildError(
                f"{plan.key} is a CUDA configuration, but the extension it built holds no device code "
                f"({', '.join(names)}: no .nv_fatbin): its setup.py compiled no CUDA source, though FORCE_CUDA=1 was "
                "set (many decide by torch.cuda.is_available() alone, false without a GPU)",
                "build it for CPU with --cuda none, or make its setup.py build the CUDA sources where CUDA_HOME "
                "is set (TORCH_CUDA_ARCH_LIST names the archs)")
    sanitizer = sanitizers.of_key(plan.key)
    if sanitizer is not None:
        unsanitized(plan, sanitizer)
    if plan.env.name is not None and not plan.wheel and not up_to_date and plan.driver and plan.driver.pytorch():
        dist = against.installed_dist(plan.env.prefix, plan.checkout)
        if dist:
            against.protect(plan.env.python, *dist)


def unsanitized(plan: Plan, sanitizer: sanitizers.Sanitizer) -> None:
    """--sanitize: the tree's compile edges (build.ninja's FLAGS) carry `-fsanitize=<kind>`, or the build is no
    sanitizer build, whatever it was asked: said before a ✓ or a preload, where the project's CMake never reads
    the variable (it only sits in CMake's cache)."""
    from .debugfiles import units

    flags = [u.flags for u in units(plan.checkout, [plan.checkout / "build"])]
    if flags and not any(sanitizers.carries(f, sanitizer) for f in flags):
        raise TorchbuildError(f"--sanitize {sanitizer.kind}: no unit of {plan.key} was compiled with -fsanitize="
                              f"{sanitizer.kind}: the project's CMake does not read {sanitizer.variable} (PyTorch's "
                              "CMakeLists.txt does), so the tree holds a plain build",
                              f"build without --sanitize, or give the flag yourself: --set CFLAGS=-fsanitize="
                              f"{sanitizer.kind} --set CXXFLAGS=-fsanitize={sanitizer.kind}")


def described(plan: Plan, verdict: Verdict, base_env: Mapping[str, str]) -> list[str]:
    """The verdict as `--dry-run` prints it: the way, why, and the commands the build would run."""
    from .shortcut import with_jobs

    compiles = verdict.compiles()
    lines = [verdict.headline(), *verdict.said]
    if compiles is not None and verdict.way is not Way.UP_TO_DATE:
        lines.append(f"ninja would run {len(verdict.steps())} step(s), {compiles} of them compile step(s)")
    argvs = [with_jobs(list(c.argv), plan.changes) if verdict.quick else list(c.argv) for c in verdict.commands]
    for c, argv in zip(verdict.commands, argvs):
        lines.append(f"would run:   (cd {c.cwd} && {format_command(argv, base_env, {})})")
        if c.strips_into:
            lines.append("then strip:  what that install copies, by its script's own strip commands (as --strip "
                         "strips them; what it leaves is stripped already)")
    return lines


def asking(request: BuildRequest) -> bool:
    """Whether a long build asks first: on a terminal, without --yes."""
    return not request.yes and sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty()


def report(outcome: Outcome) -> None:
    """The closing lines of a build: what it compiled, the cache's hits, how to use the result."""
    result, plan = outcome.result, outcome.plan
    if result is None or result.up_to_date:
        return
    con = _console.get()
    tool = Path(plan.launcher).name if plan.launcher else "cache"
    rate = f", {tool} {result.hits}/{result.hits + result.misses} hits ({result.hit_rate:.0%})" \
        if result.hit_rate is not None else ""
    if result.remote_hits:
        rate += f", {result.remote_hits} from the remote cache"
    con.ok(f"{plan.key} built in {result.seconds:.1f}s: {result.compiles} compile step(s){rate}")
    if result.profile:
        from .profile import table

        for line in table(result.profile):
            con.info(line)
    if result.wheel:
        con.ok(f"wheel: {result.wheel}")
    else:
        preload = "".join(f"{k}={v} " for k, v in plan.run_env.items())  # --sanitize: its runtime first
        con.info(f"use it: {preload}{plan.env.python} -c 'import {result.package}'")
    if plan.in_place and not (plan.checkout / KEPT_BUILD_TEMP).is_dir():  # pip compiled in a folder it removed
        con.info(f"pip compiled in a temporary folder it removed: the next build compiles every unit once more, into "
                 f"the kept tree ({KEPT_BUILD_TEMP}), mostly from the compiler cache; from then on an edit compiles "
                 "only what it touches")
    debugged = result.verdict.debug_units if result.verdict else {}
    if debugged and not result.wheel:
        from .debugfiles import gdb_command

        con.info(f"debug info (--debug-files) in {', '.join(sorted(v[0] for v in debugged.values()))}; break in "
                 f"them: {gdb_command(plan.env.python, result.package, plan.checkout, debugged)}")
