"""Both build drivers' shapes (the demo's eras: scikit-build-core as PyTorch main, setup.py as 2.13), under the
conditions a PyTorch developer's checkout has: the no-op, the edit loop and the switch back, at 1000 units."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench.measure import INV, ROOT, Bench, repeat, timed
from torchbuild.demo import make_upstream


def main_era(self: Bench) -> None:
    """PyTorch main's shape (scikit-build-core), run as `inv build`."""
    era_figures(self, "main", INV, "main era")


def driver_shapes(self: Bench) -> None:
    """Both drivers' shapes as a developer meets them (issue 41): the installed `torchbuild` command (its
    start-up counts; after its first build a warm process serves the next), and the checkout holding a `nox`
    run's envs (16k files in an ignored .nox/)."""
    argv = [str(installed_command(self.work / "installed"))]
    for era in ("main", "2.13"):
        era_figures(self, era, argv, f"{era} driver, .nox/ and torchbuild's command", leftovers=True)


def installed_command(root: Path) -> Path:
    """torchbuild's wheel in a venv of its own, as `pip install .` or pipx give it to a user (not this
    repo's editable install, whose import hook costs every start 9 ms); its `torchbuild`."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root / "dist"), str(ROOT)],
                   check=True)
    (wheel,) = (root / "dist").glob("torchbuild-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
    subprocess.run([str(root / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], check=True)
    return root / "venv" / "bin" / "torchbuild"


def nox_leftovers(checkout: Path, files: int = 16000) -> None:
    """A nox run's envs in the checkout, as git is told to ignore them: 16 envs of 1000 small files."""
    for i in range(files):
        folder = checkout / ".nox" / f"build-3-{i // 1000}" / "lib" / "site-packages" / f"pkg{i % 1000 // 100}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"m{i % 100}.py").write_text("x = 1\n")
    with open(checkout / ".git" / "info" / "exclude", "a") as exclude:
        exclude.write("/.nox/\n")


def era_figures(self: Bench, era: str, program: list[str], label: str, leftovers: bool = False) -> None:
    """`inv demo --era ERA --units N` built with debug info (REL_WITH_DEB_INFO=1), one checkout built by
    torchbuild and one by hand (`pip install -e . -v --no-build-isolation` in the same env, the compiler cache
    shared so the hand build's first run costs no compiles): (1) the no-op, (2) one core .cpp edited until
    importable again, (3) switching back to a configuration built before (--debug, then release, then
    --debug again) against building that configuration fresh; the binaries are checked after each switch."""
    units = 200 if self.quick else 1000
    ran = "inv build" if program == INV else "torchbuild build"
    tag = f"{era}{'-real' if leftovers else ''}"
    up = make_upstream(self.work / f"era-up-{tag}", units=units, era=era)
    base = {k: v for k, v in self.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cache = self.work / f"era-cache-{tag}"
    env = {**base, "TORCHBUILD_PATHS_CACHE_DIR": str(cache), "REL_WITH_DEB_INFO": "1"}
    python = self.work / "envs" / f"py{sys.version_info[0]}.{sys.version_info[1]}" / "bin" / "python"
    ours, plain = self.work / f"era-ours-{tag}", self.work / f"era-plain-{tag}"
    for co in (ours, plain):
        timed(INV + ["clone", "--url", up.url("pytorch"), "--path", str(co)], env)
        if leftovers:
            nox_leftovers(co)
    build_release = program + ["build", "--path", str(ours), "--cuda", "none"]
    first = timed(build_release, env)
    self.results[f"{label}: first build (s)"] = {"median": first, "target": "-"}
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
        argv = build_release if way == "ours" else by_hand
        return timed(argv, env if way == "ours" else plain_env, cwd=co)

    # the two checkouts share the env: each way's no-op runs after its own install (the other's would be stale)
    timed(build_release, env)
    ours_noop = repeat(self.reps, lambda i: noop("ours"))
    timed(by_hand, plain_env, cwd=plain)
    plain_noop = repeat(self.reps, lambda i: noop("plain"))
    self.record(f"{label}: no-op", ours_noop, plain_noop, "<= 0.05", f"{ran}, nothing changed",
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

    timed(build_release, env)
    ours_loop = repeat(self.reps, lambda i: loop("ours", i))
    timed(by_hand, plain_env, cwd=plain)
    plain_loop = repeat(self.reps, lambda i: loop("plain", i))
    self.record(f"{label}: one .cpp edited to importable", ours_loop, plain_loop, "<= 0.3",
                ran, "pip install -e . by hand")

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

    self.record(f"{label}: switch back to a built configuration", repeat(self.reps, switch),
                {"median": fresh, "min": fresh, "max": fresh, "n": 1}, "<= 0.1",
                f"{ran} --debug after release (its binaries back into the env)", f"{ran} --debug, fresh")
