"""Git: recursive clone, submodule sync/update, mirrors and the reference cache.

Every git command goes through run.py. Mirrors are `-c url.<mirror>.insteadOf=<prefix>`,
which git passes on to every nested submodule command. The reference cache is a set of
bare mirrors under the cache dir; clones are pointed at it with per-url insteadOf rules
in a generated config file (`-c include.path=...`), so the checkout's remotes keep their
real urls and borrow nothing from the cache (deleting the cache breaks no checkout).

Submodules are brought up to date one level at a time: inspect (read-only), plan (pure:
`plan_level`), act (init/sync/update only the safe ones), then descend. A submodule with
uncommitted changes or local commits is never touched.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence, TypeVar

from . import console as _console
from .errors import CommandError, GitError, UnsafeToProceed
from .run import Result, run

T = TypeVar("T")
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
PATCH_BASE_REF = "refs/torchbuild/base"  # where patches.py's series starts in a repo


# ----------------------------------------------------------------------------- pure helpers


def rewrite(url: str, rules: Mapping[str, str]) -> tuple[str, str | None]:
    """Apply git's insteadOf semantics: the longest matching prefix wins. Returns (url, prefix)."""
    best = max((p for p in rules if url.startswith(p)), key=len, default=None)
    if best is None:
        return url, None
    return rules[best] + url[len(best):], best


def same_url(a: str, b: str) -> bool:
    """Equal up to a trailing slash or `.git`."""
    def norm(u: str) -> str:
        u = u.rstrip("/")
        return u[:-4] if u.endswith(".git") else u
    return norm(a) == norm(b)


def resolve_url(base: str, url: str) -> str:
    """Resolve a .gitmodules url that may be relative (`../x.git`) against the parent's remote."""
    if not (url.startswith("../") or url.startswith("./")):
        return url
    parts = base.rstrip("/").split("/")
    for piece in url.split("/"):
        if piece == "..":
            parts.pop()
        elif piece and piece != ".":
            parts.append(piece)
    return "/".join(parts)


def mirror_name(url: str) -> str:
    """A readable, unique directory name for the bare mirror of `url`."""
    stem = url.rstrip("/")
    stem = stem[:-4] if stem.endswith(".git") else stem
    tail = "_".join(re.split(r"[/:]+", stem)[-2:])
    tail = re.sub(r"[^A-Za-z0-9._-]+", "_", tail).strip("._") or "repo"
    return f"{tail}-{hashlib.sha1(url.encode()).hexdigest()[:10]}.git"


def cacheable(url: str) -> bool:
    """URLs go through the mirror cache; plain paths cannot (git applies insteadOf to URLs only)."""
    return "://" in url or bool(re.match(r"^[\w.-]+@[\w.-]+:", url))


def is_local(url: str) -> bool:
    return url.startswith(("/", "./", "../", "file://")) or (os.sep == "\\" and ":" in url[:3])


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


# ----------------------------------------------------------------------------- the git runner


@dataclass(frozen=True)
class GitOptions:
    mirrors: Mapping[str, str]
    cache_dir: Path | None  # None: no reference cache
    jobs: int
    depth: int | None = None
    shallow_submodules: bool = False
    retries: int = 3
    retry_delay: float = 1.0
    dry_run: bool = False


