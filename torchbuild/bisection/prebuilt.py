"""The ladder's third rung: a nightly wheel built from the commit to test, or from one whose difference to it
is Python only (then that commit's Python over the nightly's binaries). Nightlies exist per day, not per
commit: the ones dated the commit's day or the next are asked what they were built from (each wheel
downloaded once into the cache), as `inv nightly` reads them (version.py's git_version; PyTorch's name a
`nightly` branch commit whose subject names the main commit)."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any, Mapping

from .. import console as _console
from .. import envs
from .. import nightly as _nightly
from ..config import Config
from ..errors import TorchbuildError
from ..nightly import index
from . import ladder, worktree


def request(bcfg: Config, state: Mapping[str, Any]) -> _nightly.NightlyRequest:
    return _nightly.NightlyRequest(python=bcfg.build.python, cuda=state["cuda"])


def days(tree: Path, commit: str) -> tuple[str, str]:
    """The commit's day and the next (UTC, YYYYMMDD): the nightlies that may have been built from it."""
    stamp = int(worktree.git(tree, "show", "-s", "--format=%ct", commit).stdout.strip())
    day = datetime.datetime.fromtimestamp(stamp, tz=datetime.timezone.utc)
    return day.strftime("%Y%m%d"), (day + datetime.timedelta(days=1)).strftime("%Y%m%d")


def candidate(bcfg: Config, state: dict[str, Any], tree: Path, commit: str,
              env: Mapping[str, str]) -> tuple[str, str, str] | None:
    """A nightly usable for `commit`: its version, the commit it names and the one it was built from."""
    found = state.get("nightly")
    if found is None:
        return None
    package = _nightly.package_name(bcfg, tree)
    if "versions" not in found:
        try:
            listed, url, _, versions = _nightly.listing(bcfg, request(bcfg, state), package, env)
        except TorchbuildError as exc:
            _console.get().warn(f"no nightlies for this bisection: {exc.message}")
            state["nightly"] = None
            return None
        found.update(versions=versions, url=url, env=str(listed.prefix), sources={})
    made = envs.read(Path(found["env"]))
    if made is None:
        return None
    for version in found["versions"]:
        if index.dev_date(version) not in days(tree, commit):
            continue
        if version not in found["sources"]:
            found["sources"][version] = list(_nightly.built_from(bcfg, tree, package, made, found["url"], version))
        names, source = found["sources"][version]
        if source == commit or (source and ladder.choose(commit, source, None, worktree.diff(tree, source, commit),
                                                         package, False).kind == "python"):
            return version, names, source
    return None
