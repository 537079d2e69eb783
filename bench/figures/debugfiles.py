"""`--debug-files` (issue 57): one unit with debug info in a release configuration, against a full debug build
of the demo and against tools/build_with_debinfo.py's way done by hand; and the way back to optimized."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

from bench.figures.atsize import own_ninja
from bench.measure import INV, Bench, stats, timed


def by_hand(checkout: Path, unit: str) -> float:
    """build_with_debinfo.py's way: ninja's own compile command for the unit with -O2/-O3 made -g, run by
    hand, then the library's link command, then the library copied where the import finds it."""
    build = checkout / "build"
    start = time.perf_counter()
    obj = f"CMakeFiles/c10.dir/{unit}.o"
    compile_cmd = ninja_commands(build, obj)[-1]
    subprocess.run(re.sub(r"(?<!\S)-O[23](?!\S)", "-g", compile_cmd), shell=True, cwd=build, check=True)
    subprocess.run(ninja_commands(build, "libc10.so")[-1], shell=True, cwd=build, check=True)
    shutil.copy2(build / "libc10.so", checkout / "minitorch" / "lib" / "libc10.so")  # setup.py era: build/ holds it
    return time.perf_counter() - start


def ninja_commands(build: Path, target: str) -> list[str]:
    argv = [*own_ninja(build.parent), "-C", str(build), "-t", "commands", target]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines()


def debug_files(self: Bench) -> None:
    """The demo (setup.py era, 200 units with --quick, else 1000) built release. Three units in turn: the unit
    by `--debug-files`, then the plain build that puts it back (timed: the way back), then the same unit by
    hand, then the plain build that undoes what the hand left (ninja's deps say the object is stale). Last,
    the full debug build of the demo (a tree of its own, from an empty compiler cache)."""
    units = 200 if self.quick else 1000
    checkout, env = self.demo("debug-files", units)
    build = INV + ["build", "--path", str(checkout), "--cuda", "none"]
    timed(build, env)
    pairs, back, undo = [], [], []
    for i in (1, 2, 3):
        unit = f"c10/core/unit_{i:02d}.cpp"
        ours = timed(build + ["--debug-files", unit], env)
        back.append(timed(build, env))
        hand = by_hand(checkout, unit)
        undo.append(timed(build, env))
        pairs.append((ours, hand))
    self.record_pairs("debug files: one unit, against build_with_debinfo.py's way by hand", pairs, "-",
                      "inv build --debug-files <unit>", "its compile command with -g, the link, the copy, by hand")
    shutil.rmtree(Path(env["TORCHBUILD_PATHS_CACHE_DIR"]) / "ccache", ignore_errors=True)
    full = timed(build + ["--debug"], env)
    ours = stats([p[0] for p in pairs])
    self.record("debug files: one unit, against a full debug build", ours, stats([full]), "<= 0.1",
                "inv build --debug-files <unit>", "inv build --debug (a tree of its own, empty compiler cache)")
    self.record("debug files: back to optimized, against undoing the hand's", stats(back), stats(undo), "<= 1",
                "inv build after --debug-files", "inv build after build_with_debinfo's way")
