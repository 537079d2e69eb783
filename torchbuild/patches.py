"""The patches/ series: applied on top of the checkout as commits, atomically and idempotently.

`patches/series` lists patch files in order, `#` comments allowed; `third_party/fbgemm: x.patch`
applies x.patch inside that submodule. Each repo that gets patches gets a local branch
`torchbuild/patches` whose commits are the patches, and a ref `refs/torchbuild/base` marking
where the series starts. A patch counts as applied when a commit on base..HEAD has its
patch-id, whatever the file is called. Applying is all or nothing: on any failure every repo
is put back exactly as it was (HEAD, branch, refs, files), unrelated uncommitted work included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from . import console as _console
from .errors import CommandError, TorchbuildError, UnsafeToProceed
from .git import PATCH_BASE_REF, Git, changed_files, head

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
        target, sep, name = line.rpartition(": ")
        name, target = (name.strip(), target.strip().strip("/")) if sep else (line, "")
        if not name or " " in name:
            raise PatchError(f"{where}:{number}: cannot read '{raw.strip()}'",
                             "write one patch file a line, or `sub/path: file.patch` for a submodule")
        entries.append(SeriesEntry(target, name, number))
    return entries


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
    for entry in read_series(patches_dir):
        where = f"{series}:{entry.line}"
        path = patches_dir / entry.name
        if not path.is_file():
            raise PatchError(f"{where}: patch file {path} does not exist",
                             f"add it to {patches_dir} or remove the line from the series")
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            raise PatchError(f"{where}: {path} is not a text patch", REGENERATE) from None
        files = touched_files(text)
        if not text.strip() or not files:
            what = "empty" if not text.strip() else "not a patch (no diff headers)"
            raise PatchError(f"{where}: {path} is {what}", REGENERATE)
        if entry.target and not (checkout / entry.target / ".git").exists():
            raise PatchError(f"{where}: {entry.target} is not a submodule checkout in {checkout}",
                             "fix the path before the colon, or run `inv clone`/`inv sync` first")
        patch_id = _patch_ids(git, checkout, text)
        if not patch_id:
            raise PatchError(f"{where}: {path} holds no change git can read", REGENERATE)
        patches.append(Patch(entry, path, text, patch_id[0], tuple(files)))
    return patches


def _patch_ids(git: Git, repo: Path, text: str) -> list[str]:
    """Stable patch-ids of the diffs in `text`, in order."""
    res = git.query(["patch-id", "--stable"], repo, input=text).stdout
    return [line.split()[0] for line in res.splitlines() if line.strip()]


def applied_ids(git: Git, repo: Path, tip: str = "HEAD") -> list[tuple[str, str]]:
    """(commit, patch-id) for each commit of base..tip, oldest first; [] without a base."""
    base = _ref(git, repo, BASE_REF)
    if base is None:
        return []
    log = git.query(["log", "--reverse", "-p", "--no-color", "--no-ext-diff", "--format=commit %H",
                     f"{base}..{tip}"], repo).stdout
    if not log.strip():
        return []
    pairs = []
    for line in git.query(["patch-id", "--stable"], repo, input=log).stdout.splitlines():
        pid, commit = line.split()
        pairs.append((commit, pid))
    return pairs


def _ref(git: Git, repo: Path, ref: str) -> str | None:
    res = git.query(["rev-parse", "--verify", "-q", ref], repo, check=False)
    return res.stdout.strip() if res.returncode == 0 else None


def _branch(git: Git, repo: Path) -> str | None:
    res = git.query(["symbolic-ref", "-q", "HEAD"], repo, check=False)
    return res.stdout.strip() if res.returncode == 0 else None


# ----------------------------------------------------------------------------- planning


@dataclass
class RepoPlan:
    """What `apply` will do in one repo (the checkout or one submodule)."""

    repo: Path
    target: str
    head: str
    tip: str  # where the series is read from: HEAD, or the patch branch we switch to
    switch: bool = False  # HEAD is the base of an existing patch branch: switch to it
    backup: str | None = None  # an old patch branch from another base: renamed to this
    applied: list[Patch] = field(default_factory=list)
    to_apply: list[Patch] = field(default_factory=list)
    foreign: int = 0  # commits on base..tip that are no patch of the series


def plan(git: Git, checkout: Path, patches: Sequence[Patch]) -> list[RepoPlan]:
    """Read each repo's state and decide which patches it still needs. Changes nothing."""
    plans: dict[str, RepoPlan] = {}
    for p in patches:
        if p.entry.target not in plans:
            repo = checkout / p.entry.target if p.entry.target else checkout
            plans[p.entry.target] = _plan_repo(git, repo, p.entry.target)
    for target, rp in plans.items():
        done = {pid for _, pid in applied_ids(git, rp.repo, rp.tip)} if rp.backup is None else set()
        series_ids = set()
        for p in patches:
            if p.entry.target != target:
                continue
            series_ids.add(p.patch_id)
            (rp.applied if p.patch_id in done else rp.to_apply).append(p)
            done.add(p.patch_id)  # a patch listed twice is applied once
        rp.foreign = len(done - series_ids)
    return list(plans.values())


