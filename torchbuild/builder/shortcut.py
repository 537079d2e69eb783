"""The edit-compile loop's shortcut: run in build/ what setup.py would run there, without pip.

A rebuild after editing C++ is, in PyTorch's setup.py, `cmake --build . --target install` in build/
(tools/setup_helpers/cmake.py) and then build_ext and pip's editable install, which redo nothing when
only files CMake's build reads changed; CONTRIBUTING.md's own loop is `(cd build && ninja <target>)`.
The shortcut runs that same command, but only where it is proven to give the same result: the tree's
last build went the whole way with these inputs (configure environment, commit, setup.py's files: the
stamp), the install still points at the checkout, and every file changed since then is one ninja names
as the newest input of an output it would rebuild, or Python inside the package (imported in place).
Anything else (stub.c, tools/setup_helpers, a new file ninja does not know, a deleted file) takes the
whole way, as does --rerun.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import AbstractSet, Iterable, Mapping

from .uptodate import cache_entry

NEWEST_INPUT = re.compile(r"ninja explain: output .+ older than most recent input (.+) \(\d+ vs \d+\)$")
IN_PLACE = (".py", ".pyi")


def changed_since(before: Mapping[str, object], now: Mapping[str, object]) -> list[str]:
    """Files whose state differs from the last build's: changed since, or changed back (no longer listed)."""
    return sorted(p for p in set(before) | set(now) if before.get(p, "absent") != now.get(p, "absent"))


def ninja_inputs(explain: Iterable[str], build: Path, checkout: Path) -> set[str]:
    """The files `ninja -n -d explain` names as the newest input of an output it would rebuild, relative
    to the checkout (inputs outside it are left out)."""
    named = set()
    for line in explain:
        found = NEWEST_INPUT.match(line.strip())
        if found:
            path = (build / found.group(1)).resolve()
            if path.is_relative_to(checkout.resolve()):
                named.add(path.relative_to(checkout.resolve()).as_posix())
    return named


def refusal(changed: list[str], named: AbstractSet[str], package: str, outputs: Mapping[str, object]) -> str | None:
    """Why the shortcut would not give what the whole build gives (None: it would)."""
    for path in changed:
        if path in outputs:
            continue  # the build's own file in the checkout (version.py, the .so files)
        if path in named:
            continue
        if path.endswith(IN_PLACE) and path.startswith(f"{package}/"):
            continue
        return f"{path} changed and ninja does not build from it"
    return None


def command(build: Path, env: Mapping[str, str]) -> list[str] | None:
    """setup.py's build step as tools/setup_helpers/cmake.py runs it, by `cmake` on the build's PATH
    (`with_jobs` adds MAX_JOBS as it stands when the build starts)."""
    cmake = shutil.which("cmake", path=env.get("PATH"))
    return [cmake, "--build", ".", "--target", "install", "--config",
            cache_entry(build, "CMAKE_BUILD_TYPE") or "Release"] if cmake else None


def with_jobs(argv: list[str], env: Mapping[str, str | None]) -> list[str]:
    """The command with setup.py's `-j MAX_JOBS` when MAX_JOBS is set."""
    return [*argv, "-j", str(env["MAX_JOBS"])] if env.get("MAX_JOBS") else argv


def whole_way(checkout: Path, build: Path, package: str, marker: Mapping[str, object], explained: list[str] | None,
              now: Mapping[str, object], outputs: Mapping[str, object]) -> str | None:
    """Why this rebuild must go the whole way through setup.py and pip (None: the shortcut gives the same
    result). The caller has checked the stamp, the install and the tree's files in the checkout."""
    if explained is None:
        return "no ninja tree to ask"
    prefix = cache_entry(build, "CMAKE_INSTALL_PREFIX")
    if prefix is None or Path(prefix).resolve() != (checkout / package).resolve():
        return f"CMake does not install into {checkout / package} (PyTorch's CMAKE_INSTALL_PREFIX)"
    return off_graph(marker, now, package, outputs, ninja_inputs(explained, build, checkout))


def off_graph(marker: Mapping[str, object], now: Mapping[str, object], package: str, outputs: Mapping[str, object],
              named: AbstractSet[str] = frozenset()) -> str | None:
    """Why a file changed since the tree's last complete build needs the whole build (None: every change
    is one ninja rebuilds from, `named`, Python imported in place, or the build's own output). With no
    ninja work, this is what keeps stub.c, tools/setup_helpers or a new file from passing as "up to date"."""
    before = marker.get("worktree")
    if not isinstance(before, dict):
        return "the last build did not record the working tree"
    return refusal(changed_since(before, now), named, package, outputs)
