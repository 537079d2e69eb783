"""`--sanitize address|thread|leak`: PyTorch's sanitizer configurations, and the runtime their import needs.

PyTorch's top-level CMakeLists.txt reads USE_ASAN ("Address+Undefined"), USE_LSAN and USE_TSAN (which turns
CUDA off: USE_CUDA is a cmake_dependent_option on NOT USE_TSAN), and cmake/Dependencies.cmake puts
`-fsanitize=...` on every target. The libraries then need the sanitizer's runtime loaded before anything
else, which an interpreter not built with it does only when preloaded: `LD_PRELOAD=$(c++
-print-file-name=libasan.so)`, the runtime of the compiler that built them. Python's own allocations
look like leaks to ASAN's leak check at exit, so an address configuration turns that check off (the
leak configuration is for it).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import Mapping

from ..errors import TorchbuildError
from ..run import run


@dataclass(frozen=True)
class Sanitizer:
    kind: str  # address, thread, leak
    variable: str  # what PyTorch's CMake reads
    runtime: str  # the library the compiler ships
    suffix: str  # the configuration key's
    options: Mapping[str, str]  # the runtime's options for an interpreter not built with it


KINDS = {s.kind: s for s in (
    Sanitizer("address", "USE_ASAN", "libasan.so", "asan", {"ASAN_OPTIONS": "detect_leaks=0"}),
    Sanitizer("thread", "USE_TSAN", "libtsan.so", "tsan", {}),
    Sanitizer("leak", "USE_LSAN", "liblsan.so", "lsan", {}),
)}


def named(kind: str) -> Sanitizer:
    """The sanitizer `--sanitize` names; one line naming the choices where it names none."""
    if kind not in KINDS:
        raise TorchbuildError(f"--sanitize takes address, thread or leak, got '{kind}'",
                              "address: ASAN and UBSan (USE_ASAN), thread: TSAN (USE_TSAN), leak: LSAN (USE_LSAN)")
    return KINDS[kind]


def of_key(key: str) -> Sanitizer | None:
    """The sanitizer a configuration's key names (py3.12-cpu-release-asan), if any."""
    return next((s for s in KINDS.values() if key.endswith(f"-{s.suffix}") or f"-{s.suffix}-" in key), None)


def runtime_path(sanitizer: Sanitizer, env: Mapping[str, str]) -> str:
    """The sanitizer runtime of the compiler the build uses (CXX, else c++): `-print-file-name` answers with
    the bare name where the compiler has none."""
    cxx = env.get("CXX") or "c++"  # as CMake reads it: the whole value where it names a program, else its first word
    found = shutil.which(cxx, path=env.get("PATH")) or shutil.which(cxx.split()[0], path=env.get("PATH")) or cxx
    done = run([found, f"-print-file-name={sanitizer.runtime}"], capture=True, echo=False, check=False, base_env=env)
    path = done.stdout.strip()
    if done.returncode != 0 or not os.path.isabs(path) or not os.path.exists(path):
        raise TorchbuildError(f"--sanitize {sanitizer.kind}: {cxx} ships no {sanitizer.runtime}, which the import "
                              "must preload", f"install it (Debian: apt-get install lib{sanitizer.suffix}8, or the "
                                              "compiler's sanitizer package), or point CXX at a compiler that has it")
    return path


def carries(flags: str, sanitizer: Sanitizer) -> bool:
    """Whether a compile's flags turn the sanitizer on (`-fsanitize=address,undefined` counts for address)."""
    return any(sanitizer.kind in word[len("-fsanitize="):].split(",") for word in flags.split()
               if word.startswith("-fsanitize="))


def run_env(sanitizer: Sanitizer, runtime: str) -> dict[str, str]:
    """What an interpreter needs to import the configuration: its runtime preloaded, and its options."""
    return {"LD_PRELOAD": runtime, **sanitizer.options}
