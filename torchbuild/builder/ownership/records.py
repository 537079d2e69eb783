"""A configuration's record: the marker in its tree (`.torchbuild.json`), validated on every read.

It holds the configuration's key, its configure environment (a secret's value as a digest), the inputs of
its last complete build, its remedies, the wheel it made, its files in the checkout and in the env (by
path relative to the checkout, or to the env named beside them), the CMake trees its builds configured, and the
working tree as its last complete build began. A record that cannot be trusted (a key that is no
configuration name, a path that leaves what it describes, a wrong type) is no record: its tree is not
torchbuild's, moved aside untouched and never removed.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path, PurePosixPath
from typing import Mapping

from ...console import SECRET_NAME
from ...digest import digest

MARKER = ".torchbuild.json"


FOREIGN = "foreign-"  # a build/ torchbuild did not make, moved aside untouched


KEY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+_-]*")


OWN = ("build", ".torchbuild", ".git", "dist", ".nox")  # top-level folders never a configuration's files (.nox/:
# the envs of `torchbuild matrix` run in a checkout, 16k files and gigabytes after one run)


Stats = dict[str, list[int]]


def safe_name(name: object) -> bool:
    """A path a record may hold: relative, normal, inside (no `..`), not in torchbuild's or git's folders."""
    if not isinstance(name, str) or not name or "\\" in name or "\0" in name:
        return False
    path = PurePosixPath(name)
    return not path.is_absolute() and ".." not in path.parts and str(path) == name and path.parts[0] not in OWN


def tree_name(name: object) -> bool:
    """A CMake tree's path as a record may hold it: relative to the checkout, normal, inside (build/ included)."""
    if not isinstance(name, str) or not name or "\\" in name or "\0" in name:
        return False
    path = PurePosixPath(name)
    return not path.is_absolute() and ".." not in path.parts and str(path) == name and path.parts[0] not in (
        ".git", ".torchbuild")


def valid_stats(files: object) -> bool:
    """A record's files: safe relative names, each with [size, mtime_ns]."""
    return isinstance(files, dict) and all(
        safe_name(k) and isinstance(v, list) and len(v) == 2 and all(type(x) is int for x in v)
        for k, v in files.items())


def stat_of(path: Path) -> list[int] | None:
    """A regular file's [size, mtime_ns] (None: missing, a link, a folder)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns] if os.path.isfile(path) and not os.path.islink(path) else None


def read_marker(tree: Path) -> dict[str, object] | None:
    """The tree's record, validated (None: none, unreadable, or one that cannot be trusted: a key that is
    not a configuration name, a file outside the checkout or env it describes). A record of an older
    torchbuild that named env files by absolute path keeps no env files (the build goes the whole way)."""
    try:
        data = json.loads((tree / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return valid_marker(data)


def valid_marker(data: object) -> dict[str, object] | None:
    """A marker's data as torchbuild trusts it, or None (see read_marker)."""
    if not isinstance(data, dict):
        return None
    key = data.get("key")
    if not isinstance(key, str) or not KEY_RE.fullmatch(key) or ".." in key:
        return None
    if not valid_stats(data.get("outputs") or {}) or not isinstance(data.get("configure") or {}, dict) \
            or not isinstance(data.get("remedies") or {}, dict):
        return None
    trees = data.get("trees") or []
    if not isinstance(trees, list) or not all(tree_name(t) for t in trees):
        return None
    env, prefix = data.get("env_files"), data.get("env_prefix")
    if env is not None and not (isinstance(prefix, str) and os.path.isabs(prefix) and valid_stats(env)):
        if isinstance(env, dict) and any(isinstance(k, str) and os.path.isabs(k) for k in env):
            data = {**data, "env_files": None, "env_prefix": None}  # an older torchbuild's record
        else:
            return None
    return data


