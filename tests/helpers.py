"""Helpers the tests share: `inv` as a user runs it, git, the demo's build and import, waits and mounts. Fixtures
are in conftest.py; no test module imports another."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
REAL_HOME = Path.home()
PYENV = REAL_HOME / ".pyenv" / "versions"
NVCC = Path("/usr/local/cuda-13.0/bin/nvcc")
needs_nvcc = pytest.mark.skipif(not NVCC.exists(), reason="no nvcc at /usr/local/cuda-13.0 (CUDA 13.0 toolkit)")
IMPORTED = ("import minitorch, minitorch._C as c, minitorch.version as v; "
            "print(minitorch.checksum(), minitorch.__file__, c.__file__, v.debug, v.__version__, "
            "minitorch.aot_kernels())")


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


def build(checkout: Path, *args: str, check: bool | None = True, **kw):
    return inv("build", "--path", str(checkout), *args, check=check, timeout=600, **kw)


def last_log(checkout: Path) -> str:
    logs = sorted(Path(os.environ["TORCHBUILD_PATHS_LOGS"]).rglob("*.log"), key=lambda p: p.stat().st_mtime)
    return logs[-1].read_text()


def compiled(log: str) -> list[str]:
    return re.findall(r"Building (?:CXX|C|CUDA) object \S+", log)


def env_python() -> Path:
    envs = Path(os.environ["TORCHBUILD_PATHS_ENVS"])
    return envs / f"py{sys.version_info[0]}.{sys.version_info[1]}" / "bin" / "python"


def run_python(code: str, cwd: Path) -> str:
    return subprocess.run([str(env_python()), "-c", code], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def wait_for(path: Path, pattern: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = list(path.rglob("*.log"))
        if logs and re.search(pattern, max(logs, key=lambda p: p.stat().st_mtime).read_text()):
            return
        assert proc.poll() is None, "the build ended before it could be interrupted"
        time.sleep(0.05)
    raise AssertionError(f"{pattern!r} never appeared")


def compilers_in(checkout: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if str(checkout) in cwd and any(t in cmd for t in ("cc1plus", "ninja", "c++", "cmake")):
            pids.append(int(proc.name))
    return pids


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def checksum(checkout: Path) -> str:
    return run_python("import minitorch; print(minitorch.checksum())", checkout.parent)


def has_python(minor: str) -> bool:
    return any(PYENV.glob(f"{minor}.*/bin/python3"))


def project(tmp_path: Path, yaml: str) -> Path:
    """A project folder with its own tasks.py, noxfile.py and torchbuild.yaml (dist/ and logs/ stay in tmp)."""
    proj = tmp_path / "proj"
    proj.mkdir()
    for name in ("tasks.py", "noxfile.py"):
        shutil.copy(REPO / name, proj / name)
    (proj / "torchbuild.yaml").write_text(yaml)
    return proj


def imported(checkout: Path) -> dict[str, str]:
    out = subprocess.run([str(env_python()), "-c", IMPORTED], cwd=checkout.parent, capture_output=True, text=True,
                         check=True).stdout.split()
    return dict(zip(("checksum", "package", "binary", "debug", "version", "aot"), out))


def fake_toolkit(root: Path, version_json: str | None = None, nvcc_release: str | None = None,
                 executable: bool = True) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "lib64").mkdir()
    (root / "lib64" / "libcudart.so.12").write_text("")
    if version_json:
        (root / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": version_json}}))
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {nvcc_release or '0.0'}, "
                    f"V{nvcc_release or '0.0'}.1'\n")
    nvcc.chmod(0o755 if executable else 0o644)
    return root


def make_patch(tmp: Path, source: Path, out: Path, files: dict[str, str], message: str, plain: bool = False) -> str:
    """Commit `files` in a scratch clone of `source` and write the patch into `out`; return its name."""
    scratch = tmp / f"scratch-{len(list(tmp.glob('scratch-*')))}"
    git(tmp, "clone", "-q", str(source), str(scratch))
    for rel, text in files.items():
        (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
        (scratch / rel).write_text(text)
    git(scratch, "add", "-A")
    git(scratch, "commit", "-qm", message)
    out.mkdir(parents=True, exist_ok=True)
    number = len(list(out.glob("*.patch"))) + 1
    name = f"{number:04d}-{message.replace(' ', '-')}.patch"
    if plain:
        (out / name).write_text(git(scratch, "diff", "HEAD~1", "HEAD") + "\n")
    else:
        (out / name).write_text(git(scratch, "format-patch", "-1", "--stdout") + "\n")
    return name


def patch(task: str, checkout: Path, series: Path, *extra: str, check: bool | None = None):
    return inv(f"patch.{task}", "--path", str(checkout), "--patches", str(series), *extra, check=check)


def extension_checkout(tmp_path: Path) -> Path:
    """A clone of the demo's companion extension repo (its own upstream)."""
    from torchbuild.demo import Upstream, make_extension

    up = Upstream(tmp_path / "ext-upstream", (tmp_path / "ext-upstream").as_uri(), {})
    make_extension(up)
    git(tmp_path, "clone", "-q", up.url("extension_cpp"), str(tmp_path / "ext"))
    return tmp_path / "ext"
