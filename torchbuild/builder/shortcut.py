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
`cmake --install --prefix <site-packages>/<wheel.install-dir>`, with the backend's strip of what it copied
(stripping.py), where the last install put exactly the files of CMake's install manifest there (no file the
backend adds or leaves out, no absolute DESTINATION).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, AbstractSet, Iterable, Mapping

from .. import compat
from ..run import run
from ..wheels import record_rows, write_record
from . import scm
from .ownership.cmaketrees import cache_entry, ninja_of
from .ownership.moves import dist_metadata, editable_record
from .ownership.uptodate import NEWEST_INPUT

if TYPE_CHECKING:
    from .drivers import Driver
    from .ownership.records import Record
    from .plan import Plan

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


def refusal(changed: list[str], named: AbstractSet[str], package: str, outputs: Mapping[str, object],
            copies: Mapping[str, str] | None = None) -> str | None:
    """Why the shortcut would not give what the whole build gives (None: it would); `copies`: what the build
    driver copies at every build (PyTorch's setup.py: _utils_internal.py into tools/shared/), stale in the copy
    until the driver runs."""
    copies = copies or {}
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


def commands(driver: Driver, build: Path, env: Mapping[str, str], into: Path | None = None
             ) -> list[list[str]] | None:
    """The build driver's own step in build/ (its `loop`), by `cmake` on the build's PATH (None: no cmake);
    `with_jobs` adds MAX_JOBS as it stands when the build starts."""
    cmake = shutil.which("cmake", path=env.get("PATH"))
    if cmake is None:
        return None
    return driver.loop(cmake, cache_entry(build, "CMAKE_BUILD_TYPE") or "Release", into)


def with_jobs(argv: list[str], env: Mapping[str, str | None]) -> list[str]:
    """A build command with setup.py's `-j MAX_JOBS` when MAX_JOBS is set."""
    return [*argv, "-j", str(env["MAX_JOBS"])] if env.get("MAX_JOBS") and "--build" in argv else argv


def whole_way(checkout: Path, build: Path, package: str, marker: Record, explained: list[str] | None,
              now: Mapping[str, object], outputs: Mapping[str, object], into: Path | None = None,
              copies: Mapping[str, str] | None = None) -> str | None:
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
    return off_graph(marker, now, package, outputs, ninja_inputs(explained, build, checkout), copies)


def manifest_files(build: Path, into: Path) -> set[str] | None:
    """CMake's last install (install_manifest.txt) as paths relative to its prefix, the backend's staging
    folder or `into` (None: no manifest, or a file installed outside the prefix). Plain strings: 12,000 lines
    at PyTorch's size, where a Path each cost 0.3 s."""
    manifest = build / "install_manifest.txt"
    staged = cache_entry(build, "CMAKE_INSTALL_PREFIX")
    roots = [os.path.join(os.path.normpath(root), "") for root in [str(into), *([staged] if staged else [])]]
    if not manifest.is_file():
        return None
    found = set()
    for line in filter(None, map(str.strip, manifest.read_text(errors="replace").splitlines())):
        path = os.path.normpath(line)
        root = next((r for r in roots if path.startswith(r)), None)
        if root is None:
            return None
        found.add(path[len(root):])
    return found


def env_install_refusal(build: Path, marker: Record, into: Path) -> str | None:
    """Why `cmake --install --prefix into` would not leave what the editable install left there."""
    cmake_files = manifest_files(build, into)
    if cmake_files is None:
        return "CMake's install manifest is missing or names a file outside the install prefix"
    kept, prefix = marker.env_files, marker.env_prefix
    inside = os.path.join(os.path.relpath(into, str(prefix)), "") if prefix else "../"  # the names are the env's
    ours = {p[len(inside):] for p in kept if p.startswith(inside)} \
        if isinstance(kept, dict) and not inside.startswith("../") else set()
    ours = {p for p in ours if not (p.split("/")[0].endswith((".dist-info", ".pth")) or p.startswith("_editable_"))}
    if ours != cmake_files:
        return f"the editable install in {into} holds other files than CMake's install"
    return None


def off_graph(marker: Record, now: Mapping[str, object], package: str, outputs: Mapping[str, object],
              named: AbstractSet[str] = frozenset(), copies: Mapping[str, str] | None = None) -> str | None:
    """Why a file changed since the tree's last complete build needs the whole build (None: every change
    is one ninja rebuilds from, `named`, Python imported in place, or the build's own output). With no
    ninja work, this is what keeps stub.c, tools/setup_helpers or a new file from passing as "up to date"."""
    before = marker.worktree
    if before is None:
        return "the last build did not record the working tree"
    return refusal(changed_since(before, now), named, package, outputs, copies)


