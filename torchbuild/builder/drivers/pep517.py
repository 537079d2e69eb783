"""Any backend but scikit-build-core and PyTorch's setup.py: the PEP 660 editable install (`pip install -e .
--no-build-isolation`), never `setup.py develop`, whatever the env's setuptools (pip falls back by itself
where a backend has no PEP 660 hook); a wheel from the backend."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterator

from ...compat import pyproject
from .base import Driver

KEPT_BUILD_TEMP = "build/temp.torchbuild"  # the in-place build's build_temp: inside build/, so per configuration
SETUP_SHIM = "import setuptools; setuptools.setup()"  # pip's own stand-in for a project without setup.py
DEPFILES = "-MMD"  # gcc and clang write each object's inputs beside it (`x.o` -> `x.d`): what a no-op is proven by
# The build types' flags where setuptools compiles, in CPPFLAGS: every distutils puts those after Python's own
# flags (`-DNDEBUG -g -O3`), so these win, for C and C++ alike; CFLAGS is no such channel (setuptools 72+
# replaces Python's flags with it, older ones append it). pybind11's setup_helpers adds `-g0` only where
# CFLAGS and CPPFLAGS have no -g
BUILD_TYPE_FLAGS = {"release": "", "debug": "-O0 -g -UNDEBUG", "relwithdebinfo": "-g"}


def calls_cmake(checkout: Path) -> bool:
    """Whether the build runs CMake, as what drives it says: a setup.py whose code names cmake (its own
    build_ext, scikit-build's setup) whatever lies beside it (torch-scatter's sdist holds a CMakeLists.txt for
    its standalone C++ library that its setup.py never runs); without one, a CMakeLists.txt at the top."""
    setup = checkout / "setup.py"
    if setup.is_file():
        code = COMMENT.sub("", setup.read_text(errors="replace")).lower()
        return "cmake" in code or "skbuild" in code
    return (checkout / "CMakeLists.txt").is_file()


COMMENT = re.compile(r"(?m)#.*$")  # CMake's and Python's line comments alike


NOT_THE_PROJECTS = {".git", "build", "dist", "third_party", "external", "extern", "node_modules", ".torchbuild"}
SUBMODULE_PATH = re.compile(r"(?m)^\s*path\s*=\s*(.+?)\s*$")


def own_build_files(checkout: Path, suffixes: tuple[str, ...] = ()) -> Iterator[Path]:
    """The project's own build files (CMakeLists.txt, *.cmake, setup.py), and its files ending in `suffixes`:
    vendored trees and submodules (.gitmodules' paths: other projects' trees inside this one) left out."""
    try:
        others = {checkout / p for p in SUBMODULE_PATH.findall((checkout / ".gitmodules").read_text(errors="replace"))}
    except OSError:
        others = set()
    for folder, dirs, files in os.walk(checkout):
        dirs[:] = [d for d in dirs if d not in NOT_THE_PROJECTS and not d.startswith(".")
                   and Path(folder, d) not in others]
        for name in files:
            if name in ("CMakeLists.txt", "setup.py") or name.endswith((".cmake", *suffixes)):
                yield Path(folder, name)


def compiles_extensions(checkout: Path) -> bool:
    """Whether setuptools compiles the project's extensions itself (pybind's python_example, mmh3): a setup.py
    that names an Extension or ext_modules, or pyproject's [tool.setuptools] ext-modules; no CMake."""
    setup = checkout / "setup.py"
    text = setup.read_text(errors="replace") if setup.is_file() else ""
    named = "Extension(" in text or "ext_modules" in text or \
        bool(pyproject(checkout).get("tool", {}).get("setuptools", {}).get("ext-modules"))
    return named and not calls_cmake(checkout)


class Pep517(Driver):
    name = "PEP 517"

    def develop(self, python: str, setuptools: str, build_type: str = "release") -> tuple[str, ...]:
        """PEP 660 for a project without pyproject.toml too (`--use-pep517`; sentencepiece 0.1.99): pip before 25
        runs `setup.py develop` there, which setuptools 80 turns into a pip run with build isolation that hides
        the env (its cmake) from the build."""
        plain = super().develop(python, setuptools, build_type)
        return plain if (self.checkout / "pyproject.toml").is_file() else (*plain, "--use-pep517")

    def in_place(self, python: str) -> tuple[str, ...]:
        """setuptools' own in-place build of the extensions with a kept build_temp, for a setup.py whose
        build_ext runs CMake or compiles them itself (inplace.py says when it stands in for the editable
        install)."""
        if not self.backend.startswith("setuptools.build_meta") \
                or not (calls_cmake(self.checkout) or compiles_extensions(self.checkout)):
            return ()
        setup = ("setup.py",) if (self.checkout / "setup.py").is_file() else ("-c", SETUP_SHIM)
        return (python, *setup, "build_ext", "--inplace", "--force", "--build-temp", KEPT_BUILD_TEMP)

    def compile_flags(self, build_type: str) -> dict[str, str]:
        """Where setuptools compiles the extensions: the build type's flags (build_ext's `--debug` adds only -g),
        and depfiles, which prove a no-op (inplace.stale_objects)."""
        if not compiles_extensions(self.checkout):
            return {}
        return {"CPPFLAGS": " ".join(filter(None, (DEPFILES, BUILD_TYPE_FLAGS[build_type])))}
