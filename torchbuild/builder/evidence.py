"""Evidence, not clocks: what a build read that neither git nor ninja's clock can vouch for, kept by content.

ninja rebuilds an output when one of its inputs is newer, and git says which tracked files changed. Neither
sees a file rewritten with an older time (CMake's install gives each installed header its source's mtime, to
the second: the torch an extension builds against; `cp -a`, `tar x`, a package's headers), nor an edit git is
told not to look at (an ignored build-time clone such as third_party/eigen, an assume-unchanged or
skip-worktree bit). So after each build every input its trees' deps logs name that git does not vouch for
(outside the checkout, ignored, or hidden by an index bit) is recorded by its identity and content digest.
A check stats each and digests only the ones whose identity moved (ccache's direct mode); one whose content
differs makes the outputs that read it stale, whatever the clock says. A file's identity is what git's index
keeps: size, mtime, ctime, inode and device. `cp -p`, `touch -r`, `rsync -t`, `tar x` and a Nix store (every
mtime 1) give a rewritten file its old size and mtime, never its old ctime and inode; and an entry whose ctime
falls within a second of the record is racy (a rewrite in the same clock tick moves nothing): its content
decides every time.

Paths inside the checkout are kept relative to it, others absolute; nothing here writes or removes a file
it names: they are read, never owned.
"""

from __future__ import annotations

import hashlib
import os
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISDIR
from typing import Iterable, Iterator, Mapping, Sequence

from ..run import run

DEPS_LOG = ".ninja_deps"
DEPS_HEADER = b"# ninjadeps\n"


Ident = tuple[int, int, int, int, int]  # size, mtime_ns, ctime_ns, inode, device: a file as git's index keeps it
Entry = tuple[int, int, str, int, int, int]  # size, mtime_ns, sha256, ctime_ns, inode, device
RACY_NS = 1_000_000_000  # an entry changed this close to its record may change again unseen by the clock


@dataclass(frozen=True)
class Evidence:
    """Files by path: (size, mtime_ns, sha256 of the content, ctime_ns, inode, device) as the last build's end
    found them, and when (`at`, ns); how far each tree's deps log was read then (its inode and size: ninja only
    appends to it until it rewrites it whole), so the next build reads only what was appended."""

    files: Mapping[str, Entry] = field(default_factory=dict)
    logs: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    at: int = 0

    def known(self, name: str, now: Ident | None) -> str | None:
        """The recorded digest of `name` where its identity `now` is the recorded one and was not racy; None:
        only its content can say."""
        was = self.files.get(name)
        if was is None or now is None or len(was) != 6 or (was[0], was[1], was[3], was[4], was[5]) != now \
                or was[3] >= self.at - RACY_NS:
            return None
        return was[2]

    def changed(self, checkout: Path) -> list[str]:
        """The files whose content is not what was recorded (a missing one counts): stat first, digest only
        what moved."""
        out, root = [], str(checkout)
        for name, entry in self.files.items():
            path = os.path.join(root, name)  # an absolute name stays itself
            now = stat(path)
            if self.known(name, now) is None and (now is None or content(path) != entry[2]):
                out.append(name)
        return out

    def now(self, checkout: Path) -> list[tuple[str, str | None]]:
        """Each file's content digest now (None: gone), the recorded one where its identity did not move."""
        out = []
        for name in sorted(self.files):
            path = os.path.join(str(checkout), name)
            st = stat(path)
            out.append((name, None if st is None else self.known(name, st) or content(path)))
        return out

    def as_record(self) -> dict[str, object]:
        return {"files": {name: list(entry) for name, entry in sorted(self.files.items())},
                "logs": {name: list(entry) for name, entry in sorted(self.logs.items())}, "at": self.at}


