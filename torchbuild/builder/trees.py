"""Build trees: one per configuration (Python, CUDA, build type), with the files its build put
into the checkout (outputs.py).

PyTorch always builds in `build/`, so the tree of the configuration being built is moved into
`build/` and the others wait in `.torchbuild/trees/<key>`, each holding its files from the checkout
(`torch/lib`, `torch/_C*.so`, `torch/version.py`, ...). Switching back to a configuration is then
an incremental no-op that imports that configuration's own binaries, instead of a rebuild.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Mapping

from ..console import SECRET_NAME
from ..digest import digest
from ..errors import TorchbuildError
from ..locks import STATE, checkout_lock
from . import outputs

MARKER = ".torchbuild.json"
FOREIGN = "foreign-"  # a build/ torchbuild did not make, moved aside untouched
KEY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+_-]*")

# ----------------------------------------------------------------------------- build trees


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
    if not outputs.valid_stats(data.get("outputs") or {}) or not isinstance(data.get("configure") or {}, dict) \
            or not isinstance(data.get("remedies") or {}, dict):
        return None
    trees = data.get("trees") or []
    if not isinstance(trees, list) or not all(outputs.safe_name(t) for t in trees):
        return None
    env, prefix = data.get("env_files"), data.get("env_prefix")
    if env is not None and not (isinstance(prefix, str) and os.path.isabs(prefix) and outputs.valid_stats(env)):
        if isinstance(env, dict) and any(isinstance(k, str) and os.path.isabs(k) for k in env):
            data = {**data, "env_files": None, "env_prefix": None}  # an older torchbuild's record
        else:
            return None
    return data


def trees_dir(checkout: Path) -> Path:
    return checkout / STATE / "trees"


def activate_tree(checkout: Path, key: str) -> str | None:
    """Put `key`'s tree at build/ (keeping the current one, with its files from the checkout and the env,
    in .torchbuild/trees/); return what happened, or None. All or nothing: a move that fails puts back
    every move before it and raises."""
    build = checkout / "build"
    stash = trees_dir(checkout)
    current = read_marker(build) if build.exists() else None
    if build.exists() and current and current.get("key") == key:
        return None
    stash.mkdir(parents=True, exist_ok=True)
    message = []
    moves = outputs.Moves()
    empty = build.is_dir() and not any(build.iterdir())  # nothing of anyone's: used as it is (a link to a disk)
    if empty and not build.is_symlink() and (stash / key).exists():
        build.rmdir()
    try:
        if (build.exists() or build.is_symlink()) and not (empty and not (stash / key).exists()):
            old = str(current["key"]) if current else f"{FOREIGN}{time.strftime('%Y%m%d-%H%M%S')}"
            target = stash / old
            while not current and (target.exists() or target.is_symlink()):  # two in one second: never onto another
                target = stash / f"{old}-{time.time_ns() % 10 ** 6}"
            if target.exists() and current:
                shutil.rmtree(target)
            moved = outputs.stash(checkout, build, recorded_outputs(current), moves) if current else 0
            prefix = env_prefix(current)
            from_env = outputs.stash_env(build, prefix, checkout, env_recorded(current), moves) \
                if current and prefix else 0
            moves.move(build, target)
            outputs.tidy(checkout, recorded_outputs(current))
            message.append(f"kept the {old} tree in {target}" + (f" with its {moved} file(s) from the checkout"
                                                                  if moved else "")
                           + (f" and its {from_env} file(s) from the env" if from_env else "") if current else
                           f"build/ was not made by torchbuild: moved it, untouched, to {target} (to bring it "
                           f"back: inv clean && mv {target} {build})")
        if (stash / key).exists() and read_marker(stash / key):
            moves.move(stash / key, build)
            restored = read_marker(build)
            moved, why = outputs.restore(checkout, build, moves)
            prefix = env_prefix(restored)
            to_env, env_why = outputs.restore_env(build, prefix, checkout, moves) if prefix else (0, None)
            message.append(f"restored the {key} tree" + (f" and its {moved} file(s) in the checkout" if moved else "")
                           + (f" and its {to_env} in the env" if to_env else "")
                           + "".join(f" (its files were not put back: {w}; the build goes the whole way)"
                                     for w in (why, env_why) if w))
        else:
            message.append(f"new tree for {key}")
    except BaseException:
        moves.undo()
        raise
    return "; ".join(message)


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


def build_lock(checkout: Path) -> contextlib.AbstractContextManager[None]:
    """One build (or clean, or patching) per checkout at a time; the second waits and says so."""
    return checkout_lock(checkout, f"building in {checkout}", f"another build is running in {checkout}")


def write_marker(build: Path, key: str, configure: Mapping[str, str], done: str | None,
                 remedies: Mapping[str, str] | None = None, wheel: Path | None = None,
                 files: Mapping[str, object] | None = None, worktree: Mapping[str, object] | None = None,
                 env_files: Mapping[str, object] | None = None, env: Path | None = None,
                 trees: list[str] | None = None) -> None:
    """Record which configuration a tree holds, how it was configured (a secret's value as a digest),
    its last complete inputs, the remedies (known-failure fixes) applied to it, which its later builds
    keep, the wheel it made, its files in the checkout (outputs.py), the working tree's changed files
    as the last complete build began (shortcut.py), the files its editable install put into the env
    (scikit-build-core: the compiled outputs live there), relative to that env, and its CMake trees
    outside build/. Written to a temporary file first: a marker is whole or absent."""
    data = {"key": key, "configure": kept_values(configure), "done": done, "remedies": dict(remedies or {}),
            "wheel": wheel_id(wheel) if wheel else None, "outputs": dict(files or {}),
            "worktree": dict(worktree) if worktree is not None else None,
            "env_files": dict(env_files) if env_files is not None else None,
            "env_prefix": str(env) if env is not None and env_files is not None else None,
            "trees": list(trees or [])}
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


def outside_trees(marker: Mapping[str, object] | None) -> list[str]:
    """The configuration's CMake trees in the checkout outside build/, as its marker records them."""
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


def remove_tree(checkout: Path, key: str) -> int:
    """Remove `key`'s tree (build/ or kept) and its files in the checkout; the bytes freed."""
    return sum(size for _what, size, _files in clean(checkout, key=key, locked=False, missing_ok=True)[0])


def tree_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, f)).st_size
    return total


