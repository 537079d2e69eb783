"""Any backend but scikit-build-core and PyTorch's setup.py: the PEP 660 editable install (`pip install -e .
--no-build-isolation`), never `setup.py develop`, whatever the env's setuptools (pip falls back by itself
where a backend has no PEP 660 hook); a wheel from the backend."""

from __future__ import annotations

from .base import Driver


class Pep517(Driver):
    name = "PEP 517"