# Across commits (`git switch`, `git pull`, a bisection's next step): the same shortcut, where the only input
# that changed is the commit, every file the commits changed passes `refusal` as an edit would, and the
# version pip recorded is one the build writes anew: the package's version.py, generated by the build (as
# torch/CMakeLists.txt's gen_torch_version, at every build), saying what the dist-info's METADATA says. After
# the build the dist-info is re-stamped with the new version.py's, as pip's install of that commit would write it.
VERSION = re.compile(r"""(?m)^__version__\s*(?::[^=\n]*)?=\s*['"]([^'"]+)['"]""")


def canonical(parts: Mapping[str, object]) -> str:
    return json.dumps({**parts, "tree": None}, sort_keys=True, default=str)


def across(checkout: Path, marker: Record, parts: Mapping[str, object], package: str,
           record: Path | None, outputs: Mapping[str, object], maps_files: bool, path: str | None
           ) -> tuple[list[str], str | None]:
    """The files the commits since the tree's last complete build changed, and why the shortcut cannot build
    this commit from that build ("": the commit did not change; None: it can). `path`: the build's PATH."""
    old, was, now = commits(marker, parts)
    if was is None or now is None or was == now:
        return [], ""
    if canonical(old) != canonical(parts):
        return [], "more than the commit changed since its last complete build"
    why = version_refusal(checkout, package, record, outputs, ninja_of(checkout / "build", path))
    if why:
        return [], why
    done = run(["git", "diff", "--name-status", "--no-renames", "-z", was, str(now)], cwd=checkout, capture=True,
               echo=False, check=False)
    if done.returncode != 0:
        return [], f"git cannot compare {was[:10]} with {str(now)[:10]}"
    fields = done.stdout.split("\0")
    changed = [name for name in fields[1::2] if name]
    new = [p for s, p in zip(fields[::2], fields[1::2]) if s in "AD" and p.startswith(f"{package}/")]
    if new and maps_files:
        return changed, f"{new[0]} is added or deleted, and the editable install maps the package's files one by one"
    return changed, None


def commits(marker: Record, parts: Mapping[str, object]) -> tuple[dict[str, object], str | None,
                                                                                 object]:
    """The inputs of the tree's last complete build, the commit it built (None: no complete build) and HEAD's."""
    old = dict(marker.inputs or {})
    was, now = old.get("tree"), parts.get("tree")
    built = str(was[0]) if isinstance(was, list) and was and marker.done else None
    return old, built, now[0] if isinstance(now, list) and now else None


def crossing(plan: Plan, marker: Record, parts: Mapping[str, object], outputs: Mapping[str, object]
             ) -> tuple[list[str], str | None, Path | None]:
    """`across` for the plan (the files the commits changed; "": the same commit, or no install of the
    checkout in the env to re-stamp; None: the shortcut may build it), and the install's RECORD."""
    record = editable_record(plan.env.prefix, plan.checkout) if not plan.wheel and moved(marker, parts) else None
    if record is None:
        return [], "", None
    changed, why = across(plan.checkout, marker, parts, plan.package, record, outputs, plan.outputs_in_env,
                          plan.changes.get("PATH"))
    return changed, why, record


def moved(marker: Record, parts: Mapping[str, object]) -> bool:
    """Whether HEAD is another commit than the tree's last complete build's."""
    _, was, now = commits(marker, parts)
    return was is not None and now is not None and was != now


def version_of(path: Path) -> str | None:
    found = VERSION.search(path.read_text(errors="replace")) if path.is_file() else None
    return found.group(1) if found else None


def metadata_version(record: Path | None) -> str | None:
    return dist_metadata(record).get("Version")


def version_refusal(checkout: Path, package: str, record: Path | None, outputs: Mapping[str, object],
                    ninja: str | None) -> str | None:
    """Why pip's recorded version would be wrong at another commit after the shortcut (None: it would be
    right, or re-stamped from the version.py the build writes at every build: ninja would run its step now)."""
    project = compat.pyproject(checkout).get("project", {})
    if project.get("version") and "version" not in project.get("dynamic", []) and \
            not (checkout / "setup.py").exists():
        return None  # a static version: the same at every commit that leaves pyproject.toml as it is
    generated = f"{package}/version.py"
    if generated not in outputs:
        if scm.configured(checkout):
            return None  # computed as the backend computes it, when the verdict skips the driver (scm.py)
        if static_version(checkout, package, metadata_version(record)):
            return None  # pip would write the same at this commit
        return f"the version is the backend's to compute at each commit, and the build does not write {generated}"
    said = version_of(checkout / generated)
    if said is None or said != metadata_version(record):
        return f"{generated} ({said}) and the install's METADATA ({metadata_version(record)}) disagree"
    asked = run([ninja, "-C", str(checkout / "build"), "-n", str(checkout / generated)], capture=True, echo=False,
                check=False) if ninja else None
    if asked is None or asked.returncode != 0 or not any(ln.startswith("[") for ln in asked.stdout.splitlines()):
        return f"the build's ninja does not write {generated} at every build"
    return None


