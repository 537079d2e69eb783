"""The superproject: a fresh clone (into a hidden sibling, renamed into place), moving to a
ref without losing work, and `clone_source`, which finishes whatever an earlier run began.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from .. import console as _console
from ..errors import CommandError, GitError, UnsafeToProceed
from ..run import Result
from .core import SHA_RE, Git, changed_files, head, is_local, local_commits, origin_url, same_url
from .mirror import MirrorCache, through
from .submodules import Entry, Report, _clear_interrupted, _own_toplevel, _update_level, read_entries, update_tree


def resolve_ref(git: Git, repo: Path, ref: str) -> tuple[str, str | None]:
    """(commit, branch name or None) for a branch, tag or commit of the clone at `repo`."""
    for candidate, branch in ((f"refs/remotes/origin/{ref}", ref), (f"refs/tags/{ref}", None), (ref, None)):
        res = git.query(["rev-parse", "--verify", "-q", f"{candidate}^{{commit}}"], repo, check=False)
        if res.returncode == 0:
            return res.stdout.strip(), branch
    raise GitError(f"ref '{ref}' was not found (no such branch, tag or commit)",
                   f"list the refs with `git ls-remote {origin_url(git, repo) or repo}`, or pass another --ref")


def checkout_ref(git: Git, repo: Path, ref: str, depth: int | None = None) -> str:
    """Check out `ref` in `repo`, fetching it by name if the clone lacks it (shallow clones)."""
    try:
        sha, branch = resolve_ref(git, repo, ref)
    except GitError:
        if depth is None and not SHA_RE.match(ref):
            raise
        url = origin_url(git, repo) or str(repo)
        fetch = ["fetch", "--quiet", "origin", ref] + (["--depth", str(depth)] if depth else [])
        try:
            git.act(fetch, repo, allow_file=is_local(url))
        except CommandError:
            raise GitError(f"ref '{ref}' was not found in {url}",
                           f"list the refs with `git ls-remote {url}`, or pass another --ref") from None
        sha, branch = git.query(["rev-parse", "FETCH_HEAD^{commit}"], repo).stdout.strip(), None
    if branch:
        exists = git.query(["rev-parse", "--verify", "-q", f"refs/heads/{branch}"], repo, check=False).returncode == 0
        if exists:
            git.act(["checkout", "--quiet", branch], repo)
            try:
                git.act(["merge", "--ff-only", "--quiet", f"origin/{branch}"], repo)
            except CommandError:
                raise UnsafeToProceed(f"local branch '{branch}' in {repo} has diverged from origin/{branch}",
                                      f"merge or rebase it yourself (cd {repo} && git status)") from None
        else:
            git.act(["checkout", "--quiet", "-b", branch, "--track", f"origin/{branch}"], repo)
    else:
        git.act(["checkout", "--quiet", "--detach", sha], repo)
    return sha


def registered_submodule(git: Git, superproject: Path | None, dest: Path, url: str) -> Entry | None:
    """The entry when `dest` is a submodule `superproject` records with this url (pytorch/ here)."""
    if superproject is None or not (superproject / ".git").exists():
        return None
    try:
        rel = dest.resolve().relative_to(superproject.resolve()).as_posix()
    except ValueError:
        return None
    return next((e for e in read_entries(git, superproject) if e.path == rel and same_url(e.url, url)), None)


def clone_source(git: Git, cache: MirrorCache | None, url: str, dest: Path, ref: str | None = None,
                 superproject: Path | None = None) -> Report:
    """Make `dest` a complete recursive checkout of `url` at `ref`; finish what an earlier run began."""
    if dest.exists() and not dest.is_dir():
        raise UnsafeToProceed(f"{dest} is a file, not a folder", "pass another --path")
    entry = registered_submodule(git, superproject, dest, url)
    if (dest / ".git").exists() and head(git, dest) is not None and _own_toplevel(git, dest):
        existing = origin_url(git, dest)
        if existing and not same_url(existing, url):
            raise UnsafeToProceed(f"{dest} is a checkout of {existing}, not {url}",
                                  f"pass another --path, or --url {existing}")
        if ref:
            move_to_ref(git, cache, dest, url, ref)
        return update_tree(git, cache, dest)
    if entry is not None and superproject is not None:
        if ref is None:
            return update_tree(git, cache, superproject, only=[entry.path])
        _clear_interrupted(git, superproject, [entry])
        _update_level(git, cache, superproject, [entry])
        move_to_ref(git, cache, dest, url, ref)
        return update_tree(git, cache, dest)
    if dest.is_dir() and any(dest.iterdir()):
        raise UnsafeToProceed(f"{dest} exists, is not empty and is not a git checkout",
                              "move its contents away, or pass another --path")
    _fresh_clone(git, cache, url, dest, ref)
    if git.options.dry_run:
        return Report()
    return update_tree(git, cache, dest)


def _fresh_clone(git: Git, cache: MirrorCache | None, url: str, dest: Path, ref: str | None) -> None:
    """Clone into a hidden sibling, check out `ref`, then rename into place: never a half checkout."""
    opts = git.options
    con = _console.get()
    partial = dest.parent / f".{dest.name}.partial"
    if partial.exists() and not opts.dry_run:
        con.info(f"removing the unfinished clone {partial} left by an interrupted run")
        shutil.rmtree(partial)
    args = ["clone", "--no-checkout", "--progress"]
    if opts.depth:
        args += ["--depth", str(opts.depth)]
        if ref and not SHA_RE.match(ref):
            args += ["--branch", ref]
    args += [url, str(dest if opts.dry_run else partial)]

    def progress(line: str) -> None:
        if re.match(r"(Receiving|Resolving|Counting|Compressing) objects", line):
            con.progress(line)

    if not opts.dry_run:
        dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        def step(include: Path | None) -> Result:
            if partial.exists():
                shutil.rmtree(partial)
            return git.act(args, include=include, allow_file=is_local(url), on_line=progress)
        through(git, cache if opts.depth is None else None, {url: None}, "clone", url, step)
        con.clear_progress()
        if opts.dry_run:
            if ref:
                git.act(["checkout", "--detach", ref], dest)
            return
        if not ref:
            ref = git.query(["symbolic-ref", "--short", "HEAD"], partial).stdout.strip()
        checkout_ref(git, partial, ref, opts.depth)
        if dest.is_dir():
            dest.rmdir()  # empty: checked by the caller
        os.replace(partial, dest)
    finally:
        if partial.exists() and not opts.dry_run:
            shutil.rmtree(partial, ignore_errors=True)


def move_to_ref(git: Git, cache: MirrorCache | None, repo: Path, url: str, ref: str) -> None:
    """Check out another ref in an existing checkout, refusing when that would lose work."""
    current = head(git, repo)
    try:
        sha, branch = resolve_ref(git, repo, ref)
        if sha == current and branch is None:
            return
    except GitError:
        pass
    dirty = changed_files(git, repo)
    if dirty:
        raise UnsafeToProceed(f"{repo} has uncommitted changes ({', '.join(dirty[:5])}); not switching to '{ref}'",
                              f"commit or stash them (cd {repo} && git stash), then run again")
    detached = git.query(["symbolic-ref", "-q", "HEAD"], repo, check=False).returncode != 0
    if detached and local_commits(git, repo):
        raise UnsafeToProceed(f"{repo} has commits on a detached HEAD that no branch holds; not switching to '{ref}'",
                              f"keep them on a branch first (cd {repo} && git branch keep-my-work)")
    through(git, cache if git.options.depth is None else None, {url: None}, "fetch", url,
            lambda include: git.act(["fetch", "--quiet", "--tags", "origin"], repo, include=include,
                                    allow_file=is_local(url)))
    checkout_ref(git, repo, ref, git.options.depth)
