"""Running a plan: lock, swap in the tree (with its files in the checkout), reconfigure on change,
skip when up to date, build with a progress line and a log, record the files the build put into the
checkout, count the compiler cache's hits.

Within a tree, a changed configure environment (flags, arch list, compiler, launchers) or
CMAKE_FRESH deletes CMakeCache.txt, which makes PyTorch's setup.py reconfigure (it otherwise keeps
the first options forever; the 2.9+ setup.py pops CMAKE_FRESH before reading it).
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Callable, Mapping

from .. import console as _console
from .. import usage
from ..diagnose import Diagnosis, UnusedVariables, diagnose, never_read
from ..digest import digest
from ..errors import BuildFailed, CommandError
from ..progress import Tracker
from ..run import format_command, merged_env, run
from ..toolchain import linkers
from . import against, inplace, pools, profile, record, shortcut
from .budget import job_slots, shim_waits
from .cachestats import miss_reasons, parse_sccache_stats, parse_stats_log
from .explain import remember
from .leftovers import BUILD_ID, finished, mark_running, stop_leftovers
from .linkertrial import linker_trial
from .ownership import channels, cmaketrees, moves
from .ownership.changes import (
    compiler_environment,
    edited_meanwhile,
    source_folders,
    sources_added,
    worktree,
)
from .ownership.records import (
    configure_changes,
    configured_trees,
    kept_wheel,
    read_marker,
    recorded_outputs,
    write_marker,
)
from .ownership.trees import activate_tree, build_lock, remove_tree
from .ownership.uptodate import (
    env_files,
    env_install_dir,
    installed,
    nothing_to_do,
    pending,
    stamp_parts,
    why_whole_way,
)
from .plan import Plan, affects_configure, package_name
from .request import BuildRequest
from .shortcut import off_graph, version_of, whole_way, with_jobs
from .split import place_core

TRUE = ("1", "on", "true", "yes", "y")


@dataclass
class BuildResult:
    key: str
    seconds: float
    hits: int = 0
    misses: int = 0
    remote_hits: int = 0
    log: Path | None = None
    wheel: Path | None = None
    compiles: int = 0
    python: Path | None = None
    package: str = "torch"
    up_to_date: bool = False
    waited_for_jobs: float = 0.0  # seconds waiting for a job slot of `inv matrix`'s shared budget
    waited_for_checkout: float = 0.0  # seconds waiting for another build in the same checkout
    profile: dict[str, object] | None = None  # where the time went (profile.py)

    @property
    def hit_rate(self) -> float | None:
        total = self.hits + self.misses
        return self.hits / total if total else None


def execute(plan: Plan, opts: BuildRequest, base_env: Mapping[str, str]) -> BuildResult:
    """Run the plan: lock, swap in the tree, build with progress and a log; apply a known remedy once."""
    con = _console.get()
    checkout = plan.checkout
    start = time.monotonic()
    timeline = profile.Timeline()
    result = BuildResult(plan.key, 0.0, log=plan.log, python=plan.env.python, package=plan.package)
    asked = time.monotonic()
    with build_lock(checkout):  # setup.py builds in the checkout's build/: one build at a time
        result.waited_for_checkout = time.monotonic() - asked
        stopped = stop_leftovers(checkout)
        if stopped:
            con.warn(f"stopped {stopped} process(es) still running from a build of {checkout} that was killed "
                     "(kill -9) before it could stop them")
        if opts.clean:
            remove_tree(checkout, plan.key)
        previous = read_marker(checkout / "build") if (checkout / "build").exists() else None
        importable = str(previous["key"]) if previous and previous.get("key") != plan.key else None
        swapped = activate_tree(checkout, plan.key)
        if swapped:
            con.info(swapped)
        build = checkout / "build"
        marker = read_marker(build) if build.exists() else None
        remedies: dict[str, str] = dict(marker.get("remedies") or {}) if marker else {}  # type: ignore[call-overload]
        plan = with_remedies(plan, remedies)
        files, configured = recorded_outputs(marker), configured_trees(marker)
        trees = cmaketrees.found(checkout, build, configured)
        changed = configure_changes(marker.get("configure") if marker else None, plan.configure)  # type: ignore[arg-type]
        changed += cmaketrees.moved(trees, checkout)
        fresh = merged_env(base_env, plan.changes).get("CMAKE_FRESH", "").lower() in TRUE  # from any source
        recompiled = compiler_environment(marker.get("configure") if marker else None, plan.configure, trees)  # type: ignore[arg-type]
        if recompiled:
            con.info(recompiled)
        if (changed or fresh) and cmaketrees.forget(trees):
            con.info("CMAKE_FRESH=1: a fresh CMake configure" if fresh and not changed else
                     "configuration changed, reconfiguring: " + "; ".join(changed[:4])
                     + (f" (+{len(changed) - 4} more)" if len(changed) > 4 else ""))
        parts = stamp_parts(plan)
        stamp = digest(parts)
        kept = kept_wheel(marker) if plan.wheel else None
        placed, serves = channels.in_place(checkout, files), kept is not None if plan.wheel else installed(plan, marker)
        added = sources_added(checkout, marker.get("folders")) if marker else None
        committed, crossing, pip_record = shortcut.crossing(plan, marker, parts, files) if marker and opts.shortcut \
            else ([], "", None)
        same = not (opts.clean or opts.rerun or changed or fresh) and marker is not None \
            and (marker.get("done") == stamp or crossing is None) and placed and serves and added is None
        if not same and marker is not None and not (opts.clean or opts.rerun or changed or fresh):
            con.info(f"the whole way: {added or crossing or why_whole_way(marker, parts, placed, serves)}")
        elif same and crossing is None:
            marker = dict(shortcut.with_commits(checkout, marker, committed))  # type: ignore[arg-type]
            con.info(f"a build of another commit: the {len(committed)} file(s) the commits changed are checked as "
                     "edits are")
        by_depfiles = same and not trees and bool(plan.in_place)  # setuptools compiles: its objects' depfiles
        explained, work = inplace.pending(checkout, plan, base_env) if by_depfiles else \
            (pending(trees, plan, base_env) if same else None, "ninja has no work")
        relink = against.pending(build, plan.torch_folder)  # the torch's libraries export other symbols
        for line in relink[:1]:
            con.info(line.removeprefix("ninja explain: "))
        explained = None if explained is None else explained + relink
        tree = worktree(checkout) if not plan.wheel and (checkout / ".git").exists() else None
        edited = off_graph(marker, tree, plan.package, files) if same and marker and tree is not None else None
        if same and edited is None and nothing_to_do(explained) and crossing == "":
            what = f"the wheel {kept.name}" if kept else "the install"
            con.info(f"up to date: {work}, the inputs, the {len(files)} file(s) in the checkout and "
                     f"{what} are this configuration's; nothing was run (--rerun runs the build command anyway)")
            result.seconds = time.monotonic() - start
            result.up_to_date = True
            result.wheel = kept
            return result
        full = merged_env(base_env, plan.changes)
        if plan.forwards_cmake and not full.get("CMAKE_PROJECT_INCLUDE"):  # the user's own include: no pool
            cmake = linkers.cmake_version(plan.env.prefix, full, plan.linker_memory)
            pooled, said = pools.pool_changes(checkout, plan.key, plan.changes, plan.memory, trees, cmake)
            plan = replace(plan, changes=pooled)
            if said:
                con.info(said)
        quick, quick_in = None, build
        if same and tree is not None and opts.shortcut and marker is not None and plan.in_place \
                and inplace.thrown_away(trees, checkout):
            why = inplace.refusal(checkout, marker, tree, files)
            quick, quick_in = ([list(plan.in_place)] if why is None else None), checkout
            step = ("setup.py " if "setup.py" in plan.in_place else "setuptools.setup() ") + \
                " ".join(plan.in_place[plan.in_place.index("build_ext"):])
            con.info(f"its editable build works in a temporary build_temp: `{step}`"
                     ", setuptools' in-place build, keeps the tree, without pip (--rerun goes the whole way)"
                     if quick else f"the whole way through pip: {why}")
        elif same and tree is not None and opts.shortcut and marker is not None and not plan.changes.get(
                "BUILD_PYTHON_ONLY"):
            into = env_install_dir(plan)
            why = "the editable install is not in the env" if plan.env_install and into is None else \
                whole_way(checkout, build, plan.package, marker, explained, tree, files, into)
            quick = shortcut.commands(build, merged_env(base_env, plan.changes), into,
                                      bool(plan.env_install and plan.env_install[1])) if why is None else None
            con.info(f"only files ninja builds from changed since the last build: "
                     f"{' then '.join('`cmake ' + ' '.join(q[1:]) + '`' for q in quick)} in build/, as "
                     f"{'scikit-build-core' if into else 'setup.py'} runs it, without pip (--rerun goes the whole way)"
                     if quick else
                     f"the whole way through {'pip' if plan.outputs_in_env or not plan.forwards_cmake else 'setup.py'}"
                     ": "
                     f"{why or 'no cmake on the PATH'}")
        elif edited:
            con.info(f"the whole way: {edited}")
        build.mkdir(exist_ok=True)  # the tree is this configuration's from now on, even if interrupted
        write_marker(build, plan.key, plan.configure, None, remedies, files=files, trees=configured)
        if plan.changes.get("BUILD_PYTHON_ONLY") == "1":
            con.info(f"the Python part links against the core: {place_core(plan)} of its libraries in "
                     f"{checkout / plan.package / 'lib'} (LIBTORCH_LIB_PATH)")
        plan.log.parent.mkdir(parents=True, exist_ok=True)
        if plan.dist:
            plan.dist.mkdir(parents=True, exist_ok=True)
        wheels_before = set(plan.dist.glob("*.whl")) if plan.dist else set()
        for var in ("DISTCC_DIR", "SCCACHE_DIR"):
            if plan.changes.get(var):
                Path(str(plan.changes[var])).mkdir(parents=True, exist_ok=True)
        sccache = plan.launcher if plan.launcher and Path(plan.launcher).name.startswith("sccache") else None
        if sccache:  # a server started for another cache dir would serve this build: start ours, zeroed
            run([sccache, "--stop-server"], env=plan.changes, base_env=base_env, capture=True, echo=False,
                check=False)
        tracker = Tracker()
        unused = UnusedVariables()
        logged = profile.logs_of([build, *trees])
        probed = record.start(plan, base_env)
        jobs = f"MAX_JOBS={plan.changes['MAX_JOBS']}" if plan.changes.get("MAX_JOBS") else "the jobserver's jobs"
        con.info(f"building {plan.key} with {jobs}; log: {plan.log}")
        running = mark_running(checkout)
        command_start = time.time()
        with open(plan.log, "w", buffering=1) as log, usage.Watch(interval=0.5) as watch, \
                moves.python_side_kept(checkout, files if plan.wheel else {}):  # line-buffered
            for attempt in (1, 2):
                log.flush()
                since = plan.log.stat().st_size  # the log holds every attempt: what failed is this one's
                if attempt == 2:
                    tracker.new_attempt()
                    timeline.new_attempt()
                try:
                    try:
                        with job_slots(plan) as (changes, waited):
                            result.waited_for_jobs += waited
                            for argv, cwd in [*([(with_jobs(q, changes), quick_in) for q in quick] if quick else
                                                [(list(plan.command), checkout)]),
                                              *([(list(plan.after), checkout)] if plan.after and not quick else [])]:
                                log.write(format_command(argv, base_env, plan.changes, cwd) + "\n")
                                run(argv, cwd=cwd, env={**changes, BUILD_ID: running}, base_env=base_env,
                                    echo=opts.verbose, on_line=_show(tracker, opts.verbose, log, timeline, unused),
                                    log=log)
                    finally:
                        result.waited_for_jobs += shim_waits(plan)
                    break
                except CommandError as exc:
                    con.clear_progress()
                    found = diagnose(_log_tail(plan.log, since), int(plan.changes.get("MAX_JOBS") or 1))
                    new = [d for d in found if d.has_remedy and not _applied(d, remedies)]
                    if attempt == 1 and new:
                        quick = None  # a remedy may reconfigure: the whole way
                        failed = [checkout / t for t in channels.cmake_trees(checkout, _log_tail(plan.log, since))]
                        remedies = _apply_remedies(new, remedies, [*trees, *failed, *cmaketrees.since(
                            checkout, command_start)], log)
                        plan = with_remedies(plan, remedies)
                        parts = stamp_parts(plan)  # the remedy is part of this tree's inputs from now on
                        stamp = digest(parts)
                        write_marker(build, plan.key, plan.configure, None, remedies, files=files, trees=configured)
                        continue
                    # what the failed build made in the checkout is this tree's too (a switch moves it out)
                    log.flush()
                    failed_files, configured = channels.claimed(checkout, build, plan.log, files, configured,
                                                             plan.changes.get("PATH"))
                    write_marker(build, plan.key, plan.configure, None, remedies, files=failed_files, trees=configured)
                    if importable:  # the configuration that was importable before this build comes back
                        con.info(activate_tree(checkout, importable) or "")
                    _fail(plan, tracker, found, exc.returncode, probed, time.monotonic() - start, remedies,
                          with_jobs(quick[0], plan.changes) if quick else None, importable, opts.again())
            if quick and len(quick) > 1:  # CMake's install into the env, after its build: what it skipped
                remade = profile.steps_since(logged, trees, command_start)
                stale = channels.skipped_installs(_log_tail(plan.log), remade)
                if stale:
                    con.info(f"CMake's install called {stale[0]} up to date though the build remade it (the copies "
                             f"were under a second apart, and strip stamped the old one): installed again")
                    for path in stale:
                        path.unlink(missing_ok=True)
                    run(quick[-1], cwd=quick_in, env=plan.changes, base_env=base_env, echo=opts.verbose, log=log)
        con.clear_progress()
        command_end = time.time()
        written = version_of(checkout / plan.package / "version.py") if quick and crossing is None else None
        if pip_record and written:
            shortcut.restamp(pip_record, written)  # pip's record says the version the build wrote, as pip would
        typos = sorted({*unused.given([*dict(opts.sets), *base_env]), *never_read(checkout, dict(opts.sets))})
        if typos:
            con.warn(f"CMake did not use {', '.join(typos)}: no option of the project has that name (misspelt?); "
                     f"the build went on without it (CMake's warning, where it gave one, is in {plan.log})")
        finished(checkout)
        made = newest_wheel(plan.dist, wheels_before) if plan.dist else None
        owned, configured = channels.claimed(checkout, build, plan.log, files, configured, plan.changes.get("PATH"))
        files = dict(owned)
        trees = cmaketrees.found(checkout, build, configured)  # the ones this build configured too
        raced = edited_meanwhile(checkout, tree, files, trees)
        write_marker(build, plan.key, plan.configure, None if raced or (plan.wheel and not made) else stamp,
                     remedies, made, files, tree, env_files(plan) if plan.outputs_in_env else None, plan.env.prefix,
                     configured, parts, source_folders(checkout, trees))
        if plan.stats_log.exists():
            result.hits, result.misses, result.remote_hits = parse_stats_log(plan.stats_log.read_text())
        elif sccache:
            stats = run([sccache, "--stop-server"], env=plan.changes, base_env=base_env, capture=True, echo=False,
                        check=False).stdout
            result.hits, result.misses = parse_sccache_stats(stats)
        steps = profile.steps_since(logged, trees, command_start)
        remember(build, steps)
        pools.remember(build, watch.peak.per_unit)
        spans = profile.phases(timeline, command_start, command_end, time.time(),
                               ("build_ext in place" if quick_in == checkout else "cmake --build") if quick else
                               "setup.py" if "setup.py" in plan.command[1:3] else "pip and the backend", steps)
        result.profile = profile.write(plan.log, steps, spans, profile.summarise(
            steps, spans, result.hits, result.misses, watch.peak.per_compiler), f"{plan.key} {plan.log.stem}")
        result.profile["why the cache missed"] = miss_reasons(
            build, plan.stats_log.read_text() if plan.stats_log.exists() else "",
            Path(str(plan.changes.get("CCACHE_BASEDIR") or checkout)))
        record.write(probed, plan, time.monotonic() - start, "ok", 0, remedies, result.profile,
                     with_jobs(quick[0], plan.changes) if quick else None)
        if plan.linker_trial:
            linker_trial(plan, build, steps, base_env)
    result.seconds = time.monotonic() - start
    result.compiles = tracker.compiles
    result.package = package_name(checkout, plan.env.prefix)  # the build installed the project: ask the env
    result.wheel = made
    return result


def newest_wheel(dist: Path, before: set[Path]) -> Path | None:
    """The wheel the build made in `dist` (the newest there when it replaced one of the same name)."""
    made = sorted(set(dist.glob("*.whl")) - before) or sorted(dist.glob("*.whl"), key=lambda p: p.stat().st_mtime)[-1:]
    return made[-1] if made else None


def with_remedies(plan: Plan, remedies: Mapping[str, str]) -> Plan:
    """The plan with the remedies' variables in its environment (and so in its configure key)."""
    if not remedies:
        return plan
    changes = {**plan.changes, **remedies}
    configure = {**plan.configure, **{k: v for k, v in remedies.items() if affects_configure(k)}}
    return replace(plan, changes=changes, configure=configure, inputs={**plan.inputs, **remedies})


