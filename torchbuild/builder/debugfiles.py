"""`--debug-files`: some units of a configuration compiled with `-O0 -g` by the tree's own ninja, no reconfigure.

PyTorch's tools/build_with_debinfo.py runs the units' compile commands by hand, with `-O2`/`-O3` made `-g`,
and links by hand: ninja's deps log then says those objects are out of date, and the next build compiles
them optimized again behind the user's back. CMake's `USE_CUSTOM_DEBINFO` configures again. Here the
units' own compile edges in the tree's build.ninja (CMake's Ninja generator writes each object's `FLAGS`
on its edge) get `-O0 -g` in place of the optimization level, everything else unchanged: ninja sees the
command changed for those objects alone, compiles them, relinks what holds them and keeps its logs true;
CMake's install (`--target install`, `cmake --install`) puts the libraries where the import finds them. The
tree's record keeps each edited line's original, so the next plain build puts it back (ninja compiles the
units optimized again, from the compiler cache where it has them) and a CMake configure, which writes
build.ninja anew, leaves nothing to undo. Deciding reads; `apply` writes, in the build's preparation.
"""

from __future__ import annotations

import difflib
import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ..errors import TorchbuildError
from ..run import run

COMPILE_EDGE = re.compile(r"^build (\S+): (?:C|CXX)_COMPILER__\S+ (\S+)")
OPTIMIZE = re.compile(r"(?<!\S)(?:-O[0-3sgz]?|-Ofast|-g0)(?!\S)")
DEBUG = "-O0 -g"


@dataclass(frozen=True)
class Unit:
    """One compile edge of a tree's build.ninja: its object, its source (relative to the checkout), its FLAGS."""

    ninja: str  # the build.ninja, relative to the checkout
    output: str  # as build.ninja names it
    source: str
    flags: str


@dataclass(frozen=True)
class Edit:
    """A FLAGS line of one edge rewritten: to `-O0 -g`, or back to what CMake wrote."""

    ninja: str
    output: str
    source: str
    before: str
    after: str


def units(checkout: Path, trees: Iterable[Path]) -> list[Unit]:
    """The C and C++ compile edges of the trees' build.ninja files (CMake's Ninja generator: `build <obj>:
    CXX_COMPILER__<target>_<config> <source>`, then `FLAGS = ...` among its variables)."""
    found = []
    for tree in trees:
        ninja = tree / "build.ninja"
        try:
            lines = ninja.read_text(errors="replace").splitlines()
        except OSError:
            continue
        name = ninja.relative_to(checkout).as_posix() if ninja.is_relative_to(checkout) else str(ninja)
        edge: tuple[str, str] | None = None
        for line in lines:
            start = COMPILE_EDGE.match(line)
            if start:
                edge = start.group(1), start.group(2)
            elif edge and line.startswith("  FLAGS = "):
                source = Path(edge[1])
                shown = source.relative_to(checkout).as_posix() if source.is_relative_to(checkout) else edge[1]
                found.append(Unit(name, edge[0], shown, line[len("  FLAGS = "):]))
            elif not line.startswith("  "):
                edge = None
    return found


SOURCES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".m", ".mm")


def patterns(given: Sequence[str], checkout: Path | None = None) -> list[str]:
    """`--debug-files`' patterns: globs separated by ';', `@FILE` (or an existing file that is no C/C++ source)
    for a file with one a line; a source is a path, never read as a file of patterns."""
    out: list[str] = []
    for value in given:
        listing = Path(value[1:] if value.startswith("@") else value).expanduser()
        if value.startswith("@") or (listing.is_file() and listing.suffix not in SOURCES):
            try:
                text = listing.read_text(errors="replace")
            except OSError as exc:
                raise TorchbuildError(f"--debug-files {value}: cannot read {listing}: {exc.strerror}",
                                      "name a file of patterns, one a line, that exists") from None
            found = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        else:
            found = [p.strip() for p in value.split(";") if p.strip()]
        out += [as_built(p, checkout) for p in found]
    return out


def as_built(pattern: str, checkout: Path | None) -> str:
    """A pattern as build.ninja names sources, relative to the checkout: a path that names a file from the current
    folder (a subfolder's, `..`, absolute) is resolved from there; a glob and anything else is the checkout's."""
    if checkout is None or any(c in pattern for c in "*?["):
        return pattern.removeprefix("./")
    full = os.path.normpath(os.path.join(os.getcwd(), os.path.expanduser(pattern)))
    if not os.path.isfile(full):
        return os.path.normpath(pattern)  # `../x` stays itself: a unit named so, or a refusal naming it
    for root in dict.fromkeys((os.path.normpath(str(checkout)), str(checkout.resolve()))):
        if full.startswith(root + os.sep):
            return full[len(root) + 1:]
    return full  # a source outside the checkout: build.ninja names it absolute


