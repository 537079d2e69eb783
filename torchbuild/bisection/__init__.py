"""`inv bisect`: find the commit that broke it, at incremental cost, in a worktree of its own.

Each step syncs the worktree's submodules (mirrors and the mirror cache), gets the commit's binaries the
cheapest correct way (ladder.py: kept, Python only over kept binaries, an incremental build sharing the
compiler cache), checks that the binaries name that commit (version.py's git_version and +git<sha7>),
then runs COMMAND in the configuration's env: exit 0 good, 125 skip, 1-127 bad, as `git bisect run`.
A commit that does not build is skipped, naming why. The state is written before each step is told to
git, so Ctrl-C, kill -9 or a reboot loses nothing: `--resume` goes on, `--reset` removes it all.

    ladder.py    the way to a commit's binaries and what a step's exit means (pure)
    worktree.py  git's side (worktree, bisect log, diffs) and the state file
    versions.py  what the binaries the env imports say they are, checked against the commit
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, Mapping, Sequence

from .. import builder as b
from .. import console as _console
from .. import git as _git
from .. import nightly as _nightly
from ..builder.ownership.moves import editable_record
from ..builder.ownership.trees import tree_size
from ..builder.request import parse_sets
from ..builder.shortcut import metadata_version, restamp, version_of
from ..config import Config, Origin, OriginKind
from ..envs import copies, envs_dir
from ..errors import BuildFailed, Interrupted, TorchbuildError
from ..locks import locked
from ..run import run
from . import ladder, prebuilt, worktree
from .versions import check_version, drop_bytecode, package_of, version_info
from .worktree import home

OUTSIDE = ("VIRTUAL_ENV", "CONDA_PREFIX")  # the user's active env is never the bisection's
KEPT = ("built", "serving", "names", "binaries", "python_exe", "overlay")  # a new bisection keeps these binaries


@dataclass(frozen=True)
class BisectRequest:
    good: tuple[str, ...] = ()
    bad: str | None = None
    command: tuple[str, ...] = ()
    build_type: str = "release"
    sets: tuple[str, ...] = ()
    nightly: bool = False  # the ladder's third rung: nightly wheels from nightly.index_url


def reset(cfg: Config) -> int:
    """Remove the worktree and what only the bisection used (its env, tree, logs, state)."""
    con = _console.get()
    checkout = cfg.source_path
    place = home(checkout)
    if not place.exists():
        con.info(f"no bisection in {checkout}: nothing to reset")
        return 0
    freed = tree_size(place)
    with locked(place.parent / "bisect.lock", "resetting the bisection", "a bisection is running"):
        worktree.remove(checkout, place)
    con.ok(f"bisection reset: its worktree, env, build tree and logs removed ({freed / 1024 ** 2:.1f} MiB); "
           f"{checkout} is as it was")
    return 0


def start(cfg: Config, request: BisectRequest, base_env: Mapping[str, str]) -> int:
    """Begin a bisection (or a new one where the last has ended, keeping its worktree, env and tree)."""
    checkout = cfg.source_path
    if not (checkout / ".git").exists():
        raise TorchbuildError(f"there is no checkout at {checkout}", "run `inv clone` first (or pass --path)")
    if not request.command:
        raise TorchbuildError("no command to judge each commit by", "give it after --: inv bisect --good v2.11.0 "
                              "--bad HEAD -- python repro.py (exit 0 good, 125 skip, else bad)")
    if not request.good:
        raise TorchbuildError("--good is missing", "pass a commit that works: --good v2.11.0")
    bad = worktree.commit_of(checkout, request.bad or "HEAD", "--bad")
    good = [worktree.commit_of(checkout, ref, "--good") for ref in request.good]
    for ref, sha in zip(request.good, good):
        if sha == bad:
            raise TorchbuildError(f"--good {ref} and --bad {request.bad or 'HEAD'} are the same commit ({sha[:10]})",
                                  "pass a good commit older than the bad one")
        if not worktree.is_ancestor(checkout, sha, bad):
            raise TorchbuildError(f"--good {ref} ({sha[:10]}) is not an ancestor of --bad {request.bad or 'HEAD'} "
                                  f"({bad[:10]})", "pass a good commit older than the bad one, in its history")
    parse_sets(request.sets)  # a secret's value is masked wherever it would be written
    place = home(checkout)
    with locked(place.parent / "bisect.lock", "bisecting", "another bisection of this checkout is running"):
        state = worktree.read_state(place)
        if state and not state.get("result"):
            raise TorchbuildError(f"a bisection of {checkout} is in progress ({state['bad'][:10]} bad, "
                                  f"{len(state['steps'])} step(s) done)",
                                  "`inv bisect --resume` goes on with it; `inv bisect --reset` ends it")
        tree = place / "worktree"
        if not (tree / ".git").exists():
            worktree.add(checkout, tree, bad)
        worktree.git(tree, "bisect", "reset", "--quiet", check=False)
        kept: dict[str, Any] = {k: state[k] for k in KEPT if state and k in state}
        state = {"checkout": str(checkout), "good": good, "bad": bad, "command": list(request.command),
                 "cuda": cfg.build.cuda, "python": cfg.build.python, "arch": cfg.build.arch, "jobs": cfg.build.jobs,
                 "build_type": request.build_type, "sets": [_console.mask(s) for s in request.sets],
                 "_sets": list(request.sets), "steps": [], "result": None,
                 "nightly": {} if request.nightly else None,
                 "built": None, "serving": None, **kept}
        worktree.write_state(place, state)
        said = worktree.git(tree, "bisect", "start", bad, *good).stdout
        _console.get().info(f"bisecting {good[0][:10]}..{bad[:10]} in {tree} (your checkout, its branch, env and "
                            f"trees are not touched): {said.strip().splitlines()[-1] if said.strip() else ''}")
        return loop(cfg, place, state, base_env)


def resume(cfg: Config, base_env: Mapping[str, str], sets: Sequence[str] = ()) -> int:
    """Go on with the bisection where it stopped (Ctrl-C, kill -9, a reboot); `sets`: the --set values again,
    where one held a secret (never written to disk)."""
    checkout = cfg.source_path
    place = home(checkout)
    with locked(place.parent / "bisect.lock", "bisecting", "another bisection of this checkout is running"):
        state = worktree.read_state(place) if place.exists() else None
        if not state:
            raise TorchbuildError(f"no bisection to resume in {checkout}", "start one: inv bisect --good REF "
                                  "--bad REF -- COMMAND")
        if not (place / "worktree" / ".git").exists():
            raise TorchbuildError(f"the bisection's worktree {place / 'worktree'} is gone",
                                  "run `inv bisect --reset`, then start again")
        if state.get("result"):
            report(state, place)
            return 0
        parse_sets(sets)
        if not sets and any("***" in s for s in state["sets"]):
            raise TorchbuildError("the bisection's --set values hold a secret, which is not written to disk",
                                  "pass them again: inv bisect --resume --set KEY=VALUE ...")
        state["_sets"] = list(sets) or state["sets"]
        _console.get().info(f"resuming the bisection: {len(state['steps'])} step(s) done")
        return loop(cfg, place, state, base_env)


def bisect_config(cfg: Config, place: Path, state: Mapping[str, Any]) -> Config:
    """The user's Config pointed at the worktree, with the bisection's own envs and logs, no patch series,
    and the configuration the bisection started with."""
    flag = Origin(OriginKind.FLAG, "inv bisect")
    python = state.get("python") or cfg.build.python
    from ..toolchain.python import OWN_MINOR

    return replace(cfg, source=replace(cfg.source, path=str(place / "worktree")),
                   patches=replace(cfg.patches, auto=False),
                   paths=replace(cfg.paths, envs=str(place / "envs"), logs=str(place / "logs")),
                   build=replace(cfg.build, python=python or OWN_MINOR, cuda=state["cuda"], arch=state["arch"],
                                 jobs=state["jobs"], torch=None),  # its own env, never the torch's (--torch)
                   origins={**cfg.origins, "build.python": flag})


def loop(cfg: Config, place: Path, state: dict[str, Any], base_env: Mapping[str, str]) -> int:
    """Steps until git names the first bad commit."""
    con = _console.get()
    tree = place / "worktree"
    env = {k: v for k, v in base_env.items() if k not in OUTSIDE}
    bcfg = bisect_config(cfg, place, state)
    gitrun, cache = _git.tools(bcfg)
    if re.fullmatch(r"\d+\.\d+", str(bcfg.build.python)):
        made = copies.twin(cfg, bcfg, tree, str(bcfg.build.python))
        if made:
            con.info(f"its env {made.prefix}: a copy of {envs_dir(cfg) / made.name}, which holds what this checkout "
                     "requires, less what was installed into it from local folders (your torch): nothing installed")
    with open(place / "bisect.log", "a") as log:
        try:
            while not state.get("result"):
                commit = worktree.head(tree)
                last = state["steps"][-1] if state["steps"] else None
                if last and last["commit"] == commit and last.get("verdict"):  # judged, not yet told to git
                    tell(state, place, tree, last, log)
                    continue
                with con.timed(f"sync submodules of {commit[:10]}"):
                    _git.update_tree(gitrun, cache, tree)
                step = run_step(bcfg, state, place, tree, commit, env, log)
                state["steps"].append(step)
                worktree.write_state(place, state)
                tell(state, place, tree, step, log)
        except (KeyboardInterrupt, Interrupted):
            raise Interrupted("bisection interrupted; its state is kept, every process it started was stopped",
                              "`inv bisect --resume` goes on from this step; `inv bisect --reset` ends it") from None
    report(state, place)
    return 0


def tell(state: dict[str, Any], place: Path, tree: Path, step: Mapping[str, Any], log: IO[str]) -> None:
    """Give git the step's verdict; keep the result when git names the first bad commit."""
    if worktree.told(tree).get(step["commit"]) != step["verdict"]:
        said = worktree.tell(tree, step["verdict"], step["commit"])
        written(log, said)
        found = ladder.first_bad(said)
        if found:
            state["result"] = list(found)
        else:
            line = next((ln for ln in said.splitlines() if ln.startswith("Bisecting:")), "")
            if line:
                _console.get().info(line)
    worktree.write_state(place, state)


