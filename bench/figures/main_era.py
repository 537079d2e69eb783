"""PyTorch main's shape (scikit-build-core): the no-op, the edit loop and the switch back, at 1000 units."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench.measure import INV, Bench, repeat, timed
from torchbuild.demo import make_upstream


def main_era(self: Bench) -> None:
    """`inv demo --era main --units N` built with debug info (REL_WITH_DEB_INFO=1), one checkout built by
    torchbuild and one by hand (`pip install -e . -v --no-build-isolation` in the same env, the compiler cache
    shared so the hand build's first run costs no compiles): (1) the no-op, (2) one core .cpp edited until
    importable again, (3) switching back to a configuration built before (--debug, then release, then
    --debug again) against building that configuration fresh; the binaries are checked after each switch."""
    units = 200 if self.quick else 1000
    up = make_upstream(self.work / "era-up", units=units, era="main")
    base = {k: v for k, v in self.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cache = self.work / "era-cache"
    env = {**base, "TORCHBUILD_PATHS_CACHE_DIR": str(cache), "REL_WITH_DEB_INFO": "1"}
    python = self.work / "envs" / f"py{sys.version_info[0]}.{sys.version_info[1]}" / "bin" / "python"
    ours, plain = self.work / "era-ours", self.work / "era-plain"
    for co in (ours, plain):
        timed(INV + ["clone", "--url", up.url("pytorch"), "--path", str(co)], env)
    first = timed(INV + ["build", "--path", str(ours), "--cuda", "none"], env)
    self.results["main era: first build (s)"] = {"median": first, "target": "-"}
    plain_env = {**env, "CCACHE_DIR": str(cache / "ccache"), "CCACHE_BASEDIR": str(plain),
                 "PATH": f"{Path(sys.executable).parent}:{env['PATH']}", "MAX_JOBS": str(os.cpu_count() or 1)}
    by_hand = [str(python), "-m", "pip", "install", "-e", ".", "-v", "--no-build-isolation", "--no-deps"]
    timed(by_hand, plain_env, cwd=plain)

    def state(co: Path) -> str:
        """What imports: the checksum and version.py's debug flag (from the env's install of `co`)."""
        return subprocess.run([str(python), "-c", "import minitorch, minitorch.version as v; "
                               "print(minitorch.checksum(), v.debug, minitorch.__file__)"], cwd=self.work, env=env,
                              check=True, capture_output=True, text=True).stdout.strip()

    def noop(way: str) -> float:
        co = ours if way == "ours" else plain
        argv = INV + ["build", "--path", str(co), "--cuda", "none"] if way == "ours" else by_hand
        return timed(argv, env if way == "ours" else plain_env, cwd=co)

    # the two checkouts share the env: each way's no-op runs after its own install (the other's would be stale)
    timed(INV + ["build", "--path", str(ours), "--cuda", "none"], env)
    ours_noop = repeat(self.reps, lambda i: noop("ours"))
    timed(by_hand, plain_env, cwd=plain)
    plain_noop = repeat(self.reps, lambda i: noop("plain"))
    self.record("main era: no-op", ours_noop, plain_noop, "<= 0.05", "inv build, nothing changed",
                "pip install -e . -v --no-build-isolation, nothing changed")

    unit = f"c10/core/unit_{units // 2:02d}.cpp"

    def loop(way: str, i: int) -> float:
        co = ours if way == "ours" else plain
        path = co / unit
        path.write_text(path.read_text() + f"\nstatic const int era_loop_{way}_{i} = {i};\n")
        start = time.perf_counter()
        noop(way)
        state(co)
        return time.perf_counter() - start

    timed(INV + ["build", "--path", str(ours), "--cuda", "none"], env)
    ours_loop = repeat(self.reps, lambda i: loop("ours", i))
    timed(by_hand, plain_env, cwd=plain)
    plain_loop = repeat(self.reps, lambda i: loop("plain", i))
    self.record("main era: one .cpp edited to importable", ours_loop, plain_loop, "<= 0.3",
                "inv build (CMake's build and install into the env)", "pip install -e . by hand")

    build_release = INV + ["build", "--path", str(ours), "--cuda", "none"]
    timed(build_release, env)
    release = state(ours)
    fresh = timed(build_release + ["--debug"], env)
    debug = state(ours)
    assert debug.split()[1] == "True" and release.split()[1] == "False", (release, debug)

    def switch(i: int) -> float:
        timed(build_release, env)
        assert state(ours) == release
        took = timed(build_release + ["--debug"], env)
        assert state(ours) == debug
        return took

    self.record("main era: switch back to a built configuration", repeat(self.reps, switch),
                {"median": fresh, "min": fresh, "max": fresh, "n": 1}, "<= 0.1",
                "inv build --debug after release (its binaries back into the env)", "inv build --debug, fresh")
