"""What each kind of step and of configure cost on this machine, over every checkout it built
(`<cache dir>/build-history.json`): the price of a kind a checkout never ran yet (its first CUDA tree's nvcc
units and CUDA configure), where its own trees and records have none. Each successful build adds one sample
of each kind it ran (its tree's median step of that kind, its configure); the newest `KEEP` are kept. Written
whole or not at all; builds side by side may drop each other's sample: it is a price, never a verdict."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
from pathlib import Path
from typing import Mapping

KEEP = 50


def read(path: Path | None) -> dict[str, list[float]]:
    with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
        data = json.loads(path.read_text()) if path else {}
        return {str(k): [float(x) for x in v] for k, v in data.items() if isinstance(v, list)}
    return {}


def add(path: Path | None, samples: Mapping[str, float]) -> None:
    """One sample of each kind, the oldest beyond `KEEP` dropped."""
    if path is None or not samples:
        return
    kept = read(path)
    for kind, seconds in samples.items():
        kept[kind] = [*kept.get(kind, []), round(seconds, 3)][-KEEP:]
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(kept))
        tmp.replace(path)


def medians(path: Path | None) -> dict[str, float]:
    return {kind: statistics.median(values) for kind, values in read(path).items() if values}


def configure_kind(cuda: bool, first: bool) -> str:
    """A configure's kind: a CUDA tree's first one detects nvcc and its toolkit (tens of seconds), another is
    CMake reading its cache again."""
    return f"configure a new {'CUDA' if cuda else 'CPU'} tree" if first else \
        f"configure a {'CUDA' if cuda else 'CPU'} tree again"
