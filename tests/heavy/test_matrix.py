"""The heavy tier's scenarios of tests/integration/test_matrix.py's area, half a minute or more each (`nox -s heavy`,
and CI after README's test command): matrix builds importable wheels and shares the core; ctrl c stops every session
and its compilers; build 3 6 builds the legacy demo to a wheel that imports; remote cache serves a clean machine;
sccache with the redis backend serves a clean machine; matrix beside a build of the same checkout; a session of
the developers python builds its own tree and gives the checkout back; the job budget holds for a scikit build core
project."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from torchbuild.demo import make_upstream

from ..helpers import (
    MATRIX_SECRET,
    REAL_HOME,
    SMALL,
    free_port,
    has_python,
    inv,
    matrix_project,
    project,
    sigint_default,
    wait_for_port,
)

CORE = SMALL + 3  # the core's C++ objects then: the units, checksum.cpp, fbgemm.cpp, torch/csrc/api.cpp


@pytest.fixture
def split_project(tmp_path):
    """The demo as PyTorch up to 2.7 (no [project] table: setup.py names the split build's wheels), with a
    core of SMALL units."""
    return matrix_project(tmp_path, project_table=False, units=SMALL)


class CompilerCount:
    """The most compiler processes (cc1plus) of this test running at once while in the block (those whose
    environment names `root`: tests beside it under pytest-xdist have their own), sampled by the test
    itself, apart from what torchbuild reports."""

    def __init__(self, root: Path) -> None:
        self.most = 0
        self.root = str(root).encode()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            count = 0
            for stat in Path("/proc").glob("[0-9]*/stat"):
                try:
                    count += "(cc1plus)" in stat.read_text() and self.root in (stat.parent / "environ").read_bytes()
                except OSError:
                    pass
            self.most = max(self.most, count)

    def __enter__(self) -> "CompilerCount":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.slow
def test_matrix_builds_importable_wheels_and_shares_the_core(split_project):
    proj, env, checkout = split_project
    with CompilerCount(proj.parent) as compilers:
        done = inv("matrix", root=proj, env=env, check=True, timeout=900)
    data = json.loads((proj / "dist/matrix-summary.json").read_text())
    summary, run = data["sessions"], data["run"]
    assert [(s["session"], s["result"]) for s in summary] == [("build-3.10(cuda='none')", "ok"),
                                                             ("build-3.12(cuda='none')", "ok")]
    for s in summary:
        wheel = Path(s["wheel"])
        assert wheel.parent == proj / "dist" / f"build-{s['python']}-cuda-{s['cuda']}"
        assert re.search(r"\+git[0-9a-f]{7}\.cpu-cp3", wheel.name), wheel.name  # its commit, then its variant
        assert s["warning"] == ""  # it links only the core's libraries beyond manylinux's (auditwheel show)
        assert s["waits"]["queued"] > 0  # each session says what it waited for
    assert "imports in a fresh env" in done.output
    assert {s["path"] for s in summary} == {"split"}  # the demo has PyTorch's split-build switches
    for s in summary:  # the split build as PyTorch names it: the core's wheel, required at the same version
        core = Path(s["core"])
        assert re.match(r"minitorch_no_python-2\.11\.0a0\+git[0-9a-f]{7}\.cpu-", core.name), core.name
        with zipfile.ZipFile(s["wheel"]) as whl:
            meta = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
            assert re.search(r"Requires-Dist: minitorch_no_python==2\.11\.0a0\+git[0-9a-f]{7}\.cpu\b",
                             whl.read(meta).decode())
            assert "minitorch/lib/libc10.so" not in whl.namelist()  # the core's libraries are the core's
        assert core.name.endswith("-py3-none-linux_x86_64.whl"), core.name  # libraries: this platform's
        with zipfile.ZipFile(core) as whl:
            assert "minitorch/lib/libc10.so" in whl.namelist() and whl.read("minitorch/__init__.py") == b""
    core_logs = sorted((proj / "logs" / "core-cpu-release-nox").glob("*.log"), key=lambda p: p.stat().st_mtime)
    assert len(core_logs) == 1 and core_logs[0].read_text().count("Building CXX object") >= CORE  # the core: once
    assert "nothing it depends on changed since it was built" in done.output  # the other session took it
    assert min(s["misses"] for s in summary) <= 2  # the Python that did not build the core compiles its extension
    assert "build-3.12(cuda='none')  3.12    none  ok" in done.stdout and "waited" in done.stdout

    # Side by side under one budget: two sessions at once, one in a synced copy of the checkout, and
    # never more compilers at once than the budget (the test counts them itself).
    assert run["at once"] == 2 and "building in the slot" in done.output
    budget = min(os.cpu_count() or 1, run["job budget"])
    assert 1 <= compilers.most <= budget and run["most compilers at once"] <= budget
    assert 0 < run["peak rss bytes"] < run["free memory bytes at start"]

    # Nothing changed: no session runs, nox is not started.
    logs = set((proj / "logs").rglob("*.log"))
    noop = inv("matrix", root=proj, env=env, check=True)
    assert "all 2 sessions are up to date" in noop.output and "nox >" not in noop.output
    assert set((proj / "logs").rglob("*.log")) == logs and "up to date" in noop.stdout

    # An edit in an ignored build-time clone (third_party/eigen, as PyTorch's): git status shows nothing, yet every
    # session would run again (issue 54: "all sessions are up to date" served wheels without it); the content
    # put back, they are up to date again, whatever the file's time says
    eigen = checkout / "third_party" / "eigen" / "include" / "Eigen" / "Core"
    original = eigen.read_bytes()
    eigen.write_bytes(original + b"// an edit\n")
    assert subprocess.run(["git", "status", "--porcelain"], cwd=checkout, capture_output=True, text=True,
                          check=True).stdout == ""
    planned = inv("matrix", "--dry-run", root=proj, env=env, check=True).output
    assert planned.count("runs again: what git does not see changed") == 2, planned
    eigen.write_bytes(original)
    assert "all 2 sessions are up to date" in inv("matrix", "--dry-run", root=proj, env=env, check=True).output

    # An uncommitted edit reaches every wheel, including the one built in the slot.
    init = checkout / "minitorch" / "__init__.py"
    init.write_text(init.read_text() + "EDITED = 'yes'\n")
    edited = inv("matrix", root=proj, env=env, check=True, timeout=900)
    assert "Running session build-3.10" in edited.output and "Running session build-3.12" in edited.output
    assert "build-3.12(cuda='none') runs again: the checkout changed\n" in edited.output  # and nothing else
    # The envs exist now: `inv matrix` builds the core itself while nox starts, both sessions take it.
    assert "the core for CUDA none: built now, ahead of its sessions" in edited.output
    assert edited.output.count("nothing it depends on changed since it was built") == 2
    assert len(list((proj / "logs" / "core-cpu-release-nox").glob("*.log"))) == 2
    for s in json.loads((proj / "dist/matrix-summary.json").read_text())["sessions"]:
        with zipfile.ZipFile(s["wheel"]) as whl:
            assert "EDITED = 'yes'" in whl.read("minitorch/__init__.py").decode(), s["session"]

    # A failure is recorded; `--failed` runs only that session again.
    unit = checkout / "c10/core/unit_03.cpp"
    good = unit.read_text()
    unit.write_text("int broken( {\n")
    failed = inv("matrix", "--session", "build-3.12", root=proj, env=env, timeout=600)
    assert failed.returncode != 0 and "inv matrix --failed" in failed.stderr
    records = results(proj)
    assert records == {"build-3.10(cuda='none')": "ok", "build-3.12(cuda='none')": "failed"}
    unit.write_text(good)
    again = inv("matrix", "--failed", root=proj, env=env, check=True, timeout=600)
    assert "build-3.12(cuda='none') runs again: it failed last time" in again.output
    assert "build-3.12(cuda='none')" in again.stdout and "Running session build-3.10" not in again.stdout
    records = results(proj)
    assert set(records.values()) == {"ok"}

    # Without the split build, from an empty compiler cache: one session builds first and fills the
    # cache, the other waits for it and compiles only what differs (its Python's extension).
    shutil.rmtree(proj.parent / "cache" / "ccache")
    whole = inv("matrix", "--rerun", root=proj, env={**env, "TORCHBUILD_MATRIX_SPLIT": "false"}, check=True,
                timeout=900)
    sessions = json.loads((proj / "dist/matrix-summary.json").read_text())["sessions"]
    assert {s["path"] for s in sessions} == {"one build"} and "builds first, filling the compiler cache" in whole.output
    first, after = sorted(sessions, key=lambda s: s["waits"].get("first build", 0.0))
    assert after["waits"]["first build"] > 1 and first["misses"] >= CORE and after["misses"] <= 2

    # build.env's secrets reached the builds (a CMAKE_* one is configured) and nothing written shows them.
    assert MATRIX_SECRET in (checkout / "build/CMakeCache.txt").read_text()
    written = [p for top in (proj / "logs", proj / "dist", proj.parent / "cache", checkout / ".torchbuild")
               for p in top.rglob("*") if p.is_file() and p.suffix in (".log", ".json", ".txt", ".lock", "")
               and not {"build", "trees"} & set(p.relative_to(top).parts)]  # CMake's own files aside
    written += [*checkout.rglob(".torchbuild.json"), *(proj.parent / "cache").rglob(".torchbuild.json")]
    assert written and [p for p in written if MATRIX_SECRET.encode() in p.read_bytes()] == []


def processes_under(path: Path) -> list[str]:
    """Processes whose command line or working folder is under `path`: what a build there left running."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if str(path) in cmdline or cwd.startswith(str(path)):
            found.append(f"{proc.name}: {cmdline[:120]}")
    return found


@pytest.mark.slow
def test_ctrl_c_stops_every_session_and_its_compilers(split_project, tmp_path):
    """Ctrl-C while the sessions compile (a first run: a session builds the core), then while `inv matrix`
    builds the core itself ahead of the sessions (their envs exist): nothing is left running."""
    proj, env, checkout = split_project

    def interrupt_once_compiling() -> str:
        proc = subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(proj), "matrix"],
                                env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True,  # its own group: the test plays Ctrl-C
                                preexec_fn=sigint_default)
        deadline = time.monotonic() + 300
        while not any("cc1plus" in p for p in processes_under(tmp_path)):
            assert proc.poll() is None and time.monotonic() < deadline, "no compiler started"
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode != 0, out[-2000:]
        for _ in range(50):  # every session's process tree is gone (nox stops them; each stops its build)
            left = processes_under(tmp_path)
            if not left:
                break
            time.sleep(0.1)
        assert left == [], left
        return out

    interrupt_once_compiling()
    inv("matrix", root=proj, env=env, check=True, timeout=900)
    unit = checkout / "c10/core/unit_02.cpp"
    unit.write_text(unit.read_text() + "int edited_for_the_test = 1;\n")
    out = interrupt_once_compiling()
    assert "ahead of its sessions" in out and "was not built ahead" not in out, out[-2000:]


