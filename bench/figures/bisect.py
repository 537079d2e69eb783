"""`inv bisect` on the demo's 64-commit history against the plain recipe: `git bisect run` with `git submodule
update` and `pip install -e .` at each step, both from an empty compiler cache."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench.measure import INV, Bench, stats, timed
from torchbuild.demo import UNITS, make_history, make_upstream

CHECK = "import minitorch, sys; sys.exit(0 if minitorch.checksum(10) > 0 else 1)"


def bisect(self: Bench) -> None:
    """The same history, command and commit range both ways (scikit-build-core era), each in a checkout of its
    own without a build tree, each compiler cache holding the objects of a build of HEAD (the bad commit, as the
    developer who found the regression has it). The plain recipe's env is made before; torchbuild's time
    includes making its own (a copy of the user's env of that Python, which the build of HEAD made); the plain
    recipe's is a venv holding the same packages."""
    units = UNITS if self.quick else 200
    up = make_upstream(self.work / "bisect-up", units=units, era="main")
    shas = make_history(up, units=units)
    ours, plain = self.work / "bisect-ours", self.work / "bisect-plain"
    caches = {way: self.work / f"bisect-cache-{way}" for way in ("ours", "plain")}
    env = {**self.env, "TORCHBUILD_PATHS_CACHE_DIR": str(caches["ours"]), "TORCHBUILD_BUILD_MKL": "0"}
    for co in (ours, plain):
        timed(INV + ["clone", "--url", up.url("pytorch"), "--path", str(co)], env)
    # each way's compiler cache: the objects of a build of HEAD (the same state), nothing else
    timed(INV + ["build", "--path", str(ours), "--cuda", "none"], env)
    # the plain recipe's env: a venv of its own holding what torchbuild's env holds, less the project (that
    # env pins the torch it built, as torchbuild protects it, so it would refuse another commit's install)
    ours_python = self.work / "envs" / f"py{sys.version_info[0]}.{sys.version_info[1]}" / "bin" / "python"
    frozen = subprocess.run([str(ours_python), "-m", "pip", "freeze", "--exclude", "minitorch"], check=True,
                            capture_output=True, text=True).stdout
    subprocess.run([sys.executable, "-m", "venv", str(self.work / "plain-env")], check=True)
    python = self.work / "plain-env" / "bin" / "python"
    (self.work / "plain-env.txt").write_text(frozen)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-r", str(self.work / "plain-env.txt")], check=True,
                   env=self.env)
    plain_env = {**self.env, "CCACHE_DIR": str(caches["plain"]), "CCACHE_BASEDIR": str(plain),
                 "PATH": f"{Path(sys.executable).parent}:{self.env['PATH']}"}
    subprocess.run([str(python), "-m", "pip", "install", "-e", ".", "-v", "--no-build-isolation", "--no-deps"],
                   cwd=plain, env=plain_env, check=True, capture_output=True)
    shutil.rmtree(plain / "build")  # a bisection in a checkout of its own starts without a tree, as torchbuild's
    start = time.perf_counter()
    said = subprocess.run(INV + ["bisect", "--path", str(ours), "--cuda", "none", "--good", shas["good"], "--bad",
                                 shas["bad"], "--", "python", "-c", CHECK], env=env, capture_output=True, text=True,
                          check=True).stderr
    ours_wall = time.perf_counter() - start
    print("\n".join(ln for ln in said.splitlines() if re.match(r"tb> +(\d+\.|✓ (create|build))", ln)))
    state = json.loads((ours / ".torchbuild" / "bisect" / "state.json").read_text())
    ours_compiling = sum(1 for step in state["steps"] if step["way"] == "build")

    logs = self.work / "bisect-plain-logs"
    logs.mkdir()
    judge = self.work / "bisect-judge.sh"
    judge.write_text("#!/bin/sh\n# the plain recipe's step: submodules, the editable install, the check\n"
                     f"log={logs}/$(git rev-parse --short HEAD).log\n"
                     "git submodule sync --recursive -q && git submodule update --init --recursive -q || exit 125\n"
                     f"{python} -m pip install -e . -v --no-build-isolation --no-deps > $log 2>&1 || exit 125\n"
                     f"exec {python} -c \"{CHECK}\"\n")
    judge.chmod(0o755)
    start = time.perf_counter()
    subprocess.run(["git", "bisect", "start", shas["bad"], shas["good"]], cwd=plain, env=plain_env, check=True,
                   capture_output=True)
    done = subprocess.run(["git", "bisect", "run", str(judge)], cwd=plain, env=plain_env, capture_output=True,
                          text=True)
    plain_wall = time.perf_counter() - start
    plain_first = next((ln.split()[0] for ln in done.stdout.splitlines() if "is the first bad commit" in ln), None)
    plain_compiling = sum(1 for log in logs.glob("*.log") if "Building CXX object" in log.read_text(errors="replace"))
    assert state["result"] == [shas["regression"]] and plain_first == shas["regression"], \
        (state["result"], plain_first, done.stdout[-2000:])
    self.record("bisect: 64 commits, first bad found", stats([ours_wall]), stats([plain_wall]), "<= 0.3",
                f"inv bisect ({len(state['steps'])} steps, {ours_compiling} compiling; its env copied from the user's)",
                f"git bisect run: submodule update + pip install -e . ({len(list(logs.glob('*.log')))} steps, "
                f"{plain_compiling} compiling)")
    self.results["bisect: 64 commits, first bad found"].update(
        {"steps": {"ours": len(state["steps"]), "plain": len(list(logs.glob("*.log")))},
         "steps compiling": {"ours": ours_compiling, "plain": plain_compiling},
         "ways": [step["way"] for step in state["steps"]]})