def chosen(all_units: Sequence[Unit], wanted: Sequence[str], limit: int) -> list[Unit]:
    """The units the patterns name; a refusal naming the closest sources where one names none, or how many
    where they name more than `limit`."""
    picked: dict[tuple[str, str], Unit] = {}
    sources = sorted({u.source for u in all_units})
    for pattern in wanted:
        hits = [u for u in all_units if fnmatch.fnmatchcase(u.source, pattern)]
        if not hits:
            close = difflib.get_close_matches(pattern, sources, n=3, cutoff=0.5) or \
                [s for s in sources if os.path.basename(s) == os.path.basename(pattern)][:3]
            raise TorchbuildError(f"--debug-files: no unit of this configuration's tree compiles '{pattern}'"
                                  + (f" (closest: {', '.join(close)})" if close else ""),
                                  "name C/C++ sources relative to the checkout, as build.ninja compiles them")
        picked.update({(u.ninja, u.output): u for u in hits})
    if len(picked) > limit:
        raise TorchbuildError(f"--debug-files names {len(picked)} units, over build.debug_files_max ({limit})",
                              "name fewer files, raise build.debug_files_max, or build the configuration with --debug")
    return sorted(picked.values(), key=lambda u: u.source)


def debug_flags(flags: str) -> str:
    """The flags with the optimization level (and -g0) gone and `-O0 -g` at the end: the last -O wins."""
    kept = " ".join(OPTIMIZE.sub(" ", flags).split())
    return f"{kept} {DEBUG}".strip()


def edits(all_units: Sequence[Unit], wanted: Sequence[Unit], recorded: Mapping[str, Sequence[str]]) -> list[Edit]:
    """What to rewrite for the tree to hold `wanted` with debug info and every other unit as CMake wrote it:
    `recorded` (the record's: "ninja\\toutput" -> [source, CMake's flags, the debug flags]) says which
    lines an earlier --debug-files rewrote; a line CMake has written anew since is left as it is."""
    want = {(u.ninja, u.output) for u in wanted}
    out = []
    for u in all_units:
        was = recorded.get(f"{u.ninja}\t{u.output}")
        if (u.ninja, u.output) in want:
            original = was[1] if was and u.flags == was[2] else u.flags
            if u.flags != debug_flags(original):
                out.append(Edit(u.ninja, u.output, u.source, u.flags, debug_flags(original)))
        elif was and u.flags == was[2]:
            out.append(Edit(u.ninja, u.output, u.source, u.flags, was[1]))
    return out


def active(all_units: Sequence[Unit], wanted: Sequence[Unit], recorded: Mapping[str, Sequence[str]]
           ) -> dict[str, list[str]]:
    """The record's entry after the build: each wanted unit's source, CMake's flags and the debug flags."""
    out = {}
    for u in wanted:
        was = recorded.get(f"{u.ninja}\t{u.output}")
        original = was[1] if was and u.flags == was[2] else u.flags
        out[f"{u.ninja}\t{u.output}"] = [u.source, original, debug_flags(original)]
    return out


def apply(checkout: Path, changes: Sequence[Edit]) -> None:
    """Rewrite the edges' FLAGS lines (`ninja`: relative to the checkout), each build.ninja whole or not at all
    (a temporary file, then a rename; its time kept: no check that compares build.ninja's time with CMake's
    inputs reads the edit as a configure)."""
    for name, text in rewritten(checkout, changes).items():
        ninja = checkout / name
        tmp = ninja.with_name(f".{ninja.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.utime(tmp, ns=(ninja.stat().st_atime_ns, ninja.stat().st_mtime_ns))
        tmp.replace(ninja)


def rewritten(checkout: Path, changes: Sequence[Edit]) -> dict[str, str]:
    """Each build.ninja the edits touch (relative to the checkout), as it reads with them made."""
    by_file: dict[str, dict[str, Edit]] = {}
    for e in changes:
        by_file.setdefault(e.ninja, {})[e.output] = e
    out = {}
    for name, mine in by_file.items():
        lines = (checkout / name).read_text(errors="replace").splitlines(keepends=True)
        edge = None
        for i, line in enumerate(lines):
            start = COMPILE_EDGE.match(line)
            if start:
                edge = mine.get(start.group(1))
            elif edge and line.startswith("  FLAGS = ") and line.rstrip("\n")[len("  FLAGS = "):] == edge.before:
                lines[i] = f"  FLAGS = {edge.after}\n"
                edge = None
            elif not line.startswith("  "):
                edge = None
        out[name] = "".join(lines)
    return out


def breakpoints(checkout: Path, units: Mapping[str, Sequence[str]], limit: int = 3) -> list[str]:
    """gdb's `break FILE:LINE` for the first line the debug info of each unit's object maps its source to
    (readelf's decoded line table), a few units at most; none where readelf or the object says nothing."""
    out = []
    for key, (source, _, _) in sorted(units.items(), key=lambda kv: kv[1][0])[:limit]:
        ninja, _, output = key.partition("\t")
        obj = (checkout / ninja).parent / output
        done = run(["readelf", "--debug-dump=decodedline", str(obj)], capture=True, echo=False, check=False) \
            if obj.is_file() else None
        name = os.path.basename(source)
        lines = [int(f[1]) for f in (ln.split() for ln in done.stdout.splitlines()) if done and len(f) > 2
                 and f[0] == name and f[1].isdigit()] if done and done.returncode == 0 else []
        if lines:
            out.append(f"break {source}:{min(lines)}")
    return out


def gdb_command(python: Path, package: str, checkout: Path, units: Mapping[str, Sequence[str]]) -> str:
    """The gdb command that stops in the units with debug info once the import loads them."""
    stops = "".join(f" -ex '{b}'" for b in breakpoints(checkout, units))
    return f"gdb -ex 'set breakpoint pending on'{stops} -ex run --args {python} -c 'import {package}'"
