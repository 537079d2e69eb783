"""Helpers the tests share: `inv` as a user runs it, git, the demo's build and import, waits and mounts. Fixtures
are in conftest.py; no test module imports another."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from torchbuild.demo import make_upstream

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


def sigint_default() -> None:
    """A child's `preexec_fn` where the test sends SIGINT: its default disposition, whatever the test's caller set (a
    shell's background job or nohup ignores SIGINT, and a Python started so never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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
    """What `code` prints in the test's env; a failure says what Python said."""
    done = subprocess.run([str(env_python()), "-c", code], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"python -c {code!r} failed:\n{done.stderr[-3000:]}"
    return done.stdout.strip()


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


def in_checkout(demo: Path) -> dict[str, str]:
    """What `import minitorch` from the checkout says it is: its version file and its compiled code."""
    out = run_python("import minitorch, minitorch.version as v; print(v.cuda, v.debug, minitorch.cuda_compiled(), "
                     "minitorch.__version__, minitorch.checksum())", demo.parent).split()
    return dict(zip(("cuda", "debug", "cuda_compiled", "version", "checksum"), out))


def file_digest(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


WORKFLOW = REPO / "ci" / "github-matrix.yml"


def github_files(tmp_path: Path) -> dict[str, str]:
    out, summary = tmp_path / "github_output", tmp_path / "step_summary"
    out.write_text("")
    summary.write_text("")
    return {"GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": str(summary)}


def outputs(path: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in Path(path).read_text().splitlines() if "=" in line)


def objects(checkout: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in (checkout / "build").rglob("*.o")}


def cmake_project(root: Path, body: str, minimum: str = "3.18") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "CMakeLists.txt").write_text(f"cmake_minimum_required(VERSION {minimum})\n{body}\n")
    return root


MATRIX_SECRET = "s3cr3t-m4trix-pw"  # in build.env: the sessions and what they write must hide it


SMALL = 4  # core units where a test asserts what every unit does, not how many there are


def matrix_project(tmp_path: Path, project_table: bool, units: int, pythons: tuple[str, ...] = ("3.10", "3.12"),
                   cudas: tuple[str, ...] = ("none",), legacy: bool = False):
    """A matrix project over the demo (its upstream in tmp), cloned: (project, env, checkout); skipped where pyenv
    lacks one of `pythons`."""
    if not all(has_python(p) for p in pythons):
        pytest.skip(f"needs pyenv Pythons {' and '.join(pythons)}")
    up = make_upstream(tmp_path / "upstream", project_table=project_table, units=units, legacy=legacy)
    proj = project(tmp_path, f"source:\n  url: {up.url('pytorch')}\n  path: {tmp_path / 'co'}\n"
                             f"matrix:\n  pythons: {json.dumps(list(pythons))}\n  cudas: {json.dumps(list(cudas))}\n"
                             f"paths:\n  cache_dir: {tmp_path / 'cache'}\nbuild:\n  min_free_gb: 1\n"
                             f"  env:\n    API_PASSWORD: {MATRIX_SECRET}\n    CMAKE_DEMO_TOKEN: {MATRIX_SECRET}\n")
    env = {"HOME": str(REAL_HOME), "PIP_CACHE_DIR": str(REAL_HOME / ".cache" / "pip")}
    inv("clone", root=proj, env=env, check=True)
    return proj, env, tmp_path / "co"


FIRST = "0.1.0.dev20261201"


NEWER = "0.1.0.dev20261203"


def repack(wheel: Path, dest: Path, version: str, git_version: str) -> Path:
    """The same wheel as another nightly: its version and the commit it says it was built from."""
    old = wheel.name.split("-")[1]
    out = dest / wheel.name.replace(old, version)
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info)
            name = info.filename.replace(f"-{old}.dist-info", f"-{version}.dist-info")
            if name.endswith(("version.py", "METADATA")):
                text = data.decode().replace(old, version)
                if name.endswith("version.py"):
                    text = "\n".join(f"git_version = '{git_version}'" if ln.startswith("git_version") else ln
                                     for ln in text.splitlines()) + "\n"
                data = text.encode()
            info.filename = name
            dst.writestr(info, data)
    return out


def served_clone(served, tmp_path: Path, monkeypatch) -> Path:
    """A fresh clone of the served upstream, with the index and the module's env in this test's env."""
    for key, value in served["env"].items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TORCHBUILD_NIGHTLY_INDEX_URL", served["url"])
    co = tmp_path / "co"
    inv("clone", "--url", served["up"].url("pytorch"), "--path", str(co), check=True)
    return co


UP_TO_DATE = "up to date:"


SHORTCUT = "only files ninja builds from changed since the last build"


UP_TO_DATE = "up to date:"


def sk_imported(checkout: Path) -> tuple[str, str]:
    out = subprocess.run([str(env_python()), "-c", "import skdemo, skdemo._core as c; print(skdemo.checksum(), "
                          "c.__file__)"], cwd=checkout.parent, capture_output=True, text=True, check=True).stdout
    checksum, where = out.split()
    return checksum, where


ENTRY = "import sys; sys.argv = ['torchbuild', 'build', *sys.argv[1:]]; from torchbuild.program import main; main()"


def warm_processes(runtime: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(runtime) in (proc / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def command(checkout: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", ENTRY, "--path", str(checkout), "--cuda", "none", *args],
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                          env={**os.environ, **env})


def ran_warm(calls: Path, runtime: Path) -> bool:
    """Whether the last command's check (its `git status`) ran in a warm process: a fork keeps its parent's
    command line (the build's own git calls run under setup.py or CMake)."""
    lines = calls.read_text().splitlines() if calls.exists() else []
    calls.unlink(missing_ok=True)
    return any(str(runtime) in line for line in lines)


def wait_for_socket(runtime: Path) -> None:
    deadline = time.monotonic() + 30
    while not list(runtime.glob("torchbuild-*/warm-*.sock")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(runtime.glob("torchbuild-*/warm-*.sock")), "no warm process was left for the next build"


TORCHBUILD = [sys.executable, "-c", "import sys; from torchbuild.program import main; sys.argv[0] = 'torchbuild'; "
              "main()"]


def run_torchbuild(*args: str, cwd: Path, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    """The installed `torchbuild` command as a user runs it (from this interpreter), in `cwd`."""
    return subprocess.run([*TORCHBUILD, *args], cwd=cwd, stdout=stdout, stderr=subprocess.PIPE, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
