"""At PyTorch's size, small (issue 55): the demo at 10x its counts (240 units, 900 installed headers in
PyTorch's include layout, 200 modules, a 30 MB libtorch, a codegen input 100 units include) builds, its no-op
runs nothing, --explain names the codegen's fan-out, and a switch back moves the libraries, never copies them."""

from __future__ import annotations

import re

import pytest

from torchbuild.demo import Size, make_upstream

from ..helpers import UP_TO_DATE, build, inv, run_python


@pytest.mark.slow
@pytest.mark.timeout(1200)  # 240 units built twice: 173 s alone, several times that beside the tier's other tests
def test_the_demo_at_ten_times_its_counts_builds_no_ops_and_switches_without_a_copy(tmp_path, shared, monkeypatch):
    for key, value in {**shared, "TORCHBUILD_PATHS_LOGS": str(tmp_path / "logs")}.items():
        monkeypatch.setenv(key, value)
    size = Size().scaled(10)
    up = make_upstream(tmp_path / "up", size=size)
    co = tmp_path / "co"
    inv("clone", "--url", up.url("pytorch"), "--path", str(co), check=True)
    build(co, "--cuda", "none")
    assert len(list((co / "minitorch/include/ATen/ops").glob("*.h"))) == size.headers
    library = co / "minitorch/lib/libtorch.so"
    assert library.stat().st_size > size.pad_mb << 20
    assert run_python("import minitorch._ops as o, minitorch._ops.op_00199 as m; print(o.COUNT, m.op(1))", tmp_path) \
        == "200 200"
    assert UP_TO_DATE in build(co, "--cuda", "none").stderr

    yaml = co / "aten/src/ATen/native/native_functions.yaml"
    yaml.write_text(yaml.read_text() + "- func: added_op(int n) -> int\n")
    explained = build(co, "--cuda", "none", "--explain").stdout
    fanned = next(line for line in explained.splitlines() if "native_functions.yaml" in line)
    compiles = re.search(r"ninja would run \d+ step\(s\), (\d+) of them compile step", explained)
    assert "a codegen input" in fanned and compiles and int(compiles.group(1)) == size.fanout, explained
    build(co, "--cuda", "none")

    inode = library.stat().st_ino
    build(co, "--cuda", "none", "--debug")
    back = build(co, "--cuda", "none")
    assert UP_TO_DATE in back.stderr and library.stat().st_ino == inode  # moved back, not copied