def _applied(d: Diagnosis, remedies: Mapping[str, str]) -> bool:
    return bool(d.failure.remedy_set) and all(remedies.get(k) == v for k, v in d.failure.remedy_set.items())


def _apply_remedies(found: list[Diagnosis], remedies: Mapping[str, str], trees: list[Path], log: IO[str]
                    ) -> dict[str, str]:
    """Announce each remedy on the terminal and in the log; return the remedies now in force."""
    con = _console.get()
    out = dict(remedies)
    for d in found:
        what = []
        if d.failure.remedy_set:
            out.update(d.failure.remedy_set)
            what.append(" ".join(f"{k}={v}" for k, v in d.failure.remedy_set.items()))
        if d.failure.remedy_fresh:
            cmaketrees.start_over(trees)
            what.append("a fresh CMake configure (CMakeCache.txt removed)")
        message = f"known failure {d.id}: {d.explain}; remedy: {', '.join(what)}, building again"
        con.warn(message)
        log.write(f"torchbuild: {message}\n")
    return out


def _fail(plan: Plan, tracker: Tracker, found: list[Diagnosis], code: int,
          probed: Future[dict[str, object]], seconds: float, remedies: Mapping[str, str],
          command: list[str] | None = None, importable: str | None = None, again: str = "inv build") -> None:
    """Show the first error and what torchbuild knows of it; raise with the next command to run, saying
    which configuration the checkout holds now (`importable`: the one before this build, back in place)."""
    con = _console.get()
    con.error(f"the build of {plan.key} failed; the first error:")
    first = tracker.error_report()
    for line in first:
        con.info(f"  | {line}")
    for d in found:
        con.info(f"known failure {d.id}: {d.explain}; fix: {d.fix}")
    written = record.write(probed, plan, seconds, "failed", code, remedies, command=command)
    fix = found[0].fix if found else f"fix the error above, then run `{again}` again (it resumes)"
    now = f"; {importable} is back in the checkout and importable as before (its tree and files), " \
        f"{plan.key}'s tree is kept for the next try" if importable else ""
    raise BuildFailed(f"the build of {plan.key} failed (exit {code}){now}; full log: {plan.log}",
                      f"{fix}; what produced it, for a bug report: {written} (`inv build --record`)",
                      tuple(first), tuple(d.id for d in found))


def _log_tail(log: Path, since: int = 0, size: int = 4 * 1024 * 1024) -> str:
    with open(log, "rb") as fh:
        fh.seek(max(since, log.stat().st_size - size))
        return fh.read().decode(errors="replace")


def _show(tracker: Tracker, verbose: bool, log: IO[str], timeline: profile.Timeline,
          unused: UnusedVariables | None = None) -> Callable[[str], None]:
    con = _console.get()

    def on_line(line: str) -> None:
        timeline.feed(line)
        if unused is not None:
            unused.feed(line)
        text = tracker.feed(line)
        if verbose:
            con.result(line)
        elif text:
            con.progress(text)

    return on_line


