"""Projects beyond PyTorch's layout (issue 31): the no-op and the first build against `pip install -e .
--no-build-isolation` by hand, on small projects of three shapes (tests/onnxlike.py, tests/skbuild.py)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from bench.measure import INV, Bench, stats, timed

SHAPES = {
    "onnx-shaped (.setuptools-cmake-build/)": ("onnx", ["setuptools>=64", "ninja"]),
    "scikit-build-core": ("skbuild", ["scikit-build-core>=0.10"]),
    "pybind cmake_example-shaped (setup.py + CMake)": ("cmake_example", ["setuptools>=64", "ninja", "pybind11"]),
}


def make(kind: str, root: Path) -> Path:
    from tests.onnxlike import make_cmake_example_project, make_onnx_shaped_project
    from tests.skbuild import make_skbuild_project

    return {"onnx": make_onnx_shaped_project, "skbuild": lambda r: make_skbuild_project(r, units=6),
            "cmake_example": make_cmake_example_project}[kind](root)


def shapes(self: Bench) -> None:
    """Per shape: one first build each way (a new env or venv, the same requirements), the second build once
    (where setuptools' PEP 660 build threw the CMake tree away, torchbuild's first in-place build, which keeps
    one), then the no-op in turns, torchbuild's `inv build` and the plain `pip install -e .` again, each
    measured `reps` times."""
    for label, (kind, reqs) in SHAPES.items():
        work = self.work / f"shape-{kind}"
        ours_co, plain_co, venv = make(kind, work / "ours"), make(kind, work / "plain"), work / "venv"
        env = {**self.env, "TORCHBUILD_PATHS_ENVS": str(work / "envs"), "TORCHBUILD_BUILD_CUDA": "none",
               "TORCHBUILD_PATHS_CACHE_DIR": str(work / "cache")}
        plain_env = {**self.env, "CCACHE_DISABLE": "1"}
        pip = [str(venv / "bin/python"), "-m", "pip", "install", "-q"]

        first_ours = timed(INV + ["build", "--path", str(ours_co)], env)
        start = time.perf_counter()
        timed([sys.executable, "-m", "venv", str(venv)], self.env)
        timed([*pip, "--upgrade", *reqs], self.env)
        timed([*pip, "--no-build-isolation", "-e", "."], plain_env, cwd=plain_co)
        first_plain = time.perf_counter() - start
        second = (timed(INV + ["build", "--path", str(ours_co)], env),
                  timed([*pip, "--no-build-isolation", "-e", "."], plain_env, cwd=plain_co))
        self.record(f"second build, nothing changed, {label}", stats([second[0]]), stats([second[1]]), "-",
                    "inv build again (cmake_example's shape: its first in-place build, which makes the tree)",
                    "pip install -e . --no-build-isolation again")
        pairs = [(timed(INV + ["build", "--path", str(ours_co)], env),
                  timed([*pip, "--no-build-isolation", "-e", "."], plain_env, cwd=plain_co)) for _ in range(self.reps)]
        self.record_pairs(f"no-op, {label}", pairs, "<= 0.3", "inv build, nothing changed",
                          "pip install -e . --no-build-isolation again")
        self.record(f"first build, {label}", stats([first_ours]), stats([first_plain]), "<= 1.1",
                    "inv build (env made, one run)", "venv + requirements + pip install -e (one run)")
