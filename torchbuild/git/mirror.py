"""The reference cache: a bare mirror of every repo cloned, one per url, under a file lock.

Clones are pointed at it with per-url insteadOf rules in a generated config file
(`-c include.path=...`), so the checkout's remotes keep their real urls and borrow nothing
from the cache (deleting the cache breaks no checkout).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Mapping

from ..locks import locked
from ..run import Result
from .core import Git, cacheable, is_local


def mirror_name(url: str) -> str:
    """A readable, unique directory name for the bare mirror of `url`."""
    stem = url.rstrip("/")
    stem = stem[:-4] if stem.endswith(".git") else stem
    tail = "_".join(re.split(r"[/:]+", stem)[-2:])
    tail = re.sub(r"[^A-Za-z0-9._-]+", "_", tail).strip("._") or "repo"
    return f"{tail}-{hashlib.sha1(url.encode()).hexdigest()[:10]}.git"



class MirrorCache:
    """Bare mirrors of every repo cloned, one per url, updated under a file lock."""

    def __init__(self, git: Git, root: Path) -> None:
        self.git = git
        self.root = root

    def path(self, url: str) -> Path:
        return self.root / mirror_name(url)

    def has(self, url: str, sha: str) -> bool:
        mirror = self.path(url)
        if not mirror.is_dir():
            return False
        return self.git.query(["cat-file", "-e", f"{sha}^{{commit}}"], mirror, check=False).returncode == 0

    def ensure(self, url: str, need: str | None = None) -> Path | None:
        """Make the mirror hold `need` (or be fresh when None); None if it cannot (use the url directly)."""
        if not cacheable(url):
            return None
        if need and self.has(url, need):
            return self.path(url)
        if self.git.options.dry_run:
            self.git.act(["clone", "--mirror", url, str(self.path(url))])
            return self.path(url)
        self.root.mkdir(parents=True, exist_ok=True)
        mirror = self.path(url)
        with locked(mirror.with_suffix(".lock"), f"updating the mirror of {url}"):
            if mirror.is_dir() and (mirror / "HEAD").exists():
                self.git.network("fetch", url, lambda: self.git.act(
                    ["fetch", "--prune", "--quiet", "origin"], mirror, echo=False))
            else:
                partial = mirror.with_suffix(".partial")
                if partial.exists():
                    shutil.rmtree(partial)
                self.git.network("mirror", url, lambda: self._clone(url, partial))
                os.replace(partial, mirror)
        if need and not self.has(url, need):
            return None
        return mirror

    def _clone(self, url: str, dest: Path) -> Result:
        if dest.exists():
            shutil.rmtree(dest)
        return self.git.act(["clone", "--mirror", "--quiet", url, str(dest)], allow_file=is_local(url), echo=False)

    @contextlib.contextmanager
    def rules(self, urls: Mapping[str, Path]) -> Iterator[Path | None]:
        """A temporary git config file pointing each url at its mirror."""
        if not urls:
            yield None
            return
        if self.git.options.dry_run:
            yield self.root / "rewrites.cfg"
            return
        self.root.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix="rewrites-", suffix=".cfg", dir=self.root)
        with os.fdopen(fd, "w") as fh:
            for url, mirror in sorted(urls.items()):
                fh.write(f'[url "{mirror}"]\n\tinsteadOf = {url}\n')
        try:
            yield Path(name)
        finally:
            os.unlink(name)

