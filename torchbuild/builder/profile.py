"""Where a build's time went, from ninja's `.ninja_log` and the build's own output, kept three ways:
a short table at the end of the build (and in its record), a Chrome trace (opens in Perfetto or
chrome://tracing: one lane per job slot, the phases on a lane of their own), and a self-contained
HTML timeline. `inv build --profile` prints the last one.

Phases come from the lines the build prints, as CMake, ninja and setuptools word them for any
setup.py + CMake project (PyTorch's included): build dependencies (pip installing them before anything is
built), configure, compile and link (ninja's steps), install, build_ext, packaging. Steps are told apart by
their outputs: objects are compiles, libraries and programs are links, the rest (custom commands) code
generation.
"""

from __future__ import annotations

import html
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

MARKS = [  # (first line of a phase, phase); a phase runs until the next one starts
    (re.compile(r"^-- (The (C|CXX) compiler identification|Configuring|Detecting)"), "configure"),
    (re.compile(r"^(\[\s*\d+/\d+\]|-- Build files have been written to)"), "compile and link"),  # ninja prints
    # a step as it ends: the end of CMake's configure is when compiling begins where no ninja log says so
    (re.compile(r"^-- (Install configuration|Installing|Up-to-date):"), "install"),
    (re.compile(r"^(running build_ext|building '[^']+' extension)"), "build_ext"),
    (re.compile(r"^(creating '[^']+\.whl'|Created wheel|Successfully installed|running bdist_wheel)"), "packaging"),
]
BUILDING = ("configure", "compile and link", "install", "build_ext")
INSTALLED = ("-- Installing: ", "-- Up-to-date: ")  # CMake's install, a line a file
DEPENDENCIES = "build dependencies"
FAILED = "the failed attempt"  # the span before a retried build's second attempt
OBJECT = re.compile(r"\.(o|obj)$")
LINKED = re.compile(r"(\.so(\.[\d.]+)?|\.a|\.dylib)$")
TABLE_ROWS = 5


@dataclass(frozen=True)
class Step:
    output: str
    start: float  # seconds since the epoch
    end: float
    kind: str  # compile, link or codegen

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class Timeline:
    """What the build's output says, as it runs: when each phase began."""

    started: float = field(default_factory=time.time)
    marks: list[tuple[float, str]] = field(default_factory=list)

    def new_attempt(self) -> None:
        """The build command runs again (after a known failure's remedy): what ran before is one span."""
        self.marks = [(time.time(), FAILED)]

    def feed(self, line: str) -> None:
        text = line.lstrip()
        if self.marks and self.marks[-1][1] == "install" and text.startswith(INSTALLED):
            return  # the install goes on: a line a file (PyTorch's 9,000 headers), no phase to look for
        for pattern, phase in MARKS:
            if pattern.match(text) and (not self.marks or self.marks[-1][1] != phase):
                if phase == "compile and link" and any(p == phase for _, p in self.marks):
                    return  # ninja again (the install target): still its phase
                if phase == "packaging" and not any(p in BUILDING for _, p in self.marks):
                    phase = DEPENDENCIES  # pip installing what the build needs, before it builds anything
                    if self.marks and self.marks[-1][1] == phase:
                        return
                self.marks.append((time.time(), phase))
                return


def kind_of(output: str) -> str:
    if OBJECT.search(output):
        return "compile"
    if LINKED.search(output) or ("." not in output.rsplit("/", 1)[-1] and "CMakeFiles" not in output):
        return "link"
    return "codegen"


def ninja_steps(log: Path, offset: int, since: float = 0.0) -> list[Step]:
    """The steps ninja ran from `offset` of its log on, anchored in time by the mtimes it records (each
    ninja run's times count from its own start). Where ninja rewrote its log meanwhile (it compacts a
    long one), the steps whose outputs were written since `since` (seconds since the epoch)."""
    try:
        compacted = offset > log.stat().st_size
        with open(log, "rb") as fh:
            fh.seek(0 if compacted else offset)
            lines = fh.read().decode(errors="replace").splitlines()
    except OSError:
        return []
    runs: list[list[tuple[int, int, int, str]]] = [[]]
    for line in lines:
        parts = line.split("\t")
        if len(parts) < 4 or line.startswith("#"):
            continue
        try:
            start, end, mtime = int(parts[0]), int(parts[1]), int(parts[2])
        except ValueError:
            continue
        if compacted and mtime / (1e9 if mtime > 1e17 else 1e6 if mtime > 1e14 else 1.0) < since - 1:
            continue  # written before this build
        if runs[-1] and end < runs[-1][-1][1]:  # times went back: the next ninja run
            runs.append([])
        runs[-1].append((start, end, mtime, parts[3]))
    steps = []
    for entries in runs:
        stamps = [m for _, _, m, _ in entries if m > 0]
        if not stamps:
            continue
        scale = 1e9 if min(stamps) > 1e17 else 1e6 if min(stamps) > 1e14 else 1.0
        base = min(stamps) / scale  # about when this ninja run began
        steps += [Step(out, base + s / 1000, base + e / 1000, kind_of(out)) for s, e, _, out in entries]
    return steps


