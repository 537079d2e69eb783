"""As PyTorch's tools/metadata/_common.py: the providers' shared access to tools/generate_torch_version.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def get_torch_version() -> str:
    """The version by generate_torch_version's precedence: PYTORCH_BUILD_VERSION/_NUMBER, else version.txt + sha."""
    spec = importlib.util.spec_from_file_location(
        "generate_torch_version", Path(__file__).resolve().parent.parent / "generate_torch_version.py")
    if spec is None or spec.loader is None:
        raise ImportError("Could not load generate_torch_version.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_torch_version()
