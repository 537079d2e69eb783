"""When a configuration is up to date: beside its files (channels.py, as its record keeps them) and its
CMake trees (cmaketrees.py), the inputs stamp, ninja's pending work in every tree, and the env's install of
this checkout (the editable install's RECORD names the files it put into the env).
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ...digest import digest
from ...run import Result, run
from ...wheels import record_paths
from ..plan import Plan
from ..split import installed_core
from .changes import worktree_state
from .cmaketrees import cache_entry, ninja_of
from .moves import editable_record
from .records import Record, kept_values

# `ninja -n -d explain` on a tree whose only work is an always-run target (PyTorch's gen_torch_version,
# CMake's install): the target's symbolic output under CMakeFiles/ never exists.
ALWAYS_RUN = re.compile(r"ninja explain: output (?:\S+/)?CMakeFiles/[^/.\s]+ doesn't exist")


def stamp_parts(plan: Plan) -> dict[str, object]:
    """What a no-op build depends on beyond ninja's graph: the command, the configure environment,
    the commit, and the files setup.py reads (setup.py, pyproject.toml, version.txt, requirements).
    A wheel also holds the Python sources ninja does not track: the working tree's changes count too.
    The core of a split build is the same for every Python: its env's interpreter does not count."""
    files = {}
    for name in ("setup.py", "pyproject.toml", "setup.cfg", "MANIFEST.in", "version.txt", "requirements.txt",
                 "requirements-build.txt", "CMakeLists.txt", ".gitmodules"):
        path = plan.checkout / name
        if path.exists():
            st = path.stat()
            files[name] = [st.st_size, st.st_mtime_ns]
    core = plan.changes.get("BUILD_LIBTORCH_WHL") == "1"
    command = ["python", *plan.command[1:]] if core else [*plan.command, str(plan.env.python)]
    tree = worktree_state(plan.checkout, plan.wheel)
    if plan.wheel and not tree:  # a build slot (no git to ask what changed): its wheel is always made anew
        tree = [time.time()]
    against: list[object] = []
    if plan.changes.get("BUILD_PYTHON_ONLY") == "1":  # built against the core in the env: which one counts
        site, installed = installed_core(plan)
        against = [[f, (site / f).stat().st_size] for f in installed if (site / f).is_file()]
    return {"command": command, "environment": kept_values(dict(sorted(plan.inputs.items()))), "tree": tree,
            "files": files, "against": against}  # a secret's value as its digest: the marker keeps these


def why_whole_way(marker: Record, parts: Mapping[str, object], in_place: bool,
                  installed: bool) -> str:
    """Why a configuration with a tree is not up to date, for the terminal: the first that holds of the
    last build not finishing, an input changed (which), its files not in place, the env's install not its."""
    if marker.done is None:
        return "the last build of this configuration did not finish (it failed, was stopped, or a source changed " \
               "while it ran)"
    old = marker.inputs
    if marker.done != digest(parts):
        if not isinstance(old, dict):
            return "its inputs changed since its last complete build"
        was, now = as_dict(old.get("files")), as_dict(parts["files"])
        for name in sorted(set(was) | set(now)):
            if was.get(name) != now.get(name):
                return f"{name} changed since its last complete build"
        if as_list(old.get("tree"))[:1] != as_list(parts["tree"])[:1]:
            return "the commit changed since its last complete build"
        if old.get("command") != parts["command"]:
            return "another build command ran in its tree since (a wheel, or another Python)"
        env, env_now = as_dict(old.get("environment")), as_dict(parts["environment"])
        keys = sorted(k for k in set(env) | set(env_now) if env.get(k) != env_now.get(k))
        if keys:
            return f"the build's environment changed: {', '.join(keys[:3])}"
        return "the working tree changed since its last complete build (a wheel holds every source)"
    if not in_place:
        return "its files in the checkout are not as its build left them"
    if not installed:
        return "the env's install of the checkout is not the one its last build made (pip run by hand, another " \
               "build or a wheel installed since)"
    return "its last build left no record of what it built"


