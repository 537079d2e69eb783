"""The matrix figures: sessions side by side against one build, and distcc."""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from bench.measure import ROOT, Bench, repeat, timed
from torchbuild.demo import make_upstream


def matrix_vs_build(self: Bench) -> None:
    """Only the matrix's row against one bare `inv build` (`--only matrix_vs_build`)."""
    matrix(self, only_vs_build=True)


def matrix(self: Bench, only_vs_build: bool = False) -> None:
    """`inv matrix`, 3 Pythons x cpu on the demo, each repetition from nothing (no build trees, slots,
    wheels or compiler cache; the nox envs made once): side by side and one by one, with the split
    build, one shared ccache, or no sharing, each against a 1-session matrix; side by side against one
    bare `inv build`, the two in turn. Then a no-op matrix."""
    pythons = [p for p in ("3.10", "3.11", "3.12") if any((Path.home() / ".pyenv/versions").glob(f"{p}.*"))]
    if len(pythons) < 3:
        print("matrix: skipped (needs pyenv Pythons 3.10, 3.11 and 3.12)")
        return
    up = make_upstream(self.work / "matrix-up", units=8 if self.quick else 24)
    proj = self.work / "matrix-proj"
    proj.mkdir()
    for name in ("tasks.py", "noxfile.py"):
        shutil.copy(ROOT / name, proj / name)
    cache = self.work / "matrix-cache"
    (proj / "torchbuild.yaml").write_text(
        f"source:\n  url: {up.url('pytorch')}\n  path: {self.work / 'matrix-co'}\n"
        f"matrix:\n  pythons: {json.dumps(pythons)}\n  cudas: [\"none\"]\npaths:\n  cache_dir: {cache}\n")
    inv = [sys.executable, "-m", "invoke", "--search-root", str(proj)]
    env = {**self.env, "TORCHBUILD_PATHS_LOGS": str(proj / "logs")}
    timed(inv + ["clone"], env)
    timed(inv + ["matrix"], env)  # makes the nox envs once: the figures are about building

    def from_nothing(*args: str, split: bool = True, share: bool = True) -> Callable[[int], float]:
        def once(i: int) -> float:
            timed(inv + ["clean", "--all"], env)
            for folder in (cache / "ccache", cache / "slots", proj / "dist"):
                shutil.rmtree(folder, ignore_errors=True)
            e = {**env, "TORCHBUILD_MATRIX_SPLIT": "true" if split else "false",
                 "TORCHBUILD_CACHE_TOOL": "auto" if share else "none"}
            return timed(inv + ["matrix", "--rerun", *args], e)
        return once

    one = ("--session", f"build-{pythons[0]}(cuda='none')")
    for label, args, kw, target in () if only_vs_build else (
            ("split, side by side", (), {}, "-"),
            ("split, one by one", ("--parallel", "1"), {}, "-"),
            ("shared ccache, side by side", (), {"split": False}, "-"),
            ("no sharing, one by one", ("--parallel", "1"), {"split": False, "share": False}, "~3.0")):
        base, ours = from_nothing(*one, **kw), from_nothing(*args, **kw)  # its own way, with one Python
        pairs = [(base(i), ours(i))[::-1] for i in range(self.reps)]  # in turn; the 3-Python run last
        self.record_pairs(f"matrix 3 Pythons ({label})", pairs, target, f"inv matrix: 3 Pythons x cpu, {label}",
                          "the same with 1 Python")
        info = json.loads((proj / "dist" / "matrix-summary.json").read_text())["run"]
        self.results[f"matrix 3 Pythons ({label})"]["usage"] = {
            k: info[k] for k in ("at once", "job budget", "most compilers at once", "peak rss bytes",
                                 "peak compilers rss bytes", "free memory bytes at start")}
        print(f"{'':28s} usage: {self.results[f'matrix 3 Pythons ({label})']['usage']}", flush=True)
    def single(i: int) -> float:  # one plain `inv build --wheel`: no nox, no split, no import check
        timed(inv + ["clean", "--all"], env)
        for folder in (cache / "ccache",):
            shutil.rmtree(folder, ignore_errors=True)
        return timed(inv + ["build", "--wheel", "--cuda", "none", "--python", pythons[0]], env)

    timed(inv + ["build", "--wheel", "--cuda", "none", "--python", pythons[0]], env)  # makes its env once
    side_by_side = from_nothing()
    pairs = [(side_by_side(i), single(i)) for i in range(self.reps + 2)]  # in turn: drift hits both alike
    self.record_pairs("matrix 3 Pythons vs inv build", pairs, "<= 1.25",
                      "inv matrix: 3 Pythons x cpu, split, side by side",
                      f"one inv build --wheel --cuda none --python {pythons[0]}, from nothing")
    if only_vs_build:
        return
    timed(inv + ["matrix"], env)
    noop = repeat(self.reps, lambda i: timed(inv + ["matrix"], env))
    self.results["no-op inv matrix (3 sessions)"] = {**noop, "target": "<= 2 s"}
    print(f"{'no-op inv matrix':28s} {noop['median']:.3f}s (target <= 2 s; min {noop['min']:.3f} "
          f"max {noop['max']:.3f})", flush=True)


