"""The matrix's one job budget: a real GNU make jobserver (fifo), real ninja builds sharing it, and
the build slots that let two builds of one checkout run at once."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from torchbuild import jobserver

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
