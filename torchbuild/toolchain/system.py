"""Memory, cores and disk: the numbers MAX_JOBS and the disk preflight are chosen from."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

GIB = 1024 ** 3
CXX_JOB_GIB = 2.0  # peak RSS of one PyTorch C++ translation unit, about
CUDA_JOB_GIB = 4.0  # nvcc + cicc of one CUDA unit, about


def available_memory() -> int:
    """MemAvailable from /proc/meminfo in bytes (total physical memory elsewhere)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@dataclass(frozen=True)
class Jobs:
    jobs: int
    reason: str


def choose_jobs(cpus: int, mem_bytes: int, cuda: bool) -> Jobs:
    """MAX_JOBS from cores and memory, so compilers are not OOM-killed."""
    per_job = CUDA_JOB_GIB if cuda else CXX_JOB_GIB
    by_mem = max(1, int(mem_bytes / GIB / per_job))
    jobs = max(1, min(cpus, by_mem))
    mem = f"{mem_bytes / GIB:.1f} GiB available / {per_job:g} GiB per {'CUDA' if cuda else 'C++'} job = {by_mem}"
    limit = "memory" if by_mem < cpus else "cores"
    return Jobs(jobs, f"{jobs} ({limit}-bound: {cpus} cores; {mem})")


def free_disk(path: Path) -> int:
    """Free bytes on the filesystem holding `path` (or its nearest existing parent)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def check_writable(folder: Path, what: str, setting: str) -> None:
    """Refuse, in one line, a folder that cannot be made or written (read-only, no permission, full):
    before anything is started, not as a traceback halfway. The probe is a private temporary file."""
    import tempfile

    from ..errors import TorchbuildError

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder, prefix=".torchbuild-write-test"):
            pass  # a probe of its own: two at once must not delete each other's
    except OSError as exc:
        raise TorchbuildError(f"cannot write the {what} {folder}: {exc.strerror}",
                              f"set {setting} in torchbuild.yaml to a writable folder with free space") from None