def as_dict(value: object) -> dict[str, object]:
    return dict(value) if isinstance(value, dict) else {}


def as_list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


@dataclass(frozen=True)
class NinjaWork:
    """What a configuration's trees would redo: ninja's explain lines (each newest input by its absolute path),
    the outputs of the steps it would run, whether CMake would configure again first (the steps are then the
    tree's as it stands, behind that), and what says so (for the up-to-date line)."""

    lines: tuple[str, ...]
    steps: tuple[str, ...]
    reconfigure: bool = False
    source: str = "ninja has no work"


def ninja_work(trees: Iterable[Path], plan: Plan, base_env: Mapping[str, str],
               source: str = "ninja has no work") -> NinjaWork | None:
    """`ninja -n -d explain` in each of the configuration's CMake trees (cmaketrees.py); where CMake would run
    again first, the steps behind it too (`past_regeneration`). None: no tree, or one without ninja."""
    trees, lines, steps, reconfigure = list(trees), [], [], False
    if not trees:
        return None
    for tree in trees:
        asked = ninja_dry_run(tree, plan, base_env)
        if asked is None:
            return None
        if any(s.startswith("Re-running CMake") for s in asked[1]):  # ninja -n stops there: what follows it
            reconfigure = True
            ninja = ninja_of(tree, str(plan.changes.get("PATH") or base_env.get("PATH", "")))
            behind = past_regeneration(ninja, tree) if ninja else None
            asked = (asked[0] + behind[0], behind[1]) if behind else asked
        lines += [absolute_input(line, tree) for line in asked[0]]
        steps += [s.split()[-1] for s in asked[1] if s.split() and not s.startswith(
            ("Regenerating", "No work", "Re-running CMake", "Re-checking globbed"))]
    return NinjaWork(tuple(lines), tuple(steps), reconfigure, source)


# A generator that writes its output only when its content changes (restat = 1: torchgen, CMake's custom commands)
# is said as "restat of output X" (ninja 1.11) or "recorded mtime of X" (1.13)
NEWEST_INPUT = re.compile(r"ninja explain: (?:output|restat of output|recorded mtime of) (.+) older than most recent "
                          r"input (.+) \(\d+ vs \d+\)$")


def absolute_input(line: str, tree: Path) -> str:
    """An explain line whose newest input is a path relative to its tree, with that path made absolute."""
    found = NEWEST_INPUT.match(line.strip())
    if not found or os.path.isabs(found.group(2)):
        return line
    start, end = found.span(2)
    line = line.strip()
    return line[:start] + os.path.normpath(tree / found.group(2)) + line[end:]


STEP = re.compile(r"(?m)^\[\d+/\d+\] (.+)$")


def ninja_dry_run(build: Path, plan: Plan, base_env: Mapping[str, str]) -> tuple[list[str], list[str]] | None:
    """One `ninja -n -d explain` in the tree: why each output would be rebuilt, and the steps it would run
    (their descriptions); None without a ninja tree."""
    if not (build / "build.ninja").exists():
        return None
    ninja = ninja_of(build, str(plan.changes.get("PATH") or base_env.get("PATH", "")))
    if ninja is None:
        return None
    asked = dry_run(ninja, build)
    if asked is None:
        return None
    lines, steps = asked
    if any(GLOB_CHECK.search(line) for line in lines) and globs_unchanged(build):
        # ninja -n stops once it would regenerate build.ninja (a dry run cannot load the new one): with the
        # globs unchanged, ask again through a manifest no edge makes, to see the steps behind that check
        asked = past_regeneration(ninja, build)
        if asked is None:
            return None
        lines, steps = asked
    return lines, steps


AHEAD: dict[tuple[str, str, str], Future[Any]] = {}  # answers started before they are asked (ahead()): by what, the
# program that answers, the tree


