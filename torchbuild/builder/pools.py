"""Memory-aware scheduling: a tree's compile steps that needed more than their share of the memory free at
the start (MAX_JOBS jobs sharing it) go into one ninja job pool on its next builds, so the others keep
MAX_JOBS instead of the whole build being throttled for a few (PyTorch's flash-attention units, 4.5-5.3 GB
each, #124018) or killed by the OOM killer.

Each build keeps its units' peaks with its configuration, in build/ (usage.py samples the compilers under
each object file).
The pool reaches CMake through `CMAKE_PROJECT_INCLUDE`, which PyTorch's build passes on as it passes every
`CMAKE_*` variable (tools/setup_helpers/cmake.py at configure time; cmake/EnvVarForwarding.cmake at every
configure): the included file declares the pool (`JOB_POOLS`) and sets `JOB_POOL_COMPILE` on each heavy
source, a source property since CMake 4.2 (a target's is all or nothing: flash-attention is part of
torch_cuda). The file is a CMake input, so a changed set of units makes ninja re-run CMake by itself;
the depth, from the memory free at each start, is written into the generated rules.ninja directly. With
CMake older than 4.2, MAX_JOBS comes down for every step instead, as far as the heaviest unit needs. MAX_JOBS
itself is planned with what the tree's units needed (half again their median) once a build recorded them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from .ownership.records import KEY_RE, read_marker
from .ownership.trees import trees_dir

NAME = "torchbuild_heavy"
PEAKS = ".torchbuild-step-memory.json"  # in build/: each object file's peak, bytes (the most seen)
PER_SOURCE_FROM = (4, 2)  # CMake's first version with JOB_POOL_COMPILE on a source file
MIB = 2 ** 20


@dataclass(frozen=True)
class Pool:
    """The heavy units (object file -> peak bytes) and how many of them may compile at once."""

    units: Mapping[str, int]
    depth: int
    share: int  # bytes: the memory free at the start over MAX_JOBS

    def said(self, jobs: int) -> str:
        named = ", ".join(f"{Path(u).name} {p / MIB:.0f} MiB" for u, p in sorted(
            self.units.items(), key=lambda x: -x[1])[:3]) + (" ..." if len(self.units) > 3 else "")
        return (f"memory pool {NAME}: {len(self.units)} unit(s) needed more than their share of the memory free "
                f"({self.share / MIB:.0f} MiB a job at MAX_JOBS={jobs}: {named}): at most {self.depth} of them at "
                f"once, every other step keeps MAX_JOBS={jobs}")


def plan_pool(peaks: Mapping[str, int], available: int, jobs: int) -> Pool | None:
    """The pool for these peaks (None: every unit fits its share). Its depth keeps the worst case, `depth`
    heavy units beside `jobs - depth` typical ones, within the memory free."""
    share = available // max(1, jobs)
    heavy = {unit: peak for unit, peak in peaks.items() if peak > share}
    if not heavy:
        return None
    light = [peak for unit, peak in peaks.items() if unit not in heavy]
    typical = int(statistics.median(light)) if light else 0
    heaviest = max(heavy.values())
    fits = (available - jobs * typical) // max(1, heaviest - typical)
    return Pool(heavy, max(1, min(jobs - 1, int(fits))), share)


def jobs_for_all(peaks: Mapping[str, int], available: int, jobs: int) -> int:
    """MAX_JOBS where no pool can be had: as many of the heaviest unit as the memory free holds."""
    heaviest = max(peaks.values(), default=0)
    return max(1, min(jobs, available // heaviest)) if heaviest else jobs


def recorded(checkout: Path) -> dict[str, dict[str, int]]:
    """Each configuration's recorded unit peaks, by its key: build/'s (its marker says it) and each kept tree's
    (its folder's name: a hint needs no marker read, 12,000 names at PyTorch's size)."""
    out = {}
    build = checkout / "build"
    marker = read_marker(build) if build.is_dir() else None
    for key, tree in [*([(marker.key, build)] if marker else []),
                      *((t.name, t) for t in sorted(trees_dir(checkout).glob("*")) if KEY_RE.fullmatch(t.name))]:
        peaks = peaks_of(tree) if tree.is_dir() and not tree.is_symlink() else {}
        if peaks:
            out[key] = peaks
    return out


def per_job(peaks: Mapping[str, int]) -> int | None:
    """Bytes to plan a compile job with, from a tree's recorded units: half again their median (the heavy
    few go into the pool); None before any was recorded."""
    return int(statistics.median(peaks.values()) * 1.5) if peaks else None


def peaks_of(tree: Path) -> dict[str, int]:
    """The tree's recorded peak per unit ({} where the file is missing or damaged: it is only a hint)."""
    with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
        return {str(k): int(v) for k, v in json.loads((tree / PEAKS).read_text()).items()}
    return {}


def remember(build: Path, per_unit: Mapping[str, int]) -> None:
    """Keep each unit's peak (the most seen, by its object file in its tree) with the configuration (build/
    moves with it), as explain.py keeps each step's seconds."""
    if not per_unit:
        return
    kept = peaks_of(build)
    for unit, peak in per_unit.items():
        kept[unit] = max(peak, kept.get(unit, 0))
    with contextlib.suppress(OSError):
        (build / PEAKS).write_text(json.dumps(kept, indent=0, sort_keys=True))


