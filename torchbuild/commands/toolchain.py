"""`inv cuda.list / cuda.env / cuda.install`, `inv pythons`, `inv doctor`."""

from __future__ import annotations

import json
import os
import shlex

from .. import console as _console
from .. import doctor as doc
from ..config import Config
from ..toolchain import cuda
from ..toolchain import python as discovery
from . import table


def cuda_list(cfg: Config) -> int:
    """Print every CUDA toolkit found."""
    kits = cuda.for_config(cfg, os.environ)
    if not kits:
        _console.get().warn("no CUDA toolkit found; `inv cuda.install 13.0` assembles one from PyPI")
        return 0
    rows = []
    for i, tk in enumerate(kits):
        mark = "*" if i == 0 and tk.usable else ""
        alias = f" (alias {', '.join(map(str, tk.aliases))})" if tk.aliases else ""
        nvcc = str(tk.nvcc) if tk.nvcc and tk.usable else "; ".join(tk.problems) or "missing"
        rows.append((mark, tk.full_version, f"{tk.root}{alias}", nvcc, tk.cudnn or "-", tk.found_by))
    table(rows, ("", "version", "root", "nvcc", "cudnn", "found by"))
    return 0


def cuda_env(cfg: Config, version: str = "auto") -> int:
    """Print `export` lines that select a toolkit in this shell: eval "$(inv cuda.env 13.0)"."""
    tk = cuda.select(cuda.for_config(cfg, os.environ), version)
    con = _console.get()
    for key, value in cuda.toolkit_env(tk, {}).items():
        if key in ("PATH", "LD_LIBRARY_PATH"):  # prepend to whatever the shell has
            con.result(f'export {key}={shlex.quote(value or "")}"${{{key}:+:${key}}}"')
        elif key != "USE_CUDA" or tk is None:
            con.result(f"export {key}={shlex.quote(value or '')}")
    return 0


def cuda_install(cfg: Config, version: str, dry_run: bool = False) -> int:
    """Assemble a CUDA 13.x toolkit from NVIDIA's PyPI wheels into the cache dir."""
    from ..toolchain.cuda_install import install

    con = _console.get()
    with con.timed(f"install CUDA {version} from PyPI wheels"):
        root = install(version, cfg.cache_root, cfg.mirrors.pip_options(), dry_run=dry_run)
    if not dry_run:
        cuda.probe.cache_clear()
        tk = cuda.probe(root, "inv cuda.install")
        shown, short = (tk.full_version, tk.version) if tk else (version, version)
        con.ok(f"CUDA {shown} at {root}; select it with --cuda {short}")
    return 0


def pythons(cfg: Config) -> int:
    """Print every Python interpreter found."""
    rows = []
    for py in discovery.discover(os.environ, cfg.toolchain.pythons):
        if py.problem:
            rows.append((py.version, str(py.path), py.found_by, "-", "-", py.problem))
        else:
            rows.append((py.version, str(py.path), py.found_by, "yes" if py.venv else "no", "yes" if py.pip else "no",
                         py.implementation))
    table(rows, ("version", "path", "found by", "venv", "pip", "notes"))
    return 0


def doctor(cfg: Config, as_json: bool = False) -> int:
    """One table of what the machine has; exit 1 when something blocks a build."""
    facts = doc.gather(cfg, os.environ)
    rows = doc.rows(facts)
    if as_json:
        _console.get().result(json.dumps(doc.as_json(facts, rows), indent=2))
    else:
        table([(r.status.upper() if r.status != doc.OK else "ok", r.name, r.detail, r.fix) for r in rows],
              ("status", "what", "found", "fix"))
    return 1 if any(r.status == doc.PROBLEM for r in rows) else 0
