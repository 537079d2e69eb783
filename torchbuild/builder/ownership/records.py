"""A configuration's record: the marker in its tree (`.torchbuild.json`), validated on every read.

It holds the configuration's key, its configure environment (a secret's value as a digest), the inputs of
its last complete build, its remedies, the wheel it made, its files in the checkout and in the env (by
path relative to the checkout, or to the env named beside them), the CMake trees its builds configured, and the
working tree as its last complete build began. A record that cannot be trusted (a key that is no
configuration name, a path that leaves what it describes, a wrong type) is no record: its tree is not
torchbuild's, moved aside untouched and never removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ...console import SECRET_NAME
from ...digest import digest
from ..evidence import Evidence, from_record

MARKER = ".torchbuild.json"


FOREIGN = "foreign-"  # a build/ torchbuild did not make, moved aside untouched


KEY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+_-]*")


OWN = ("build", ".torchbuild", ".git", "dist", ".nox")  # top-level folders never a configuration's files (.nox/:
# the envs of `torchbuild matrix` run in a checkout, 16k files and gigabytes after one run)


Stats = dict[str, list[int]]


def parts_of(name: object) -> list[str] | None:
    """A relative, normal path's parts (no `..`, `.` or empty part: PurePosixPath would give it back as it is);
    None for anything else. String work only: a record of PyTorch's names 12,000 files, read on every build."""
    if not isinstance(name, str) or not name or "\\" in name or "\0" in name or name[0] == "/":
        return None
    parts = name.split("/")
    return None if any(p in ("", ".", "..") for p in parts) else parts


def safe_name(name: object) -> bool:
    """A path a record may hold: relative, normal, inside (no `..`), not in torchbuild's or git's folders. As
    parts_of decides, by searches in one string (a record of PyTorch's names 12,000 files, each checked)."""
    if not isinstance(name, str) or not name or "\\" in name or "\0" in name or name[0] == "/":
        return False
    wrapped = f"/{name}/"
    return "//" not in wrapped and "/./" not in wrapped and "/../" not in wrapped and \
        name.partition("/")[0] not in OWN


def tree_name(name: object) -> bool:
    """A CMake tree's path as a record may hold it: relative to the checkout, normal, inside (build/ included)."""
    parts = parts_of(name)
    return parts is not None and parts[0] not in (".git", ".torchbuild")


def valid_stats(files: object) -> bool:
    """A record's files: safe relative names, each with [size, mtime_ns]."""
    return isinstance(files, dict) and all(
        safe_name(k) and type(v) is list and len(v) == 2 and type(v[0]) is int and type(v[1]) is int
        for k, v in files.items())


SMALL = 1 << 16  # the outputs whose content a record keeps (a library is rewritten only when it is relinked)
DIGEST = 16  # hex digits of each one's digest


def unpacked(outputs: Mapping[str, list[int]], packed: str) -> dict[str, str]:
    """A record's content digests (channels.packed_contents) by name ({} where they do not fit its small files)."""
    names = [name for name, st in sorted(outputs.items()) if st[0] <= SMALL]
    if len(packed) != DIGEST * len(names):
        return {}
    return {name: packed[i * DIGEST:(i + 1) * DIGEST] for i, name in enumerate(names)}


def as_built(path: str, name: str, recorded: object, known: Mapping[str, str]) -> bool:
    """Whether the file at `path` is as the build left it: its stat as recorded, else (a small one, written
    again) its content, by the digest `known` has for `name`."""
    now = stat_of(path)
    return now == recorded or (now is not None and name in known and content_of(path) == known[name])


