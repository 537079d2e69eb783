"""Build drivers: how a checkout builds, a fact read once from its files (pyproject's build-backend, setup.py),
never guessed from a version. Each driver answers the same questions; planning and execution ask them and
branch on nothing else.

    setuptools_era  PyTorch up to 2.13: setup.py + tools/setup_helpers, outputs installed into the checkout
    skbuild         scikit-build-core: PyTorch 2.14 and main (cmake/EnvVarForwarding.cmake, tools/metadata)
                    and any other scikit-build-core project; compiled outputs in the env's site-packages
    pep517          any other backend: the PEP 660 editable install, a wheel from the backend
"""

from __future__ import annotations

from pathlib import Path

from .base import WHEEL_HOOK, Driver, build_backend
from .pep517 import Pep517
from .setuptools_era import SetuptoolsEra
from .skbuild import ScikitBuildCore

__all__ = ["WHEEL_HOOK", "Driver", "build_backend", "detect"]


def detect(checkout: Path) -> Driver:
    """The checkout's build driver: scikit-build-core by its backend, PyTorch's setup.py by its own files,
    else the generic PEP 517 path through the named (or setuptools' legacy) backend."""
    backend, backend_path = build_backend(checkout)
    if backend.startswith("scikit_build_core"):
        return ScikitBuildCore(checkout, backend, backend_path)
    if SetuptoolsEra.matches(checkout):
        return SetuptoolsEra(checkout, backend, backend_path)
    return Pep517(checkout, backend, backend_path)
