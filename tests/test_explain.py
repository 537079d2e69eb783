"""`inv build --explain`: what the next build would run, grouped by cause, and about how long, on a real ninja
graph (the demo); nothing is built."""

from __future__ import annotations

import re
from pathlib import Path

from .test_build import build, shared, small_demo  # noqa: F401  (fixtures)
from .test_shortcut import edit


def objects(checkout: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in (checkout / "build").rglob("*.o")}


def test_explain_names_the_cause_counts_the_steps_and_builds_nothing(small_demo):  # noqa: F811
    co = small_demo
    build(co, "--cuda", "none")
    assert "ninja has no work in the tree" in build(co, "--cuda", "none", "--explain").stdout
    (co / "c10/include/c10/core.h").write_text((co / "c10/include/c10/core.h").read_text() + "// every unit\n")
    edit(co / "c10/core/unit_01.cpp", "(n / 2)", "(n / 4)")
    before = objects(co)
    said = build(co, "--cuda", "none", "--explain").stdout
    assert objects(co) == before  # nothing compiled, nothing touched
    header = re.search(r"c10/include/c10/core\.h: (\d+) step\(s\) \(a header", said)
    total = re.search(r"ninja would run (\d+) step\(s\)", said)
    assert header and total and int(header.group(1)) >= 4, said  # 3 other units and checksum.cpp include it
    assert "c10/core/unit_01.cpp: 1 step(s) (a source file)" in said  # edited last: its newest input
    assert re.search(r"estimate: \d+ step\(s\), [\d.]+s of compile and link work, about [\d.]+s at MAX_JOBS=\d", said)
    done = build(co, "--cuda", "none")
    compiles = int(re.search(r"(\d+) compile step\(s\)", done.stderr).group(1))
    assert compiles == int(header.group(1)) + 1  # what ninja said it would compile, it compiled
    fresh = build(co, "--cuda", "none", "--debug", "--explain").stdout
    assert "no tree of py" in fresh and "-cpu-debug yet: a build from nothing" in fresh
    assert not (co / ".torchbuild" / "trees").exists() or not any((co / ".torchbuild" / "trees").glob("*debug*"))
