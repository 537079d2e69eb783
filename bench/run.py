"""Benchmarks: torchbuild against the plain manual recipe, measured in the same run.

    python bench/run.py [--quick] [--only NAME ...]

Each figure is a median of >= 5 repetitions (min and max kept) and a ratio against the plain
recipe measured in the same run. Results go to bench/results.json, each figure with the machine and date
it was measured on, and the figures table of docs/performance.md is generated from them (docs/generate.py).
Nothing here is a test: no figure fails anything.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.figures import (  # noqa: E402
    atsize,
    bisect,
    builds,
    clone,
    debugfiles,
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
from docs import generate as docs  # noqa: E402

FIGURES = {"overhead": builds.overhead, "noop": builds.noop, "clone": clone.clone, "switch": builds.switch,
           "matrix": matrix.matrix, "matrix_vs_build": matrix.matrix_vs_build, "distcc": matrix.distcc,
           "envs": envs.envs, "memory": builds.memory, "realworld": realworld.realworld, "nightly": nightly.nightly,
           "loop": loop.loop, "main_era": main_era.main_era, "explain": explain.explain,
           "shapes": shapes.shapes, "core_hits": explain.core_hits, "memory_pool": pools.memory_pool,
           "first_build": realworld.first_build, "drivers": main_era.driver_shapes,
           "bisect": bisect.bisect, "extension": extensions.extension,
           "extension_no_ninja": lambda bench: extensions.extension(bench, use_ninja=False),
           "extension_real": extensions.extension_real, "debug_files": debugfiles.debug_files,
           "at_size": atsize.at_size, "at_size_main": lambda bench: atsize.at_size(bench, era="main")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller demo builds (still 5 repetitions)")
    parser.add_argument("--only", nargs="*", default=None,
                        help="clone overhead noop switch matrix matrix_vs_build distcc envs memory realworld nightly "
                             "loop main_era drivers explain shapes core_hits memory_pool bisect extension "
                             "extension_no_ninja extension_real first_build debug_files at_size at_size_main "
                             "(heavy: not in the default list)")
    parser.add_argument("--work", type=Path, default=None,
                        help="a folder to work in, kept after the run (default: a temporary one): a second run there "
                             "reuses what the first built (at_size: each scale's checkout, its first build not "
                             "measured again)")
    parser.add_argument("--scales", type=int, nargs="*", default=(),
                        help="at_size: these scales only (with --work: measured again where built before)")
    parser.add_argument("--figures", nargs="*", default=(),
                        help="at_size: these figures only (noop edit switch trees explain profile wheel matrix bisect "
                             "restamp), on trees an earlier run built in --work")
    args = parser.parse_args()
    names = args.only or ["overhead", "noop", "clone", "switch", "matrix", "distcc", "envs", "memory", "realworld",
                          "nightly", "loop", "main_era", "drivers", "explain", "shapes", "core_hits", "memory_pool",
                          "bisect", "extension", "extension_no_ninja", "debug_files"]
    with tempfile.TemporaryDirectory(prefix="tb-bench-") as tmp:
        work = args.work.resolve() if args.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        bench = Bench(args.quick, work, tuple(args.scales), tuple(args.figures))
        for name in names:
            FIGURES[name](bench)
    out = ROOT / "bench" / "results.json"
    previous = json.loads(out.read_text()) if out.exists() and args.only else {}
    stamp = {"when": time.strftime("%Y-%m-%d %H:%M"), "machine": machine()}
    results = {**previous.get("results", {}), **bench.results}
    measured = {**previous.get("measured", {}), **{name: stamp for name in bench.results}}
    data = {"quick": args.quick, **stamp, "results": results, "measured": measured}
    out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {out}")
    return docs.main([])


def machine() -> str:
    """What the figures were measured on: cores, memory, and the load when the run started."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores {platform.machine()}, {memory:.0f} GiB, load {os.getloadavg()[0]:.1f}"



if __name__ == "__main__":
    sys.exit(main())
