"""The heavy tier's scenarios of tests/integration/test_extensions.py's area, half a minute or more each (`nox -s
heavy`, and CI after README's test command): extension builds against the configurations torch incrementally and abi
aware; matrix builds the extensions wheels against the torch matrix wheels."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchbuild.demo import make_extension, make_upstream

from ..helpers import REAL_HOME, build, env_python, git, inv, project

EXT = "import extension_cpp, minitorch; print(extension_cpp.checksum_twice(5), minitorch.checksum(5), " \
      "extension_cpp.cuda_built(), extension_cpp.__file__)"


def imported(cwd: Path) -> list[str]:
    done = subprocess.run([str(env_python()), "-c", EXT], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def commit(repo: Path, message: str) -> None:
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", message)


@pytest.mark.slow
def test_extension_builds_against_the_configurations_torch_incrementally_and_abi_aware(tmp_path, shared, monkeypatch):  # noqa: F811
    for key, value in {**shared, "TORCHBUILD_PATHS_LOGS": str(tmp_path / "logs")}.items():
        monkeypatch.setenv(key, value)
    up = make_upstream(tmp_path / "upstream", units=4)
    make_extension(up)
    co, ext = tmp_path / "co", tmp_path / "ext"
    inv("clone", "--url", up.url("pytorch"), "--path", str(co), check=True)
    git(tmp_path, "clone", "-q", up.url("extension_cpp"), str(ext))
    built = build(co, "--cuda", "none")
    torch_key = f"py{sys.version_info[0]}.{sys.version_info[1]}-cpu-release"
    assert f"{torch_key} built" in built.stderr

    # bad input: one line naming the problem, nothing built
    wrong = build(ext, "--torch", str(tmp_path / "nowhere"), check=False)
    assert wrong.returncode == 1 and "--torch" in wrong.stderr and "there is no folder" in wrong.stderr
    not_torch = build(ext, "--torch", str(ext), check=False)
    assert not_torch.returncode == 1 and "is not a PyTorch checkout" in not_torch.stderr
    clash = build(ext, "--torch", str(co), "--debug", "--cuda", "13.0", check=False)
    assert clash.returncode == 1 and f"it holds {torch_key}, and this build asks for build type debug, CUDA 13.0" \
        in clash.stderr
    assert not (ext / "build").exists()

    # the extension against the configuration's torch, in its env: one tree per (configuration x torch)
    first = build(ext, "--torch", str(co))
    key = next(w for w in first.stderr.split() if w.startswith("py3.") and "-on-co-" in w)
    assert key.startswith(torch_key) and f"--torch: {torch_key} of {co}" in first.stderr
    twice, once, device, where = imported(tmp_path)
    assert int(twice) == 2 * int(once) and device == "False" and where.startswith(str(ext))
    in_place = build(ext, "--torch", str(co))  # its kept tree starts: build_ext in place
    assert "setup.py build_ext --inplace --force --build-temp build/temp.torchbuild" in in_place.stderr
    assert "ccache 5/5 hits" in in_place.stderr  # what pip compiled in its temporary folder, by absolute paths
    noop = build(ext, "--torch", str(co))
    assert "up to date: ninja has no work in build_ext's build.ninja" in noop.stderr
    (ext / "extension_cpp/csrc/ops.cpp").write_text((ext / "extension_cpp/csrc/ops.cpp").read_text() + "// edit\n")
    edited = build(ext, "--torch", str(co))
    assert f"{key} built" in edited.stderr and ": 1 compile step(s)" in edited.stderr

    # torch rebuilt with a unit's body changed: no header, no exported symbol changed: the extension is up to date
    unit = co / "c10/core/unit_01.cpp"
    unit.write_text(unit.read_text().replace("return ", "return 0 + ", 1))
    assert f"{torch_key} built" in build(co, "--cuda", "none").stderr
    assert "up to date" in build(ext, "--torch", str(co)).stderr
    # a new exported symbol: linked again, nothing compiled
    unit.write_text(unit.read_text() + "namespace c10 { long unit_01_extra(long n) { return n; } }\n")
    build(co, "--cuda", "none")
    relinked = build(ext, "--torch", str(co))
    assert "libc10.so (torch) exports other symbols than at the last build" in relinked.stderr
    assert ": 0 compile step(s)" in relinked.stderr
    # a header the extension includes (through torch/extension.h): its 5 units compile again, the import is right
    header = co / "c10/include/c10/core.h"
    header.write_text(header.read_text().replace("long checksum(long n);", "long checksum(long n);\nlong more(long);"))
    build(co, "--cuda", "none")
    assert ": 5 compile step(s)" in build(ext, "--torch", str(co)).stderr
    twice, once, _, _ = imported(tmp_path)
    assert int(twice) == 2 * int(once)
    # issue 54: a torch header edited, then the extension's units compiled before the torch is built (against the
    # installed header, the old one), then the torch: CMake's install gives the header its source's time, older
    # than the extension's objects, so ninja calls them current; the header's content, recorded, does not
    header.write_text(header.read_text().replace("long more(long);", "long more(long);\nlong again(long);"))
    for unit in (ext / "extension_cpp/csrc").rglob("*.cpp"):
        unit.write_text(unit.read_text() + "// touched\n")
    assert ": 5 compile step(s)" in build(ext, "--torch", str(co)).stderr
    build(co, "--cuda", "none")
    installed = co / "minitorch" / "include" / "c10" / "core.h"
    objects = list((ext / "build").rglob("*.o"))
    assert "long again(long);" in installed.read_text()
    assert objects and all(o.stat().st_mtime_ns > installed.stat().st_mtime_ns for o in objects)  # the clock lies
    said = [build(ext, "--torch", str(co), flag).stdout for flag in ("--explain", "--dry-run")]
    stale = build(ext, "--torch", str(co))
    for text in (*said, stale.stderr):  # one verdict: --explain, --dry-run and the build take the same way
        assert "verdict: in place" in text and "5 output(s) read a file whose content changed" in text, text
    assert "ninja would run 5 step(s), 5 of them compile step(s)" in said[1], said[1]
    assert "up to date" not in stale.stderr and ": 5 compile step(s)" in stale.stderr, stale.stderr
    assert "content changed though its time says otherwise" in stale.stderr

    # the torch is protected: a resolution that would replace it fails naming it; a new commit of it still builds
    needs = tmp_path / "needs_old"
    needs.mkdir()
    (needs / "setup.py").write_text('from setuptools import setup\nsetup(name="needs_old", version="1.0", '
                                    'install_requires=["minitorch==2.0"])\n')
    refused = subprocess.run([str(env_python()), "-m", "pip", "install", "--no-build-isolation", str(needs)],
                             capture_output=True, text=True)
    assert refused.returncode != 0 and "The user requested (constraint) minitorch==2.11.0a0+git" in refused.stdout
    commit(co, "torch: a new commit")
    assert f"{torch_key} built" in build(co, "--cuda", "none").stderr
    version = subprocess.run([str(env_python()), "-m", "pip", "show", "minitorch"], capture_output=True,
                             text=True).stdout
    assert f"+git{git(co, 'rev-parse', '--short=7', 'HEAD')}" in version


@pytest.mark.slow
def test_matrix_builds_the_extensions_wheels_against_the_torch_matrix_wheels(tmp_path):
    """`inv matrix` in an extension's project (build.torch): each session installs the torch project's wheel of
    its Python x CUDA, builds the extension's wheel against it, and imports its compiled module in a fresh env
    with that torch; a torch wheel made anew runs the session again."""
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    up = make_upstream(tmp_path / "upstream", units=4)
    make_extension(up)
    common = f'matrix:\n  pythons: ["{minor}"]\n  cudas: ["none"]\npaths:\n  cache_dir: {tmp_path / "cache"}\n' \
             "build:\n  min_free_gb: 1\n  mkl: false\n"
    for folder in ("torch", "ext"):
        (tmp_path / folder).mkdir()
    torch_proj = project(tmp_path / "torch", f"source:\n  url: {up.url('pytorch')}\n  path: co\n" + common)
    ext_proj = project(tmp_path / "ext", f"source:\n  url: {up.url('extension_cpp')}\n  path: ext\n" + common
                       + "  torch: ../../torch/proj\n")
    env = {"HOME": str(REAL_HOME), "PIP_CACHE_DIR": str(REAL_HOME / ".cache" / "pip")}
    for proj in (torch_proj, ext_proj):
        inv("clone", root=proj, env=env, check=True)
    missing = inv("matrix", root=ext_proj, env=env, timeout=600)
    assert missing.returncode != 0 and f"build.torch ../../torch/proj: its matrix made no wheel for Python {minor}" \
        in missing.output and "run `inv matrix` in" in missing.output
    inv("matrix", root=torch_proj, env=env, check=True, timeout=600)
    built = inv("matrix", "--failed", root=ext_proj, env=env, check=True, timeout=600)
    assert "extension_cpp-0.1.0-cp3" in built.output and "imports in a fresh env" in built.output
    wheel = next((torch_proj / "dist").rglob("minitorch-*.whl"))  # the torch's matrix made it anew
    os.utime(wheel, ns=(wheel.stat().st_atime_ns, wheel.stat().st_mtime_ns + 10**9))
    again = inv("matrix", root=ext_proj, env=env, check=True, timeout=600)
    assert "runs again: the torch's wheels changed" in again.output and "imports in a fresh env" in again.output
