"""`inv build --explain`: what the next build of a configuration would run, why, and about how long, before it
spends anything. The answer is ninja's own (`ninja -n -d explain` in the configuration's tree: each output it
would rebuild and the newest input that makes it), grouped by that input; the estimate comes from the
tree's own record of each step (the longest seen: a compile, not a compiler-cache hit; else .ninja_log's last
time), a step it never timed priced at the median of its kind (CUDA, C++, link, codegen) over every tree of
the checkout, and a configure at the median of the earlier builds' configures (their records). Where CMake
would run again first, ninja's dry run stops there; the steps behind it are asked through a manifest that
includes build.ninja (uptodate.past_regeneration). Nothing is built, configured or moved. On a terminal, a
build estimated over build.confirm_over asks first (`confirmed`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import statistics
from collections import Counter
from pathlib import Path
from typing import AbstractSet, Mapping

from .. import console as _console
from ..run import run
from . import history
from .ownership.trees import trees_dir
from .ownership.uptodate import ALWAYS_RUN, NEWEST_INPUT
from .plan import Plan
from .profile import Step
from .request import BuildRequest
from .verdict import Verdict, Way, decide

MISSING = re.compile(r"ninja explain: output (.+) doesn't exist$")
FED = "what the steps above feed"
STALE = "inputs whose content changed though their time says otherwise"
FLAGS = "--debug-files: FLAGS in build.ninja"
HEADERS = (".h", ".hpp", ".hh", ".cuh", ".inc")
SOURCES = (".c", ".cc", ".cpp", ".cxx", ".cu")


def explain(plan: Plan, base_env: Mapping[str, str], request: BuildRequest) -> tuple[list[str], float | None]:
    """The lines `--explain` prints for the plan's configuration (the verdict the build would act on, what
    ninja would run grouped by cause, the estimate), and the estimated wall seconds (None: nothing to estimate
    from, or a switch back)."""
    verdict = decide(plan, request, base_env)
    lines = [f"explain {plan.key}: nothing is built, configured or moved", verdict.headline(), *verdict.said]
    build = plan.checkout / "build"
    whole = verdict.way is Way.WHOLE_WAY
    if verdict.way is Way.SWITCH:
        return lines + ["run `inv build` with these options to switch, then --explain says what it rebuilds"], None
    if verdict.work is None or verdict.forget:
        what = "the tree in build/ (the nearest)" if verdict.marker is None else "this tree's last build"
        steps = steps_of(build)
        nvcc = cuda_units(plan.checkout) if plan.toolkit and not any(kind_of(o) == "CUDA" for o in steps) else []
        line, wall = estimate(steps, set(steps) | set(nvcc) if nvcc else None, jobs(plan), what, kind_medians(plan),
                              configure_seconds(plan, first=True), driver_seconds(plan, whole))
        return lines + ([] if verdict.forget or verdict.marker is None else
                        ["no ninja tree to ask: every step may run"]) + [line], wall
    more, wall = work_lines(plan, verdict)
    return lines + more, wall


def work_lines(plan: Plan, verdict: Verdict) -> tuple[list[str], float | None]:
    """ninja's work grouped by cause, and the estimate (its last line, and its wall seconds)."""
    work, build = verdict.work, plan.checkout / "build"
    assert work is not None
    lines = ["CMake configures again first (a file it read changed); the steps below are the tree's as it stands, "
             "before that"] if work.reconfigure else []
    explained = [line for line in work.lines if not ALWAYS_RUN.fullmatch(line)]
    steps = [named(Path(s), build) if os.path.isabs(s) else s for s in verdict.steps()]  # as build/'s log names
    causes, outputs, generators = group(explained, build, plan.checkout)
    rest = [s for s in work.steps if s not in outputs]
    if rest:
        causes[FED] = len(rest)
    flagged = [e.output for e in verdict.debug_edits if e.output not in work.steps]
    if flagged:
        causes[FLAGS] = len(flagged)
    if len(steps) > len(work.steps) + len(flagged):
        causes[STALE] = len(steps) - len(work.steps) - len(flagged)
    if not steps and not work.reconfigure and verdict.way is Way.UP_TO_DATE:
        return lines + [f"{work.source} in the tree"], 0.0
    lines.append(f"ninja would run {len(steps)} step(s), {verdict.compiles()} of them compile step(s)"
                 + (":" if steps else "; the build's command runs all the same"))
    for cause, count in causes.most_common(8):
        lines.append(f"  {cause}: {count} step(s) ({kind(cause, generators)})")
    if len(causes) > 8:
        lines.append(f"  and {len(causes) - 8} more cause(s): {sum(c for _, c in causes.most_common()[8:])} step(s)")
    line, wall = estimate(steps_of(build), set(steps), jobs(plan), "this tree's .ninja_log",
                          kind_medians(plan), configure_seconds(plan, first=False) if work.reconfigure else None,
                          driver_seconds(plan, verdict.way is Way.WHOLE_WAY))
    return lines + [line], wall


