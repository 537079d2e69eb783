"""`inv build` on the demo project with real cmake, ninja, gcc (and nvcc where present)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from torchbuild.demo import make_upstream

from ..helpers import (
    NVCC,
    REPO,
    build,
    compiled,
    compilers_in,
    env_python,
    file_digest,
    git,
    in_checkout,
    inv,
    last_log,
    make_venv,
    needs_nvcc,
    run_python,
    sigint_default,
    tmpfs,
    wait_for,
)


def test_cpu_build_import_noop_and_incremental(demo):
    first = build(demo, "--cuda", "none")
    assert "cpu-release built in" in first.stderr and "use it:" in first.stderr
    assert len(compiled(last_log(demo))) >= 26
    assert run_python("import minitorch; print(minitorch.checksum(), minitorch.cuda_compiled())", demo.parent) \
        == "1144625 False"
    assert git(demo, "status", "--porcelain") == ""  # build outputs and .torchbuild/ stay out of git status
    logs = len(list(Path(os.environ["TORCHBUILD_PATHS_LOGS"]).rglob("*.log")))
    noop = build(demo, "--cuda", "none")
    assert "up to date: ninja has no work" in noop.stderr and "nothing was run" in noop.stderr
    assert len(list(Path(os.environ["TORCHBUILD_PATHS_LOGS"]).rglob("*.log"))) == logs  # the command did not run
    rerun = build(demo, "--cuda", "none", "--rerun")
    assert "1 compile step(s)" in rerun.stderr and compiled(last_log(demo)) == []  # build_ext's stub.c only
    (demo / "setup.py").touch()  # an input ninja does not know about: the command runs
    assert "up to date" not in build(demo, "--cuda", "none").stderr
    (demo / "c10/core/unit_05.cpp").touch()
    again = build(demo, "--cuda", "none")
    assert [c.rsplit("/", 1)[-1] for c in compiled(last_log(demo))] == ["unit_05.cpp.o"]
    assert "1 compile step(s)" in again.stderr


@needs_nvcc
def test_switching_cuda_imports_each_configurations_own_binaries(small_demo, tmp_path):
    """A configuration is its tree and its files in the checkout: CUDA 13.0, CPU, CUDA 13.0 again imports
    the CUDA build's libraries (and the third build runs nothing); a wheel after a switch holds its own."""
    cu = build(small_demo, "--cuda", "13.0", "--arch", "8.0")
    assert "cu130-release built in" in cu.stderr and "TORCH_CUDA_ARCH_LIST=8.0 (--arch)" in cu.stderr
    log = last_log(small_demo)
    assert any(c.endswith("scale.cu.o") for c in compiled(log)) and "Building CUDA object" in log
    assert "-- Checkout nccl release tag: v2.27.3-1" in log and (small_demo / "third_party/nccl/src/nccl.h").exists()
    cache = (small_demo / "build/CMakeCache.txt").read_text()
    nvcc = re.search(r"CMAKE_CUDA_COMPILER:\w+=(\S+)", cache).group(1)
    assert Path(nvcc).resolve() == NVCC.resolve()
    assert "code=[sm_80]" in (small_demo / "build/build.ninja").read_text()
    assert in_checkout(small_demo)["cuda_compiled"] == "True" and in_checkout(small_demo)["cuda"] == "13.0"
    cuda_lib = small_demo / "minitorch/lib/libc10_cuda.so"
    assert cuda_lib.exists()
    cpu = build(small_demo, "--cuda", "none")
    assert re.search(r"kept the py[\d.]+-cu130-release tree in \S+ with its \d+ file\(s\) from the checkout",
                     cpu.stderr)
    assert in_checkout(small_demo)["cuda_compiled"] == "False" and in_checkout(small_demo)["cuda"] == "None"
    assert not cuda_lib.exists()
    back = build(small_demo, "--cuda", "13.0", "--arch", "8.0")
    assert re.search(r"restored the py[\d.]+-cu130-release tree and its \d+ file\(s\) in the checkout", back.stderr)
    assert "up to date: ninja has no work" in back.stderr
    assert in_checkout(small_demo)["cuda_compiled"] == "True" and cuda_lib.exists()
    # an extension against this CUDA configuration (--torch): its archs, FORCE_CUDA=1 (torchvision's switch), so
    # its kernel is built without a GPU; a CUDA configuration whose setup.py builds no CUDA source is an error
    from ..helpers import extension_checkout

    ext = extension_checkout(tmp_path)
    on_cuda = build(ext, "--torch", str(small_demo))
    assert "-cu130-release-on-co-" in on_cuda.stderr and "TORCH_CUDA_ARCH_LIST=8.0 (the torch's configuration)" \
        in on_cuda.stderr
    assert run_python("import extension_cpp; print(extension_cpp.cuda_built())", tmp_path) == "True"
    cpu_only = build(ext, "--torch", str(small_demo), "--set", "FORCE_CUDA=0", check=False)
    assert cpu_only.returncode == 1 and "holds no device code" in cpu_only.stderr and "--cuda none" in cpu_only.stderr
    import zipfile

    dist = tmp_path / "dist"
    build(small_demo, "--cuda", "none", "--wheel", "--dist", str(dist))
    (cpu_wheel,) = dist.glob("*+git*.cpu-*.whl")
    assert "minitorch/lib/libc10_cuda.so" not in zipfile.ZipFile(cpu_wheel).namelist()
    build(small_demo, "--cuda", "13.0", "--arch", "8.0", "--wheel", "--dist", str(dist))
    (cu_wheel,) = dist.glob("*+git*.cu130-*.whl")
    assert "minitorch/lib/libc10_cuda.so" in zipfile.ZipFile(cu_wheel).namelist()


