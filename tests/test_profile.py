"""The build profile: where a build's time went, as a table, in the record, as a Chrome trace and a timeline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchbuild.builder import profile

from .test_build import build, shared, small_demo  # noqa: F401  (fixtures)


def test_ninja_log_runs_are_anchored_and_steps_told_apart(tmp_path):
    log = tmp_path / ".ninja_log"
    base = 1_800_000_000 * 10**9
    log.write_text("# ninja log v7\n"
                   f"0\t500\t{base}\tCMakeFiles/c10.dir/a.cpp.o\th\n"
                   f"10\t400\t{base}\tCMakeFiles/c10.dir/b.cpp.o\th\n"
                   f"500\t900\t{base}\tlibc10.so\th\n"
                   f"900\t950\t{base}\tCMakeFiles/gen_torch_version\th\n"
                   f"0\t20\t{base + 5 * 10**9}\tCMakeFiles/install.util\th\n")  # a second ninja run, 5 s later
    steps = profile.ninja_steps(log, 0)
    assert [s.kind for s in steps] == ["compile", "compile", "link", "codegen", "codegen"]
    assert steps[0].start == pytest.approx(1_800_000_000.0) and steps[2].seconds == pytest.approx(0.4)
    assert steps[4].start == pytest.approx(1_800_000_005.0)  # its own run's clock
    assert profile.lanes(steps[:3]) == [0, 1, 0]  # b starts while a runs; the link after a
    assert profile.ninja_steps(log, log.stat().st_size) == []  # only what this build appended


@pytest.mark.slow
def test_a_build_shows_keeps_and_draws_where_its_time_went(small_demo, monkeypatch):  # noqa: F811
    monkeypatch.setenv("TORCHBUILD_CACHE_TOOL", "none")  # real compiles
    monkeypatch.setenv("TORCHBUILD_BUILD_JOBS", "2")
    done = build(small_demo, "--cuda", "none", "--clean")
    assert "where the time went: prepare" in done.output and "configure" in done.output
    assert "slowest units: " in done.output and "slowest links: " in done.output
    logs = Path(__import__("os").environ["TORCHBUILD_PATHS_LOGS"])
    (trace_file,) = logs.rglob("*.trace.json")
    events = json.loads(trace_file.read_text())["traceEvents"]
    compiles = [e for e in events if e.get("cat") == "compile"]
    assert len(compiles) == 9  # 4 units, checksum, fbgemm, api, the attention kernel, the bindings' module
    assert {e["tid"] for e in events if e.get("cat") in ("compile", "link")} <= {1, 2}  # at most MAX_JOBS=2 lanes
    assert {"configure", "compile and link", "install", "build_ext"} <= {e["name"] for e in events
                                                                          if e.get("cat") == "phase"}
    page = trace_file.with_name(trace_file.name.replace(".trace.json", ".profile.html")).read_text()
    assert "<svg" in page and "unit_00.cpp.o" in page
    (kept,) = logs.rglob("*.record.json")
    assert json.loads(kept.read_text())["profile"]["compile"]["steps"] == 9
    shown = build(small_demo, "--profile")
    assert "slowest units" in shown.output and str(trace_file) in shown.output
    again = build(small_demo, "--cuda", "none")  # up to date: nothing runs, nothing is profiled
    assert "up to date" in again.output and "where the time went" not in again.output
    assert len(list(logs.rglob("*.trace.json"))) == 1


def test_a_log_ninja_compacted_during_the_build_keeps_only_this_builds_steps(tmp_path):
    log = tmp_path / ".ninja_log"
    base = 1_800_000_000 * 10**9
    log.write_text("# ninja log v7\n"
                   f"0\t500\t{base - 3600 * 10**9}\tCMakeFiles/c10.dir/old.cpp.o\th\n"  # an hour before, kept
                   f"0\t300\t{base}\tCMakeFiles/c10.dir/new.cpp.o\th\n")
    steps = profile.ninja_steps(log, 10_000, since=1_800_000_000 - 0.2)  # the offset is past the rewritten end
    assert [s.output for s in steps] == ["CMakeFiles/c10.dir/new.cpp.o"]
