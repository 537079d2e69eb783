"""An extension built against the configuration's torch (`--torch`), against the plain recipe."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench.measure import INV, Bench, timed
from torchbuild.demo import make_extension, make_upstream


def extension(self: Bench, use_ninja: bool = True) -> None:
    """The demo's companion extension_cpp (cpp_extension's BuildExtension) against the demo torch's CPU
    configuration: torchbuild (`build --torch`) in one torch checkout's env, the plain recipe (`pip install -e .
    --no-build-isolation`, as extension-cpp's README says) in another's, alternating: (a) a no-op, (b) one .cpp of
    the extension edited, each until importable; and (c) whether the extension's build is a no-op after a torch
    rebuild that changed no header and no exported symbol (a unit's body). Without ninja (`use_ninja=False`,
    torch-scatter's shape, with a CMakeLists.txt its setup.py never runs): no ccache on PATH, so torchbuild's
    builds run behind the one it provisions, as a new user's would (issue 59)."""
    tag, suffix = ("ext", "") if use_ninja else ("ext-no-ninja", " (use_ninja=False)")  # one run may take both
    up = make_upstream(self.work / f"{tag}-up", units=4, heavy=True)  # torch/extension.h at full weight
    make_extension(up)
    env = {**self.env, "TORCHBUILD_PATHS_CACHE_DIR": str(self.work / f"{tag}-cache"),
           "TORCHBUILD_PATHS_ENVS": str(self.work / f"{tag}-envs"),
           "TORCHBUILD_BUILD_MKL": "0"}
    if not use_ninja:
        env["PATH"] = os.pathsep.join(d for d in env["PATH"].split(os.pathsep) if not (Path(d) / "ccache").exists())
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    envs = {"ours": env, "plain": {**env, "TORCHBUILD_PATHS_ENVS": str(self.work / f"{tag}-envs-plain")}}  # a torch
    tree = {}
    for way in ("ours", "plain"):
        co, ext = self.work / f"{tag}-torch-{way}", self.work / f"{tag}-{way}"
        timed(INV + ["clone", "--url", up.url("pytorch"), "--path", str(co)], env)
        timed(["git", "clone", "-q", up.url("extension_cpp"), str(ext)], env)
        if not use_ninja:
            without_ninja(ext, env)
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
    self.record_pairs(f"extension no-op{suffix}", pairs["noop"], "<= 0.1x", "build --torch, up to date",
                      "pip install -e . --no-build-isolation")
    self.record_pairs(f"extension one .cpp edited{suffix}", pairs["cpp"], "<= 0.5x",
                      "build --torch: one compile, link" if use_ninja else
                      "build --torch: each unit through ccache (provisioned), one misses; link",
                      "pip install -e . --no-build-isolation")
    if not use_ninja:
        return
    unit = tree["ours"][0] / "c10" / "core" / "unit_01.cpp"
    unit.write_text(unit.read_text().replace("return ", "return 0 + ", 1))
    timed(INV + ["build", "--path", str(tree["ours"][0]), "--cuda", "none"], env)
    done = subprocess.run(ours, env=env, capture_output=True, text=True, check=True)
    self.results["extension after a torch rebuild without a header or symbol change"] = {
        "up to date": "up to date" in done.stderr,
        "said": next((line for line in done.stderr.splitlines() if "up to date" in line or "built in" in line), "")}
    print(f"{'extension after torch rebuild':28s} {done.stderr.count('up to date') > 0}", flush=True)



def without_ninja(ext: Path, env: dict[str, str]) -> None:
    """torch-scatter's shape: `BuildExtension.with_options(use_ninja=False)`, and a CMakeLists.txt beside its
    setup.py that the setup.py never runs."""
    setup = ext / "setup.py"
    setup.write_text(setup.read_text().replace('{"build_ext": BuildExtension}',
                                               '{"build_ext": BuildExtension.with_options(use_ninja=False)}'))
    (ext / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.18)\nproject(lib CXX)\n"
                                        "add_library(ops SHARED extension_cpp/csrc/ops.cpp)\n")
    timed(["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qam", "use_ninja=False"], env, cwd=ext)


REAL_TORCH = "torch==2.13.0+cpu"  # the index's CPU wheel (its Linux default is the CUDA build, ~5 GB)
REAL_EXTENSION = "chamferdist==1.0.3"  # cpp_extension's CppExtension (CUDAExtension with FORCE_CUDA=1), 2 units


def extension_real(self: Bench) -> None:
    """chamferdist's sdist (a cpp_extension project whose units include torch/extension.h) against a registry torch
    (torch 2.13.0+cpu, in a venv of its own for each way): `torchbuild build` in the active venv against
    `pip install -e . --no-build-isolation`, alternating, 3 pairs: (a) a no-op, (b) one .cpp edited. Heavy
    (the torch wheel, ~30 s a unit): not in the default list."""
    sdist = self.work / "ext-real-sdist"
    venvs = {way: self.work / f"ext-real-venv-{way}" for way in ("ours", "plain")}
    for venv in venvs.values():
        timed([sys.executable, "-m", "venv", str(venv)], self.env)
        timed([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", REAL_TORCH, "setuptools", "ninja",
               "numpy"], self.env)
    timed([str(venvs["ours"] / "bin" / "python"), "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
           "--no-build-isolation", REAL_EXTENSION, "-d", str(sdist)], self.env)
    archive = next(sdist.glob("*.tar.gz"))
    trees = {}
    for way in venvs:
        tree = self.work / f"ext-real-{way}"
        tree.mkdir()
        timed(["tar", "xzf", str(archive), "-C", str(tree), "--strip-components=1"], self.env)
        for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "-c", "user.name=b", "-c", "user.email=b@b",
                                                                   "commit", "-qm", "sdist"]):
            timed(argv, self.env, cwd=tree)
        trees[way] = tree
    envs = {way: {**self.env, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}:{self.env['PATH']}",
                  "TORCHBUILD_PATHS_CACHE_DIR": str(self.work / "ext-real-cache"), "MAX_JOBS": "2"}
            for way, venv in venvs.items()}
    ours = INV + ["build", "--path", str(trees["ours"])]
    plain = [str(venvs["plain"] / "bin" / "python"), "-m", "pip", "install", "-q", "-e", ".", "--no-build-isolation",
             "--no-deps"]
    first = time.perf_counter()
    timed(ours, envs["ours"])
    self.results["extension real first build"] = {"seconds": round(time.perf_counter() - first, 1)}
    timed(ours, envs["ours"])  # the kept tree starts
    timed(plain, envs["plain"], cwd=trees["plain"])

    def run(way: str) -> float:
        start = time.perf_counter()
        timed(ours if way == "ours" else plain, envs[way], cwd=trees[way])
        subprocess.run([str(venvs[way] / "bin" / "python"), "-c", "import torch, chamferdist; "
                        "chamferdist.ChamferDistance()(torch.rand(1, 9, 3), torch.rand(1, 7, 3))"],
                       cwd=self.work, env=envs[way], check=True, capture_output=True)
        return time.perf_counter() - start

    pairs: dict[str, list[tuple[float, float]]] = {"noop": [], "cpp": []}
    for i in range(3):
        pairs["noop"].append((run("ours"), run("plain")))
        for way in trees:
            unit = trees[way] / "chamferdist" / "knn_cpu.cpp"
            unit.write_text(unit.read_text() + f"\nstatic const int bench_edit_{i} = {i};\n")
        pairs["cpp"].append((run("ours"), run("plain")))
    what = "torchbuild build (chamferdist, torch 2.13.0+cpu)"
    self.record_pairs("real extension no-op", pairs["noop"], "<= 0.1x", what, "pip install -e . --no-build-isolation")
    self.record_pairs("real extension one .cpp edited", pairs["cpp"], "<= 0.5x", what,
                      "pip install -e . --no-build-isolation")
