"""Toolchain discovery on this machine, and on fake toolkits/compilers/GPUs made as files in tmp."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from torchbuild.toolchain import cuda, python

from ..helpers import REAL_HOME, fake_toolkit, inv
from ..repo import write_repo


def discover(*roots: Path, env: dict | None = None) -> list[cuda.Toolkit]:
    return cuda.discover(env or {"PATH": ""}, [str(r) for r in roots], system_dirs=())


def test_installed_versions_match_what_the_package_says_from_2_7_to_the_newest():
    pythons = [p for p in python.discover({"HOME": str(REAL_HOME), "PATH": "/usr/bin"}) if p.found_by == "pyenv"]
    assert {p.minor for p in pythons} >= {"2.7", "3.6", "3.12"}  # importlib.metadata, and before it
    for py in pythons:
        said = subprocess.run([str(py.path), "-c", "import setuptools; print(setuptools.__version__)"],
                              capture_output=True, text=True).stdout.strip()
        found = python.installed_versions(py.path, ["setuptools", "no-such-package"])
        assert found == {"setuptools": said, "no-such-package": ""}, py.path


def test_doctor_json_schema():
    done = inv("doctor", "--json")
    assert done.returncode in (0, 1)
    data = json.loads(done.stdout)
    assert data["status"] in ("ok", "warning", "problem")
    assert {"name", "status", "detail", "fix"} <= set(data["rows"][0])
    names = {r["name"] for r in data["rows"]}
    assert {"git", "cmake", "ninja", "memory", "disk", "checkout"} <= names
    assert any(n.startswith("python ") for n in names)
    assert "MAX_JOBS would be" in next(r["detail"] for r in data["rows"] if r["name"] == "memory")
    assert isinstance(data["facts"]["pythons"], list)


def test_cuda_env_prints_exports_and_bad_input_is_one_line(tmp_path):
    root = fake_toolkit(tmp_path / "tk", version_json="12.6.3")
    env = {"TORCHBUILD_TOOLCHAIN_CUDA_ROOTS": str(root)}
    done = inv("cuda.env", "12.6", env=env, check=True)
    assert f"export CUDA_HOME={root}" in done.stdout
    script = f'{done.stdout}\necho "$CUDA_HOME|$PATH"'
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, env={"PATH": "/usr/bin"}).stdout
    assert out.strip() == f"{root}|{root}/bin:/usr/bin"
    for bad, message in (("banana", "bad CUDA version 'banana'"), ("10.0", "CUDA 10.0 is not installed")):
        done = inv("cuda.env", bad, env=env)
        assert done.returncode == 1 and message in done.stderr and "Traceback" not in done.output
    done = inv("cuda.install", "12.4")
    assert done.returncode == 1 and "ptxas only" in done.stderr


@pytest.mark.slow
def test_cuda_install_from_pypi_then_nvcc_compiles(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_CACHE_DIR", str(REAL_HOME / ".cache" / "pip"))
    with ThreadPoolExecutor(2) as pool:  # two installs at once take turns; the later one finds it installed
        both = list(pool.map(lambda _: inv("cuda.install", "13.0", check=True, timeout=600), range(2)))
    root = Path(os.environ["XDG_CACHE_HOME"]) / "torchbuild/cuda/cuda-13.0"
    said = both[0].stderr + both[1].stderr
    assert said.count(f"at {root}; select it with --cuda 13.0") == 2 and said.count("already installed") == 1
    assert "another torchbuild is installing CUDA 13.0" in said
    assert not list(root.parent.glob(".cuda-13.0.partial*"))
    listed = inv("cuda.list", check=True).stdout
    assert str(root) in listed and "inv cuda.install" in listed
    again = inv("cuda.install", "13.0", check=True)
    assert "already installed" in again.stderr
    src = tmp_path / "k.cu"
    src.write_text("__global__ void twice(float* x) { x[threadIdx.x] *= 2.f; }\n")
    env = {**os.environ, **cuda.toolkit_env(cuda.probe(root, "t"), os.environ)}
    subprocess.run([str(root / "bin/nvcc"), "-c", str(src), "-o", str(tmp_path / "k.o")], check=True, env=env)
    assert (tmp_path / "k.o").stat().st_size > 0
    assert shutil.which("nvcc", path=env["PATH"]) == str(root / "bin/nvcc")


def submodules_row(checkout: Path) -> dict:
    done = inv("doctor", "--json", env={"TORCHBUILD_SOURCE_PATH": str(checkout)})
    return next(r for r in json.loads(done.stdout)["rows"] if r["name"] == "submodules")


def test_doctor_tells_the_projects_missing_submodules_from_a_submodules_own(tmp_path):
    """Issue 58 item 9: correctionlib's rapidjson has a googletest submodule its build never reads; a
    submodule .gitmodules marks `update = none` is left out by git's own update too. Neither is a problem;
    a missing submodule of the project's own is."""
    def git(repo: Path, *args: str) -> None:
        subprocess.run(["git", "-c", "protocol.file.allow=always", *args], cwd=repo, check=True, capture_output=True)

    gtest = write_repo(tmp_path / "gtest", {"gtest.h": "\n"}, "gtest")
    rapidjson = write_repo(tmp_path / "rapidjson", {"include/rapidjson.h": "\n"}, "rapidjson")
    git(rapidjson, "submodule", "add", "-q", gtest.as_uri(), "thirdparty/gtest")
    git(rapidjson, "commit", "-qm", "gtest for the tests")
    docs = write_repo(tmp_path / "docs", {"index.md": "\n"}, "docs")
    project = write_repo(tmp_path / "up", {"setup.py": "from setuptools import setup\nsetup(name='p')\n"}, "p")
    git(project, "submodule", "add", "-q", rapidjson.as_uri(), "rapidjson")
    git(project, "submodule", "add", "-q", docs.as_uri(), "docs")
    git(project, "config", "-f", ".gitmodules", "submodule.docs.update", "none")
    git(project, "add", ".gitmodules")
    git(project, "commit", "-qm", "submodules")
    checkout = tmp_path / "co"
    git(tmp_path, "clone", "-q", project.as_uri(), str(checkout))
    git(checkout, "submodule", "update", "--init", "rapidjson")  # not recursive: googletest stays out

    row = submodules_row(checkout)
    assert row["status"] == "warning", row
    assert "0 missing" in row["detail"] and "1 left out by .gitmodules (update = none)" in row["detail"]
    assert "1 submodule(s) of a submodule (rapidjson/thirdparty/gtest)" in row["detail"]
    git(checkout, "submodule", "deinit", "-q", "rapidjson")
    row = submodules_row(checkout)
    assert row["status"] == "problem" and "1 missing" in row["detail"] and row["fix"] == "inv sync", row


