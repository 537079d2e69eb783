"""A small scikit-build-core project in a git repo (nanobind_example's shape, without a binding library):
a C++ core of several translation units, a CPython extension module, `wheel.install-dir`-free defaults."""

from __future__ import annotations

from pathlib import Path

from torchbuild.demo import UNIT

from .repo import write_repo

PYPROJECT = """[build-system]
requires = ["scikit-build-core>=0.10"]
build-backend = "scikit_build_core.build"

[project]
name = "skdemo"
version = "0.1.0"
requires-python = ">=3.9"

[tool.scikit-build]
wheel.packages = ["src/skdemo"]
"""

CMAKE = """cmake_minimum_required(VERSION 3.15...3.30)
project(${{SKBUILD_PROJECT_NAME}} LANGUAGES CXX)
find_package(Python COMPONENTS Interpreter Development.Module REQUIRED)
add_library(skcore STATIC {units})
target_include_directories(skcore PUBLIC include)
set_target_properties(skcore PROPERTIES POSITION_INDEPENDENT_CODE ON)
Python_add_library(_core MODULE src/module.cpp WITH_SOABI)
target_link_libraries(_core PRIVATE skcore)
install(TARGETS _core DESTINATION skdemo)
"""

MODULE = """#include <Python.h>
#include "c10/core.h"

static PyObject* checksum(PyObject*, PyObject* args) {{
  long n = 50;
  if (!PyArg_ParseTuple(args, "|l", &n)) return nullptr;
  return PyLong_FromLong({calls});
}}

static PyMethodDef methods[] = {{{{"checksum", checksum, METH_VARARGS, "a number every unit computes"}},
                                 {{nullptr, nullptr, 0, nullptr}}}};
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "skdemo._core", nullptr, -1, methods}};
PyMODINIT_FUNC PyInit__core(void) {{ return PyModule_Create(&module); }}
"""


# The version from git through setuptools-scm, as boost-histogram and most scikit-hep projects have it:
# scikit-build-core asks for setuptools-scm from its get_requires_for_build_* hooks, not build-system.requires.
SCM = (PYPROJECT.replace('version = "0.1.0"', 'dynamic = ["version"]')
       + 'metadata.version.provider = "scikit_build_core.metadata.setuptools_scm"\n\n[tool.setuptools_scm]\n')


def make_skbuild_project(root: Path, units: int = 6, scm: bool = False) -> Path:
    """The project as a git repo at `root` (one commit; `scm`: versioned by setuptools-scm); returns `root`."""
    names = [f"src/core/unit_{i:02d}.cpp" for i in range(units)]
    files = {
        "pyproject.toml": SCM if scm else PYPROJECT,
        "CMakeLists.txt": CMAKE.format(units=" ".join(names)),
        "include/c10/core.h": "#pragma once\nnamespace c10 {\n"
                              + "".join(f"long unit_{i:02d}(long n);\n" for i in range(units)) + "}\n",
        "src/module.cpp": MODULE.format(calls=" + ".join(f"c10::unit_{i:02d}(n)" for i in range(units))),
        "src/skdemo/__init__.py": "from ._core import checksum\n\n__all__ = [\"checksum\"]\n",
        ".gitignore": "/build/\n/dist/\n*.so\n__pycache__/\n",
        **{name: UNIT.format(i=i) for i, name in enumerate(names)},
    }
    return write_repo(root, files, "skdemo: initial")
