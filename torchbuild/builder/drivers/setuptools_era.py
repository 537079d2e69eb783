"""PyTorch up to 2.13 (and its release branches): setup.py + tools/setup_helpers (PYTORCH_FACTS.md, "Build
commands by era"). CMake installs into the package folder of the checkout (`torch/lib`, `_C*.so`); the
2.9+ setup.py redirects `develop` to `pip install -e . -v --no-build-isolation`; older releases document
`python setup.py develop`, which stays theirs while the env's setuptools is older than 80."""

from __future__ import annotations

import re
from pathlib import Path

from .base import Driver

REDIRECT = "Redirecting 'python setup.py develop'"  # PyTorch 2.9+'s setup.py: develop runs pip install -e
# What PyTorch's setup.py copies at every build (build_deps: "Use copies instead of symbolic files"): a change
# to the original is stale in the copy until setup.py runs, though the original is Python imported in place
VALGRIND = "{package}/utils/benchmark/utils/valgrind_wrapper"
SETUP_COPIES = {"{package}/_utils_internal.py": "tools/shared/_utils_internal.py",
                "third_party/valgrind-headers/callgrind.h": f"{VALGRIND}/callgrind.h",
                "third_party/valgrind-headers/valgrind.h": f"{VALGRIND}/valgrind.h"}


class SetuptoolsEra(Driver):
    name = "PyTorch's setup.py"

    @staticmethod
    def matches(checkout: Path) -> bool:
        """PyTorch's setup.py by its own files: tools/setup_helpers, or the split build's switches."""
        setup = checkout / "setup.py"
        if not setup.is_file():
            return False
        text = setup.read_text(errors="replace")
        return (checkout / "tools" / "setup_helpers").is_dir() or "BUILD_LIBTORCH_WHL" in text

    def pytorch(self) -> bool:
        return True

    def copies(self, package: str) -> dict[str, str]:
        return {k.format(package=package): v.format(package=package) for k, v in SETUP_COPIES.items()}

    def forwards_cmake_variables(self) -> bool:
        return True  # tools/setup_helpers/cmake.py, at configure time

    def legacy(self, setuptools: str) -> bool:
        """Whether this release's own way is `setup.py develop` / `bdist_wheel` (no redirect to pip in its
        setup.py, and a setuptools older than 80, which made develop a wrapper of pip, #152276)."""
        major = re.match(r"(\d+)", setuptools or "")
        return REDIRECT not in (self.checkout / "setup.py").read_text(errors="replace") \
            and major is not None and int(major.group(1)) < 80

    def develop(self, python: str, setuptools: str, build_type: str = "release") -> tuple[str, ...]:
        """`setup.py develop` where it is the release's own way; else what its setup.py redirects to (the
        build type reaches setup.py as DEBUG / REL_WITH_DEB_INFO)."""
        return (python, "setup.py", "develop") if self.legacy(setuptools) \
            else super().develop(python, setuptools, build_type)

    def wheel(self, python: str, dist: Path, setuptools: str = "", build_type: str = "release") -> tuple[str, ...]:
        """`setup.py bdist_wheel` where develop is setup.py's too; else the backend's wheel."""
        return (python, "setup.py", "bdist_wheel", "-d", str(dist)) if self.legacy(setuptools) \
            else super().wheel(python, dist, setuptools, build_type)
