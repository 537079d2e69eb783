"""What each task does, over one Config: one module per task family, each a thin function from
flags and Config to the library's plan and its run. tasks.py and noxfile.py only parse flags
and call these through cli.main("module.function", ...).

    clone.py      clone, sync                  toolchain.py  cuda.list/env/install, pythons, doctor
    patch.py      patch.apply/status/...       env.py        env.create/list/remove/activate/run
    build.py      build, clean                 matrix.py     matrix
    demo.py       demo                         config.py     config
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .. import console as _console
from ..config import Config


def table(rows: Sequence[tuple[str, ...]], header: tuple[str, ...]) -> None:
    """Columns padded to the widest cell, header first, on stdout."""
    con = _console.get()
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        con.result("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def rel(cfg: Config, path: Path) -> str:
    """`path` relative to the project when inside it."""
    try:
        return str(path.relative_to(cfg.root))
    except ValueError:
        return str(path)