def run_step(bcfg: Config, state: dict[str, Any], place: Path, tree: Path, commit: str, env: Mapping[str, str],
             log: IO[str]) -> dict[str, Any]:
    """One commit: its binaries the cheapest correct way, the version check, COMMAND; the step's record."""
    con = _console.get()
    subject, message = worktree.describe(tree, commit)
    number = len(state["steps"]) + 1
    con.info(f"step {number}: {commit[:10]} {subject}")
    written(log, f"\n== step {number}: {commit} {subject}\n")
    began = time.monotonic()
    way, compiled, failed = obtain(bcfg, state, place, tree, commit, env, log)
    step: dict[str, Any] = {"commit": commit, "subject": subject, "way": way.kind, "why": way.why,
                            "compiled": compiled}
    if failed:
        step.update(verdict="skip", exit=None, detail=failed, seconds=round(time.monotonic() - began, 2))
        con.warn(f"  {commit[:10]} does not build, skipped (git bisect skip): {failed}")
        written(log, f"verdict: skip: does not build: {failed}\n")
        return step
    python = Path(state["python_exe"])
    version, version_file = check_version(python, tree, commit, state)
    judged = [s["commit"] for s in state["steps"] if s.get("exit") is not None]  # the last COMMAND imported it
    drop_bytecode(tree, version_file, judged[-1] if judged else None, commit)
    written(log, f"version: {version}\n")
    prefix = python.parent.parent
    changes = {"PATH": f"{python.parent}{os.pathsep}{env.get('PATH', '')}", "VIRTUAL_ENV": str(prefix)}
    con.info(f"  version {version}; running {' '.join(state['command'])}")

    def shown(line: str) -> None:
        written(log, line + "\n")
        con.info(f"  | {line}")

    done = run(state["command"], cwd=tree, env=changes, base_env=env, check=False, echo=False, on_line=shown)
    verdict = ladder.verdict(done.returncode)
    if verdict is None:
        raise TorchbuildError(f"the command exited {done.returncode} at {commit[:10]}: as `git bisect run`, an exit "
                              "of 128 or more (a signal) stops the bisection", "fix the command, then `inv bisect "
                              "--resume` runs this step again")
    step.update(verdict=verdict, exit=done.returncode, version=version, seconds=round(time.monotonic() - began, 2))
    con.info(f"  {verdict} (exit {done.returncode}) in {step['seconds']:.1f}s")
    written(log, f"verdict: {verdict} (exit {done.returncode}) in {step['seconds']}s\n")
    log.flush()
    return step