def test_release_debug_release_imports_the_release_library(small_demo, tmp_path):
    """A second tree (here --debug) configures from nothing, install RPATHs and all, under Ninja; switching
    back to release puts the release libraries back in the checkout, and its wheel holds them."""
    demo = small_demo
    lib = demo / "minitorch/lib/libc10.so"
    build(demo, "--cuda", "none")
    release = file_digest(lib)
    assert in_checkout(demo)["debug"] == "False"
    debug = build(demo, "--cuda", "none", "--debug")
    assert "new tree for" in debug.stderr and "The CXX compiler identification" in last_log(demo)
    assert "CMAKE_BUILD_TYPE:STRING=Debug" in (demo / "build/CMakeCache.txt").read_text()
    assert file_digest(lib) != release and in_checkout(demo)["debug"] == "True"
    back = build(demo, "--cuda", "none")
    assert "up to date" in back.stderr and file_digest(lib) == release and in_checkout(demo)["debug"] == "False"
    import zipfile

    dist = tmp_path / "dist"
    build(demo, "--cuda", "none", "--wheel", "--dist", str(dist))
    after = build(demo, "--cuda", "none")  # the wheel changed nothing the develop build made (issue 58 item 14)
    assert "up to date" in after.stderr and in_checkout(demo)["debug"] == "False", after.stderr
    (wheel,) = dist.glob("*.whl")
    import hashlib

    packed = hashlib.sha256(zipfile.ZipFile(wheel).read("minitorch/lib/libc10.so")).hexdigest()
    assert packed == file_digest(lib)
    cleaned = inv("clean", "--path", str(demo), check=True)  # the current tree and its files in the checkout
    assert "removed py" in cleaned.stderr and not lib.exists() and not (demo / "minitorch/version.py").exists()


def test_the_builds_own_clones_go_through_the_mirrors_and_the_cache(shared, tmp_path, monkeypatch):
    """Eigen (cloned at configure time, from a second host) and NCCL (CUDA builds) come from hosts only mirror
    rules reach: `inv clone` fetches them into the mirror cache ahead, and the build's git is pointed there, so
    the build works with those hosts gone; an scp-like submodule url maps through the same rules."""
    for key, value in {**shared, "TORCHBUILD_PATHS_LOGS": str(tmp_path / "logs")}.items():
        monkeypatch.setenv(key, value)
    up = make_upstream(tmp_path / "upstream", url_base="https://git.example.invalid", units=4)
    up.link("pytorch", "third_party/pybind11", "pybind11", url="git@git.example.invalid:pybind11")
    monkeypatch.setenv("TORCHBUILD_MIRRORS_GIT", ",".join(f"{k}={v}" for k, v in up.mirror_rule().items()))
    demo = tmp_path / "co"
    done = inv("clone", "--url", up.url("pytorch"), "--path", str(demo), check=True)
    assert "fetched ahead into the mirror cache: https://git.example.invalid/nccl, " \
           "https://gitlab.git.example.invalid/eigen" in done.stderr
    assert (demo / "third_party/pybind11/LICENSE").exists()

    shutil.rmtree(up.repo("gitlab/eigen"))  # the second host is gone: the mirror cache serves the build
    shutil.rmtree(up.repo("nccl"))
    build(demo, "--cuda", "none")
    assert "-- Checkout Eigen release tag: 3.4.0" in last_log(demo)
    assert (demo / "third_party/eigen/include/Eigen/Core").exists()
    assert git(demo / "third_party/eigen", "remote", "get-url", "origin") == "https://gitlab.git.example.invalid/eigen"
    assert run_python("import minitorch; print(minitorch.checksum())", demo.parent) == "132875"  # 4 units


