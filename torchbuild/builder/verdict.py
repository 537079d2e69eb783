"""The one decision: what is stale in a configuration and what its build will run.

`decide` reads the configuration's state once (its record, its trees, the working tree, ninja's dry run,
the evidence its last build recorded) and returns a `Verdict`: up to date, a switch, the shortcut (CMake's
build and install in build/, without pip), the in-place build (setuptools' build_ext with build_temp kept),
or the whole way through the build driver, with its reasons, the exact commands, and what must happen
before them (a configure from scratch, objects whose inputs changed though ninja's clock says not). The
build executes it (execute.py), `--explain` prices it (explain.py) and `--dry-run` prints it: nothing else
decides whether a configuration is up to date. Deciding changes nothing on disk.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Mapping, Sequence

from ..digest import digest
from ..errors import TorchbuildError
from ..run import merged_env
from . import against, debugfiles, inplace, scm, shortcut
from .evidence import Evidence, stale_outputs
from .ownership import channels, cmaketrees
from .ownership.changes import compiler_environment, sources_added, worktree
from .ownership.moves import editable_record
from .ownership.records import (
    Record,
    configure_changes,
    configured_trees,
    kept_wheel,
    read_marker,
    recorded_evidence,
    recorded_outputs,
)
from .ownership.trees import trees_dir
from .ownership.uptodate import (
    NinjaWork,
    ahead,
    dry_run_of,
    env_install_dir,
    forget_ahead,
    installed,
    ninja_work,
    nothing_to_do,
    stamp_parts,
    why_whole_way,
)
from .plan import Plan, affects_configure
from .request import BuildRequest

TRUE = ("1", "on", "true", "yes", "y")


class Way(Enum):
    UP_TO_DATE = "up to date"
    SWITCH = "switch"
    SHORTCUT = "shortcut"
    IN_PLACE = "in place"
    WHOLE_WAY = "the whole way"


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    cwd: Path
    strips_into: Path | None = None  # CMake's install into this folder: then strip what it copied (stripping.py)


@dataclass(frozen=True)
class State:
    """The configuration's tree in build/ as its build finds it, read once."""

    marker: Record | None
    remedies: Mapping[str, str]
    files: Mapping[str, list[int]]  # its files in the checkout, as its record keeps them
    configured: tuple[str, ...]  # the CMake trees its builds configured (relative to the checkout)
    trees: tuple[Path, ...]  # those trees, found
    parts: Mapping[str, object]  # what the inputs stamp is made of now
    worktree: Mapping[str, object] | None  # the working tree as git lists it now (None: a wheel, or no git)

    @property
    def stamp(self) -> str:
        return digest(self.parts)


@dataclass(frozen=True)
class Verdict:
    way: Way
    why: str
    through: str = ""  # the whole way's driver where the shortcut was refused: "through pip"
    said: tuple[str, ...] = ()  # what the build says before it runs (a crossing of commits, a relink)
    commands: tuple[Command, ...] = ()
    work: NinjaWork | None = None  # what ninja (or the depfiles) say the build redoes; None: not asked
    forget: tuple[Path, ...] = ()  # CMake trees whose cache goes first: a configure from scratch
    moved: tuple[Path, ...] = ()  # trees configured for another checkout: their CMakeFiles go too
    recompile: tuple[Path, ...] = ()  # trees whose every output goes (a variable the compiler reads changed)
    stale: tuple[Path, ...] = ()  # outputs whose inputs changed by content where ninja's clock says not
    marker: Record | None = None  # the record as the build checks edits against it
    restamp: Path | None = None  # the install's RECORD, re-stamped with the version the build writes
    relabel: tuple[Path, str] | None = None  # a shared dist-info's RECORD, re-stamped with this version first
    version: scm.ScmVersion | None = None  # the version setuptools-scm computes now: the build re-stamps the install
    debug_edits: tuple[debugfiles.Edit, ...] = ()  # build.ninja's FLAGS lines rewritten first (--debug-files)
    debug_units: Mapping[str, list[str]] = field(default_factory=dict)  # the units with debug info after it
    symbols: tuple[Path, Mapping[str, object]] | None = None  # the torch's exports, kept for the next relink check
    evidence: Evidence = field(default_factory=Evidence)  # what the last build read that git cannot vouch for

    def headline(self) -> str:
        label = f"{self.way.value} {self.through}" if self.through else self.way.value
        return f"verdict: {label}: {self.why}"

    @property
    def quick(self) -> bool:
        """Whether the build skips the driver (pip, setup.py): the shortcut or the in-place build."""
        return self.way in (Way.SHORTCUT, Way.IN_PLACE)

    def steps(self) -> list[str]:
        """The steps the build runs, as ninja names their outputs, with the outputs the evidence says are stale
        (by their path) that ninja's dry run did not name."""
        named = list(self.work.steps) if self.work else []
        named += [e.output for e in self.debug_edits if e.output not in named]
        return named + [str(p) for p in self.stale if not any(
            p.as_posix().endswith("/" + s.lstrip("/")) or p.as_posix() == s for s in named)]

    def compiles(self) -> int | None:
        """The compile steps the build runs, as ninja (and the evidence) say (None: not known before it runs)."""
        if self.work is None or self.forget:
            return None
        return sum(s.endswith((".o", ".obj")) for s in self.steps())


