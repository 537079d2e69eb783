"""The heavy tier's scenarios of tests/integration/test_concurrency.py's area, half a minute or more each (`nox -s
heavy`, and CI after README's test command): two checkouts sharing one cache dir build at once."""

from __future__ import annotations

import subprocess
import sys

from ..helpers import REAL_HOME, REPO


def test_two_checkouts_sharing_one_cache_dir_build_at_once(upstream, tmp_path, monkeypatch):
    """What two matrices share (mirrors, the compiler cache, the envs) under concurrent use. (issue 15)"""
    for key, value in {"TORCHBUILD_PATHS_ENVS": tmp_path / "envs", "TORCHBUILD_BUILD_MIN_FREE_GB": "1",
                       "TORCHBUILD_PATHS_LOGS": tmp_path / "logs", "TORCHBUILD_BUILD_CUDA": "none",
                       "PIP_CACHE_DIR": REAL_HOME / ".cache" / "pip"}.items():
        monkeypatch.setenv(key, str(value))
    argv = [sys.executable, "-m", "invoke", "--search-root", str(REPO)]
    clones = [subprocess.Popen([*argv, "clone", "--url", upstream.url("pytorch"), "--path", str(tmp_path / n)],
                               stderr=subprocess.PIPE, text=True) for n in ("one", "two")]
    assert [c.wait(timeout=300) for c in clones] == [0, 0]
    builds = [subprocess.Popen([*argv, "build", "--path", str(tmp_path / n)], stderr=subprocess.PIPE, text=True)
              for n in ("one", "two")]
    errs = [b.communicate(timeout=600)[1] for b in builds]
    assert [b.returncode for b in builds] == [0, 0], errs
    assert all("built in" in e for e in errs)
