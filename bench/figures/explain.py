"""`inv build --explain` before a long build: its estimate against the build's actual wall time, and its own cost."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

from bench.measure import INV, NVCC, Bench, repeat, timed


def explain(self: Bench) -> None:
    """The demo at --units N (setup.py era), built once from an empty compiler cache (the tree records each
    step), then: the header every scaled unit includes edited; a configuration change (a code-generation flag
    every unit sees), whose estimate comes from the tree's last build; a new configuration's first build
    (--debug: a tree of its own, priced from the other tree's steps by kind, configure included); and, with
    nvcc, the first CUDA build (its nvcc steps and CUDA configure never timed on this machine), then a second
    checkout's first CUDA tree (priced from the machine's history of them). `--explain` is timed (it runs no
    compiler), its estimate taken, and the build that follows timed. Every change misses the compiler cache,
    as the estimate assumes."""
    units = 200 if self.quick else 1000
    checkout, env = self.demo("explain", units)
    build = INV + ["build", "--path", str(checkout)]
    timed(build + ["--cuda", "none"], env)
    header = checkout / "c10/include/c10/util/scaled.h"
    # changes the compiler cache cannot serve: code in the header (EDIT: a comment preprocesses away, and ccache
    # would hit), a code-generation flag (an unused -D would hit too)
    cases = [("the shared header edited", ["--cuda", "none"]),
             ("a configuration change", ["--cuda", "none", "--set", "CXXFLAGS=-fno-omit-frame-pointer"]),
             ("a new configuration's first build (--debug)", ["--cuda", "none", "--debug"])]
    if NVCC.exists():
        cases.append(("the first CUDA build", ["--cuda", "13.0"]))
    for label, args in cases:
        estimate_then_build(self, label, build + args, env, header if label == "the shared header edited" else None)
    if NVCC.exists():  # the usual first CUDA tree: a checkout's, on a machine that built CUDA before (history.py)
        other = checkout.with_name("explain-co-second")
        timed(INV + ["clone", "--url", git_url(checkout), "--path", str(other)], env)
        timed(INV + ["build", "--path", str(other), "--cuda", "none"], env)
        estimate_then_build(self, "a second checkout's first CUDA build", INV + ["build", "--path", str(other),
                                                                              "--cuda", "13.0"], env, None)


def git_url(checkout: Path) -> str:
    return subprocess.run(["git", "remote", "get-url", "origin"], cwd=checkout, capture_output=True, text=True,
                          check=True).stdout.strip()


EDIT = "\nnamespace c10 { inline long tb_bench_edit() { return 1; } }\n"


def estimate_then_build(self: Bench, label: str, argv: list[str], env: dict[str, str], header: Path | None) -> None:
    """`--explain` timed and its estimate taken, then the build timed from an empty compiler cache (as the
    estimate assumes); `header`: edited first."""
    if header is not None:
        header.write_text(header.read_text() + EDIT)
    said = ""

    def ask(i: int) -> float:
        nonlocal said
        start = time.perf_counter()
        said = subprocess.run(argv + ["--explain"], env=env, capture_output=True, text=True, check=True).stdout
        return time.perf_counter() - start

    cost = repeat(self.reps, ask)
    estimate = re.findall(r"about ([\d.]+)s", said)  # the last: configure included where one runs
    shutil.rmtree(Path(env["TORCHBUILD_PATHS_CACHE_DIR"]) / "ccache", ignore_errors=True)
    actual = timed(argv, env)
    if estimate:
        guess = float(estimate[-1])
        self.record(f"explain: estimate vs actual, {label}", {"median": guess, "min": guess, "max": guess, "n": 1},
                    {"median": actual, "min": actual, "max": actual, "n": 1}, "0.7 - 1.3", "--explain's estimate",
                    "the build's wall time")
    else:
        print(f"explain: no estimate for {label}:\n{said}", flush=True)
    self.results[f"explain: --explain itself, {label} (s)"] = {**cost, "target": "<= 1"}
    print(f"explain: --explain took {cost['median']:.2f}s ({label}); estimate {estimate[-1:]} against {actual:.1f}s",
          flush=True)


def core_hits(self: Bench) -> None:
    """Two trees of one checkout that differ only in the Python (issue 33): the second tree's compiles of the
    core (everything but the Python extension's minitorch/csrc/), from ccache's stats log of that build, hit
    what the first tree's build put into the cache."""
    checkout, env = self.demo("core-hits", 24)
    env, pythons = {**env, "TORCHBUILD_BUILD_CUDA": "none"}, ["3.11", "3.12"]
    for python in pythons:
        timed(INV + ["build", "--path", str(checkout), "--python", python], env)
    logs = Path(env["TORCHBUILD_PATHS_LOGS"]) / f"py{pythons[1]}-cpu-release"
    stats = max(logs.glob("*.ccache-stats"), key=lambda p: p.stat().st_mtime).read_text()
    hits = misses = 0
    for block in stats.split("# ")[1:]:
        source, _, counters = block.partition("\n")
        if "minitorch/csrc/" in source or "CMakeFiles/" in source or "/Modules/" in source:
            continue  # the Python part, and CMake's own compiler checks
        hits += "direct_cache_hit" in counters or "preprocessed_cache_hit" in counters
        misses += "cache_miss" in counters
    rate = hits / (hits + misses) if hits + misses else 0.0
    self.results["core cache hits, second Python"] = {"hits": hits, "compiles": hits + misses, "rate": rate,
                                                      "target": ">= 0.95", "pythons": pythons}
    print(f"core cache hits, second Python: {hits}/{hits + misses} = {rate:.2%} (target >= 95%)", flush=True)
