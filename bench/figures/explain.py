"""`inv build --explain` before a long build: its estimate against the build's actual wall time, and its own cost."""

from __future__ import annotations

import re
import subprocess
import time

from bench.measure import INV, Bench, repeat, timed


def explain(self: Bench) -> None:
    """The demo at --units N (setup.py era), built once from an empty compiler cache (the tree records each
    step), then the header every scaled unit includes edited: `--explain` is timed (it runs no compiler), its
    estimate taken, and the build that follows timed; the same after a configuration change (a code-generation
    flag every unit sees), whose estimate comes from the tree's last build. Both changes miss the compiler
    cache, as the estimate assumes."""
    units = 200 if self.quick else 1000
    checkout, env = self.demo("explain", units)
    build = INV + ["build", "--path", str(checkout), "--cuda", "none"]
    timed(build, env)
    header = checkout / "c10/include/c10/util/scaled.h"
    rows = {}
    # changes the compiler cache cannot serve: code in the header (a comment preprocesses away, and ccache
    # would hit), a code-generation flag (an unused -D would hit too)
    edit = "\nnamespace c10 { inline long tb_bench_edit() { return 1; } }\n"
    for label, change in (("the shared header edited", None), ("a configuration change", "-fno-omit-frame-pointer")):
        if change is None:
            header.write_text(header.read_text() + edit)
            args: list[str] = []
        else:
            args = ["--set", f"CXXFLAGS={change}"]
        said = ""

        def ask(i: int, args: list[str] = args) -> float:
            nonlocal said
            start = time.perf_counter()
            said = subprocess.run(build + args + ["--explain"], env=env, capture_output=True, text=True,
                                  check=True).stdout
            return time.perf_counter() - start

        cost = repeat(self.reps, ask)
        estimate = re.search(r"about ([\d.]+)s at MAX_JOBS", said)
        actual = timed(build + args, env)
        if estimate:
            rows[label] = float(estimate.group(1))
            self.record(f"explain: estimate vs actual, {label}", {"median": rows[label], "min": rows[label],
                        "max": rows[label], "n": 1}, {"median": actual, "min": actual, "max": actual, "n": 1},
                        "0.7 - 1.3", "--explain's estimate", "the build's wall time")
        self.results[f"explain: --explain itself, {label} (s)"] = {**cost, "target": "<= 1"}
        print(f"explain: --explain took {cost['median']:.2f}s ({label})", flush=True)