class Git:
    """Runs git with the mirror rules, no prompts, and bounded retries for network steps."""

    def __init__(self, options: GitOptions, base_env: Mapping[str, str] | None = None) -> None:
        self.options = options
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.env = {"GIT_TERMINAL_PROMPT": "0"}  # fail, never prompt, on auth
        self.cache_rules: dict[str, str] = {}

    def argv(self, args: Sequence[str], include: Path | None = None, allow_file: bool = False) -> list[str]:
        argv = ["git"]
        for prefix, mirror in sorted(self.options.mirrors.items()):
            argv += ["-c", f"url.{mirror}.insteadOf={prefix}"]
        if include is not None:
            argv += ["-c", f"include.path={include}"]
        if allow_file or include is not None or any(is_local(m) for m in self.options.mirrors.values()):
            argv += ["-c", "protocol.file.allow=always"]
        return argv + list(args)

    def query(self, args: Sequence[str], cwd: Path, check: bool = True, input: str | None = None,
              env: Mapping[str, str] | None = None) -> Result:
        """A git command whose output is read: never echoed, runs in dry-run too."""
        return run(["git", *args], cwd=cwd, env={**self.env, **(env or {})}, base_env=self.base_env,
                   capture=True, echo=False, check=check, input=input)

    def act(self, args: Sequence[str], cwd: Path | None = None, *, include: Path | None = None,
            allow_file: bool = False, on_line: Callable[[str], None] | None = None,
            echo: bool = True, input: str | None = None, env: Mapping[str, str] | None = None) -> Result:
        """A git command that changes something: echoed, skipped in dry-run."""
        return run(self.argv(args, include, allow_file), cwd=cwd, env={**self.env, **(env or {})},
                   base_env=self.base_env, dry_run=self.options.dry_run, on_line=on_line, echo=echo, input=input)

    def network(self, what: str, url: str, step: Callable[[], T]) -> T:
        """Run a network step up to `retries` times with doubling back-off, then one clear error."""
        delay = self.options.retry_delay
        attempts = self.options.retries
        for attempt in range(1, attempts + 1):
            try:
                return step()
            except CommandError as exc:
                reason = _git_reason(exc.output)
                if attempt == attempts:
                    target, prefix = rewrite(url, self.options.mirrors)
                    rule = f"'{prefix}' -> '{self.options.mirrors[prefix]}'" if prefix else ""
                    via = f" through mirror rule {rule} ({target})" if prefix else ""
                    hint = ("check the mirror (mirrors.git in torchbuild.yaml) and your network" if prefix
                            else "check the url and your network, or add a mirror under mirrors.git in torchbuild.yaml")
                    raise GitError(f"cannot {what} {url}{via} after {attempts} attempt(s): {reason}", hint) from None
                _console.get().warn(f"{what} {url} failed (attempt {attempt}/{attempts}): {reason}; "
                                    f"retrying in {delay:g}s")
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")  # pragma: no cover


