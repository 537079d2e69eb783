"""The git runner, url helpers and basic repo queries.

Every git command goes through run.py. Mirrors are `-c url.<mirror>.insteadOf=<prefix>`,
which git passes on to every nested submodule command.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence, TypeVar

from .. import console as _console
from ..errors import CommandError, GitError
from ..run import Result, run

T = TypeVar("T")
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
PATCH_BASE_REF = "refs/torchbuild/base"  # where patches.py's series starts in a repo

# ----------------------------------------------------------------------------- pure helpers


def rewrite(url: str, rules: Mapping[str, str]) -> tuple[str, str | None]:
    """Apply git's insteadOf semantics: the longest matching prefix wins. Returns (url, prefix)."""
    rules = ssh_spellings(rules)
    best = max((p for p in rules if url.startswith(p)), key=len, default=None)
    if best is None:
        return url, None
    return rules[best] + url[len(best):], best


SCP_HOST = re.compile(r"^(?:https?|ssh|git)://(?:[^@/]+@)?([^/:]+)/(.*)$")


def ssh_spellings(rules: Mapping[str, str]) -> dict[str, str]:
    """Mirror rules with the scp-like ssh spelling of each https/ssh prefix added (a rule for
    `https://github.com/` also takes `git@github.com:` and `ssh://git@github.com/`, as old .gitmodules
    name submodules); a spelling the rules give themselves is kept."""
    out = dict(rules)
    for prefix, target in rules.items():
        found = SCP_HOST.match(prefix)
        if found:
            host, path = found.groups()
            for spelling in (f"git@{host}:{path}", f"ssh://git@{host}/{path}"):
                out.setdefault(spelling, target)
    return out


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

def cacheable(url: str) -> bool:
    """URLs go through the mirror cache; plain paths cannot (git applies insteadOf to URLs only)."""
    return "://" in url or bool(re.match(r"^[\w.-]+@[\w.-]+:", url))


def is_local(url: str) -> bool:
    return url.startswith(("/", "./", "../", "file://")) or (os.sep == "\\" and ":" in url[:3])


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

    def argv(self, args: Sequence[str], include: Path | None = None, allow_file: bool = False,
             config: Mapping[str, str] | None = None) -> list[str]:
        argv = ["git"]
        for prefix, mirror in sorted(ssh_spellings(self.options.mirrors).items()):
            argv += ["-c", f"url.{mirror}.insteadOf={prefix}"]
        for key, value in sorted((config or {}).items()):
            argv += ["-c", f"{key}={value}"]
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
            echo: bool = True, input: str | None = None, env: Mapping[str, str] | None = None,
            config: Mapping[str, str] | None = None) -> Result:
        """A git command that changes something: echoed, skipped in dry-run (`config`: `-c` settings)."""
        return run(self.argv(args, include, allow_file, config), cwd=cwd, env={**self.env, **(env or {})},
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
                    raise GitError(f"cannot {what} {url}{via} after {attempts} attempt(s): {reason}", hint,
                                   exc.output) from None
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



# ----------------------------------------------------------------------------- queries


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