def decide(plan: Plan, request: BuildRequest, base_env: Mapping[str, str]) -> Verdict:
    """The verdict for the configuration as the checkout holds it now: a switch where build/ holds another
    configuration (the build decides again once the switch is done), else the tree's own."""
    build = plan.checkout / "build"
    current = read_marker(build) if build.is_dir() else None
    if not request.clean and (current is None or current.key != plan.key):
        kept = trees_dir(plan.checkout) / plan.key
        if not kept.is_symlink() and read_marker(kept) is not None:
            return Verdict(Way.SWITCH, f"its tree is kept ({kept}): the build switches back to it first, its "
                                       "binaries come back without a compile, then it rebuilds what changed since")
        return Verdict(Way.WHOLE_WAY, f"no tree of {plan.key} yet: a build from nothing",
                       commands=whole_commands(plan))
    return decide_tree(plan, read_state(plan, base_env), request, base_env)


def unseen(checkout: Path) -> list[tuple[str, str | None]]:
    """What the builds of the checkout's trees (build/ and the kept ones) read that git cannot vouch for, by
    content now: an edit in an ignored build-time clone (third_party/eigen) or under an index bit changes it,
    though `git status` shows nothing (the matrix's sessions, the split core and the warm cache ask it)."""
    out: dict[str, str | None] = {}
    for tree in [checkout / "build", *sorted(trees_dir(checkout).glob("*"))]:
        if tree.is_dir() and not tree.is_symlink():
            out.update(recorded_evidence(read_marker(tree)).now(checkout))
    return sorted(out.items())


def read_state(plan: Plan, base_env: Mapping[str, str]) -> State:
    """The tree in build/ (the plan's configuration's) as the build finds it."""
    checkout, build = plan.checkout, plan.checkout / "build"
    marker = read_marker(build) if build.exists() else None
    remedies = dict(marker.remedies) if marker else {}
    plan = with_remedies(plan, remedies)
    configured = configured_trees(marker)
    trees = cmaketrees.found(checkout, build, configured)
    if marker is not None:
        ahead(trees, str(plan.changes.get("PATH") or base_env.get("PATH", "")))  # beside git's status
    try:
        tree = worktree(checkout) if not plan.wheel and (checkout / ".git").exists() else None
    except BaseException:
        forget_ahead()
        raise
    return State(marker, remedies, recorded_outputs(marker), tuple(configured), tuple(trees), stamp_parts(plan),
                 tree)


def with_remedies(plan: Plan, remedies: Mapping[str, str]) -> Plan:
    """The plan with the remedies' variables in its environment (and so in its configure key)."""
    if not remedies:
        return plan
    changes = {**plan.changes, **remedies}
    configure = {**plan.configure, **{k: v for k, v in remedies.items() if affects_configure(k)}}
    return replace(plan, changes=changes, configure=configure, inputs={**plan.inputs, **remedies})


def whole_commands(plan: Plan) -> tuple[Command, ...]:
    """The build driver's commands: the editable install or the wheel, then the step after it (native AOT)."""
    return (Command(tuple(plan.command), plan.checkout),
            *((Command(tuple(plan.after), plan.checkout),) if plan.after else ()))


