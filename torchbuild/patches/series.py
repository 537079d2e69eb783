"""The series file and the patches it names: pure parsing, loading and checking, patch-ids.

`patches/series` lists patch files in order, `#` comments allowed; `third_party/fbgemm: x.patch`
applies x.patch inside that submodule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import TorchbuildError
from ..git import PATCH_BASE_REF, Git

BRANCH = "torchbuild/patches"
BRANCH_REF = f"refs/heads/{BRANCH}"
BASE_REF = PATCH_BASE_REF
ORIGIN_REF = "refs/torchbuild/origin"  # symbolic: the branch HEAD was on before the series
REGENERATE = "replace it with a `git format-patch` file or a unified diff"
FALLBACK_IDENTITY = {"GIT_COMMITTER_NAME": "torchbuild", "GIT_COMMITTER_EMAIL": "torchbuild@localhost"}


class PatchError(TorchbuildError):
    """A patch or the series is wrong, or a patch does not apply."""


# ----------------------------------------------------------------------------- pure parsing


@dataclass(frozen=True)
class SeriesEntry:
    target: str  # "" for the checkout itself, else a submodule path inside it
    name: str  # file name inside the patches folder
    line: int


def parse_series(text: str, where: str = "series") -> list[SeriesEntry]:
    """Entries of a series file: `name` or `sub/path: name`, `#` comments, blank lines."""
    entries = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        hidden = sorted({f"U+{ord(c):04X}" for c in line if not c.isprintable()})
        if hidden:  # a byte-order mark, a zero-width space: a file name nobody can see is wrong
            raise PatchError(f"{where}:{number}: the line holds an invisible character ({', '.join(hidden)}): "
                             f"{line!r}", "retype the line (an editor saved a byte-order mark or a zero-width "
                             "space in it)")
        target, sep, name = line.rpartition(": ")
        name, target = (name.strip(), target.strip().rstrip("/")) if sep else (line, "")
        if not name or " " in name:
            raise PatchError(f"{where}:{number}: cannot read '{raw.strip()}'",
                             "write one patch file a line, or `sub/path: file.patch` for a submodule")
        if leaves(name):
            raise PatchError(f"{where}:{number}: '{name}' leaves the patches folder",
                             "name a patch file inside the patches folder (no '..', no absolute path)")
        if leaves(target):
            raise PatchError(f"{where}:{number}: '{target}' leaves the checkout",
                             "name a submodule path inside the checkout (no '..', no absolute path)")
        entries.append(SeriesEntry(target, name, number))
    return entries


def leaves(path: str) -> bool:
    """Whether a relative path from input climbs out of its folder (absolute, or a '..' part)."""
    return path.startswith(("/", "\\", "~")) or ".." in path.replace("\\", "/").split("/")


def with_git_headers(text: str) -> str:
    """A plain unified diff (`--- a/f`, `+++ b/f`, no `diff --git`) with the header git needs added."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    for i, line in enumerate(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        m = re.match(r"^--- (?:a/(\S+)|/dev/null)", line)
        n = re.match(r"^\+\+\+ (?:b/(\S+)|/dev/null)", nxt)
        git_header = any(ln.startswith("diff --git ") for ln in out[-4:])
        if m and n and not git_header and (m.group(1) or n.group(1)):
            name = m.group(1) or n.group(1)
            out.append(f"diff --git a/{name} b/{name}\n")
        out.append(line)
    return "".join(out)


def touched_files(text: str) -> list[str]:
    """Files a diff changes, from its `diff --git` / `---` / `+++` headers."""
    files: list[str] = []
    for line in text.splitlines():
        m = re.match(r"^diff --git a/(\S+) b/(\S+)", line) or re.match(r"^(?:---|\+\+\+) [ab]/(\S+)", line)
        if m:
            for name in m.groups():
                if name not in files:
                    files.append(name)
    return files


def is_mbox(text: str) -> bool:
    return text.startswith("From ") or bool(re.match(r"(?m)^Subject: ", text[:2000]))


