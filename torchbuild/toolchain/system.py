"""Memory, cores and disk: the numbers MAX_JOBS and the disk preflight are chosen from."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

GIB = 1024 ** 3
CXX_JOB_GIB = 2.0  # peak RSS of one PyTorch C++ translation unit, about
CUDA_JOB_GIB = 4.0  # nvcc + cicc of one CUDA unit, about


def available_memory(cap_gb: float = 0) -> int:
    """Bytes a build may use: MemAvailable from /proc/meminfo (total physical memory elsewhere), within what
    this process's cgroup has left (a container's limit, which MemAvailable does not show), and within
    `cap_gb` (build.memory_gb) when set."""
    free = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
    except OSError:
        pass
    left = cgroup_left()
    return min([free, *([left] if left is not None else []), *([int(cap_gb * GIB)] if cap_gb else [])])


def cgroup_left() -> int | None:
    """What this process's memory cgroup has left under its limit (v2 memory.max, v1 memory.limit_in_bytes),
    reclaimable page cache counted as free; None without a limit."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        hierarchy, controllers, path = line.split(":", 2)
        path = path.lstrip("/")
        if "memory" in controllers.split(","):
            files = Path("/sys/fs/cgroup/memory", path), "memory.limit_in_bytes", "memory.usage_in_bytes", \
                "total_inactive_file"
        elif hierarchy == "0" and not controllers:
            files = Path("/sys/fs/cgroup", path), "memory.max", "memory.current", "inactive_file"
        else:
            continue
        folder, limit_file, usage_file, inactive = files
        try:
            limit = (folder / limit_file).read_text().strip()
            usage = int((folder / usage_file).read_text())
            stat = dict(ln.split() for ln in (folder / "memory.stat").read_text().splitlines() if " " in ln)
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 2 ** 60:
            return max(0, int(limit) - usage + int(stat.get(inactive, 0)))
    return None


@dataclass(frozen=True)
class Jobs:
    jobs: int
    reason: str


def choose_jobs(cpus: int, mem_bytes: int, cuda: bool, recorded: int | None = None) -> Jobs:
    """MAX_JOBS from cores and memory, so compilers are not OOM-killed: per job, what this tree's units
    needed (`recorded`, builder/pools.py), else PyTorch's typical unit."""
    per_job = recorded / GIB if recorded else CUDA_JOB_GIB if cuda else CXX_JOB_GIB
    by_mem = max(1, int(mem_bytes / GIB / per_job))
    jobs = max(1, min(cpus, by_mem))
    kind = "job (this tree's units, recorded)" if recorded else f"{'CUDA' if cuda else 'C++'} job"
    mem = f"{mem_bytes / GIB:.1f} GiB available / {per_job:.3g} GiB per {kind} = {by_mem}"
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
