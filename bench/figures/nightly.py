"""Python-only development: a fresh clone to an importable demo, inv nightly against inv build."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from bench.measure import INV, Bench, timed
from torchbuild.demo import make_upstream


def nightly(self: Bench) -> None:
    """Fresh clone -> importable demo: `inv nightly` (the demo's wheel served as a nightly over http on
    loopback) against `inv build` from nothing; each run with its own empty env dir and cache."""
    units = 8 if self.quick else 24
    up = make_upstream(self.work / "nightly-up", units=units)
    env = {**self.env, "TORCHBUILD_PATHS_CACHE_DIR": str(self.work / "nightly-wheel-cache")}
    wheel_dir = self.work / "nightly-index" / "minitorch"
    wheel_dir.mkdir(parents=True)
    co = self.work / "nightly-wheel-co"
    timed(INV + ["clone", "--url", up.url("pytorch"), "--path", str(co)], env)
    self.build(co, env, "--cuda", "none", "--wheel", "--dist", str(wheel_dir),
               "--set", "PYTORCH_BUILD_VERSION=0.1.0.dev20261201")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                              cwd=wheel_dir.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"

    def from_nothing(i: int, task: list[str], env_name: str) -> float:
        fresh = {**env, "TORCHBUILD_PATHS_ENVS": str(self.work / f"nightly-envs-{task[0]}{i}"),
                 "TORCHBUILD_PATHS_CACHE_DIR": str(self.work / f"nightly-cache-{task[0]}{i}"),
                 "TORCHBUILD_NIGHTLY_INDEX_URL": f"http://127.0.0.1:{port}/"}
        dest = self.work / f"nightly-{task[0]}{i}"
        seconds = timed(INV + ["clone", "--url", up.url("pytorch"), "--path", str(dest)], fresh)
        seconds += timed(INV + [*task, "--path", str(dest), "--cuda", "none"], fresh)
        python = Path(fresh["TORCHBUILD_PATHS_ENVS"]) / env_name / "bin" / "python"
        out = subprocess.run([str(python), "-c", "import minitorch; print(minitorch.__file__)"], cwd=self.work,
                             capture_output=True, text=True, check=True).stdout
        assert out.startswith(str(dest)), out
        return seconds

    try:
        pairs = [(from_nothing(i, ["nightly"], f"nightly-py{minor}-cpu"), from_nothing(i, ["build"], f"py{minor}"))
                 for i in range(3)]
    finally:
        server.terminate()
    self.record_pairs("fresh clone to import: nightly", pairs, "<= 0.2",
                      "inv clone + inv nightly (the wheel over http on loopback)",
                      f"inv clone + inv build from nothing ({units} units, empty compiler cache)")
