"""Build output: ninja/make progress parsing, the progress line, and the first error with context."""

from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass

NINJA = re.compile(r"^\[(\d+)/(\d+)\]\s+(.*)$")
MAKE = re.compile(r"^\[\s*(\d+)%\]\s+(.*)$")
ERROR = re.compile(r"(\berror\b:|\berror:|^CMake Error|^FAILED: |fatal error|undefined reference|"
                   r"Killed signal terminated|nvcc fatal|ninja: build stopped|^Error: )", re.IGNORECASE)
ERROR_WORDS = ("error", "failed: ", "undefined reference", "killed signal", "fatal", "build stopped")  # each of
# ERROR's, lower-cased: a line without one is not searched (a build prints thousands of lines)
COMPILE = re.compile(r"\b(Building (CXX|C|CUDA) object|Compiling)\b")
INSTALLED = ("-- Installing: ", "-- Up-to-date: ")  # CMake's install, a line a file: 9,000 headers in PyTorch's


def an_error(line: str) -> bool:
    """Whether a line reads as a build error (ERROR), looked for only where one of its words is."""
    lower = line.lower()
    return any(word in lower for word in ERROR_WORDS) and ERROR.search(line) is not None


@dataclass(frozen=True)
class Step:
    done: int
    total: int
    what: str


def parse_step(line: str) -> Step | None:
    """`[12/345] Building CXX object x.o` (ninja) or `[ 40%] Building ...` (make)."""
    line = line.strip()
    m = NINJA.match(line)
    if m:
        return Step(int(m.group(1)), int(m.group(2)), m.group(3))
    m = MAKE.match(line)
    if m:
        return Step(int(m.group(1)), 100, m.group(2))
    return None


OUTPUT = re.compile(r"\s-o\s*(\S+)")  # a compiler's or linker's output, in a command ninja or setuptools prints
RAW_COMPILE = re.compile(r"(?:^|[\s/])(?:ccache\s+)?\S*(?:gcc|g\+\+|c\+\+|cc|clang\+\+|clang|nvcc)(?:-\d+)?\s.*\s-c\s")


def target_name(what: str) -> str:
    """The short name of what a step builds: `Building CXX object c10/CMakeFiles/c10.dir/core/a.cpp.o` -> a.cpp;
    a bare command (cpp_extension's build.ninja, setuptools' build_ext) by its `-o`, never by its last flag."""
    m = re.search(r"(?:object|Linking \w+ \w+ (?:library|executable|module)?)\s+(\S+)", what) \
        or re.search(r"\s-c\s+(\S+)", what) or OUTPUT.search(what)
    target = m.group(1) if m else what.split()[-1] if what.split() else what
    name = target.rsplit("/", 1)[-1]
    return name[:-2] if name.endswith(".o") else name


def first_error(lines: list[str], context: int = 3) -> list[str]:
    """The first error line with a few lines before and after it ([] when none)."""
    for i, line in enumerate(lines):
        if ERROR.search(line) and not line.lstrip().startswith(("-- ", "warning")):
            return lines[max(0, i - context): i + context + 1]
    return []


class Tracker:
    """Turns streamed build output into progress text and keeps what an error report needs."""

    def __init__(self, keep: int = 400) -> None:
        self.start = time.monotonic()
        self.step: Step | None = None
        self.first_step_at: float | None = None
        self.first_step_done = 0
        self.compiles = 0
        self.lines: deque[str] = deque(maxlen=keep)
        self.error_context: list[str] = []

    def feed(self, line: str) -> str | None:
        """Take one output line; return the new progress text, or None."""
        self.lines.append(line)
        if not self.error_context and an_error(line):
            self.error_context = [line]
        elif self.error_context and len(self.error_context) < 8:
            self.error_context.append(line)
        if line.startswith(INSTALLED):
            return None
        step = parse_step(line)
        if step is None:  # setuptools' build_ext compiling a unit itself?
            if "-c" in line and RAW_COMPILE.search(line) and OUTPUT.search(line):
                self.compiles += 1
                return f"compiling {target_name(line)}"
            return None
        if COMPILE.search(step.what) or RAW_COMPILE.search(step.what):
            self.compiles += 1
        now = time.monotonic()
        if self.first_step_at is None:
            self.first_step_at, self.first_step_done = now, step.done
        self.step = step
        return self.text(now)

    def text(self, now: float | None = None) -> str:
        step = self.step
        if step is None:
            return "configuring"
        now = time.monotonic() if now is None else now
        pct = 100 * step.done // max(step.total, 1)
        elapsed = now - (self.first_step_at or now)
        done = step.done - self.first_step_done
        rate = done / elapsed if elapsed > 0.5 and done > 0 else None
        eta = (step.total - step.done) / rate if rate else None
        parts = [f"[{pct:3d}%] {step.done}/{step.total}"]
        if rate:
            parts.append(f"{rate:.1f}/s ETA {_duration(eta or 0)}")
        parts.append(target_name(step.what))
        return "  ".join(parts)

    def new_attempt(self) -> None:
        """Forget the last attempt's output: a retried build's report is its own (the remedy applied)."""
        self.lines.clear()
        self.error_context = []

    def error_report(self) -> list[str]:
        found = first_error(list(self.lines))
        return found or self.error_context or list(self.lines)[-10:]


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"