@pytest.mark.slow
def test_build_3_6_builds_the_legacy_demo_to_a_wheel_that_imports(tmp_path):
    """`nox -s build-3.6` (the design card's invocation) on the demo shaped like PyTorch 1.10."""
    proj, env, _ = matrix_project(tmp_path, project_table=True, units=SMALL, pythons=("3.6",), cudas=("none", "13.0"),
                                  legacy=True)
    done = subprocess.run([sys.executable, "-m", "nox", "--noxfile", str(proj / "noxfile.py"), "-s", "build-3.6"],
                          capture_output=True, text=True, env={**os.environ, **env}, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    sessions = {s["session"]: s for s in json.loads((proj / "dist/matrix-summary.json").read_text())["sessions"]}
    ok = sessions["build-3.6(cuda='none')"]
    assert ok["result"] == "ok" and re.search(r"1\.10\.2\+git[0-9a-f]{7}\.cpu-cp36", Path(ok["wheel"]).name)
    assert "imports in a fresh env" in done.stderr + done.stdout
    cu = sessions["build-3.6(cuda='13.0')"]
    assert cu["result"] == "skipped" and "PyTorch 1.10 was released for CUDA 10.2, 11.1, 11.3" in cu["reason"]


def results(proj: Path) -> dict[str, str]:
    return {s["session"]: s["result"] for s in json.loads((proj / "dist/matrix-summary.json").read_text())["sessions"]}


@pytest.fixture
def redis_url(tmp_path):
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run does)")
    port = free_port()
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, proc, "redis-server")
    yield f"redis://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.mark.slow
