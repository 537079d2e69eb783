"""The build driver is read from a checkout's files, never guessed (docs/build.md, "Build drivers"): PyTorch's
setup.py up to 2.13, scikit-build-core on 2.14 and main, any other PEP 517 backend. On the demo's own files of
both eras and on small projects, without building."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from torchbuild.builder.drivers import detect
from torchbuild.demo import project_files


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    return root


@pytest.mark.parametrize(("era", "driver"), [("2.13", "SetuptoolsEra"), ("main", "ScikitBuildCore")])
def test_each_era_of_the_demo_gets_its_driver(tmp_path, era, driver):
    checkout = write(tmp_path, project_files("pytorch", units=1, era=era))
    found = detect(checkout)
    assert type(found).__name__ == driver and found.pytorch()


@pytest.mark.parametrize(("files", "driver", "backend"), [
    ({"pyproject.toml": "[build-system]\nbuild-backend = 'hatchling.build'\n"}, "Pep517", "hatchling.build"),
    ({"setup.py": "from setuptools import setup\nsetup()\n"}, "Pep517", "setuptools.build_meta:__legacy__"),
    ({"pyproject.toml": "[build-system]\nbuild-backend = 'scikit_build_core.build'\n"}, "ScikitBuildCore",
     "scikit_build_core.build"),
    # a setup.py that mentions the split build is PyTorch's, whatever lies beside it
    ({"setup.py": "import os\nos.environ.get('BUILD_LIBTORCH_WHL')\n"}, "SetuptoolsEra", None),
])
def test_other_projects_get_the_driver_their_files_name(tmp_path, files, driver, backend):
    found = detect(write(tmp_path, files))
    assert type(found).__name__ == driver
    if backend:
        assert found.backend == backend
    assert found.pytorch() == (driver == "SetuptoolsEra")


@pytest.mark.parametrize(("era", "reason", "not_reason"), [
    ("main", "BUILD_PYTHON_ONLY=1 makes the Python part require minitorch_no_python==<its version>", "py3-none-any"),
    ("2.13", "tagged py3-none-any, and its editable install fails", "_no_python=="),
])
def test_the_split_builds_refusal_gives_the_reason_of_the_checkouts_era(tmp_path, era, reason, not_reason):
    """Issue 58, item 3: on 2.14 and main the core's wheel installs (cp3X, editable works); what stops the split
    there is the fixed [project] name and the Python part's requirement on <name>_no_python."""
    from torchbuild.builder.request import split_refusal

    checkout = write(tmp_path, project_files("pytorch", units=1, era=era))
    pyproject = checkout / "pyproject.toml"
    if "[project]" not in pyproject.read_text():
        pyproject.write_text(pyproject.read_text() + '\n[project]\nname = "minitorch"\nversion = "1.0"\n')
    why = split_refusal(checkout)
    assert why is not None and reason in why and not_reason not in why


SCATTER_SETUP = ("from torch.utils.cpp_extension import BuildExtension, CppExtension\n"
                 "# a comment that names cmake decides nothing\n"
                 "setup(ext_modules=[CppExtension('x._C', ['csrc/x.cpp'])],\n"
                 "      cmdclass={'build_ext': BuildExtension.with_options(use_ninja=False)})\n")


@pytest.mark.parametrize(("files", "cmake", "itself"), [
    ({"setup.py": SCATTER_SETUP, "CMakeLists.txt": "project(lib CXX)\n"}, False, True),  # torch-scatter's sdist
    ({"setup.py": "import subprocess\nsubprocess.check_call(['cmake', '..'])\nExtension('x', [])\n",
      "CMakeLists.txt": "project(x)\n"}, True, False),  # pybind's cmake_example
    ({"setup.py": "from skbuild import setup\nsetup(name='x')\n"}, True, False),  # scikit-build (classic)
    ({"pyproject.toml": "[build-system]\nbuild-backend = 'py_build_cmake.build'\n",
      "CMakeLists.txt": "project(x)\n"}, True, False),  # no setup.py: the CMakeLists.txt at the top
])
def test_what_setup_py_does_decides_whether_the_build_runs_cmake(tmp_path, files, cmake, itself):
    """Issue 59: a CMakeLists.txt beside a setup.py that never runs it does not make a CMake project (no
    generator, depfiles instead)."""
    from torchbuild.builder.drivers.pep517 import calls_cmake, compiles_extensions

    write(tmp_path, files)
    assert (calls_cmake(tmp_path), compiles_extensions(tmp_path)) == (cmake, itself)


