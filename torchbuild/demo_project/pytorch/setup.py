"""minitorch's setup.py, shaped like PyTorch's: a fixed build/ dir, CMake configured only when
build/CMakeCache.txt or build.ninja is missing (or CMAKE_FRESH=1), BUILD_*/USE_*/CMAKE_* from the
environment passed to CMake as -D, MAX_JOBS for ninja, and a submodule check.

The split build, as PyTorch's: BUILD_LIBTORCH_WHL=1 builds only the Python-independent core into
a `libminitorch` wheel; BUILD_PYTHON_ONLY=1 builds only the Python extension, against the core of
the installed `libminitorch`. Both at once is refused."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Distribution, Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
BUILD_DIR = ROOT / "build"
SKIP = {"CMAKE_FRESH", "CMAKE_ONLY", "BUILD_LIBTORCH_WHL", "BUILD_PYTHON_ONLY"}
CORE_ONLY = os.environ.get("BUILD_LIBTORCH_WHL") == "1"
PYTHON_ONLY = os.environ.get("BUILD_PYTHON_ONLY") == "1"
if CORE_ONLY and PYTHON_ONLY:
    sys.exit("BUILD_LIBTORCH_WHL=1 and BUILD_PYTHON_ONLY=1 cannot be set together")


def check_submodules():
    gitmodules = ROOT / ".gitmodules"
    paths = [line.split("=", 1)[1].strip() for line in gitmodules.read_text().splitlines()
             if line.strip().startswith("path")] if gitmodules.exists() else []
    for path in paths:
        folder = ROOT / path
        if not folder.is_dir() or not any(p.name != ".git" for p in folder.iterdir()):
            sys.exit(f"Submodule {path} is empty. Did you run 'git submodule update --init --recursive'?")


def version():
    return os.environ.get("PYTORCH_BUILD_VERSION") or (ROOT / "version.txt").read_text().strip()


def cuda_architectures(arch_list):
    """TORCH_CUDA_ARCH_LIST "8.0;9.0+PTX" -> CMAKE_CUDA_ARCHITECTURES "80-real;90"."""
    out = []
    for arch in arch_list.replace(" ", ";").split(";"):
        if arch:
            number = arch.replace("+PTX", "").replace(".", "")
            out.append(number if arch.endswith("+PTX") else number + "-real")
    return ";".join(out)


def cmake_args():
    env = os.environ
    if env.get("DEBUG") == "1":
        build_type = "Debug"
    elif env.get("REL_WITH_DEB_INFO") == "1":
        build_type = "RelWithDebInfo"
    else:
        build_type = env.get("CMAKE_BUILD_TYPE", "Release")
    args = ["-DCMAKE_BUILD_TYPE=" + build_type, "-DPython_EXECUTABLE=" + sys.executable]
    if env.get("USE_NINJA", "1") != "0" and shutil.which("ninja"):
        args.append("-GNinja")
    for key, value in sorted(env.items()):
        if key.startswith(("BUILD_", "USE_", "CMAKE_")) and key not in SKIP and key != "CMAKE_BUILD_TYPE":
            args.append(f"-D{key}={value}")
    if CORE_ONLY:
        args.append("-DBUILD_PYTHON=OFF")
    if PYTHON_ONLY:
        import libminitorch

        args.append("-DPREBUILT_CORE=" + os.path.dirname(libminitorch.__file__))
    if env.get("USE_CUDA") == "1" and env.get("TORCH_CUDA_ARCH_LIST"):
        args.append("-DCMAKE_CUDA_ARCHITECTURES=" + cuda_architectures(env["TORCH_CUDA_ARCH_LIST"]))
    return args


def cmake_build():
    """Configure (when needed) and build build/; False for CMAKE_ONLY."""
    check_submodules()
    cache = BUILD_DIR / "CMakeCache.txt"
    fresh = os.environ.get("CMAKE_FRESH") == "1"
    if fresh and cache.exists():
        cache.unlink()
        shutil.rmtree(BUILD_DIR / "CMakeFiles", ignore_errors=True)
    if not cache.exists() or not (BUILD_DIR / "build.ninja").exists() and not (BUILD_DIR / "Makefile").exists():
        subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(BUILD_DIR), *cmake_args()])
    if os.environ.get("CMAKE_ONLY") == "1":
        return False
    jobs = os.environ.get("MAX_JOBS")
    subprocess.check_call(["cmake", "--build", str(BUILD_DIR), *(["-j", jobs] if jobs else [])])
    return True


class CoreBuild(build_py):
    """BUILD_LIBTORCH_WHL: the core's libraries as the package libminitorch (in build/)."""

    def run(self):
        if cmake_build():
            for lib in (BUILD_DIR / "minitorch").glob("lib*.so"):
                shutil.copy2(lib, CORE_PACKAGE / lib.name)
        super().run()


class CoreDistribution(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel: it holds shared libraries


class CMakeBuild(build_ext):
    def run(self):
        if not cmake_build():
            return
        built = BUILD_DIR / "minitorch"
        for ext in self.extensions:
            dest = Path(self.get_ext_fullpath(ext.name))
            dest.parent.mkdir(parents=True, exist_ok=True)
            sources = [next(built.glob("_C.*.so"))] + sorted(built.glob("lib*.so"))
            for src in sources:
                target = dest if src.name.startswith("_C") else dest.parent / src.name
                if not target.exists() or target.stat().st_mtime < src.stat().st_mtime:
                    shutil.copy2(src, target)


if CORE_ONLY:
    CORE_PACKAGE = BUILD_DIR / "libminitorch"  # made before setup(): metadata needs the package folder
    CORE_PACKAGE.mkdir(parents=True, exist_ok=True)
    (CORE_PACKAGE / "__init__.py").write_text('"""minitorch\'s Python-independent core libraries."""\n')
    setup(
        name="libminitorch",
        version=version(),
        packages=["libminitorch"],
        package_dir={"libminitorch": "build/libminitorch"},
        package_data={"libminitorch": ["*.so"]},
        cmdclass={"build_py": CoreBuild},
        distclass=CoreDistribution,
        python_requires=">=3.6",
        zip_safe=False,
    )
else:
    setup(
        name="minitorch",
        version=version(),
        packages=["minitorch"],
        ext_modules=[Extension("minitorch._C", sources=[])],
        cmdclass={"build_ext": CMakeBuild},
        install_requires=["libminitorch==" + version()] if PYTHON_ONLY else [],
        python_requires=">=3.6",
        zip_safe=False,
    )
