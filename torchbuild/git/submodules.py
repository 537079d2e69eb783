"""Submodules, one level at a time: inspect (read-only), plan (pure: `plan_level`), act
(init/sync/update only the safe ones), then descend. A submodule with uncommitted changes or
local commits is never touched.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from .. import console as _console
from ..errors import GitError
from ..run import Result
from .core import PATCH_BASE_REF, Git, changed_files, head, is_local, local_commits, origin_url, resolve_url, same_url
from .mirror import MirrorCache, through


@dataclass(frozen=True)
class Entry:
    """A submodule as the parent records it."""

    name: str
    path: str
    url: str  # resolved, from .gitmodules
    recorded: str  # gitlink sha in the parent's index


@dataclass(frozen=True)
class State:
    """What is on disk for one submodule."""

    entry: Entry
    configured_url: str | None  # submodule.<name>.url in the parent's config (None: not initialised)
    head: str | None  # checked-out commit (None: not cloned)
    broken: bool = False  # a .git that does not work: an interrupted clone
    dirty: tuple[str, ...] = ()  # changed tracked files
    local_commits: int = 0  # commits reachable only locally
    blocked: str | None = None  # a non-empty folder that is not the submodule


@dataclass(frozen=True)
class Action:
    """The plan for one submodule at one level."""

    entry: Entry
    sync_url: bool = False  # .gitmodules url differs from the configured one
    update: bool = False  # init/clone/checkout the recorded commit
    skip: str | None = None  # why it is left alone
    previous: str | None = None  # commit before (for the report)
    previous_url: str | None = None

    @property
    def descend(self) -> bool:
        return self.skip is None


def plan_level(states: Sequence[State]) -> list[Action]:
    """Decide, for each submodule of one repo, what to do. Pure."""
    actions = []
    for s in states:
        e = s.entry
        url_changed = s.configured_url is not None and not same_url(s.configured_url, e.url)
        if s.head == e.recorded:
            actions.append(Action(e, sync_url=url_changed, previous_url=s.configured_url if url_changed else None))
        elif s.blocked:
            actions.append(Action(e, skip=s.blocked))
        elif s.dirty:
            shown = ", ".join(s.dirty[:3]) + (" ..." if len(s.dirty) > 3 else "")
            actions.append(Action(e, skip=f"uncommitted changes ({shown})", previous=s.head))
        elif s.local_commits:
            actions.append(Action(e, skip=f"{s.local_commits} local commit(s) not in its remote", previous=s.head))
        else:
            actions.append(Action(e, sync_url=url_changed, update=True, previous=s.head,
                                  previous_url=s.configured_url if url_changed else None))
    return actions


@dataclass
class Report:
    """What a clone/sync changed and what it left alone."""

    changed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    checked: int = 0



# ----------------------------------------------------------------------------- inspection


def read_entries(git: Git, repo: Path) -> list[Entry]:
    """The submodules `repo` records: .gitmodules names/paths/urls joined with the index's gitlinks."""
    if not (repo / ".gitmodules").exists():
        return []
    res = git.query(["config", "-f", ".gitmodules", "-z", "--get-regexp", r"^submodule\..*\.(path|url)$"],
                    repo, check=False)
    info: dict[str, dict[str, str]] = {}
    for item in filter(None, res.stdout.split("\0")):
        key, _, value = item.partition("\n")
        name, _, attr = key[len("submodule."):].rpartition(".")
        info.setdefault(name, {})[attr] = value
    links = {}
    for line in filter(None, git.query(["ls-files", "-s", "-z"], repo).stdout.split("\0")):
        meta, _, path = line.partition("\t")
        mode, sha, _stage = meta.split()
        if mode == "160000":
            links[path] = sha
    base = origin_url(git, repo) or str(repo)
    entries = []
    for name, attrs in info.items():
        where = attrs.get("path")
        if where and where in links and "url" in attrs:
            entries.append(Entry(name, where, resolve_url(base, attrs["url"]), links[where]))
    return sorted(entries, key=lambda e: e.path)