def _plan_repo(git: Git, repo: Path, target: str) -> RepoPlan:
    sha = head(git, repo)
    if sha is None:
        raise PatchError(f"{repo} has no commit checked out", "run `inv clone` first")
    am = git.query(["rev-parse", "--git-path", "rebase-apply"], repo).stdout.strip()
    if (repo / am).exists():
        raise UnsafeToProceed(f"a `git am` or rebase is in progress in {repo}",
                              f"finish it or abort it (cd {repo} && git am --abort), then run again")
    rp = RepoPlan(repo, target, sha, "HEAD")
    if _branch(git, repo) == BRANCH_REF:
        return rp
    branch_tip, base = _ref(git, repo, BRANCH_REF), _ref(git, repo, BASE_REF)
    if branch_tip is not None:
        if base == sha:
            rp.switch, rp.tip = True, BRANCH_REF
        else:
            rp.backup = f"{BRANCH}-{(base or branch_tip)[:10]}"
    return rp


# ----------------------------------------------------------------------------- snapshots


@dataclass(frozen=True)
class Snapshot:
    """HEAD, the current branch and torchbuild's refs of one repo, to put back on failure."""

    repo: Path
    head: str
    branch: str | None
    refs: tuple[tuple[str, str | None], ...]
    origin: str | None


def snapshot(git: Git, repo: Path, extra_refs: Sequence[str] = ()) -> Snapshot:
    sha = head(git, repo)
    assert sha is not None
    names = [BRANCH_REF, BASE_REF, *extra_refs]
    return Snapshot(repo, sha, _branch(git, repo), tuple((n, _ref(git, repo, n)) for n in names),
                    _symref(git, repo, ORIGIN_REF))


def _symref(git: Git, repo: Path, name: str) -> str | None:
    res = git.query(["symbolic-ref", "-q", name], repo, check=False)
    return res.stdout.strip() if res.returncode == 0 else None


def restore(git: Git, snap: Snapshot) -> None:
    """Put a repo back as `snap` saw it; files other than the patches' are not touched."""
    repo = snap.repo
    am = git.query(["rev-parse", "--git-path", "rebase-apply"], repo).stdout.strip()
    if (repo / am).exists():
        git.act(["am", "--abort"], repo, echo=False)
    git.act(["reset", "--quiet", "--keep", snap.head], repo, echo=False)
    for name, value in snap.refs:
        if value is None:
            if _ref(git, repo, name) is not None:
                git.act(["update-ref", "-d", name], repo, echo=False)
        else:
            git.act(["update-ref", name, value], repo, echo=False)
    if snap.origin:
        git.act(["symbolic-ref", ORIGIN_REF, snap.origin], repo, echo=False)
    elif _symref(git, repo, ORIGIN_REF):
        git.act(["symbolic-ref", "--delete", ORIGIN_REF], repo, echo=False)
    if snap.branch:
        git.act(["symbolic-ref", "HEAD", snap.branch], repo, echo=False)
    else:
        git.act(["update-ref", "--no-deref", "HEAD", snap.head], repo, echo=False)


# ----------------------------------------------------------------------------- acting


def apply(git: Git, checkout: Path, patches_dir: Path) -> list[RepoPlan]:
    """Apply every patch of the series not yet applied; all or nothing."""
    con = _console.get()
    patches = load_patches(git, checkout, patches_dir)
    if not patches:
        con.info(f"the series in {patches_dir} is empty: nothing to apply")
        return []
    plans = plan(git, checkout, patches)
    pending = [rp for rp in plans if rp.to_apply]
    if not pending:
        con.info(f"all {len(patches)} patch(es) already applied: nothing to do")
        return plans
    _refuse_dirty(git, pending)
    if git.options.dry_run:
        for rp in pending:
            for p in rp.to_apply:
                con.command(f"(cd {rp.repo} && git am {p.path})")
        return plans
    snaps = [snapshot(git, rp.repo, [f"refs/heads/{rp.backup}"] if rp.backup else []) for rp in pending]
    try:
        for rp in pending:
            _apply_repo(git, rp)
    except BaseException:
        for snap in reversed(snaps):
            restore(git, snap)
        raise
    for rp in pending:
        where = rp.target or checkout.name
        con.info(f"{where}: applied {len(rp.to_apply)}, already applied {len(rp.applied)} (branch {BRANCH})")
    return plans