def to_mbox(text: str, name: str) -> str:
    """A plain diff as a one-message mbox, so `git am` can commit it (subject from the file name)."""
    subject = re.sub(r"^\d+-", "", Path(name).stem).replace("-", " ").replace("_", " ") or name
    return ("From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
            "From: torchbuild <torchbuild@localhost>\n"
            "Date: Thu, 1 Jan 2026 00:00:00 +0000\n"
            f"Subject: [PATCH] {subject}\n\n---\n{text}")


# ----------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class Patch:
    entry: SeriesEntry
    path: Path
    text: str
    patch_id: str
    files: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.entry.target}: {self.entry.name}" if self.entry.target else self.entry.name


def read_series(patches_dir: Path) -> list[SeriesEntry]:
    series = patches_dir / "series"
    if not series.exists():
        return []
    return parse_series(series.read_text(), str(series))


def load_patches(git: Git, checkout: Path, patches_dir: Path) -> list[Patch]:
    """Read and check every patch the series names, before anything is changed."""
    patches = []
    series = patches_dir / "series"
    entries = read_series(patches_dir)
    subs = submodules(git, checkout) if any(e.target for e in entries) else set()
    for entry in entries:
        where = f"{series}:{entry.line}"
        path = patches_dir / entry.name
        if not path.is_file():
            raise PatchError(f"{where}: patch file {path} does not exist",
                             f"add it to {patches_dir} or remove the line from the series")
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            raise PatchError(f"{where}: {path} is not a text patch", REGENERATE) from None
        text = with_git_headers(text)
        files = touched_files(text)
        if not text.strip() or not files:
            what = "empty" if not text.strip() else "not a patch (no diff headers)"
            raise PatchError(f"{where}: {path} is {what}", REGENERATE)
        outside = [f for f in files if leaves(f)]
        if outside:
            raise PatchError(f"{where}: {path} writes outside its repo ({outside[0]})",
                             "a patch may only change files inside the repo it applies to")
        if entry.target and entry.target not in subs:
            raise PatchError(f"{where}: {entry.target} is not a submodule checkout in {checkout}",
                             "use a path `git submodule status --recursive` lists, or run `inv sync` first")
        patch_id = _patch_ids(git, checkout, text)
        if not patch_id:
            raise PatchError(f"{where}: {path} holds no change git can read", REGENERATE)
        patches.append(Patch(entry, path, text, patch_id[0], tuple(files)))
    return patches


def submodules(git: Git, checkout: Path) -> set[str]:
    """Paths of every checked-out submodule of `checkout`, at any depth."""
    out = git.query(["submodule", "foreach", "--quiet", "--recursive", "echo $displaypath"], checkout).stdout
    return set(out.split())


def _patch_ids(git: Git, repo: Path, text: str) -> list[str]:
    """Stable patch-ids of the diffs in `text`, in order."""
    res = git.query(["patch-id", "--stable"], repo, input=text).stdout
    return [line.split()[0] for line in res.splitlines() if line.strip()]


def applied_ids(git: Git, repo: Path, tip: str = "HEAD") -> list[tuple[str, str]]:
    """(commit, patch-id) for each commit of base..tip, oldest first; [] without a base."""
    base = ref_sha(git, repo, BASE_REF)
    if base is None:
        return []
    log = git.query(["log", "--reverse", "-p", "--binary", "--no-color", "--no-ext-diff", "--format=commit %H",
                     f"{base}..{tip}"], repo).stdout
    if not log.strip():
        return []
    pairs = []
    for line in git.query(["patch-id", "--stable"], repo, input=log).stdout.splitlines():
        pid, commit = line.split()
        pairs.append((commit, pid))
    return pairs


def ref_sha(git: Git, repo: Path, ref: str) -> str | None:
    res = git.query(["rev-parse", "--verify", "-q", ref], repo, check=False)
    return res.stdout.strip() if res.returncode == 0 else None


def branch_of(git: Git, repo: Path) -> str | None:
    res = git.query(["symbolic-ref", "-q", "HEAD"], repo, check=False)
    return res.stdout.strip() if res.returncode == 0 else None