def decide_tree(plan: Plan, state: State, request: BuildRequest, base_env: Mapping[str, str]) -> Verdict:
    """The verdict for the tree in build/, this configuration's (see the module's doc). A dry run started
    ahead (read_state) answers this verdict or none: what it saw is gone once the verdict is made."""
    try:
        return decided_tree(plan, state, request, base_env)
    finally:
        forget_ahead()


def decided_tree(plan: Plan, state: State, request: BuildRequest, base_env: Mapping[str, str]) -> Verdict:
    """decide_tree's verdict. Wherever the tree is kept, the outputs that read a file whose content changed
    though its time says otherwise go first."""
    plan = with_remedies(plan, state.remedies)
    whole = whole_commands(plan)
    if request.clean:
        return Verdict(Way.WHOLE_WAY, "--clean builds from nothing", commands=whole)
    if state.marker is None:
        return Verdict(Way.WHOLE_WAY, f"no tree of {plan.key} yet: a build from nothing", commands=whole)
    evidence = recorded_evidence(state.marker)
    stale = stale_outputs(plan.checkout, inplace.ninja_trees(plan.checkout, state.trees), evidence)
    fresh = merged_env(base_env, plan.changes).get("CMAKE_FRESH", "").lower() in TRUE
    found = reconfiguring(plan, state, fresh) or (
        Verdict(Way.WHOLE_WAY, "--rerun runs the build command anyway", commands=whole) if request.rerun else
        decide_inputs(plan, state, request, base_env, whole, bool(stale)))
    said = [f"{len(stale)} output(s) read a file whose content changed though its time says otherwise "
            f"({stale[0].name}, ...): removed, so ninja builds them again"] if stale else []
    found = replace(found, said=(*said, *found.said), stale=stale, evidence=evidence)
    return debugged(plan, state, request, found, base_env)


def debugged(plan: Plan, state: State, request: BuildRequest, found: Verdict, base_env: Mapping[str, str]
             ) -> Verdict:
    """--debug-files (debugfiles.py): the build.ninja lines the build rewrites first, and the way that runs
    them (the shortcut: ninja compiles the units, relinks, CMake installs); a refusal where the tree cannot
    take them as it stands. Without it, the units an earlier one left with debug info go back."""
    recorded = state.marker.debug_files if state.marker else {}
    if not request.debug_files and not recorded:
        return found
    units = debugfiles.units(plan.checkout, state.trees)
    wanted = debugfiles.chosen(units, request.debug_files, request.debug_files_max) if request.debug_files else []
    edits, keep = debugfiles.edits(units, wanted, recorded), debugfiles.active(units, wanted, recorded)
    on = sorted(e.source for e in edits if e.after.endswith(debugfiles.DEBUG))
    off = sorted(e.source for e in edits if not e.after.endswith(debugfiles.DEBUG))
    said = [f"--debug-files: {len(on)} unit(s) compiled again with {debugfiles.DEBUG} by the tree's ninja (their "
            f"FLAGS in build.ninja, every other flag as CMake wrote it), relinked and installed, no configure: "
            f"{listed(on)}" if on else "",
            f"{len(off)} unit(s) an earlier --debug-files built go back to CMake's flags: ninja compiles them again "
            f"(from the compiler cache where it has them): {listed(off)}" if off else "",
            f"{len(keep)} unit(s) carry debug info (--debug-files): {listed(sorted(v[0] for v in keep.values()))}"
            if keep and not on else ""]
    debug = replace(found, said=(*found.said, *filter(None, said)), debug_edits=tuple(edits), debug_units=keep)
    if request.debug_files:
        refused = debug_refusal(plan, state, found)
        if refused:
            raise TorchbuildError(f"--debug-files: {refused}", "run `inv build` with the same options first, "
                                                               "then --debug-files")
    if not edits or debug.way is not Way.UP_TO_DATE:
        return edited_work(plan, unstripped(debug) if keep else debug, base_env)
    ran = quick(plan, state, replace(debug, way=Way.WHOLE_WAY), base_env)
    if ran.way is not Way.SHORTCUT:
        if request.debug_files:
            raise TorchbuildError(f"--debug-files: ninja cannot rebuild the tree on its own here ({ran.why})",
                                  "run `inv build` first, then --debug-files")
        return ran
    return edited_work(plan, unstripped(replace(ran, why="only build.ninja's FLAGS of the units changed: "
                                                + ran.why.partition(": ")[2])), base_env)


