"""As PyTorch's tools/metadata/version.py: the dynamic-metadata provider of the version field."""

from __future__ import annotations

from typing import Any, Mapping

from _common import get_torch_version  # resolved through scikit-build-core's provider path

__all__ = ["dynamic_metadata"]


def dynamic_metadata(settings: Mapping[str, Any], project: Mapping[str, Any]) -> dict[str, Any]:
    if settings:
        raise RuntimeError(f"This provider takes no settings, got {sorted(settings)}")
    return {"version": get_torch_version()}