def obtain(bcfg: Config, state: dict[str, Any], place: Path, tree: Path, commit: str,
           env: Mapping[str, str], log: IO[str]) -> tuple[ladder.Way, int, str | None]:
    """The commit's binaries in the bisection's env: the way taken, compile steps, why it failed to build."""
    from ..builder.drivers import detect

    built, serving, nightly = state.get("built"), state.get("serving"), state.get("binaries") == "nightly"
    if serving != commit:
        restore(state, place)
        serving = built
    package = package_of(tree)
    diff = worktree.diff(tree, built, commit) if built and serving == built else None
    way = ladder.choose(commit, built, serving, diff, package, detect(tree).outputs_in_env and not nightly)
    found = prebuilt.candidate(bcfg, state, tree, commit, env) if way.kind == "build" else None
    if found:
        way = ladder.Way("nightly", f"nightly {found[0]} was built from {found[2][:10]}" + (
            "" if found[2] == commit else ", whose difference from this commit is Python only"))
    _console.get().info(f"  {way.kind}: {way.why}")
    written(log, f"way: {way.kind}: {way.why}\n")
    log.flush()
    if way.kind == "python" and built:
        overlay(state, place, tree, commit)
        return way, 0, None
    if way.kind == "kept" and (serving != built or nightly):
        return way, 0, None
    state["built"] = state["serving"] = None  # nothing trusted while the tree builds or the nightly is placed
    worktree.write_state(place, state)
    if found:
        placed = _nightly.nightly(bcfg, replace(prebuilt.request(bcfg, state), version=found[0]), env)
        state.update(built=found[2], serving=found[2], names=found[1], binaries="nightly",
                     python_exe=str(placed.env.python))
        if found[1] != commit:
            overlay(state, place, tree, commit)
        worktree.write_state(place, state)
        return way, 0, None
    request = b.BuildRequest.resolve(bcfg, debug=state["build_type"] == "debug",
                                     rel_with_deb_info=state["build_type"] == "relwithdebinfo", sets=state["_sets"],
                                     yes=True)
    try:
        outcome = b.build(bcfg, request, env)
    except BuildFailed as exc:
        return way, 0, failure(exc)
    result = outcome.result
    assert result is not None
    state.update(built=commit, serving=commit, names=commit, binaries="build", python_exe=str(outcome.plan.env.python))
    worktree.write_state(place, state)
    if way.kind == "kept" and not result.up_to_date:
        way = ladder.Way("build", f"{way.why}, but its tree was not up to date")
    return way, result.compiles, None


