"""The linker trial: once a machine, this build's longest link timed with each linker (build.linker auto)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from .. import console as _console
from ..run import merged_env, run
from ..toolchain import linkers
from .ownership.cmaketrees import tree_ninja
from .plan import Plan
from .profile import Step


def linker_trial(plan: Plan, build: Path, steps: list[Step], base_env: Mapping[str, str]) -> None:
    """Once a machine: time this build's longest link with each linker; auto takes the fastest from now on."""
    links = sorted((s for s in steps if s.kind == "link"), key=lambda s: s.seconds)
    ninja = tree_ninja(build)
    if not links or links[-1].seconds < linkers.TRIAL_FROM or ninja is None:
        return
    library = links[-1].output
    lines = run([ninja, "-C", str(build), "-t", "commands", library], capture=True, echo=False,
                check=False).stdout.strip().splitlines()
    if not lines:
        return
    used = linkers.FUSE_LD.search(lines[-1])  # the build's own linker, timed by the build itself
    seconds = linkers.trial(lines[-1], build, list(plan.linker_trial), merged_env(base_env, plan.changes),
                            plan.linker_memory, library,
                            {used.group(0).split("=", 1)[1]: links[-1].seconds} if used else None)
    chosen = linkers.choose("auto", list(plan.linker_trial), seconds)
    times = ", ".join(f"{name} {t:.2f}s" for name, t in sorted(seconds.items(), key=lambda x: x[1]))
    _console.get().info(f"linker trial on {library} (once on this machine): {times}; build.linker auto "
                        f"takes {chosen.name if chosen else 'the default'} from now on")