def _refuse_dirty(git: Git, plans: Sequence[RepoPlan]) -> None:
    """Uncommitted changes (or untracked files) where a patch writes: refuse before any change."""
    clashes = []
    for rp in plans:
        status = git.query(["status", "--porcelain", "-z", "--ignore-submodules=all"], rp.repo).stdout
        dirty = {item[3:] for item in status.split("\0") if len(item) > 3}
        touched = {f for p in rp.to_apply for f in p.files}
        clashes += [f"{rp.target}/{f}" if rp.target else f for f in sorted(dirty & touched)]
    if clashes:
        raise UnsafeToProceed(f"uncommitted changes in files the patches change: {', '.join(clashes)}",
                              "commit or stash them (git stash), then run again; nothing was changed")


def _apply_repo(git: Git, rp: RepoPlan) -> None:
    repo = rp.repo
    if rp.backup:
        git.act(["branch", "-M", BRANCH, rp.backup], repo)
        _console.get().warn(f"{rp.target or repo.name}: the old patch branch (another base) is kept as {rp.backup}")
    if rp.switch:
        git.act(["switch", "--quiet", BRANCH], repo)
    elif _branch(git, repo) != BRANCH_REF:
        origin = _branch(git, repo)
        git.act(["switch", "--quiet", "-c", BRANCH], repo)
        git.act(["update-ref", BASE_REF, rp.head], repo, echo=False)
        if origin:
            git.act(["symbolic-ref", ORIGIN_REF, origin], repo, echo=False)
    if _ref(git, repo, BASE_REF) is None:
        git.act(["update-ref", BASE_REF, rp.head], repo, echo=False)
    has_identity = git.query(["config", "--default", "", "user.email"], repo).stdout.strip()
    identity = {} if has_identity else FALLBACK_IDENTITY
    for p in rp.to_apply:
        text = p.text if is_mbox(p.text) else to_mbox(p.text, p.entry.name)
        try:
            git.act(["-c", "commit.gpgsign=false", "am", "--quiet", "--keep-cr"], repo, env=identity, input=text,
                    echo=False)
            _console.get().info(f"applied {p.label}")
        except CommandError as exc:
            raise _does_not_apply(p, rp, exc.output) from None


def _does_not_apply(p: Patch, rp: RepoPlan, output: str) -> PatchError:
    failed = re.search(r"patch failed: (.+):(\d+)", output)
    where = f": {failed.group(1)} (hunk at line {failed.group(2)})" if failed else ""
    if not failed:
        missing = re.search(r"error: (.+): (does not exist in index|No such file or directory|already exists[^\n]*)",
                            output)
        where = f": {missing.group(1)} ({missing.group(2)})" if missing else f": {output.strip().splitlines()[-1]}"
    target = rp.target or rp.repo.name
    return PatchError(f"patch {p.label} does not apply to {target}{where}; the tree was restored as it was",
                      f"refresh the patch against the current ref, or try `git am --3way {p.path}` in "
                      f"{rp.repo} by hand")


def status(git: Git, checkout: Path, patches_dir: Path) -> list[tuple[Patch, str]]:
    """Each series entry with applied / not applied / does not apply (checked in order)."""
    patches = load_patches(git, checkout, patches_dir)
    plans = plan(git, checkout, patches)
    rows: dict[int, str] = {}
    for rp in plans:
        for p in rp.applied:
            rows[id(p)] = "applied"
        rows.update(_check_in_order(git, rp))
    return [(p, rows[id(p)]) for p in patches]