def logs_of(trees: Iterable[Path]) -> dict[Path, tuple[int, int]]:
    """Each tree's .ninja_log by (inode, size), before a build (`steps_since`)."""
    out = {}
    for tree in trees:
        try:
            st = (tree / ".ninja_log").stat()
        except OSError:
            continue
        out[tree] = (st.st_ino, st.st_size)
    return out


def steps_since(before: Mapping[Path, tuple[int, int]], trees: Iterable[Path], since: float) -> list[Step]:
    """The steps ninja ran in each tree during the build: what a log that is still the same file has after its
    size before; from a log new or rewritten since (CMake's configure runs `ninja -t recompact`), those ninja
    ran since `since`."""
    steps = []
    for tree, (inode, _) in logs_of(trees).items():
        same = before.get(tree, (-1, 0))[0] == inode
        steps += ninja_steps(tree / ".ninja_log", before[tree][1] if same else sys.maxsize, since)
    return steps


def lanes(steps: list[Step]) -> list[int]:
    """A job slot for each step: the first lane free when it starts (as ninja's jobs were)."""
    free_at: list[float] = []
    out = []
    for step in sorted(steps, key=lambda s: s.start):
        lane = next((i for i, t in enumerate(free_at) if t <= step.start + 1e-4), len(free_at))
        if lane == len(free_at):
            free_at.append(0.0)
        free_at[lane] = step.end
        out.append(lane)
    return out


def phases(timeline: Timeline, command_start: float, command_end: float, finished: float,
           command: str = "setup.py", steps: Iterable[Step] = ()) -> list[tuple[str, float, float]]:
    """(phase, start, end): torchbuild's preparation, the build command's phases, then the record. Ninja
    prints a step's line when the step ends (its output is not a terminal): compiling starts with the
    first step ninja's log records, where that is earlier."""
    out = [("prepare", timeline.started, command_start)]
    marks = [(t, p) for t, p in timeline.marks if command_start <= t <= command_end]
    first_step = min((s.start for s in steps if command_start <= s.start), default=None)
    compiling = next((i for i, (_, p) in enumerate(marks) if p == "compile and link"), None)
    if first_step is not None and compiling is not None and first_step < marks[compiling][0]:
        earlier = max((t for t, _ in marks[:compiling]), default=command_start)
        marks[compiling] = (max(first_step, earlier), marks[compiling][1])
    if marks and marks[0][1] == FAILED:  # a retried build: its phases are the last attempt's, once
        out.append((FAILED, command_start, marks[0][0]))
        command_start, marks = marks[0][0], marks[1:]
    first = marks[0][0] if marks else command_end
    if first - command_start > 0.005:
        out.append((command, command_start, first))
    for i, (t, phase) in enumerate(marks):
        out.append((phase, t, marks[i + 1][0] if i + 1 < len(marks) else command_end))
    out.append(("record", command_end, finished))
    return [(name, start, end) for name, start, end in out if end > start]


def summarise(steps: list[Step], spans: list[tuple[str, float, float]], hits: int, misses: int,
              peak_per_job: int) -> dict[str, object]:
    """The profile as the record keeps it."""
    def total(kind: str) -> dict[str, float]:
        chosen = [s for s in steps if s.kind == kind]
        wall = (max(s.end for s in chosen) - min(s.start for s in chosen)) if chosen else 0.0
        return {"steps": len(chosen), "seconds": round(sum(s.seconds for s in chosen), 3), "wall": round(wall, 3)}

    def slowest(kind: str, n: int) -> list[list[object]]:
        top = sorted((s for s in steps if s.kind == kind), key=lambda s: s.seconds, reverse=True)[:n]
        return [[s.output, round(s.seconds, 3)] for s in top]

    return {"phases": [[name, round(end - start, 3)] for name, start, end in spans],
            "compile": total("compile"), "link": total("link"), "codegen": total("codegen"),
            "slowest units": slowest("compile", TABLE_ROWS), "slowest links": slowest("link", 3),
            "cache hit rate": round(hits / (hits + misses), 3) if hits + misses else None,
            "peak memory per job MiB": round(peak_per_job / 2 ** 20, 1) if peak_per_job else None,
            "job slots": max(lanes(steps), default=-1) + 1}