def test_doctor_warns_where_the_nearest_kept_tree_would_not_fit_the_checkouts_disk(tmp_path):
    """Issue 72: a first build of the configuration asked needs about the size of the nearest kept tree."""
    from ..helpers import tmpfs

    with tmpfs(tmp_path / "small", "size=8m") as small:
        checkout = write_repo(small / "co", {"setup.py": "\n"}, "co")
        kept = checkout / ".torchbuild" / "trees" / "py3.12-cu130-debug"
        kept.mkdir(parents=True)
        (kept / ".torchbuild.json").write_text(json.dumps({"key": "py3.12-cu130-debug", "done": "stamp"}))
        (kept / "libtorch.so").write_bytes(os.urandom(5 << 20))  # 5 of 8 MiB: 3 left, under the tree's 5
        env = {"TORCHBUILD_SOURCE_PATH": str(checkout), "TORCHBUILD_BUILD_CUDA": "none",
               "TORCHBUILD_BUILD_PYTHON": "3.12", "TORCHBUILD_BUILD_MIN_FREE_GB": "0"}
        rows = [r for r in json.loads(inv("doctor", "--json", env=env).stdout)["rows"] if r["name"] == "disk"]
        (warned,) = [r for r in rows if "first build" in r["detail"]]
        assert warned["status"] == "warning" and "the py3.12-cu130-debug tree, the nearest kept" in warned["detail"]
        assert "torchbuild clean --older-than" in warned["fix"]
        same = {**env, "TORCHBUILD_BUILD_CUDA": "13.0", "TORCHBUILD_BUILD_BUILD_TYPE": "debug"}  # its own tree
        rows = [r for r in json.loads(inv("doctor", "--json", env=same).stdout)["rows"] if r["name"] == "disk"]
        assert rows and not [r for r in rows if "first build" in r["detail"]]
