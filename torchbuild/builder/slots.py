"""Build slots: copies of the checkout's working tree, so builds side by side do not take turns.

PyTorch's setup.py builds in the checkout's own build/ (and writes into its source folders), so two
builds of one checkout cannot run at once. `inv matrix` gives each session running beside another
a slot: slot 0 is the checkout itself; slot N is a folder in the cache kept equal to the checkout's
working tree (tracked and untracked files that git does not ignore, submodules' too; the build trees
and the git metadata stay out). Syncing copies only what changed since the last sync, and a slot
keeps its build trees, so a slot's rebuild is incremental and, with the shared compiler cache
(CCACHE_BASEDIR), its first build mostly hits.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Iterator

from ..git import buildclones
from ..locks import STATE, state_dir
from ..run import run

SLOT_FILES = "slot-files.json"  # in a slot's .torchbuild/: the files its last sync copied from the checkout
SLOT_GIT = "git"  # in a slot's .torchbuild/: its own git dir (own_git)
SLOTS_ENV = "TORCHBUILD_MATRIX_SLOTS"  # how many slots the sessions of an `inv matrix` run may use


def slot_path(cache_root: Path, checkout: Path, index: int) -> Path:
    if index == 0:
        return checkout
    tag = hashlib.sha256(str(checkout).encode()).hexdigest()[:8]
    return cache_root / "slots" / f"{checkout.name}-{tag}" / str(index)


@contextlib.contextmanager
def take_slot(cache_root: Path, checkout: Path, count: int) -> Iterator[Path]:
    """Hold a free one of `count` slots, synced to the checkout; yields its path. The copies come first,
    which leaves the checkout to the split build's core; with all busy, waits for the checkout."""
    for index in [*range(1, max(1, count)), 0]:
        path = slot_path(cache_root, checkout, index)
        lockfile = (state_dir(checkout) / "slot.lock") if index == 0 else path.with_suffix(".lock")
        lockfile.parent.mkdir(parents=True, exist_ok=True)
        fh = open(lockfile, "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            continue
        try:
            if index:
                sync(checkout, path)
            yield path
            return
        finally:
            fh.close()
    with open(state_dir(checkout) / "slot.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield checkout


def source_files(slot: Path) -> set[str]:
    """The files a slot holds from the source checkout (its last sync): never a build's outputs, even
    where a build rewrites one (PyTorch's bdist_wheel writes LICENSE back, concat_license_files)."""
    try:
        listed = json.loads((slot / STATE / SLOT_FILES).read_text())
    except (OSError, ValueError):
        return set()
    return {str(n) for n in listed} if isinstance(listed, list) else set()


def tracked_files(root: Path, prefix: str = "") -> list[str]:
    """Paths (relative to the top checkout) of the files git shows in `root`'s working tree: tracked and
    untracked-but-not-ignored, recursing into submodules (gitlinks) and the git-ignored folders the build clones
    into by itself, repos or not (third_party/nccl: PyTorch's checkout_nccl clones only where the folder does not
    exist, so a slot without it would clone it again, from its real host)."""
    if not (root / ".git").exists():
        return []
    staged = run(["git", "ls-files", "-z", "--stage"], cwd=root, capture=True, echo=False).stdout
    others = run(["git", "ls-files", "-z", "--others", "--exclude-standard"], cwd=root, capture=True,
                 echo=False).stdout
    out = []
    for entry in filter(None, staged.split("\0")):
        if not prefix and entry.partition("\t")[2].split("/", 1)[0] in ("build", STATE):
            continue  # torchbuild's own build trees and state, even where git does not ignore them
        meta, _, rel = entry.partition("\t")
        if meta.startswith("160000"):  # a submodule: its own files
            out += tracked_files(root / rel, f"{prefix}{rel}/")
        else:
            out.append(prefix + rel)
    out += [prefix + rel for rel in filter(None, others.split("\0"))
            if prefix or rel.split("/", 1)[0] not in ("build", STATE)]
    for clone in [] if prefix else buildclones.folders(root):  # third_party/nccl: the build's own clones
        if (root / clone).is_dir() and not (root / clone).is_symlink() \
                and not any(p.startswith(f"{clone}/") for p in out):  # the build asks only that it exists
            out += tracked_files(root / clone, f"{clone}/") if (root / clone / ".git").exists() \
                else files_under(root, clone)
    return out


def files_under(root: Path, folder: str) -> list[str]:
    """Every file under `root/folder` (a build-time clone's folder that is no repo: unpacked from an archive, left
    by another tool), relative to `root`; links are listed, never followed."""
    out = []
    for here, dirs, files in os.walk(root / folder):
        rel = os.path.relpath(here, root)
        out += [f"{rel}/{name}" for name in files]
        out += [f"{rel}/{name}" for name in dirs if os.path.islink(os.path.join(here, name))]
    return out


def sync(checkout: Path, slot: Path) -> int:
    """Make `slot` hold the checkout's working tree: copy new and changed files (size or mtime), remove
    the ones deleted or gone since the last sync. Never through a link: a link or file in the slot where
    the checkout has a folder is replaced by a real folder, so nothing outside the slot is written or
    removed. Returns how many files were copied."""
    listing = slot / STATE / SLOT_FILES
    try:
        before = set(json.loads(listing.read_text()))
    except (OSError, ValueError):
        before = set()
    files = sorted(set(tracked_files(checkout)))
    slot.mkdir(parents=True, exist_ok=True)
    copied = 0
    for rel in files:
        src, dst = checkout / rel, slot / rel
        try:
            st = src.lstat()
        except FileNotFoundError:  # deleted in the working tree, not yet in git: gone from the slot too
            remove(slot, rel)
            continue
        if src.is_dir() and not src.is_symlink():  # a tracked file became a folder: its files are listed
            continue
        try:
            dt = dst.lstat()
            same = (dt.st_size, dt.st_mtime_ns) == (st.st_size, st.st_mtime_ns) and src.is_symlink() == dst.is_symlink()
        except (FileNotFoundError, NotADirectoryError):
            same = False
        if not same or not inside(slot, rel):
            real_folders(slot, rel)
            if dst.is_dir() and not dst.is_symlink():  # a folder became a file
                shutil.rmtree(dst)
            elif dst.is_symlink() or dst.exists():
                dst.unlink()
            shutil.copy2(src, dst, follow_symlinks=False)
            copied += 1
    for rel in before - set(files):
        remove(slot, rel)
    listing.parent.mkdir(parents=True, exist_ok=True)
    tmp = listing.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(files))
    tmp.replace(listing)
    own_git(checkout, slot)
    return copied


def own_git(checkout: Path, slot: Path) -> None:
    """The slot's own git (`.torchbuild/git`, `.git` a file naming it): HEAD at the checkout's commit, the tags
    on that commit, the index that commit's tree, the objects the checkout's (read through
    `objects/info/alternates`, never written). git in the slot then answers as in the checkout: PyTorch's
    tools/generate_torch_version.py asks `git rev-parse HEAD` where a `.git` is (torch.version.git_version;
    "Unknown" without) and `git describe --tags --exact` (a release's version). The slot's edits show as
    edits. Nothing of the checkout's .git is written (no worktree of it is registered)."""
    head = git_out(checkout, "rev-parse", "--verify", "-q", "HEAD")
    common = git_out(checkout, "rev-parse", "--path-format=absolute", "--git-common-dir")
    if not head or not common:
        return
    gitdir = slot / STATE / SLOT_GIT
    if not (gitdir / "HEAD").is_file():
        run(["git", "init", "-q", "--bare", str(gitdir)], capture=True, echo=False)
        run(["git", "--git-dir", str(gitdir), "config", "core.bare", "false"], capture=True, echo=False)
        (gitdir / "info").mkdir(exist_ok=True)
        (gitdir / "info" / "exclude").write_text(f"/{STATE}/\n")
    (gitdir / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (gitdir / "objects" / "info" / "alternates").write_text(f"{common}/objects\n")
    if (Path(common) / "shallow").is_file():
        shutil.copy2(Path(common) / "shallow", gitdir / "shallow")
    (slot / ".git").write_text(f"gitdir: {gitdir}\n")
    if git_out(slot, "rev-parse", "--verify", "-q", "HEAD") == head:
        return
    tags = git_out(checkout, "for-each-ref", "--points-at", head, "--format=%(objectname) %(refname)", "refs/tags")
    refs = "".join(f"{line}\n" for line in tags.splitlines() if line)
    (gitdir / "packed-refs").write_text(f"# pack-refs with: peeled fully-peeled sorted\n{refs}")
    shutil.rmtree(gitdir / "refs" / "tags", ignore_errors=True)
    run(["git", "update-ref", "--no-deref", "HEAD", head], cwd=slot, capture=True, echo=False)
    run(["git", "read-tree", head], cwd=slot, capture=True, echo=False)


def git_out(repo: Path, *args: str) -> str:
    done = run(["git", *args], cwd=repo, capture=True, echo=False, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def inside(slot: Path, rel: str) -> bool:
    """Whether `rel`'s folders in the slot are real folders (no link that could lead out of it)."""
    here = slot
    for part in Path(rel).parent.parts:
        here = here / part
        if here.is_symlink() or not here.is_dir():
            return False
    return True


def real_folders(slot: Path, rel: str) -> None:
    """Make `rel`'s folders real folders in the slot: a link or a file in the way is removed (the link
    itself, never what it points to)."""
    here = slot
    for part in Path(rel).parent.parts:
        here = here / part
        if here.is_symlink() or (here.exists() and not here.is_dir()):
            here.unlink()
        if not here.exists():
            here.mkdir()


def remove(slot: Path, rel: str) -> None:
    """Remove a file from the slot, unless it lies behind a link (then it is not the slot's)."""
    if inside(slot, rel):
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, NotADirectoryError):
            (slot / rel).unlink()
