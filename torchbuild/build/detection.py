"""CMake's compiler detection, done once for a set of compilers instead of once a tree.

A new tree (a Python, a CUDA, a build type, the core of the split build, a build slot) starts with
a fresh CMake configure, and its first seconds go to identifying the compilers and their ABI: a
quarter of a second for gcc, seconds for nvcc. What CMake learns lands in CMakeFiles/<version>/
(CMakeSystem.cmake, CMake<LANG>Compiler.cmake). After a build, those files are kept in the cache
under a key of everything detection depends on: the compilers CMake would find (resolved on the
build's PATH, with their size and time), CC/CXX/CUDACXX/CUDAHOSTCXX, the toolkit, every *FLAGS and
CMAKE_*COMPILER*/CMAKE_*FLAGS* setting. A new tree with the same key gets them before its first
configure, with CMAKE_PLATFORM_INFO_INITIALIZED=1, which PyTorch's setup.py passes to CMake as -D
(as every CMAKE_* variable): CMake then reads them as it does on a reconfigure. A language the files
do not cover is detected as usual; another CMake version ignores them (its own folder is missing).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Mapping

from ..digest import digest
from ..run import merged_env

FLAG = "CMAKE_PLATFORM_INFO_INITIALIZED"
KEPT = ("CMakeSystem.cmake", "CMake*Compiler.cmake", "CMakeDetermineCompilerABI_*.bin")
# What compiler identification and ABI detection read from the environment.
SETTINGS = re.compile(r"^(CC|CXX|CUDACXX|CUDAHOSTCXX|CUDA_HOME|CUDA_PATH|CUDAARCHS|TORCH_CUDA_ARCH_LIST|ASM\w*|HIP\w*"
                      r"|\w*FLAGS|CMAKE_\w*(COMPILER|FLAGS|TOOLCHAIN|SYSROOT|ARCHITECTURES|LINKER|OSX)\w*)$")
COMPILERS = (("CC", "cc"), ("CXX", "c++"), ("CUDACXX", "nvcc"))


def key(changes: Mapping[str, str | None], base_env: Mapping[str, str]) -> str:
    """The detection key of a build's environment (probes PATH for the compilers CMake would take)."""
    env = merged_env(base_env, changes)
    found = {}
    for var, default in COMPILERS:
        name = (env.get(var) or "").split(" ")[0] or default
        path = shutil.which(name, path=env.get("PATH", "")) if "/" not in name else name
        if path and os.path.exists(path):
            stat = os.stat(path)
            found[var] = [os.path.realpath(path), stat.st_size, stat.st_mtime_ns]
    settings = {k: v for k, v in env.items() if SETTINGS.match(k) and "LAUNCHER" not in k}
    return digest([found, settings])


def seed(store: Path, tree: Path) -> bool:
    """Give a tree that CMake never configured the kept detection files; whether there were any."""
    if not store.is_dir() or (tree / "CMakeFiles").exists() or (tree / "CMakeCache.txt").exists():
        return False
    shutil.copytree(store, tree / "CMakeFiles")
    return True


def keep(tree: Path, store: Path) -> None:
    """Keep what CMake detected in a configured tree (once a key; atomic, for builds side by side)."""
    versions = [d for d in (tree / "CMakeFiles").glob("[0-9]*") if (d / "CMakeSystem.cmake").is_file()] \
        if not store.exists() else []
    if not versions:
        return
    store.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=store.parent))
    for version in versions:
        (tmp / version.name).mkdir()
        for pattern in KEPT:
            for f in version.glob(pattern):
                shutil.copy2(f, tmp / version.name / f.name)
    try:
        os.rename(tmp, store)
    except OSError:  # another build kept the same a moment ago
        shutil.rmtree(tmp, ignore_errors=True)