def inspect(git: Git, repo: Path, entry: Entry, configured: Mapping[str, str]) -> State:
    sub = repo / entry.path
    configured_url = configured.get(entry.name)
    if not (sub / ".git").exists():
        blocked = None
        if sub.is_dir() and any(sub.iterdir()):
            blocked = f"{entry.path} holds files but no checkout; move them away"
        elif sub.exists() and not sub.is_dir():
            blocked = f"{entry.path} is a file, not a folder; move it away"
        return State(entry, configured_url, None, blocked=blocked)
    commit = head(git, sub)
    if commit is None and _own_toplevel(git, sub) and holds_branches(git, sub / ".git", sub):
        return State(entry, configured_url, None, blocked=f"{entry.path}: its HEAD names no commit yet (an orphan "
                                                            "branch?) and it holds branches; left as it is")
    if commit is None or not _own_toplevel(git, sub) or not _checked_out(git, sub):
        return State(entry, configured_url, None, broken=True)
    if commit == entry.recorded or _patch_base(git, sub) == entry.recorded:
        return State(entry, configured_url, entry.recorded)  # at the recorded commit (+ our patch series)
    return State(entry, configured_url, commit, dirty=tuple(changed_files(git, sub)),
                 local_commits=local_commits(git, sub))


def holds_branches(git: Git, gitdir: Path, cwd: Path) -> bool:
    """Whether a repo has branches, tags or a stash: the user's, where its HEAD resolves to nothing (an
    interrupted clone has none of these yet)."""
    found = git.query(["--git-dir", str(gitdir), "for-each-ref", "--count=1", "refs/heads", "refs/tags", "refs/stash"],
                      cwd, check=False)
    return bool(found.stdout.strip())


def _patch_base(git: Git, repo: Path) -> str | None:
    res = git.query(["rev-parse", "--verify", "-q", PATCH_BASE_REF], repo, check=False)
    return res.stdout.strip() if res.returncode == 0 else None


def _checked_out(git: Git, repo: Path) -> bool:
    """False for a clone that stopped before its checkout (it has no index yet)."""
    index = git.query(["rev-parse", "--git-path", "index"], repo).stdout.strip()
    return (repo / index).exists()


def _own_toplevel(git: Git, sub: Path) -> bool:
    top = git.query(["rev-parse", "--show-toplevel"], sub, check=False).stdout.strip()
    return bool(top) and Path(top).resolve() == sub.resolve()


def configured_urls(git: Git, repo: Path) -> dict[str, str]:
    res = git.query(["config", "-z", "--get-regexp", r"^submodule\..*\.url$"], repo, check=False)
    urls = {}
    for item in filter(None, res.stdout.split("\0")):
        key, _, value = item.partition("\n")
        urls[key[len("submodule."):-len(".url")]] = value
    return urls


def linked_worktree(git: Git, repo: Path) -> bool:
    """Whether `repo` is a linked worktree (`git worktree add`): its config is the main checkout's."""
    found = git.query(["rev-parse", "--git-dir", "--git-common-dir"], repo, check=False).stdout.split("\n")
    return len(found) >= 2 and (repo / found[0]).resolve() != (repo / found[1]).resolve()


def modules_dir(git: Git, repo: Path, name: str) -> Path:
    path = git.query(["rev-parse", "--git-path", f"modules/{name}"], repo).stdout.strip()
    return (repo / path).resolve()


# ----------------------------------------------------------------------------- acting


def update_tree(git: Git, cache: MirrorCache | None, repo: Path, only: Sequence[str] | None = None,
                report: Report | None = None, prefix: str = "") -> Report:
    """Bring every submodule below `repo` to the commit its parent records, safely, level by level."""
    report = report if report is not None else Report()
    entries = [e for e in read_entries(git, repo) if only is None or e.path in only]
    if not entries:
        return report
    con = _console.get()
    configured = configured_urls(git, repo)
    actions = plan_level([inspect(git, repo, e, configured) for e in entries])
    report.checked += len(actions)
    shared = linked_worktree(git, repo)  # its config is the checkout's: the user's urls are kept, never synced
    for a in actions:
        label = f"{prefix}{a.entry.path}"
        if a.skip:
            report.skipped.append(f"{label}: {a.skip}")
            con.warn(f"left {label} as it is: {a.skip}")
        if a.sync_url and not shared:
            report.changed.append(f"{label}: url {a.previous_url} -> {a.entry.url}")
    to_sync = [a.entry.path for a in actions if a.sync_url]
    if to_sync and not shared:
        git.act(["submodule", "sync", "--quiet", "--", *to_sync], repo)
    to_update = [a for a in actions if a.update]
    if to_update:
        _clear_interrupted(git, repo, [a.entry for a in to_update])
        _update_level(git, cache, repo, [a.entry for a in to_update], shared)
        for a in to_update:
            before = a.previous[:10] if a.previous else None
            after = a.entry.recorded[:10]
            label = f"{prefix}{a.entry.path}"
            verb = "would check out" if git.options.dry_run else "checked out"
            report.changed.append(f"{label}: {before} -> {after}" if before else f"{label}: {verb} {after}")
    if git.options.dry_run:
        return report  # nested submodules are known only once these are cloned
    for a in actions:
        if a.descend:
            update_tree(git, cache, repo / a.entry.path, None, report, f"{prefix}{a.entry.path}/")
    return report


