"""minitorch's setup.py: PyTorch's build driver in miniature (see torchbuild's docs/demo.md).

Every mechanism follows PyTorch's setup.py and tools/: CMake configures build/ once and installs
into minitorch/ (lib/, include/, share/); build_ext links minitorch/_C from csrc/stub.c against
minitorch/lib/libtorch_python.so; version.py is written by an always-run CMake target;
`setup.py develop` is redirected to pip; BUILD_LIBTORCH_WHL=1 makes the `minitorch_no_python`
wheel, BUILD_PYTHON_ONLY=1 builds the Python part against the core in LIBTORCH_LIB_PATH."""

import contextlib
import filecmp
import itertools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import setuptools.command.build_ext
from setuptools import Distribution, Extension, find_packages, setup

try:
    from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
except ImportError:  # setuptools < 70.1 (Python 3.6's)
    from wheel.bdist_wheel import bdist_wheel as _bdist_wheel

CWD = Path(__file__).absolute().parent
sys.path.insert(0, str(CWD))
os.environ["PYTHONPATH"] = os.pathsep.join([str(CWD), os.getenv("PYTHONPATH", "")]).rstrip(os.pathsep)

from tools.build_pytorch_libs import build_pytorch  # noqa: E402
from tools.generate_torch_version import get_torch_version  # noqa: E402
from tools.setup_helpers.cmake import CMake  # noqa: E402
from tools.setup_helpers.env import build_type  # noqa: E402


def str2bool(value):
    return bool(value) and value.strip().lower() in ("1", "true", "t", "yes", "y", "on")


def _get_package_path(package_name):
    from importlib.util import find_spec

    spec = find_spec(package_name)
    if spec and spec.origin:
        return Path(spec.origin).parent
    return CWD / package_name


BUILD_LIBTORCH_WHL = str2bool(os.getenv("BUILD_LIBTORCH_WHL"))
BUILD_PYTHON_ONLY = str2bool(os.getenv("BUILD_PYTHON_ONLY"))
if BUILD_PYTHON_ONLY:
    os.environ["BUILD_LIBTORCHLESS"] = "ON"
    os.environ["LIBTORCH_LIB_PATH"] = (_get_package_path("minitorch") / "lib").as_posix()

RUN_BUILD_DEPS = True
RERUN_CMAKE = str2bool(os.environ.pop("CMAKE_FRESH", None))
CMAKE_ONLY = str2bool(os.environ.pop("CMAKE_ONLY", None))
filtered_args = []
for i, arg in enumerate(sys.argv):
    if arg == "--cmake":
        RERUN_CMAKE = True
        continue
    if arg == "develop":
        print("WARNING: Redirecting 'python setup.py develop' to 'pip install -e . -v --no-build-isolation',"
              " for more info see https://github.com/pytorch/pytorch/issues/152276", file=sys.stderr)
        result = subprocess.run([sys.executable, "-m", "pip", "install", "-e", ".", "-v", "--no-build-isolation"],
                                env=dict(os.environ))
        sys.exit(result.returncode)
    if arg == "install":
        print("WARNING: Redirecting 'python setup.py install' to 'pip install . -v --no-build-isolation',"
              " for more info see https://github.com/pytorch/pytorch/issues/152276", file=sys.stderr)
        result = subprocess.run([sys.executable, "-m", "pip", "install", ".", "-v", "--no-build-isolation"],
                                env=dict(os.environ))
        sys.exit(result.returncode)
    if arg == "--":
        filtered_args += sys.argv[i:]
        break
    if arg in ["clean", "dist_info", "egg_info", "sdist"]:
        RUN_BUILD_DEPS = False
    filtered_args.append(arg)
sys.argv = filtered_args

TORCH_DIR = CWD / "minitorch"
TORCH_LIB_DIR = TORCH_DIR / "lib"
TORCH_PACKAGE_NAME = os.getenv("TORCH_PACKAGE_NAME", "minitorch")
LIBTORCH_PKG_NAME = os.getenv("LIBTORCH_PACKAGE_NAME", "minitorch_no_python")
if BUILD_LIBTORCH_WHL:
    TORCH_PACKAGE_NAME = LIBTORCH_PKG_NAME
TORCH_VERSION = get_torch_version()
print("Building wheel {}-{}".format(TORCH_PACKAGE_NAME, TORCH_VERSION), file=sys.stderr)
cmake = CMake()


def get_submodule_folders():
    with (CWD / ".gitmodules").open(encoding="utf-8") as f:
        return [CWD / line.partition("=")[-1].strip() for line in f if line.strip().startswith("path")]


def check_submodules():
    def check_for_files(folder, files):
        if not any((folder / f).exists() for f in files):
            print("Could not find any of {} in {}".format(", ".join(files), folder), file=sys.stderr)
            print("Did you run 'git submodule update --init --recursive'?", file=sys.stderr)
            sys.exit(1)

    def not_exists_or_empty(folder):
        return not folder.exists() or (folder.is_dir() and next(folder.iterdir(), None) is None)

    if str2bool(os.getenv("USE_SYSTEM_LIBS")):
        return
    folders = get_submodule_folders()
    if all(not_exists_or_empty(folder) for folder in folders):
        print(" --- Trying to initialize submodules", file=sys.stderr)
        start = time.time()
        subprocess.check_call(["git", "submodule", "update", "--init", "--recursive"], cwd=str(CWD))
        print(" --- Submodule initialization took {:.2f} sec".format(time.time() - start), file=sys.stderr)
    for folder in folders:
        check_for_files(folder, ["CMakeLists.txt", "Makefile", "setup.py", "LICENSE", "LICENSE.md", "LICENSE.txt"])


