"""Benchmarks: torchbuild against the plain manual recipe, measured in the same run.

    python bench/run.py [--quick] [--only NAME ...] [--readme]

Each figure is a median of >= 5 repetitions (min and max kept) and a ratio against the plain
recipe measured in the same run. Results go to bench/results.json; --readme rewrites README's
"Performance" table from them. Nothing here is a test: no figure fails anything.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.figures import (  # noqa: E402
    bisect,
    builds,
    clone,
    envs,
    explain,
    extensions,
    loop,
    main_era,
    matrix,
    nightly,
    pools,
    realworld,
    shapes,
)
from bench.measure import Bench  # noqa: E402

FIGURES = {"overhead": builds.overhead, "noop": builds.noop, "clone": clone.clone, "switch": builds.switch,
           "matrix": matrix.matrix, "matrix_vs_build": matrix.matrix_vs_build, "distcc": matrix.distcc,
           "envs": envs.envs, "memory": builds.memory, "realworld": realworld.realworld, "nightly": nightly.nightly,
           "loop": loop.loop, "main_era": main_era.main_era, "explain": explain.explain,
           "shapes": shapes.shapes, "core_hits": explain.core_hits, "memory_pool": pools.memory_pool,
           "first_build": realworld.first_build, "drivers": main_era.driver_shapes,
           "bisect": bisect.bisect, "extension": extensions.extension,
           "extension_real": extensions.extension_real}


def write_readme(results: dict) -> None:
    rows = ["| figure | torchbuild | plain recipe | ratio | target |", "|---|---|---|---|---|"]
    for name, r in results.items():
        if isinstance(r, dict) and "ratio" in r:
            how = f" (median of {len(r['pairs'])} pairs' ratios; of the medians {r['ratio of medians']:.2f})" \
                if "pairs" in r else ""
            rows.append(f"| {name} | {r['what']}: {r['ours']['median']:.2f} s | {r['plain_what']}: "
                        f"{r['plain']['median']:.2f} s | {r['ratio']:.2f}{how} | {r['target']} |")
    noop = results.get("no-op inv matrix (3 sessions)")
    if noop:
        rows.append(f"| no-op inv matrix | 3 sessions up to date: {noop['median']:.2f} s | - | - | {noop['target']} |")
    paper = results.get("distcc on paper")
    if paper:
        rows.append(f"| distcc on paper | {paper['local build seconds']:.1f} s here -> "
                    f"{paper['with remote slots seconds']:.1f} s with {paper['remote slots']} remote slots "
                    f"(preprocessing {paper['preprocess share']:.0%} of a compile; configure/link "
                    f"{paper['rest seconds']:.1f} s stay local) | - | {1 / paper['speed-up']:.2f} | - |")
    core = results.get("core cache hits, second Python")
    if core:
        rows.append(f"| core cache hits, a second tree differing only in Python ({' then '.join(core['pythons'])}) | "
                    f"{core['hits']}/{core['compiles']} of the core's compiles | - | {core['rate']:.2f} | "
                    f"{core['target']} |")
    mem = results.get("tool peak RSS (MiB)")
    if mem:
        rows.append(f"| tool peak RSS | {mem['median']:.0f} MiB | - | - | {mem['target']} MiB |")
    readme = ROOT / "README.md"
    text = readme.read_text()
    block = "<!-- bench:start -->\n" + "\n".join(rows) + "\n<!-- bench:end -->"
    text = re.sub(r"<!-- bench:start -->.*<!-- bench:end -->", lambda m: block, text, flags=re.S)
    readme.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller demo builds (still 5 repetitions)")
    parser.add_argument("--only", nargs="*", default=None,
                        help="clone overhead noop switch matrix matrix_vs_build distcc envs memory realworld nightly "
                             "loop main_era drivers explain shapes core_hits memory_pool bisect extension "
                             "extension_real first_build "
                             "(heavy: not in the default list)")
    parser.add_argument("--readme", action="store_true", help="rewrite README's Performance table")
    args = parser.parse_args()
    names = args.only or ["overhead", "noop", "clone", "switch", "matrix", "distcc", "envs", "memory", "realworld",
                          "nightly", "loop", "main_era", "drivers", "explain", "shapes", "core_hits", "memory_pool",
                          "bisect", "extension"]
    with tempfile.TemporaryDirectory(prefix="tb-bench-") as tmp:
        bench = Bench(args.quick, Path(tmp))
        for name in names:
            FIGURES[name](bench)
    out = ROOT / "bench" / "results.json"
    previous = json.loads(out.read_text()) if out.exists() and args.only else {}
    merged = {**previous.get("results", {}), **bench.results}
    out.write_text(json.dumps({"quick": args.quick, "machine": f"{os.cpu_count()} cores",
                               "when": time.strftime("%Y-%m-%d %H:%M"), "results": merged}, indent=2) + "\n")
    print(f"wrote {out}")
    if args.readme:
        write_readme(merged)
        print("rewrote README.md's Performance table")
    return 0



if __name__ == "__main__":
    sys.exit(main())