def ahead(trees: Iterable[Path], path: str) -> None:
    """Start each tree's `ninja -n -d explain` now (its ninja: the tree's, else the first on `path`), beside the
    checks that come before it (git's status, the recorded files' stats): ninja's dry run is ninja's own no-op
    (0.12 s at PyTorch's size), and the verdict asks it once those are done. A tree with a `file(GLOB ...
    CONFIGURE_DEPENDS)` shows CMake's glob check on every run: the check and the dry run past it start at the
    same time too, not one after the other. Each reads the tree and writes nothing; the verdict takes the
    answers (`dry_run`, `past_regeneration`, `globs_unchanged`)."""
    for tree in trees:
        ninja = ninja_of(tree, path) if (tree / "build.ninja").exists() else None
        if ninja is None or ("dry", ninja, str(tree)) in AHEAD:
            continue
        asked: dict[tuple[str, str], Callable[[], Any]] = {("dry", ninja): partial(dry_run_result, ninja, tree)}
        if (tree / "CMakeFiles" / "VerifyGlobs.cmake").is_file():
            asked[("past", ninja)] = partial(past_regeneration_result, ninja, tree)
            asked[("globs", "")] = partial(globs_checked, tree)
        for (what, who), question in asked.items():
            pool = ThreadPoolExecutor(1)
            AHEAD[(what, who, str(tree))] = pool.submit(question)
            pool.shutdown(wait=False)  # its thread ends with the run


def taken(what: str, who: str, tree: Path, ask: Callable[[], Any]) -> Any:
    """The answer `ahead` started for the tree, else `ask`'s now."""
    started = AHEAD.pop((what, who, str(tree)), None)
    return started.result() if started else ask()


def forget_ahead() -> None:
    """Drop the dry runs started ahead and not taken (the verdict did not ask them): a later question about
    the tree, after a build, must never get an answer from before it. Each is waited for: none outlives it."""
    for started in AHEAD.values():
        with contextlib.suppress(Exception):
            started.result()
    AHEAD.clear()


def dry_run_argv(ninja: str, build: Path, manifest: str | None = None) -> list[str]:
    return [ninja, "-C", str(build), *(["-f", manifest] if manifest else []), "-n", "-d", "explain"]


def dry_run_result(ninja: str, build: Path, manifest: str | None = None) -> Result:
    return run(dry_run_argv(ninja, build, manifest), capture=True, echo=False, check=False)


def dry_run(ninja: str, build: Path, manifest: str | None = None) -> tuple[list[str], list[str]] | None:
    """`ninja -n -d explain` in the tree (through `manifest` where given): its explain lines and step names;
    the answer of the run `ahead` started, where it started this one."""
    res = taken("dry", ninja, build, partial(dry_run_result, ninja, build)) if manifest is None else \
        dry_run_result(ninja, build, manifest)
    return explained(res)


def explained(res: Result) -> tuple[list[str], list[str]] | None:
    """A dry run's explain lines and step names (None: it failed)."""
    if res.returncode != 0:
        return None
    if "no work to do" in res.stdout:
        return [], []
    out = res.stdout + "\n" + res.stderr
    return [line.strip() for line in out.splitlines() if line.startswith("ninja explain:")], \
        [m.group(1).strip() for m in STEP.finditer(res.stdout)]


def past_regeneration(ninja: str, build: Path) -> tuple[list[str], list[str]] | None:
    """The dry run of the tree's build.ninja as it stands, its regeneration left out."""
    asked = explained(taken("past", ninja, build, partial(past_regeneration_result, ninja, build)))
    if asked is None:
        return None
    lines, steps = asked
    return [line for line in lines if not GLOB_CHECK.search(line)], \
        [s for s in steps if not s.startswith(("Re-checking globbed", "Re-running CMake"))]


def past_regeneration_result(ninja: str, build: Path) -> Result:
    """ninja's dry run through a manifest outside the tree that includes its build.ninja: that manifest is the
    one ninja would remake first, and no edge makes it."""
    path = str((build / "build.ninja").resolve()).replace("$", "$$").replace(" ", "$ ").replace(":", "$:")
    with tempfile.TemporaryDirectory(prefix="tb-explain-") as tmp:
        manifest = Path(tmp) / "asked.ninja"
        manifest.write_text(f"include {path}\n")
        return dry_run_result(ninja, build, str(manifest))


