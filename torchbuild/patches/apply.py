"""Applying the series, all or nothing: plan each repo (read-only), snapshot, `git am`, and on
any failure restore every repo exactly (HEAD, branch, refs, files); `status` dry-runs it.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from .. import console as _console
from ..errors import CommandError, UnsafeToProceed
from ..git import Git, head
from ..locks import checkout_lock
from .series import (
    BASE_REF,
    BRANCH,
    BRANCH_REF,
    FALLBACK_IDENTITY,
    ORIGIN_REF,
    Patch,
    PatchError,
    applied_ids,
    branch_of,
    is_mbox,
    load_patches,
    ref_sha,
    to_mbox,
)

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
    if branch_of(git, repo) == BRANCH_REF:
        return rp
    branch_tip, base = ref_sha(git, repo, BRANCH_REF), ref_sha(git, repo, BASE_REF)
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
    return Snapshot(repo, sha, branch_of(git, repo), tuple((n, ref_sha(git, repo, n)) for n in names),
                    symref(git, repo, ORIGIN_REF))


def symref(git: Git, repo: Path, name: str) -> str | None:
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
            if ref_sha(git, repo, name) is not None:
                git.act(["update-ref", "-d", name], repo, echo=False)
        else:
            git.act(["update-ref", name, value], repo, echo=False)
    if snap.origin:
        git.act(["symbolic-ref", ORIGIN_REF, snap.origin], repo, echo=False)
    elif symref(git, repo, ORIGIN_REF):
        git.act(["symbolic-ref", "--delete", ORIGIN_REF], repo, echo=False)
    if snap.branch:
        git.act(["symbolic-ref", "HEAD", snap.branch], repo, echo=False)
    else:
        git.act(["update-ref", "--no-deref", "HEAD", snap.head], repo, echo=False)


# ----------------------------------------------------------------------------- acting


def apply(git: Git, checkout: Path, patches_dir: Path) -> list[RepoPlan]:
    """Apply every patch of the series not yet applied; all or nothing. Under the checkout's lock: two
    `inv build`s with pending patches (patches.auto), or two `inv patch.apply`, take turns."""
    with checkout_turn(git, checkout, "applying patches to"):
        return _apply(git, checkout, patches_dir)


def checkout_turn(git: Git, checkout: Path, doing: str) -> contextlib.AbstractContextManager[None]:
    """The checkout's lock (the one builds take) while its branches change; none in a dry run."""
    if git.options.dry_run:
        return contextlib.nullcontext()
    return checkout_lock(checkout, f"{doing} {checkout}", f"another torchbuild is building or patching {checkout}")


def _apply(git: Git, checkout: Path, patches_dir: Path) -> list[RepoPlan]:
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
    elif branch_of(git, repo) != BRANCH_REF:
        origin = branch_of(git, repo)
        git.act(["switch", "--quiet", "-c", BRANCH], repo)
        git.act(["update-ref", BASE_REF, rp.head], repo, echo=False)
        if origin:
            git.act(["symbolic-ref", ORIGIN_REF, origin], repo, echo=False)
    if ref_sha(git, repo, BASE_REF) is None:
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


def git_cause(output: str) -> str:
    """git's own reason from `git am` output, not its advice (hint:, "git am --abort", "When you have")."""
    advice = ("hint:", "When you have", "If you prefer", "To restore", "Use 'git am", "Patch failed at", "Applying:")
    lines = [ln.strip() for ln in output.splitlines() if ln.strip() and not ln.strip().startswith(advice)]
    errors = [ln for ln in lines if ln.startswith(("error:", "fatal:"))]
    return (errors or lines or ["git gave no reason"])[0]


def _does_not_apply(p: Patch, rp: RepoPlan, output: str) -> PatchError:
    failed = re.search(r"patch failed: (.+):(\d+)", output)
    where = f": {failed.group(1)} (hunk at line {failed.group(2)})" if failed else ""
    if not failed:
        missing = re.search(r"error: (.+): (does not exist in index|No such file or directory|already exists[^\n]*)",
                            output)
        where = f": {missing.group(1)} ({missing.group(2)})" if missing else f": {git_cause(output)}"
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

