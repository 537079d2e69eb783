"""What a process tree uses while it runs: the most compilers at once and the peak memory of all of it.

`inv matrix` watches its nox run with it, so the summary can show that side by side stayed within
the job budget and the memory that was free at the start.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
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


def processes() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent pid, command name, resident bytes) for every process we can read."""
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
        out[int(entry.name)] = (int(fields[1]), stat[stat.find("(") + 1:name_end], int(fields[21]) * PAGE)
    return out


def tree_usage(root: int, table: dict[int, tuple[int, str, int]]) -> tuple[int, int, int]:
    """(compilers, resident bytes, compilers' resident bytes) of `root` and its descendants."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    compilers = rss = compilers_rss = 0
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in table:
            _, name, resident = table[pid]
            rss += resident
            if name in COMPILERS:
                compilers += 1
                compilers_rss += resident
        todo.extend(children.get(pid, ()))
    return compilers, rss, compilers_rss


class Watch:
    """Sample a process tree (by default this process's) every `interval` seconds while in the block."""

    def __init__(self, root: int | None = None, interval: float = 0.2) -> None:
        self.root = os.getpid() if root is None else root
        self.interval = interval
        self.peak = Peak()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            compilers, rss, compilers_rss = tree_usage(self.root, processes())
            self.peak.compilers = max(self.peak.compilers, compilers)
            self.peak.rss = max(self.peak.rss, rss)
            self.peak.compilers_rss = max(self.peak.compilers_rss, compilers_rss)
            if compilers:
                self.peak.per_compiler = max(self.peak.per_compiler, compilers_rss // compilers)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
