"""Running a plan: lock, swap in the tree (with its files in the checkout), ask the one verdict (verdict.py),
do what it says (a configure from scratch, objects whose inputs changed by content, the commands), apply a
known remedy once, then record what the build owns, what it read (its evidence) and where its time went.

Within a tree, a changed configure environment (flags, arch list, compiler, launchers) or CMAKE_FRESH
deletes CMakeCache.txt, which makes PyTorch's setup.py reconfigure (it otherwise keeps the first options
forever; the 2.9+ setup.py pops CMAKE_FRESH before reading it).
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Callable, Mapping, Sequence

from .. import compat, usage
from .. import console as _console
from ..diagnose import Diagnosis, UnusedVariables, diagnose, named_nowhere, never_read
from ..digest import digest
from ..errors import BuildFailed, CommandError
from ..progress import Tracker
from ..run import format_command, merged_env, run
from ..toolchain import linkers
from . import against, debugfiles, evidence, history, inplace, pools, profile, record, shortcut, stripping
from .budget import job_slots, shim_waits
from .cachestats import miss_reasons, parse_sccache_stats, parse_stats_log
from .explain import remember, tree_kinds
from .facts import pip_capped
from .leftovers import BUILD_ID, finished, mark_running, stop_leftovers
from .linkertrial import linker_trial
from .ownership import channels, cmaketrees, moves
from .ownership.changes import edited_meanwhile, recompile_all, source_folders, worktree
from .ownership.records import (
    Record,
    env_prefix,
    env_recorded,
    kept_wheel,
    read_marker,
    stat_of,
    wheel_id,
    write_marker,
)
from .ownership.trees import activate_tree, build_lock, remove_tree
from .ownership.uptodate import env_files, nothing_to_do, stamp_parts
from .package import package_name
from .plan import Plan
from .request import BuildRequest
from .shortcut import version_of, with_jobs
from .split import place_core
from .verdict import TRUE, Command, State, Verdict, Way, decide_tree, read_state, whole_commands, with_remedies

__all__ = ["TRUE", "BuildResult", "execute", "newest_wheel", "with_remedies"]


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
    verdict: Verdict | None = None  # what the build decided to do (verdict.py)

    @property
    def hit_rate(self) -> float | None:
        total = self.hits + self.misses
        return self.hits / total if total else None


def execute(plan: Plan, opts: BuildRequest, base_env: Mapping[str, str]) -> BuildResult:
    """Run the plan: lock, swap in the tree, do what the verdict says with progress and a log; apply a known
    remedy once."""
    start = time.monotonic()
    result = BuildResult(plan.key, 0.0, log=plan.log, python=plan.env.python, package=plan.package)
    asked = time.monotonic()
    with build_lock(plan.checkout):  # setup.py builds in the checkout's build/: one build at a time
        result.waited_for_checkout = time.monotonic() - asked
        importable = switch_in(plan, opts)
        state = read_state(plan, base_env)
        plan = with_remedies(plan, state.remedies)
        verdict = decide_tree(plan, state, opts, base_env)
        result.verdict = verdict
        if verdict.way is Way.WHOLE_WAY and plan.driver and plan.driver.pytorch():  # pip runs, with these caps
            pip_capped(compat.distribution_name(plan.checkout), plan.checkout, plan.env.prefix,
                       merged_env(base_env, plan.changes), "in this build; nothing was built")
        prepare(verdict, plan.checkout)
        if verdict.way is Way.UP_TO_DATE:
            result.seconds, result.up_to_date = time.monotonic() - start, True
            result.wheel = kept_wheel(state.marker) if plan.wheel else None
            return result
        Run(plan, opts, base_env, state, verdict, importable, start, result).go()
    result.seconds = time.monotonic() - start
    return result


def switch_in(plan: Plan, opts: BuildRequest) -> str | None:
    """Stop what a killed build left running, drop the tree for --clean, and put the configuration's tree at
    build/ (a switch); the configuration build/ held before, where it was another (it comes back on failure)."""
    con = _console.get()
    checkout = plan.checkout
    stopped = stop_leftovers(checkout)
    if stopped:
        con.warn(f"stopped {stopped} process(es) still running from a build of {checkout} that was killed "
                 "(kill -9) before it could stop them")
    if opts.clean:
        remove_tree(checkout, plan.key)
    previous = read_marker(checkout / "build") if (checkout / "build").exists() else None
    swapped = activate_tree(checkout, plan.key, plan.env.prefix)
    if swapped:
        con.info(swapped)
    return previous.key if previous and previous.key != plan.key else None


def prepare(verdict: Verdict, checkout: Path) -> None:
    """Say the verdict, and do what must come before its commands: CMake's files of trees configured for
    another checkout, a configure from scratch, every object where the compiler's environment changed, the
    outputs whose inputs changed by content, the torch's exports kept, --debug-files' FLAGS in build.ninja."""
    con = _console.get()
    for line in verdict.said:
        con.info(line)
    con.info(verdict.headline())
    cmaketrees.start_over(verdict.moved)
    recompile_all(verdict.recompile)
    cmaketrees.forget(verdict.forget)
    for output in verdict.stale:
        output.unlink(missing_ok=True)
    against.keep_symbols(verdict.symbols)
    if verdict.debug_edits:
        journal_debug_edits(checkout / "build", verdict)
        debugfiles.apply(checkout, verdict.debug_edits)
    if verdict.relabel is not None:
        shortcut.restamp(*verdict.relabel)


def journal_debug_edits(build: Path, verdict: Verdict) -> None:
    """Before --debug-files rewrites build.ninja: the tree's record, marked unfinished, names every unit the
    rewrite touches (those it debugs and those it puts back) with CMake's own flags. A kill at any instant after
    leaves a record the next build undoes the rewrite from, never `-O0 -g` units no record names."""
    marker = read_marker(build)
    if marker is not None:
        write_marker(build, replace(marker, done=None,
                                    debug_files={**marker.debug_files, **verdict.debug_units}))


class Run:
    """One build command's run (or the shortcut's commands), with its log, progress, a remedy's second
    attempt, and its record."""

    def __init__(self, plan: Plan, opts: BuildRequest, base_env: Mapping[str, str], state: State,
                 verdict: Verdict, importable: str | None, start: float, result: BuildResult) -> None:
        self.plan, self.opts, self.base_env, self.state, self.verdict = plan, opts, base_env, state, verdict
        self.importable, self.start, self.result = importable, start, result
        self.remedies: dict[str, str] = dict(state.remedies)
        self.commands: tuple[Command, ...] = verdict.commands
        self.parts = state.parts
        self.configured = list(state.configured)
        self.tracker, self.timeline, self.unused = Tracker(), profile.Timeline(), UnusedVariables()
        self.build = plan.checkout / "build"

    def go(self) -> None:
        self.pool()
        self.before()
        logged = profile.logs_of([self.build, *self.state.trees])
        probed = record.start(self.plan, self.base_env)
        plan = self.plan
        jobs = f"MAX_JOBS={plan.changes['MAX_JOBS']}" if plan.changes.get("MAX_JOBS") else "the jobserver's jobs"
        _console.get().info(f"building {plan.key} with {jobs}; log: {plan.log}")
        running = mark_running(plan.checkout)
        command_start = time.time()
        with open(plan.log, "w", buffering=1) as log, usage.Watch(interval=0.5) as watch, \
                moves.python_side_kept(plan.checkout, self.state.files if plan.wheel else {}):  # line-buffered
            for attempt in (1, 2):
                if self.attempt(attempt, log, running, probed, command_start):
                    break
            self.installed_again(logged, command_start, log)
        _console.get().clear_progress()
        self.finish(logged, probed, command_start, time.time(), watch.peak)

    def pool(self) -> None:
        """Job pools for the heavy units (pools.py), where the build passes CMAKE_* variables on to CMake."""
        plan = self.plan
        full = merged_env(self.base_env, plan.changes)
        if plan.forwards_cmake and not full.get("CMAKE_PROJECT_INCLUDE"):  # the user's own include: no pool
            cmake = linkers.cmake_version(plan.env.prefix, full, plan.linker_memory)
            pooled, said = pools.pool_changes(plan.checkout, plan.key, plan.changes, plan.memory,
                                              list(self.state.trees), cmake)
            self.plan = replace(plan, changes=pooled)
            if said:
                _console.get().info(said)

    def before(self) -> None:
        """The tree is this configuration's from now on (unfinished until the build ends), and the folders the
        build writes into exist."""
        plan, state = self.plan, self.state
        self.build.mkdir(exist_ok=True)
        write_marker(self.build, self.unfinished(state.files, self.configured))
        if plan.changes.get("BUILD_PYTHON_ONLY") == "1":
            _console.get().info(f"the Python part links against the core: {place_core(plan)} of its libraries in "
                                f"{plan.checkout / plan.package / 'lib'} (LIBTORCH_LIB_PATH)")
        plan.log.parent.mkdir(parents=True, exist_ok=True)
        if plan.dist:
            plan.dist.mkdir(parents=True, exist_ok=True)
        self.wheels_before = set(plan.dist.glob("*.whl")) if plan.dist else set()
        for var in ("DISTCC_DIR", "SCCACHE_DIR"):
            if plan.changes.get(var):
                Path(str(plan.changes[var])).mkdir(parents=True, exist_ok=True)
        if self.sccache:  # a server started for another cache dir would serve this build: start ours, zeroed
            run([self.sccache, "--stop-server"], env=plan.changes, base_env=self.base_env, capture=True,
                echo=False, check=False)

    @property
    def sccache(self) -> str | None:
        launcher = self.plan.launcher
        return launcher if launcher and Path(launcher).name.startswith("sccache") else None

    def attempt(self, attempt: int, log: IO[str], running: str, probed: Future[dict[str, object]],
                command_start: float) -> bool:
        """Run the commands once; True when they succeeded, False to try again with a remedy (else raises)."""
        log.flush()
        since = self.plan.log.stat().st_size  # the log holds every attempt: what failed is this one's
        if attempt == 2:
            self.tracker.new_attempt()
            self.timeline.new_attempt()
        try:
            self.run_commands(log, running)
            return True
        except CommandError as exc:
            _console.get().clear_progress()
            found = diagnose(_log_tail(self.plan.log, since), int(self.plan.changes.get("MAX_JOBS") or 1))
            new = [d for d in found if d.has_remedy and not _applied(d, self.remedies)]
            if attempt == 1 and new:
                self.remedy(new, since, command_start, log)
                return False
            log.flush()
            self.failed(found, exc.returncode, probed)
            raise AssertionError("unreachable") from None  # failed() raises

    def run_commands(self, log: IO[str], running: str) -> None:
        plan = self.plan
        try:
            with job_slots(plan) as (changes, waited):
                self.result.waited_for_jobs += waited
                for command in self.commands:
                    argv = with_jobs(list(command.argv), changes) if self.quick else list(command.argv)
                    since = self.logged(log)
                    log.write(format_command(argv, self.base_env, plan.changes, command.cwd) + "\n")
                    run(argv, cwd=command.cwd, env={**changes, BUILD_ID: running}, base_env=self.base_env,
                        echo=self.opts.verbose,
                        on_line=_show(self.tracker, self.opts.verbose, log, self.timeline, self.unused), log=log)
                    self.strip_copies(command, since, log)
        finally:
            self.result.waited_for_jobs += shim_waits(plan)

    @property
    def quick(self) -> bool:
        return self.verdict.quick and self.commands == self.verdict.commands

    def remedy(self, new: list[Diagnosis], since: int, command_start: float, log: IO[str]) -> None:
        """A known failure's remedy, then the whole way (a remedy may reconfigure)."""
        checkout = self.plan.checkout
        failed = [checkout / t for t in channels.cmake_trees(checkout, _log_tail(self.plan.log, since))]
        self.remedies = _apply_remedies(new, self.remedies, [*self.state.trees, *failed, *cmaketrees.since(
            checkout, command_start)], log)
        self.plan = with_remedies(self.plan, self.remedies)
        self.parts = stamp_parts(self.plan)  # the remedy is part of this tree's inputs from now on
        self.commands = whole_commands(self.plan)
        write_marker(self.build, self.unfinished(self.state.files, self.configured))

    def failed(self, found: list[Diagnosis], code: int, probed: Future[dict[str, object]]) -> None:
        """What the failed build made in the checkout is this tree's too (a switch moves it out); the
        configuration importable before comes back; raise with what failed."""
        plan = self.plan
        failed_files, configured = channels.claimed(plan.checkout, self.build, plan.log, self.state.files,
                                                    self.configured, plan.changes.get("PATH"))
        write_marker(self.build, self.unfinished(failed_files, configured))
        back = activate_tree(plan.checkout, self.importable) if self.importable else None
        if back:
            _console.get().info(back)
        _fail(plan, self.tracker, found, code, probed, time.monotonic() - self.start, self.remedies,
              with_jobs(list(self.commands[0].argv), plan.changes) if self.quick else None,
              self.importable, self.opts.again(), back is None or back.whole)

    def installed_again(self, logged: Mapping[Path, tuple[int, int]], command_start: float, log: IO[str]) -> None:
        """CMake's install into the env, after its build: what it called up to date though the build remade it."""
        if not (self.quick and len(self.commands) > 1):
            return
        remade = profile.steps_since(logged, self.state.trees, command_start)
        stale = channels.skipped_installs(_log_tail(self.plan.log), remade)
        if stale:
            _console.get().info(f"CMake's install called {stale[0]} up to date though the build remade it (it "
                                "compares mtimes to the second): installed again")
            for path in stale:
                path.unlink(missing_ok=True)
            last = self.commands[-1]
            since = self.logged(log)
            self.logged_run(list(last.argv), last.cwd, log)
            self.strip_copies(last, since, log)

    def logged(self, log: IO[str]) -> int:
        """Where the log ends now: what a command writes from here is its own."""
        log.flush()
        return self.plan.log.stat().st_size

    def strip_copies(self, command: Command, since: int, log: IO[str]) -> None:
        """The backend's strip after CMake's install, on what the install copied (stripping.py); the install
        again with `--strip` where only CMake can run its strip commands."""
        if command.strips_into is None:
            return
        plan = self.plan
        log.flush()
        strips = stripping.commands(_log_tail(plan.log, since, size=1 << 40), self.build, command.strips_into,
                                    merged_env(self.base_env, plan.changes))
        if strips is None:
            self.logged_run([*command.argv, "--strip"], command.cwd, log)
            return
        for argv in strips:
            times = stripping.keep_times(Path(argv[-1]))
            self.logged_run(argv, command.cwd, log, check=False)  # as CMake's execute_process: unchecked
            stripping.give_back(Path(argv[-1]), times)

    def logged_run(self, argv: list[str], cwd: Path, log: IO[str], check: bool = True) -> None:
        log.write(format_command(argv, self.base_env, self.plan.changes, cwd) + "\n")
        run(argv, cwd=cwd, env=self.plan.changes, base_env=self.base_env, echo=self.opts.verbose, log=log,
            check=check)

    def finish(self, logged: Mapping[Path, tuple[int, int]], probed: Future[dict[str, object]],
               command_start: float, command_end: float, peak: usage.Peak) -> None:
        """After the commands: the version re-stamped, stale bytecode dropped, misspelt options said, and the
        record written (the files the build owns, what it read, whether it is complete)."""
        plan = self.plan
        self.restamp()
        self.warn_unused()
        finished(plan.checkout)
        made = newest_wheel(plan.dist, self.wheels_before) if plan.dist else None
        trees = self.record(made)
        result = self.result
        if plan.stats_log.exists():
            result.hits, result.misses, result.remote_hits = parse_stats_log(plan.stats_log.read_text())
        elif self.sccache:
            stats = run([self.sccache, "--stop-server"], env=plan.changes, base_env=self.base_env, capture=True,
                        echo=False, check=False).stdout
            result.hits, result.misses = parse_sccache_stats(stats)
        steps = profile.steps_since(logged, trees, command_start)
        remember(self.build, steps)
        pools.remember(self.build, peak.per_unit)
        self.profile(steps, command_start, command_end, peak, probed)
        if plan.linker_trial:
            linker_trial(plan, self.build, steps, self.base_env)
        result.compiles = self.tracker.compiles
        result.package = package_name(plan.checkout, plan.env.prefix)  # the build installed the project: ask the env
        result.wheel = made

    def restamp(self) -> None:
        """Across commits: pip's record says the version the build wrote, as pip would; and Python's bytecode of
        what the build and the commits rewrote, in the checkout and in the env, goes (a cache is trusted by size
        and whole-second mtime)."""
        plan, verdict = self.plan, self.verdict
        written = self.scm_version() if verdict.version else \
            version_of(plan.checkout / plan.package / "version.py") if self.quick else None
        # the RECORD is looked up now: a relabel before the build (prepare) may have renamed its folder
        wanted = verdict.restamp or verdict.version
        installed = moves.editable_record(plan.env.prefix, plan.checkout) if wanted else None
        if installed and written:
            shortcut.restamp(installed, written)
        rewritten = [plan.checkout / name for name, st in self.state.files.items()
                     if name.endswith(".py") and stat_of(plan.checkout / name) != st]
        prefix = env_prefix(self.state.marker)  # scikit-build-core's install copies version.py into the env
        in_env = [prefix / name for name, st in env_recorded(self.state.marker).items()
                  if name.endswith(".py") and stat_of(prefix / name) != st] if prefix else []
        committed = [plan.checkout / name for name in committed_files(verdict) if name.endswith(".py")]
        moves.drop_bytecode([*rewritten, *in_env, *committed])

    def scm_version(self) -> str:
        """setuptools-scm's version files written as the backend writes them, and the version it says now."""
        scm = self.verdict.version
        assert scm is not None
        done = run(list(scm.argv), cwd=scm.cwd, env=self.plan.changes, base_env=self.base_env, capture=True,
                   echo=False)
        return (done.stdout.strip().splitlines() or [scm.version])[-1].strip()

    def unfinished(self, files: Mapping[str, list[int]], trees: Sequence[str]) -> Record:
        """The tree's record while its build runs, or after it failed: this configuration's, not complete."""
        return Record(self.plan.key, self.plan.configure, None, self.remedies, outputs=files, trees=tuple(trees),
                      evidence=self.verdict.evidence, debug_files=self.verdict.debug_units)

    def warn_unused(self) -> None:
        said = self.unused.given([*dict(self.opts.sets), *self.base_env])  # CMake's "not used": named elsewhere?
        typos = sorted({*named_nowhere(self.plan.checkout, said),
                        *never_read(self.plan.checkout, self.base_env)})  # the shell's USE_*/BUILD_*: after
        if typos:
            _console.get().warn(f"CMake did not use {', '.join(typos)}: no option of the project has that name "
                                f"(misspelt?); the build went on without it (CMake's warning, where it gave one, is "
                                f"in {self.plan.log})")

    def record(self, made: Path | None) -> list[Path]:
        """The tree's record after the build: complete unless a source changed while it ran or a wheel is
        missing; its files, its trees, its evidence. The trees, for the profile."""
        plan, checkout, state = self.plan, self.plan.checkout, self.state
        before = state.marker  # what the last record holds: what did not change since is not read again
        known = before.contents if before else ""
        same_env = before.env_files if before and before.env_prefix == str(plan.env.prefix) else None
        with ThreadPoolExecutor(1) as beside:  # git's status after the build, beside the claims (each ~0.1 s at
            status = beside.submit(worktree, checkout) if state.worktree is not None else None  # PyTorch's size)
            owned, configured = channels.claimed(checkout, self.build, plan.log, state.files, self.configured,
                                                 plan.changes.get("PATH"))
        trees = cmaketrees.found(checkout, self.build, configured)  # the ones this build configured too
        raced = edited_meanwhile(checkout, state.worktree, owned, trees, status.result() if status else None)
        done = None if raced or (plan.wheel and not made) else digest(self.parts)
        seen = evidence.collect(checkout, inplace.ninja_trees(checkout, trees), self.verdict.evidence, owned)
        develop = self.carried() if done else None
        write_marker(self.build, Record(
            plan.key, plan.configure, done, self.remedies, wheel_id(made) if made else None, owned,
            develop.worktree if develop else state.worktree,
            develop.env_files if develop else env_files(plan, same_env) if plan.outputs_in_env else None,
            develop.env_prefix if develop else str(plan.env.prefix), tuple(configured), self.parts,
            source_folders(checkout, trees), seen, (develop.develop or develop.done) if develop else None,
            self.verdict.debug_units, channels.packed_contents(checkout, owned, state.files, known)))
        return trees

    def carried(self) -> Record | None:
        """A wheel made from a tree with nothing to rebuild (a develop build's, complete) changed nothing the
        develop build made: the record of that build (its stamp, working tree and install in the env), which the
        wheel's record keeps, so the next develop build with nothing changed is up to date instead of a pip run.
        A wheel that compiled anything keeps none, nor one whose build put --debug-files' units back to CMake's
        flags (the develop install still holds their -O0 -g objects)."""
        before, work = self.verdict.marker, self.verdict.work
        if not (self.plan.wheel and before and before.done and work is not None and nothing_to_do(list(work.lines))) \
                or self.verdict.debug_edits:
            return None
        return before if before.develop or not before.wheel else None

    def profile(self, steps: list[profile.Step], command_start: float, command_end: float, peak: usage.Peak,
                probed: Future[dict[str, object]]) -> None:
        plan, result = self.plan, self.result
        way = ("build_ext in place" if self.verdict.way is Way.IN_PLACE else "cmake --build") if self.quick else \
            "setup.py" if "setup.py" in plan.command[1:3] else "pip and the backend"
        spans = profile.phases(self.timeline, command_start, command_end, time.time(), way, steps)
        result.profile = profile.write(plan.log, steps, spans, profile.summarise(
            steps, spans, result.hits, result.misses, peak.per_compiler), f"{plan.key} {plan.log.stem}")
        result.profile["why the cache missed"] = miss_reasons(
            self.build, plan.stats_log.read_text() if plan.stats_log.exists() else "",
            Path(str(plan.changes.get("CCACHE_BASEDIR") or plan.checkout))) if plan.launcher else \
            [f"{self.tracker.compiles} compile(s) with no compiler cache: {plan.cache_how}"] if self.tracker.compiles \
            else []
        configured = sum(end - begin for name, begin, end in spans if name == "configure")
        kind = history.configure_kind(plan.toolkit is not None, self.state.marker is None or bool(self.verdict.forget))
        if configured:
            result.profile["configure kind"] = kind  # what `--explain` prices the next configure of its kind by
        history.add(plan.history, {**tree_kinds(self.build), **({kind: configured} if configured else {})})
        record.write(probed, plan, time.monotonic() - self.start, "ok", 0, self.remedies, result.profile,
                     with_jobs(list(self.commands[0].argv), plan.changes) if self.quick else None,
                     [v[0] for v in self.verdict.debug_units.values()])


