"""`inv build`, `inv clean` and `inv trees`."""

from __future__ import annotations

import json
import os
import time
from typing import Any, Mapping

from .. import builder as b
from .. import console as _console
from .. import holdings
from ..builder import record
from ..builder.execute import TRUE
from ..builder.ownership import keeping
from ..builder.ownership.trees import build_lock
from ..config import Config, OriginKind
from ..errors import TorchbuildError


def build(cfg: Config, debug: bool = False, rel_with_deb_info: bool = False, show: str = "",
          **asked: Any) -> int:
    """Build the checkout for the selected Python and CUDA; incremental, one tree per configuration (`show`:
    "record" or "profile" prints the last build's instead; `asked`: BuildRequest.resolve's flags)."""
    if show == "record":
        return print_record(cfg)
    if show == "profile":
        return print_profile(cfg)
    origin = cfg.origins.get("build.build_type")
    if not (debug or rel_with_deb_info) and (origin is None or origin.kind == OriginKind.DEFAULT):
        debug, rel_with_deb_info = shell_build_type(os.environ)
    request = b.BuildRequest.resolve(cfg, debug=debug, rel_with_deb_info=rel_with_deb_info, **asked)
    b.report(b.build(cfg, request, os.environ))
    return 0


def shell_build_type(env: Mapping[str, str]) -> tuple[bool, bool]:
    """DEBUG=1 / REL_WITH_DEB_INFO=1 in the shell, as PyTorch's docs tell developers to set them: the build
    type when neither a flag nor build.build_type names one (said, since torchbuild sets both itself)."""
    debug = env.get("DEBUG", "").lower() in TRUE
    rel = not debug and env.get("REL_WITH_DEB_INFO", "").lower() in TRUE
    if debug or rel:
        _console.get().info(f"{'DEBUG' if debug else 'REL_WITH_DEB_INFO'}=1 in the environment: a "
                            f"{'debug' if debug else 'relwithdebinfo'} build (build.build_type or --debug / "
                            "--rel-with-deb-info choose otherwise)")
    return debug, rel


def print_record(cfg: Config) -> int:
    """Print the record of the newest build (what produced it), for pasting into a bug report."""
    newest = record.latest(cfg.root / cfg.paths.logs)
    if newest is None:
        raise TorchbuildError(f"no build record in {cfg.root / cfg.paths.logs}", "run `inv build` first")
    _console.get().info(f"record: {newest}")
    _console.get().result(newest.read_text().rstrip())
    return 0


def print_profile(cfg: Config) -> int:
    """Print where the newest build's time went, and where its timeline and trace are."""
    import json

    from ..builder.profile import table

    newest = record.latest(cfg.root / cfg.paths.logs)
    try:
        data = json.loads(newest.read_text()) if newest else None
    except (OSError, ValueError):
        raise TorchbuildError(f"the build record {newest} is damaged (not whole JSON)",
                              "run `inv build --rerun` to write a new one") from None
    kept = data.get("profile") if isinstance(data, dict) else None
    if not kept:
        raise TorchbuildError(f"no build profile in {cfg.root / cfg.paths.logs}",
                              "run `inv build` (a build that runs its command writes one)")
    _console.get().info(f"profile of {newest}")
    for line in table(kept):
        _console.get().result(line)
    return 0