def group(explained: list[str], build: Path, checkout: Path) -> tuple[Counter[str], set[str], set[str]]:
    """(the outputs to rebuild counted by their newest input, every output ninja names, the inputs that
    make a header: code generators')."""
    causes: Counter[str] = Counter()
    outputs, generators = set(), set()
    for line in explained:
        newer = NEWEST_INPUT.match(line)
        missing = MISSING.match(line)
        if newer:
            cause = shown(newer.group(2), build, checkout)
            causes[cause] += 1
            outputs.add(newer.group(1))
            if newer.group(1).endswith(HEADERS) and not cause.endswith(HEADERS + SOURCES):
                generators.add(cause)  # a code generator's input: it makes a header
        elif missing and not ALWAYS_RUN.fullmatch(line):
            causes["not built yet"] += 1
            outputs.add(missing.group(1))
    return causes, outputs, generators


def named(output: Path, build: Path) -> str:
    """An output as ninja names it in build/ (relative to it), else by its absolute path."""
    return output.relative_to(build).as_posix() if output.is_relative_to(build) else str(output)


def shown(path: str, build: Path, checkout: Path) -> str:
    """An input as the user knows it: relative to the checkout when inside it."""
    full = (build / path).resolve()
    return full.relative_to(checkout.resolve()).as_posix() if full.is_relative_to(checkout.resolve()) else path


def kind(cause: str, generators: AbstractSet[str] = frozenset()) -> str:
    if cause in generators:
        return "a codegen input: the headers generated from it, then every unit including one that changes"
    if cause.endswith(HEADERS):
        return "a header: every unit including it compiles again"
    if cause.endswith(SOURCES):
        return "a source file"
    if cause == "not built yet":
        return "outputs that do not exist"
    if cause == FED:
        return "links and generated files"
    if cause == STALE:
        return "outputs the last build's evidence says are stale: removed, then built again"
    if cause == FLAGS:
        return "units whose compile command changes: -O0 -g, or back to CMake's flags"
    return "an input the build generates code or links from"


STEP_SECONDS = ".torchbuild-step-seconds.json"  # in the tree: each output's longest step seen (a real compile)


def steps_of(build: Path) -> dict[str, float]:
    """Each output's seconds: the longest of its steps torchbuild saw in this tree (a compile, not a compiler
    cache hit), else the last time ninja built it (.ninja_log: start and end in ms, then the output)."""
    seconds: dict[str, float] = {}
    try:
        text = (build / ".ninja_log").read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines()[1:]:
        fields = line.split("\t")
        if len(fields) >= 4 and fields[0].isdigit() and fields[1].isdigit():
            seconds[fields[3]] = (int(fields[1]) - int(fields[0])) / 1000
    with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):  # damaged: only a hint
        for output, longest in json.loads((build / STEP_SECONDS).read_text()).items():
            seconds[output] = max(float(longest), seconds.get(output, 0.0))
    return seconds


