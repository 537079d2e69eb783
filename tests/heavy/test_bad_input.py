"""The heavy tier's scenarios of tests/integration/test_bad_input.py's area, half a minute or more each (`nox -s
heavy`, and CI after README's test command): user files survive clone sync patch and build."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..helpers import git, inv


def digest(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def test_user_files_survive_clone_sync_patch_and_build(bare_demo, tmp_path):
    dest = tmp_path / "co"
    inv("clone", "--url", bare_demo.url("pytorch"), "--path", str(dest), check=True)
    mine = [dest / "notes.txt", dest / "third_party/fbgemm/scratch.cpp", dest / "third_party/pybind11/LICENSE"]
    mine[0].write_text("untracked notes\n")
    mine[1].write_text("// untracked work in a submodule\n")
    mine[2].write_text("a dirty tracked file in a submodule\n")
    before = digest(mine)
    bare_demo.advance("pybind11", parents=("pytorch",))
    git(dest, "pull", "-q", "--ff-only")
    inv("clone", "--url", bare_demo.url("pytorch"), "--path", str(dest), "--force-skip", check=True)
    inv("sync", "--path", str(dest), "--force-skip", check=True)
    series = tmp_path / "patches"
    series.mkdir()
    (series / "series").write_text("")
    inv("patch.apply", "--path", str(dest), "--patches", str(series), check=True)
    inv("build", "--path", str(dest), "--cuda", "none", check=True, timeout=600)
    assert digest(mine) == before