def test_remote_cache_serves_a_clean_machine(tmp_path, redis_url):
    up = make_upstream(tmp_path / "upstream", units=SMALL)
    cache = tmp_path / "cache"
    env = {"TORCHBUILD_CACHE_REMOTE": redis_url, "TORCHBUILD_PATHS_CACHE_DIR": str(cache),
           "TORCHBUILD_BUILD_MIN_FREE_GB": "1", "TORCHBUILD_PATHS_ENVS": str(tmp_path / "envs"),
           "TORCHBUILD_PATHS_LOGS": str(tmp_path / "logs"), "TORCHBUILD_CACHE_PASSWORD": "s3cret-pw",
           "PIP_CACHE_DIR": str(REAL_HOME / ".cache" / "pip")}
    for name in ("one", "two"):
        inv("clone", "--url", up.url("pytorch"), "--path", str(tmp_path / name), env=env, check=True)
    first = inv("build", "--path", str(tmp_path / "one"), "--cuda", "none", env=env, check=True, timeout=600)
    assert "s3cret-pw" not in first.output and "CCACHE_REMOTE_STORAGE=redis://***@127.0.0.1" in \
        inv("build", "--path", str(tmp_path / "one"), "--cuda", "none", "--dry-run", env=env, check=True).stdout
    shutil.rmtree(cache / "ccache")  # a new runner: nothing in the local cache
    second = inv("build", "--path", str(tmp_path / "two"), "--cuda", "none", env=env, check=True, timeout=600)
    stats = sorted((tmp_path / "logs").rglob("*.ccache-stats"), key=lambda p: p.stat().st_mtime)[-1].read_text()
    remote_hits = stats.split().count("remote_storage_hit")
    assert remote_hits > 0 and f"{remote_hits} from the remote cache" in second.stderr
    assert stats.split().count("cache_miss") == 0  # nothing was compiled again


