"""Evidence, not clocks: what a build read that neither git nor ninja's clock can vouch for, kept by content.

ninja rebuilds an output when one of its inputs is newer, and git says which tracked files changed. Neither
sees a file rewritten with an older time (CMake's install gives each installed header its source's mtime, to
the second: the torch an extension builds against; `cp -a`, `tar x`, a package's headers), nor an edit git is
told not to look at (an ignored build-time clone such as third_party/eigen, an assume-unchanged or
skip-worktree bit). So after each build every input its trees' deps logs name that git does not vouch for
(outside the checkout, ignored, or hidden by an index bit) is recorded by size, mtime and content digest.
A check stats each and digests only the ones whose stat moved (ccache's direct mode); one whose content
differs makes the outputs that read it stale, whatever the clock says.

Paths inside the checkout are kept relative to it, others absolute; nothing here writes or removes a file
it names: they are read, never owned.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from ..run import run

DEPS_LOG = ".ninja_deps"
DEPS_HEADER = b"# ninjadeps\n"


@dataclass(frozen=True)
class Evidence:
    """Files by path: (size, mtime_ns, sha256 of the content) as the last build's end found them."""

    files: Mapping[str, tuple[int, int, str]] = field(default_factory=dict)

    def changed(self, checkout: Path) -> list[str]:
        """The files whose content is not what was recorded (a missing one counts): stat first, digest only
        what moved."""
        out = []
        for name, (size, mtime, sha) in self.files.items():
            now = stat(checkout / name)
            if now != (size, mtime) and (now is None or content(checkout / name) != sha):
                out.append(name)
        return out

    def now(self, checkout: Path) -> list[tuple[str, str | None]]:
        """Each file's content digest now (None: gone), the recorded one where its stat did not move."""
        out = []
        for name, (size, mtime, sha) in sorted(self.files.items()):
            st = stat(checkout / name)
            out.append((name, sha if st == (size, mtime) else None if st is None else content(checkout / name)))
        return out

    def as_record(self) -> dict[str, list[object]]:
        return {name: list(entry) for name, entry in sorted(self.files.items())}


def from_record(data: object) -> Evidence:
    """Evidence as a record keeps it (anything malformed is left out: a missing entry only costs a digest)."""
    if not isinstance(data, dict):
        return Evidence()
    kept = {}
    for name, entry in data.items():
        if isinstance(name, str) and name and "\0" not in name and ".." not in Path(name).parts and \
                isinstance(entry, list) and len(entry) == 3 and type(entry[0]) is int and type(entry[1]) is int \
                and isinstance(entry[2], str):
            kept[name] = (entry[0], entry[1], entry[2])
    return Evidence(kept)


def stat(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns) if not os.path.isdir(path) else None


def content(path: Path) -> str | None:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def deps_log(tree: Path) -> tuple[list[str], dict[int, list[int]]] | None:
    """ninja's deps log of the tree (`.ninja_deps`, version 4): every path it names (relative to the tree, or
    absolute) and, for each output's id, its inputs' ids (the newest record wins); None without a readable
    one. The log is a run of little-endian 32-bit words after its header: a path record is its padded name
    and a checksum, a deps record (high bit of its size set) the output's id, its mtime and the inputs' ids."""
    try:
        data = (tree / DEPS_LOG).read_bytes()
    except OSError:
        return None
    if not data.startswith(DEPS_HEADER) or len(data) % 4 or int.from_bytes(data[12:16], "little") != 4:
        return None
    words = array("I")
    words.frombytes(data[16:])
    if words.itemsize != 4:
        return None
    paths: list[str] = []
    deps: dict[int, list[int]] = {}
    pos, end = 0, len(words)
    while pos < end:
        size = words[pos]
        count, pos = (size & 0x7FFFFFFF) // 4, pos + 1
        if pos + count > end:
            break  # a record cut short by a killed build: ninja drops it too
        if size & 0x80000000:
            deps[words[pos]] = list(words[pos + 3:pos + count])
        else:
            start = 16 + pos * 4
            paths.append(data[start:start + count * 4 - 4].rstrip(b"\0").decode(errors="surrogateescape"))
        pos += count
    return paths, deps


def inputs_of(trees: Iterable[Path]) -> set[Path]:
    """Every input the trees' deps logs name (headers and sources the compiler read), as absolute paths."""
    found: set[Path] = set()
    for tree in trees:
        log = deps_log(tree)
        if log is None:
            continue
        paths, deps = log
        ids = {i for inputs in deps.values() for i in inputs if 0 <= i < len(paths)}
        found |= {Path(os.path.normpath(tree / paths[i])) for i in ids}
    return found


def unseen(checkout: Path, candidates: Iterable[Path]) -> set[Path]:
    """The candidates inside the checkout that git does not vouch for: ignored, or hidden by an index bit."""
    root = checkout.resolve()
    inside = sorted(p.relative_to(root).as_posix() for p in candidates if p.is_relative_to(root))
    if not inside or not (checkout / ".git").exists():
        return set()
    ignored = run(["git", "check-ignore", "-z", "--stdin"], cwd=checkout, capture=True, echo=False,
                  check=False, input="\0".join(inside)).stdout.split("\0")
    hidden = index_hidden(checkout)
    return {root / name for name in {*ignored, *hidden} & set(inside)}


def index_hidden(checkout: Path) -> set[str]:
    """The tracked files git is told not to look at: assume-unchanged (`git ls-files -v` tags them in lower
    case) and skip-worktree (`S`)."""
    listed = run(["git", "ls-files", "-v", "-z"], cwd=checkout, capture=True, echo=False, check=False).stdout
    return {entry[2:] for entry in listed.split("\0") if len(entry) > 2 and (entry[0].islower() or entry[0] == "S")}


def collect(checkout: Path, trees: Iterable[Path], previous: Evidence, outputs: Iterable[str] = ()) -> Evidence:
    """The evidence of the build that just ended: each input of its trees outside the checkout, or inside it
    where git does not vouch for it, by stat and digest (a digest reused where the stat did not move); inputs
    in the trees themselves and the configuration's own files are the build's, left out."""
    trees, root = list(trees), checkout.resolve()
    found = {p for p in inputs_of(trees) if not any(p.is_relative_to(t.resolve()) for t in trees)}
    own = {root / name for name in outputs}
    outside = {p for p in found if not p.is_relative_to(root)}
    kept: dict[str, tuple[int, int, str]] = {}
    for path in sorted(outside | unseen(checkout, found - outside - own)):
        name = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        now, was = stat(path), previous.files.get(name)
        if now is None:
            continue
        sha = was[2] if was and (was[0], was[1]) == now else content(path)
        if sha is not None:
            kept[name] = (now[0], now[1], sha)
    return Evidence(kept)


def stale_outputs(checkout: Path, trees: Iterable[Path], evidence: Evidence) -> tuple[Path, ...]:
    """The outputs of the trees (that still exist) that read a file of the evidence whose content changed:
    ninja's clock may call them current."""
    changed = evidence.changed(checkout) if evidence.files else []
    if not changed:
        return ()
    root = checkout.resolve()
    wanted = {Path(os.path.normpath(root / name)) for name in changed}
    stale = []
    for tree in trees:
        log = deps_log(tree)
        if log is None:
            continue
        paths, deps = log
        for out, inputs in deps.items():
            output = Path(os.path.normpath(tree / paths[out])) if 0 <= out < len(paths) else None
            if output is not None and output.exists() and any(
                    0 <= i < len(paths) and Path(os.path.normpath(tree / paths[i])) in wanted for i in inputs):
                stale.append(output)
    return tuple(stale)
