"""A build's share of a job budget that `inv matrix` shares between builds side by side (jobserver.py): its
job slots while it runs, and the time it waited for them."""

from __future__ import annotations

import contextlib
from typing import Iterator, Mapping

from .. import console as _console
from .. import jobserver
from .plan import Plan


@contextlib.contextmanager
def job_slots(plan: Plan) -> Iterator[tuple[Mapping[str, str | None], float]]:
    """The build's environment while it holds its job slots of a shared jobserver (`inv matrix` side by
    side), and the seconds it waited for the first; without a jobserver, the plan's as it is."""
    if plan.jobserver is None or not plan.jobserver.is_fifo() or plan.shims:  # shims: cmake itself takes it
        yield plan.changes, 0.0
        return
    most = 1 if plan.ninja_joins else int(plan.changes.get("MAX_JOBS") or 1)
    with jobserver.take(plan.jobserver, most) as held:
        if held.waited >= 0.5:
            _console.get().info(f"waited {held.waited:.1f}s for a job slot of the shared budget")
        yield (plan.changes if plan.ninja_joins else {**plan.changes, "MAX_JOBS": str(held.count),
                                                      "CMAKE_BUILD_PARALLEL_LEVEL": str(held.count)}), held.waited


def shim_waits(plan: Plan) -> float:
    """Seconds this build's cmake waited for its job tokens (said when it is worth saying)."""
    waited = jobserver.waited(plan.changes.get(jobserver.WAITS)) if plan.shims else 0.0
    if waited >= 0.5:
        _console.get().info(f"waited {waited:.1f}s for a job slot of the shared budget")
    return waited
