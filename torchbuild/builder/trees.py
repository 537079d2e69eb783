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
    try:
        data = json.loads((tree / MARKER).read_text())
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def trees_dir(checkout: Path) -> Path:
    return checkout / STATE / "trees"


def activate_tree(checkout: Path, key: str) -> str | None:
    """Put `key`'s tree at build/ (stashing the current one); return what happened, or None."""
    build = checkout / "build"
    stash = trees_dir(checkout)
    current = read_marker(build) if build.exists() else None
    if build.exists() and current and current.get("key") == key:
        return None
    stash.mkdir(parents=True, exist_ok=True)
    message = []
    if build.exists():
        old = str(current["key"]) if current else f"{FOREIGN}{time.strftime('%Y%m%d-%H%M%S')}"
        target = stash / old
        if target.exists() and current:
            shutil.rmtree(target)
        moved = outputs.stash(checkout, build, recorded_outputs(current)) if current else 0
        from_env = outputs.stash_env(build, env_recorded(current)) if current else 0
        os.replace(build, target)
        message.append(f"kept the {old} tree in {target}" + (f" with its {moved} file(s) from the checkout"
                                                              if moved else "")
                       + (f" and its {from_env} from the env" if from_env else "") if current else
                       f"build/ was not made by torchbuild: moved it, untouched, to {target} (to bring it back: "
                       f"inv clean && mv {target} {build})")
    if (stash / key).exists():
        os.replace(stash / key, build)
        moved, to_env = outputs.restore(checkout, build), outputs.restore_env(build)
        message.append(f"restored the {key} tree" + (f" and its {moved} file(s) in the checkout" if moved else "")
                       + (f" and its {to_env} in the env" if to_env else ""))
    else:
        message.append(f"new tree for {key}")
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
                 env_files: Mapping[str, object] | None = None) -> None:
    """Record which configuration a tree holds, how it was configured (a secret's value as a digest),
    its last complete inputs, the remedies (known-failure fixes) applied to it, which its later builds
    keep, the wheel it made, its files in the checkout (outputs.py), the working tree's changed files
    as the last complete build began (shortcut.py), and the files its editable install put into the env
    (scikit-build-core: the compiled outputs live there)."""
    data = {"key": key, "configure": kept_values(configure), "done": done, "remedies": dict(remedies or {}),
            "wheel": wheel_id(wheel) if wheel else None, "outputs": dict(files or {}),
            "worktree": dict(worktree) if worktree is not None else None,
            "env_files": dict(env_files) if env_files is not None else None}
    (build / MARKER).write_text(json.dumps(data, indent=2))


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
    freed = 0
    build = checkout / "build"
    marker = read_marker(build) if build.exists() else None
    if marker and marker.get("key") == key:
        outputs.remove(checkout, recorded_outputs(marker))
    for tree in ([build] if marker and marker.get("key") == key else []) + [trees_dir(checkout) / key]:
        if tree.exists():
            freed += tree_size(tree)
            shutil.rmtree(tree)
    return freed


def tree_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, f)).st_size
    return total


def clean(checkout: Path, all_trees: bool = False, key: str | None = None, dry_run: bool = False
          ) -> tuple[list[tuple[str, int]], list[Path]]:
    """Remove build trees torchbuild made (never sources, never a tree without its marker): the
    current one, `key`'s, or all (`dry_run`: only say which). Returns ((what, bytes) removed, foreign
    trees kept)."""
    if key is not None and (not KEY_RE.fullmatch(key) or ".." in key):
        raise TorchbuildError(f"--config '{key}' is not a configuration name (like py3.12-cpu-release)",
                              "run `inv clean --all`, or pass a name from .torchbuild/trees/")
    build = checkout / "build"
    trees = [build] if build.is_dir() else []
    trees += sorted(p for p in trees_dir(checkout).glob("*") if p.is_dir() and not p.is_symlink())
    removed, kept = [], []
    with build_lock(checkout):
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
            if tree == build and not dry_run:  # the checkout holds its files: they go with it
                outputs.remove(checkout, recorded_outputs(marker))
            if not dry_run:
                shutil.rmtree(tree)
            removed.append((f"{name} ({tree})", size))
    if key and not removed:
        known = sorted(str(m["key"]) for tree in trees if (m := read_marker(tree)))
        raise TorchbuildError(f"no build tree for configuration '{key}'", f"known: {', '.join(known) or 'none'}")
    return removed, kept