def test_cuda_is_decided_by_the_projects_own_build_files_not_its_submodules(tmp_path):
    """Issue 58 item 8 (correctionlib): pybind11, a submodule, names CUDA in its tests' CMakeLists.txt and its
    tools; the project's own files, CUDA in a comment included, do not use it."""
    from torchbuild.builder.facts import uses_cuda

    write(tmp_path, {"CMakeLists.txt": "project(correctionlib CXX)\n# no CUDA here\nadd_subdirectory(pybind11)\n",
                     "pyproject.toml": "[build-system]\nbuild-backend = 'scikit_build_core.build'\n",
                     ".gitmodules": '[submodule "pybind11"]\n\tpath = pybind11\n\turl = ../pybind11.git\n',
                     "pybind11/tests/CMakeLists.txt": "enable_language(CUDA)\n",
                     "pybind11/tools/pybind11Common.cmake": "if(CMAKE_CUDA_COMPILER)\n  set(x CUDA)\nendif()\n"})
    assert not uses_cuda(tmp_path)
    write(tmp_path, {"src/kernel.cu": "__global__ void k() {}\n"})
    assert uses_cuda(tmp_path)


def test_an_extension_whose_env_has_no_torch_is_refused_naming_the_ways_out(tmp_path):
    """Issue 58 item 10 (torch-scatter): its setup.py imports torch and declares no build requirement on it; an env
    without torch is refused before pip runs, naming --torch, an env that has one, and the install."""
    from torchbuild import config
    from torchbuild.builder.facts import check_torch_at_hand
    from torchbuild.envs import EnvChoice
    from torchbuild.errors import TorchbuildError

    checkout = write(tmp_path / "torch_scatter", {"setup.py": SCATTER_SETUP})
    cfg = config.load(tmp_path, {"HOME": str(tmp_path)}, {})
    bare = tmp_path / ".envs" / "py3.11"
    (bare / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (bare / "bin").mkdir()
    (bare / "bin" / "python").symlink_to(sys.executable)  # torchbuild's own Python: no torch to import
    (tmp_path / ".envs" / "with-torch" / "lib" / "python3.11" / "site-packages" / "torch" / "lib").mkdir(parents=True)
    choice = EnvChoice(bare, bare / "bin" / "python", "3.11", "the default Python")
    with pytest.raises(TorchbuildError) as refused:
        check_torch_at_hand(cfg, checkout, choice, detect(checkout))
    assert "torch_scatter's setup.py builds against torch" in refused.value.message
    assert "--torch ../pytorch" in refused.value.hint and "--env with-torch" in refused.value.hint
    assert f"{bare / 'bin' / 'python'} -m pip install torch" in refused.value.hint
    (bare / "lib" / "python3.11" / "site-packages" / "torch" / "lib").mkdir(parents=True)
    check_torch_at_hand(cfg, checkout, choice, detect(checkout))  # a torch at hand: nothing to say


def test_debug_files_takes_a_source_as_a_path_and_resolves_it_from_the_current_folder(tmp_path, monkeypatch):
    """Issue 68 finding 6: `--debug-files aten/src/ATen/native/Foo.cpp` from the checkout's root read the source
    as a file of patterns (its first line became the pattern); `../x` was taken as `x`."""
    from torchbuild.builder.debugfiles import patterns
    from torchbuild.errors import TorchbuildError

    co = tmp_path / "co"
    (co / "aten" / "native").mkdir(parents=True)
    (co / "aten" / "native" / "Foo.cpp").write_text("// c10 core unit 03\nint foo() { return 1; }\n")
    (co / "c10").mkdir()
    (co / "c10" / "core.cpp").write_text("int c() { return 2; }\n")
    (co / "mine.txt").write_text("# my units\naten/native/*.cpp\n\nc10/core.cpp\n")
    monkeypatch.chdir(co)
    assert patterns(["aten/native/Foo.cpp"], co) == ["aten/native/Foo.cpp"]
    assert patterns(["./aten/native/Foo.cpp;c10/*.cpp"], co) == ["aten/native/Foo.cpp", "c10/*.cpp"]
    assert patterns(["@mine.txt"], co) == patterns(["mine.txt"], co) == ["aten/native/*.cpp", "c10/core.cpp"]
    assert patterns([str(co / "c10" / "core.cpp")], co) == ["c10/core.cpp"]  # absolute
    monkeypatch.chdir(co / "aten" / "native")
    assert patterns(["Foo.cpp;../../c10/core.cpp"], co) == ["aten/native/Foo.cpp", "c10/core.cpp"]
    assert patterns(["../x.cpp"], co) == ["../x.cpp"]  # names nothing here: kept as written, never `x.cpp`
    with pytest.raises(TorchbuildError) as err:
        patterns(["@missing.txt"], co)
    assert "--debug-files @missing.txt: cannot read missing.txt" in err.value.message
