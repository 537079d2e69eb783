"""The patches/ series: applied on top of the checkout as commits, atomically and idempotently.

Each repo that gets patches gets a local branch `torchbuild/patches` whose commits are the
patches, and a ref `refs/torchbuild/base` marking where the series starts. A patch counts as
applied when a commit on base..HEAD has its patch-id, whatever the file is called.

    series.py  the series file and the patches: parsing, loading, patch-ids
    apply.py   apply (all or nothing) and status
    export.py  revert and export
"""

from __future__ import annotations

from pathlib import Path

from .. import console as _console
from ..config import Config
from ..git import tools
from .apply import apply, status
from .export import export, revert
from .series import PatchError, parse_series, read_series, to_mbox, touched_files

__all__ = ["PatchError", "apply", "auto_apply", "export", "parse_series", "read_series", "revert", "status",
           "to_mbox", "touched_files"]


def auto_apply(cfg: Config, checkout: Path) -> None:
    """Apply the series when patches.auto is on and the series has entries."""
    if not cfg.patches.auto or not read_series(cfg.patches_dir):
        return
    with _console.get().timed(f"apply {cfg.patches.dir}/series (patches.auto)"):
        apply(tools(cfg)[0], checkout, cfg.patches_dir)