def write_marker(build: Path, key: str, configure: Mapping[str, str], done: str | None,
                 remedies: Mapping[str, str] | None = None, wheel: Path | None = None,
                 files: Mapping[str, object] | None = None, worktree: Mapping[str, object] | None = None,
                 env_files: Mapping[str, object] | None = None, env: Path | None = None,
                 trees: list[str] | None = None, inputs: Mapping[str, object] | None = None,
                 folders: Mapping[str, str] | None = None) -> None:
    """Record which configuration a tree holds, how it was configured (a secret's value as a digest),
    its last complete inputs, the remedies (known-failure fixes) applied to it, which its later builds
    keep, the wheel it made, its files in the checkout (channels.py), the working tree's changed files
    as the last complete build began (shortcut.py), the files its editable install put into the env
    (scikit-build-core: the compiled outputs live there), relative to that env, the CMake trees its builds
    configured (CMake's log names them), what its stamp was made of (`inputs`: the terminal says which
    changed), and the source names in each folder it compiles from (`folders`: a glob may read a new one).
    Written to a temporary file first: a marker is whole or absent."""
    data = {"key": key, "configure": kept_values(configure), "done": done, "remedies": dict(remedies or {}),
            "wheel": wheel_id(wheel) if wheel else None, "outputs": dict(files or {}),
            "worktree": dict(worktree) if worktree is not None else None,
            "env_files": dict(env_files) if env_files is not None else None,
            "env_prefix": str(env) if env is not None and env_files is not None else None,
            "trees": list(trees or []), "inputs": dict(inputs) if inputs is not None and done else None,
            "folders": dict(folders or {})}
    tmp = build / f"{MARKER}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(data, indent=2))
    tmp.replace(build / MARKER)


def kept_values(variables: Mapping[str, str]) -> dict[str, str]:
    """Variables as a marker keeps them: the value of a secret (`*_TOKEN`, `*_PASSWORD`, ...) as its digest."""
    return {k: f"digest:{digest(v)[:16]}" if SECRET_NAME.search(k) else v for k, v in variables.items()}


def recorded_outputs(marker: Mapping[str, object] | None) -> dict[str, object]:
    """The configuration's files in the checkout, as its tree's marker records them."""
    files = marker.get("outputs") if marker else None
    return dict(files) if isinstance(files, dict) else {}


def env_recorded(marker: Mapping[str, object] | None) -> dict[str, object]:
    """The files the configuration's editable install put into the env, as its tree's marker records them."""
    files = marker.get("env_files") if marker else None
    return dict(files) if isinstance(files, dict) else {}


def env_prefix(marker: Mapping[str, object] | None) -> Path | None:
    """The env the configuration's editable install went into, as its marker records it."""
    prefix = marker.get("env_prefix") if marker else None
    return Path(prefix) if isinstance(prefix, str) else None


def configured_trees(marker: Mapping[str, object] | None) -> list[str]:
    """The CMake trees the configuration's builds configured (in build/ and outside it), as its marker
    records them (CMake's "Build files have been written to" in their logs)."""
    trees = marker.get("trees") if marker else None
    return [str(t) for t in trees] if isinstance(trees, list) else []


def wheel_id(wheel: Path) -> list[object]:
    """A wheel file as the marker keeps it: path, size and mtime (a rebuilt or replaced wheel differs)."""
    st = wheel.stat()
    return [str(wheel), st.st_size, st.st_mtime_ns]


def kept_wheel(marker: Mapping[str, object] | None) -> Path | None:
    """The wheel the tree's last build made, if it is still there unchanged."""
    recorded = marker.get("wheel") if marker else None
    if not isinstance(recorded, list) or not recorded:
        return None
    wheel = Path(str(recorded[0]))
    return wheel if wheel.exists() and wheel_id(wheel) == recorded else None


def configure_changes(old: Mapping[str, object] | None, new: Mapping[str, str]) -> list[str]:
    """What differs between the tree's last configure environment and this one (secrets by digest)."""
    if not old:
        return []
    new = kept_values(new)
    diffs = []
    for k in sorted(set(old) | set(new)):
        if old.get(k) != new.get(k):
            diffs.append(f"{k}: {old.get(k, '(unset)')} -> {new.get(k, '(unset)')}")
    return diffs