def test_a_copied_checkout_builds_its_own_sources(small_demo, tmp_path):
    """`cp -a` of a built checkout, an edit in the copy: its tree names the original folder, so it is
    configured afresh before anything is judged up to date, and the copy imports its own change."""
    demo = small_demo
    build(demo, "--cuda", "none")
    original = file_digest(demo / "minitorch/lib/libc10.so")
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(demo), str(copy)], check=True)
    unit = copy / "c10/core/unit_00.cpp"
    unit.write_text(unit.read_text().replace("return work<0>(n)", "return 1 + work<0>(n)"))
    done = build(copy, "--cuda", "none")
    assert f"the tree was configured for {demo}" in done.stderr and "up to date" not in done.stderr
    assert run_python("import minitorch; print(minitorch.checksum())", tmp_path) == "132876"
    assert file_digest(demo / "minitorch/lib/libc10.so") == original


def test_the_python_part_needs_the_core_installed(tmp_path, shared, monkeypatch):
    """BUILD_PYTHON_ONLY links against the core in LIBTORCH_LIB_PATH: without the core's wheel in the env,
    one clear line says what to build first, and nothing is built (a checkout up to PyTorch 2.7's shape:
    without the [project] table, setup.py names the split build's wheels)."""
    for key, value in {**shared, "TORCHBUILD_PATHS_LOGS": str(tmp_path / "logs")}.items():
        monkeypatch.setenv(key, value)
    demo = tmp_path / "co"
    inv("clone", "--url", make_upstream(tmp_path / "upstream", units=1, project_table=False).url("pytorch"),
        "--path", str(demo), check=True)
    done = build(demo, "--cuda", "none", "--part", "python", check=False)
    assert done.returncode == 1 and "has no minitorch_no_python" in done.stderr
    assert "inv build --part core --wheel" in done.stderr and "Traceback" not in done.stderr


def test_an_unwritable_log_dir_is_refused_before_anything_runs(small_demo, tmp_path, monkeypatch):
    """paths.logs on a read-only file system (what a log dir another user owns is to this one): one line
    naming the folder and the setting, before any tree is touched."""
    with tmpfs(tmp_path / "ro-logs", "ro,size=64k") as logs:
        done = build(small_demo, "--cuda", "none", check=False, env={"TORCHBUILD_PATHS_LOGS": str(logs)})
        assert done.returncode == 1 and "Traceback" not in done.output
        assert f"cannot write the log dir {logs}: Read-only file system" in done.stderr
        assert "paths.logs" in done.stderr and not (small_demo / "build").exists()


def test_compile_error_shows_the_error_and_the_log(small_demo):
    (small_demo / "c10/core/unit_03.cpp").write_text("int broken( { return 1; }\n")
    done = build(small_demo, "--cuda", "none", check=False)
    assert done.returncode == 1
    assert "the build of py" in done.stderr and "failed; the first error:" in done.stderr
    assert re.search(r"unit_03\.cpp:\d+:\d+: error", done.stderr)
    log_path = re.search(r"full log: (\S+)", done.stderr).group(1)
    assert Path(log_path).exists() and "error" in Path(log_path).read_text()
    assert "Traceback" not in done.stderr.split("first error:")[0]


