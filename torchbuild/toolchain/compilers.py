"""Host compilers (gcc/g++, versioned gcc-N, clang) and the newest GCC each CUDA accepts."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..errors import TorchbuildError
from ..run import run
from .cuda import version_key

# CUDA (major, minor) from which a host GCC major is the newest supported, per NVIDIA's
# installation guides / crt/host_config.h and torch/utils/cpp_extension.py CUDA_GCC_VERSIONS.
MAX_GCC = [((9, 2), 7), ((10, 1), 8), ((11, 0), 9), ((11, 1), 10), ((11, 4), 11), ((12, 0), 12),
           ((12, 3), 13), ((12, 8), 14), ((13, 0), 15)]


@dataclass(frozen=True)
class Compiler:
    kind: str  # gcc or clang
    cc: Path
    cxx: Path
    version: str

    @property
    def major(self) -> int:
        return version_key(self.version)[0]


def max_gcc(cuda_version: str) -> int | None:
    """The newest GCC major nvcc of this CUDA version accepts (None: older than the table, or of a CUDA
    major newer than its newest row, which nobody can know yet)."""
    key = version_key(cuda_version)[:2]
    if key[:1] > MAX_GCC[-1][0][:1]:
        return None
    best = None
    for since, gcc in MAX_GCC:
        if key >= since:
            best = gcc
    return best


def _version(cc: str) -> str | None:
    """The compiler's version, asked once per file as it is (a warm process keeps the answers: warm.py)."""
    st = os.stat(cc)  # the file it runs (through its links): another file, another answer
    return _version_of(cc, st.st_size, st.st_mtime_ns, st.st_ino)


@functools.lru_cache(maxsize=None)
def _version_of(cc: str, size: int, mtime: int, inode: int) -> str | None:
    res = run([cc, "-dumpfullversion", "-dumpversion"], capture=True, echo=False, check=False)
    out = res.stdout.strip().splitlines()
    return out[0] if res.returncode == 0 and out and re.match(r"^\d+", out[0]) else None


COMPILER = re.compile(r"(gcc|clang)(-\d+)?")


def discover(env: Mapping[str, str]) -> list[Compiler]:
    """gcc/g++ pairs (plain and -N suffixed) and clang/clang++ on PATH, default gcc first."""
    found: dict[Path, Compiler] = {}
    for folder in env.get("PATH", "").split(os.pathsep):
        d = Path(folder or ".")
        try:
            names = [e.name for e in os.scandir(d) if e.name.startswith(("gcc", "clang"))]  # /usr/bin: 2000+
        except OSError:
            continue
        for name in sorted(names, key=lambda n: (not n.startswith("gcc"), n)):
            cc = d / name
            m = COMPILER.fullmatch(name)
            if not m:
                continue
            cxx = d / (("g++" if m.group(1) == "gcc" else "clang++") + (m.group(2) or ""))
            real = cc.resolve()
            if not cxx.exists() or real in found or not os.access(cc, os.X_OK):
                continue
            version = _version(str(cc))
            if version:
                found[real] = Compiler(m.group(1), cc, cxx, version)
    return list(found.values())


def default_gcc(compilers: list[Compiler]) -> Compiler | None:
    return next((c for c in compilers if c.kind == "gcc" and c.cc.name == "gcc"), None) or \
        next((c for c in compilers if c.kind == "gcc"), None)


def host_compiler(compilers: list[Compiler], cuda_version: str) -> tuple[Compiler | None, str]:
    """The g++ nvcc should use for this CUDA: (compiler or None for the default, reason)."""
    default = default_gcc(compilers)
    if default is None:
        raise TorchbuildError("no gcc/g++ found on PATH", "install one (apt-get install g++)")
    limit = max_gcc(cuda_version)
    if limit is None or default.major <= limit:
        return None, f"gcc {default.version} is supported by CUDA {cuda_version}"
    older = sorted((c for c in compilers if c.kind == "gcc" and c.major <= limit), key=lambda c: c.major)
    if older:
        pick = older[-1]
        return pick, (f"gcc {default.version} is too new for CUDA {cuda_version} (newest supported: {limit}); "
                      f"using {pick.cxx} ({pick.version}) as the CUDA host compiler")
    raise TorchbuildError(f"gcc {default.version} is too new for CUDA {cuda_version}, which supports gcc {limit} "
                          "at most, and no older gcc was found",
                          f"install g++-{limit} (apt-get install g++-{limit}) or choose a newer CUDA with --cuda")
