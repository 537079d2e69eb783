"""Projects that are not PyTorch, built as a user would: a project with no CUDA code under `--cuda auto`, a
CMake tree outside build/, a package under src/, a setup.py whose CMake tree PEP 660 throws away."""

from __future__ import annotations

import subprocess
import sys

from ..helpers import inv, needs_nvcc
from ..skbuild import make_skbuild_project


@needs_nvcc
def test_auto_cuda_builds_a_project_that_uses_no_cuda_for_cpu(tmp_path, monkeypatch):
    """A pure-CPU CMake project on a machine with a toolkit: no cu130 key, no arch list; one .cu file of its
    own and the same project asks for the toolkit. (issue 31)"""
    monkeypatch.setenv("TORCHBUILD_PATHS_LOGS", str(tmp_path / "logs"))
    project = make_skbuild_project(tmp_path / "cpu", units=1)
    plan = inv("build", "--path", str(project), "--dry-run", check=True).output
    assert "does not use CUDA" in plan and "-cpu-release" in plan and "TORCH_CUDA_ARCH_LIST" not in plan
    (project / "src/kernel.cu").write_text("__global__ void k() {}\n")
    plan = inv("build", "--path", str(project), "--dry-run", check=True).output
    assert "does not use CUDA" not in plan and "-cu130-release" in plan


def test_a_package_under_src_is_up_to_date_when_nothing_changed(tmp_path, monkeypatch):
    """The env's editable install names where the package is (src/greet): the no-op holds there too. (issue 31)"""
    from ..onnxlike import make_onnx_shaped_project

    for key, value in {"TORCHBUILD_PATHS_ENVS": tmp_path / "envs", "TORCHBUILD_PATHS_LOGS": tmp_path / "logs",
                       "TORCHBUILD_BUILD_MIN_FREE_GB": "1", "TORCHBUILD_BUILD_CUDA": "none"}.items():
        monkeypatch.setenv(key, str(value))
    co = make_onnx_shaped_project(tmp_path / "co", src_layout=True)
    inv("build", "--path", str(co), check=True, timeout=300)
    assert "up to date: ninja has no work" in inv("build", "--path", str(co), check=True).stderr
    python = tmp_path / "envs/py{}.{}/bin/python".format(*sys.version_info[:2])
    done = subprocess.run([python, "-c", "import greet; print(greet.greet(), greet.__file__)"], cwd=tmp_path,
                          capture_output=True, text=True, check=True).stdout.split()
    assert done[:3] == ["hello", "release", "1"] and done[3] == str(co / "src/greet/__init__.py")
