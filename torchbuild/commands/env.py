"""`inv env.create / list / remove / activate / run`."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Sequence

from .. import console as _console
from .. import envs
from ..builder.ownership.cmaketrees import cache_entry
from ..builder.ownership.records import read_marker
from ..config import Config
from ..errors import TorchbuildError
from ..run import run
from ..toolchain import python as discovery
from ..toolchain import sanitizers
from . import table


def create(cfg: Config, python: str | None = None, name: str | None = None, dry_run: bool = False) -> int:
    """Create (or verify) a managed env with the checkout's build deps."""
    spec = python or cfg.build.python or discovery.OWN_MINOR
    py = discovery.find(discovery.discover(os.environ, cfg.toolchain.pythons), spec)
    checkout = cfg.source_path if cfg.source_path.exists() else None
    made = envs.create(cfg, py, name, cfg.matrix.backend, checkout, os.environ, cfg.build.cuda, dry_run)
    if not dry_run:
        _console.get().ok(f"env {made.name}: Python {made.version} at {made.prefix}; "
                          f"activate with: {envs.activation(made)}")
    return 0


def list_envs(cfg: Config) -> int:
    """Print the managed envs and whether their deps are up to date."""
    checkout = cfg.source_path if cfg.source_path.exists() else None
    rows = []
    for prefix, made in envs.list_envs(cfg):
        if made is None:
            rows.append((prefix.name, "-", "-", str(prefix), "unfinished (made again on next use)"))
            continue
        fresh = made.stamp == envs.expected_stamp(cfg, made.backend, made.version, checkout, cfg.build.cuda)
        rows.append((made.name, made.version, made.backend, str(prefix), "yes" if fresh else "no (inv env.create)"))
    if not rows:
        _console.get().info(f"no managed envs in {envs.envs_dir(cfg)}; `inv env.create --python 3.X` makes one")
        return 0
    table(rows, ("name", "python", "backend", "path", "deps up to date"))
    return 0


def remove(cfg: Config, name: str, yes: bool = False, dry_run: bool = False) -> int:
    """Remove a managed env (asks unless --yes; `dry_run`: only say which)."""
    prefix = envs.named(cfg, name)
    if dry_run:
        size = sum(f.stat().st_size for f in prefix.rglob("*") if f.is_file() and not f.is_symlink())
        _console.get().info(f"--dry-run: would remove env {name} ({prefix}, {size / 1024 ** 2:.1f} MiB); "
                            "nothing was removed")
        return 0
    if not yes:
        if not sys.stdin or not sys.stdin.isatty():
            raise TorchbuildError(f"not removing {prefix} without confirmation",
                                  f"pass --yes: inv env.remove {name} --yes")
        answer = input(f"remove {prefix}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            _console.get().info("kept it")
            return 1
    shutil.rmtree(prefix)
    _console.get().ok(f"removed env {name} ({prefix})")
    return 0


def activate(cfg: Config, name: str, shell: str | None = None) -> int:
    """Print the activation line for the user's shell."""
    made = envs.read(envs.named(cfg, name))
    if made is None:
        raise TorchbuildError(f"env {name} is unfinished", f"make it again with `inv env.create --name {name}`")
    shell = shell or os.path.basename(os.environ.get("SHELL", "bash"))
    _console.get().result(envs.activation(made, shell))
    return 0


def run_in(cfg: Config, name: str, argv: Sequence[str] = ()) -> int:
    """Run a command inside a managed env (after `--`)."""
    prefix: Path = envs.named(cfg, name)
    if not argv:
        raise TorchbuildError("no command given", f"put it after --: inv env.run {name} -- python -c 'import torch'")
    path = str(prefix / "bin") + os.pathsep + os.environ.get("PATH", "")
    result = run(list(argv), env={"PATH": path, "VIRTUAL_ENV": str(prefix), **sanitized(cfg, prefix)}, check=False,
                 on_line=_console.get().result)
    return result.returncode


def sanitized(cfg: Config, prefix: Path) -> dict[str, str]:
    """What the configuration the checkout holds now needs to import, where it is a --sanitize one installed
    into this env: its sanitizer's runtime preloaded (toolchain/sanitizers.py), said."""
    marker = read_marker(cfg.source_path / "build")
    chosen = sanitizers.of_key(marker.key) if marker else None
    python = marker.configure.get("python") if marker else None  # the configuration's interpreter
    if marker is None or chosen is None or not python or not Path(python).is_relative_to(prefix):
        return {}
    compiler = cache_entry(cfg.source_path / "build", "CMAKE_CXX_COMPILER")  # the one it was built with
    found = sanitizers.run_env(chosen, sanitizers.runtime_path(chosen, {**os.environ, "CXX": compiler} if compiler
                                                               else os.environ))
    _console.get().info(f"{marker.key} is this env's build of the checkout: "
                        + " ".join(f"{k}={v}" for k, v in found.items()))
    return found