def dry_run_of(ninja: str, build: Path, text: str) -> list[str] | None:
    """The steps `ninja -n` would run in the tree were its build.ninja `text` (--debug-files' FLAGS before they
    are written): through a manifest outside the tree, which no edge makes, so nothing regenerates."""
    with tempfile.TemporaryDirectory(prefix="tb-edited-") as tmp:
        manifest = Path(tmp) / "edited.ninja"
        manifest.write_text(text)
        asked = explained(dry_run_result(ninja, build, str(manifest)))
    return None if asked is None else [s.split()[-1] for s in asked[1] if s.split() and not s.startswith(
        ("Regenerating", "No work", "Re-running CMake", "Re-checking globbed"))]


GLOB_CHECK = re.compile(r"CMakeFiles/(?:VerifyGlobs\.cmake_force|cmake\.verify_globs)\b")


def globs_unchanged(build: Path) -> bool:
    """Whether every `file(GLOB ... CONFIGURE_DEPENDS)` of the tree still finds what it found (ninja re-checks
    them on every build, so a tree that has them always shows that step; PyTorch main's torch_cuda has one),
    by CMake's own check, which marks the tree for a reconfigure when one differs."""
    return bool(taken("globs", "", build, partial(globs_checked, build)))


def globs_checked(build: Path) -> bool:
    cmake, script = cache_entry(build, "CMAKE_COMMAND"), build / "CMakeFiles" / "VerifyGlobs.cmake"
    if not cmake or not script.is_file():
        return False
    res = run([cmake, "-P", str(script)], capture=True, echo=False, check=False)
    return res.returncode == 0 and "GLOB mismatch" not in res.stdout + res.stderr


# What ninja (1.12 and later) says as a consequence of another line: a target dirty because an input is, and a
# phony edge with no inputs (always "dirty", runs nothing)
DERIVED = re.compile(r"ninja explain: (?:.+ is dirty|output .+ of phony edge with no inputs doesn't exist)")


def nothing_to_do(explained: list[str] | None) -> bool:
    """ninja finds no work but always-run targets (PyTorch's gen_torch_version, spglib's Spglib_GitHash: their
    inputs, the commit and the variables, the stamp holds) and what follows from them; False without ninja or
    a ninja tree."""
    return explained is not None and all(ALWAYS_RUN.fullmatch(line) or (DERIVED.fullmatch(line) and not (
        GLOB_CHECK.search(line) or "build.ninja" in line)) for line in explained)  # CMake's own runs are work


def installed(plan: Plan, marker: Record | None = None) -> bool:
    """The env imports the package from this checkout, and from nowhere else, and its extensions exist
    (where the driver installs them into the env: the files this tree's last build put there, unchanged)."""
    if plan.outputs_in_env:
        kept = dict(marker.env_files) if marker and marker.env_files is not None else None
        same_env = marker is not None and str(marker.env_prefix) == str(plan.env.prefix)
        return isinstance(kept, dict) and bool(kept) and same_env and kept == env_files(plan, kept) \
            and redirected_into(plan.env.prefix, plan.checkout)
    served = set()
    for site in plan.env.prefix.glob("lib/python*/site-packages"):
        served |= serving(site, plan.package)
    if len(served) != 1:
        return False
    (package,) = served  # the checkout's package folder (at its top, PyTorch, or under src/), or its module
    return package.is_relative_to(plan.checkout.resolve()) and any(
        [*package.glob("*.so"), *package.parent.glob(f"{package.name}.*.so")])


FINDER_MAPPING = re.compile(r"(?m)^MAPPING\s*(?::[^=\n]*)?=\s*(\{.*?\})\s*$")


