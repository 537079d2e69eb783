"""The heavy tier's scenarios of tests/integration/test_envs.py's area, half a minute or more each (`nox -s heavy`, and
CI after README's test command): real env with build deps and idempotent; switching checkouts adds what is missing
and a conflict makes the env anew."""

from __future__ import annotations

import subprocess

import pytest

from ..helpers import PYENV, inv


def has_python(minor: str) -> bool:
    return any(PYENV.glob(f"{minor}.*/bin/python3"))


@pytest.mark.slow
@pytest.mark.parametrize("minor", ["3.6", "3.12"])
def test_real_env_with_build_deps_and_idempotent(env_project, minor, monkeypatch):
    if not has_python(minor):
        pytest.skip(f"no pyenv Python {minor} on this machine")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # as many containers set it: Python writes no bytecode
    done = inv("env.create", "--python", minor, check=True, timeout=600)
    prefix = env_project / "envs" / f"py{minor}"
    assert f"env py{minor}: Python {minor}." in done.stderr
    site = prefix / "lib" / f"python{minor}" / "site-packages"  # so the env's packages come byte-compiled
    tag = f"cpython-{minor.replace('.', '')}"
    assert [(site / p / "__pycache__" / f"__init__.{tag}.pyc").exists() for p in ("pip", "yaml")] == [True, True]
    out = subprocess.run([str(prefix / "bin/python"), "-c",
                          "import numpy, yaml, ninja, cmake, sys; print(sys.version_info[:2], numpy.__version__)"],
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith(f"({minor.replace('.', ', ')})")
    if minor == "3.6":
        assert "1.19.5" in out
    again = inv("env.create", "--python", minor, check=True)
    assert "is up to date: nothing to install" in again.stderr and "pip" not in again.stderr.split("up to date")[1]
    listed = inv("env.list", check=True).stdout
    assert f"py{minor}" in listed and "yes" in listed
    assert inv("env.activate", f"py{minor}", check=True).stdout.strip() == f"source {prefix}/bin/activate"
    ran = inv("env.run", f"py{minor}", "--", "python", "-c", "import sys; print(sys.prefix)", check=True)
    assert str(prefix) in ran.stdout
    dry = inv("env.remove", f"py{minor}", "--dry-run", check=True)
    assert f"would remove env py{minor} ({prefix}" in dry.stderr and (prefix / "bin" / "python").exists()


@pytest.mark.slow
def test_switching_checkouts_adds_what_is_missing_and_a_conflict_makes_the_env_anew(env_project, monkeypatch):
    """An env made for one checkout serves the next by adding its requirements; when that leaves
    packages whose requirements are broken (pip check), the env is made again and says why."""
    checkouts = {name: env_project / name for name in ("a", "b", "c")}
    for name, reqs in {"a": "setuptools\nsetuptools_scm==8.1.0\n", "b": "setuptools\nsix\n",
                       "c": "setuptools\npackaging==19.2\n"}.items():
        checkouts[name].mkdir()
        (checkouts[name] / "requirements-build.txt").write_text(reqs)
    monkeypatch.setenv("TORCHBUILD_SOURCE_PATH", str(checkouts["a"]))
    inv("env.create", "--name", "shared", check=True, timeout=600)
    python = env_project / "envs/shared/bin/python"
    made = python.resolve().stat().st_ino, (env_project / "envs/shared/pyvenv.cfg").stat().st_mtime_ns
    monkeypatch.setenv("TORCHBUILD_SOURCE_PATH", str(checkouts["b"]))
    switched = inv("env.create", "--name", "shared", check=True, timeout=600)
    assert "add what b needs" in switched.stderr and "out of date: making it again" not in switched.stderr
    assert (python.resolve().stat().st_ino, (env_project / "envs/shared/pyvenv.cfg").stat().st_mtime_ns) == made
    subprocess.run([str(python), "-c", "import six, setuptools_scm"], check=True)
    monkeypatch.setenv("TORCHBUILD_SOURCE_PATH", str(checkouts["c"]))
    conflict = inv("env.create", "--name", "shared", check=True, timeout=600)
    assert "conflicting packages after the update" in conflict.stderr and "setuptools" in conflict.stderr
    assert "create env shared" in conflict.stderr  # made anew: c's requirements only
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True,
                            check=True).stdout
    assert "packaging==19.2" in listed and "setuptools-scm" not in listed.lower().replace("_", "-")


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_second_env_with_mkl_links_the_first_ones_files(env_project, monkeypatch):
    """Issue 58 item 12: MKL (mkl-static, mkl-include and what pip resolves for them, ~1.4 GB unpacked) is unpacked
    once into the cache dir's store and hard-linked into each env: the second env holds no second copy; pip sees
    it installed in both, and uninstalling it from one leaves the other's files whole."""
    import os
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("MKL's wheels are for x86_64")
    checkout = env_project / "checkout"
    (checkout / "torch").mkdir(parents=True)  # a PyTorch checkout's shape: MKL goes into its envs
    (checkout / "requirements.txt").write_text("ninja\n")
    monkeypatch.setenv("TORCHBUILD_BUILD_MKL", "1")
    monkeypatch.setenv("TORCHBUILD_PATHS_CACHE_DIR", str(env_project / "cache"))
    for name in ("one", "two"):
        inv("env.create", "--name", name, check=True, timeout=1200)
    core = [env_project / "envs" / name / "lib" / "libmkl_core.a" for name in ("one", "two")]
    first, second = (os.stat(p) for p in core)
    assert first.st_ino == second.st_ino and first.st_nlink >= 3  # the store's file, in both envs
    assert (env_project / "envs" / "two" / "include" / "mkl.h").stat().st_ino == \
        (env_project / "envs" / "one" / "include" / "mkl.h").stat().st_ino
    for name in ("one", "two"):
        shown = subprocess.run([str(env_project / "envs" / name / "bin" / "python"), "-m", "pip", "show", "mkl-static"],
                               capture_output=True, text=True)
        assert shown.returncode == 0 and "Version: " in shown.stdout, shown.stderr
    subprocess.run([str(env_project / "envs" / "two" / "bin" / "python"), "-m", "pip", "uninstall", "-y", "-q",
                    "mkl-static"], check=True)
    assert not core[1].exists() and os.stat(core[0]).st_size == first.st_size

    from torchbuild.config import load
    from torchbuild.envs import copies, read

    one = read(env_project / "envs" / "one")  # a bisection's twin of it: the store's files linked, not copied
    assert one is not None and copies.copy_env(load(env_project, dict(os.environ)), one, env_project / "twin")
    assert os.stat(env_project / "twin" / "lib" / "libmkl_core.a").st_ino == first.st_ino
    python = env_project / "twin" / "bin" / "python"
    assert "Version: " in subprocess.run([str(python), "-m", "pip", "show", "mkl-static"], capture_output=True,
                                         text=True, check=True).stdout
