"""The cheapest correct way to a commit's binaries, and what a step's outcome means: pure, data in, data out.

    kept    the bisection's tree already holds binaries built from this commit (or serves its Python over them)
    python  the difference from the kept binaries' commit touches only Python files (PyTorch CI's reuse rule,
            .github/actions/reuse-old-whl/reuse_old_whl.py): that commit's Python over them, nothing compiled
    nightly a nightly wheel built from it, or from a commit whose difference from it is Python only (prebuilt.py)
    build   an incremental build in the bisection's tree, sharing the compiler cache with the user's builds
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

PR = (re.compile(r"\(#(\d+)\)\s*$"), re.compile(r"Pull Request resolved: \S*/pull/(\d+)"))


@dataclass(frozen=True)
class Way:
    kind: str  # "kept", "python", "nightly" or "build"
    why: str


@dataclass(frozen=True)
class Diff:
    """What changed between the kept binaries' commit and the one to test (git diff --name-status)."""

    changed: tuple[str, ...]
    added: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()


def reusable(path: str, package: str) -> bool:
    """PyTorch CI's rule for reusing a wheel: Python of the package (not its csrc/), Python tests, docs."""
    if path.startswith(f"{package}/") and path.endswith(".py") and not path.startswith(f"{package}/csrc/"):
        return True
    return (path.startswith("test/") and path.endswith(".py")) or \
        (path.startswith("docs/") and path.endswith((".md", ".rst")))


def choose(commit: str, built: str | None, serving: str | None, diff: Diff | None, package: str,
           maps_files: bool) -> Way:
    """The way to `commit`'s binaries: `built` is the commit the tree's binaries were built from (None: none
    to trust), `serving` the commit whose Python is over them now, `diff` the difference from `built`;
    `maps_files`: the editable install maps the package file by file (scikit-build-core's redirect), so a new
    module is found only after an install."""
    if built is not None and serving == commit:
        return Way("kept", f"the binaries of {built[:10]} already serve {commit[:10]}" if built != commit
                   else f"binaries built from {commit[:10]} are in the bisection's tree")
    if built is None or diff is None:
        return Way("build", "no binaries of this configuration kept yet (or the last build failed)")
    if not diff.changed:
        return Way("python", f"the same files as {built[:10]}: its binaries, this commit's version")
    native = [p for p in diff.changed if not reusable(p, package)]
    gone = [p for p in diff.deleted if p.startswith(f"{package}/")]
    new = [p for p in diff.added if maps_files and p.startswith(f"{package}/")]
    if native:
        named = ", ".join(native[:3]) + (", ..." if len(native) > 3 else "")
        return Way("build", f"{len(native)} of the {len(diff.changed)} file(s) changed since {built[:10]} "
                            f"are not the package's Python ({named})")
    if gone:
        return Way("build", f"{gone[0]} is deleted since {built[:10]} (its binaries' files would stay)")
    if new:
        return Way("build", f"{new[0]} is new since {built[:10]}, and the editable install maps files one by one")
    return Way("python", f"the {len(diff.changed)} file(s) changed since {built[:10]} are Python only "
                         f"({', '.join(diff.changed[:3])}{', ...' if len(diff.changed) > 3 else ''}): "
                         "its binaries, this commit's Python, nothing compiled")


def verdict(code: int) -> str | None:
    """What COMMAND's exit says, as `git bisect run` reads it: good, skip (125), bad (1-127); None: abort."""
    if code == 0:
        return "good"
    if code == 125:
        return "skip"
    return "bad" if 0 < code < 128 else None


def pr_number(message: str) -> str | None:
    """The pull request a commit came from: `(#123)` ending its subject, or ghstack's `Pull Request resolved:`."""
    subject = message.splitlines()[0] if message else ""
    found = PR[0].search(subject) or PR[1].search(message)
    return found.group(1) if found else None


def first_bad(output: str) -> tuple[str, ...]:
    """The first bad commit `git bisect` names ("<sha> is the first bad commit"), or the candidates it is left
    with when only skipped commits remain; () while it goes on."""
    found = re.search(r"^([0-9a-f]{40}) is the first bad commit", output, re.M)
    if found:
        return (found.group(1),)
    if "only 'skip'ped commits left" in output:
        return tuple(re.findall(r"^([0-9a-f]{40})$", output, re.M))
    return ()


def rewrite_version(text: str, built: str, commit: str) -> str:
    """version.py of `built`'s build saying `commit` (its `+git<sha7>` and git_version), as PyTorch CI
    rewrites a reused wheel's version.py."""
    return text.replace(built, commit).replace(f"+git{built[:7]}", f"+git{commit[:7]}")


def summary(ways: Sequence[str]) -> str:
    """`7 step(s): 2 built, 3 Python only, 1 kept, 1 skipped`-style count of the ways used."""
    names = {"build": "built", "nightly": "from a nightly", "python": "Python only", "kept": "kept",
             "failed": "did not build"}
    counts = {names[k]: ways.count(k) for k in names if ways.count(k)}
    return f"{len(ways)} step(s): " + ", ".join(f"{n} {name}" for name, n in counts.items())