def written(log: IO[str], text: str) -> None:
    """The bisection's log gets what the terminal shows: secrets masked."""
    log.write(_console.mask(text))


def failure(exc: BuildFailed) -> str:
    """Why a commit does not build, in one line: the known failure, else the compiler's first error."""
    if exc.known:
        return f"known failure {', '.join(exc.known)}"
    errors = [ln.strip() for ln in exc.first_error if "error" in ln.lower() and not ln.lstrip().startswith("FAILED:")]
    return (errors or [ln.strip() for ln in exc.first_error] or [exc.message])[0][:300]


def overlay(state: dict[str, Any], place: Path, tree: Path, commit: str) -> None:
    """`commit`'s version over the kept binaries: the version file the env imports rewritten from the commit its
    binaries name, and the install's dist-info re-stamped to say it too (as pip's record of that commit), their
    originals kept (written back, with their times, before the tree builds again: they are the build's)."""
    names = state.get("names") or state["built"]
    found = version_info(Path(state["python_exe"]), tree)
    path = Path(found["file"] or "")
    if found.get("git_version") is None:  # no version.py naming a commit (not PyTorch's rule): nothing to rewrite
        state["serving"] = commit
        worktree.write_state(place, state)
        return
    if found.get("git_version") != names or not path.is_file():
        raise TorchbuildError(f"the bisection's binaries do not name {names[:10]}, the commit they were built from "
                              f"({found.get('git_version')} in {path})", "run `inv bisect --reset` and start again")
    dist = editable_record(Path(state["python_exe"]).parent.parent, tree)
    if dist and metadata_version(dist) != version_of(path):
        dist = None  # pip's record has a version of its own rule: left as it is
    saved = place / "overlay"
    saved.mkdir(exist_ok=True)
    kept = []
    for i, file in enumerate([path, *([dist.with_name("METADATA"), dist] if dist else [])]):
        shutil.copy2(file, saved / str(i))
        stat = file.stat()
        kept.append({"file": str(file), "copy": str(saved / str(i)), "mtime_ns": stat.st_mtime_ns,
                     "atime_ns": stat.st_atime_ns})
    state.update(overlay={"files": kept, "dist": str(dist.parent) if dist else None})
    worktree.write_state(place, state)
    path.write_text(ladder.rewrite_version((saved / "0").read_text(), names, commit))
    if dist:
        state["overlay"]["restamped"] = str(restamp(dist, str(version_of(path))).parent)
    state["serving"] = commit
    worktree.write_state(place, state)


