"""The heavy tier's scenarios of tests/integration/test_linkers.py's area, half a minute or more each (`nox -s heavy`,
and CI after README's test command): auto links with mold and bfd switches back."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ..helpers import build

needs_mold = pytest.mark.skipif(shutil.which("mold") is None, reason="mold is not installed (apt-get install mold)")


def linked_by(library: Path) -> str:
    """What the library's .comment says about its linker: mold and lld sign it, GNU ld does not."""
    comment = subprocess.run(["readelf", "-p", ".comment", str(library)], capture_output=True, text=True).stdout
    return "mold" if "mold" in comment else "lld" if "LLD" in comment else "bfd"


@needs_mold
@pytest.mark.slow
def test_auto_links_with_mold_and_bfd_switches_back(small_demo, monkeypatch):  # noqa: F811
    done = build(small_demo, "--cuda", "none")
    assert "linker: mold" in done.output
    lib, ext = small_demo / "minitorch" / "lib" / "libtorch.so", next((small_demo / "minitorch").glob("_C*.so"))
    assert linked_by(lib) == "mold" and linked_by(ext) == "mold"  # CMake's libraries and build_ext's _C
    monkeypatch.setenv("TORCHBUILD_BUILD_LINKER", "bfd")
    again = build(small_demo, "--cuda", "none")
    assert "reconfiguring" in again.output and "linker: bfd" in again.output
    assert linked_by(lib) == "bfd" and linked_by(ext) == "bfd"
    import_check = subprocess.run([str(Path(shared_envs(small_demo)) / "bin" / "python"), "-c",
                                   "import minitorch; print(minitorch.checksum())"], capture_output=True, text=True,
                                  cwd=small_demo.parent)
    assert import_check.stdout.strip() == "132875", import_check.stderr


def shared_envs(checkout: Path) -> str:
    import sys

    return os.path.join(os.environ["TORCHBUILD_PATHS_ENVS"], f"py{sys.version_info[0]}.{sys.version_info[1]}")