def committed_files(verdict: Verdict) -> list[str]:
    """The files the commits crossed changed (the verdict's record says them as "another commit")."""
    before = verdict.marker.worktree if verdict.marker else None
    return [name for name, st in before.items() if st == ["another commit"]] if before else []


def newest_wheel(dist: Path, before: set[Path]) -> Path | None:
    """The wheel the build made in `dist` (the newest there when it replaced one of the same name)."""
    made = sorted(set(dist.glob("*.whl")) - before) or sorted(dist.glob("*.whl"), key=lambda p: p.stat().st_mtime)[-1:]
    return made[-1] if made else None


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
          command: list[str] | None = None, importable: str | None = None, again: str = "inv build",
          whole: bool = True) -> None:
    """Show the first error and what torchbuild knows of it; raise with the next command to run, saying
    which configuration the checkout holds now (`importable`: the one before this build, back in place, its
    files too unless not `whole`)."""
    con = _console.get()
    con.error(f"the build of {plan.key} failed; the first error:")
    first = tracker.error_report()
    for line in first:
        con.info(f"  | {line}")
    for d in found:
        con.info(f"known failure {d.id}: {d.explain}; fix: {d.fix}")
    written = record.write(probed, plan, seconds, "failed", code, remedies, command=command)
    fix = found[0].fix if found else f"fix the error above, then run `{again}` again (it resumes)"
    now = "" if not importable else f"; {importable} is back in the checkout and importable as before (its tree " \
        f"and files), {plan.key}'s tree is kept for the next try" if whole else f"; {importable}'s tree is back, " \
        f"but not all its files (said above): an import may load another build's until {importable} is built " \
        f"again; {plan.key}'s tree is kept for the next try"
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
