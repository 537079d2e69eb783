"""The nox matrix (sessions from the config, shared compiler cache, summary) and the remote cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchbuild.builder.request import BuildRequest
from torchbuild.demo import make_upstream
from torchbuild.matrix import session_name
from torchbuild.summary import SessionRecord, write_summary

from ..helpers import REAL_HOME, build, git, has_python, inv, project
from ..repo import write_repo


def nox_list(proj: Path, *sessions: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "nox", "--noxfile", str(proj / "noxfile.py"), "-l", "--json",
                          "-s", *sessions],
                         capture_output=True, text=True, check=True, env={**os.environ, "HOME": str(REAL_HOME)})
    return [s["session"] for s in json.loads(out.stdout)]


def test_a_project_without_cuda_gets_one_cpu_session_a_python(tmp_path):
    from ..skbuild import make_skbuild_project

    up = make_skbuild_project(tmp_path / "up", units=1)
    proj = project(tmp_path, f"source:\n  url: {up.as_uri()}\n  path: {tmp_path / 'co'}\n"
                             'matrix:\n  pythons: ["3.10", "3.12"]\n  cudas: ["none", "13.0"]\n'
                             f"paths:\n  cache_dir: {tmp_path / 'cache'}\n")
    inv("clone", root=proj, check=True)
    assert [n for n in nox_list(proj, "build") if n.startswith("build")] == ["build-3.10(cuda='none')",
                                                                             "build-3.12(cuda='none')"]
    planned = inv("matrix", "--dry-run", root=proj, check=True).output  # not PyTorch: none of PyTorch's words
    assert "each session builds the whole project (the split build is PyTorch's)" in planned
    assert "setup.py" not in planned and "PyTorch" not in planned.replace("the split build is PyTorch's", "")
    doctor = inv("doctor", root=proj, check=None).stdout
    assert "build driver" in doctor and "PyTorch" not in doctor and "CUDA job" not in doctor, doctor
    helped = inv("--help", "clone", root=proj, check=True).stdout
    assert "the url's last part" in helped and "pinned commit" not in helped


def test_sessions_come_from_the_config(tmp_path):
    proj = project(tmp_path, 'matrix:\n  pythons: ["3.10", "3.12"]\n  cudas: ["none", "13.0"]\n'
                             '  exclude: ["3.10:13.0"]\n  include: ["3.6:none"]\n'
                             f"paths:\n  cache_dir: {tmp_path / 'cache'}\n")
    names = nox_list(proj, "build", "tests", "lint", "typecheck", "bench")
    builds = [n for n in names if n.startswith("build")]
    assert builds == ["build-3.10(cuda='none')", "build-3.10(cuda='13.0')", "build-3.12(cuda='none')",
                      "build-3.12(cuda='13.0')", "build-3.6(cuda='none')", "build-3.6(cuda='13.0')"]
    assert {"tests", "lint", "typecheck", "bench"} <= set(names)


@pytest.mark.slow
def test_unsupported_pair_is_skipped_with_the_reason(demo_project):
    if not has_python("3.6"):
        pytest.skip("needs pyenv Python 3.6")
    proj, env, _ = demo_project
    yaml = (proj / "torchbuild.yaml").read_text().replace('pythons: ["3.10", "3.12"]', 'pythons: ["3.6"]')
    (proj / "torchbuild.yaml").write_text(yaml)
    done = inv("matrix", root=proj, env=env, timeout=600)
    assert done.returncode == 0, done.output
    assert "PyTorch 2.11.0a0 needs Python >= 3.10, not 3.6" in done.output  # pyproject's requires-python
    assert "`inv clone --ref v1.10.2` checks out a release that supports Python 3.6" in done.output
    (record,) = json.loads((proj / "dist/matrix-summary.json").read_text())["sessions"]
    assert record["result"] == "skipped" and not (proj / "dist" / record["session"]).exists()


def test_a_crashed_session_is_recorded_failed_not_left_ok(tmp_path, monkeypatch):
    """A session whose build crashes with an error torchbuild did not foresee (a slot in a state it could
    not sync, say) is a failed session in the summary, never the "ok" and wheel of the run before."""
    from torchbuild import config, matrix

    checkout = tmp_path / "co"
    checkout.mkdir()
    (checkout / "setup.py").write_text("from setuptools import setup\nsetup(name='x')\n")
    cfg = config.load(tmp_path, {"HOME": str(tmp_path), "TORCHBUILD_SOURCE_PATH": str(checkout),
                                 "TORCHBUILD_MATRIX_SPLIT": "false"})
    name = session_name("3.11", "none")
    summary = tmp_path / "dist" / "matrix-summary.json"
    write_summary(summary, SessionRecord(name, "3.11", "none", result="ok", wheel="old.whl"))

    def crash(cfg: object, request: BuildRequest, env: object) -> None:
        asked.append(request.again())  # what a failed build's hint tells the user to run (issue 58 item 7)
        raise NotADirectoryError(20, "Not a directory", str(tmp_path / "slot" / "minitorch"))

    asked: list[str] = []
    monkeypatch.setattr(matrix, "build_in_slot", crash)
    record = matrix.run_session(cfg, "3.11", "none", env={"PATH": os.environ["PATH"]})
    assert record.result == "failed" and "crashed: NotADirectoryError" in record.reason
    assert asked == [f'inv matrix --session "{name}"']  # not `inv build --cuda none --wheel`: not this session
    (kept,) = json.loads(summary.read_text())["sessions"]
    assert kept["result"] == "failed" and kept["wheel"] is None


def test_a_slots_files_from_the_checkout_are_never_outputs_though_bdist_wheel_rewrites_license(
        small_demo, tmp_path):  # noqa: F811
    """(issue 29)"""
    import json

    from torchbuild.builder import slots

    slot = tmp_path / "slot"
    slots.sync(small_demo, slot)
    license_text = (slot / "LICENSE").read_text()
    build(slot, "--cuda", "none", "--wheel", "--dist", str(tmp_path / "dist"))
    marker = json.loads((slot / "build" / ".torchbuild.json").read_text())
    assert "LICENSE" not in marker["outputs"] and any(n.endswith(".so") for n in marker["outputs"])
    build(slot, "--cuda", "none", "--wheel", "--debug", "--dist", str(tmp_path / "dist"))  # the switch stashes
    assert (slot / "LICENSE").read_text() == license_text
    back = build(slot, "--cuda", "none", "--wheel", "--dist", str(tmp_path / "dist"))
    assert "restored the" in back.stderr and (slot / "LICENSE").read_text() == license_text


def test_a_slots_wheel_names_the_checkouts_commit_as_its_git_version(small_demo, tmp_path):  # noqa: F811
    """Issue 58 item 7: PyTorch's generate_torch_version.py asks git where a .git is: a slot's own git (its HEAD
    the checkout's, the tags on it, the checkout's objects) makes torch.version.git_version the commit, not
    "Unknown"; the checkout's .git registers nothing, and the slot's own edits show as edits."""
    import zipfile

    from torchbuild.builder import slots

    head = git(small_demo, "rev-parse", "HEAD")
    git(small_demo, "tag", "v9.9.9")
    worktrees = git(small_demo, "worktree", "list")
    (small_demo / "setup.cfg").write_text("# an uncommitted file, synced\n")
    slot = tmp_path / "slot"
    slots.sync(small_demo, slot)
    assert git(slot, "rev-parse", "HEAD") == head and git(slot, "describe", "--tags", "--exact") == "v9.9.9"
    assert git(slot, "status", "--porcelain", "--untracked-files=all") == "?? setup.cfg"
    assert git(small_demo, "worktree", "list") == worktrees
    build(slot, "--cuda", "none", "--wheel", "--dist", str(tmp_path / "dist"))
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        said = archive.read("minitorch/version.py").decode()
    assert f"git_version = '{head}'" in said and f"+git{head[:7]}" in wheel.name
    git(small_demo, "commit", "--allow-empty", "-qm", "another")
    slots.sync(small_demo, slot)
    assert git(slot, "rev-parse", "HEAD") == git(small_demo, "rev-parse", "HEAD") != head


def test_a_slot_holds_the_repos_the_build_clones_by_itself_without_their_git(small_demo, tmp_path):
    """Issue 58 item 7: third_party/eigen (and a CUDA build's third_party/nccl) is cloned by the build itself,
    git-ignored in the checkout; a slot without it would clone it again, from its real host."""
    from torchbuild.builder import slots

    eigen = write_repo(small_demo / "third_party" / "eigen", {"include/Eigen/Core": "// eigen\n"}, "eigen")
    slot = tmp_path / "slot"
    slots.sync(small_demo, slot)
    assert (slot / "third_party/eigen/include/Eigen/Core").read_text() == "// eigen\n"
    assert not (slot / "third_party/eigen/.git").exists()
    (eigen / "include/Eigen/Core").write_text("// an edit\n")
    (eigen / "include/Eigen/Dense").write_text("// new\n")
    slots.sync(small_demo, slot)
    assert (slot / "third_party/eigen/include/Eigen/Core").read_text() == "// an edit\n"
    assert (slot / "third_party/eigen/include/Eigen/Dense").is_file()


def test_the_split_build_is_refused_up_front_where_a_project_name_overrides_setup_py(tmp_path):
    """(issue 29)"""
    from torchbuild.builder.request import split_refusal

    today, older = (make_upstream(tmp_path / name, units=1, project_table=table).repo("pytorch")
                    for name, table in (("today", True), ("older", False)))
    assert split_refusal(older) is None
    assert 'pyproject.toml\'s [project] name = "minitorch" is fixed' in (split_refusal(today) or "")
    co = tmp_path / "co"
    inv("clone", "--url", today.as_uri(), "--path", str(co), check=True)
    for part in ("core", "python"):
        done = inv("build", "--path", str(co), "--part", part, check=False)
        assert done.returncode != 0 and "Traceback" not in done.output
        assert f"--part {part}: the checkout at {co} cannot make the split build" in done.stderr
        assert "tagged py3-none-any" in done.stderr
    assert not (co / "build").exists()  # refused before anything ran
