"""`inv patch.apply / status / revert / export`."""

from __future__ import annotations

from pathlib import Path

from .. import console as _console
from .. import git, patches
from ..config import Config
from ..errors import TorchbuildError
from . import rel


def target(cfg: Config, path: str | None, patches_dir: str | None) -> tuple[Path, Path]:
    """(checkout, patches folder) from the flags or the config; the checkout must exist."""
    checkout = Path(path).resolve() if path else cfg.source_path
    folder = Path(patches_dir).resolve() if patches_dir else cfg.patches_dir
    if not (checkout / ".git").exists():
        raise TorchbuildError(f"there is no checkout at {checkout}", "run `inv clone` first, or pass --path")
    return checkout, folder


def apply(cfg: Config, path: str | None = None, patches_dir: str | None = None, dry_run: bool = False) -> int:
    """Apply the series not yet applied, as commits on branch torchbuild/patches; all or nothing."""
    checkout, folder = target(cfg, path, patches_dir)
    with _console.get().timed(f"apply {rel(cfg, folder)}/series to {rel(cfg, checkout)}"):
        patches.apply(git.tools(cfg, dry_run)[0], checkout, folder)
    return 0


def status(cfg: Config, path: str | None = None, patches_dir: str | None = None) -> int:
    """Print each series entry: applied, not applied, or does not apply."""
    checkout, folder = target(cfg, path, patches_dir)
    rows = patches.status(git.tools(cfg)[0], checkout, folder)
    con = _console.get()
    if not rows:
        con.info(f"the series in {folder} is empty")
    width = max((len(p.label) for p, _ in rows), default=0)
    for p, state in rows:
        con.result(f"{p.label:<{width}}  {state}")
    return 0


def revert(cfg: Config, path: str | None = None, patches_dir: str | None = None, dry_run: bool = False) -> int:
    """Take the applied series back off, leaving no trace; unrelated work is kept."""
    checkout, folder = target(cfg, path, patches_dir)
    done = patches.revert(git.tools(cfg, dry_run)[0], checkout, folder)
    con = _console.get()
    con.info(f"reverted the series in: {', '.join(done)}" if done else "no patch series is applied: nothing to do")
    return 0


def export(cfg: Config, path: str | None = None, patches_dir: str | None = None, since: str | None = None) -> int:
    """Write the local commits on top of the base as numbered patches and rewrite the series."""
    checkout, folder = target(cfg, path, patches_dir)
    lines = patches.export(git.tools(cfg)[0], checkout, folder, since)
    con = _console.get()
    for line in lines:
        con.info(f"  {line}")
    con.ok(f"wrote {len(lines)} patch(es) and {rel(cfg, folder / 'series')}")
    return 0
