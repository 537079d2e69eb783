"""`inv bisect`."""

from __future__ import annotations

import os
from typing import Sequence

from .. import bisection as _bisect
from ..config import Config
from ..errors import TorchbuildError


def bisect(cfg: Config, good: Sequence[str] = (), bad: str | None = None, argv: Sequence[str] = (),
           debug: bool = False, rel_with_deb_info: bool = False, sets: Sequence[str] = (), resume: bool = False,
           reset: bool = False, nightly: bool = False) -> int:
    """Find the first bad commit between --good and --bad by COMMAND, in a worktree of the checkout."""
    if resume or reset:
        given = [name for name, value in (("--good", good), ("--bad", bad), ("COMMAND", argv)) if value]
        if given or (resume and reset):
            word = "--resume" if resume else "--reset"
            raise TorchbuildError(f"{word} takes no {', '.join(given) or '--resume'}: "
                                  f"{'it goes on as the bisection started' if resume else 'it ends the bisection'}",
                                  f"run `inv bisect {word}` alone")
        if reset and sets:
            raise TorchbuildError("--reset takes no --set: it ends the bisection", "run `inv bisect --reset` alone")
        return _bisect.reset(cfg) if reset else _bisect.resume(cfg, os.environ, sets)
    if debug and rel_with_deb_info:
        raise TorchbuildError("--debug and --rel-with-deb-info exclude each other", "pass one of them")
    build_type = "debug" if debug else "relwithdebinfo" if rel_with_deb_info else cfg.build.build_type
    request = _bisect.BisectRequest(tuple(good), bad, tuple(argv), build_type, tuple(sets), nightly)
    return _bisect.start(cfg, request, os.environ)