def clean(cfg: Config, all_trees: bool = False, config: str | None = None, dry_run: bool = False,
          older_than: str | None = None, keep: str | None = None) -> int:
    """Remove build trees (never sources) and say what and how many bytes (`dry_run`: remove nothing): the
    current one, `config`'s, those unused for `older_than` days or past the `keep` most recently used, or all,
    with the slots, the finished bisection and the store's entries no env links to."""
    con = _console.get()
    if not (cfg.source_path / ".git").exists():
        raise TorchbuildError(f"no checkout at {cfg.source_path}: nothing to clean",
                              "run the command inside a checkout, or pass --path to one")
    days, count = selection(older_than, keep, all_trees or config is not None)
    if days is not None or count is not None:
        removed, kept = by_use(cfg, days, count, dry_run)
    else:
        removed, kept = b.clean(cfg.source_path, all_trees, config, dry_run)
    if all_trees:
        removed += [(what, size, [], None) for what, size in holdings.clean_idle(holdings.survey(cfg), dry_run)]
    for tree in kept:
        con.warn(f"kept {tree}: torchbuild did not make it (remove it yourself if you no longer need it)")
    if not removed and (days is not None or count is not None):
        con.info(f"no kept configuration of {cfg.source_path} is " + " or ".join(
            ([f"unused for over {days:g} day(s)"] if days is not None else [])
            + ([f"past the {count} most recently used"] if count is not None else [])) + ": nothing to remove")
    elif not removed:
        con.info(f"no build tree of torchbuild's in {cfg.source_path}: nothing to remove")
    verb = "would remove" if dry_run else "removed"
    for what, size, files, uninstalled in removed:
        con.info(f"{verb} {what}: {size / 1024 ** 2:.1f} MiB"
                 + (f", and its {len(files)} file(s) in the checkout:" if files else ""))
        for name in files:
            con.info(f"  {name}")
        if uninstalled:
            con.info(f"uninstalled the editable install of {uninstalled}: it imported the files removed "
                     "(the next `torchbuild build` installs it again)")
    if removed:
        freed = f"{sum(gone[1] for gone in removed) / 1024 ** 2:.1f} MiB"
        con.ok(f"--dry-run: would free {freed}; nothing was removed" if dry_run else f"freed {freed}")
    return 0


def selection(older_than: str | None, keep: str | None, other: bool) -> tuple[float | None, int | None]:
    """`--older-than DAYS` and `--keep N`, checked: one line naming the fix for a bad value."""
    days = count = None
    if older_than is not None:
        try:
            days = float(older_than)
        except ValueError:
            days = -1.0
        if not days >= 0 or days == float("inf"):
            raise TorchbuildError(f"--older-than '{older_than}' is not a number of days",
                                  "pass a number of days ≥ 0, e.g. --older-than 14")
    if keep is not None:
        count = int(keep) if keep.isdigit() else -1
        if count < 1:
            raise TorchbuildError(f"--keep '{keep}' would keep no configuration, and the current one always stays",
                                  "pass a whole number ≥ 1 (the current configuration is one of them): --keep 2")
    if (days is not None or count is not None) and other:
        raise TorchbuildError("--older-than and --keep choose trees by when they were used; --all and --config "
                              "name them", "pass one or the other")
    return days, count


def by_use(cfg: Config, days: float | None, count: int | None, dry_run: bool
           ) -> tuple[list[tuple[str, int, list[str], str | None]], list[Any]]:
    """Remove the kept trees `--older-than`/`--keep` choose (never the current one), under the build lock."""
    checkout = cfg.source_path
    removed: list[tuple[str, int, list[str], str | None]] = []
    with build_lock(checkout):
        now = time.time()
        for tree in keeping.chosen(keeping.configurations(checkout, now=now), now, days, count):
            for what, size, files, uninstalled in b.clean(checkout, key=tree.key, dry_run=dry_run, locked=False,
                                                          missing_ok=True)[0]:
                removed.append((f"{what}, last used {keeping.ago(tree.used, now)}", size, files, uninstalled))
    return removed, []


def trees(cfg: Config, json_out: bool = False) -> int:
    """Every configuration with its size, when it was built and used, its env; then the slots, the bisection, the
    store and the compiler cache, each with its size and what removes it."""
    if not cfg.source_path.is_dir():
        raise TorchbuildError(f"no checkout at {cfg.source_path}: no trees to list",
                              "run the command inside a checkout, or pass --path to one")
    found = holdings.survey(cfg)
    if json_out:
        print(json.dumps(holdings.as_json(found), indent=1))
        return 0
    for line in holdings.lines(found):
        _console.get().result(line)
    return 0
