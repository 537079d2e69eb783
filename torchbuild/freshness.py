"""Whether a matrix session's last result still holds: what it depends on, a hash for each part, kept
in its record; `inv matrix` runs again only the sessions where a part changed, and says which."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

from . import __version__
from .builder.plan import affects_configure
from .builder.slots import SLOTS_ENV
from .builder.verdict import unseen
from .config import Config
from .digest import digest
from .errors import TorchbuildError
from .summary import SessionRecord, torch_wheels
from .toolchain.cuda import candidate_roots

STARTED = "TORCHBUILD_MATRIX_STARTED"  # when `inv matrix` started nox (epoch seconds)
ROOT_ENV = "TORCHBUILD_ROOT"  # the project, for the build sessions' noxfile (nox runs it from its own folder)
OWN_VARIABLES = (STARTED, SLOTS_ENV, ROOT_ENV)  # what `inv matrix` tells its sessions: never a build input
INSTALLED = (".dist-info", ".egg-info", ".egg-link", ".pth")  # an env's packages, by name and version


def fingerprint(cfg: Config, python: str, cuda: str, venv: Path | None, source: list[object],
                outputs: list[Path | None]) -> str:
    """What a session's result depends on, hashed (`depends`, all its parts in one)."""
    return digest(depends(cfg, python, cuda, venv, source, outputs))


def depends(cfg: Config, python: str, cuda: str, venv: Path | None, source: list[object],
            outputs: list[Path | None]) -> dict[str, str]:
    """What a session's result depends on, a hash for each part: the checkout's commit and changed files
    (taken before the build), what its builds read that git does not see (by content: an ignored clone's
    edit), the settings, the configure variables, the tools on PATH, the CUDA toolkits,
    the env's packages, and the wheels it made. Cheap (stats and two git calls): `inv matrix` checks it for
    every session before starting nox, so a matrix with nothing to do costs well under a second."""
    def ident(path: Path | str | None) -> list[object]:
        try:
            st = Path(path).stat() if path else None
        except OSError:
            st = None
        return [str(path), st.st_size if st else None, st.st_mtime_ns if st else None]

    search = (str(venv / "bin") + os.pathsep if venv else "") + os.environ.get("PATH", "")
    tools = [ident(shutil.which(t, path=search)) for t in ("cc", "c++", "cmake", "ninja", "nvcc", "ccache", "sccache",
                                                           "distcc")]
    cpu = cuda in ("none", "cpu")
    roots = [] if cpu else [ident(r / "bin" / "nvcc")
                            for r, _ in candidate_roots(os.environ, cfg.toolchain.cuda_roots, cfg.cache_root)]
    site = sorted(p.name for p in venv.glob("lib/python*/site-packages/*") if p.suffix in INSTALLED) if venv else []
    variables = sorted((k, v) for k, v in os.environ.items()
                       if affects_configure(k) or k.startswith("TORCHBUILD_") and k not in OWN_VARIABLES)
    try:  # an extension's: the torch project's wheels it builds against (a new one runs the session again)
        torch: list[object] = [ident(w) for w in torch_wheels(cfg, python, cuda)] if cfg.build.torch else []
    except TorchbuildError:
        torch = ["missing"]
    parts = {"the checkout": source, "what git does not see": unseen(cfg.source_path),
             **({"the torch's wheels": torch} if torch else {}),
             "the settings": [__version__, python, cuda, repr(cfg.build), repr(cfg.cache), repr(cfg.toolchain),
                              cfg.matrix.split, str(cfg.source_path)],
             "the build variables": variables, "the tools on PATH": tools, "the CUDA toolkits": roots,
             "the env's packages": site, "the wheels": [ident(o) for o in outputs if o]}
    return {name: digest(data) for name, data in parts.items()}


def changed(cfg: Config, record: SessionRecord, source: list[object]) -> list[str]:
    """Why the session's last result no longer holds, in words (empty: it still holds): it did not
    succeed, or the parts of what it depends on that differ now."""
    if record.result not in ("ok", "skipped"):
        return [f"it {record.result} last time"]
    venv = Path(record.env) if record.env else None
    if venv is not None and not venv.exists():
        return [f"its env {venv} is gone"]
    outputs: list[Path | None] = []
    if record.result == "ok":
        outputs = [Path(record.wheel) if record.wheel else None, Path(record.core) if record.core else None]
    now = depends(cfg, record.python, record.cuda, venv, source, outputs)
    if digest(now) == record.fingerprint:
        return []
    return [f"{name} changed" for name, value in now.items() if record.depends.get(name) != value] or \
        ["what it depends on changed"]


def stamped(cfg: Config, record: SessionRecord, venv: Path | None, source: list[object],
            outputs: list[Path | None]) -> SessionRecord:
    """The record with its `fingerprint` and the parts it is made of (`depends`)."""
    parts = depends(cfg, record.python, record.cuda, venv, source, outputs)
    return dataclasses.replace(record, fingerprint=digest(parts), depends=parts)