def edited_work(plan: Plan, found: Verdict, base_env: Mapping[str, str]) -> Verdict:
    """The steps ninja runs once --debug-files' FLAGS are written: the units' compiles, the links that hold them,
    what always runs (ninja's dry run of build.ninja as it stands sees none of them); as it stands where it
    cannot be asked."""
    if not found.debug_edits or found.work is None:
        return found
    steps = list(found.work.steps)
    path = str(plan.changes.get("PATH") or base_env.get("PATH", ""))
    for name, text in debugfiles.rewritten(plan.checkout, found.debug_edits).items():
        tree = (plan.checkout / name).parent
        ninja = cmaketrees.ninja_of(tree, path)
        more = dry_run_of(ninja, tree, text) if ninja else None
        if more is None:
            return found
        steps += [step for step in more if step not in steps]
    return replace(found, work=replace(found.work, steps=tuple(steps)))


def listed(names: list[str], most: int = 4) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def debug_refusal(plan: Plan, state: State, found: Verdict) -> str | None:
    """Why the tree cannot take --debug-files as it stands (None: it can)."""
    if state.marker is None or not state.trees:
        return f"no tree of {plan.key} yet"
    if found.way is Way.IN_PLACE or (plan.in_place and not found.quick and not found.work):
        return "setuptools compiles this project's units itself: there are no ninja compile edges to change"
    if found.way is Way.WHOLE_WAY:
        return f"its next build goes the whole way ({found.why})"
    if found.work is not None and found.work.reconfigure:
        return "CMake configures again first, which writes build.ninja anew"
    return None


def unstripped(found: Verdict) -> Verdict:
    """The shortcut's install without the strip (scikit-build-core's default strips the debug info away), and
    its words."""
    commands = tuple(replace(c, strips_into=None) for c in found.commands)
    return replace(found, commands=commands, why=found.why.replace(shown(found.commands), shown(commands))) \
        if found.way is Way.SHORTCUT else found


def shown(commands: Sequence[Command]) -> str:
    """The shortcut's commands as its verdict names them."""
    return " then ".join("`cmake " + " ".join(c.argv[1:]) + "`" + (", stripping what it copies" if c.strips_into
                                                                   else "") for c in commands)


def reconfiguring(plan: Plan, state: State, fresh: bool) -> Verdict | None:
    """A configure from scratch where the configure environment changed, a tree was configured for another
    checkout, or CMAKE_FRESH is set (None: none of them)."""
    configure = state.marker.configure if state.marker else None
    changed = configure_changes(configure, plan.configure)
    moved = cmaketrees.moved_away(state.trees, plan.checkout)
    changed += [why for _, why in moved]
    if not (changed or fresh):
        return None
    recompile = compiler_environment(configure, plan.configure)
    why = "CMAKE_FRESH=1: a fresh CMake configure" if fresh and not changed else \
        "configuration changed, reconfiguring: " + "; ".join(changed[:4]) + \
        (f" (+{len(changed) - 4} more)" if len(changed) > 4 else "")
    return Verdict(Way.WHOLE_WAY, why, said=(recompile,) if recompile else (), commands=whole_commands(plan),
                   forget=state.trees, moved=tuple(tree for tree, _ in moved),
                   recompile=state.trees if recompile else ())


