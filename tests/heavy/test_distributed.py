"""The heavy tier's scenarios of tests/integration/test_distributed.py's area, half a minute or more each (`nox -s
heavy`, and CI after README's test command): distcc compiles on the hosts behind ccache; a host that drops out mid
build falls back to local; sccache local disk cache serves a second checkout."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchbuild.demo import make_upstream

from ..helpers import REAL_HOME, REPO, env_python, free_port, inv, wait_for_port

DISTCCD = shutil.which("distccd")


needs_distcc = pytest.mark.skipif(DISTCCD is None or shutil.which("distcc") is None,
                                  reason="distcc/distccd are not installed (apt-get install distcc; .ci/run does)")


@pytest.fixture
def distccd(tmp_path):
    """Two distccd daemons on loopback, 2 slots each; their logs are files the test reads."""
    daemons = []
    for name in ("a", "b"):
        port = free_port()
        log = open(tmp_path / f"distccd-{name}.log", "wb")
        proc = subprocess.Popen([DISTCCD, "--no-detach", "--daemon", "--port", str(port), "--listen", "127.0.0.1",
                                 "--allow", "127.0.0.1", "--jobs", "2", "--log-stderr", "--log-level", "info",
                                 "--enable-tcp-insecure"], stdout=subprocess.DEVNULL, stderr=log,
                                start_new_session=True)
        wait_for_port(port, proc, "distccd")
        daemons.append((f"127.0.0.1:{port}/2", proc, tmp_path / f"distccd-{name}.log"))
    yield daemons
    for _, proc, _ in daemons:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


UNITS = 8  # the core's units: enough that both hosts get work and one can drop out with jobs still to come


@pytest.fixture
def demo_env(tmp_path, shared, monkeypatch):  # noqa: F811
    """A demo checkout with its own (cold) compiler cache; the env dir is shared with test_build."""
    monkeypatch.setenv("PIP_CACHE_DIR", str(REAL_HOME / ".cache" / "pip"))
    for key, value in {"TORCHBUILD_PATHS_ENVS": shared["TORCHBUILD_PATHS_ENVS"],
                       "TORCHBUILD_PATHS_CACHE_DIR": tmp_path / "cache",
                       "TORCHBUILD_PATHS_LOGS": tmp_path / "logs", "TORCHBUILD_BUILD_MIN_FREE_GB": "1",
                       "TORCHBUILD_BUILD_CUDA": "none"}.items():
        monkeypatch.setenv(key, str(value))
    up = make_upstream(tmp_path / "upstream", units=UNITS)
    checkout = tmp_path / "co"
    inv("clone", "--url", up.url("pytorch"), "--path", str(checkout), check=True)
    return checkout


def compiled_on(log: Path) -> int:
    return log.read_text(errors="replace").count("COMPILE_OK")


@needs_distcc
def test_distcc_compiles_on_the_hosts_behind_ccache(distccd, demo_env, monkeypatch):
    monkeypatch.setenv("TORCHBUILD_BUILD_DISTRIBUTED", "distcc")
    monkeypatch.setenv("TORCHBUILD_BUILD_HOSTS", ",".join(h for h, _, _ in distccd))
    plan = inv("build", "--path", str(demo_env), "--dry-run", check=True).stdout
    assert "distcc slots on 2 host(s)" in plan and "CCACHE_PREFIX=" in plan and "DISTCC_HOSTS=" in plan
    inv("build", "--path", str(demo_env), check=True, timeout=600)
    counts = [compiled_on(log) for _, _, log in distccd]
    assert all(n > 0 for n in counts) and sum(counts) >= UNITS + 2, counts  # the core's TUs ran on both hosts
    assert subprocess.run([str(env_python()), "-c",
                           "import minitorch; print(minitorch.checksum())"], cwd=demo_env.parent,
                          capture_output=True, text=True, check=True).stdout.strip() == "286425"


@needs_distcc
def test_a_host_that_drops_out_mid_build_falls_back_to_local(distccd, demo_env, monkeypatch):
    monkeypatch.setenv("TORCHBUILD_BUILD_DISTRIBUTED", "distcc")
    monkeypatch.setenv("TORCHBUILD_BUILD_HOSTS", ",".join(h for h, _, _ in distccd))
    proc = subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), "build", "--path",
                             str(demo_env)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, victim, victim_log = distccd[0]
    deadline = time.monotonic() + 120
    while compiled_on(victim_log) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, "no job reached the first host"
        time.sleep(0.02)
    os.killpg(victim.pid, signal.SIGKILL)  # the host drops out with jobs still to come
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    assert "built in" in err
    assert compiled_on(distccd[1][2]) > 0


def sccache_stats(err: str) -> str:
    return next(line for line in err.splitlines() if "built in" in line)


def test_sccache_local_disk_cache_serves_a_second_checkout(demo_env, tmp_path, monkeypatch, sccache_dir):
    monkeypatch.setenv("TORCHBUILD_CACHE_TOOL", "sccache")
    monkeypatch.setenv("PATH", f"{sccache_dir}{os.pathsep}{os.environ['PATH']}")
    first = inv("build", "--path", str(demo_env), check=True, timeout=600)
    assert "hits (0%)" in sccache_stats(first.stderr)
    second_co = tmp_path / "co2"
    shutil.copytree(demo_env, second_co, ignore=shutil.ignore_patterns("build", ".torchbuild", "*.so"))
    second = inv("build", "--path", str(second_co), check=True, timeout=600)
    line = sccache_stats(second.stderr)
    hits, total = (int(x) for x in line.split("sccache ")[1].split(" hits")[0].split("/"))
    assert total >= UNITS + 1 and hits >= UNITS + 1, line  # the core came from sccache's disk cache
    assert (tmp_path / "cache" / "sccache").is_dir()
