"""Fixtures: git isolated from the user's config, demo upstreams in tmp dirs, and `inv` as a user runs it."""

from __future__ import annotations

import compileall
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from torchbuild import console
from torchbuild.demo import Upstream, make_upstream

REPO = Path(__file__).resolve().parent.parent
REAL_HOME = Path.home()
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


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory, monkeypatch, request):
    """A fake HOME, no system git config, a tmp cache dir, no TORCHBUILD_* from the caller; the HOME goes
    when the test passes, as its tmp_path does (tmp_path_retention_policy): a run's disk is a few tests'."""
    home = tmp_path_factory.mktemp("home")
    for key in list(os.environ):
        if key.startswith(("TORCHBUILD_", "GIT_")) or key in ("NO_COLOR", "XDG_CONFIG_HOME"):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    # pip's download cache is the user's (as on a developer's machine): wheels are fetched once a run,
    # not once a test (torchbuild's own cache dir stays the test's)
    monkeypatch.setenv("PIP_CACHE_DIR", os.environ.get("PIP_CACHE_DIR") or str(REAL_HOME / ".cache" / "pip"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.invalid")
    monkeypatch.setenv("TORCHBUILD_GIT_RETRY_DELAY", "0")
    monkeypatch.setenv("TORCHBUILD_WARM", "0")  # no warm process outlives a test (test_warm's own are stopped)
    for key, value in NO_MKL.items():
        monkeypatch.setenv(key, value)
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n")
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


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def inv(*args: str, root: Path = REPO, env: dict | None = None, check: bool | None = None,
        timeout: float = 120) -> Done:
    """Run `inv <args>` as a user would, from the project at `root`."""
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(root), *args],
                          capture_output=True, text=True, env=full_env, timeout=timeout, stdin=subprocess.DEVNULL)
    done = Done(proc.returncode, proc.stdout, proc.stderr)
    if check is True and done.returncode != 0:
        raise AssertionError(f"inv {' '.join(args)} failed ({done.returncode}):\n{done.output}")
    if check is False and done.returncode == 0:
        raise AssertionError(f"inv {' '.join(args)} unexpectedly succeeded:\n{done.output}")
    return done


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def tree_state(repo: Path) -> dict[str, tuple[str, str]]:
    """HEAD and porcelain status of `repo` and every nested submodule: equal means untouched."""
    state = {".": (git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain"))}
    out = git(repo, "submodule", "foreach", "--quiet", "--recursive",
              'echo "$displaypath $(git rev-parse HEAD)"')
    for line in out.splitlines():
        path, sha = line.split()
        state[path] = (sha, git(repo / path, "status", "--porcelain"))
    return state


def copy_project(dest: Path) -> Path:
    """A project folder with tasks.py, for tests that need their own superproject."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "tasks.py", dest / "tasks.py")
    return dest


@contextlib.contextmanager
def tmpfs(path: Path, options: str):
    """A small tmpfs mounted at `path` (a full disk, a read-only folder) while in the block; the test is
    skipped where mounts are not allowed."""
    path.mkdir(parents=True, exist_ok=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root in a namespace that allows mounts)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def free_port() -> int:
    """A TCP port on loopback nobody listens on (for daemons the tests start)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen, what: str = "the daemon") -> None:  # type: ignore[type-arg]
    """Wait until a daemon the test started accepts connections (it must not die meanwhile)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, f"{what} did not start"
            time.sleep(0.05)


def make_venv(path: Path, python: str | Path = sys.executable) -> Path:
    """A venv of `python` with pip in it, made by virtualenv as torchbuild makes its envs (pip from virtualenv's
    wheel cache, where `python -m venv` runs ensurepip for three seconds); its python."""
    subprocess.run([sys.executable, "-m", "virtualenv", "-q", "--no-periodic-update", "-p", str(python), str(path)],
                   check=True)
    return path / "bin" / "python"


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
