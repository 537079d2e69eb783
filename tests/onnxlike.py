"""Small setup.py + CMake projects of two real shapes. onnx's: its setup.py configures and builds at every
build in `.setuptools-cmake-build/` (onnx's CMAKE_BUILD_DIR, which its .gitignore names), outside build/,
naming no generator, with CMAKE_ARGS appended and DEBUG choosing the build type, then copies the module where
build_ext wants it (`builder`: how it builds the tree; onnx: `cmake --build .`, older projects run `make`).
pybind's cmake_example: build_ext configures in its build_temp, Ninja where the ninja module is. pybind's
python_example (and mmh3): setuptools compiles the Extension itself, no CMake."""

from __future__ import annotations

from pathlib import Path

from .repo import write_repo

SETUP = '''import os, shlex, shutil, subprocess, sys
from pathlib import Path
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

TOP = Path(__file__).resolve().parent
TREE = TOP / ".setuptools-cmake-build"
BUILDER = {builder}


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        TREE.mkdir(exist_ok=True)
        build_type = "Debug" if os.environ.get("DEBUG", "0") not in ("", "0") else "Release"
        subprocess.check_call(["cmake", f"-DCMAKE_BUILD_TYPE={build_type}",
                               f"-DPython_EXECUTABLE={sys.executable}", *shlex.split(os.environ.get("CMAKE_ARGS", "")),
                               str(TOP)], cwd=TREE)
        subprocess.check_call(BUILDER, cwd=TREE)
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(next(TREE.glob("_greet*.so")), dest)


setup(name="greet", version="0.1", packages=["greet"], ext_modules=[Extension("greet._greet", sources=[])],
      cmdclass={"build_ext": CMakeBuild})
'''

CMAKE = """cmake_minimum_required(VERSION 3.18)
project(greet LANGUAGES CXX)
set(GREETING "hello" CACHE STRING "what greet() says")
find_package(Python COMPONENTS Interpreter Development.Module REQUIRED)
add_library(greetcore STATIC src/core.cpp)
set_target_properties(greetcore PROPERTIES POSITION_INDEPENDENT_CODE ON)
Python_add_library(_greet MODULE src/module.cpp WITH_SOABI)
target_compile_definitions(_greet PRIVATE GREETING="${GREETING}")
target_link_libraries(_greet PRIVATE greetcore)
"""

MODULE = """#include <Python.h>
long core_count();
#ifdef NDEBUG
#define BUILT "release"
#else
#define BUILT "debug"
#endif
static PyObject* greet(PyObject*, PyObject*) {
  return PyUnicode_FromFormat("%s %s %ld", GREETING, BUILT, core_count());
}
static PyMethodDef methods[] = {{"greet", greet, METH_NOARGS, "the greeting, the build type, the core's number"},
                                {nullptr, nullptr, 0, nullptr}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "greet._greet", nullptr, -1, methods};
PyMODINIT_FUNC PyInit__greet(void) { return PyModule_Create(&module); }
"""


def make_onnx_shaped_project(root: Path, builder: tuple[str, ...] = ("cmake", "--build", "."),
                             src_layout: bool = False) -> Path:
    """The project as a git repo at `root` (one commit; `src_layout`: the package under src/); returns `root`."""
    package = "src/greet" if src_layout else "greet"
    files = {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools>=64", "ninja"]\n'
                          'build-backend = "setuptools.build_meta"\n',
        "setup.py": SETUP.replace("{builder}", repr(list(builder))).replace(
            'packages=["greet"]', 'packages=["greet"]' + (', package_dir={"": "src"}' if src_layout else "")),
        "CMakeLists.txt": CMAKE,
        "src/module.cpp": MODULE,
        "src/core.cpp": "long core_count() { return 1; }\n",
        f"{package}/__init__.py": "from ._greet import greet\n",
        ".gitignore": "/.setuptools-cmake-build/\n/build/\n*.so\n*.egg-info/\n__pycache__/\n",
    }
    return write_repo(root, files, "greet: initial")


