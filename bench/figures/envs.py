"""The env figure: making a build env with each backend."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bench.measure import INV, Bench, repeat, timed


def envs(self: Bench) -> None:
    """`inv env.create` with the uv backend against the venv + pip backend (same deps, warm caches)."""
    import shutil as sh

    from torchbuild.toolchain import search_path

    if not sh.which("uv", path=search_path(os.environ)):
        print("envs: skipped (uv is not installed)")
        return
    checkout = self.work / "envs-co"
    checkout.mkdir(parents=True, exist_ok=True)
    (checkout / "requirements-build.txt").write_text("setuptools>=70.1\nwheel\nninja\npyyaml\n")
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"

    def create(backend: str, i: int) -> float:
        envs = self.work / f"envs-{backend}-{i}"
        env = {**self.env, "TORCHBUILD_PATHS_ENVS": str(envs), "TORCHBUILD_SOURCE_PATH": str(checkout),
               "HOME": str(Path.home())}
        return timed(INV + ["env.create", "--python", py, "--backend", backend], env)

    create("uv", 99)  # warm uv's cache like pip's
    uv = repeat(self.reps, lambda i: create("uv", i))
    venv = repeat(self.reps, lambda i: create("venv", i))
    self.record("env creation (uv)", uv, venv, "< 1", "inv env.create --backend uv", "--backend venv (venv + pip)")
