"""`inv demo`: the whole job on the embedded demo upstream."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

from .. import builder as b
from .. import console as _console
from ..config import Config
from ..demo import ERAS, SIZES, make_upstream
from ..errors import TorchbuildError
from ..run import run
from .clone import clone, sync


def demo(cfg: Config, path: str | None = None, legacy: bool = False, units: int | None = None,
         era: str = "main", size: str = "demo", pad_mb: int | None = None) -> int:
    """Clone, sync, patch, build and import-check the demo upstream (`era`: main builds through scikit-build-core
    as PyTorch 2.14 and main do, 2.13 through setup.py; `legacy`: as PyTorch 1.10, on Python 3.6; `units`: that
    many translation units in its core library, to measure the edit-compile loop at scale; `size`: "pytorch" gives
    it PyTorch's counts, demo.SIZES; `pad_mb`: libtorch that many MB bigger, a CUDA or debug build's size)."""
    if size not in SIZES:
        raise TorchbuildError(f"--size {size} is not one the demo has", f"pass one of {', '.join(SIZES)}")
    if units is not None and not 1 <= units <= 20000:
        raise TorchbuildError(f"--units {units} is out of range", "pass 1 to 20000 (the default demo has 24)")
    if pad_mb is not None and not 0 <= pad_mb <= 8192:
        raise TorchbuildError(f"--pad-mb {pad_mb} is out of range", "pass 0 to 8192 (--size pytorch has 300; a "
                                                                     "debug libtorch_cpu.so is 3.9 GB)")
    if era not in ERAS:
        raise TorchbuildError(f"--era {era} is not one the demo has", f"pass one of {', '.join(ERAS)}")
    con = _console.get()
    base = Path(path).resolve() if path else cfg.cache_root / "demo"
    if base.exists():
        shutil.rmtree(base / "upstream", ignore_errors=True)
        shutil.rmtree(base / "checkout", ignore_errors=True)
    with con.timed(f"make the demo upstream in {base / 'upstream'}"):
        counts = dataclasses.replace(SIZES[size], units=units or SIZES[size].units,
                                     pad_mb=SIZES[size].pad_mb if pad_mb is None else pad_mb)
        upstream = make_upstream(base / "upstream", legacy=legacy, era="2.13" if legacy else era, size=counts)
    source = dataclasses.replace(cfg.source, url=upstream.url("pytorch"), ref=None, path=str(base / "checkout"))
    demo_build = dataclasses.replace(cfg.build, min_free_gb=min(cfg.build.min_free_gb, 1.0),
                                     python="3.6" if legacy else cfg.build.python,
                                     cuda="none" if legacy else cfg.build.cuda)
    demo_cfg = dataclasses.replace(cfg, source=source, build=demo_build)
    clone(demo_cfg)
    sync(demo_cfg)
    request = b.BuildRequest.resolve(demo_cfg)
    outcome = b.build(demo_cfg, dataclasses.replace(request, python="3.6") if legacy else request, os.environ)
    b.report(outcome)
    python = str(outcome.plan.env.python)
    with con.timed("import check: python -c 'import minitorch; print(minitorch.checksum())'"):
        out = run([python, "-c", "import minitorch; print(minitorch.checksum(), minitorch.cuda_compiled())"],
                  capture=True, cwd=base).stdout.split()
    con.ok(f"minitorch imports from {demo_cfg.source_path}: checksum {out[0]}, CUDA kernel built: {out[1]}")
    return 0
