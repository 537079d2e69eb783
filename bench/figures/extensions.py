"""An extension built against the configuration's torch (`--torch`), against the plain recipe."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from bench.measure import INV, Bench, timed
from torchbuild.demo import make_extension, make_upstream


def extension(self: Bench) -> None:
    """The demo's companion extension_cpp (cpp_extension's BuildExtension) against the demo torch's CPU
    configuration: torchbuild (`build --torch`) in one torch checkout's env, the plain recipe (`pip install -e .
    --no-build-isolation`, as extension-cpp's README says) in another's, alternating: (a) a no-op, (b) one .cpp of
    the extension edited, each until importable; and (c) whether the extension's build is a no-op after a torch
    rebuild that changed no header and no exported symbol (a unit's body)."""
    up = make_upstream(self.work / "ext-up", units=4)
    make_extension(up)
    env = {**self.env, "TORCHBUILD_PATHS_CACHE_DIR": str(self.work / "ext-cache"), "TORCHBUILD_BUILD_MKL": "0"}
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    envs = {"ours": env, "plain": {**env, "TORCHBUILD_PATHS_ENVS": str(self.work / "envs-plain")}}  # one torch each
    tree = {}
    for way in ("ours", "plain"):
        co, ext = self.work / f"ext-torch-{way}", self.work / f"ext-{way}"
        timed(INV + ["clone", "--url", up.url("pytorch"), "--path", str(co)], env)
        timed(["git", "clone", "-q", up.url("extension_cpp"), str(ext)], env)
        timed(INV + ["build", "--path", str(co), "--cuda", "none"], envs[way])
        tree[way] = (co, ext)
    python = {way: Path(envs[way]["TORCHBUILD_PATHS_ENVS"]) / f"py{minor}" / "bin" / "python" for way in envs}
    ours = INV + ["build", "--path", str(tree["ours"][1]), "--torch", str(tree["ours"][0])]
    plain = [str(python["plain"]), "-m", "pip", "install", "-e", ".", "--no-build-isolation", "--no-deps", "-q"]
    plain_env = {**env, "MAX_JOBS": "2"}
    for _ in range(2):  # the first goes through pip, the second starts the kept tree
        timed(ours, env)
    timed(plain, plain_env, cwd=tree["plain"][1])

    def run(way: str) -> float:
        start = time.perf_counter()
        if way == "ours":
            timed(ours, env)
        else:
            timed(plain, plain_env, cwd=tree["plain"][1])
        subprocess.run([str(python[way]), "-c", "import extension_cpp; extension_cpp.checksum_twice(3)"],
                       cwd=self.work, env=env, check=True, capture_output=True)
        return time.perf_counter() - start

    def edit(way: str, i: int) -> None:
        source = tree[way][1] / "extension_cpp" / "csrc" / "ops.cpp"
        source.write_text(source.read_text() + f"\nstatic const int bench_edit_{way}_{i} = {i};\n")

    pairs: dict[str, list[tuple[float, float]]] = {"noop": [], "cpp": []}
    for i in range(self.reps):
        pairs["noop"].append((run("ours"), run("plain")))
        edit("ours", i)
        edit("plain", i)
        pairs["cpp"].append((run("ours"), run("plain")))
    self.record_pairs("extension no-op", pairs["noop"], "<= 0.1x", "build --torch, up to date",
                      "pip install -e . --no-build-isolation")
    self.record_pairs("extension one .cpp edited", pairs["cpp"], "<= 0.5x", "build --torch: one compile, link",
                      "pip install -e . --no-build-isolation")
    unit = tree["ours"][0] / "c10" / "core" / "unit_01.cpp"
    unit.write_text(unit.read_text().replace("return ", "return 0 + ", 1))
    timed(INV + ["build", "--path", str(tree["ours"][0]), "--cuda", "none"], env)
    done = subprocess.run(ours, env=env, capture_output=True, text=True, check=True)
    self.results["extension after a torch rebuild without a header or symbol change"] = {
        "up to date": "up to date" in done.stderr,
        "said": next((line for line in done.stderr.splitlines() if "up to date" in line or "built in" in line), "")}
    print(f"{'extension after torch rebuild':28s} {done.stderr.count('up to date') > 0}", flush=True)

