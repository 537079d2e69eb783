"""Many processes checking one env dir at once never trip over each other."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from torchbuild.toolchain.system import check_writable


def test_many_env_dir_checks_at_once_never_trip_over_each_other(tmp_path):
    """(issue 15)"""
    with ThreadPoolExecutor(8) as pool:  # a shared probe file made one of two `env.create`s fail in CI
        list(pool.map(lambda _: check_writable(tmp_path / "envs", "env dir", "paths.envs"), range(2000)))
    assert list((tmp_path / "envs").iterdir()) == []
