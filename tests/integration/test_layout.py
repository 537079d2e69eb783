"""The house rules of the library, checked on its source: layers, no import circle, small modules."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ..helpers import REPO

PACKAGE = REPO / "torchbuild"


def test_ruff_holds_the_size_and_complexity_ratchet():
    import shutil
    import subprocess

    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    done = subprocess.run([ruff, "check", "--select", "C901,PLR0911,PLR0912,PLR0913,PLR0915", str(PACKAGE)],
                          capture_output=True, text=True, cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stdout