def from_record(data: object) -> Evidence:
    """Evidence as a record keeps it (anything malformed is left out: a missing entry only costs a digest, a
    missing log offset a whole read)."""
    if not isinstance(data, dict):
        return Evidence()
    files, logs, at = data.get("files"), data.get("logs"), data.get("at")
    kept: dict[str, Entry] = {
        name: (entry[0], entry[1], entry[2], *(entry[3:] if len(entry) == 6 else (-1, -1, -1)))
        for name, entry in (files if isinstance(files, dict) else {}).items()
        if isinstance(name, str) and name and "\0" not in name and "/../" not in f"/{name}/"
        and isinstance(entry, list) and len(entry) in (3, 6) and isinstance(entry[2], str)
        and all(type(x) is int for i, x in enumerate(entry) if i != 2)}  # 3: an older record's, no identity
    read = {name: (entry[0], entry[1]) for name, entry in (logs if isinstance(logs, dict) else {}).items()
            if isinstance(name, str) and isinstance(entry, list) and len(entry) == 2
            and all(type(x) is int for x in entry)}
    return Evidence(kept, read, at if type(at) is int else 0)


def stat(path: Path | str) -> Ident | None:
    """A file's identity (None: missing, or a folder)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return None if S_ISDIR(st.st_mode) else (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def content(path: Path | str) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


class Paths:
    """The paths a deps log names, by id, decoded when asked (PyTorch's names some 26,000; a loop's build
    needs the few its new records read)."""

    def __init__(self, data: bytes, spans: list[tuple[int, int]]) -> None:
        self.data, self.spans = data, spans

    def __len__(self) -> int:
        return len(self.spans)

    def __getitem__(self, index: int) -> str:
        first, last = self.spans[index]
        return self.data[first:last].rstrip(b"\0").decode(errors="surrogateescape")

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self.spans)))


@dataclass(frozen=True)
class DepsLog:
    """What a tree's deps log says: every path it names (relative to the tree, or absolute); for each output of
    the records read, its inputs' ids (the newest record wins); the ids of every input those records name; and
    the log's inode and size (where the next read starts)."""

    paths: Paths
    deps: dict[int, Sequence[int]]
    read: set[int]
    at: tuple[int, int]


def deps_log(tree: Path, since: tuple[int, int] | None = None, per_output: bool = True) -> DepsLog | None:
    """ninja's deps log of the tree (`.ninja_deps`, version 4), its records from `since` on (an earlier read's
    inode and size: all of them where the file was rewritten); None without a readable one. The log is a run of
    little-endian 32-bit words after its header: a path record is its padded name and a checksum, a deps record
    (high bit of its size set) the output's id, its mtime and the inputs' ids. Every record is walked (paths
    are numbered by their order); only the deps records read are unpacked (PyTorch's log holds millions of
    ids: a loop's build appends a handful)."""
    try:
        with open(tree / DEPS_LOG, "rb") as fh:
            data, inode = fh.read(), os.fstat(fh.fileno()).st_ino
    except OSError:
        return None
    if not data.startswith(DEPS_HEADER) or len(data) % 4 or int.from_bytes(data[12:16], "little") != 4:
        return None
    start = since[1] if since and since[0] == inode and since[1] <= len(data) else 0
    words = array("I")
    words.frombytes(data[16:])
    spans: list[tuple[int, int]] = []
    deps: dict[int, Sequence[int]] = {}
    read: set[int] = set()
    pos, end = 0, len(words)
    while pos < end:
        size = words[pos]
        count, pos = (size & 0x7FFFFFFF) // 4, pos + 1
        if pos + count > end:
            break  # a record cut short by a killed build: ninja drops it too
        if not size & 0x80000000:
            spans.append((16 + pos * 4, 12 + (pos + count) * 4))
        elif 12 + pos * 4 >= start:
            inputs = words[pos + 3:pos + count]
            read.update(inputs)
            if per_output:
                deps[words[pos]] = inputs
        pos += count
    return DepsLog(Paths(data, spans), deps, read, (inode, len(data)))


