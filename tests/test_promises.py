"""What README promises of every command, on any project: git's folder for `clone --url`, ssh logins shown and
tokens hidden, no traceback when the reader of the output stops reading, whole sentences in `--list`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import REPO, git, inv
from .skbuild import make_skbuild_project
from .test_build import needs_nvcc

TORCHBUILD = [sys.executable, "-c", "import sys; from torchbuild.program import main; sys.argv[0] = 'torchbuild'; "
              "main()"]


def torchbuild(*args: str, cwd: Path, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TORCHBUILD, *args], cwd=cwd, stdout=stdout, stderr=subprocess.PIPE, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_clone_url_goes_into_the_folder_git_names_and_an_ssh_login_is_no_secret(tmp_path):
    ssh = torchbuild("clone", "--url", "ssh://git@git.example.invalid/pybind/cmake_example.git", "--dry-run",
                     cwd=tmp_path)
    assert ssh.returncode == 0, ssh.stderr
    assert "clone ssh://git@git.example.invalid/pybind/cmake_example.git into cmake_example" in ssh.stderr
    token = torchbuild("clone", "--url", "https://t0ken-abc@git.example.invalid/pybind/cmake_example", "--dry-run",
                       cwd=tmp_path)
    assert "t0ken-abc" not in token.stderr + token.stdout and "https://***@git.example.invalid" in token.stderr
    assert not (tmp_path / "cmake_example").exists() and not (tmp_path / "pytorch").exists()  # a dry run


def test_output_read_by_a_pipe_that_closes_early_ends_without_a_traceback(tmp_path):
    for args in (["config"], ["--list"]):
        head = subprocess.Popen(["head", "-1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        done = torchbuild(*args, cwd=tmp_path, stdout=head.stdin.fileno())  # type: ignore[union-attr]
        head.stdin.close()  # type: ignore[union-attr]
        head.wait()
        assert done.returncode == 0 and "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, args


def test_list_shows_each_task_in_a_whole_sentence():
    listed = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "--list"], capture_output=True,
                            text=True, check=True).stdout
    from invoke.util import helpline

    from torchbuild.tasks import namespace

    def walk(collection, prefix=""):  # type: ignore[no-untyped-def]
        for name, task in collection.tasks.items():
            yield prefix + name, task
        for name, sub in collection.collections.items():
            yield from walk(sub, f"{prefix}{name}.")

    for name, task in walk(namespace(None)):
        line = helpline(task)
        assert line and line.rstrip().endswith((".", ")")), f"{name}: {line!r} stops mid-sentence in --list"
        assert name in listed


@needs_nvcc
def test_auto_cuda_builds_a_project_that_uses_no_cuda_for_cpu(tmp_path, monkeypatch):
    """A pure-CPU CMake project on a machine with a toolkit: no cu130 key, no arch list; one .cu file of its
    own and the same project asks for the toolkit."""
    monkeypatch.setenv("TORCHBUILD_PATHS_LOGS", str(tmp_path / "logs"))
    project = make_skbuild_project(tmp_path / "cpu", units=1)
    plan = inv("build", "--path", str(project), "--dry-run", check=True).output
    assert "does not use CUDA" in plan and "-cpu-release" in plan and "TORCH_CUDA_ARCH_LIST" not in plan
    (project / "src/kernel.cu").write_text("__global__ void k() {}\n")
    plan = inv("build", "--path", str(project), "--dry-run", check=True).output
    assert "does not use CUDA" not in plan and "-cu130-release" in plan


def test_hints_name_the_command_the_user_ran(tmp_path):
    installed = torchbuild("build", cwd=tmp_path)
    assert installed.returncode != 0 and "run `torchbuild clone` first" in installed.stderr
    assert "`inv " not in installed.stderr
    doctor = torchbuild("doctor", cwd=tmp_path)
    assert "torchbuild clone" in doctor.stdout + doctor.stderr and "inv clone" not in doctor.stdout + doctor.stderr
    repo = inv("build", "--path", str(tmp_path / "nothing"))
    assert "run `inv clone` first" in repo.stderr  # in torchbuild's repo, `inv` is the command


def test_in_a_checkout_without_config_the_series_lives_in_its_torchbuild_folder(tmp_path):
    """README: with the installed command in a checkout, the patch series is `.torchbuild/patches/` there."""
    co = make_skbuild_project(tmp_path / "co", units=1)
    module = co / "src/module.cpp"
    module.write_text(module.read_text() + "// patched by the series\n")
    diff = subprocess.run(["git", "diff"], cwd=co, capture_output=True, text=True, check=True).stdout
    subprocess.run(["git", "checkout", "--", "src/module.cpp"], cwd=co, check=True)
    series = co / ".torchbuild/patches"
    series.mkdir(parents=True)
    (series / "0001-mark.patch").write_text(diff)
    (series / "series").write_text("0001-mark.patch\n")
    shown = torchbuild("config", cwd=co / "src")
    assert ".torchbuild/patches" in shown.stdout
    applied = torchbuild("patch.apply", cwd=co / "src")
    assert applied.returncode == 0, applied.stderr
    assert module.read_text().endswith("// patched by the series\n")
    status = subprocess.run(["git", "status", "--porcelain"], cwd=co, capture_output=True, text=True).stdout
    assert status == ""  # the series' folder is ignored by git: the checkout stays clean


def test_a_tree_outside_build_gets_what_build_gets(tmp_path, monkeypatch):
    """onnx's shape (.setuptools-cmake-build/): the no-op, a reconfigure when an option changes and when it is no
    longer given (CMake's cache would keep it), one tree per configuration restored on the way back, and clean."""
    from .onnxlike import make_onnx_shaped_project

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


def test_a_package_under_src_is_up_to_date_when_nothing_changed(tmp_path, monkeypatch):
    """The env's editable install names where the package is (src/greet): the no-op holds there too."""
    from .onnxlike import make_onnx_shaped_project

    for key, value in {"TORCHBUILD_PATHS_ENVS": tmp_path / "envs", "TORCHBUILD_PATHS_LOGS": tmp_path / "logs",
                       "TORCHBUILD_BUILD_MIN_FREE_GB": "1", "TORCHBUILD_BUILD_CUDA": "none"}.items():
        monkeypatch.setenv(key, str(value))
    co = make_onnx_shaped_project(tmp_path / "co", src_layout=True)
    inv("build", "--path", str(co), check=True, timeout=300)
    assert "up to date: ninja has no work" in inv("build", "--path", str(co), check=True).stderr
    python = tmp_path / "envs/py{}.{}/bin/python".format(*sys.version_info[:2])
    done = subprocess.run([python, "-c", "import greet; print(greet.greet(), greet.__file__)"], cwd=tmp_path,
                          capture_output=True, text=True, check=True).stdout.split()
    assert done[:3] == ["hello", "release", "1"] and done[3] == str(co / "src/greet/__init__.py")


def test_a_setup_py_whose_cmake_tree_pep660_throws_away_builds_in_place_and_keeps_it(tmp_path, monkeypatch):
    """pybind's cmake_example shape: the first build is pip's (PEP 660 configures in a temporary build_temp); from
    the second on, setuptools' in-place build with build/temp.torchbuild kept: the no-op is up to date, an edited
    unit is the one compile, and a new file takes pip again."""
    from .onnxlike import make_cmake_example_project

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
    git(co, "commit", "-qam", "edited")  # setup.py's version may come from the commit: only pip's record is true
    committed, said = build()
    assert "the whole way: the version is the backend's to compute at each commit" in committed and said == "13"
    (co / "NOTES.txt").write_text("a new file\n")
    new, said = build()
    assert "the whole way through pip: NOTES.txt is new since the last build" in new and said == "13"


def test_extensions_setuptools_compiles_keep_their_objects_per_configuration(tmp_path, monkeypatch):
    """pybind's python_example shape (setuptools compiles the Extension itself): from the second build on,
    setuptools' in-place build with build/temp.torchbuild kept; the compiler's depfiles prove a no-op, see a
    header's edit, a debug build is one (no NDEBUG, not optimized), the switch back to release compiles
    nothing, and `clean` leaves no editable install importing a module that is gone."""
    from .onnxlike import make_python_example_project

    for key, value in {"TORCHBUILD_PATHS_ENVS": tmp_path / "envs", "TORCHBUILD_PATHS_LOGS": tmp_path / "logs",
                       "TORCHBUILD_BUILD_MIN_FREE_GB": "1", "TORCHBUILD_BUILD_CUDA": "none"}.items():
        monkeypatch.setenv(key, str(value))
    co = make_python_example_project(tmp_path / "co")
    python = tmp_path / "envs/py{}.{}/bin/python".format(*sys.version_info[:2])

    def call() -> str:
        return subprocess.run([python, "-c", "import pyex; print(pyex.value(), pyex.optimized(), pyex.ndebug())"],
                              cwd=tmp_path, text=True, capture_output=True).stdout.strip()

    def build(*args: str) -> tuple[str, str]:
        return inv("build", "--path", str(co), *args, check=True, timeout=300).stderr, call()

    first, said = build()
    assert said == "3 True True", first
    second, said = build()
    assert "setuptools' in-place build, keeps the tree, without pip" in second and said == "3 True True"
    assert list((co / "build/temp.torchbuild").rglob("main.d"))
    noop, said = build()
    assert "up to date: no input its compiler's depfiles name is newer" in noop and said == "3 True True"
    (co / "src/value.h").write_text("#define VALUE 13\n")
    edited, said = build()
    assert "in-place build" in edited and said == "13 True True"
    debug, said = build("--debug")
    assert said == "13 False False", debug  # -O0, NDEBUG undefined: a debug build, not setuptools' `-g -O3`
    back, said = build()
    assert "restored the py" in back and "up to date" in back and said == "13 True True"
    cleaned = inv("clean", "--path", str(co), check=True).stderr
    assert "uninstalled the editable install of pyex" in cleaned and not list(co.glob("pyex*.so"))
    assert subprocess.run([python, "-m", "pip", "show", "pyex"], capture_output=True).returncode == 1
