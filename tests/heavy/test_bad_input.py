"""Faults and bad input: every failure is one clear message, and nothing of the user's is lost.

The rest of the fault table lives next to the feature it guards: killed clone (test_clone:
test_resume_after_a_killed_clone), unreachable mirror (test_clone), dirty/locally-committed
submodules (test_clone), patch conflict (test_patches), malformed yaml (test_config), two builds
at once and SIGINT during a build (test_build)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from torchbuild.demo import make_upstream

from ..helpers import git, inv


@pytest.fixture
def demo(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHBUILD_BUILD_MIN_FREE_GB", "1")
    up = make_upstream(tmp_path / "upstream", units=4)
    return up


def digest(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def test_user_files_survive_clone_sync_patch_and_build(demo, tmp_path):
    dest = tmp_path / "co"
    inv("clone", "--url", demo.url("pytorch"), "--path", str(dest), check=True)
    mine = [dest / "notes.txt", dest / "third_party/fbgemm/scratch.cpp", dest / "third_party/pybind11/LICENSE"]
    mine[0].write_text("untracked notes\n")
    mine[1].write_text("// untracked work in a submodule\n")
    mine[2].write_text("a dirty tracked file in a submodule\n")
    before = digest(mine)
    demo.advance("pybind11", parents=("pytorch",))
    git(dest, "pull", "-q", "--ff-only")
    inv("clone", "--url", demo.url("pytorch"), "--path", str(dest), "--force-skip", check=True)
    inv("sync", "--path", str(dest), "--force-skip", check=True)
    series = tmp_path / "patches"
    series.mkdir()
    (series / "series").write_text("")
    inv("patch.apply", "--path", str(dest), "--patches", str(series), check=True)
    inv("build", "--path", str(dest), "--cuda", "none", check=True, timeout=600)
    assert digest(mine) == before
