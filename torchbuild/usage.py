"""What a process tree uses while it runs: the most compilers at once, the peak memory of all of it, and
each compile step's peak (the unit its compilers work for: the outermost command above them that names
an object file with `-o`, as ninja ran it: `ccache g++ ... -o CMakeFiles/c10.dir/a.cpp.o`).

`inv matrix` watches its nox run with it, so the summary can show that side by side stayed within
the job budget and the memory that was free at the start; a build keeps each unit's peak for the
next build's memory pool (builder/pools.py).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

COMPILERS = {"cc1", "cc1plus", "cicc", "ptxas", "nvcc", "clang", "clang++", "cudafe++"}
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Peak:
    compilers: int = 0  # the most compiler processes running at one time
    rss: int = 0  # bytes: the most resident memory of the whole tree at one time
    compilers_rss: int = 0  # bytes: the most resident memory of its compilers at one time
    per_compiler: int = 0  # bytes: the most resident memory per compiler at one time (a job's peak)
    per_unit: dict[str, int] = field(default_factory=dict)  # bytes: each object file's compilers at their peak


def processes() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent pid, command name, resident bytes) for every running process we can read."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name_end = stat.rfind(")")
        fields = stat[name_end + 2:].split()
        if fields[0] in ("Z", "X"):  # exited, not yet reaped: it compiles nothing (its driver has not waited yet)
            continue
        out[int(entry.name)] = (int(fields[1]), stat[stat.find("(") + 1:name_end], int(fields[21]) * PAGE)
    return out


OBJECT_SUFFIXES = (".o", ".obj")


def unit_of(pid: int, root: int, table: dict[int, tuple[int, str, int]], known: dict[int, str | None]) -> str | None:
    """The object file a compiler process under `root` works for: the outermost of it and its parents whose
    command line has `-o <file>.o` (nvcc's own host compiles write temporary objects under it; ccache's is
    the step's). None outside `root`'s tree. `known` keeps each pid's answer (its command line stays)."""
    found = None
    for _ in range(64):
        if pid == root:
            return found
        if pid not in table:
            return None
        if pid not in known:
            try:
                args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                args = []
            out = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == b"-o"), b"").decode(errors="replace")
            known[pid] = out if out.endswith(OBJECT_SUFFIXES) else None
        found = known[pid] or found
        pid = table[pid][0]
    return None


def tree_usage(root: int, table: dict[int, tuple[int, str, int]]) -> tuple[int, int, int]:
    """(compiles, resident bytes, compilers' resident bytes) of `root` and its descendants. A compile is a
    compiler process with no compiler above it: nvcc's own cudafe++, cicc, ptxas and host cc1plus are its one
    compile, as the job budget counts them, though their memory counts."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    compilers = rss = compilers_rss = 0
    todo = [(root, False)]
    while todo:
        pid, under_compiler = todo.pop()
        compiler = False
        if pid in table:
            _, name, resident = table[pid]
            rss += resident
            compiler = name in COMPILERS
            if compiler:
                compilers += not under_compiler
                compilers_rss += resident
        todo.extend((child, under_compiler or compiler) for child in children.get(pid, ()))
    return compilers, rss, compilers_rss


class Watch:
    """Sample a process tree (by default this process's) every `interval` seconds while in the block."""

    def __init__(self, root: int | None = None, interval: float = 0.2) -> None:
        self.root = os.getpid() if root is None else root
        self.interval = interval
        self.peak = Peak()
        self._known: dict[int, str | None] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            table = processes()
            compilers, rss, compilers_rss = tree_usage(self.root, table)
            if compilers:
                self._units(table)
            self.peak.compilers = max(self.peak.compilers, compilers)
            self.peak.rss = max(self.peak.rss, rss)
            self.peak.compilers_rss = max(self.peak.compilers_rss, compilers_rss)
            if compilers:
                self.peak.per_compiler = max(self.peak.per_compiler, compilers_rss // compilers)

    def _units(self, table: dict[int, tuple[int, str, int]]) -> None:
        """Each unit's compilers' memory now, kept where it is the most seen (a pid gone since the last look
        is forgotten: it may come back as another process)."""
        self._known = {pid: unit for pid, unit in self._known.items() if pid in table}
        now: dict[str, int] = {}
        for pid, (_, name, resident) in table.items():
            if name in COMPILERS:
                unit = unit_of(pid, self.root, table, self._known)
                if unit:
                    now[unit] = now.get(unit, 0) + resident
        for unit, resident in now.items():
            self.peak.per_unit[unit] = max(self.peak.per_unit.get(unit, 0), resident)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
