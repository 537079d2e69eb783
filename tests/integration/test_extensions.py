"""An extension built against the torch a PyTorch checkout's configuration holds (`--torch`): the demo's companion
extension_cpp (minitorch.utils.cpp_extension's BuildExtension: build.ninja in build_temp, ninja) against the demo
torch, with real gcc, ninja, pip and nvcc."""

from __future__ import annotations

import subprocess
import sys

from ..helpers import inv


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
    second, said = build()
    assert "setuptools' in-place build, keeps the tree, without pip" in second and said == "3 True True"
    assert list((co / "build/temp.torchbuild").rglob("main.d"))
    noop, said = build()
    assert "up to date: no input its compiler's depfiles name is newer" in noop and said == "3 True True"
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