def remember(build: Path, steps: list[Step]) -> None:
    """Keep each output's longest step in the tree, for the next estimate (the tree moves with its file)."""
    kept = steps_of(build) if (build / STEP_SECONDS).exists() else {}
    for step in steps:
        output = step.output
        kept[output] = max(step.seconds, kept.get(output, 0.0))
    with contextlib.suppress(OSError):
        (build / STEP_SECONDS).write_text(json.dumps({k: round(v, 3) for k, v in kept.items()}))


def jobs(plan: Plan) -> int:
    return max(1, int(plan.changes.get("MAX_JOBS") or 1))


KINDS = ("CUDA", "C++", "link", "codegen")


def kind_of(output: str) -> str:
    """A step's kind by its output, as CMake names them: `x.cu.o` nvcc's, `x.o` a C/C++ compile, a library or
    an executable a link, anything else a generated file."""
    name = output.rsplit("/", 1)[-1]
    if ".cu." in name and name.endswith((".o", ".obj")):
        return "CUDA"
    if name.endswith((".o", ".obj")):
        return "C++"
    if name.endswith((".so", ".a", ".dylib", ".dll", ".lib")) or ".so." in name or "." not in name:
        return "link"
    return "codegen"


def cuda_units(checkout: Path) -> list[str]:
    """The nvcc units a first CUDA tree adds to the nearest CPU tree's steps: the checkout's own tracked .cu files
    (git's index: no walk), named as CMake names their objects."""
    done = run(["git", "ls-files", "-z", "--", "*.cu"], cwd=checkout, capture=True, echo=False, check=False)
    return [f"CMakeFiles/cuda.dir/{name}.o" for name in done.stdout.split("\0") if name] if done.returncode == 0 else []


def tree_kinds(build: Path) -> dict[str, float]:
    """The median seconds of each kind of step in one tree."""
    seen: dict[str, list[float]] = {}
    for output, seconds in steps_of(build).items():
        seen.setdefault(kind_of(output), []).append(seconds)
    return {kind: statistics.median(values) for kind, values in seen.items() if values}


def kind_medians(plan: Plan) -> dict[str, float]:
    """The median seconds of each kind of step over every tree of the checkout (build/ and the kept ones); a kind
    none of them ran (a first CUDA tree's nvcc units), at its median over this machine's builds (history.py)."""
    seen: dict[str, list[float]] = {}
    for tree in [plan.checkout / "build", *sorted(trees_dir(plan.checkout).glob("*"))]:
        for output, seconds in steps_of(tree).items():
            seen.setdefault(kind_of(output), []).append(seconds)
    machine = {k: v for k, v in history.medians(plan.history).items() if k in KINDS}
    return {**machine, **{kind: statistics.median(values) for kind, values in seen.items() if values}}


RECORDS_READ = 30  # the newest records of the checkout's builds, for the configure's median


def recorded(plan: Plan) -> list[tuple[dict[str, float], float, str]]:
    """The newest successful builds recorded in the logs: each one's phases (name -> seconds), wall time and
    configure kind ("" where its record does not say)."""
    records = sorted(plan.log.parent.parent.glob("*/*.record.json"), key=lambda p: p.stat().st_mtime)
    found = []
    for record in records[-RECORDS_READ:]:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
            data = json.loads(record.read_text())
            if data.get("result") == "ok":
                found.append(({str(n): float(s) for n, s in data["profile"]["phases"]}, float(data["seconds"]),
                              str(data["profile"].get("configure kind", ""))))
    return found


def configure_seconds(plan: Plan, first: bool) -> tuple[float, str] | None:
    """The configure's price and where it comes from: the median of the checkout's recorded configures of its
    kind (CUDA or CPU, a new tree's or again: a first CUDA configure detects nvcc, tens of seconds), else of
    this machine's (history.py), else of every recorded configure of the checkout (None: none)."""
    kind = history.configure_kind(plan.toolkit is not None, first)
    done = [(phases["configure"], was) for phases, _, was in recorded(plan) if phases.get("configure", 0) > 0]
    same = [seconds for seconds, was in done if was == kind]
    machine = history.medians(plan.history).get(kind)
    if same:
        return statistics.median(same), f"the median of this checkout's builds that {kind}"
    if machine is not None:
        return machine, f"the median of this machine's builds that {kind}"
    return (statistics.median(s for s, _ in done), "the median of the earlier builds'") if done else None