def distcc(self: Bench) -> None:
    """A clean build with two loopback distccd hosts (2 slots each) against the same build on this machine
    alone, no compiler cache; and what it would be on real hosts, on paper, from measured parts."""
    distccd, distcc = shutil.which("distccd"), shutil.which("distcc")
    if not distccd or not distcc:
        print("distcc: skipped (apt-get install distcc)")
        return
    checkout, env = self.demo("distcc", 8 if self.quick else 24)
    env = {**env, "TORCHBUILD_CACHE_TOOL": "none"}
    daemons, hosts = [], []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        daemons.append(subprocess.Popen([distccd, "--no-detach", "--daemon", "--port", str(port), "--listen",
                                         "127.0.0.1", "--allow", "127.0.0.1", "--jobs", "2"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        hosts.append(f"127.0.0.1:{port}/2")
    time.sleep(1)
    try:
        remote = {**env, "TORCHBUILD_BUILD_DISTRIBUTED": "distcc", "TORCHBUILD_BUILD_HOSTS": ",".join(hosts)}
        local = repeat(self.reps, lambda i: self.build(checkout, env, "--cuda", "none", "--clean"))
        spread = repeat(self.reps, lambda i: self.build(checkout, remote, "--cuda", "none", "--clean"))
    finally:
        for d in daemons:
            d.kill()
            d.wait()
    self.record("distcc, 2 loopback hosts", spread, local, "- (overhead here)",
                "inv build --clean, distcc on 2 loopback hosts (4 slots)", "the same build on this machine")
    # On paper: N units, each costing t to compile here, of which a share p is preprocessing (stays local).
    unit = next((checkout / "c10" / "core").glob("unit_*.cpp"))
    flags = ["-O2", "-std=c++17", f"-I{checkout / 'c10/include'}", f"-I{checkout / 'third_party/fbgemm/include'}"]
    compile_s = statistics.median(timed(["g++", *flags, "-c", str(unit), "-o", os.devnull], env)
                                  for _ in range(5))
    pre_s = statistics.median(timed(["g++", *flags, "-E", str(unit), "-o", os.devnull], env) for _ in range(5))
    units = len(list((checkout / "c10").rglob("unit_*.cpp")))
    cores, remote_slots = os.cpu_count() or 1, 16  # e.g. 4 real hosts x 4 slots
    compiling = units * compile_s / cores  # of the measured local build; the rest (configure, link,
    rest = max(0.0, local["median"] - compiling)  # packaging) stays local whatever the hosts
    paper = rest + max(units * pre_s / cores, units * (compile_s - pre_s) / remote_slots)
    self.results["distcc on paper"] = {
        "units": units, "compile seconds per unit": compile_s, "preprocess seconds per unit": pre_s,
        "preprocess share": pre_s / compile_s, "local cores": cores, "remote slots": remote_slots,
        "local build seconds": local["median"], "local compiling seconds": compiling, "rest seconds": rest,
        "with remote slots seconds": paper, "speed-up": local["median"] / paper}
    print(f"{'distcc on paper':28s} {units} units x {compile_s:.2f}s, preprocessing {pre_s / compile_s:.0%}: "
          f"{local['median']:.1f}s here ({compiling:.1f}s compiling on {cores} cores, {rest:.1f}s the rest); "
          f"with {remote_slots} remote slots {paper:.1f}s ({local['median'] / paper:.1f}x)", flush=True)
