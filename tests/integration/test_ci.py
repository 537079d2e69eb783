"""The CI a user copies: the matrix plan, the workflow and GitLab job against their schemas, and one
job of the workflow run the way a hosted runner runs it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from ..helpers import REPO, WORKFLOW, github_files, inv, outputs


def test_the_matrix_sends_each_session_where_it_can_be_provisioned(tmp_path):
    files = github_files(tmp_path)
    env = {**files, "TORCHBUILD_MATRIX_PYTHONS": "3.6,3.12,3.15", "TORCHBUILD_MATRIX_CUDAS": "none,13.0,12.4"}
    inv("ci.matrix", env=env, check=True)
    jobs = {j["session"]: j for j in json.loads(outputs(files["GITHUB_OUTPUT"])["matrix"])["include"]}
    assert jobs["build-3.12(cuda='none')"]["runs-on"] == ["ubuntu-latest"]
    assert jobs["build-3.12(cuda='13.0')"]["hosted"]  # its toolkit comes from PyPI (inv ci.provision)
    assert jobs["build-3.15(cuda='none')"]["prerelease"] and not jobs["build-3.12(cuda='none')"]["prerelease"]
    assert jobs["build-3.12(cuda='none')"]["artifact"] == "build-3.12-cuda-none"
    assert not any(s.startswith("build-3.6") or "12.4" in s for s in jobs)
    assert outputs(files["GITHUB_OUTPUT"])["count"] == str(len(jobs)) == "4"
    summary = Path(files["GITHUB_STEP_SUMMARY"]).read_text()
    assert "`build-3.6(cuda='none')` | Python 3.6 cannot be installed" in summary
    assert "`build-3.12(cuda='12.4')` | CUDA 12.4 has no nvcc on PyPI" in summary and "ci.runner" in summary

    files = github_files(tmp_path)
    inv("ci.matrix", env={**env, **files, "TORCHBUILD_CI_RUNNER": "self-hosted,gpu"}, check=True)
    jobs = {j["session"]: j for j in json.loads(outputs(files["GITHUB_OUTPUT"])["matrix"])["include"]}
    assert jobs["build-3.6(cuda='12.4')"]["runs-on"] == ["self-hosted", "gpu"]
    assert not jobs["build-3.6(cuda='12.4')"]["hosted"] and len(jobs) == 9
    assert Path(files["GITHUB_STEP_SUMMARY"]).read_text() == ""  # nothing left out


def test_the_workflow_and_the_gitlab_job_validate_against_their_schemas(tmp_path):
    checker = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent)) or "check-jsonschema"
    assert (REPO / ".github" / "workflows" / "matrix.yml").resolve() == WORKFLOW.resolve()
    ok = subprocess.run([checker, "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)], capture_output=True,
                        text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("runs-on: ${{ matrix.runs-on }}", "runs_on: x"))
    assert subprocess.run([checker, "--builtin-schema", "vendor.github-workflows", str(broken)],
                          capture_output=True).returncode != 0  # the check can fail
    gitlab = tmp_path / ".gitlab-ci.yml"
    gitlab.write_text(inv("ci.gitlab", env={"TORCHBUILD_CI_RUNNER": "self-hosted"}, check=True).stdout)
    assert "build-self-hosted:" in gitlab.read_text() and "parallel:" in gitlab.read_text()
    ok = subprocess.run([checker, "--builtin-schema", "vendor.gitlab-ci", str(gitlab)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_the_ci_summary_escapes_cells_and_leaves_out_records_of_another_shape(tmp_path):
    """(issue 29)"""
    import json

    from ..helpers import copy_project

    proj = copy_project(tmp_path / "proj")
    (proj / "dist").mkdir()
    hostile = "boom\n| injected | row |\n<img src=x onerror=alert(1)>"
    (proj / "dist" / "matrix-summary.json").write_text(json.dumps({"sessions": [
        {"session": "build-3.12(cuda='none')", "python": "3.12", "cuda": "none", "result": "failed",
         "seconds": 3.5, "reason": hostile},
        {"session": "build-3.13(cuda='none')", "python": "3.13", "cuda": "none", "seconds": "fast"}]}))
    step = tmp_path / "step.md"
    done = inv("ci.summary", root=proj, env={"GITHUB_STEP_SUMMARY": str(step)}, check=True)
    assert "Traceback" not in done.output and "seconds is 'fast', not float" in done.stderr
    text = step.read_text()
    rows = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert len(rows) == 3 and rows[2].count(" | ") == 6  # header, rule, one row of 7 cells
    assert "<img" not in text and "&lt;img" in text and "\\| injected \\|" in rows[2]
