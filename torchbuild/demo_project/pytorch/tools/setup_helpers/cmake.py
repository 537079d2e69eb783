"""As PyTorch's tools/setup_helpers/cmake.py: configure build/ only when CMakeCache.txt or
build.ninja is missing (or on a rerun), forwarding every BUILD_*/USE_*/CMAKE_* variable of the
environment as -D at that moment only; install into the checkout's package folder; build the
`install` target."""

import os
import shutil
import subprocess
import sys
import sysconfig

from .env import BUILD_DIR, build_type, check_negative_env_flag

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _version(cmd):
    out = subprocess.check_output([cmd, "--version"]).decode()
    return tuple(int(x) for x in out.split()[2].split("-")[0].split(".")[:2])


class CMake:
    def __init__(self, build_dir=BUILD_DIR):
        self.build_dir = os.path.join(ROOT, build_dir)
        self._cmake_command = None

    @property
    def _cmake_cache_file(self):
        return os.path.join(self.build_dir, "CMakeCache.txt")

    @property
    def _ninja_build_file(self):
        return os.path.join(self.build_dir, "build.ninja")

    @staticmethod
    def _get_cmake_command():
        """The newest of `cmake` and `cmake3` on PATH, run by bare name (as PyTorch does)."""
        found = [(_version(name), name) for name in ("cmake", "cmake3") if shutil.which(name)]
        if not found:
            raise RuntimeError("no cmake found")
        return max(found)[1]

    @property
    def cmake_command(self):
        if self._cmake_command is None:
            self._cmake_command = self._get_cmake_command()
        return self._cmake_command

    def run(self, args, env):
        command = [self.cmake_command] + args
        print(" ".join(command), flush=True)
        subprocess.check_call(command, cwd=self.build_dir, env=env)

    def generate(self, version, build_python, build_test, my_env, rerun):
        if rerun and os.path.isfile(self._cmake_cache_file):
            os.remove(self._cmake_cache_file)
        if os.path.exists(self._cmake_cache_file) and os.path.exists(self._ninja_build_file):
            return  # configured before: what the environment says now is ignored (PyTorch #23512)
        os.makedirs(self.build_dir, exist_ok=True)
        args = []
        if not check_negative_env_flag("USE_NINJA") and shutil.which("ninja"):
            args.append("-GNinja")
        defines = {
            "BUILD_PYTHON": "ON" if build_python else "OFF",
            "BUILD_TEST": "ON" if build_test else "OFF",
            "CMAKE_BUILD_TYPE": build_type.build_type_string,
            "CMAKE_INSTALL_PREFIX": os.path.join(ROOT, "minitorch"),
            "Python_EXECUTABLE": sys.executable,
            "Python_INCLUDE_DIR": sysconfig.get_paths()["include"],
            "TORCH_BUILD_VERSION": version,
        }
        for key, value in my_env.items():
            if key.startswith(("BUILD_", "USE_", "CMAKE_")) and key not in defines:
                defines[key] = value
        if my_env.get("TORCH_CUDA_ARCH_LIST"):
            defines["TORCH_CUDA_ARCH_LIST"] = my_env["TORCH_CUDA_ARCH_LIST"]
        args += ["-D{}={}".format(k, v) for k, v in sorted(defines.items())]
        self.run(args + [ROOT], env=my_env)

    def build(self, my_env):
        args = ["--build", ".", "--target", "install", "--config", build_type.build_type_string]
        max_jobs = os.getenv("MAX_JOBS")
        if max_jobs is not None:
            args += ["-j", max_jobs]
        self.run(args, my_env)