def build_deps():
    check_submodules()
    build_pytorch(version=TORCH_VERSION, build_python=not BUILD_LIBTORCH_WHL, rerun_cmake=RERUN_CMAKE,
                  cmake_only=CMAKE_ONLY, cmake=cmake)
    if CMAKE_ONLY:
        print('Finished running cmake. Run "python -m pip install --no-build-isolation -v ." to build.')
        sys.exit()
    # Use copies instead of symbolic files (as PyTorch's setup.py: Windows has very poor support for them).
    sym_files = [CWD / "tools/shared/_utils_internal.py"]
    orig_files = [CWD / "minitorch/_utils_internal.py"]
    for sym_file, orig_file in zip(sym_files, orig_files):
        same = False
        if sym_file.exists():
            if filecmp.cmp(str(sym_file), str(orig_file)):
                same = True
            else:
                sym_file.unlink()
        if not same:
            shutil.copyfile(str(orig_file), str(sym_file))


class build_ext(setuptools.command.build_ext.build_ext):
    pass


@contextlib.contextmanager
def concat_license_files():
    """As PyTorch's setup.py: while a wheel is made, the tracked LICENSE holds the bundled third-party
    licenses too, and is written back after (its content the same, its mtime not)."""
    license_file, bundled = CWD / "LICENSE", CWD / "third_party" / "LICENSES_BUNDLED.txt"
    original = license_file.read_text()
    try:
        license_file.write_text(original + "\n\n" + bundled.read_text())
        yield
    finally:
        license_file.write_text(original)


class bdist_wheel(_bdist_wheel):
    def run(self):
        with concat_license_files():
            super().run()

    def write_wheelfile(self, *args, **kwargs):
        super().write_wheelfile(*args, **kwargs)
        if BUILD_LIBTORCH_WHL:
            bdist_dir = Path(self.bdist_dir)
            for file in itertools.chain(bdist_dir.rglob("*.a"), bdist_dir.rglob("*.so")):
                if (bdist_dir / file.name).is_file():
                    file.unlink()
            for file in bdist_dir.rglob("*.py"):
                file.unlink()
            (bdist_dir / "minitorch" / "__init__.py").touch()  # a package needs one


def configure_extension_build():
    extra_compile_args = ["-Wall", "-Wno-unused-parameter", "-fno-strict-aliasing"]
    extra_link_args = []
    if build_type.is_debug():
        extra_compile_args += ["-O0", "-g"]
        extra_link_args += ["-O0", "-g"]
    if build_type.is_rel_with_deb_info():
        extra_compile_args += ["-g"]
        extra_link_args += ["-g"]
    C = Extension("minitorch._C", libraries=["torch_python"], sources=["minitorch/csrc/stub.c"], language="c",
                  extra_compile_args=extra_compile_args, library_dirs=[str(TORCH_LIB_DIR)],
                  extra_link_args=extra_link_args + ["-Wl,-rpath,$ORIGIN/lib"])
    packages = find_packages(include=["minitorch", "minitorch.*"])
    return [C], {"bdist_wheel": bdist_wheel, "build_ext": build_ext}, packages


def main():
    if BUILD_LIBTORCH_WHL and BUILD_PYTHON_ONLY:
        raise RuntimeError("Conflict: 'BUILD_LIBTORCH_WHL' and 'BUILD_PYTHON_ONLY' can't both be 1. "
                           "Set one to 0 and rerun.")
    install_requires = []
    if BUILD_PYTHON_ONLY:
        install_requires += ["{}=={}".format(LIBTORCH_PKG_NAME, TORCH_VERSION)]
    dist = Distribution()
    dist.script_name = os.path.basename(sys.argv[0])
    dist.script_args = sys.argv[1:]
    dist.parse_command_line()
    if RUN_BUILD_DEPS:
        build_deps()
    ext_modules, cmdclass, packages = configure_extension_build()
    package_data = ["*.pyi", "bin/*", "include/*.h", "include/**/*.h", "share/cmake/MiniTorch/*.cmake"]
    if not BUILD_LIBTORCH_WHL:
        package_data += ["lib/libtorch_python.so"]
    if not BUILD_PYTHON_ONLY:
        package_data += ["lib/*.so*"]
    if BUILD_LIBTORCH_WHL:
        ext_modules = []  # no extensions in BUILD_LIBTORCH_WHL mode
    setup(
        name=TORCH_PACKAGE_NAME,
        version=TORCH_VERSION,
        ext_modules=ext_modules,
        cmdclass=cmdclass,
        packages=packages,
        install_requires=install_requires,
        package_data={"minitorch": package_data},
        include_package_data=False,
        python_requires=">=3.6",
        zip_safe=False,
    )


if __name__ == "__main__":
    main()
