"""Any backend but scikit-build-core and PyTorch's setup.py: the PEP 660 editable install (`pip install -e .
--no-build-isolation`), never `setup.py develop`, whatever the env's setuptools (pip falls back by itself
where a backend has no PEP 660 hook); a wheel from the backend."""

from __future__ import annotations

from .base import Driver


class Pep517(Driver):
    name = "PEP 517"

    def develop(self, python: str, setuptools: str, build_type: str = "release") -> tuple[str, ...]:
        """PEP 660 for a project without pyproject.toml too (`--use-pep517`; sentencepiece 0.1.99): pip before 25
        runs `setup.py develop` there, which setuptools 80 turns into a pip run with build isolation that hides
        the env (its cmake) from the build."""
        plain = super().develop(python, setuptools, build_type)
        return plain if (self.checkout / "pyproject.toml").is_file() else (*plain, "--use-pep517")