@pytest.mark.slow
def test_sccache_with_the_redis_backend_serves_a_clean_machine(tmp_path, redis_url, sccache_dir):
    bin_dir = sccache_dir
    up = make_upstream(tmp_path / "upstream", units=SMALL)
    cache = tmp_path / "cache"
    env = {"TORCHBUILD_CACHE_REMOTE": redis_url, "TORCHBUILD_CACHE_TOOL": "sccache",
           "TORCHBUILD_PATHS_CACHE_DIR": str(cache), "TORCHBUILD_BUILD_MIN_FREE_GB": "1",
           "TORCHBUILD_PATHS_ENVS": str(tmp_path / "envs"), "TORCHBUILD_PATHS_LOGS": str(tmp_path / "logs"),
           "PIP_CACHE_DIR": str(REAL_HOME / ".cache" / "pip"), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    for name in ("one", "two"):
        inv("clone", "--url", up.url("pytorch"), "--path", str(tmp_path / name), env=env, check=True)
    plan = inv("build", "--path", str(tmp_path / "one"), "--cuda", "none", "--dry-run", env=env, check=True).stdout
    assert f"SCCACHE_REDIS_ENDPOINT={redis_url}" in plan
    inv("build", "--path", str(tmp_path / "one"), "--cuda", "none", env=env, check=True, timeout=600)
    assert not (cache / "sccache").exists() or not any((cache / "sccache").rglob("*.o*"))  # redis holds it
    second = inv("build", "--path", str(tmp_path / "two"), "--cuda", "none", env=env, check=True, timeout=600)
    line = next(ln for ln in second.stderr.splitlines() if "built in" in ln)
    hits, total = (int(x) for x in line.split("sccache ")[1].split(" hits")[0].split("/"))
    assert total >= CORE and hits >= CORE, line


@pytest.mark.slow
def test_matrix_beside_a_build_of_the_same_checkout(demo_project):
    """`inv matrix` while `inv build` runs on the same checkout: they take turns on build/ (the build lock,
    the slots), both finish, and the checkout then holds the build's configuration again (its switch back
    runs nothing and imports its own binaries)."""
    proj, env, checkout = demo_project
    build_env = {**os.environ, **env, "TORCHBUILD_PATHS_ENVS": str(proj.parent / "envs")}
    args = [sys.executable, "-m", "invoke", "--search-root", str(proj), "build", "--cuda", "none"]
    beside = subprocess.Popen(args, env=build_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    matrix = inv("matrix", root=proj, env=env, timeout=900)
    _, err = beside.communicate(timeout=900)
    assert beside.returncode == 0, err
    assert matrix.returncode == 0, matrix.output
    assert set(results(proj).values()) == {"ok"}
    # PyTorch 2.8+'s [project] name: no split build; the default shares the compiler cache instead
    assert "the split build is not used: setup.py reads BUILD_LIBTORCH_WHL" in matrix.output
    assert "[project] name = \"minitorch\" is fixed" in matrix.output
    assert {s["path"] for s in json.loads((proj / "dist/matrix-summary.json").read_text())["sessions"]} == \
        {"one build"}
    python = next((proj.parent / "envs").glob("py3.*/bin/python"))
    out = subprocess.run([str(python), "-c", "import minitorch; print(minitorch.checksum())"], cwd=proj.parent,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "132875"  # the developer's env imports its build at once: the checkout was given back
    again = inv("build", "--cuda", "none", root=proj, env=build_env, check=True, timeout=600)
    assert "up to date" in again.stderr  # its tree and files came back as they were


@pytest.mark.slow
def test_a_session_of_the_developers_python_builds_its_own_tree_and_gives_the_checkout_back(demo_project):
    """A session in nox's env with the Python, CUDA and build type of the developer's build: its own tree beside
    the developer's, kept for its next run. Before, it configured the developer's tree again for nox's env, and
    the developer's next build configured it again."""
    proj, env, checkout = demo_project
    build_env = {**os.environ, **env, "TORCHBUILD_PATHS_ENVS": str(proj.parent / "envs")}
    inv("build", "--python", "3.12", "--cuda", "none", root=proj, env=build_env, check=True, timeout=600)
    first = inv("matrix", "--session", "build-3.12", root=proj, env=env, check=True, timeout=900)
    assert "gave the checkout back to py3.12-cpu-release: " in first.output, first.output
    again = inv("build", "--python", "3.12", "--cuda", "none", root=proj, env=build_env, check=True, timeout=600)
    assert "up to date" in again.stderr, again.stderr  # not configured again for the developer's env
    logs = set((proj / "logs" / "py3.12-cpu-release-nox").glob("*.log"))
    second = inv("matrix", "--session", "build-3.12", "--rerun", root=proj, env=env, check=True, timeout=900)
    assert "gave the checkout back to py3.12-cpu-release: " in second.output and "up to date" in second.output
    new = set((proj / "logs" / "py3.12-cpu-release-nox").glob("*.log")) - logs  # its own tree, kept: no compile
    assert logs and not [log for log in new if "Building CXX object" in log.read_text()], second.output
    assert "up to date" in inv("build", "--python", "3.12", "--cuda", "none", root=proj, env=build_env,
                               check=True, timeout=600).stderr


@pytest.mark.slow
def test_the_job_budget_holds_for_a_scikit_build_core_project(tmp_path):
    """scikit-build-core reads CMAKE_BUILD_PARALLEL_LEVEL, not MAX_JOBS: two sessions side by side must still
    never run more compilers at once than the budget (the test counts them itself)."""
    from ..skbuild import make_skbuild_project

    if not (has_python("3.10") and has_python("3.12")):
        pytest.skip("needs pyenv Pythons 3.10 and 3.12")
    up = make_skbuild_project(tmp_path / "up", units=8)
    proj = project(tmp_path, f"source:\n  url: {up.as_uri()}\n  path: {tmp_path / 'co'}\n"
                             'matrix:\n  pythons: ["3.10", "3.12"]\n  cudas: ["none"]\n'
                             f"paths:\n  cache_dir: {tmp_path / 'cache'}\nbuild:\n  min_free_gb: 1\n")
    env = {"HOME": str(REAL_HOME), "PIP_CACHE_DIR": str(REAL_HOME / ".cache" / "pip")}
    inv("clone", root=proj, env=env, check=True)
    with CompilerCount(tmp_path) as compilers:
        inv("matrix", root=proj, env=env, check=True, timeout=900)
    run = json.loads((proj / "dist/matrix-summary.json").read_text())["run"]
    assert run["at once"] == 2 and set(results(proj).values()) == {"ok"}
    budget = min(os.cpu_count() or 1, run["job budget"])
    assert 1 <= compilers.most <= budget and run["most compilers at once"] <= budget