def content_of(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.blake2b(fh.read(), digest_size=DIGEST // 2).hexdigest()
    except OSError:
        return None


def stat_of(path: str | os.PathLike[str]) -> list[int] | None:
    """A regular file's [size, mtime_ns] (None: missing, a link, a folder): one lstat, the check of ten thousand
    installed files on a no-op at PyTorch's size."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns] if stat.S_ISREG(st.st_mode) else None


@dataclass(frozen=True)
class Record:
    """A configuration's record, as the marker in its tree keeps it (`.torchbuild.json`, validated on read)."""

    key: str  # the configuration (py3.12-cu130-release)
    configure: Mapping[str, str] = field(default_factory=dict)  # its configure environment, a secret by digest
    done: str | None = None  # the inputs stamp of its last complete build (None: the last did not finish)
    remedies: Mapping[str, str] = field(default_factory=dict)  # known failures' fixes, kept by its later builds
    wheel: tuple[str, int, int] | None = None  # the wheel it made: path, size, mtime
    outputs: Mapping[str, list[int]] = field(default_factory=dict)  # its files in the checkout (channels.py)
    worktree: Mapping[str, object] | None = None  # the working tree's changes as its last build began
    env_files: Mapping[str, list[int]] | None = None  # what its editable install put into the env
    env_prefix: str | None = None  # that env, the env_files' paths relative to it
    trees: tuple[str, ...] = ()  # the CMake trees its builds configured (CMake's log names them)
    inputs: Mapping[str, object] | None = None  # what its stamp was made of (the terminal says which changed)
    folders: Mapping[str, str] = field(default_factory=dict)  # the source names in each folder it compiles from
    evidence: Evidence = field(default_factory=Evidence)  # what its build read that git cannot vouch for
    develop: str | None = None  # a wheel's record: the stamp of the complete develop build it was made after
    debug_files: Mapping[str, list[str]] = field(default_factory=dict)  # --debug-files' units: "build.ninja\tobject"
    # -> [source, CMake's FLAGS, the debug FLAGS] (debugfiles.py)
    contents: str = ""  # the small ones among `outputs`: their content's digests, packed (channels.packed_contents),
    # so a file written again with the same content is still the build's (ninja by hand rewrites version.py)

    def as_json(self) -> dict[str, object]:
        return {"key": self.key, "configure": kept_values(self.configure), "done": self.done,
                "remedies": dict(self.remedies), "wheel": list(self.wheel) if self.wheel else None,
                "outputs": dict(self.outputs), "worktree": dict(self.worktree) if self.worktree is not None else None,
                "env_files": dict(self.env_files) if self.env_files is not None else None,
                "env_prefix": self.env_prefix if self.env_files is not None else None, "trees": list(self.trees),
                "inputs": dict(self.inputs) if self.inputs is not None and self.done else None,
                "folders": dict(self.folders), "evidence": self.evidence.as_record(), "develop": self.develop,
                "debug_files": dict(self.debug_files), "contents": self.contents}


_READ: dict[tuple[str, int, int, int], Record | None] = {}  # a marker read once a process, by its file's stat


def read_marker(tree: Path) -> Record | None:
    """The tree's record, validated (None: none, unreadable, or one that cannot be trusted: a key that is
    not a configuration name, a file outside the checkout or env it describes). A record of an older
    torchbuild that named env files by absolute path keeps no env files (the build goes the whole way).
    Read once a process while its file stays as it is (the build asks at each step: a switch, the verdict)."""
    path = tree / MARKER
    try:
        st = os.stat(path)
        key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
        if key not in _READ:
            _READ[key] = valid_marker(json.loads(path.read_text()))
    except (OSError, ValueError):
        return None
    return _READ[key]


def valid_marker(data: object) -> Record | None:
    """A marker's data as torchbuild trusts it, or None (see read_marker)."""
    if not isinstance(data, dict):
        return None
    key, trees, wheel = data.get("key"), data.get("trees") or [], data.get("wheel")
    if not isinstance(key, str) or not KEY_RE.fullmatch(key) or ".." in key:
        return None
    if not valid_stats(data.get("outputs") or {}) or not isinstance(data.get("configure") or {}, dict) \
            or not isinstance(data.get("remedies") or {}, dict) or not isinstance(data.get("folders") or {}, dict):
        return None
    if not isinstance(trees, list) or not all(tree_name(t) for t in trees):
        return None
    env, prefix = data.get("env_files"), data.get("env_prefix")
    if env is not None and not (isinstance(prefix, str) and os.path.isabs(prefix) and valid_stats(env)):
        if not (isinstance(env, dict) and any(isinstance(k, str) and os.path.isabs(k) for k in env)):
            return None
        env, prefix = None, None  # an older torchbuild's record
    done, worktree, inputs, develop = data.get("done"), data.get("worktree"), data.get("inputs"), data.get("develop")
    contents = data.get("contents")
    return Record(key, {str(k): str(v) for k, v in (data.get("configure") or {}).items()},
                  done if isinstance(done, str) else None,
                  {str(k): str(v) for k, v in (data.get("remedies") or {}).items()},
                  (str(wheel[0]), wheel[1], wheel[2]) if isinstance(wheel, list) and len(wheel) == 3 else None,
                  dict(data.get("outputs") or {}), worktree if isinstance(worktree, dict) else None,
                  env, prefix if env is not None else None, tuple(trees),
                  inputs if isinstance(inputs, dict) else None,
                  {str(k): str(v) for k, v in (data.get("folders") or {}).items()}, from_record(data.get("evidence")),
                  develop if isinstance(develop, str) else None, debug_entries(data.get("debug_files")),
                  contents if isinstance(contents, str) else "")


def debug_entries(data: object) -> dict[str, list[str]]:
    """The record's --debug-files entries that have the shape debugfiles.py writes (others are dropped)."""
    if not isinstance(data, dict):
        return {}
    return {k: [str(x) for x in v] for k, v in data.items()
            if isinstance(k, str) and "\t" in k and isinstance(v, list) and len(v) == 3}


def write_marker(build: Path, record: Record) -> None:
    """Keep the configuration's record in its tree (a secret's value as a digest). Written to a temporary
    file first: a marker is whole or absent. One line: json's indented form is written by Python code, not C,
    5x as long for a record of PyTorch's 12,000 files (50 ms a write, and a build writes two)."""
    tmp = build / f"{MARKER}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record.as_json()))
    tmp.replace(build / MARKER)


def kept_values(variables: Mapping[str, str]) -> dict[str, str]:
    """Variables as a marker keeps them: the value of a secret (`*_TOKEN`, `*_PASSWORD`, ...) as its digest."""
    return {k: f"digest:{digest(v)[:16]}" if SECRET_NAME.search(k) else v for k, v in variables.items()}


def recorded_evidence(marker: Record | None) -> Evidence:
    """What the configuration's last build read that git cannot vouch for, by content (evidence.py)."""
    return marker.evidence if marker else Evidence()


def recorded_outputs(marker: Record | None) -> dict[str, list[int]]:
    """The configuration's files in the checkout, as its tree's marker records them."""
    return dict(marker.outputs) if marker else {}


def env_recorded(marker: Record | None) -> dict[str, object]:
    """The files the configuration's editable install put into the env, as its tree's marker records them."""
    return dict(marker.env_files) if marker and marker.env_files is not None else {}


def env_prefix(marker: Record | None) -> Path | None:
    """The env the configuration's editable install went into, as its marker records it."""
    return Path(marker.env_prefix) if marker and marker.env_prefix else None


def configured_trees(marker: Record | None) -> list[str]:
    """The CMake trees the configuration's builds configured (in build/ and outside it), as its marker
    records them (CMake's "Build files have been written to" in their logs)."""
    return list(marker.trees) if marker else []


def wheel_id(wheel: Path) -> tuple[str, int, int]:
    """A wheel file as the marker keeps it: path, size and mtime (a rebuilt or replaced wheel differs)."""
    st = wheel.stat()
    return (str(wheel), st.st_size, st.st_mtime_ns)


def kept_wheel(marker: Record | None) -> Path | None:
    """The wheel the tree's last build made, if it is still there unchanged."""
    if not marker or not marker.wheel:
        return None
    wheel = Path(marker.wheel[0])
    return wheel if wheel.exists() and wheel_id(wheel) == marker.wheel else None


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
