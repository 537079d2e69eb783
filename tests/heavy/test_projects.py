"""The heavy tier's scenarios of tests/integration/test_projects.py's area, half a minute or more each (`nox -s heavy`,
and CI after README's test command): a tree outside build gets what build gets; a setup py whose cmake tree pep660
throws away builds in place and keeps it."""

from __future__ import annotations

import subprocess
import sys

from ..helpers import git, inv


def test_a_tree_outside_build_gets_what_build_gets(tmp_path, monkeypatch):
    """onnx's shape (.setuptools-cmake-build/): the no-op, a reconfigure when an option changes and when it is no
    longer given (CMake's cache would keep it), one tree per configuration restored on the way back, and clean.
    (issue 31)"""
    from ..onnxlike import make_onnx_shaped_project

    for key, value in {"TORCHBUILD_PATHS_ENVS": tmp_path / "envs", "TORCHBUILD_PATHS_LOGS": tmp_path / "logs",
                       "TORCHBUILD_PATHS_CACHE_DIR": tmp_path / "cache", "TORCHBUILD_BUILD_MIN_FREE_GB": "1"}.items():
        monkeypatch.setenv(key, str(value))
    co = make_onnx_shaped_project(tmp_path / "co")
    tree = co / ".setuptools-cmake-build"

    def build(*args: str, **env: str) -> tuple[str, str]:
        done = inv("build", "--path", str(co), "--cuda", "none", *args, env=env, check=True, timeout=300)
        python = tmp_path / "envs/py{}.{}/bin/python".format(*sys.version_info[:2])
        said = subprocess.run([python, "-c", "import greet; print(greet.greet())"], cwd=tmp_path, text=True,
                              capture_output=True, check=True).stdout.strip()
        return done.stderr, said

    first, said = build()
    assert said == "hello release 1" and (tree / "CMakeCache.txt").is_file()
    noop, said = build()
    assert "up to date: ninja has no work" in noop and said == "hello release 1"
    (co / "src/core.cpp").write_text("long core_count() { return 2; }\n")
    edited, said = build()
    assert "up to date:" not in edited and said == "hello release 2"
    option, said = build(CMAKE_ARGS="-DGREETING=bonjour")
    assert "configuration changed, reconfiguring: CMAKE_ARGS" in option and said == "bonjour release 2"
    dropped, said = build()  # CMake's cache alone would keep bonjour: the tree starts over
    assert "CMAKE_ARGS: -DGREETING=bonjour -> (unset)" in dropped and said == "hello release 2"
    debug, said = build("--debug")
    assert said == "hello debug 2" and "Debug" in (tree / "CMakeCache.txt").read_text()
    back, said = build()
    assert "restored the" in back and "up to date: ninja has no work" in back and said == "hello release 2"
    assert "CMAKE_BUILD_TYPE:STRING=Release" in (tree / "CMakeCache.txt").read_text()
    inv("clean", "--path", str(co), "--all", check=True)
    assert not tree.exists() and (co / "src/core.cpp").is_file()


def test_a_setup_py_whose_cmake_tree_pep660_throws_away_builds_in_place_and_keeps_it(tmp_path, monkeypatch):
    """pybind's cmake_example shape: the first build is pip's (PEP 660 configures in a temporary build_temp); from
    the second on, setuptools' in-place build with build/temp.torchbuild kept: the no-op is up to date, an edited
    unit is the one compile, and a new file takes pip again. (issue 31)"""
    from ..onnxlike import make_cmake_example_project

    for key, value in {"TORCHBUILD_PATHS_ENVS": tmp_path / "envs", "TORCHBUILD_PATHS_LOGS": tmp_path / "logs",
                       "TORCHBUILD_BUILD_MIN_FREE_GB": "1", "TORCHBUILD_BUILD_CUDA": "none"}.items():
        monkeypatch.setenv(key, str(value))
    co = make_cmake_example_project(tmp_path / "co")
    kept = co / "build/temp.torchbuild/cmake_example/CMakeCache.txt"

    def build() -> tuple[str, str]:
        done = inv("build", "--path", str(co), check=True, timeout=300)
        python = tmp_path / "envs/py{}.{}/bin/python".format(*sys.version_info[:2])
        said = subprocess.run([python, "-c", "import cmake_example; print(cmake_example.add(1, 2))"], cwd=tmp_path,
                              text=True, capture_output=True, check=True).stdout.strip()
        return done.stderr, said

    first, said = build()
    assert said == "3" and "in-place build" not in first and not kept.exists()
    second, said = build()
    assert "setuptools' in-place build, keeps the tree, without pip" in second and said == "3" and kept.is_file()
    noop, said = build()
    assert "up to date: ninja has no work" in noop and said == "3"
    main = co / "src/main.cpp"
    main.write_text(main.read_text().replace("return i + j;", "return i + j + 10;"))
    edited, said = build()
    assert "in-place build" in edited and said == "13" and "compile: 1 step(s)" in edited
    git(co, "commit", "-qam", "edited")  # setup.py's version is a literal, the same at this commit (issue 58, 15)
    committed, said = build()
    assert "a build of another commit" in committed and "through pip" not in committed and said == "13", committed
    (co / "NOTES.txt").write_text("a new file\n")
    new, said = build()
    assert "the whole way through pip: NOTES.txt is new since the last build" in new and said == "13"