VERSION_FILES = ("setup.py", "setup.cfg", "pyproject.toml", "{package}/__init__.py", "{package}/version.py",
                 "{package}/_version.py", "{package}/__about__.py", "src/{package}/__init__.py")
FROM_GIT = re.compile(r"setuptools[_-]scm|use_scm_version|versioneer|dunamai|hatch-vcs|versioningit")


def static_version(checkout: Path, package: str, version: str | None) -> str | None:
    """The tracked file that says, at this commit, the version pip recorded, as a literal assignment
    (`__version__ = "2.8.1"`, `version="2.8.1"`, setup.cfg's `version = 2.8.1`), in a project whose version
    comes from no VCS plugin: pip's install of this commit would record that version again (bitarray, mmh3).
    None: none does."""
    if not version:
        return None
    build_files = [checkout / name for name in ("setup.py", "pyproject.toml", "setup.cfg")]
    if any(FROM_GIT.search(f.read_text(errors="replace")) for f in build_files if f.is_file()):
        return None
    said = re.compile(rf"""\b(__version__|version)\s*[:=]\s*(['"]){re.escape(version)}\2|"""
                      rf"""^version\s*=\s*{re.escape(version)}\s*$""", re.M)
    names = [name.format(package=package) for name in VERSION_FILES]
    tracked = run(["git", "ls-files", "-z", "--", *names], cwd=checkout, capture=True, echo=False,
                  check=False).stdout.split("\0")  # a generated version.py (PyTorch's) is no source of it
    return next((name for name in names if name in tracked and said.search(
        (checkout / name).read_text(errors="replace"))), None)


def restamp(record: Path, version: str) -> Path:
    """The editable install's dist-info saying `version` (METADATA, the folder's name, RECORD's lines and the
    METADATA's hash), as pip's install of this commit writes it; its RECORD's new path."""
    version = pep440(version)
    info = record.parent
    old = metadata_version(record)
    if old is None or old == version:
        return record
    meta = (info / "METADATA").read_text(errors="replace").replace(f"Version: {old}\n", f"Version: {version}\n", 1)
    name = info.name.removesuffix(f"-{old}.dist-info")
    moved = info.with_name(f"{name}-{version}.dist-info") if name != info.name else info
    data = meta.encode()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    rows = []
    for row in record_rows(record):
        if row[0] == f"{info.name}/METADATA":
            row = [f"{moved.name}/METADATA", f"sha256={digest}", str(len(data))]
        elif row[0].startswith(f"{info.name}/"):
            row = [moved.name + row[0].removeprefix(info.name), *row[1:]]
        rows.append(row)
    if moved != info:
        info.rename(moved)
    temp = moved / ".METADATA.torchbuild"
    temp.write_text(meta)
    temp.replace(moved / "METADATA")
    write_record(moved / "RECORD", rows)
    return moved / "RECORD"


def pep440(version: str) -> str:
    """A version as pip writes it into METADATA and the dist-info's name: normalized (setuptools-scm with
    `normalize = false` says `v2.0.0-Beta2.dev1+g1a2b3c4`, pip `2.0.0b2.dev1+g1a2b3c4`); as given where it is
    no PEP 440 version."""
    from packaging.version import InvalidVersion, Version

    try:
        return str(Version(version))
    except InvalidVersion:
        return version


def with_commits(checkout: Path, marker: Record, committed: list[str]) -> Record:
    """The last build's record as if the files the commits since changed had differed then, so that every
    check of the working tree against it sees them; a file that was an uncommitted edit then, and is that
    edit committed now (the same size and time), is as that build left it."""
    before = marker.worktree
    if not committed or before is None:
        return marker
    state = dict(before)
    for path in committed:
        try:
            st = (checkout / path).stat()
            built = state.get(path) == [st.st_size, st.st_mtime_ns]
        except OSError:
            built = False
        if built:
            del state[path]
        else:
            state[path] = ["another commit"]
    return replace(marker, worktree=state)
