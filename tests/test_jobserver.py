"""The matrix's one job budget: a real GNU make jobserver (fifo), real ninja builds sharing it, and
the build slots that let two builds of one checkout run at once."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from torchbuild import jobserver
from torchbuild.builder import slots
from torchbuild.builder.ownership.trees import build_lock

from .conftest import git

NINJA = Path(sys.executable).parent / "ninja"  # the test extra's ninja (>= 1.13)


def sleepy_project(folder: Path, jobs: int, log: Path) -> Path:
    """A ninja project of `jobs` independent one-second jobs, each logging its start and end."""
    folder.mkdir(parents=True)
    rule = (f"rule s\n  command = sh -c 'echo start $$(date +%s.%N) >> {log}; sleep 1; "
            f"echo end $$(date +%s.%N) >> {log}; touch $out'\n")
    (folder / "build.ninja").write_text(rule + "".join(f"build o{i}: s\n" for i in range(jobs)))
    return folder


def most_at_once(log: Path) -> int:
    events = sorted((float(t), 1 if kind == "start" else -1) for kind, t in (line.split() for line in
                                                                            log.read_text().splitlines()))
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def test_two_ninjas_under_one_jobserver_never_exceed_its_tokens(tmp_path):
    version = subprocess.run([str(NINJA), "--version"], capture_output=True, text=True).stdout
    if not jobserver.joins_by_itself(version):
        pytest.skip(f"ninja {version.strip()} does not join a jobserver (the test extra installs ninja>=1.13)")
    log = tmp_path / "jobs.log"
    projects = [sleepy_project(tmp_path / name, 4, log) for name in ("a", "b")]
    with jobserver.serve(3) as makeflags:
        fifo = jobserver.fifo_of(makeflags)
        assert fifo is not None
        env = {"MAKEFLAGS": makeflags, "PATH": "/usr/bin:/bin"}

        def build(folder: Path) -> None:  # as a build does: hold one token for ninja's own first job
            with jobserver.take(fifo, 1):
                subprocess.run([str(NINJA), "-C", str(folder)], env=env, check=True, capture_output=True)

        threads = [threading.Thread(target=build, args=(p,)) for p in projects]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert most_at_once(log) == 3  # 2 x ninja's default (cores + 2) without it


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


def test_configuring_and_building_wait_for_a_token_through_the_shim(tmp_path):
    """The jobserver's `cmake`: asking the version or a capability never waits for a token; a configure
    (it compiles: compiler identification, try_compile checks) and `cmake --build` wait while none is
    free, hold one while they run, say how long they waited, and a cmake one of them started
    (TORCHBUILD_JOB_HELD) does not take a second one."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.18)\nproject(p NONE)\n"
                                        "add_custom_target(t ALL COMMAND ${CMAKE_COMMAND} -E echo built)\n")
    waits = tmp_path / "waits"
    with jobserver.serve(1) as makeflags:
        fifo = jobserver.fifo_of(makeflags)
        assert fifo is not None
        shims = jobserver.shims_of(fifo)
        assert shims is not None
        env = {"MAKEFLAGS": makeflags, "PATH": f"{shims}:{Path(sys.executable).parent}:/usr/bin:/bin",
               jobserver.WAITS: str(waits)}

        def cmake(*args: str, **extra: str) -> tuple[float, subprocess.CompletedProcess[str]]:
            start = time.monotonic()
            done = subprocess.run(["cmake", *args], env={**env, **extra}, capture_output=True, text=True,
                                  timeout=60)
            return time.monotonic() - start, done

        def waits_for_the_token(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
            got: list[tuple[float, subprocess.CompletedProcess[str]]] = []
            with jobserver.take(fifo, 1):  # another build holds the only token
                t = threading.Thread(target=lambda: got.append(cmake(*args)))
                t.start()
                time.sleep(1.0)
                assert not got, args  # no token free: it waits
            t.join(timeout=60)
            return got[0]

        with jobserver.take(fifo, 1):
            quick, version = cmake("--version")
            assert version.returncode == 0 and "cmake version" in version.stdout and quick < 2
            quick, caps = cmake("-E", "capabilities")  # PyTorch's cmake.py asks this of every cmake
            assert caps.returncode == 0 and quick < 2
            _, nested = cmake("-S", str(src), "-B", str(tmp_path / "b0"), "-G", "Ninja", **{jobserver.HELD: "1"})
            assert nested.returncode == 0 and not waits.exists()
        took, configured = waits_for_the_token("-S", str(src), "-B", str(tmp_path / "b"), "-G", "Ninja")
        assert configured.returncode == 0 and took >= 0.9, configured.stderr
        took, built = waits_for_the_token("--build", str(tmp_path / "b"))
        assert built.returncode == 0 and "built" in built.stdout and took >= 0.9
        each = [float(line) for line in waits.read_text().split()]  # the shim's own record of each wait
        assert len(each) == 2 and all(0.05 <= w < 5 for w in each)  # both waited (for the token held ~1 s)
        assert jobserver.waited(str(waits)) == sum(each) and not waits.exists()
        with jobserver.take(fifo, 1) as held:
            assert held.count == 1  # the shims gave their token back


def test_old_ninja_does_not_count_as_joining():
    assert jobserver.joins_by_itself("1.13.0.git.kitware.jobserver-pipe-1")
    assert not jobserver.joins_by_itself("1.11.1") and not jobserver.joins_by_itself(None)


def committed_repo(path: Path, files: dict[str, str]) -> Path:
    """A new git repo at `path` with `files` committed."""
    path.mkdir()
    git(path, "init", "-q")
    for name, text in files.items():
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
    assert not (slot / "junk.o").exists() and not (slot / "build").exists() and not (slot / ".git").exists()
    (co / "gone.py").unlink()
    git(co, "rm", "-q", "--cached", "gone.py")
    assert slots.sync(co, slot) == 0 and not (slot / "gone.py").exists()  # removed, nothing copied again
    (co / "new.py").write_text("NEW = 22\n")
    assert slots.sync(co, slot) == 1 and (slot / "new.py").read_text() == "NEW = 22\n"
    shutil.rmtree(slot)


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
