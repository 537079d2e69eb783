"""What each task does, over one Config. tasks.py and noxfile.py only parse flags and call these."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import console as _console
from .config import Config, default_jobs
from .errors import TorchbuildError, UnsafeToProceed


def git_tools(cfg: Config, dry_run: bool = False) -> tuple[Any, Any]:
    """The Git runner and mirror cache configured by `cfg`."""
    from .git import Git, GitOptions, MirrorCache

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


def clone(cfg: Config, dry_run: bool = False, force_skip: bool = False) -> int:
    """Clone (or finish cloning) the source with all nested submodules."""
    from .git import clone_source

    con = _console.get()
    git, cache = git_tools(cfg, dry_run)
    dest = cfg.source_path
    ref = f" at {cfg.source.ref}" if cfg.source.ref else ""
    with con.timed(f"clone {cfg.source.url}{ref} into {_rel(cfg, dest)}"):
        report = clone_source(git, cache, cfg.source.url, dest, cfg.source.ref, superproject=cfg.root)
        _finish(report, force_skip, "clone")
    return 0


def sync(cfg: Config, dry_run: bool = False, force_skip: bool = False) -> int:
    """Sync submodule urls and update every submodule to its recorded commit, never clobbering work."""
    from .git import update_tree

    con = _console.get()
    dest = cfg.source_path
    if not (dest / ".git").exists():
        raise TorchbuildError(f"there is no checkout at {dest}", "run `inv clone` first")
    git, cache = git_tools(cfg, dry_run)
    with con.timed(f"sync submodules of {_rel(cfg, dest)}"):
        report = update_tree(git, cache, dest)
        _finish(report, force_skip, "sync")
    return 0


def _finish(report: Any, force_skip: bool, verb: str) -> None:
    con = _console.get()
    for line in report.changed:
        con.info(f"  {line}")
    if not report.changed and not report.skipped:
        con.info(f"complete: {report.checked} submodule(s) at their recorded commits, nothing to do")
    else:
        con.info(f"{report.checked} submodule(s) checked, {len(report.changed)} changed, "
                 f"{len(report.skipped)} left as they are")
    if report.skipped and not force_skip:
        raise UnsafeToProceed(f"{len(report.skipped)} submodule(s) hold work and were left as they are",
                              f"commit or stash that work and run `inv {verb}` again, "
                              f"or `inv {verb} --force-skip` to accept")


def show_config(cfg: Config) -> int:
    """Print every setting, its value and where it came from."""
    con = _console.get()
    con.result(f"# project: {cfg.root}")
    con.result(f"# file:    {cfg.file or '(none: built-in defaults)'}")
    con.result(f"# cache:   {cfg.cache_root}")
    rows = [(key, _show(value), origin) for key, value, origin in cfg.items()]
    width = max(len(r[0]) for r in rows)
    vwidth = min(48, max(len(r[1]) for r in rows))
    for key, value, origin in rows:
        con.result(f"{key:<{width}}  {value:<{vwidth}}  {origin}")
    return 0


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "{}"
    if isinstance(value, list):
        return ", ".join(value) or "[]"
    return str(value)


def _rel(cfg: Config, path: Path) -> str:
    try:
        return str(path.relative_to(cfg.root))
    except ValueError:
        return str(path)


def demo(cfg: Config, path: str | None = None) -> int:
    """Make the demo upstream, then clone and sync it like the real thing."""
    import dataclasses
    import shutil

    from .demo import make_upstream

    con = _console.get()
    base = Path(path).resolve() if path else cfg.cache_root / "demo"
    if base.exists():
        shutil.rmtree(base)
    with con.timed(f"make the demo upstream in {base / 'upstream'}"):
        upstream = make_upstream(base / "upstream")
    source = dataclasses.replace(cfg.source, url=upstream.url("pytorch"), ref=None,
                                 path=str(base / "checkout"))
    demo_cfg = dataclasses.replace(cfg, source=source)
    clone(demo_cfg)
    sync(demo_cfg)
    con.ok(f"demo checkout ready at {demo_cfg.source_path}")
    return 0
