"""An extension built against the torch a PyTorch checkout's configuration holds (`--torch`): the demo's companion
extension_cpp (minitorch.utils.cpp_extension's BuildExtension: build.ninja in build_temp, ninja) against the demo
torch, with real gcc, ninja, pip and nvcc."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..helpers import build, env_python, extension_checkout, git, inv


def test_extensions_setuptools_compiles_keep_their_objects_per_configuration(tmp_path, monkeypatch):
    """pybind's python_example shape (setuptools compiles the Extension itself): from the second build on,
    setuptools' in-place build with build/temp.torchbuild kept; the compiler's depfiles prove a no-op, see a
    header's edit, a debug build is one (no NDEBUG, not optimized), the switch back to release compiles
    nothing, and `clean` leaves no editable install importing a module that is gone. (issue 31)"""
    from ..onnxlike import make_python_example_project

    for key, value in {"TORCHBUILD_PATHS_ENVS": tmp_path / "envs", "TORCHBUILD_PATHS_LOGS": tmp_path / "logs",
                       "TORCHBUILD_BUILD_MIN_FREE_GB": "1", "TORCHBUILD_BUILD_CUDA": "none"}.items():
        monkeypatch.setenv(key, str(value))
    co = make_python_example_project(tmp_path / "co")
    python = tmp_path / "envs/py{}.{}/bin/python".format(*sys.version_info[:2])

    def call() -> str:
        return subprocess.run([python, "-c", "import pyex; print(pyex.value(), pyex.optimized(), pyex.ndebug())"],
                              cwd=tmp_path, text=True, capture_output=True).stdout.strip()

    def build(*args: str) -> tuple[str, str]:
        return inv("build", "--path", str(co), *args, check=True, timeout=300).stderr, call()

    first, said = build()
    assert said == "3 True True", first
    assert "the next build compiles every unit once more, into the kept tree" in first  # (issue 69 item 15)
    second, said = build()
    assert "setuptools' in-place build, keeps the tree, without pip" in second and said == "3 True True"
    assert "compiles every unit once more" not in second
    assert list((co / "build/temp.torchbuild").rglob("main.d"))
    noop, said = build()
    assert "up to date: no input its compiler's depfiles name is newer" in noop and said == "3 True True"
    monkeypatch.setenv("TORCHBUILD_PATHS_CACHE_DIR", str(tmp_path / "moved-cache"))  # the launchers' folder moved
    moved, said = build()  # (issue 69 item 16) no CMake here: nothing to configure again, nothing to recompile
    assert "up to date" in moved and "reconfiguring" not in moved and said == "3 True True", moved
    monkeypatch.delenv("TORCHBUILD_PATHS_CACHE_DIR")
    (co / "src/value.h").write_text("#define VALUE 13\n")
    edited, said = build()
    assert "in-place build" in edited and said == "13 True True"
    debug, said = build("--debug")
    assert said == "13 False False", debug  # -O0, NDEBUG undefined: a debug build, not setuptools' `-g -O3`
    back, said = build()
    assert "restored the py" in back and "up to date" in back and said == "13 True True"
    cleaned = inv("clean", "--path", str(co), check=True).stderr
    assert "uninstalled the editable install of pyex" in cleaned and not list(co.glob("pyex*.so"))
    assert subprocess.run([python, "-m", "pip", "show", "pyex"], capture_output=True).returncode == 1


def test_a_setup_py_that_compiles_its_units_itself_is_incremental_whatever_lies_beside_it(small_demo, tmp_path,
                                                                                           monkeypatch):
    """torch-scatter's shape (issues 58 item 11, 59): `BuildExtension.with_options(use_ninja=False)`, and a top-level
    CMakeLists.txt for a standalone C++ library that its setup.py never runs. What setup.py does decides: no CMake
    generator, depfiles. With no ccache on PATH, the builds run behind the provisioned one: the first in-place build
    after pip hits the cache for every unit pip compiled in its temporary folder, the compiler's depfiles prove a
    no-op, and an edited unit is the one compile that misses (distutils compiles every unit of an extension it
    rebuilds: the cache is what keeps the others from compiling)."""
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                                               if not (Path(d) / "ccache").exists()))
    build(small_demo, "--cuda", "none")
    ext = extension_checkout(tmp_path)
    setup = ext / "setup.py"
    setup.write_text(setup.read_text().replace('{"build_ext": BuildExtension}',
                                               '{"build_ext": BuildExtension.with_options(use_ninja=False)}'))
    (ext / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.18)\nproject(extension_cpp_lib CXX)\n"
                                        "add_library(ops SHARED extension_cpp/csrc/ops.cpp)\n")
    git(ext, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "torch-scatter's shape")
    first = build(ext, "--torch", str(small_demo))
    assert "CMake generator" not in first.stderr and "compiler cache: ccache" not in first.stderr  # seeded: provisioned
    in_place = build(ext, "--torch", str(small_demo))
    assert "setup.py build_ext --inplace --force --build-temp build/temp.torchbuild" in in_place.stderr
    assert "ccache 5/5 hits" in in_place.stderr, in_place.stderr
    noop = build(ext, "--torch", str(small_demo))
    assert "up to date: no input its compiler's depfiles name is newer" in noop.stderr, noop.stderr
    ops = ext / "extension_cpp/csrc/ops.cpp"
    ops.write_text(ops.read_text() + "int an_edit() { return 1; }\n")  # code: a comment hits, preprocessed
    edited = build(ext, "--torch", str(small_demo))
    assert "ccache 4/5 hits" in edited.stderr, edited.stderr
    twice, once = subprocess.run([str(env_python()), "-c", "import extension_cpp, minitorch; print("
                                  "extension_cpp.checksum_twice(5), minitorch.checksum(5))"], cwd=tmp_path, text=True,
                                 capture_output=True, check=True).stdout.split()
    assert int(twice) == 2 * int(once)


def test_a_static_version_lets_another_commit_build_in_place(tmp_path, monkeypatch):
    """Issue 58 item 15 (bitarray's bisection): the version is a literal in setup.py, the same at both commits, so
    pip's install of the other commit would record what it records now: the commit is built in place (its
    changed source checked as an edit is), not through pip, and imports that commit's code."""
    from ..onnxlike import make_python_example_project

    for key, value in {"TORCHBUILD_PATHS_ENVS": tmp_path / "envs", "TORCHBUILD_PATHS_LOGS": tmp_path / "logs",
                       "TORCHBUILD_BUILD_MIN_FREE_GB": "1", "TORCHBUILD_BUILD_CUDA": "none"}.items():
        monkeypatch.setenv(key, str(value))
    co = make_python_example_project(tmp_path / "co")
    python = tmp_path / "envs/py{}.{}/bin/python".format(*sys.version_info[:2])
    (co / "src/value.h").write_text("#define VALUE 5\n")
    git(co, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "five")
    for _ in range(2):  # pip, then the kept tree in place
        inv("build", "--path", str(co), check=True, timeout=300)
    git(co, "checkout", "-q", "HEAD~1")
    back = inv("build", "--path", str(co), check=True, timeout=300).stderr
    assert "a build of another commit" in back and "verdict: in place" in back and "through pip" not in back, back
    said = subprocess.run([str(python), "-c", "import pyex; print(pyex.value())"], cwd=tmp_path, text=True,
                          capture_output=True, check=True).stdout.strip()
    assert said == "3"