def _check_in_order(git: Git, rp: RepoPlan) -> dict[int, str]:
    """Try the pending patches one after another on a throwaway index; the checkout is untouched."""
    import os
    import tempfile

    out: dict[int, str] = {}
    with tempfile.TemporaryDirectory(prefix="tb-index-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git.query(["read-tree", rp.tip], rp.repo, env=env)
        for p in rp.to_apply:
            res = git.query(["apply", "--cached", "--check"], rp.repo, check=False, input=p.text, env=env)
            if res.returncode == 0:
                git.query(["apply", "--cached"], rp.repo, input=p.text, env=env)
                out[id(p)] = "not applied"
            else:
                out[id(p)] = "does not apply"
    return out


def revert(git: Git, checkout: Path, patches_dir: Path) -> list[str]:
    """Take the series off every repo that has it: HEAD back on the base, branch and base ref gone."""
    targets = [""] + sorted({e.target for e in read_series(patches_dir) if e.target})
    done = []
    for target in targets:
        repo = checkout / target if target else checkout
        base = _ref(git, repo, BASE_REF) if (repo / ".git").exists() else None
        if base is None:
            continue
        on_branch = _branch(git, repo) == BRANCH_REF
        tip = "HEAD" if on_branch else BRANCH_REF
        if _ref(git, repo, tip) is None:
            tip = "HEAD"
        series_ids = {p.patch_id for p in load_patches(git, checkout, patches_dir) if p.entry.target == target}
        extra = [c for c, pid in applied_ids(git, repo, tip) if pid not in series_ids]
        label = target or checkout.name
        if extra:
            raise UnsafeToProceed(f"{label}: {len(extra)} commit(s) on {BRANCH} are not in the series",
                                  "save them first with `inv patch.export`, then revert")
        if on_branch:
            dirty = set(changed_files(git, repo))
            touched = set(git.query(["diff", "--name-only", base, "HEAD"], repo).stdout.split())
            if dirty & touched:
                raise UnsafeToProceed(f"{label}: uncommitted changes in files the patches changed: "
                                      f"{', '.join(sorted(dirty & touched))}",
                                      "commit or stash them (git stash), then run again; nothing was changed")
            origin = _symref(git, repo, ORIGIN_REF)
            back = origin[len("refs/heads/"):] if origin and _ref(git, repo, origin) == base else None
            git.act(["checkout", "--quiet", *([back] if back else ["--detach", base])], repo)
        git.act(["branch", "-D", "--quiet", BRANCH], repo, echo=False)
        git.act(["update-ref", "-d", BASE_REF], repo, echo=False)
        if _symref(git, repo, ORIGIN_REF):
            git.act(["symbolic-ref", "--delete", ORIGIN_REF], repo, echo=False)
        done.append(label)
    return done


def export(git: Git, checkout: Path, patches_dir: Path, since: str | None = None) -> list[str]:
    """Write the local commits on top of the base as numbered patches and rewrite the series."""
    old = read_series(patches_dir)
    targets = [""] + sorted({e.target for e in old if e.target})
    targets += sorted(_patched_submodules(git, checkout, set(targets)))
    written: list[tuple[str, str]] = []
    number = 1
    staging = patches_dir / ".export"
    if staging.exists():
        import shutil

        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    for target in targets:
        repo = checkout / target if target else checkout
        if not (repo / ".git").exists():
            continue
        base = since if (since and not target) else _ref(git, repo, BASE_REF)
        if base is None:
            if not target:
                raise PatchError(f"{checkout} has no patch base (refs/torchbuild/base)",
                                 "pass --since REF (the commit your changes start from)")
            continue
        files = git.query(["format-patch", "--no-signature", "--zero-commit", "--no-stat",
                           f"--start-number={number}", "-o", str(staging), f"{base}..HEAD"], repo).stdout.split()
        for f in files:
            written.append((target, Path(f).name))
        number += len(files)
    # Replace the old files of the series, then the series itself (written last, atomically).
    for e in old:
        stale = patches_dir / e.name
        if stale.exists():
            stale.unlink()
    for _, name in written:
        (staging / name).replace(patches_dir / name)
    staging.rmdir()
    lines = ["# Patches applied on top of the checkout, in order (written by `inv patch.export`).",
             "# `sub/path: file.patch` applies inside that submodule."]
    lines += [f"{t}: {n}" if t else n for t, n in written]
    tmp = patches_dir / "series.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(patches_dir / "series")
    return [f"{t}: {n}" if t else n for t, n in written]


def _patched_submodules(git: Git, checkout: Path, known: set[str]) -> list[str]:
    """Submodules (any depth) that carry a torchbuild patch base but are not in the series yet."""
    out = git.query(["submodule", "foreach", "--quiet", "--recursive", "echo $displaypath"], checkout).stdout
    found = []
    for path in out.split():
        if path not in known and _ref(git, checkout / path, BASE_REF) is not None:
            found.append(path)
    return found