def serving(site: Path, package: str) -> set[Path]:
    """The folders an env's site-packages imports `package` from, as its editable installs map it, by
    exact resolved path: setuptools' finder (`__editable___*_finder.py` MAPPING), a .pth line, an
    .egg-link (`setup.py develop`). A path that merely starts like the checkout's is another checkout."""
    found: set[Path] = set()
    for finder in site.glob("__editable___*_finder.py"):
        with contextlib.suppress(OSError, ValueError, SyntaxError):
            mapped = FINDER_MAPPING.search(finder.read_text(errors="replace"))
            mapping = ast.literal_eval(mapped.group(1)) if mapped else {}
            if isinstance(mapping, dict) and isinstance(mapping.get(package), str):
                found.add(Path(mapping[package]).resolve())
    for link in [*site.glob("*.pth"), *site.glob("*.egg-link")]:
        with contextlib.suppress(OSError):
            lines = link.read_text(errors="replace").splitlines()
            for line in lines[:1] if link.suffix == ".egg-link" else lines:
                line = line.strip()
                if not line or line.startswith(("#", "import ", "import\t")):
                    continue
                root = (site / line).resolve()
                if (root / package).is_dir():
                    found.add((root / package).resolve())
    return found


def env_install_dir(plan: Plan) -> Path | None:
    """The folder of the env the editable install copied CMake's install into (site-packages/<install-dir>;
    None where the outputs are in the checkout, or before the first install)."""
    record = editable_record(plan.env.prefix, plan.checkout) if plan.env_install else None
    return record.parent.parent / plan.env_install[0] if record and plan.env_install else None


def env_files(plan: Plan, kept: Mapping[str, list[int]] | None = None) -> dict[str, list[int]]:
    """The files the editable install of the checkout put into the env (its RECORD), by path relative to
    the env and by size and mtime: a scikit-build-core configuration's compiled outputs live there, not
    in the checkout. Where RECORD (a row of its own) is as `kept` has it, its names are `kept`'s: 12,000 rows
    at PyTorch's size are not read again, each file is stat'ed."""
    record = editable_record(plan.env.prefix, plan.checkout)
    if record is None:
        return {}
    inside = os.path.join(str(plan.env.prefix), "")
    listed = str(record)[len(inside):]
    if kept and listed in kept and stat_of(str(record)) == kept[listed]:
        return stats_of(inside, kept)
    site = str(record.parent.parent)
    names = []
    for rel in record_paths(record):  # plain strings: 12,000 rows at PyTorch's size (a Path each: 0.4 s)
        path = os.path.normpath(os.path.join(site, rel))
        if rel and not rel.endswith(".pyc") and "__pycache__" not in rel and path.startswith(inside):
            names.append(path[len(inside):])
    return stats_of(inside, names)


def stats_of(inside: str, names: Iterable[str]) -> dict[str, list[int]]:
    """Size and mtime of each of `names` (relative to `inside`) that exists; a link's own."""
    out: dict[str, list[int]] = {}
    for name in names:
        st = stat_of(inside + name)
        if st is not None:
            out[name] = st
    return out


def stat_of(path: str) -> list[int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


SKBC_INSTALL = re.compile(r"(?m)^install\((\{.*?\}),")


def redirected_into(prefix: Path, checkout: Path) -> bool:
    """Whether scikit-build-core's redirect hooks in the env (`_editable_skbc_*.py`) serve the project's
    Python files from this checkout, by exact resolved path."""
    found, root = False, os.path.realpath(checkout)
    for hook in prefix.glob("lib/python*/site-packages/_editable_skbc_*.py"):
        with contextlib.suppress(OSError, ValueError, SyntaxError):
            called = SKBC_INSTALL.search(hook.read_text(errors="replace"))
            sources = ast.literal_eval(called.group(1)) if called else {}
            paths = resolved([v for v in sources.values() if isinstance(v, str)])
            if paths and all(p == root or p.startswith(os.path.join(root, "")) for p in paths):
                found = True
    return found


def resolved(paths: Iterable[str]) -> list[str]:
    """Each path's real path, each folder resolved once (2,000 modules at PyTorch's size in a few folders: a
    resolve each took 0.2 s); a path that is itself a link resolved whole."""
    folders: dict[str, str] = {}
    out = []
    for path in paths:
        folder, name = os.path.split(path)
        if folder not in folders:
            folders[folder] = os.path.realpath(folder)
        out.append(os.path.realpath(path) if os.path.islink(path) else os.path.join(folders[folder], name))
    return out
