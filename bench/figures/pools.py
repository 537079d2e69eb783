"""The memory pool (issue 33): the demo with its heavy unit, built under a memory cap the bench sets (a memory
cgroup of its own), the heavy unit in its pool and the rest at MAX_JOBS, against the same build with MAX_JOBS
lowered for every step so that the heaviest unit fits (what a build without the pool must do)."""

from __future__ import annotations

import os
from pathlib import Path

from bench.measure import INV, Bench, stats, timed

CAP = 520 * 2 ** 20  # the cgroup's limit: under two heavy units (2 x 285 MiB); one beside a typical one fits


def cgroup(name: str) -> Path | None:
    """A memory cgroup of the bench's own under this process's (v1 or v2), None where none can be made."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            base, limit = Path("/sys/fs/cgroup/memory", path.lstrip("/")), "memory.limit_in_bytes"
        elif hierarchy == "0" and not controllers and Path("/sys/fs/cgroup/cgroup.controllers").exists():
            base, limit = Path("/sys/fs/cgroup", path.lstrip("/")), "memory.max"
        else:
            continue
        group = base / name
        try:
            group.mkdir(exist_ok=True)
            (group / limit).write_text(str(CAP))
            return group
        except OSError:
            continue
    return None


def killed(group: Path) -> int:
    """Processes the OOM killer killed in the group (v1 memory.oom_control, v2 memory.events)."""
    for name, key in (("memory.oom_control", "oom_kill"), ("memory.events", "oom_kill")):
        with_counts = group / name
        if with_counts.exists():
            for line in with_counts.read_text().splitlines():
                if line.startswith(key + " "):
                    return int(line.split()[1])
    return 0


def memory_pool(self: Bench) -> None:
    """24 units and the heavy one, CMake 4.x in the env (PyTorch's requirements-build.txt has cmake); built once
    to record each unit's peak; then, in turns, the shared header edited and the build run in the cgroup with
    the pool (MAX_JOBS from the memory the cgroup has left) and with MAX_JOBS=1 (the heaviest unit alone
    fits the cap), the compiler cache off so every unit compiles."""
    group = cgroup(f"tb-bench-{os.getpid()}")
    if group is None:
        print("memory pool: skipped: no memory cgroup can be made here (the cap needs one)", flush=True)
        return
    try:
        checkout, env = self.demo("pool", 24)
        (checkout / "requirements-build.txt").write_text((checkout / "requirements-build.txt").read_text()
                                                         + "cmake>=4.2\n")
        env = {**env, "TORCHBUILD_BUILD_CUDA": "none", "TORCHBUILD_BUILD_MKL": "0"}
        self.build(checkout, env)
        header = checkout / "c10/include/c10/core.h"
        inside = ["sh", "-c", f'echo $$ > {group / "cgroup.procs"} && exec "$@"', "sh", *INV, "build",
                  "--path", str(checkout)]
        pooled, lowered, said = [], [], []
        for i in range(3 if self.quick else self.reps):
            for runs, extra in ((pooled, {}), (lowered, {"TORCHBUILD_BUILD_JOBS": "1"})):
                header.write_text(header.read_text() + f"// edit {i} {len(runs)} {bool(extra)}\n")
                runs.append(timed(inside, {**env, "CCACHE_DISABLE": "1", **extra}))
                if not extra:  # the steps the pooled build's build.ninja held in the pool
                    said.append((checkout / "build/build.ninja").read_text().count("pool = torchbuild_heavy"))
        kills = killed(group)
        self.record("memory pool under a 520 MiB cap", stats(pooled), stats(lowered), "<= 0.8, no step killed",
                    f"the heavy unit in its pool ({min(said)}-{max(said)} step), the rest at MAX_JOBS=2, OOM kills "
                    f"{kills}",
                    "MAX_JOBS=1 for every step")
    finally:
        os.rmdir(group)  # every process in it has exited
