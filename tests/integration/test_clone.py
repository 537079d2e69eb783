"""`inv clone` and `inv sync` with real git on demo upstreams (nested submodules, depth 2)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchbuild.demo import make_upstream

from ..helpers import REPO, copy_project, git, inv, run_torchbuild, tree_state

SUBMODULE_FILES = ["third_party/fbgemm/LICENSE", "third_party/fbgemm/third_party/asmjit/LICENSE",
                   "third_party/pybind11/LICENSE", "version.txt"]


def clone(up, dest: Path, *extra: str, **kw):
    return inv("clone", "--url", up.url("pytorch"), "--path", str(dest), *extra, **kw)


def test_clone_checks_out_every_nested_submodule(upstream, tmp_path):
    dest = tmp_path / "co"
    done = clone(upstream, dest, check=True)
    for rel in SUBMODULE_FILES:
        assert (dest / rel).is_file(), rel
    assert git(dest / "third_party/fbgemm/third_party/asmjit", "rev-parse", "HEAD") == upstream.head("asmjit")
    # remotes keep the real urls: the mirror cache is not baked into the checkout
    assert git(dest / "third_party/pybind11", "remote", "get-url", "origin") == upstream.url("pybind11")
    assert "checked out" in done.stderr and "3 changed" in done.stderr
    assert not (tmp_path / ".co.partial").exists()


def test_clone_over_a_checkout_made_by_hand_finishes_that_project(upstream, tmp_path):
    """Issue 58 item 9 (correctionlib): `clone` with source.url at its default (PyTorch's) over a checkout made
    by hand (`git clone` without --recursive) finishes that checkout from its own origin, instead of refusing it
    as not PyTorch; a url the user names still has to match."""
    dest, proj = tmp_path / "co", copy_project(tmp_path / "proj")  # no torchbuild.yaml naming a url
    git(tmp_path, "clone", "-q", upstream.url("pytorch"), str(dest))
    done = inv("clone", "--path", str(dest), root=proj, check=True)
    assert f"clone {upstream.url('pytorch')} into" in done.stderr and "https://github.com" not in done.stderr
    for rel in SUBMODULE_FILES:
        assert (dest / rel).is_file(), rel
    other = inv("clone", "--path", str(dest), "--url", "https://github.com/pytorch/pytorch.git", root=proj,
                check=False)
    assert other.returncode != 0 and "is a checkout of" in other.stderr


def test_second_clone_does_nothing_even_offline(upstream, tmp_path):
    dest = tmp_path / "co"
    clone(upstream, dest, check=True)
    before = tree_state(dest)
    upstream.root.rename(tmp_path / "gone")  # the remote is unreachable now
    done = clone(upstream, dest, check=True)
    assert "complete: 3 submodule(s) at their recorded commits, nothing to do" in done.stderr
    assert tree_state(dest) == before


def test_warm_cache_serves_a_second_checkout(upstream, tmp_path):
    clone(upstream, tmp_path / "one", check=True)
    mirrors = sorted(p.name for p in (Path(os.environ["XDG_CACHE_HOME"]) / "torchbuild/git").glob("*.git"))
    assert len(mirrors) == 6  # pytorch, fbgemm, pybind11, asmjit; nccl and eigen, which the build clones itself
    # Submodule repos vanish upstream: only the cache can provide them now.
    for name in ("fbgemm", "pybind11", "asmjit"):
        upstream.repo(name).rename(tmp_path / f"gone-{name}")
    clone(upstream, tmp_path / "two", check=True)
    assert (tmp_path / "two/third_party/fbgemm/third_party/asmjit/LICENSE").is_file()


def test_no_cache_clones_directly(upstream, tmp_path):
    clone(upstream, tmp_path / "co", "--no-cache", check=True)
    assert (tmp_path / "co/third_party/fbgemm/third_party/asmjit/LICENSE").is_file()
    assert not (Path(os.environ["XDG_CACHE_HOME"]) / "torchbuild/git").exists()


def test_mirror_rule_reaches_nested_submodules(tmp_path):
    up = make_upstream(tmp_path / "upstream", url_base="https://git.example.invalid/demo")
    rule = next(iter(up.mirror_rule().items()))
    env = {"TORCHBUILD_MIRRORS_GIT": f"{rule[0]}={rule[1]}"}
    dest = tmp_path / "co"
    inv("clone", "--url", up.url("pytorch"), "--path", str(dest), env=env, check=True)
    assert (dest / "third_party/fbgemm/third_party/asmjit/LICENSE").is_file()
    assert git(dest, "remote", "get-url", "origin") == "https://git.example.invalid/demo/pytorch"
    # Without the rule, the same url is unreachable: a clear error, nothing left behind.
    done = inv("clone", "--url", up.url("pytorch"), "--path", str(tmp_path / "co2"), "--no-cache", check=False)
    assert "cannot clone https://git.example.invalid/demo/pytorch after 3 attempt(s)" in done.stderr
    assert "Traceback" not in done.output
    assert not (tmp_path / "co2").exists() and not (tmp_path / ".co2.partial").exists()


def test_unreachable_mirror_is_named_in_the_error(tmp_path):
    env = {"TORCHBUILD_MIRRORS_GIT": f"https://git.example.invalid/={tmp_path.as_uri()}/nowhere/",
           "TORCHBUILD_GIT_RETRIES": "2"}
    done = inv("clone", "--url", "https://git.example.invalid/x/pytorch.git", "--path", str(tmp_path / "co"),
               env=env, check=False)
    assert done.returncode == 1
    assert "retrying" in done.stderr
    assert "after 2 attempt(s)" in done.stderr
    assert f"through mirror rule 'https://git.example.invalid/' -> '{tmp_path.as_uri()}/nowhere/'" in done.stderr
    assert not (tmp_path / "co").exists()


def test_bad_ref_is_named_and_leaves_nothing(upstream, tmp_path):
    done = clone(upstream, tmp_path / "co", "--ref", "v9.9.9", check=False)
    assert "ref 'v9.9.9' was not found" in done.stderr
    assert not (tmp_path / "co").exists() and not (tmp_path / ".co.partial").exists()


def test_clone_at_a_tag_then_move_the_pin(upstream, tmp_path):
    git(upstream.repo("pytorch"), "tag", "v0.1")
    upstream.advance("pybind11", parents=("pytorch",))
    dest = tmp_path / "co"
    clone(upstream, dest, "--ref", "v0.1", check=True)
    old = git(dest / "third_party/pybind11", "rev-parse", "HEAD")
    assert old != upstream.head("pybind11")
    clone(upstream, dest, "--ref", "main", check=True)
    assert git(dest, "rev-parse", "HEAD") == upstream.head("pytorch")
    assert git(dest / "third_party/pybind11", "rev-parse", "HEAD") == upstream.head("pybind11")
    # Uncommitted work in the checkout stops a move, and survives it.
    (dest / "version.txt").write_text("mine\n")
    done = clone(upstream, dest, "--ref", "v0.1", check=False)
    assert done.returncode == 3 and "uncommitted changes (version.txt)" in done.stderr
    assert (dest / "version.txt").read_text() == "mine\n"


def test_path_that_is_a_non_git_folder_is_refused(upstream, tmp_path):
    dest = tmp_path / "notes"
    dest.mkdir()
    (dest / "todo.txt").write_text("precious\n")
    done = clone(upstream, dest, check=False)
    assert done.returncode == 3 and "exists, is not empty and is not a git checkout" in done.stderr
    assert [p.name for p in dest.iterdir()] == ["todo.txt"] and (dest / "todo.txt").read_text() == "precious\n"


def test_dry_run_creates_nothing(upstream, tmp_path):
    done = clone(upstream, tmp_path / "co", "--dry-run", check=True)
    assert "git" in done.stderr and "clone" in done.stderr
    assert "nothing to do" not in done.stderr and "submodules are read once it is cloned" in done.stderr
    assert not (tmp_path / "co").exists()
    assert not (Path(os.environ["XDG_CACHE_HOME"]) / "torchbuild/git").exists()


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                kids = []
            out += kids
            todo += kids
    return out


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_resume_after_a_killed_clone(upstream, tmp_path, isolated_env, cache):
    """SIGKILL everything while pybind11 is mid-transfer; the next run completes the checkout."""
    flag, started = tmp_path / "slow", tmp_path / "started"
    hook = tmp_path / "slow-pack.sh"
    hook.write_text(f'#!/bin/sh\ncase "$PWD" in *pybind11*) if [ -e {flag} ]; then touch {started}; '
                    f'sleep 60; fi;; esac\nexec "$@"\n')
    hook.chmod(0o755)
    with open(isolated_env / ".gitconfig", "a") as fh:
        fh.write(f"[uploadpack]\n\tpackObjectsHook = {hook}\n")
    flag.touch()
    dest = tmp_path / "co"
    args = [sys.executable, "-m", "invoke", "--search-root", str(REPO), "clone", "--url",
            upstream.url("pytorch"), "--path", str(dest)] + ([] if cache else ["--no-cache"])
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not started.exists():
        assert time.monotonic() < deadline and proc.poll() is None, "clone never reached pybind11"
        time.sleep(0.05)
    for pid in [proc.pid, *_descendants(proc.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
    flag.unlink()
    assert not (dest / "third_party/pybind11/LICENSE").exists()
    done = clone(upstream, dest, check=True)
    for rel in SUBMODULE_FILES:
        assert (dest / rel).is_file(), rel
    assert "Traceback" not in done.output
    assert git(dest, "submodule", "status", "--recursive").count("-") == 0
    inv("sync", "--path", str(dest), check=True)


def test_a_lock_file_left_by_a_killed_git_does_not_stop_the_resume(upstream, tmp_path):
    """What a SIGKILL in the middle of a submodule's clone can leave: its repo fetched but not checked out,
    its own submodules not started, and git's config.lock. The next clone clears the lock and finishes."""

    dest = tmp_path / "co"
    clone(upstream, dest, check=True)
    fbgemm, gitdir = dest / "third_party/fbgemm", dest / ".git/modules/third_party/fbgemm"
    names = git(fbgemm, "config", "--name-only", "--get-regexp", r"^submodule\.").split()
    for section in {n.rsplit(".", 1)[0] for n in names}:
        git(fbgemm, "config", "--remove-section", section)
    shutil.rmtree(gitdir / "modules")
    (gitdir / "index").unlink()
    for child in fbgemm.iterdir():
        if child.name != ".git":
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    (gitdir / "config.lock").write_text("")
    done = clone(upstream, dest, check=True)
    for rel in SUBMODULE_FILES:
        assert (dest / rel).is_file(), rel
    assert "removing config.lock, which the interrupted git left in third_party/fbgemm" in done.stderr
    assert not (gitdir / "config.lock").exists()
    assert git(dest, "status", "--porcelain") == ""


def test_sync_follows_upstream_commits_and_urls(upstream, tmp_path):
    dest = tmp_path / "co"
    clone(upstream, dest, check=True)
    upstream.advance("asmjit", parents=("fbgemm", "pytorch"))
    new_asmjit = upstream.head("asmjit")
    upstream.move_url("pybind11", "pybind11-moved", "pytorch")
    git(dest, "pull", "-q", "--ff-only")
    done = inv("sync", "--path", str(dest), check=True)
    assert git(dest / "third_party/fbgemm/third_party/asmjit", "rev-parse", "HEAD") == new_asmjit
    assert git(dest / "third_party/pybind11", "remote", "get-url", "origin") == upstream.url("pybind11-moved")
    assert f"third_party/pybind11: url {upstream.url('pybind11')} -> {upstream.url('pybind11-moved')}" in done.stderr
    assert "third_party/fbgemm/third_party/asmjit: " in done.stderr
    again = inv("sync", "--path", str(dest), check=True)
    assert "nothing to do" in again.stderr


def test_sync_never_clobbers_a_dirty_submodule(upstream, tmp_path):
    dest = tmp_path / "co"
    clone(upstream, dest, check=True)
    upstream.advance("fbgemm", parents=("pytorch",))
    upstream.advance("pybind11", parents=("pytorch",))
    git(dest, "pull", "-q", "--ff-only")
    work = dest / "third_party/fbgemm/LICENSE"
    work.write_text("days of work\n")
    old_fbgemm = git(dest / "third_party/fbgemm", "rev-parse", "HEAD")
    done = inv("sync", "--path", str(dest), check=False)
    assert done.returncode == 3
    assert "left third_party/fbgemm as it is: uncommitted changes (LICENSE)" in done.stderr
    assert "inv sync --force-skip" in done.stderr
    assert work.read_text() == "days of work\n"
    assert git(dest / "third_party/fbgemm", "rev-parse", "HEAD") == old_fbgemm
    assert git(dest / "third_party/pybind11", "rev-parse", "HEAD") == upstream.head("pybind11")  # others go on
    ok = inv("sync", "--path", str(dest), "--force-skip", check=True)
    assert "1 left as they are" in ok.stderr and work.read_text() == "days of work\n"


def test_sync_keeps_local_commits_in_a_submodule(upstream, tmp_path):
    dest = tmp_path / "co"
    clone(upstream, dest, check=True)
    sub = dest / "third_party/pybind11"
    (sub / "mine.txt").write_text("local fix\n")
    git(sub, "add", "mine.txt")
    git(sub, "commit", "-qm", "local fix")
    mine = git(sub, "rev-parse", "HEAD")
    done = inv("sync", "--path", str(dest), check=False)
    assert done.returncode == 3 and "1 local commit(s) not in its remote" in done.stderr
    assert git(sub, "rev-parse", "HEAD") == mine


def test_sync_keeps_a_submodule_on_an_orphan_branch(upstream, tmp_path):
    """A submodule with a branch of local work, then `git checkout --orphan`: its HEAD names no commit, yet
    its repo is the user's, not an unfinished clone; sync names it and removes nothing."""
    dest = tmp_path / "co"
    clone(upstream, dest, check=True)
    sub = dest / "third_party/pybind11"
    git(sub, "checkout", "-q", "-b", "mywork")
    (sub / "mine.txt").write_text("local work\n")
    git(sub, "add", "mine.txt")
    git(sub, "commit", "-qm", "local work")
    mine = git(sub, "rev-parse", "HEAD")
    git(sub, "checkout", "-q", "--orphan", "experiment")
    done = inv("sync", "--path", str(dest), check=False)
    assert done.returncode == 3 and "third_party/pybind11: its HEAD names no commit yet" in done.stderr
    assert "removing the unfinished clone" not in done.stderr
    assert git(sub, "rev-parse", "mywork") == mine and git(sub, "symbolic-ref", "HEAD") == "refs/heads/experiment"


def test_sync_without_a_checkout_says_to_clone(tmp_path):
    done = inv("sync", "--path", str(tmp_path / "none"), check=False)
    assert done.returncode == 1 and "run `inv clone` first" in done.stderr


def test_registered_submodule_is_initialised_in_place(upstream, tmp_path):
    project = copy_project(tmp_path / "project")
    git(project, "init", "-q", "-b", "main")
    url = upstream.url("pytorch")
    git(project, "config", "-f", ".gitmodules", "submodule.pytorch.path", "pytorch")
    git(project, "config", "-f", ".gitmodules", "submodule.pytorch.url", url)
    git(project, "update-index", "--add", "--cacheinfo", f"160000,{upstream.head('pytorch')},pytorch")
    git(project, "add", ".gitmodules", "tasks.py")
    git(project, "commit", "-qm", "pin pytorch")
    upstream.advance("pybind11", parents=("pytorch",))  # upstream moves on; the pin stays
    (project / "torchbuild.yaml").write_text(f"source:\n  url: {url}\n")
    inv("clone", root=project, check=True)
    assert git(project / "pytorch", "rev-parse", "HEAD") == git(project, "ls-files", "-s", "pytorch").split()[1]
    assert (project / "pytorch/third_party/fbgemm/third_party/asmjit/LICENSE").is_file()
    assert git(project, "config", "--get", "submodule.pytorch.url") == url
    assert git(project, "status", "--porcelain", "--untracked-files=no") == ""  # still the pinned commit


def files_under(*roots: Path) -> list[Path]:
    return [p for root in roots if root.exists() for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


def _mirror(cache: Path, name: str) -> Path:
    return next(p for p in (cache / "git").glob(f"*{name}-*.git") if p.is_dir())


@pytest.mark.parametrize("damage", ["deleted pack", "truncated pack", "half-made mirror"])
def test_a_broken_mirror_is_repaired_and_never_cloned_from(upstream, tmp_path, isolated_env, damage):
    """(issue 15)"""
    inv("clone", "--url", upstream.url("pytorch"), "--path", str(tmp_path / "first"), check=True)
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "torchbuild"
    name = "fbgemm" if damage == "deleted pack" else "pytorch"
    mirror = _mirror(cache, name)
    packs = sorted((mirror / "objects/pack").glob("*.pack"), key=lambda p: p.stat().st_size)
    if damage == "deleted pack":
        for pack in packs:
            pack.unlink()
            pack.with_suffix(".idx").unlink()
    elif damage == "truncated pack":
        data = packs[-1].read_bytes()
        packs[-1].write_bytes(data[: len(data) // 2])
    else:
        (mirror / "HEAD").unlink()
    done = inv("clone", "--url", upstream.url("pytorch"), "--path", str(tmp_path / "second"), check=True)
    assert "is broken" in done.stderr and "making it again from the upstream" in done.stderr
    second = tmp_path / "second"
    for repo in (second, second / "third_party/fbgemm", second / "third_party/fbgemm/third_party/asmjit"):
        subprocess.run(["git", "fsck", "--no-progress"], cwd=repo, check=True, capture_output=True)
    assert (second / "third_party/fbgemm/third_party/asmjit/LICENSE").exists()
    assert git(second, "submodule", "status", "--recursive").count("-") == 0
    assert subprocess.run(["git", "fsck", "--connectivity-only"], cwd=_mirror(cache, name),
                          capture_output=True).returncode == 0


def test_checkouts_share_no_object_files_with_the_cache(upstream, tmp_path, isolated_env):
    """(issue 15)"""
    inv("clone", "--url", upstream.url("pytorch"), "--path", str(tmp_path / "co"), check=True)
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "torchbuild" / "git"
    cached = {(p.stat().st_dev, p.stat().st_ino) for p in files_under(cache)}
    mine = {(p.stat().st_dev, p.stat().st_ino) for p in files_under(tmp_path / "co")}
    assert cached and not cached & mine


def test_clone_url_goes_into_the_folder_git_names_and_an_ssh_login_is_no_secret(tmp_path):
    """(issue 31)"""
    ssh = run_torchbuild("clone", "--url", "ssh://git@git.example.invalid/pybind/cmake_example.git", "--dry-run",
                     cwd=tmp_path)
    assert ssh.returncode == 0, ssh.stderr
    assert "clone ssh://git@git.example.invalid/pybind/cmake_example.git into cmake_example" in ssh.stderr
    token = run_torchbuild("clone", "--url", "https://t0ken-abc@git.example.invalid/pybind/cmake_example", "--dry-run",
                       cwd=tmp_path)
    assert "t0ken-abc" not in token.stderr + token.stdout and "https://***@git.example.invalid" in token.stderr
    assert not (tmp_path / "cmake_example").exists() and not (tmp_path / "pytorch").exists()  # a dry run