def inputs_of(trees: Iterable[Path], since: Mapping[str, tuple[int, int]] | None = None
              ) -> tuple[set[str], dict[str, tuple[int, int]]]:
    """Every input the trees' deps logs name (headers and sources the compiler read), as absolute, normal paths
    (string work only: PyTorch's log names some 20,000), of the records after `since` (by tree); and where each
    log was read up to."""
    found: set[str] = set()
    at: dict[str, tuple[int, int]] = {}
    for tree in trees:
        base = str(tree)
        log = deps_log(tree, (since or {}).get(base), per_output=False)
        if log is None:
            continue
        at[base] = log.at
        found.update(os.path.normpath(os.path.join(base, log.paths[i])) for i in log.read if i < len(log.paths))
    return found, at


def prefixes(*folders: Path) -> tuple[str, ...]:
    """The folders as path prefixes, as written and resolved (a checkout under a linked /tmp is both)."""
    return tuple(dict.fromkeys(p + os.sep for f in folders for p in (os.path.normpath(str(f)), str(f.resolve()))))


def unseen(checkout: Path, inside: Iterable[str]) -> set[str]:
    """The names (relative to the checkout) that git does not vouch for: ignored, or hidden by an index bit."""
    names = sorted(inside)
    if not names or not (checkout / ".git").exists():
        return set()
    ignored = run(["git", "check-ignore", "-z", "--stdin"], cwd=checkout, capture=True, echo=False,
                  check=False, input="\0".join(names)).stdout.split("\0")
    return {*ignored, *index_hidden(checkout)} & set(names)


def index_hidden(checkout: Path) -> set[str]:
    """The tracked files git is told not to look at: assume-unchanged (`git ls-files -v` tags them in lower
    case) and skip-worktree (`S`)."""
    listed = run(["git", "ls-files", "-v", "-z"], cwd=checkout, capture=True, echo=False, check=False).stdout
    return {entry[2:] for entry in listed.split("\0") if len(entry) > 2 and (entry[0].islower() or entry[0] == "S")}


def collect(checkout: Path, trees: Iterable[Path], previous: Evidence, outputs: Iterable[str] = ()) -> Evidence:
    """The evidence of the build that just ended: each input of its trees outside the checkout, or inside it
    where git does not vouch for it, by stat and digest (a digest reused where the stat did not move); inputs
    in the trees themselves and the configuration's own files are the build's, left out. Only what the deps
    logs gained since the last build is read; what was kept before is kept, stated again."""
    trees = list(trees)
    skip, roots, own = prefixes(*trees), prefixes(checkout), set(outputs)
    found, logs = inputs_of(trees, previous.logs)
    outside, inside = set(), set()
    for path in found:
        if path.startswith(skip):
            continue
        root = next((r for r in roots if path.startswith(r)), None)
        if root is None:
            outside.add(path)
        elif path[len(root):] not in own:
            inside.add(path[len(root):])
    kept: dict[str, Entry] = {}
    base, at = str(checkout), time.time_ns()
    for name in sorted({*previous.files, *outside, *unseen(checkout, inside)}):
        path = os.path.join(base, name)  # an absolute name stays itself
        now = stat(path)
        if now is None:
            continue
        sha = previous.known(name, now) or content(path)
        if sha is not None:
            kept[name] = (now[0], now[1], sha, now[2], now[3], now[4])
    return Evidence(kept, logs, at)


def stale_outputs(checkout: Path, trees: Iterable[Path], evidence: Evidence) -> tuple[Path, ...]:
    """The outputs of the trees (that still exist, inside the tree) that read a file of the evidence whose
    content changed: ninja's clock may call them current."""
    changed = evidence.changed(checkout) if evidence.files else []
    if not changed:
        return ()
    wanted = {os.path.normpath(os.path.join(str(checkout), name)) for name in changed}
    stale = []
    for tree in trees:
        log = deps_log(tree)
        if log is None:
            continue
        base, paths = str(tree), log.paths
        hit = {i for i, p in enumerate(paths) if os.path.normpath(os.path.join(base, p)) in wanted}
        for out, inputs in log.deps.items():
            output = os.path.normpath(os.path.join(base, paths[out])) if 0 <= out < len(paths) else ""
            if output.startswith(base + os.sep) and hit.intersection(inputs) and os.path.exists(output):
                stale.append(Path(output))  # an output in the tree: ninja's own, the only kind removed
    return tuple(stale)
