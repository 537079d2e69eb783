"""The heavy tier's scenarios of tests/integration/test_failures.py's area, half a minute or more each (`nox -s heavy`,
and CI after README's test command): inv build applies the cmake4 remedy and keeps it."""

from __future__ import annotations

from ..helpers import cmake_project, git, inv

SETUP = '''\
import os, subprocess, sys
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class WithCMake(build_ext):
    def run(self):
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.check_call(["cmake", "-S", here, "-B", os.path.join(here, "build"), "-G", "Ninja"])
        subprocess.check_call(["cmake", "--build", os.path.join(here, "build")])
        super().run()


setup(name="oldcmake", version="0.1", packages=["oldcmake"], cmdclass={"build_ext": WithCMake},
      ext_modules=[Extension("oldcmake._native", ["oldcmake/native.c"])])
'''


def test_inv_build_applies_the_cmake4_remedy_and_keeps_it(tmp_path, monkeypatch):
    """A setup.py + CMake project whose submodule asks for CMake 2.8, built in a managed env that
    gets CMake 4 from PyPI: the first configure fails, torchbuild says why, applies the remedy, and
    the build succeeds; the next build keeps the remedy."""
    up = tmp_path / "up"
    sub = cmake_project(up / "vendored", "add_library(vendored STATIC v.cpp)", minimum="2.8.12")
    (sub / "v.cpp").write_text("int vendored() { return 7; }\n")
    git(sub, "init", "-q", "-b", "main")
    git(sub, "add", "-A")
    git(sub, "commit", "-qm", "old vendored lib")
    proj = cmake_project(up / "proj", "project(proj CXX)\nadd_subdirectory(third_party/vendored)", minimum="3.18")
    (proj / "setup.py").write_text(SETUP)
    (proj / "requirements.txt").write_text("setuptools<80\nwheel\ncmake>=4\nninja\n")
    (proj / "oldcmake").mkdir()
    (proj / "oldcmake/__init__.py").write_text("ANSWER = 42\n")
    (proj / "oldcmake/native.c").write_text(
        '#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, NULL};\n'
        "PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&m); }\n")
    git(proj, "init", "-q", "-b", "main")
    git(proj, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub.as_uri(), "third_party/vendored")
    git(proj, "add", "-A")
    git(proj, "commit", "-qm", "project")
    for key, value in {"TORCHBUILD_PATHS_ENVS": tmp_path / "envs", "TORCHBUILD_PATHS_LOGS": tmp_path / "logs",
                       "TORCHBUILD_BUILD_MIN_FREE_GB": "1", "TORCHBUILD_BUILD_CUDA": "none"}.items():
        monkeypatch.setenv(key, str(value))
    co = tmp_path / "co"
    inv("clone", "--url", proj.as_uri(), "--path", str(co), check=True)
    first = inv("build", "--path", str(co), check=True, timeout=600)
    assert "known failure cmake4-policy" in first.stderr and "CMAKE_POLICY_VERSION_MINIMUM=3.5" in first.stderr
    assert "import oldcmake" in first.stderr  # the hint names the project's own package
    went = next(line for line in first.stderr.splitlines() if "where the time went:" in line)
    phases = [part.rsplit(" ", 1)[0] for part in went.split("went: ", 1)[1].split(", ")]
    assert phases[:2] == ["prepare", "the failed attempt"], went  # then the last attempt's phases, once
    assert phases.count("configure") == phases.count("pip and the backend") == 1, went
    log = sorted((tmp_path / "logs").rglob("*.log"), key=lambda p: p.stat().st_mtime)[-1].read_text()
    assert "torchbuild: known failure cmake4-policy" in log
    again = inv("build", "--path", str(co), "--rerun", check=True, timeout=600)
    assert "known failure" not in again.stderr  # the remedy was kept for this tree
    record = inv("build", "--path", str(co), "--record", check=True).stdout
    assert '"CMAKE_POLICY_VERSION_MINIMUM": "3.5"' in record

    # a new tree whose second attempt fails otherwise: the diagnosis is that attempt's, not the remedied one's
    (co / "third_party/vendored/v.cpp").write_text('#error "the real error is here"\n')
    failed = inv("build", "--path", str(co), "--debug", check=False, timeout=600)
    assert failed.returncode != 0 and "the real error is here" in failed.stderr
    final = failed.stderr.split("failed; the first error:")[-1]
    assert "CMAKE_POLICY_VERSION_MINIMUM" not in final and "cmake4-policy" not in final
