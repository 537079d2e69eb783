"""`inv clone` and `inv sync`."""

from __future__ import annotations

import hashlib
from pathlib import Path

from .. import console as _console
from .. import git, patches
from ..config import Config, OriginKind
from ..errors import TorchbuildError, UnsafeToProceed
from ..locks import locked
from . import rel


def clone(cfg: Config, dry_run: bool = False, force_skip: bool = False) -> int:
    """Clone (or finish cloning) the source with all nested submodules."""
    gitrun, cache = git.tools(cfg, dry_run)
    dest = cfg.source_path
    url = source_url(cfg, gitrun, dest)
    ref = f" at {cfg.source.ref}" if cfg.source.ref else ""
    with _console.get().timed(f"clone {url}{ref} into {rel(cfg, dest)}"), \
            locked(checkout_lock(cfg, dest), f"cloning into {dest}", f"another torchbuild is cloning into {dest}"):
        report = git.clone_source(gitrun, cache, url, dest, cfg.source.ref, superproject=cfg.root)
        finish(report, force_skip, "clone", dry_run)
        ahead = git.buildclones.fetch_ahead(gitrun, cache, dest) if not dry_run else []
        if ahead:
            _console.get().info(f"the build's own clones, fetched ahead into the mirror cache: {', '.join(ahead)}")
    if not dry_run:
        patches.auto_apply(cfg, dest)
    return 0


def source_url(cfg: Config, gitrun: git.Git, dest: Path) -> str:
    """source.url; left at its default (PyTorch's) over an existing checkout, that checkout's own origin: `clone`
    finishes the project that is there (correctionlib's), never asks for PyTorch into it."""
    origin = cfg.origins.get("source.url")
    if origin is not None and origin.kind != OriginKind.DEFAULT or not (dest / ".git").exists():
        return cfg.source.url
    return git.origin_url(gitrun, dest) or cfg.source.url


def sync(cfg: Config, dry_run: bool = False, force_skip: bool = False) -> int:
    """Sync submodule urls and update every submodule to its recorded commit, never clobbering work."""
    dest = cfg.source_path
    if not (dest / ".git").exists():
        raise TorchbuildError(f"there is no checkout at {dest}", "run `inv clone` first")
    gitrun, cache = git.tools(cfg, dry_run)
    with _console.get().timed(f"sync submodules of {rel(cfg, dest)}"), \
            locked(checkout_lock(cfg, dest), f"syncing {dest}", f"another torchbuild is cloning into {dest}"):
        report = git.update_tree(gitrun, cache, dest)
        finish(report, force_skip, "sync", dry_run)
    return 0


def checkout_lock(cfg: Config, dest: Path) -> Path:
    """The lock that makes clones and syncs of one checkout take turns (kept in the cache dir)."""
    return cfg.cache_root / "locks" / f"{dest.name}-{hashlib.sha1(str(dest).encode()).hexdigest()[:10]}.lock"


def finish(report: git.Report, force_skip: bool, verb: str, dry_run: bool = False) -> None:
    """Print what changed; refuse (exit 3) when submodules holding work were left alone."""
    con = _console.get()
    for line in report.changed:
        con.info(f"  {line}")
    if dry_run and not report.checked and not report.changed:  # no checkout yet: its .gitmodules is unread
        con.info("--dry-run: the checkout is not there yet, so its submodules are read once it is cloned; "
                 "nothing was done")
    elif not report.changed and not report.skipped:
        con.info(f"complete: {report.checked} submodule(s) at their recorded commits, nothing to do")
    else:
        con.info(f"{report.checked} submodule(s) checked, {len(report.changed)} to change" if dry_run else
                 f"{report.checked} submodule(s) checked, {len(report.changed)} changed, "
                 f"{len(report.skipped)} left as they are")
    if report.skipped and not force_skip:
        raise UnsafeToProceed(f"{len(report.skipped)} submodule(s) hold work and were left as they are",
                              f"commit or stash that work and run `inv {verb}` again, "
                              f"or `inv {verb} --force-skip` to accept")
