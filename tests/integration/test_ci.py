"""The CI a user copies: the matrix plan, the workflow and GitLab job against their schemas, and one
job of the workflow run the way a hosted runner runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from torchbuild.demo import make_upstream

from ..helpers import REAL_HOME, REPO, inv, make_venv

WORKFLOW = REPO / "ci" / "github-matrix.yml"


SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def github_files(tmp_path: Path) -> dict[str, str]:
    out, summary = tmp_path / "github_output", tmp_path / "step_summary"
    out.write_text("")
    summary.write_text("")
    return {"GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": str(summary)}


def outputs(path: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in Path(path).read_text().splitlines() if "=" in line)


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


def run_steps(steps: list[dict], entry: dict, cwd: Path, env: dict[str, str]) -> None:
    """The `run:` steps of a job, with `${{ matrix.X }}` from its matrix entry, in bash as a runner runs them."""
    for step in steps:
        if "run" not in step:
            continue
        script = step["run"]
        for key, value in entry.items():
            script = script.replace(f"${{{{ matrix.{key} }}}}", str(value))
        assert "${{" not in script, script
        done = subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=900)
        assert done.returncode == 0, f"step failed:\n{script}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"


@pytest.mark.slow
def test_one_job_runs_as_on_a_hosted_runner(tmp_path):
    """CI=true, a fresh HOME, a PATH with only the Python the job provisions (a fresh venv of it, as
    setup-python's), the `run:` steps taken from the workflow itself; the demo upstream by config."""
    minor = "3.12"
    base = shutil.which(f"python{minor}", path=os.pathsep.join(str(p / "bin") for p in
                                                               sorted(REAL_HOME.glob(".pyenv/versions/3.12*"))))
    if base is None:
        base = shutil.which(f"python{minor}")
    if base is None:
        pytest.skip(f"no Python {minor} here to provision the job with")
    repo = tmp_path / "repo"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        src = REPO / name
        if src.is_dir() and not src.is_symlink():
            continue  # the pytorch/ submodule: the job clones it
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), repo / name)
        elif src.exists():
            shutil.copy2(src, repo / name)
    provisioned = tmp_path / "hostedtoolcache" / "Python" / minor
    make_venv(provisioned, base)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = runner\n\temail = runner@example.invalid\n")
    up = make_upstream(tmp_path / "upstream", units=4)
    env = {"CI": "true", "GITHUB_ACTIONS": "true", "HOME": str(home), "PATH": f"{provisioned / 'bin'}:{SYSTEM_PATH}",
           "LANG": "C.UTF-8", "TORCHBUILD_SOURCE_URL": up.url("pytorch"), "TORCHBUILD_MATRIX_PYTHONS": minor,
           "TORCHBUILD_MATRIX_CUDAS": "none", "TORCHBUILD_BUILD_MIN_FREE_GB": "1",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", **github_files(tmp_path)}
    workflow = yaml.safe_load(WORKFLOW.read_text())
    run_steps(workflow["jobs"]["sessions"]["steps"], {}, repo, env)
    produced = outputs(env["GITHUB_OUTPUT"])
    (entry,) = json.loads(produced["matrix"])["include"]
    assert entry["session"] == f"build-{minor}(cuda='none')" and entry["runs-on"] == ["ubuntu-latest"]
    build = workflow["jobs"]["build"]
    setup = next(s for s in build["steps"] if str(s.get("uses", "")).startswith("actions/setup-python"))
    assert setup["with"]["python-version"] == "${{ matrix.python }}" and entry["python"] == minor
    run_steps(build["steps"], entry, repo, env)
    wheels = list((repo / "dist" / f"build-{minor}-cuda-none").glob("minitorch-*.whl"))
    assert wheels and f"cp{minor.replace('.', '')}" in wheels[0].name
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
    assert f"| `{entry['session']}` | {minor} | none | ok |" in summary, summary
    assert list((repo / "logs").rglob("*.log"))  # what the artifact step uploads with dist/


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
