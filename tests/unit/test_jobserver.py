"""The matrix's one job budget: a real GNU make jobserver (fifo), real ninja builds sharing it, and
the build slots that let two builds of one checkout run at once."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

from torchbuild import jobserver
from torchbuild.builder import slots
from torchbuild.builder.ownership.trees import build_lock

from ..helpers import git


def test_a_ninja_without_the_jobserver_gets_the_free_tokens_as_its_jobs(tmp_path):
    with jobserver.serve(3) as makeflags:
        fifo = jobserver.fifo_of(makeflags)
        assert fifo is not None
        with jobserver.take(fifo, 8) as first:
            assert first.count == 3  # all that were free
            got: list[float] = []

            def second() -> None:
                with jobserver.take(fifo, 8) as held:
                    got.append(held.waited)

            t = threading.Thread(target=second)
            t.start()
            time.sleep(0.5)
            assert not got  # none free: the second build waits
        t.join(timeout=10)
    assert got and got[0] >= 0.4  # it got its token once the first gave them back
    assert jobserver.fifo_of(makeflags) is None  # the fifo is gone with the server


def test_old_ninja_does_not_count_as_joining():
    assert jobserver.joins_by_itself("1.13.0.git.kitware.jobserver-pipe-1")
    assert not jobserver.joins_by_itself("1.11.1") and not jobserver.joins_by_itself(None)


def committed_repo(path: Path, files: dict[str, str]) -> Path:
    """A new git repo at `path` with `files` committed."""
    path.mkdir()
    git(path, "init", "-q")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", ".")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", path.name)
    return path


def test_a_slot_mirrors_the_working_tree_and_only_what_git_shows(tmp_path):
    sub = committed_repo(tmp_path / "sub-upstream", {"lib.c": "int lib;\n"})
    co = tmp_path / "co"
    co.mkdir()
    git(co, "init", "-q")
    (co / ".gitignore").write_text("*.o\n")
    (co / "a.py").write_text("A = 1\n")
    (co / "gone.py").write_text("x\n")
    git(co, "add", ".")
    git(co, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "third_party/sub")
    git(co, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "co")
    (co / "a.py").write_text("A = 2  # uncommitted\n")
    (co / "new.py").write_text("NEW = 1\n")  # untracked, not ignored
    (co / "junk.o").write_text("ignored\n")
    (co / "build").mkdir()
    (co / "build" / "CMakeCache.txt").write_text("a build tree\n")
    slot = slots.slot_path(tmp_path / "cache", co, 1)
    assert slots.sync(co, slot) == 6  # .gitignore, .gitmodules, a.py, gone.py, new.py, third_party/sub/lib.c
    assert (slot / "a.py").read_text() == "A = 2  # uncommitted\n" and (slot / "new.py").exists()
    assert (slot / "third_party/sub/lib.c").read_text() == "int lib;\n"
    assert not (slot / "junk.o").exists() and not (slot / "build").exists()
    assert (slot / ".git").read_text() == f"gitdir: {slot / '.torchbuild' / 'git'}\n"  # its own, not the checkout's
    (co / "gone.py").unlink()
    git(co, "rm", "-q", "--cached", "gone.py")
    assert slots.sync(co, slot) == 0 and not (slot / "gone.py").exists()  # removed, nothing copied again
    (co / "new.py").write_text("NEW = 22\n")
    assert slots.sync(co, slot) == 1 and (slot / "new.py").read_text() == "NEW = 22\n"
    shutil.rmtree(slot)


def test_a_slot_holds_the_builds_own_clone_folder_even_where_it_is_no_repo(tmp_path):
    """Issue 69 item 1: PyTorch's checkout_nccl() clones only where third_party/nccl does not exist; a folder that
    is no repo (unpacked from an archive, left by another tool) was not copied into the slot, so the slot's CUDA
    build cloned it from GitHub, and failed offline."""
    co = committed_repo(tmp_path / "co", {
        ".gitignore": "third_party/nccl/\n",
        "tools/optional_submodules.py": '_checkout_by_tag("https://github.com/NVIDIA/nccl", tag)\n'})
    nccl = co / "third_party" / "nccl"
    (nccl / "src").mkdir(parents=True)
    (nccl / "src" / "nccl.h.in").write_text("#define NCCL_MAJOR 2\n")
    (nccl / "makefiles").symlink_to(tmp_path, target_is_directory=True)  # a link: listed, never followed
    slot = slots.slot_path(tmp_path / "cache", co, 1)
    slots.sync(co, slot)
    assert (slot / "third_party/nccl/src/nccl.h.in").read_text() == "#define NCCL_MAJOR 2\n"
    assert (slot / "third_party/nccl/makefiles").is_symlink()


def test_a_slot_never_writes_through_a_link_and_follows_deletions_and_new_folders(tmp_path):
    """A link in the checkout leading out of it, later replaced by a real folder: the slot replaces its
    link and never writes outside; a tracked file deleted from the working tree leaves the slot; a file
    that became a folder is replaced by the folder (no crash in later syncs)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("precious\n")
    co = committed_repo(tmp_path / "co", {"a.py": "A = 1\n", "extra.py": "X = 1\n", "mod.py": "M = 1\n"})
    (co / "data").symlink_to(outside)
    slot = slots.slot_path(tmp_path / "cache", co, 1)
    slots.sync(co, slot)
    assert (slot / "data").is_symlink() and (slot / "extra.py").exists()
    (co / "data").unlink()
    (co / "data").mkdir()
    (co / "data" / "notes.txt").write_text("the checkout's\n")
    (co / "extra.py").unlink()  # deleted, not yet committed
    (co / "mod.py").unlink()
    (co / "mod.py").mkdir()  # a file became a folder (a package)
    (co / "mod.py" / "__init__.py").write_text("P = 1\n")
    slots.sync(co, slot)
    assert (outside / "notes.txt").read_text() == "precious\n"  # nothing written through the old link
    assert not (slot / "data").is_symlink() and (slot / "data/notes.txt").read_text() == "the checkout's\n"
    assert not (slot / "extra.py").exists()
    assert (slot / "mod.py" / "__init__.py").read_text() == "P = 1\n"
    assert slots.sync(co, slot) == 0  # and the next sync finds it all in place


def test_holding_the_checkout_never_shows_in_git_status(tmp_path):
    """The slot and build locks live in .torchbuild/, which git ignores before it exists: a matrix session
    that reads `git status` beside a build holding them sees the checkout as it is (and stays up to date)."""
    co = committed_repo(tmp_path / "co", {"a.py": "A = 1\n"})
    (co / ".git/info/exclude").write_text("# mine\n*.scratch")  # the user's own, without a last newline
    with slots.take_slot(tmp_path / "cache", co, 1) as where:
        assert where == co and (co / ".torchbuild" / "slot.lock").exists()
        assert git(co, "status", "--porcelain", "--untracked-files=all") == ""
        with build_lock(co):
            assert git(co, "status", "--porcelain", "--untracked-files=all") == ""
    assert (co / ".git/info/exclude").read_text() == "# mine\n*.scratch\n/.torchbuild/\n"  # kept, added once