def test_dry_run_prints_the_plan_and_runs_nothing(small_demo, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHBUILD_PATHS_ENVS", str(tmp_path / "no-envs"))
    monkeypatch.setenv("TORCHBUILD_PATHS_CACHE_DIR", str(tmp_path / "no-cache"))
    done = build(small_demo, "--cuda", "none", "--jobs", "3", "--set", "USE_PRECOMPILED_HEADERS=0", "--dry-run")
    for label in ("interpreter:", "toolkit:     none (a CPU build)", "build tree:", "log:",
                  "MAX_JOBS:    3", "USE_PRECOMPILED_HEADERS=0", "command:", "CMAKE_PREFIX_PATH=",
                  "verdict: the whole way: no tree of", "would run:   (cd "):
        assert label in done.stdout, label
    assert "would create env" in done.stderr
    assert not (small_demo / "build").exists() and not (tmp_path / "no-envs").exists()
    assert not Path(os.environ["TORCHBUILD_PATHS_LOGS"]).exists()
    assert not (tmp_path / "no-cache" / "linkers.json").exists()  # issue 54: a dry run wrote the linkers' answers


def test_pytorchs_variables_in_the_shell_choose_the_build_type_and_its_jobs(small_demo):
    shown = build(small_demo, "--cuda", "none", "--dry-run", env={"DEBUG": "1"})
    assert "DEBUG=1 in the environment: a debug build" in shown.stderr and "cpu-debug" in shown.output
    assert "cpu-relwithdebinfo" in build(small_demo, "--cuda", "none", "--dry-run",
                                         env={"REL_WITH_DEB_INFO": "1"}).output
    flag = build(small_demo, "--cuda", "none", "--dry-run", "--rel-with-deb-info", env={"DEBUG": "1"})
    assert "cpu-relwithdebinfo" in flag.output and "in the environment" not in flag.stderr  # the flag wins
    assert "MAX_JOBS:    1 (MAX_JOBS in the environment" in build(small_demo, "--cuda", "none", "--dry-run",
                                                                  env={"MAX_JOBS": "1"}).stdout
    assert "MAX_JOBS:    3 (--jobs" in build(small_demo, "--cuda", "none", "--dry-run", "--jobs", "3",
                                             env={"MAX_JOBS": "1"}).stdout
    bad = build(small_demo, "--cuda", "none", "--dry-run", env={"MAX_JOBS": "lots"}, check=False)
    assert bad.returncode != 0 and "MAX_JOBS=lots in the environment is not a number" in bad.stderr


def test_changed_configuration_reconfigures_the_tree(small_demo):
    build(small_demo, "--cuda", "none")
    done = build(small_demo, "--cuda", "none", "--set", "USE_PRECOMPILED_HEADERS=0")
    assert "configuration changed, reconfiguring: USE_PRECOMPILED_HEADERS: (unset) -> 0" in done.stderr
    assert "USE_PRECOMPILED_HEADERS:BOOL=0" in (small_demo / "build/CMakeCache.txt").read_text()
    assert "reconfiguring" not in build(small_demo, "--cuda", "none", "--set", "USE_PRECOMPILED_HEADERS=0").stderr


def test_wheel_names_its_commit_and_variant_installs_and_leaves_the_develop_build_as_it_was(small_demo, tmp_path):
    build(small_demo, "--cuda", "none")  # the develop configuration, importable in the env
    develop = run_python("import minitorch.version as v; print(v.__version__)", tmp_path)
    dist = tmp_path / "dist"
    done = build(small_demo, "--cuda", "none", "--wheel", "--dist", str(dist))
    (wheel,) = dist.glob("*.whl")
    head = git(small_demo, "rev-parse", "HEAD")[:7]
    assert wheel.name.startswith(f"minitorch-2.11.0a0+git{head}.cpu-") and f"wheel: {wheel}" in done.stderr
    assert run_python("import minitorch.version as v; print(v.__version__)", tmp_path) == develop  # not the wheel's
    git(small_demo, "commit", "-q", "--allow-empty", "-m", "another commit")
    build(small_demo, "--cuda", "none", "--wheel", "--dist", str(dist))
    assert len(list(dist.glob("*.whl"))) == 2  # another commit, another version: pip installs it, not "already"
    venv = tmp_path / "smoke"
    make_venv(venv)
    subprocess.run([str(venv / "bin/pip"), "install", "-q", "--no-deps", str(wheel)], check=True)
    out = subprocess.run([str(venv / "bin/python"), "-c", "import minitorch; print(minitorch.checksum())"],
                         cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    assert out.strip() == "132875"  # 4 units


def test_wheel_comes_from_the_projects_own_build_backend(shared, tmp_path, monkeypatch):
    """No pip in between: the backend pyproject.toml names (here an in-tree one on backend-path) makes
    the wheel; a pyproject.toml that is not TOML is a one-line error and leaves no wheel."""
    for key, value in shared.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TORCHBUILD_PATHS_LOGS", str(tmp_path / "logs"))
    proj = tmp_path / "proj"
    (proj / "tiny").mkdir(parents=True)
    (proj / "tiny" / "__init__.py").write_text("VALUE = 7\n")
    (proj / "_backend").mkdir()
    (proj / "_backend" / "tiny_backend.py").write_text(
        "from pathlib import Path\nfrom setuptools.build_meta import *  # noqa\n"
        "from setuptools import build_meta as _b\n\n"
        "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
        "    Path('tiny/_via_backend.py').write_text('YES = True\\n')\n"
        "    return _b.build_wheel(wheel_directory, config_settings, metadata_directory)\n")
    good = ('[build-system]\nrequires = ["setuptools>=70.1"]\nbuild-backend = "tiny_backend"\n'
            'backend-path = ["_backend"]\n[project]\nname = "tiny"\nversion = "1.0"\n'
            '[tool.setuptools]\npackages = ["tiny"]\n')
    (proj / "pyproject.toml").write_text(good)
    git(proj, "init", "-q")
    git(proj, "add", "-A")
    git(proj, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tiny")
    dist = tmp_path / "dist"
    done = build(proj, "--cuda", "none", "--wheel", "--dist", str(dist))
    (wheel,) = dist.glob("tiny-1.0-*.whl")
    assert f"wheel: {wheel}" in done.stderr
    import zipfile
    assert "tiny/_via_backend.py" in zipfile.ZipFile(wheel).namelist()

    wheel.unlink()
    (proj / "pyproject.toml").write_text(good.replace('build-backend = "tiny_backend"', "build-backend = tiny"))
    bad = build(proj, "--cuda", "none", "--wheel", "--dist", str(dist), check=False)
    lines = [line for line in bad.stderr.splitlines() if "pyproject.toml" in line]
    assert bad.returncode == 1 and len(lines) == 1 and "is not valid TOML" in lines[0], bad.stderr
    assert "fix that file" in bad.stderr and not list(dist.glob("*.whl"))


def test_clean_removes_trees_not_sources(small_demo):
    build(small_demo, "--cuda", "none")
    before = sorted(p.relative_to(small_demo) for p in small_demo.rglob("*"))
    dry = inv("clean", "--all", "--path", str(small_demo), "--dry-run", check=True)
    assert re.search(r"would remove py[\d.]+-cpu-release \(.*build\): [\d.]+ MiB", dry.stderr)
    assert "nothing was removed" in dry.stderr
    assert sorted(p.relative_to(small_demo) for p in small_demo.rglob("*")) == before
    done = inv("clean", "--all", "--path", str(small_demo), check=True)
    assert re.search(r"removed py[\d.]+-cpu-release \(.*build\): [\d.]+ MiB", done.stderr)
    assert "freed" in done.stderr and not (small_demo / "build").exists()
    assert git(small_demo, "status", "--porcelain") == "" and (small_demo / "c10/core/unit_00.cpp").exists()
    assert "nothing to remove" in inv("clean", "--path", str(small_demo), check=True).stderr
    bad = inv("clean", "--config", "nope", "--path", str(small_demo))
    assert bad.returncode == 1 and "no build tree for configuration 'nope'" in bad.stderr


def test_nothing_to_build_is_a_clear_error(tmp_path):
    done = inv("build", "--path", str(tmp_path), "--cuda", "none")
    assert done.returncode == 1 and "nothing to build" in done.stderr and "inv clone" in done.stderr


def test_env_selection_order(small_demo, tmp_path, monkeypatch):
    plan = build(small_demo, "--cuda", "none", "--dry-run").stderr
    assert "the default Python: managed env py" in plan
    external = tmp_path / "myvenv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(external)], check=True)  # a dry run: no pip
    active = build(small_demo, "--cuda", "none", "--dry-run", env={"VIRTUAL_ENV": str(external)}).stderr
    assert f"{external}/bin/python" in active and "the active environment (VIRTUAL_ENV)" in active
    named = build(small_demo, "--cuda", "none", "--dry-run", "--env", "nope", check=False)
    assert named.returncode == 1 and "there is no managed env 'nope'" in named.stderr


def test_sigint_stops_the_whole_tree_and_the_next_build_resumes(small_demo, monkeypatch):
    demo = small_demo
    monkeypatch.setenv("TORCHBUILD_PATHS_CACHE_DIR", str(demo.parent / "cold-cache"))  # really compile
    args = [sys.executable, "-m", "invoke", "--search-root", str(REPO), "build", "--path", str(demo),
            "--cuda", "none", "--jobs", "2"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_default)
    wait_for(Path(os.environ["TORCHBUILD_PATHS_LOGS"]), r"\[\d+/\d+\] Building CXX", proc)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    deadline = time.monotonic() + 5
    while compilers_in(demo) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert compilers_in(demo) == []
    done = build(demo, "--cuda", "none")
    assert "cpu-release built in" in done.stderr
    assert len(compiled(last_log(demo))) < 9  # of 9 (4 units, 3 more, the bindings, the attention kernel): kept
    assert run_python("import minitorch; print(minitorch.checksum())", demo.parent) == "132875"


def test_a_build_killed_with_sigkill_leaves_nothing_running_into_the_next(small_demo, monkeypatch):
    """kill -9 of `inv build` cannot stop its children, and pip, cmake, ninja and the compilers go on; the
    next build of the checkout stops them (they carry its id) before it builds in the same build/."""
    demo = small_demo
    monkeypatch.setenv("TORCHBUILD_PATHS_CACHE_DIR", str(demo.parent / "cold-cache"))  # really compile
    args = [sys.executable, "-m", "invoke", "--search-root", str(REPO), "build", "--path", str(demo),
            "--cuda", "none", "--jobs", "1"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(Path(os.environ["TORCHBUILD_PATHS_LOGS"]), r"\[\d+/\d+\] Building CXX", proc)
    proc.kill()
    proc.wait(timeout=10)
    assert compilers_in(demo), "the killed build's children should still be running"
    done = build(demo, "--cuda", "none")
    assert re.search(r"stopped \d+ process\(es\) still running from a build of .* that was killed", done.stderr)
    assert "cpu-release built in" in done.stderr and not compilers_in(demo)
    assert run_python("import minitorch; print(minitorch.checksum())", demo.parent) == "132875"


def test_two_builds_at_once_take_turns(small_demo):
    demo = small_demo
    build(demo, "--cuda", "none")
    (demo / "c10/core/unit_03.cpp").touch()
    args = [sys.executable, "-m", "invoke", "--search-root", str(REPO), "build", "--path", str(demo), "--cuda", "none"]
    first = subprocess.Popen(args + ["--rerun"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # long
    deadline = time.monotonic() + 60
    while not (demo / ".torchbuild/lock").exists() or not (demo / ".torchbuild/lock").read_text().strip():
        assert time.monotonic() < deadline and first.poll() is None
        time.sleep(0.02)
    second = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err1 = first.communicate(timeout=300)
    _, err2 = second.communicate(timeout=300)
    assert first.returncode == 0, err1
    assert second.returncode == 0, err2
    assert "another build is running" in err2 and "waiting for it to finish" in err2
    assert run_python("import minitorch; print(minitorch.checksum())", demo.parent) == "132875"


def test_own_build_dir_is_kept_and_each_build_leaves_a_record(small_demo):
    import json

    own = small_demo / "build"
    own.mkdir()
    (own / "mine.txt").write_text("keep")
    first = build(small_demo, "--cuda", "none")
    assert "build/ was not made by torchbuild: moved it, untouched, to" in first.stderr
    moved = next((small_demo / ".torchbuild/trees").glob("foreign-*"))
    assert (moved / "mine.txt").read_text() == "keep"
    record = json.loads(inv("build", "--path", str(small_demo), "--record", check=True).stdout)
    assert record["commit"] == git(small_demo, "rev-parse", "HEAD") and record["result"] == "ok"
    assert record["config"].endswith("-cpu-release") and record["MAX_JOBS"]
    assert record["tools"]["cmake"]["version"].startswith("cmake version")
    assert any(p.lower().startswith("setuptools==") for p in record["packages"])
    cleaned = inv("clean", "--path", str(small_demo), "--all", check=True)
    assert "torchbuild did not make it" in cleaned.stderr and (moved / "mine.txt").exists()
    assert not (small_demo / "build").exists()


def test_a_cuda_that_is_not_installed_names_everything_it_needs(small_demo):
    done = build(small_demo, "--cuda", "10.0", "--dry-run", check=False)
    assert done.returncode == 1 and "CUDA 10.0 is not installed" in done.stderr
    assert "CUDA 10.0 accepts host gcc <= 7: none is installed (found gcc" in done.stderr
    assert "g++-7" in done.stderr and "gxx_linux-64=7" in done.stderr
    assert "PyTorch releases built for CUDA 10.0: 1.0, 1.1, 1.2" in done.stderr
    assert "runfile" in done.stderr and "toolchain.cuda_roots" in done.stderr
    future = build(small_demo, "--cuda", "99", "--dry-run", check=False)  # nothing is known of it: nothing is claimed
    assert future.returncode == 1 and "CUDA 99 is not installed" in future.stderr
    assert "accepts host gcc" not in future.stderr and "inv cuda.install 99" not in future.stderr
    assert "no CUDA 99 is known to torchbuild" in future.stderr


def test_a_failed_build_names_its_record(small_demo):
    import json

    unit = small_demo / "c10/core/unit_03.cpp"
    good = unit.read_text()
    unit.write_text("int broken( {\n")
    failed = build(small_demo, "--cuda", "none", check=False)
    assert failed.returncode == 1 and "(`inv build --record`)" in failed.stderr
    path = Path(re.search(r"for a bug report: (\S+\.record\.json)", failed.stderr).group(1))
    record = json.loads(path.read_text())
    assert record["result"] == "failed" and record["exit_code"] != 0 and record["commit"]
    unit.write_text(good)
    build(small_demo, "--cuda", "none")
    assert json.loads(inv("build", "--path", str(small_demo), "--record", check=True).stdout)["result"] == "ok"


UP_TO_DATE = "up to date:"


def test_a_failed_build_of_a_new_configuration_leaves_the_previous_one_importable(small_demo):  # noqa: F811
    """(issue 29)"""
    build(small_demo, "--cuda", "none")
    checksum = subprocess.run([str(env_python()), "-c", "import minitorch; print(minitorch.checksum())"],
                              cwd=small_demo.parent, capture_output=True, text=True).stdout.strip()
    failed = build(small_demo, "--cuda", "none", "--debug", "--set", "CMAKE_CXX_FLAGS=-fno-such-flag-at-all",
                   check=False)
    assert failed.returncode != 0 and "Traceback" not in failed.output
    release = next(p.name for p in (small_demo / ".torchbuild" / "trees").iterdir() if p.name.endswith("-debug"))
    assert f"{release.replace('-debug', '-release')} is back in the checkout and importable" in failed.stderr
    assert (small_demo / "minitorch" / "lib" / "libc10.so").is_file()
    again = subprocess.run([str(env_python()), "-c", "import minitorch; print(minitorch.checksum())"],
                           cwd=small_demo.parent, capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.strip() == checksum, again.stderr
    assert UP_TO_DATE in build(small_demo, "--cuda", "none").stderr  # the checkout is that configuration's again


def test_an_option_cmake_does_not_use_is_named_on_the_terminal(small_demo):  # noqa: F811
    """(issues 29, 58 item 14) A `--set` no file of the checkout names is refused before anything configures,
    with the name it likely meant; from the shell, unchecked, CMake's warning is said after the build."""
    refused = build(small_demo, "--cuda", "none", "--set", "USE_CUDAA=1", check=False)
    assert refused.returncode != 0 and "Traceback" not in refused.output
    assert "--set USE_CUDAA: no CMake, Python or TOML file" in refused.stderr and "did you mean USE_CUDA" in \
        refused.stderr and "nothing was built" in refused.stderr
    assert not (small_demo / "build").exists()
    done = build(small_demo, "--cuda", "none", env={"USE_CUDAA": "1"})
    warned = [ln for ln in done.stderr.splitlines() if "CMake did not use" in ln]
    assert len(warned) == 1 and "USE_CUDAA" in warned[0] and "misspelt" in warned[0]
    assert "CMake did not use" not in build(small_demo, "--cuda", "none", "--rerun").stderr
    # (issue 69 item 4) read by tools/build_pytorch_libs.py alone, or by a file not yet added: no typo
    (small_demo / "cmake" / "Mine.cmake").write_text('option(USE_MINE "mine, not yet git-added" OFF)\n')
    ran = small_demo / "custom-step-ran"
    custom = build(small_demo, "--cuda", "none", "--set", "USE_MINE=1", env={"BUILD_CUSTOM_STEP": f"touch {ran}"})
    assert ran.exists() and "CMake did not use" not in custom.stderr, custom.stderr
