"""A small project as a git repo: its files written, one commit."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Mapping


def write_repo(root: Path, files: Mapping[str, str], message: str) -> Path:
    """`files` (path: text) under `root`, committed on main; returns `root`."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", message]):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return root
