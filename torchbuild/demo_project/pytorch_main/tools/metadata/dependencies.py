"""As PyTorch's tools/metadata/dependencies.py: the dependencies field. BUILD_PYTHON_ONLY adds the core's wheel
(LIBTORCH_PACKAGE_NAME, default minitorch_no_python) at this version; PYTORCH_EXTRA_INSTALL_REQUIREMENTS adds
pipe-separated requirements."""

from __future__ import annotations

import os
from typing import Any, Mapping

from _common import get_torch_version

__all__ = ["dynamic_metadata", "dynamic_wheel"]


def _is_truthy(value: str | None) -> bool:
    return value is not None and value.upper() in ("ON", "1", "YES", "TRUE", "Y")


def dynamic_metadata(settings: Mapping[str, Any], project: Mapping[str, Any]) -> dict[str, Any]:
    if settings:
        raise RuntimeError(f"This provider takes no settings, got {sorted(settings)}")
    deps: list[str] = []
    if _is_truthy(os.environ.get("BUILD_PYTHON_ONLY")):
        deps.append(f"{os.environ.get('LIBTORCH_PACKAGE_NAME', 'minitorch_no_python')}=={get_torch_version()}")
    extra = os.environ.get("PYTORCH_EXTRA_INSTALL_REQUIREMENTS")
    if extra:
        deps.extend(r.strip() for r in extra.split("|") if r.strip())
    return {"dependencies": deps}


def dynamic_wheel(settings: Mapping[str, Any]) -> dict[str, bool]:
    return {"dependencies": True}
