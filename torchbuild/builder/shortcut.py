"""The edit-compile loop's shortcut: run in build/ what setup.py (or scikit-build-core) would run there,
without pip.

A rebuild after editing C++ is, in PyTorch's setup.py, `cmake --build . --target install` in build/
(tools/setup_helpers/cmake.py) and then build_ext and pip's editable install, which redo nothing when
only files CMake's build reads changed; CONTRIBUTING.md's own loop is `(cd build && ninja <target>)`.
The shortcut runs that same command, but only where it is proven to give the same result: the tree's
last build went the whole way with these inputs (configure environment, commit, setup.py's files: the
stamp), the install still points at the checkout, and every file changed since then is one ninja names
as the newest input of an output it would rebuild, or Python inside the package (imported in place).
Anything else (stub.c, tools/setup_helpers, a new file ninja does not know, a deleted file) takes the
whole way, as does --rerun.

Under scikit-build-core (PyTorch main) pip's editable install reconfigures, builds, installs into a
staging tree, zips it and unpacks it into site-packages (#196619). The shortcut is CMake's build and
`cmake --install --prefix <site-packages>/<wheel.install-dir>`, with the backend's strip, where the last
install put exactly the files of CMake's install manifest there (no file the backend adds or leaves out,
no absolute DESTINATION).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import AbstractSet, Iterable, Mapping

from .ownership.cmaketrees import cache_entry
from .ownership.uptodate import NEWEST_INPUT

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
            path = (build / found.group(2)).resolve()
            if path.is_relative_to(checkout.resolve()):
                named.add(path.relative_to(checkout.resolve()).as_posix())
    return named


# What PyTorch's setup.py copies at every build (build_deps: "Use copies instead of symbolic files"): a change
# to the original is stale in the copy until setup.py runs, though the original is Python imported in place
VALGRIND = "{package}/utils/benchmark/utils/valgrind_wrapper"
SETUP_COPIES = {"{package}/_utils_internal.py": "tools/shared/_utils_internal.py",
                "third_party/valgrind-headers/callgrind.h": f"{VALGRIND}/callgrind.h",
                "third_party/valgrind-headers/valgrind.h": f"{VALGRIND}/valgrind.h"}


def refusal(changed: list[str], named: AbstractSet[str], package: str, outputs: Mapping[str, object]) -> str | None:
    """Why the shortcut would not give what the whole build gives (None: it would)."""
    copies = {k.format(package=package): v.format(package=package) for k, v in SETUP_COPIES.items()}
    for path in changed:
        if path in outputs:
            continue  # the build's own file in the checkout (version.py, the .so files)
        if path in copies:
            return f"{path} changed and setup.py copies it to {copies[path]}"
        if path in named:
            continue
        if path.endswith(IN_PLACE) and path.startswith(f"{package}/"):
            continue
        return f"{path} changed and ninja does not build from it"
    return None


def commands(build: Path, env: Mapping[str, str], into: Path | None = None, strip: bool = False
             ) -> list[list[str]] | None:
    """setup.py's build step as tools/setup_helpers/cmake.py runs it; with `into` (scikit-build-core), CMake's
    build and its install into that folder of the env, as the editable install puts it there. By `cmake` on
    the build's PATH (`with_jobs` adds MAX_JOBS as it stands when the build starts)."""
    cmake = shutil.which("cmake", path=env.get("PATH"))
    config = cache_entry(build, "CMAKE_BUILD_TYPE") or "Release"
    if cmake is None:
        return None
    if into is None:
        return [[cmake, "--build", ".", "--target", "install", "--config", config]]
    return [[cmake, "--build", ".", "--config", config],
            [cmake, "--install", ".", "--config", config, "--prefix", str(into), *(["--strip"] if strip else [])]]


def with_jobs(argv: list[str], env: Mapping[str, str | None]) -> list[str]:
    """A build command with setup.py's `-j MAX_JOBS` when MAX_JOBS is set."""
    return [*argv, "-j", str(env["MAX_JOBS"])] if env.get("MAX_JOBS") and "--build" in argv else argv


def whole_way(checkout: Path, build: Path, package: str, marker: Mapping[str, object], explained: list[str] | None,
              now: Mapping[str, object], outputs: Mapping[str, object], into: Path | None = None) -> str | None:
    """Why this rebuild must go the whole way through setup.py (or pip) (None: the shortcut gives the same
    result). The caller has checked the stamp, the install and the tree's files in the checkout; `into`: the
    env's folder the editable install copied CMake's install into (scikit-build-core)."""
    if explained is None:
        return "no ninja tree to ask"
    if into is not None:
        why = env_install_refusal(build, marker, into)
        if why:
            return why
    else:
        prefix = cache_entry(build, "CMAKE_INSTALL_PREFIX")
        if prefix is None or Path(prefix).resolve() != (checkout / package).resolve():
            return f"CMake does not install into {checkout / package}, the package folder (CMAKE_INSTALL_PREFIX)"
    return off_graph(marker, now, package, outputs, ninja_inputs(explained, build, checkout))


def manifest_files(build: Path, into: Path) -> set[str] | None:
    """CMake's last install (install_manifest.txt) as paths relative to its prefix, the backend's staging
    folder or `into` (None: no manifest, or a file installed outside the prefix)."""
    manifest = build / "install_manifest.txt"
    staged = cache_entry(build, "CMAKE_INSTALL_PREFIX")
    roots = [into, *([Path(staged)] if staged else [])]
    if not manifest.is_file():
        return None
    found = set()
    for line in filter(None, map(str.strip, manifest.read_text(errors="replace").splitlines())):
        path = Path(line)
        root = next((r for r in roots if path.is_relative_to(r)), None)
        if root is None:
            return None
        found.add(path.relative_to(root).as_posix())
    return found


def env_install_refusal(build: Path, marker: Mapping[str, object], into: Path) -> str | None:
    """Why `cmake --install --prefix into` would not leave what the editable install left there."""
    cmake_files = manifest_files(build, into)
    if cmake_files is None:
        return "CMake's install manifest is missing or names a file outside the install prefix"
    kept, prefix = marker.get("env_files"), marker.get("env_prefix")
    ours = {(Path(str(prefix)) / p).relative_to(into).as_posix() for p in kept
            if (Path(str(prefix)) / p).is_relative_to(into)} if isinstance(kept, dict) and prefix else set()
    ours = {p for p in ours if not (p.split("/")[0].endswith((".dist-info", ".pth")) or p.startswith("_editable_"))}
    if ours != cmake_files:
        return f"the editable install in {into} holds other files than CMake's install"
    return None


def off_graph(marker: Mapping[str, object], now: Mapping[str, object], package: str, outputs: Mapping[str, object],
              named: AbstractSet[str] = frozenset()) -> str | None:
    """Why a file changed since the tree's last complete build needs the whole build (None: every change
    is one ninja rebuilds from, `named`, Python imported in place, or the build's own output). With no
    ninja work, this is what keeps stub.c, tools/setup_helpers or a new file from passing as "up to date"."""
    before = marker.get("worktree")
    if not isinstance(before, dict):
        return "the last build did not record the working tree"
    return refusal(changed_since(before, now), named, package, outputs)