def restore(state: dict[str, Any], place: Path) -> None:
    """The built version file and dist-info back as the build left them (bytes and times)."""
    kept = state.get("overlay") or {}
    moved, dist = kept.get("restamped"), kept.get("dist")
    if moved and dist and moved != dist and Path(moved).is_dir():
        Path(moved).rename(dist)
    for file in kept.get("files", []):
        copy = Path(file["copy"])
        if copy.is_file():
            Path(file["file"]).write_bytes(copy.read_bytes())
            os.utime(file["file"], ns=(file["atime_ns"], file["mtime_ns"]))
            copy.unlink()
    state.update(overlay=None, serving=state.get("built"))
    worktree.write_state(place, state)


def report(state: Mapping[str, Any], place: Path) -> None:
    """The first bad commit (or the candidates left), its subject and PR, and every step."""
    con = _console.get()
    tree = place / "worktree"
    steps = state["steps"]
    for i, step in enumerate(steps, 1):
        how = f"{step['way']}" + (f", {step['compiled']} compile(s)" if step.get("compiled") else "")
        con.info(f"  {i:>2}. {step['commit'][:10]} {step['verdict']:<4} {how:<24} {step.get('seconds', 0):>6.1f}s  "
                 f"{step['subject'][:60]}")
    ways = ["failed" if s.get("detail") else s["way"] for s in steps]
    found = state["result"]
    if len(found) == 1:
        subject, message = worktree.describe(tree, found[0])
        pr = ladder.pr_number(message)
        con.ok(f"first bad commit: {found[0]} {subject}" + (f" (PR #{pr})" if pr else ""))
    else:
        con.warn(f"only skipped commits are left: the first bad commit is one of {', '.join(c[:10] for c in found)}")
    con.info(f"{ladder.summary(ways)}; {sum(s.get('compiled', 0) for s in steps)} compile step(s); the log of every "
             f"step: {place / 'bisect.log'}; `inv bisect --reset` removes the worktree, env and trees")