def remove_tree_folder(tree: Path) -> None:
    """Delete a tree torchbuild made; through a link (build/ put on another disk), what is in the folder
    it points to, which stays, with the link."""
    if tree.is_symlink():
        for entry in list(tree.resolve().iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    else:
        shutil.rmtree(tree)


def clean(checkout: Path, all_trees: bool = False, key: str | None = None, dry_run: bool = False,
          locked: bool = True, missing_ok: bool = False
          ) -> tuple[list[tuple[str, int, list[str]]], list[Path]]:
    """Remove build trees torchbuild made (never sources, never a tree without a valid marker): the
    current one, `key`'s, or all (`dry_run`: only say which). Returns ((what, bytes, the checkout's files
    removed with it) for each tree, the trees kept as not torchbuild's)."""
    if key is not None and (not KEY_RE.fullmatch(key) or ".." in key):
        raise TorchbuildError(f"--config '{key}' is not a configuration name (like py3.12-cpu-release)",
                              "run `inv clean --all`, or pass a name from .torchbuild/trees/")
    build = checkout / "build"
    trees = [build] if build.is_dir() else []
    trees += sorted(p for p in trees_dir(checkout).glob("*") if p.is_dir() and not p.is_symlink())
    removed, kept = [], []
    with build_lock(checkout) if locked else contextlib.nullcontext():
        for tree in trees:
            marker = read_marker(tree)
            name = str(marker["key"]) if marker else tree.name
            wanted = all_trees or (name == key if key else tree == build)
            if not wanted:
                continue
            if marker is None:
                kept.append(tree)
                continue
            size = tree_size(tree)
            files = sorted(recorded_outputs(marker)) if tree == build else []  # the checkout holds them now
            if not dry_run:
                files = outputs.remove(checkout, recorded_outputs(marker)) if tree == build else []
                remove_tree_folder(tree)
            removed.append((f"{name} ({tree})", size, files))
    if key and not removed and not missing_ok:
        known = sorted(str(m["key"]) for tree in trees if (m := read_marker(tree)))
        raise TorchbuildError(f"no build tree for configuration '{key}'", f"known: {', '.join(known) or 'none'}")
    return removed, kept
