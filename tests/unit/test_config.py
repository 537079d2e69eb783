"""Config: defaults < torchbuild.yaml < environment < flags, and errors that name file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchbuild import config
from torchbuild.errors import ConfigError


def load(tmp_path: Path, text: str | None, env: dict | None = None, flags: dict | None = None) -> config.Config:
    if text is not None:
        (tmp_path / "torchbuild.yaml").write_text(text)
    return config.load(tmp_path, env or {"HOME": str(tmp_path)}, flags)


def test_defaults_without_a_file(tmp_path):
    cfg = load(tmp_path, None)
    assert cfg.file is None
    assert cfg.source.path == "pytorch" and cfg.git.cache is True and cfg.git.jobs is None
    assert cfg.source_path == tmp_path.resolve() / "pytorch"
    assert all(origin == "default" for _, _, origin in cfg.items())


def test_precedence_file_then_env_then_flags(tmp_path):
    text = "git:\n  jobs: 3\n  retries: 5\nsource:\n  ref: v2.5.0\n"
    env = {"TORCHBUILD_GIT_JOBS": "6", "HOME": "/h"}
    cfg = load(tmp_path, text, env=env, flags={"git.jobs": "9", "source.url": None})
    assert cfg.git.jobs == 9 and cfg.origins["git.jobs"] == "flag --jobs"
    assert cfg.git.retries == 5 and cfg.origins["git.retries"].endswith("torchbuild.yaml:3")
    assert cfg.source.ref == "v2.5.0"
    cfg = load(tmp_path, text, env=env)
    assert cfg.git.jobs == 6 and cfg.origins["git.jobs"] == "env TORCHBUILD_GIT_JOBS"


def test_env_parses_lists_mappings_and_booleans(tmp_path):
    env = {"TORCHBUILD_MATRIX_PYTHONS": "3.8, 3.12", "TORCHBUILD_MIRRORS_GIT": "https://github.com/=https://m.example/gh/",
           "TORCHBUILD_GIT_CACHE": "off", "HOME": "/h"}
    cfg = load(tmp_path, None, env=env)
    assert cfg.matrix.pythons == ["3.8", "3.12"]
    assert cfg.mirrors.git == {"https://github.com/": "https://m.example/gh/"}
    assert cfg.git.cache is False


def test_config_is_frozen(tmp_path):
    cfg = load(tmp_path, None)
    with pytest.raises(AttributeError):
        cfg.git.jobs = 4  # type: ignore[misc]


@pytest.mark.parametrize("text, expected", [
    ("git:\n  jobs: 2\n  jbos: 4\n", r"torchbuild.yaml:3: unknown key 'git.jbos' \(did you mean 'jobs'\?\)"),
    ("sourc:\n  url: x\n", r"torchbuild.yaml:1: unknown section 'sourc' \(did you mean 'source'\?\)"),
    ("git:\n  jobs: many\n", r"torchbuild.yaml:2: git.jobs: expected a whole number, got 'many'"),
    ("git:\n  jobs: -2\n", r"torchbuild.yaml:2: git.jobs: must be at least 1, got -2"),
    ("build:\n  cuda: banana\n", r"torchbuild.yaml:2: build.cuda: bad CUDA version 'banana'"),
    ("matrix:\n  pythons: [3.10]\n", r"torchbuild.yaml:2: matrix.pythons: Python versions must be quoted"),
    ("git:\n  cache: maybe\n", r"torchbuild.yaml:2: git.cache: expected true or false"),
    ("git:\n  jobs: 2\n  jobs: 3\n", r"torchbuild.yaml:3: 'git.jobs' is set twice \(first at line 2\)"),
    ("source:\n  url: [a\n", r"torchbuild.yaml:\d+: YAML syntax error"),
    ("- a\n- b\n", r"torchbuild.yaml:1: the file must be a mapping"),
    ("mirrors:\n  git: [a, b]\n", r"torchbuild.yaml:2: mirrors.git: expected a mapping, got a list"),
    ("build:\n  min_free_gb: .nan\n", r"torchbuild.yaml:2: build.min_free_gb: expected a number, got nan"),
    ("build:\n  jobs: 99999999999999999999\n", r"torchbuild.yaml:2: build.jobs: must be at most 4096"),
    ("build:\n  env:\n    A: [1, 2]\n", r"torchbuild.yaml:2: build.env: A: expected text, got a list"),
    ("build:\n  env: &a\n    X: *a\n", r"torchbuild.yaml:2: 'build.env' cannot be read: .*recursive"),
])
def test_bad_yaml_names_file_line_and_key(tmp_path, text, expected):
    with pytest.raises(ConfigError, match=expected) as info:
        load(tmp_path, text)
    assert info.value.hint


def test_bad_environment_value_names_the_variable(tmp_path):
    with pytest.raises(ConfigError, match="environment TORCHBUILD_GIT_RETRIES: expected a whole number"):
        load(tmp_path, None, env={"TORCHBUILD_GIT_RETRIES": "x", "HOME": "/h"})