def _clear_interrupted(git: Git, repo: Path, entries: Sequence[Entry]) -> None:
    """Finish or remove what an interrupted clone left for these submodules.

    A module git dir without refs or HEAD holds nothing of the user's and is removed; one that
    was fetched but never checked out (no index) gets its checkout, after the lock files its killed
    git left (config.lock, index.lock) are removed: no git works there but ours (the checkout lock).
    """
    if git.options.dry_run:
        return
    con = _console.get()
    for e in entries:
        gitdir = modules_dir(git, repo, e.name)
        sub = repo / e.path
        if gitdir.is_dir():
            refs = git.query(["--git-dir", str(gitdir), "for-each-ref", "--count=1"], repo, check=False)
            valid = git.query(["--git-dir", str(gitdir), "rev-parse", "--verify", "-q", "HEAD^{commit}"], repo,
                              check=False)
            if valid.returncode != 0 and holds_branches(git, gitdir, repo):
                continue  # an orphan branch beside the user's branches: not a clone; inspect() names it
            if not refs.stdout.strip() or valid.returncode != 0:
                con.info(f"removing the unfinished clone of {e.path} left by an interrupted run")
                shutil.rmtree(gitdir)
            elif not (gitdir / "index").exists() and (sub / ".git").is_file():
                con.info(f"finishing the checkout of {e.path} that an interrupted run began")
                for stale in sorted(gitdir.glob("*.lock")):  # its git was killed: they are nobody's now
                    con.info(f"removing {stale.name}, which the interrupted git left in {e.path}")
                    stale.unlink()
                git.act(["checkout", "--quiet", "--detach", "HEAD"], sub)
        gitfile = sub / ".git"
        if gitfile.is_file() and not any(p.name != ".git" for p in sub.iterdir()):
            gitfile.unlink()


def _update_level(git: Git, cache: MirrorCache | None, repo: Path, entries: Sequence[Entry],
                  shared: bool = False) -> None:
    """`git submodule update --init` for these entries, in parallel, through the cache. In a linked worktree
    (`shared`: its config is the checkout's, as a bisection's) nothing is written there: an entry the config
    does not name gets its url from .gitmodules on the command line."""
    opts = git.options
    con = _console.get()
    if not shared:
        git.act(["submodule", "init", "--", *[e.path for e in entries]], repo, echo=False)
    urls = configured_urls(git, repo)
    config = {f"submodule.{e.name}.{k}": v for e in entries if e.name not in urls
              for k, v in (("url", e.url), ("active", "true"))} if shared else {}
    wanted = {urls.get(e.name, e.url): e.recorded for e in entries}
    args = ["submodule", "update", "--init", "--jobs", str(opts.jobs)]
    if opts.shallow_submodules:
        args += ["--depth", "1"]
    args += ["--", *[e.path for e in entries]]
    total, done_paths = len(entries), set()

    def progress(line: str) -> None:
        m = re.match(r"Submodule path '([^']+)': checked out", line)
        if m:
            done_paths.add(m.group(1))
            con.progress(f"submodules {len(done_paths)}/{total} ({m.group(1)})")
        elif line.startswith("fatal:") or line.startswith("error:"):
            con.detail(line)

    first_url = next(iter(wanted), str(repo))
    allow_file = any(is_local(u) for u in wanted)
    def step(include: Path | None) -> Result:
        return git.act(args, repo, include=include, allow_file=allow_file, on_line=progress, config=config)
    try:
        through(git, cache, dict(wanted), "fetch submodules of", str(repo), step)
    except GitError as exc:
        failed = _failed_url(exc.message) or first_url
        raise GitError(exc.message.replace(f"fetch submodules of {repo}", f"fetch submodule {failed}"),
                       exc.hint, exc.output) from None
    con.clear_progress()


def _failed_url(message: str) -> str | None:
    m = re.search(r"clone of '([^']+)'", message)
    return m.group(1) if m else None


