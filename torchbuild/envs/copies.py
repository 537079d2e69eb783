"""A managed env made as a copy of one that holds the same requirements (its stamp says so), less what was
installed into it from local folders: a copy in a fraction of a second where pip takes seconds (minutes with
MKL), for an env that must be another one's twin but never touch it (a bisection's). The files the original
holds from the store (MKL, 1.3 GB: hard links to the store's files) are linked from the store as into any env,
not copied.

What a copy leaves out: every distribution installed from a local folder (direct_url.json's `dir_info`: the
user's editable torch and what was built against it), by the files its RECORD names; the env's pin and its
pip.conf (written anew); its record (written last, naming the copy). What a copy rewrites: the scripts in
bin/ and pyvenv.cfg that name the original's folder. An env holding an egg-link or easy-install.pth (a
`setup.py develop` path entry, which no RECORD lists) or made by conda is not copied.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from dataclasses import asdict, replace
from pathlib import Path

from ..config import Config
from ..locks import locked
from ..wheels import record_paths
from . import STAMP, Env, default_name, envs_dir, expected_stamp, private, read, shared
from .requirements import pip_conf

CONSTRAINTS = "torchbuild-constraints.txt"  # in a managed env: its torch, pinned (builder/against.py)


def local_installs(prefix: Path) -> list[Path] | None:
    """What every distribution installed into the env from a URL, a local file or folder (PEP 610's
    direct_url.json: the user's torch, a wheel of it, what was built against it) put there: its dist-info,
    the files its RECORD names, and whole the top-level folders of site-packages no other distribution
    records files in (what a build installed beside pip's record, and the bytecode, go with them: a leftover
    `torch/` folder would import as a namespace package); None when the env holds a path entry no RECORD
    names (egg-link, easy-install.pth)."""
    found: list[Path] = []
    root = prefix.resolve()
    for site in prefix.glob("lib/python*/site-packages"):
        if any(site.glob("*.egg-link")) or (site / "easy-install.pth").exists():
            return None
        site = site.resolve()
        tops: dict[bool, set[str]] = {True: set(), False: set()}
        for info in site.glob("*.dist-info"):
            local = (info / "direct_url.json").is_file()
            for name in record_paths(info / "RECORD"):
                path = Path(os.path.normpath(site / name))
                if not path.is_relative_to(root):
                    continue
                if path.is_relative_to(site) and path != site and path.relative_to(site).parts[0] != "__pycache__":
                    tops[local].add(path.relative_to(site).parts[0])
                if local:
                    found.append(path)
            if local:
                found.append(info)
        found += [site / top for top in tops[True] - tops[False] if (site / top).is_dir()]
        found += [cached for path in list(found) if path.suffix == ".py"
                  for cached in path.parent.glob(f"__pycache__/{path.stem}.*.pyc")]
    return found


def copy_env(cfg: Config, source: Env, prefix: Path) -> Env | None:
    """`source` copied to `prefix` less its local installs, its scripts pointing at the copy; None (nothing left
    at `prefix`) where it cannot be copied or changed while it was."""
    if source.backend not in ("venv", "uv") or prefix.exists():
        return None
    left_out = local_installs(source.prefix)
    if left_out is None:
        return None
    root = source.prefix.resolve()
    skip = {str(p) for p in [*left_out, *(root / name for name in (STAMP, CONSTRAINTS, "pip.conf"))]}

    def ignored(folder: str, names: list[str]) -> set[str]:  # copytree's folders, under the resolved root
        return {n for n in names if os.path.join(folder, n) in skip}

    stored = shared.inodes(cfg.cache_root / "store")

    def linked_or_copied(src: str, dst: str) -> object:  # the store's files linked as into any env, not copied
        st = os.lstat(src)
        if (st.st_dev, st.st_ino) in stored:
            with contextlib.suppress(OSError):
                os.link(src, dst)
                return dst
        return shutil.copy2(src, dst)

    try:
        shutil.copytree(root, prefix, symlinks=True, ignore=ignored, copy_function=linked_or_copied)
        stray = local_installs(prefix)  # installed into the original while it was copied: not the copy's
        if stray is None:
            raise OSError("a path entry appeared while it was copied")
        for path in stray:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        for path in [*prefix.glob("bin/*"), prefix / "pyvenv.cfg"]:
            for old in {source.prefix, root}:  # as the scripts were written, and resolved
                retarget(path, old, prefix)
        private(prefix / "pip.conf", pip_conf(cfg))
        if read(source.prefix) != source:  # changed while it was copied: not a twin
            raise OSError("changed while copied")
        made = replace(source, prefix=prefix, python=prefix / "bin" / "python")
        record = json.loads((source.prefix / STAMP).read_text())
        (prefix / STAMP).write_text(json.dumps({**record, **asdict(made), "prefix": str(prefix),
                                                "python": str(made.python)}, indent=2) + "\n")
    except (OSError, ValueError):
        shutil.rmtree(prefix, ignore_errors=True)
        return None
    return made


def retarget(path: Path, old: Path, new: Path) -> None:
    """A script or config naming the original env's folder names the copy's (a binary is left as it is)."""
    if path.is_symlink() or not path.is_file() or path.stat().st_size > 1 << 16:
        return
    data = path.read_bytes()
    if b"\0" in data or str(old).encode() not in data:
        return
    text = re.sub(re.escape(str(old)) + r"(?=[/'\"\s:]|$)", str(new).replace("\\", r"\\"), data.decode(), flags=re.M)
    path.write_text(text)


def twin(source_cfg: Config, cfg: Config, checkout: Path, version: str) -> Env | None:
    """`cfg`'s managed env for Python `version` made as a copy of `source_cfg`'s env of that name, where that
    one holds what `checkout` requires (the same stamp) and `cfg`'s is not made yet; None: not copied."""
    name = default_name(version, cfg.matrix.backend)
    source, prefix = read(envs_dir(source_cfg) / name), envs_dir(cfg) / name
    if source is None or prefix.exists() or not source.python.exists() or \
            source.stamp != expected_stamp(cfg, source.backend, source.version, checkout, None):
        return None
    prefix.parent.mkdir(parents=True, exist_ok=True)
    with locked(source.prefix.parent / f".{name}.lock", f"copying env {name}", f"env {name} is being made"), \
            locked(prefix.parent / f".{name}.lock", f"creating env {name} as a copy"):
        return copy_env(cfg, source, prefix)
