"""`inv config`."""

from __future__ import annotations

from .. import console as _console
from ..config import Config


def show(cfg: Config) -> int:
    """Print every setting, its value and where it came from."""
    con = _console.get()
    con.result(f"# project: {cfg.root}")
    con.result(f"# file:    {cfg.file or '(none: built-in defaults)'}")
    con.result(f"# cache:   {cfg.cache_root}")
    rows = [(key, shown(value), origin) for key, value, origin in cfg.items()]
    width = max(len(r[0]) for r in rows)
    vwidth = min(48, max(len(r[1]) for r in rows))
    for key, value, origin in rows:
        con.result(f"{key:<{width}}  {value:<{vwidth}}  {origin}")
    return 0


def shown(value: object) -> str:
    """A setting's value as `inv config` prints it."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "{}"
    if isinstance(value, list):
        return ", ".join(value) or "[]"
    return str(value)
