"""The reference cache: a bare mirror of every repo cloned, one per url, under a file lock.

Clones are pointed at it with per-url insteadOf rules in a generated config file
(`-c include.path=...`, mode 0600, removed after use) naming the mirror as a file:// url, so git
copies objects through its pack protocol instead of hard-linking them: the checkout's remotes
keep their real urls and share nothing with the cache. A mirror stores its url without
credentials (they are passed on the command line when it is fetched). A mirror that fails a
clone is checked (`git fsck --connectivity-only`); a broken one is moved aside and made again
from the upstream, and the clone runs once more.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator, Mapping

from .. import console as _console
from ..console import CREDENTIALS
from ..errors import GitError
from ..locks import locked
from ..run import Result
from .core import Git, cacheable, is_local

CORRUPTION = re.compile(r"packfile|pack-[0-9a-f]+|truncated|inflate|bad object|missing (blob|tree|commit)|"
                        r"unable to read|did not send all necessary objects|corrupt|could not read", re.IGNORECASE)


def public_url(url: str) -> str:
    """`url` without its user:password part (what a mirror stores and is named after)."""
    return CREDENTIALS.sub(r"\1", url)


def mirror_name(url: str) -> str:
    """A readable, unique directory name for the bare mirror of `url`."""
    url = public_url(url)
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
        mirror = self.path(url)
        if self.git.options.dry_run:
            self.git.act(["clone", "--mirror", url, str(mirror)])
            return mirror
        partial = mirror.with_suffix(".partial")
        with locked(mirror.with_suffix(".lock"), f"updating the mirror of {url}"):
            for attempt in (1, 2):
                if mirror.is_dir() and not (mirror / "HEAD").exists():
                    self._move_aside(url, "it was left half-made")
                elif mirror.is_dir() and self.tips_missing(mirror):
                    self._move_aside(url, "objects its refs name are missing")
                if mirror.is_dir():
                    self.git.network("fetch", url, lambda: self.git.act(
                        ["fetch", "--prune", "--quiet", url, "+refs/*:refs/*"], mirror, echo=False,
                        allow_file=is_local(url)))
                else:
                    self.git.network("mirror", url, lambda: self._clone(url, partial))
                    self.git.query(["config", "remote.origin.url", public_url(url)], partial)
                    os.replace(partial, mirror)
                if attempt == 2 or not need or self.has(url, need) or self.sound(mirror):
                    break
                self._move_aside(url, "objects are missing")  # and make it again, still under the lock
        if need and not self.has(url, need):
            return None
        return mirror

    def _clone(self, url: str, dest: Path) -> Result:
        if dest.exists():
            shutil.rmtree(dest)
        return self.git.act(["clone", "--mirror", "--quiet", url, str(dest)], allow_file=is_local(url), echo=False)

    def tips_missing(self, mirror: Path) -> bool:
        """Whether a ref of the mirror names an object it does not hold (a lost pack): cheap, refs only."""
        tips = self.git.query(["for-each-ref", "--format=%(objectname)"], mirror, check=False).stdout
        res = self.git.query(["cat-file", "--batch-check"], mirror, check=False, input=tips)
        return res.returncode != 0 or " missing" in res.stdout

    def sound(self, mirror: Path) -> bool:
        """Whether every object the mirror's refs reach is there and readable."""
        return self.git.query(["fsck", "--connectivity-only", "--no-progress"], mirror, check=False).returncode == 0

    def _move_aside(self, url: str, why: str) -> None:
        mirror = self.path(url)
        aside = mirror.with_name(f"{mirror.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        _console.get().warn(f"the mirror cache of {url} is broken ({why}): moved it to {aside}; "
                            "making it again from the upstream")
        os.replace(mirror, aside)

    def use(self, wanted: Mapping[str, str | None], jobs: int = 1) -> dict[str, Path]:
        """Mirrors that hold what each url needs, made or fetched `jobs` at a time."""
        mirrors: dict[str, Path] = {}
        con = _console.get()
        if not self.git.options.dry_run:
            self.root.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for done, (url, mirror) in enumerate(pool.map(lambda item: (item[0], self.ensure(*item)),
                                                           wanted.items()), 1):
                if len(wanted) > 1:
                    con.progress(f"mirrors {done}/{len(wanted)}")
                if mirror is not None:
                    mirrors[url] = mirror
        return mirrors

    def repair(self, mirrors: Mapping[str, Path], output: str) -> bool:
        """After a failed clone: move aside each broken mirror (fsck, or git's own corruption error
        naming it). Returns whether any was."""
        broken = [url for url, m in mirrors.items() if not self.sound(m)]
        if not broken and CORRUPTION.search(output):
            broken = [url for url, m in mirrors.items() if m.name in output or len(mirrors) == 1]
        for url in broken:
            with locked(self.path(url).with_suffix(".lock"), f"repairing the mirror of {url}"):
                if self.path(url).is_dir():
                    self._move_aside(url, f"a clone from it failed: {output.strip().splitlines()[-1:]}")
        return bool(broken)

    @contextlib.contextmanager
    def rules(self, urls: Mapping[str, Path]) -> Iterator[Path | None]:
        """A temporary git config file (0600) pointing each url at its mirror."""
        if not urls:
            yield None
            return
        if self.git.options.dry_run:
            yield self.root / "rewrites.cfg"
            return
        fd, name = tempfile.mkstemp(prefix="rewrites-", suffix=".cfg", dir=self.root)
        with os.fdopen(fd, "w") as fh:
            for url, mirror in sorted(urls.items()):
                fh.write(f'[url "{mirror.as_uri()}"]\n\tinsteadOf = {url}\n')
        try:
            yield Path(name)
        finally:
            os.unlink(name)


def through(git: Git, cache: MirrorCache | None, wanted: Mapping[str, str | None], what: str, url: str,
            step: Callable[[Path | None], Result]) -> Result:
    """Run a network `step` (given the rules file, or None) with retries, through the mirrors of
    `wanted` (url -> commit it needs, or None); a broken mirror is repaired and the step runs once more."""
    if cache is None or not wanted:
        return git.network(what, url, lambda: step(None))
    for attempt in (1, 2):
        mirrors = cache.use(wanted, git.options.jobs)
        try:
            with cache.rules(mirrors) as include:
                return git.network(what, url, lambda: step(include))
        except GitError as exc:
            if attempt == 2 or not cache.repair(mirrors, exc.output):
                raise
    raise AssertionError("unreachable")  # pragma: no cover