def decide_inputs(plan: Plan, state: State, request: BuildRequest, base_env: Mapping[str, str],
                  whole: tuple[Command, ...], stale: bool) -> Verdict:
    """With the configuration unchanged: up to date, the shortcut, the in-place build or the whole way, by the
    inputs stamp, the commits crossed, the files in place, the install, ninja's work and the evidence."""
    marker, checkout = state.marker, plan.checkout
    assert marker is not None
    kept = kept_wheel(marker) if plan.wheel else None
    placed = channels.in_place(checkout, state.files, marker.contents)
    serves = kept is not None if plan.wheel else installed(plan, marker)
    added = sources_added(checkout, marker.folders)
    committed, crossing, record = shortcut.crossing(plan, marker, state.parts, state.files) if request.shortcut \
        else ([], "", None)
    develop = not plan.wheel and marker.develop == state.stamp  # a wheel made since in the tree: its develop build's
    same = (marker.done == state.stamp or develop or crossing is None) and placed and serves and added is None
    if not same:  # ninja is asked all the same: its steps are what the driver's build compiles
        return Verdict(Way.WHOLE_WAY, added or crossing or why_whole_way(marker, state.parts, placed, serves),
                       commands=whole, work=tree_work(plan, state, base_env), marker=marker)
    said: list[str] = []
    if crossing is None:
        marker = shortcut.with_commits(checkout, marker, committed)
        said.append(f"a build of another commit: the {len(committed)} file(s) the commits changed are checked as "
                    "edits are")
    work = tree_work(plan, state, base_env)
    relink, symbols = against.relinks(plan.checkout / "build", plan.torch_folder)
    said += [line.removeprefix("ninja explain: ") for line in relink[:1]]
    if work is not None and relink:
        work = NinjaWork((*work.lines, *relink), work.steps, work.reconfigure, work.source)
    found = Verdict(Way.WHOLE_WAY, "", said=tuple(said), commands=whole, work=work, marker=marker,
                    restamp=record if crossing is None else None, symbols=symbols)
    chosen = choose(plan, state, request, base_env, found, crossing == "" and not stale, kept)
    return versioned(plan, state, relabelled(plan, state, chosen), base_env)


def versioned(plan: Plan, state: State, found: Verdict, base_env: Mapping[str, str]) -> Verdict:
    """A verdict that skips the driver where setuptools-scm computes the version (scm.py): the version it
    computes now, which the build writes and re-stamps the install with, as pip's build would; the whole way
    where it cannot be computed so, or CMake's tree was configured with another version that the project reads."""
    if not found.quick or not scm.configured(plan.checkout):
        return found
    record = editable_record(plan.env.prefix, plan.checkout)
    got = scm.computed(plan.checkout, plan.env.python, record.parent.parent, plan.changes, base_env) if record \
        else "the editable install is not in the env"
    why = got if isinstance(got, str) else scm.configured_with_another(plan.checkout, state.trees, got.version)
    if why is not None or isinstance(got, str):
        return replace(found, way=Way.WHOLE_WAY, through="through pip", why=why or "", commands=whole_commands(plan))
    recorded = shortcut.metadata_version(record)
    if recorded == shortcut.pep440(got.version):  # pip's METADATA holds it normalized
        return found
    said = f"the version is setuptools-scm's: {shortcut.pep440(got.version)} now, {recorded} in the install; the " \
        "build writes its version files and re-stamps the install's metadata with it, as pip's build does"
    return replace(found, said=(*found.said, said), version=got)


def relabelled(plan: Plan, state: State, found: Verdict) -> Verdict:
    """A verdict that skips the driver (up to date, the shortcut, in place) re-stamps a dist-info that another
    configuration of this Python left its version in (pip writes it anew on the whole way)."""
    relabel = foreign_version(plan, state.files) if found.way is not Way.WHOLE_WAY else None
    if relabel is None:
        return found
    said = f"the install's metadata says {shortcut.metadata_version(relabel[0])}, the version of another " \
        f"configuration's build: the build re-stamps it with this one's, {relabel[1]}, as pip writes it"
    return replace(found, said=(*found.said, said), relabel=relabel)


def foreign_version(plan: Plan, files: Mapping[str, object]) -> tuple[Path, str] | None:
    """Where every configuration of one Python shares the editable install's dist-info (PyTorch's setup.py: the
    outputs are in the checkout): its RECORD and this configuration's version, from the version.py its build
    wrote (one of its `files`), when the METADATA says another's, as a build of another configuration at another
    commit leaves it (None: they agree, or nothing to compare)."""
    generated = f"{plan.package}/version.py"
    if plan.wheel or plan.outputs_in_env or not (plan.driver and plan.driver.pytorch()) or generated not in files:
        return None
    record = editable_record(plan.env.prefix, plan.checkout)
    ours = shortcut.version_of(plan.checkout / generated)
    theirs = shortcut.metadata_version(record) if record else None
    return (record, ours) if record and ours and theirs and ours != theirs else None


