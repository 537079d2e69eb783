"""Git: recursive clone, submodule sync/update, mirrors and the reference cache.

    core.py        the runner (mirror rules, no prompts, retries), url helpers, repo queries
    mirror.py      the bare-mirror reference cache
    submodules.py  the level-by-level submodule walk: inspect, plan, act
    clone.py       the superproject: fresh clone, move to a ref, finish an interrupted clone
    buildclones.py the repos the build clones by itself (NCCL, Eigen): fetched ahead, rewrites for the build
"""

from __future__ import annotations

from ..config import Config, default_jobs
from . import buildclones
from .clone import clone_source
from .core import PATCH_BASE_REF, Git, GitOptions, changed_files, head, origin_url
from .mirror import MirrorCache
from .submodules import Report, update_tree

__all__ = ["PATCH_BASE_REF", "Git", "GitOptions", "MirrorCache", "Report", "buildclones", "changed_files",
           "clone_source", "head", "origin_url", "tools", "update_tree"]


def tools(cfg: Config, dry_run: bool = False) -> tuple[Git, MirrorCache | None]:
    """The Git runner and mirror cache configured by `cfg`."""
    options = GitOptions(
        mirrors=cfg.mirrors.git,
        cache_dir=cfg.cache_root / "git" if cfg.git.cache else None,
        jobs=cfg.git.jobs or default_jobs(),
        depth=cfg.git.depth,
        shallow_submodules=cfg.git.shallow_submodules,
        retries=cfg.git.retries,
        retry_delay=cfg.git.retry_delay,
        dry_run=dry_run,
    )
    git = Git(options)
    cache = MirrorCache(git, options.cache_dir) if options.cache_dir else None
    return git, cache
