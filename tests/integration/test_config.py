"""Config: defaults < torchbuild.yaml < environment < flags, and errors that name file, line and key."""

from __future__ import annotations

from pathlib import Path

from torchbuild import config

from ..helpers import inv


def load(tmp_path: Path, text: str | None, env: dict | None = None, flags: dict | None = None) -> config.Config:
    if text is not None:
        (tmp_path / "torchbuild.yaml").write_text(text)
    return config.load(tmp_path, env or {"HOME": str(tmp_path)}, flags)


def test_inv_config_shows_values_and_origins(tmp_path):
    (tmp_path / "tb.yaml").write_text("git:\n  retries: 7\n")
    done = inv("config", env={"TORCHBUILD_CONFIG": str(tmp_path / "tb.yaml"), "TORCHBUILD_GIT_JOBS": "5"}, check=True)
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if not line.startswith("#")}
    assert lines["git.retries"].split()[1] == "7" and lines["git.retries"].endswith("tb.yaml:2")
    assert lines["git.jobs"].split()[1] == "5" and lines["git.jobs"].endswith("env TORCHBUILD_GIT_JOBS")
    assert lines["source.path"].split()[1] == "pytorch" and lines["source.path"].endswith("default")


def test_malformed_yaml_is_one_line_error_and_exit_2(tmp_path):
    (tmp_path / "tb.yaml").write_text("git:\n  jobs: 4\n  shallow: yes\n")
    done = inv("clone", "--path", str(tmp_path / "co"), env={"TORCHBUILD_CONFIG": str(tmp_path / "tb.yaml")})
    assert done.returncode == 2
    assert "tb.yaml:3: unknown key 'git.shallow' (did you mean 'shallow_submodules'?)" in done.stderr
    assert "Traceback" not in done.output
    assert not (tmp_path / "co").exists()


def test_bad_flag_value_names_the_flag(tmp_path):
    done = inv("clone", "--jobs", "0", "--path", str(tmp_path / "co"))
    assert done.returncode == 2 and "--jobs: must be at least 1, got 0" in done.stderr


def test_unknown_task_flag_is_refused(tmp_path):
    done = inv("clone", "--colour", "blue")
    assert done.returncode != 0 and "--colour" in done.output


def test_matrix_envs_stay_out_of_a_checkout_that_is_the_project(tmp_path):
    """nox's envs (16k files a `matrix` run) go to .nox/ of a project with its own torchbuild.yaml, and into
    torchbuild's own .torchbuild/ where the project is the checkout itself: never beside its sources."""
    env = {"HOME": str(tmp_path)}
    assert load(tmp_path, None).nox_envs == tmp_path.resolve() / ".nox"
    checkout = tmp_path / "co"
    (checkout / ".git").mkdir(parents=True)
    (checkout / "setup.py").write_text("")
    project = config.project_at(checkout, env)
    cfg = config.load(project.root, env, None, project.defaults)
    assert cfg.nox_envs == checkout.resolve() / ".torchbuild" / "nox"


def test_env_name_and_git_jobs_are_bounded(tmp_path):
    """(issue 15)"""
    bad_env = inv("env.activate", "../../etc", check=False)
    assert bad_env.returncode == 1 and "is not a plain name" in bad_env.stderr
    jobs = inv("clone", "--jobs", "100000000000000000000000", "--dry-run", check=False)
    assert jobs.returncode == 2 and "must be at most 256" in jobs.stderr
