"""The demo in PyTorch main's shape (2.14 on): scikit-build-core builds it, CMake's outputs live in the env's
site-packages, options reach CMake through cmake/EnvVarForwarding.cmake. One checkout goes through what a
developer does in a day, and after each step the test asserts what imports."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from torchbuild.builder.ownership.cmaketrees import cache_entry

from ..helpers import (
    build,
    edit,
    env_python,
    has_python,
    imported,
    inv,
    last_log,
    make_venv,
    needs_nvcc,
)

UP_TO_DATE = "up to date:"


@pytest.mark.slow
def test_main_builds_no_ops_loops_switches_and_makes_a_wheel_through_scikit_build_core(main_demo, tmp_path):
    co = main_demo
    site = str(env_python().parent.parent)
    doctor = inv("doctor", env={"TORCHBUILD_SOURCE_PATH": str(co)}, check=True)
    assert "PyTorch's scikit-build-core driver" in doctor.stdout

    first = build(co, "--cuda", "none")
    assert "pip and the backend" in first.stderr and "setup.py" not in last_log(co).splitlines()[0]
    now = imported(co)
    assert now["package"] == str(co / "minitorch" / "__init__.py")  # Python from the checkout (redirect)
    assert now["binary"].startswith(site) and now["debug"] == "False"  # compiled outputs in the env
    assert now["version"].startswith("2.15.0a0+git") and (co / "minitorch" / "version.py").is_file()
    assert (co / "build" / "CMakeCache.txt").is_file()  # the kept tree is <checkout>/build

    assert UP_TO_DATE in build(co, "--cuda", "none").stderr  # the no-op: no pip, no configure, no zip
    # Python imported in place: no setup.py here to copy it to tools/shared/, and no pip (issue 58 item 4)
    edit(co / "minitorch/_utils_internal.py", '"WARNING"', '"INFO"')
    python_edit = build(co, "--cuda", "none").stderr
    assert "setup.py copies" not in python_edit and "through pip" not in python_edit, python_edit

    # the loop: one .cpp edited, CMake's build and install into the env, no pip; the whole way agrees
    edit(co / "c10/core/unit_01.cpp", "(n / 2)", "(n / 3)")
    loop = build(co, "--cuda", "none")
    assert "`cmake --install . --config Release --prefix" in loop.stderr and "1 compile step(s)" in loop.stderr
    edited = imported(co)
    assert edited["checksum"] != now["checksum"] and edited["binary"] == now["binary"]
    assert UP_TO_DATE in build(co, "--cuda", "none").stderr
    assert imported(co) == edited and UP_TO_DATE not in build(co, "--cuda", "none", "--rerun").stderr
    assert imported(co)["checksum"] == edited["checksum"]

    # an exported option overrides the cache; unexported, it goes back to its default (the cache would keep it)
    build(co, "--cuda", "none", env={"BUILD_TEST": "1", "USE_PRECOMPILED_HEADERS": "1"})
    assert cache_entry(co / "build", "USE_PRECOMPILED_HEADERS") == "1" and (co / "build" / "c10_test").is_file()
    unset = build(co, "--cuda", "none")
    assert "reconfiguring" in unset.stderr and cache_entry(co / "build", "USE_PRECOMPILED_HEADERS") == "OFF"
    assert cache_entry(co / "build", "BUILD_TEST") == "0"  # torchbuild's own default, as before
    assert imported(co)["checksum"] == edited["checksum"]

    # switching to debug and back: each configuration's binaries come back into the env, nothing rebuilt
    release = Path(edited["binary"]).read_bytes()
    debug = build(co, "--cuda", "none", "--debug")
    assert "cpu-debug built in" in debug.stderr and imported(co)["debug"] == "True"
    debug_binary = Path(imported(co)["binary"]).read_bytes()
    assert debug_binary != release
    back = build(co, "--cuda", "none")
    assert UP_TO_DATE in back.stderr and "restored the" in back.stderr
    assert imported(co)["debug"] == "False" and Path(imported(co)["binary"]).read_bytes() == release
    again = build(co, "--cuda", "none", "--debug")
    assert UP_TO_DATE in again.stderr and Path(imported(co)["binary"]).read_bytes() == debug_binary

    # a wheel, named and versioned by PYTORCH_BUILD_VERSION through tools/metadata, imports in a fresh env
    dist = tmp_path / "dist"
    made = build(co, "--cuda", "none", "--wheel", "--dist", str(dist))
    (wheel,) = dist.glob("*.whl")
    assert re.match(r"minitorch-2\.15\.0a0\+git[0-9a-f]{7}\.cpu-cp3", wheel.name) and f"wheel: {wheel}" in made.stderr
    assert "minitorch/lib/libc10.so" in zipfile.ZipFile(wheel).namelist()
    venv = tmp_path / "fresh"
    make_venv(venv)
    subprocess.run([str(venv / "bin/pip"), "install", "-q", "--no-deps", str(wheel)], check=True)
    fresh = subprocess.run([str(venv / "bin/python"), "-c", "import minitorch; print(minitorch.checksum())"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    assert fresh == edited["checksum"]
    after = build(co, "--cuda", "none")  # the wheel changed nothing the develop build made (issue 58 item 14)
    assert UP_TO_DATE in after.stderr and imported(co)["checksum"] == edited["checksum"], after.stderr

    # the split build: this era's wheels are all named by [project], so it is refused up front, saying why
    split = build(co, "--part", "core", check=False)
    assert split.returncode != 0 and "cannot make the split build" in split.stderr and "Traceback" not in split.stderr
    assert "cmake/EnvVarForwarding.cmake and tools/metadata/dependencies.py read BUILD_LIBTORCH_WHL" in split.stderr
    assert 'name = "minitorch" is fixed' in split.stderr and "setup.py reads neither" not in split.stderr
    # and the demo's setup.py is PyTorch main's shim: what torchbuild never runs refuses to build a wheel
    shim = subprocess.run([str(env_python()), "setup.py", "bdist_wheel"], cwd=co, capture_output=True, text=True)
    assert shim.returncode != 0 and "scikit-build-core" in shim.stderr


@pytest.mark.slow
def test_main_configurations_of_two_pythons_coexist_each_importable_in_its_own_env(main_demo):
    """Issue 54 (found on correctionlib): building for another Python moved the first Python's install out of its
    env, and its import failed. A switch happens within one env; configurations of different envs coexist."""
    co = main_demo
    other = next(m for m in ("3.12", "3.11", "3.13") if m != env_python().parent.parent.name[2:] and has_python(m))
    build(co, "--cuda", "none")
    first = imported(co)
    said = [build(co, "--cuda", "none", "--python", other, flag).stdout for flag in ("--explain", "--dry-run")]
    second = build(co, "--cuda", "none", "--python", other)
    assert f"py{other}-cpu-release built in" in second.stderr
    for text in (*said, second.stderr):  # one verdict: --explain, --dry-run and the build say the same way
        assert f"verdict: the whole way: no tree of py{other}-cpu-release yet" in text, text
    assert imported(co) == first  # the first Python's env still imports its own build
    theirs = Path(str(env_python()).replace(env_python().parent.parent.name, f"py{other}"))
    them = subprocess.run([str(theirs), "-c", "import minitorch; print(minitorch.checksum())"], cwd=co.parent,
                          capture_output=True, text=True)
    assert them.returncode == 0 and them.stdout.strip() == first["checksum"], them.stderr
    back = build(co, "--cuda", "none")
    assert "restored the" in back.stderr and UP_TO_DATE in back.stderr and imported(co) == first


@pytest.mark.slow
@needs_nvcc
def test_inv_demo_builds_main_with_cuda_and_runs_native_aot_stage_2_unless_turned_off(tmp_path, shared,  # noqa: F811
                                                                                      monkeypatch):
    """README's first command: `inv demo` makes PyTorch main's shape and builds it with the toolkit it finds;
    stage 2 relinks c10_cuda with its kernels, as `spin develop` runs it after pip."""
    settings = {**shared, "TORCHBUILD_PATHS_LOGS": str(tmp_path / "logs"), "TORCHBUILD_BUILD_ARCH": "8.0"}
    for key, value in settings.items():
        monkeypatch.setenv(key, value)
    demo = inv("demo", "--units", "4", "--path", str(tmp_path / "demo"), timeout=600, check=True)
    co = tmp_path / "demo" / "checkout"
    assert "PyTorch's scikit-build-core driver" in demo.stderr and "CUDA kernel built: True" in demo.stderr
    assert "native-AOT stage 2: relinked into" in last_log(co)
    assert imported(co)["aot"] == "3"  # the relinked libc10_cuda.so is the one the env imports
    cuda = ("--cuda", "13.0", "--arch", "8.0")
    settled = build(co, *cuda).stderr  # stage 2 relinked libc10_cuda.so after pip: ninja relinks what links it
    assert UP_TO_DATE not in settled and imported(co)["aot"] == "3", settled
    noop = build(co, *cuda).stderr
    assert UP_TO_DATE in noop, noop  # its CONFIGURE_DEPENDS glob checked, the steps behind it asked: nothing run
    (co / "build/native_aot/more.c").write_text("int minitorch_more_kernels(void) { return 1; }\n")
    assert UP_TO_DATE not in build(co, *cuda).stderr  # the glob finds more: rebuilt
    off = build(co, *cuda, env={"TORCH_NATIVE_AOT": "0"})
    assert UP_TO_DATE not in off.stderr and "native-AOT stage 2: relinked" not in last_log(co)
    assert imported(co)["aot"] == "0"  # CMake embeds nothing either, though stage 2 left its kernels in build/


@pytest.mark.parametrize(("args", "said"), [
    (("--era", "2.99"), ("--era 2.99 is not one the demo has", "main, 2.13")),
    (("--size", "huge"), ("--size huge is not one the demo has", "demo, pytorch")),
    (("--pad-mb", "99999"), ("--pad-mb 99999 is out of range", "pass 0 to 8192")),
])
def test_a_demo_it_does_not_have_is_one_clear_error(tmp_path, args, said):
    done = inv("demo", *args, "--path", str(tmp_path / "demo"))
    assert done.returncode == 1 and all(s in done.stderr for s in said), done.stderr
    assert "Traceback" not in done.output and not (tmp_path / "demo").exists()


def test_a_failed_build_says_what_imports_after_it(main_demo, tmp_path):
    """Issue 58 item 2: in the scikit-build-core era, a failed build of a new configuration puts the previous
    one back, and what it says of it is true. Here the failing build's compiler writes a file where one of the
    release configuration's installed files goes back (as a partial install would): that file stays, and the
    failure says the release tree is back but not all its files, instead of "importable as before"."""
    co = main_demo
    build(co, "--cuda", "none")
    site = next(env_python().parent.parent.glob("lib/python*/site-packages"))
    planted = site / "minitorch" / "lib" / "libc10.so"
    assert planted.is_file()
    wrapper = tmp_path / "c++"
    wrapper.write_text(f"#!/bin/sh\nmkdir -p {planted.parent}\necho planted > {planted}\nexit 1\n")
    wrapper.chmod(0o755)
    try:
        failed = build(co, "--cuda", "none", "--debug", "--set", f"CXX={wrapper}", check=False)
        assert failed.returncode != 0 and "Traceback" not in failed.output
        assert "were not put back" in failed.stderr and "importable as before" not in failed.stderr, failed.stderr
        release = f"py{sys.version_info[0]}.{sys.version_info[1]}-cpu-release"
        assert f"{release}'s tree is back, but not all its files" in failed.stderr, failed.stderr
        assert planted.read_text() == "planted\n"  # not ours: left where it is
    finally:  # the env is this worker's for every test: a package folder left there would shadow the next install
        shutil.rmtree(planted.parent.parent, ignore_errors=True)