CMAKE_EXAMPLE_SETUP = '''import os, subprocess, sys
from pathlib import Path
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class CMakeExtension(Extension):
    def __init__(self, name, sourcedir=""):
        super().__init__(name, sources=[])
        self.sourcedir = os.fspath(Path(sourcedir).resolve())


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        extdir = (Path.cwd() / self.get_ext_fullpath(ext.name)).parent.resolve()
        cfg = "Debug" if int(os.environ.get("DEBUG", 0)) else "Release"
        args = [f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={extdir}{os.sep}", f"-DPYTHON_EXECUTABLE={sys.executable}",
                f"-DCMAKE_BUILD_TYPE={cfg}", f"-Dpybind11_DIR={__import__('pybind11').get_cmake_dir()}"]
        args += [item for item in os.environ.get("CMAKE_ARGS", "").split(" ") if item]
        if not os.environ.get("CMAKE_GENERATOR") or os.environ["CMAKE_GENERATOR"] == "Ninja":
            try:
                import ninja
                args += ["-GNinja", f"-DCMAKE_MAKE_PROGRAM:FILEPATH={Path(ninja.BIN_DIR) / 'ninja'}"]
            except ImportError:
                pass
        build_temp = Path(self.build_temp) / ext.name
        build_temp.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cmake", ext.sourcedir, *args], cwd=build_temp, check=True)
        subprocess.run(["cmake", "--build", "."], cwd=build_temp, check=True)


setup(name="cmake_example", version="0.0.1", ext_modules=[CMakeExtension("cmake_example")],
      cmdclass={"build_ext": CMakeBuild}, zip_safe=False)
'''

CMAKE_EXAMPLE_CMAKE = """cmake_minimum_required(VERSION 3.18)
project(cmake_example LANGUAGES CXX)
find_package(pybind11 CONFIG REQUIRED)
pybind11_add_module(cmake_example src/main.cpp)
"""

CMAKE_EXAMPLE_MAIN = """#include <pybind11/pybind11.h>
int add(int i, int j) { return i + j; }
PYBIND11_MODULE(cmake_example, m) { m.def("add", &add); }
"""


def make_cmake_example_project(root: Path) -> Path:
    """pybind's cmake_example in small: setup.py's build_ext configures in build/temp.*/cmake_example (a tree
    inside build/, not build/ itself), Ninja where the ninja module is, the module at the top level."""
    files = {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools>=64", "ninja", "pybind11"]\n'
                          'build-backend = "setuptools.build_meta"\n',
        "setup.py": CMAKE_EXAMPLE_SETUP, "CMakeLists.txt": CMAKE_EXAMPLE_CMAKE, "src/main.cpp": CMAKE_EXAMPLE_MAIN,
        ".gitignore": "/build/\n*.so\n*.egg-info/\n__pycache__/\n",
    }
    return write_repo(root, files, "cmake_example: initial")


PYEX_MAIN = """#include <Python.h>
#include "value.h"
static PyObject* value(PyObject* s, PyObject* a) { return PyLong_FromLong(VALUE); }
static PyObject* optimized(PyObject* s, PyObject* a) {
#ifdef __OPTIMIZE__
  Py_RETURN_TRUE;
#else
  Py_RETURN_FALSE;
#endif
}
static PyObject* ndebug(PyObject* s, PyObject* a) {
#ifdef NDEBUG
  Py_RETURN_TRUE;
#else
  Py_RETURN_FALSE;
#endif
}
static PyMethodDef methods[] = {{"value", value, METH_NOARGS, 0}, {"optimized", optimized, METH_NOARGS, 0},
                                {"ndebug", ndebug, METH_NOARGS, 0}, {0}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "pyex", 0, -1, methods};
PyMODINIT_FUNC PyInit_pyex(void) { return PyModule_Create(&module); }
"""


def make_python_example_project(root: Path) -> Path:
    """pybind's python_example in small, in C: setup.py's Extension, compiled by setuptools itself (no CMake),
    the module at the top level, a header beside its source."""
    files = {
        "pyproject.toml": '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n',
        "setup.py": 'from setuptools import Extension, setup\n'
                    'setup(name="pyex", version="0.1", ext_modules=[Extension("pyex", ["src/main.c"], '
                    'include_dirs=["src"])])\n',
        "src/main.c": PYEX_MAIN, "src/value.h": "#define VALUE 3\n",
        ".gitignore": "/build/\n*.so\n*.egg-info/\n__pycache__/\n",
    }
    return write_repo(root, files, "python_example: initial")
