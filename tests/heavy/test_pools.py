"""The heavy tier's scenarios of tests/integration/test_pools.py's area, half a minute or more each (`nox -s heavy`,
and CI after README's test command): a heavy unit compiles in a pool of its own and an older cmake lowers max jobs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from torchbuild.builder import pools
from torchbuild.demo import make_upstream

from ..helpers import inv

HEAVY = "CMakeFiles/torch.dir/aten/src/ATen/native/cpu/FlashAttentionKernel.cpp.o"


def test_a_heavy_unit_compiles_in_a_pool_of_its_own_and_an_older_cmake_lowers_max_jobs(tmp_path, monkeypatch):
    for key, value in {"TORCHBUILD_PATHS_ENVS": tmp_path / "envs", "TORCHBUILD_PATHS_LOGS": tmp_path / "logs",
                       "TORCHBUILD_PATHS_CACHE_DIR": tmp_path / "cache", "TORCHBUILD_BUILD_MIN_FREE_GB": "1",
                       "TORCHBUILD_BUILD_CUDA": "none"}.items():
        monkeypatch.setenv(key, str(value))
    co = tmp_path / "co"
    up = make_upstream(tmp_path / "upstream", units=4, heavy=True)  # the tests' small core, with the heavy unit
    inv("clone", "--url", up.url("pytorch"), "--path", str(co), check=True)
    capped = {"TORCHBUILD_BUILD_MEMORY_GB": "0.4", "TORCHBUILD_BUILD_JOBS": "2"}  # 205 MiB a job
    header = co / "c10/include/c10/core.h"

    def build(*args: str, env: dict[str, str] | None = None) -> str:
        return inv("build", "--path", str(co), *args, env=env, check=True, timeout=600).stderr

    def edit_header() -> None:  # every unit compiles again
        header.write_text(header.read_text() + "// edited\n")

    build()  # the machine's CMake (3.25): each unit's peak is recorded in the tree
    peaks = json.loads((co / "build" / pools.PEAKS).read_text())
    assert max(peaks, key=peaks.get) == HEAVY and peaks[HEAVY] > 2 * sorted(peaks.values())[len(peaks) // 2]
    edit_header()
    older = build(env=capped)
    assert "cannot pool single units (JOB_POOL_COMPILE on a source needs CMake 4.2): MAX_JOBS=1 for every step" \
        in older and "building py" in older and "with MAX_JOBS=1;" in older
    assert pools.pooled(co / "build") == []

    # PyTorch's requirements-build.txt has cmake (>= 3.27): the env's CMake 4.x can pool one source
    (co / "requirements-build.txt").write_text((co / "requirements-build.txt").read_text() + "cmake>=4.2\n")
    first = build("--clean")
    assert "memory pool" not in first and pools.pooled(co / "build") == []  # nothing heavy in the machine's memory
    edit_header()
    pooled = build(env=capped)
    assert "memory pool torchbuild_heavy: 1 unit(s) needed more than their share" in pooled
    assert "FlashAttentionKernel.cpp.o" in pooled and "every other step keeps MAX_JOBS=2" in pooled
    assert "with MAX_JOBS=2;" in pooled
    assert pools.pooled(co / "build") == [HEAVY]  # that one step, in the build.ninja CMake generated
    assert f"pool {pools.NAME}\n  depth = 1" in (co / "build/CMakeFiles/rules.ninja").read_text()
    python = tmp_path / "envs/py{}.{}/bin/python".format(*sys.version_info[:2])
    said = subprocess.run([python, "-c", "import minitorch; print(minitorch.checksum())"], cwd=tmp_path,
                          capture_output=True, text=True, check=True).stdout.strip()
    assert said == "132875"
    assert Path(co / ".torchbuild/pools/py{}.{}-cpu-release.cmake".format(*sys.version_info[:2])).is_file()