def trace(steps: list[Step], spans: list[tuple[str, float, float]]) -> dict[str, object]:
    """A Chrome trace: tid 0 the phases, tid N+1 ninja's job slot N."""
    origin = min([s for _, s, _ in spans] + [s.start for s in steps], default=0.0)
    events: list[dict[str, object]] = [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "phases"}}]
    for name, start, end in spans:
        events.append({"name": name, "cat": "phase", "ph": "X", "pid": 1, "tid": 0,
                       "ts": round((start - origin) * 1e6), "dur": round((end - start) * 1e6)})
    slots = lanes(steps)
    for lane in sorted(set(slots)):
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": lane + 1, "args": {"name": f"job {lane}"}})
    for step, lane in zip(sorted(steps, key=lambda s: s.start), slots):
        events.append({"name": step.output.rsplit("/", 1)[-1], "cat": step.kind, "ph": "X", "pid": 1,
                       "tid": lane + 1, "ts": round((step.start - origin) * 1e6),
                       "dur": max(1, round(step.seconds * 1e6)), "args": {"output": step.output}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


COLOURS = {"phase": "#8da0cb", "compile": "#66c2a5", "link": "#fc8d62", "codegen": "#e5c494"}


def timeline_html(events: list[dict[str, object]], title: str) -> str:
    """A self-contained page: one row a lane, a bar a step (its name and seconds on hover)."""
    bars = [e for e in events if e.get("ph") == "X"]
    end = max((int(str(e["ts"])) + int(str(e["dur"])) for e in bars), default=1) or 1
    rows = sorted({int(str(e["tid"])) for e in bars})
    width, row_h = 1200, 22
    shapes = []
    for e in bars:
        y = rows.index(int(str(e["tid"]))) * row_h + 20
        x = int(str(e["ts"])) / end * width
        w = max(1.0, int(str(e["dur"])) / end * width)
        tip = html.escape(f"{e['name']} ({e['cat']}): {int(str(e['dur'])) / 1e6:.2f}s")
        shapes.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_h - 4}" '
                      f'fill="{COLOURS.get(str(e["cat"]), "#999")}"><title>{tip}</title></rect>')
        if w > 60:
            name = html.escape(str(e["name"])[:30])
            shapes.append(f'<text x="{x + 3:.1f}" y="{y + 13}" font-size="11">{name}</text>')
    labels = "".join(f'<text x="2" y="{i * row_h + 34}" font-size="11">{"phases" if t == 0 else f"job {t - 1}"}'
                     f"</text>" for i, t in enumerate(rows))
    height = len(rows) * row_h + 30
    return (f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>"
            f"<h3 style='font-family:sans-serif'>{html.escape(title)}: {end / 1e6:.1f}s</h3>"
            f"<svg xmlns='http://www.w3.org/2000/svg' width='{width + 60}' height='{height}' "
            f"font-family='sans-serif'>{labels}<g transform='translate(55,0)'>{''.join(shapes)}</g></svg>"
            "<p style='font-family:sans-serif;font-size:12px'>phases (blue), compile (green), link (orange), "
            "code generation (sand); hover for seconds. The same data: the .trace.json beside this file "
            "(Perfetto, chrome://tracing).</p>")


def write(log: Path, steps: list[Step], spans: list[tuple[str, float, float]], summary: dict[str, object],
          title: str) -> dict[str, object]:
    """The trace and the timeline beside the build's log; the summary with their paths."""
    data = trace(steps, spans)
    trace_path, page = log.with_suffix(".trace.json"), log.with_suffix(".profile.html")
    trace_path.write_text(json.dumps(data))
    page.write_text(timeline_html(data["traceEvents"], title))  # type: ignore[arg-type]
    return {**summary, "trace": str(trace_path), "html": str(page)}


def table(profile: dict[str, object]) -> list[str]:
    """The profile as the lines printed at the end of a build."""
    lines = ["where the time went: " + ", ".join(f"{name} {sec:.1f}s" for name, sec in profile["phases"])]  # type: ignore[attr-defined]
    for kind in ("compile", "link", "codegen"):
        part = profile[kind]
        if isinstance(part, dict) and part["steps"]:
            lines.append(f"  {kind}: {part['steps']} step(s), {part['seconds']:.1f}s of work in {part['wall']:.1f}s")
    for label, key in (("slowest units", "slowest units"), ("slowest links", "slowest links")):
        top = profile[key]
        if isinstance(top, list) and top:
            lines.append(f"  {label}: " + ", ".join(f"{Path(str(o)).name} {s:.2f}s" for o, s in top))
    extra = []
    if profile.get("cache hit rate") is not None:
        extra.append(f"compiler cache hit rate {float(str(profile['cache hit rate'])):.0%}")
    if profile.get("peak memory per job MiB"):
        extra.append(f"peak memory per job {profile['peak memory per job MiB']} MiB")
    if extra:
        lines.append("  " + "; ".join(extra))
    why = profile.get("why the cache missed")
    if isinstance(why, list) and why:
        lines.append("  why the compiler cache missed: " + "; ".join(str(w) for w in why[:4]))
    if profile.get("html"):
        lines.append(f"  timeline: {profile['html']} (trace: {profile['trace']})")
    return lines
