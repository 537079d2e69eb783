"""Taking the series off (`revert`) and writing local commits back out as a series (`export`)."""

from __future__ import annotations

from pathlib import Path

from ..errors import UnsafeToProceed
from ..git import Git, changed_files
from .apply import checkout_turn, symref
from .series import (
    BASE_REF,
    BRANCH,
    BRANCH_REF,
    ORIGIN_REF,
    PatchError,
    applied_ids,
    branch_of,
    load_patches,
    read_series,
    ref_sha,
    submodules,
)


def revert(git: Git, checkout: Path, patches_dir: Path) -> list[str]:
    """Take the series off every repo that has it: HEAD back on the base, branch and base ref gone (under
    the checkout's lock, as apply)."""
    with checkout_turn(git, checkout, "reverting patches in"):
        return _revert(git, checkout, patches_dir)


def _revert(git: Git, checkout: Path, patches_dir: Path) -> list[str]:
    targets = [""] + sorted({e.target for e in read_series(patches_dir) if e.target})
    done = []
    for target in targets:
        repo = checkout / target if target else checkout
        base = ref_sha(git, repo, BASE_REF) if (repo / ".git").exists() else None
        if base is None:
            continue
        on_branch = branch_of(git, repo) == BRANCH_REF
        tip = "HEAD" if on_branch else BRANCH_REF
        if ref_sha(git, repo, tip) is None:
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
            origin = symref(git, repo, ORIGIN_REF)
            back = origin[len("refs/heads/"):] if origin and ref_sha(git, repo, origin) == base else None
            git.act(["checkout", "--quiet", *([back] if back else ["--detach", base])], repo)
        git.act(["branch", "-D", "--quiet", BRANCH], repo, echo=False)
        git.act(["update-ref", "-d", BASE_REF], repo, echo=False)
        if symref(git, repo, ORIGIN_REF):
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
        base = since if (since and not target) else ref_sha(git, repo, BASE_REF)
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
    return sorted(path for path in submodules(git, checkout)
                  if path not in known and ref_sha(git, checkout / path, BASE_REF) is not None)
