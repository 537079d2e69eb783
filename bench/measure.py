"""The one measuring helper every figure family shares: timed runs, medians with min and max, ratios against
the plain recipe measured in the same run, and the demo checkouts the build figures use."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from torchbuild.demo import make_upstream  # noqa: E402

INV = [sys.executable, "-m", "invoke", "--search-root", str(ROOT)]
NVCC = Path("/usr/local/cuda-13.0/bin/nvcc")


def timed(argv: list[str], env: dict[str, str], cwd: Path | None = None, check: bool = True) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{proc.stderr[-3000:]}")
    return elapsed


def stats(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "n": len(samples)}


def repeat(n: int, fn: Callable[[int], float]) -> dict[str, float]:
    return stats([fn(i) for i in range(n)])


class Bench:
    """One run's work folder, its environment, and the figures it recorded (results.json)."""

    def __init__(self, quick: bool, work: Path, scales: tuple[int, ...] = (), figures: tuple[str, ...] = ()) -> None:
        self.quick = quick
        self.scales = scales  # at_size's, where asked (--scales): else 1x, 10x and 100x
        self.figures = figures  # at_size's, where asked (--figures): else all of them
        self.reps = 5
        self.work = work
        self.results: dict[str, dict] = {}
        home = work / "home"
        home.mkdir(parents=True, exist_ok=True)
        (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
                                         "[protocol \"file\"]\n\tallow = always\n")
        self.env = {**os.environ, "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "TORCHBUILD_BUILD_MIN_FREE_GB": "1",
                    "PIP_CACHE_DIR": str(Path.home() / ".cache" / "pip"),
                    "TORCHBUILD_PATHS_ENVS": str(work / "envs"), "TORCHBUILD_PATHS_LOGS": str(work / "logs")}

    def record(self, name: str, ours: dict, plain: dict, target: str, what: str, plain_what: str) -> None:
        ratio = ours["median"] / plain["median"]
        self.results[name] = {"ours": ours, "plain": plain, "ratio": ratio, "target": target, "what": what,
                              "plain_what": plain_what}
        print(f"{name:28s} {ours['median']:8.3f}s vs {plain['median']:8.3f}s  ratio {ratio:5.2f}  "
              f"(target {target}; ours min {ours['min']:.3f} max {ours['max']:.3f}; plain min {plain['min']:.3f} "
              f"max {plain['max']:.3f}; n={ours['n']})", flush=True)

    def record_pairs(self, name: str, pairs: list[tuple[float, float]], target: str, what: str,
                     plain_what: str) -> None:
        """A figure measured in turn with its baseline: its ratio is the median of the pairs' ratios (this
        machine's speed drifts over minutes; each pair ran within one), the ratio of medians kept too."""
        self.record(name, stats([m for m, _ in pairs]), stats([b for _, b in pairs]), target, what, plain_what)
        ratios = [m / b for m, b in pairs]
        row = self.results[name]
        row.update({"ratio of medians": row["ratio"], "ratio": statistics.median(ratios), "pair ratios": stats(ratios),
                    "pairs": [[round(m, 3), round(b, 3)] for m, b in pairs]})
        print(f"{'':28s} ratio of each pair: median {statistics.median(ratios):.3f} (min {min(ratios):.3f} "
              f"max {max(ratios):.3f})", flush=True)

    def demo(self, name: str, units: int) -> tuple[Path, dict[str, str]]:
        up = make_upstream(self.work / f"{name}-up", units=units)
        env = {**self.env, "TORCHBUILD_PATHS_CACHE_DIR": str(self.work / f"{name}-cache")}
        checkout = self.work / f"{name}-co"
        timed(INV + ["clone", "--url", up.url("pytorch"), "--path", str(checkout)], env)
        return checkout, env

    def build(self, checkout: Path, env: dict[str, str], *args: str) -> float:
        return timed(INV + ["build", "--path", str(checkout), *args], env)
