"""The bisection's own place: a git worktree of the checkout (its own HEAD, index, bisect refs and
submodules; the user's checkout, branch and work are never touched), its env, tree and logs under one
folder, and its state file (what a resume needs)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from ..errors import CommandError, TorchbuildError
from ..locks import state_dir
from ..run import Result, run
from .ladder import Diff

STATE = "state.json"


def home(checkout: Path) -> Path:
    """Everything only a bisection uses: <checkout>/.torchbuild/bisect/ (git is told to ignore .torchbuild/)."""
    return state_dir(checkout) / "bisect"


def git(repo: Path, *args: str, check: bool = True) -> Result:
    return run(["git", *args], cwd=repo, capture=True, echo=False, check=check)


def commit_of(checkout: Path, ref: str, flag: str) -> str:
    """The full sha `ref` names in the checkout; a one-line error naming the flag when it names none."""
    found = git(checkout, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if found.returncode:
        raise TorchbuildError(f"{flag} '{ref}' is not a commit of {checkout}",
                              "pass a branch, tag or sha the checkout has (git log shows them; git fetch brings more)")
    return found.stdout.strip()


def is_ancestor(checkout: Path, old: str, new: str) -> bool:
    return git(checkout, "merge-base", "--is-ancestor", old, new, check=False).returncode == 0


def add(checkout: Path, tree: Path, commit: str) -> None:
    """A detached worktree of the checkout at `commit` (the user's HEAD, branch and files stay as they are)."""
    tree.parent.mkdir(parents=True, exist_ok=True)
    try:
        git(checkout, "worktree", "add", "--detach", "--force", str(tree), commit)
    except CommandError as exc:
        said = next((ln for ln in reversed(exc.output.splitlines()) if ln.strip()), f"exit {exc.returncode}")
        raise TorchbuildError(f"git could not make the bisection's worktree {tree}: {said.strip()}",
                              "fix what git says, then run `inv bisect --reset` and start again") from None


def remove(checkout: Path, place: Path) -> None:
    """The bisection's folder (worktree, env, tree, logs, state) and git's record of that worktree alone (its
    bisect refs and submodules' repos live there), found through the worktree's own .git file: `git worktree
    prune` would also drop the records of the user's worktrees on a disk not mounted now, and `git worktree
    remove` refuses a worktree holding submodules."""
    link = place / "worktree" / ".git"
    record = None
    if link.is_file() and link.read_text().startswith("gitdir:"):
        record = Path(link.read_text()[len("gitdir:"):].strip())
    if record is not None and record.parent.name == "worktrees" and (record / "gitdir").is_file():
        shutil.rmtree(record)
    if place.exists():
        shutil.rmtree(place)


def head(tree: Path) -> str:
    return git(tree, "rev-parse", "HEAD").stdout.strip()


def describe(tree: Path, commit: str) -> tuple[str, str]:
    """A commit's subject and whole message."""
    message = git(tree, "show", "-s", "--format=%B", commit).stdout.strip()
    return (message.splitlines() or [""])[0], message


def diff(tree: Path, old: str, new: str) -> Diff:
    """The files that differ between two commits (submodules by their path), as PyTorch CI's reuse rule reads
    them (--no-renames: a move is a deletion and an addition)."""
    lines = git(tree, "diff", "--name-status", "--no-renames", old, new).stdout.splitlines()
    entries = [(line[0], line.split("\t", 1)[1]) for line in lines if "\t" in line]
    return Diff(tuple(p for _, p in entries), tuple(p for s, p in entries if s == "A"),
                tuple(p for s, p in entries if s == "D"))


def told(tree: Path) -> dict[str, str]:
    """What git's bisect log of the worktree says of each commit (good, bad, skip)."""
    out = git(tree, "bisect", "log", check=False).stdout
    said = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[:2] == ["git", "bisect"] and parts[2] in ("good", "bad", "skip"):
            for sha in parts[3:]:
                said[sha] = parts[2]
    return said


def tell(tree: Path, word: str, commit: str) -> str:
    """`git bisect good|bad|skip COMMIT` in the worktree; its output (the next commit is checked out)."""
    done = git(tree, "bisect", word, commit, check=False)
    if done.returncode and "first bad commit" not in done.stdout and "only 'skip'ped" not in done.stdout:
        raise TorchbuildError(f"git bisect {word} {commit[:10]} failed: {done.stdout.strip()[-200:]}",
                              "run `inv bisect --reset` and start again")
    return done.stdout


def read_state(place: Path) -> dict[str, Any] | None:
    path = place / STATE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except ValueError:
        raise TorchbuildError(f"the bisection's state {path} is damaged (not whole JSON)",
                              "run `inv bisect --reset` and start again") from None
    return data if isinstance(data, dict) else None


def write_state(place: Path, state: dict[str, Any]) -> None:
    """Written whole or not at all (a kill -9 leaves the previous state)."""
    place.mkdir(parents=True, exist_ok=True)
    tmp = place / f".{STATE}.{os.getpid()}"
    tmp.write_text(json.dumps({k: v for k, v in state.items() if not k.startswith("_")}, indent=1))  # _: memory only
    os.replace(tmp, place / STATE)