SHORTCUTS = ("cmake --build", "build_ext in place")  # the phase a build that skipped the driver names


def driver_seconds(plan: Plan, whole_way: bool) -> float | None:
    """The build driver's own time (pip, the backend or setup.py, CMake's install, packaging: all but the
    configure and ninja's compile and link), the median of the recorded builds that went the same way (the
    whole way, or ninja's shortcut; the other way's where none did); None: no build recorded."""
    ways: dict[bool, list[float]] = {True: [], False: []}
    for phases, seconds, _ in recorded(plan):
        own = seconds - phases.get("configure", 0.0) - phases.get("compile and link", 0.0)
        ways[not any(name in phases for name in SHORTCUTS)].append(max(own, 0.0))
    seen = ways[whole_way] or ways[not whole_way]
    return statistics.median(seen) if seen else None


def estimate(steps: Mapping[str, float], outputs: set[str] | None, parallel: int, source: str,
             medians: Mapping[str, float] | None = None, configure: tuple[float, str] | None = None,
             driver: float | None = None) -> tuple[str, float | None]:
    """The estimate's line and wall seconds: the steps' recorded seconds (one never timed at the median of its
    kind over the checkout's trees, else of all), over MAX_JOBS jobs, a configure where one runs, and the
    build driver's own time."""
    medians = dict(medians or {})
    if not steps and not medians:
        return "estimate: none (no build of this checkout recorded its steps yet)", configure[0] if configure else None
    wanted = list(steps) if outputs is None else sorted(outputs)
    typical = statistics.median(steps.values()) if steps else statistics.median(medians.values())
    timed = [steps[o] for o in wanted if o in steps]
    untimed = [o for o in wanted if o not in steps]
    work = sum(timed) + sum(medians.get(kind_of(o), typical) for o in untimed)
    wall = max(work / parallel, max(timed, default=typical)) if wanted else 0.0
    counts = {kind: sum(kind_of(o) == kind for o in wanted) for kind in KINDS}
    kinds = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
    line = (f"estimate: {len(wanted)} step(s) ({kinds or 'none'}), {work:.1f}s of compile and link work, about "
            f"{wall:.1f}s at MAX_JOBS={parallel} if the compiler cache has none of them ({len(timed)} timed in "
            f"{source}, the rest at their kind's median over this checkout's trees, else this machine's builds)")
    extra = []
    if configure:
        wall += configure[0]
        extra.append(f"{configure[0]:.1f}s of CMake configure ({configure[1]})")
    if driver is not None:
        wall += driver
        extra.append(f"{driver:.1f}s around the compile (the build driver, install, packaging: the median of "
                     "the earlier builds that went the same way)")
    if extra:
        line += f", plus {' and '.join(extra)}: about {wall:.1f}s"
    unknown = sorted({kind_of(o) for o in untimed} - set(medians))
    if unknown:
        line += f" ({' and '.join(unknown)} step(s) were never timed on this machine: priced as its typical step, " \
            "which a first nvcc unit or link may well exceed)"
    return line + ("" if driver is not None else "; the build driver's own time comes on top"), wall


def could_take(plan: Plan, over_minutes: float) -> bool:
    """Whether rebuilding all of the tree in build/ could take the threshold (its recorded steps over MAX_JOBS):
    below, no build of it needs asking, and ninja is not asked twice."""
    build = plan.checkout / "build"
    return sum(steps_of(build).values()) / jobs(plan) >= over_minutes * 60 if build.is_dir() else False


def confirmed(lines: list[str], wall: float | None, over_minutes: float) -> bool:
    """Whether to build: yes below the threshold or without an estimate; else the explanation and a y/N
    question on the terminal (the caller asks only there, and not with --yes)."""
    if wall is None or wall < over_minutes * 60:
        return True
    con = _console.get()
    for line in lines:
        con.info(line)
    try:
        answer = input(f"this build is estimated at {wall / 60:.1f} min (build.confirm_over {over_minutes:g}); "
                       "build? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