def tree_work(plan: Plan, state: State, base_env: Mapping[str, str]) -> NinjaWork | None:
    """What the configuration's trees would redo: ninja's dry run in each CMake tree, or (setuptools compiling
    the extensions itself) the objects' depfiles in the kept build_temp."""
    if not state.trees and plan.in_place:
        return inplace.pending(plan.checkout, plan, base_env)
    return ninja_work(state.trees, plan, base_env)


def choose(plan: Plan, state: State, request: BuildRequest, base_env: Mapping[str, str], found: Verdict,
           nothing_else: bool, kept: Path | None) -> Verdict:
    """Up to date where nothing is left to do (`nothing_else`: no commit crossed, no output stale by content);
    else the in-place build or the shortcut where either gives what the whole way gives; else the whole way,
    saying why."""
    marker, tree = found.marker, state.worktree
    assert marker is not None
    copies = plan.driver.copies(plan.package) if plan.driver else {}
    edited = shortcut.off_graph(marker, tree, plan.package, state.files, copies=copies) if tree is not None else None
    work = found.work
    if edited is None and work is not None and nothing_to_do(list(work.lines)) and nothing_else:
        what = f"the wheel {kept.name}" if kept else "the install"
        return replace(found, way=Way.UP_TO_DATE, commands=(),
                       why=f"{work.source}, the inputs, the {len(state.files)} file(s) in the checkout and {what} "
                           "are this configuration's; nothing was run (--rerun runs the build command anyway)")
    if tree is None or not request.shortcut:
        return replace(found, why=edited or "the build's inputs changed (a wheel holds every source)")
    if plan.in_place and inplace.thrown_away(state.trees, plan.checkout):
        return in_place(plan, state, found)
    if not plan.changes.get("BUILD_PYTHON_ONLY"):
        return quick(plan, state, found, base_env)
    return replace(found, why=edited or "the Python part builds through the driver")


def in_place(plan: Plan, state: State, found: Verdict) -> Verdict:
    """setuptools' in-place build (build_temp kept) where it leaves what pip's editable install leaves."""
    assert found.marker is not None and state.worktree is not None
    why = inplace.refusal(plan.checkout, found.marker, state.worktree, state.files)
    if why is not None:
        return replace(found, through="through pip", why=why)
    step = ("setup.py " if "setup.py" in plan.in_place else "setuptools.setup() ") + \
        " ".join(plan.in_place[plan.in_place.index("build_ext"):])
    return replace(found, way=Way.IN_PLACE, commands=(Command(tuple(plan.in_place), plan.checkout),),
                   why=f"its editable build works in a temporary build_temp: `{step}`, setuptools' in-place build, "
                       "keeps the tree, without pip (--rerun goes the whole way)")


def quick(plan: Plan, state: State, found: Verdict, base_env: Mapping[str, str]) -> Verdict:
    """CMake's build (and install into the env) in build/, where only what ninja builds from changed."""
    assert found.marker is not None and state.worktree is not None
    build = plan.checkout / "build"
    into = env_install_dir(plan)
    why = "the editable install is not in the env" if plan.env_install and into is None else \
        shortcut.whole_way(plan.checkout, build, plan.package, found.marker,
                           list(found.work.lines) if found.work is not None else None, state.worktree, state.files,
                           into, plan.driver.copies(plan.package) if plan.driver else {})
    argvs = shortcut.commands(plan.driver, build, merged_env(base_env, plan.changes), into) \
        if why is None and plan.driver else None
    if argvs is None:
        driver = "pip" if plan.outputs_in_env or not plan.forwards_cmake else "setup.py"
        return replace(found, through=f"through {driver}", why=why or "no cmake on the PATH")
    strip = into if plan.env_install and plan.env_install[1] else None
    commands = tuple(Command(tuple(a), build, strip if "--install" in a else None) for a in argvs)
    return replace(found, way=Way.SHORTCUT, commands=commands,
                   why=f"only files ninja builds from changed since the last build: {shown(commands)} in build/, as "
                       f"{'scikit-build-core' if into else 'setup.py'} runs it, without pip (--rerun goes the whole "
                       "way)")