TARGET_DIR = re.compile(r"(?:^|/)CMakeFiles/([^/]+)\.dir/")


def sources(tree: Path, units: Iterable[str]) -> dict[str, str]:
    """Each unit's source file and the target it compiles for (compile_commands.json's `output`; the target
    from CMake's object path `CMakeFiles/<target>.dir/`): {source: target}."""
    wanted, found = {os.path.normpath(tree / u) for u in units}, {}
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        for entry in json.loads((tree / "compile_commands.json").read_text()):
            output = os.path.normpath(Path(entry["directory"], entry.get("output") or ""))  # relative or not
            target = TARGET_DIR.search(output)
            if output in wanted and target:
                found[os.path.normpath(Path(entry["directory"], entry["file"]))] = target.group(1)
    return found


def include_text(depth: int, heavy: Mapping[str, str]) -> str:
    """The CMake file CMAKE_PROJECT_INCLUDE names: the pool, and each heavy source put into it at the end of
    the top directory (when every target exists), in the directory of the target that compiles it."""
    lines = ["# torchbuild's memory pool (torchbuild/builder/pools.py): units that needed more than their share",
             "include_guard(GLOBAL)",
             f"set_property(GLOBAL APPEND PROPERTY JOB_POOLS {NAME}={depth})",
             "function(_torchbuild_memory_pool)"]
    for source, target in sorted(heavy.items()):
        lines.append(f'  if(TARGET {target})\n    set_property(SOURCE "{source}" TARGET_DIRECTORY {target} '
                     f"PROPERTY JOB_POOL_COMPILE {NAME})\n  endif()")
    lines += ["endfunction()", 'cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _torchbuild_memory_pool)']
    return "\n".join(lines) + "\n"


def write_include(path: Path, text: str) -> None:
    """Write the file where it differs (an unchanged one leaves CMake's tree as it is)."""
    with contextlib.suppress(OSError):
        if path.read_text() == text:
            return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


POOL_DEPTH = re.compile(rf"(?m)^(pool {NAME}\n\s+depth = )(\d+)$")


def set_depth(tree: Path, depth: int) -> None:
    """The pool's depth where CMake declared it (CMakeFiles/rules.ninja, which build.ninja includes), without
    a CMake run."""
    for ninja in (tree / "CMakeFiles" / "rules.ninja", tree / "build.ninja"):
        try:
            text = ninja.read_text()
        except OSError:
            continue
        found = POOL_DEPTH.search(text)
        if found:
            if int(found.group(2)) != depth:
                ninja.write_text(POOL_DEPTH.sub(rf"\g<1>{depth}", text))
            return


def pooled(tree: Path) -> list[str]:
    """The steps build.ninja puts into the pool (their outputs)."""
    try:
        text = (tree / "build.ninja").read_text()
    except OSError:
        return []
    return re.findall(rf"(?m)^build ([^:\n]+?): [^\n]*\n(?:  [^\n]*\n)*?  pool = {NAME}$", text)


def include_path(checkout: Path, key: str) -> Path:
    """The configuration's pool file (one a configuration: switching back to a kept tree re-runs no CMake)."""
    return checkout / ".torchbuild" / "pools" / f"{key}.cmake"


def pool_changes(checkout: Path, key: str, changes: Mapping[str, str | None], memory: int, trees: list[Path],
                 cmake_version: str | None) -> tuple[dict[str, str | None], str | None]:
    """The build's environment with the memory pool of this configuration's recorded peaks (build/), and the
    line that says so (None: nothing to say). Writes the pool file where it changed and the depth into each
    tree. Only for a build that passes CMAKE_* variables on (the caller's check)."""
    jobs = int(changes.get("MAX_JOBS") or 0)
    if not jobs or memory <= 0:
        return dict(changes), None
    peaks = peaks_of(checkout / "build")
    pool = plan_pool(peaks, memory, jobs)
    version = tuple(int(x) for x in re.findall(r"\d+", cmake_version or "")[:2])
    if version < PER_SOURCE_FROM:
        if pool is None:
            return dict(changes), None
        fewer = str(jobs_for_all(peaks, memory, jobs))
        return {**changes, "MAX_JOBS": fewer, "CMAKE_BUILD_PARALLEL_LEVEL": fewer}, (
            f"CMake {cmake_version or '(none found)'} cannot pool single units (JOB_POOL_COMPILE on a source needs "
            f"CMake 4.2): MAX_JOBS={fewer} for every step, so the heaviest unit ({max(peaks.values()) / MIB:.0f} MiB) "
            "fits the memory free")
    include = include_path(checkout, key)
    heavy = {s: t for tree in trees for s, t in sources(tree, pool.units).items()} if pool else {}
    write_include(include, include_text(pool.depth if pool else 1, heavy))
    for tree in trees:
        set_depth(tree, pool.depth if pool else 1)
    out = {**changes, "CMAKE_PROJECT_INCLUDE": str(include)}
    if pool is None:
        return out, None
    later = "" if any(str(include) in (t / "CMakeCache.txt").read_text(errors="replace") for t in trees) or not trees \
        else " (from this tree's next configure: it was configured without it)"
    return out, pool.said(jobs) + later