def _git_reason(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith(("fatal:", "error:")):
            return ln
    return lines[-1] if lines else "no output"


# ----------------------------------------------------------------------------- the mirror cache


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
        with _locked(mirror.with_suffix(".lock")):
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


@contextlib.contextmanager
def _locked(lockfile: Path) -> Iterator[None]:
    with open(lockfile, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


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


def origin_url(git: Git, repo: Path) -> str | None:
    res = git.query(["config", "--get", "remote.origin.url"], repo, check=False)
    return res.stdout.strip() or None


def head(git: Git, repo: Path) -> str | None:
    res = git.query(["rev-parse", "--verify", "-q", "HEAD^{commit}"], repo, check=False)
    return res.stdout.strip() if res.returncode == 0 else None


def changed_files(git: Git, repo: Path) -> list[str]:
    """Tracked files with uncommitted changes (staged or not)."""
    out = git.query(["status", "--porcelain", "-z", "--untracked-files=no", "--ignore-submodules=all"], repo).stdout
    return [item[3:] for item in out.split("\0") if len(item) > 3]


def local_commits(git: Git, repo: Path) -> int:
    """Commits reachable from HEAD and from no remote branch or tag."""
    res = git.query(["rev-list", "HEAD", "--not", "--remotes", "--tags"], repo, check=False)
    unpushed = set(res.stdout.split())
    if not unpushed:
        return 0
    shallow = git.query(["rev-parse", "--is-shallow-repository"], repo).stdout.strip() == "true"
    if shallow:
        # A shallow clone checks out commits no ref reaches: only commits made here count.
        log = git.query(["reflog", "--format=%H %gs"], repo, check=False).stdout.splitlines()
        made = {ln.split()[0] for ln in log if ln.split(" ", 1)[-1].startswith(("commit", "cherry-pick", "merge"))}
        unpushed &= made
    return len(unpushed)


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
    if commit is None or not _own_toplevel(git, sub) or not _checked_out(git, sub):
        return State(entry, configured_url, None, broken=True)
    if commit == entry.recorded or _patch_base(git, sub) == entry.recorded:
        return State(entry, configured_url, entry.recorded)  # at the recorded commit (+ our patch series)
    return State(entry, configured_url, commit, dirty=tuple(changed_files(git, sub)),
                 local_commits=local_commits(git, sub))


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
    for a in actions:
        label = f"{prefix}{a.entry.path}"
        if a.skip:
            report.skipped.append(f"{label}: {a.skip}")
            con.warn(f"left {label} as it is: {a.skip}")
        if a.sync_url:
            report.changed.append(f"{label}: url {a.previous_url} -> {a.entry.url}")
    to_sync = [a.entry.path for a in actions if a.sync_url]
    if to_sync:
        git.act(["submodule", "sync", "--quiet", "--", *to_sync], repo)
    to_update = [a for a in actions if a.update]
    if to_update:
        _clear_interrupted(git, repo, [a.entry for a in to_update])
        _update_level(git, cache, repo, [a.entry for a in to_update])
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
    was fetched but never checked out (no index) gets its checkout.
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
            if not refs.stdout.strip() or valid.returncode != 0:
                con.info(f"removing the unfinished clone of {e.path} left by an interrupted run")
                shutil.rmtree(gitdir)
            elif not (gitdir / "index").exists() and (sub / ".git").is_file():
                con.info(f"finishing the checkout of {e.path} that an interrupted run began")
                git.act(["checkout", "--quiet", "--detach", "HEAD"], sub)
        gitfile = sub / ".git"
        if gitfile.is_file() and not any(p.name != ".git" for p in sub.iterdir()):
            gitfile.unlink()


def _update_level(git: Git, cache: MirrorCache | None, repo: Path, entries: Sequence[Entry]) -> None:
    """`git submodule update --init` for these entries, in parallel, through the cache."""
    opts = git.options
    con = _console.get()
    git.act(["submodule", "init", "--", *[e.path for e in entries]], repo, echo=False)
    urls = configured_urls(git, repo)
    wanted = {urls.get(e.name, e.url): e.recorded for e in entries}
    mirrors: dict[str, Path] = {}
    if cache is not None:
        done = 0

        def ensure(item: tuple[str, str]) -> tuple[str, Path | None]:
            return item[0], cache.ensure(item[0], item[1])

        with ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
            for url, mirror in pool.map(ensure, wanted.items()):
                done += 1
                con.progress(f"mirrors {done}/{len(wanted)}")
                if mirror is not None:
                    mirrors[url] = mirror
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
    with (cache.rules(mirrors) if cache else contextlib.nullcontext(None)) as include:
        def step() -> Result:
            return git.act(args, repo, include=include, allow_file=allow_file, on_line=progress)
        try:
            git.network("fetch submodules of", str(repo), step)
        except GitError as exc:
            failed = _failed_url(exc.message) or first_url
            raise GitError(exc.message.replace(f"fetch submodules of {repo}", f"fetch submodule {failed}"),
                           exc.hint) from None
    con.clear_progress()


def _failed_url(message: str) -> str | None:
    m = re.search(r"clone of '([^']+)'", message)
    return m.group(1) if m else None


# ----------------------------------------------------------------------------- the superproject


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
    mirrors: dict[str, Path] = {}
    if cache is not None and opts.depth is None:
        mirror = cache.ensure(url)
        if mirror is not None:
            mirrors[url] = mirror
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
        with (cache.rules(mirrors) if cache else contextlib.nullcontext(None)) as include:
            def step() -> Result:
                if partial.exists():
                    shutil.rmtree(partial)
                return git.act(args, include=include, allow_file=is_local(url), on_line=progress)
            git.network("clone", url, step)
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
    mirrors: dict[str, Path] = {}
    if cache is not None and git.options.depth is None:
        mirror = cache.ensure(url)
        if mirror is not None:
            mirrors[url] = mirror
    with (cache.rules(mirrors) if cache else contextlib.nullcontext(None)) as include:
        git.network("fetch", url, lambda: git.act(["fetch", "--quiet", "--tags", "origin"], repo, include=include,
                                                   allow_file=is_local(url)))
    checkout_ref(git, repo, ref, git.options.depth)
