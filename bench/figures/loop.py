"""The edit-compile loop at scale (1000 units)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.measure import INV, Bench, repeat, timed
from torchbuild.demo import make_upstream


def loop(self: Bench) -> None:
    """`inv demo --units N`'s core built with debug info (REL_WITH_DEB_INFO=1, as a C++ developer builds to
    debug; that is where links are long), one checkout per way sharing one compiler cache: (a) one .cpp of
    the core, (b) the header every unit includes, (c) one line of the bindings, each until importable again:
    torchbuild with the linker it picks (the linker trial's fastest here), with GNU ld, and going the whole
    way through pip (build.shortcut false), against `pip install -e . --no-build-isolation` by hand; and the
    physical limit of (a): the unit's compile and the library's link with the chosen linker, run alone.
    Python writes bytecode here (this machine's PYTHONDONTWRITEBYTECODE=1 is no user's setting)."""
    units = 200 if self.quick else 1000
    up = make_upstream(self.work / "loop-up", units=units)
    base = {k: v for k, v in self.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env = {**base, "TORCHBUILD_PATHS_CACHE_DIR": str(self.work / "loop-cache"), "REL_WITH_DEB_INFO": "1"}
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    python = self.work / "envs" / f"py{minor}" / "bin" / "python"
    ways = ("auto", "bfd", "whole", "plain")
    env_of = {"auto": env, "bfd": {**env, "TORCHBUILD_BUILD_LINKER": "bfd"},
              "whole": {**env, "TORCHBUILD_BUILD_SHORTCUT": "false"}}
    trees = {}
    for way in ways:
        co = self.work / f"loop-{way}"
        timed(INV + ["clone", "--url", up.url("pytorch"), "--path", str(co)], env)
        trees[way] = co
    for way in ("auto", "auto", "bfd", "whole"):  # auto twice: the linker trial, then its choice
        done = subprocess.run(INV + ["build", "--path", str(trees[way]), "--cuda", "none"], env=env_of[way],
                              capture_output=True, text=True, check=True)
        out = done.stdout + done.stderr  # torchbuild's notes go to stderr
        chosen = re.search(r"linker: (\w+ [\d.]+)", out)
        self.results[f"loop linker {way}"] = chosen.group(1) if chosen else "the toolchain's default"
        trial = re.search(r"linker trial on .*", out)
        if trial:
            self.results["loop linker trial"] = trial.group(0)
    plain_env = {**env, "CCACHE_DIR": str(self.work / "loop-cache" / "ccache"),
                 "CCACHE_BASEDIR": str(trees["plain"]), "PATH": f"{Path(sys.executable).parent}:{env['PATH']}",
                 "MAX_JOBS": str(os.cpu_count() or 1)}
    plain_cmd = [str(python), "-m", "pip", "install", "-e", ".", "-v", "--no-build-isolation", "--no-deps"]
    timed(plain_cmd, plain_env, cwd=trees["plain"])

    def edit(co: Path, rel: str, i: int) -> None:
        """A change no other checkout makes: each way pays its own compiles (no cache hit from another)."""
        path = co / rel
        name = re.sub(r"\W", "_", f"loop_edit_{co.name}_{rel}_{i}")
        path.write_text(path.read_text() + f"\nstatic const int {name} = {i};\n")

    def importable(co: Path) -> None:
        subprocess.run([str(python), "-c", "import minitorch; minitorch.checksum()"], cwd=self.work, env=env,
                       check=True, capture_output=True)

    linker = self.results["loop linker auto"]
    unit = f"c10/core/unit_{units // 2:02d}.cpp"
    for label, rel, reps in (("(a) one core .cpp", unit, self.reps), ("(b) the header every unit includes",
                             "c10/include/c10/util/scaled.h", 1), ("(c) one line of the bindings",
                             "minitorch/csrc/module.cpp", self.reps)):
        rows = {}
        for way in ways:
            co = trees[way]

            def once(i: int, co: Path = co, way: str = way, rel: str = rel) -> float:
                edit(co, rel, i)
                start = time.perf_counter()
                if way == "plain":
                    subprocess.run(plain_cmd, cwd=co, env=plain_env, check=True, capture_output=True)
                else:
                    subprocess.run(INV + ["build", "--path", str(co), "--cuda", "none"], env=env_of[way],
                                   check=True, capture_output=True)
                importable(co)
                return time.perf_counter() - start

            rows[way] = repeat(reps, once)
        self.record(f"loop {label}, chosen linker vs GNU ld", rows["auto"], rows["bfd"], "<= 0.3 (a)",
                    f"inv build, {linker}", "inv build, GNU ld")
        self.record(f"loop {label}, the shortcut vs the whole way", rows["auto"], rows["whole"], "-",
                    f"inv build, {linker}", f"inv build, {linker}, build.shortcut false (pip every time)")
        self.record(f"loop {label} vs the plain recipe", rows["auto"], rows["plain"], "-",
                    f"inv build, {linker}", "pip install -e . by hand (GNU ld)")
    co = trees["auto"]
    compile_cmd = next(e["command"] for e in json.loads((co / "build" / "compile_commands.json").read_text())
                       if e["file"].endswith(unit))
    compile_cmd = re.sub(r"^\S*ccache\s+", "", compile_cmd)
    ninja = re.search(r"(?m)^CMAKE_MAKE_PROGRAM:\w+=(.*)$", (co / "build" / "CMakeCache.txt").read_text())
    link_cmd = subprocess.run([ninja.group(1) if ninja else "ninja", "-C", str(co / "build"), "-t", "commands",
                               "libc10.so"], capture_output=True, text=True, check=True).stdout.strip()
    link_cmd = link_cmd.splitlines()[-1]
    limit = repeat(self.reps, lambda i: timed(["bash", "-c", f"cd {co / 'build'} && {compile_cmd} && {link_cmd}"],
                                              env))
    row = self.results["loop (a) one core .cpp, chosen linker vs GNU ld"]
    self.record("loop (a) vs its physical limit", row["ours"], limit, "<= 1.2",
                f"inv build, {linker}", f"the unit's compile + libc10.so's link with {linker} alone")
