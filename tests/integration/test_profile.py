"""The build profile: where a build's time went, as a table, in the record, as a Chrome trace and a timeline."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ..helpers import build


@pytest.mark.slow
def test_a_build_shows_keeps_and_draws_where_its_time_went(small_demo, monkeypatch):  # noqa: F811
    monkeypatch.setenv("TORCHBUILD_CACHE_TOOL", "none")  # real compiles
    monkeypatch.setenv("TORCHBUILD_BUILD_JOBS", "2")
    done = build(small_demo, "--cuda", "none", "--clean")
    assert "where the time went: prepare" in done.output and "configure" in done.output
    assert "slowest units: " in done.output and "slowest links: " in done.output
    assert re.search(r"why the compiler cache missed: \d+ compile\(s\) with no compiler cache: cache.tool is none",
                     done.output), done.output
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
