"""Any backend but scikit-build-core and PyTorch's setup.py: the PEP 660 editable install (`pip install -e .
--no-build-isolation`), never `setup.py develop`, whatever the env's setuptools (pip falls back by itself
where a backend has no PEP 660 hook); a wheel from the backend."""

from __future__ import annotations

from pathlib import Path

from .base import Driver

KEPT_BUILD_TEMP = "build/temp.torchbuild"  # the in-place build's build_temp: inside build/, so per configuration


def calls_cmake(checkout: Path) -> bool:
    """Whether the build runs CMake: a CMakeLists.txt at the top, or a setup.py that names cmake."""
    setup = checkout / "setup.py"
    return (checkout / "CMakeLists.txt").is_file() or \
        (setup.is_file() and "cmake" in setup.read_text(errors="replace").lower())


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
        build_ext runs CMake (inplace.py says when it stands in for the editable install)."""
        if not self.backend.startswith("setuptools.build_meta") or not (self.checkout / "setup.py").is_file() \
                or not calls_cmake(self.checkout):
            return ()
        return (python, "setup.py", "build_ext", "--inplace", "--force", "--build-temp", KEPT_BUILD_TEMP)
