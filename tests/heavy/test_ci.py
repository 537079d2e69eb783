"""The heavy tier's scenarios of tests/integration/test_ci.py's area, half a minute or more each (`nox -s heavy`, and
CI after README's test command): one job runs as on a hosted runner."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from torchbuild.demo import make_upstream

from ..helpers import REAL_HOME, REPO, WORKFLOW, github_files, make_venv, outputs

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


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
