"""Linkers: which of mold, lld, gold and GNU ld (bfd) are here, which the C++ compiler accepts
(`-fuse-ld=NAME`, tried once on a tiny program and remembered), and the one a build uses.

A PyTorch edit-compile loop is one compile plus relinking libtorch_cpu.so (thousands of objects),
where GNU ld takes tens of seconds and mold a fraction of that. PyTorch documents
`CMAKE_LINKER_TYPE=MOLD` (CMake >= 3.29); older CMake gets `-fuse-ld=` in its linker flags.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from .. import console as _console
from ..errors import TorchbuildError
from ..run import run

FASTEST_FIRST = ("mold", "lld", "gold", "bfd")
AUTO = ("mold", "lld")  # auto takes these; gold is not faster enough to change the toolchain's default for
PROGRAM = {"mold": "mold", "lld": "ld.lld", "gold": "ld.gold", "bfd": "ld.bfd"}
PACKAGE = {"mold": "mold", "lld": "lld", "gold": "binutils", "bfd": "binutils"}
CMAKE_TYPE = {"mold": "MOLD", "lld": "LLD", "gold": "GOLD", "bfd": "BFD"}
LINKER_FLAGS = ("CMAKE_SHARED_LINKER_FLAGS", "CMAKE_MODULE_LINKER_FLAGS", "CMAKE_EXE_LINKER_FLAGS")


@dataclass(frozen=True)
class Linker:
    name: str  # mold, lld, gold or bfd
    path: Path
    version: str
    accepted: bool  # the C++ compiler links with it (-fuse-ld=NAME)
    problem: str = ""


def _ident(path: Path | str) -> list[object]:
    try:
        st = Path(path).stat()
        return [str(path), st.st_size, st.st_mtime_ns]
    except OSError:
        return [str(path), None, None]


class Remembered:
    """Answers about programs kept in a JSON file, each by the programs' size and mtime: a build does not
    ask them again (a linker tried on the compiler, cmake's version) until one of them changes."""

    def __init__(self, cache: Path | None, keep: bool = True) -> None:
        self.cache, self.keep = cache, keep  # keep: False where nothing may be written (--dry-run, --explain)
        self.known: dict[str, dict[str, object]] = {}
        self.changed = False
        if cache and cache.is_file():
            try:
                data = json.loads(cache.read_text(errors="replace"))
            except (OSError, ValueError):
                data = None
            if isinstance(data, dict):
                self.known = {k: v for k, v in data.items() if isinstance(v, dict)}
            if not isinstance(data, dict) or len(self.known) != len(data):  # another shape: asked again
                _console.get().info(f"{cache} holds answers torchbuild cannot read: they are dropped and "
                                    "measured again")
                self.changed = True

    def find(self, key: list[object]) -> dict[str, object] | None:
        return self.known.get(json.dumps(key))

    def get(self, key: list[object], compute: Callable[[], dict[str, object]],
            needs: tuple[str, ...] = ()) -> dict[str, object]:
        """The remembered answer, or `compute`'s (also when the kept one lacks a field in `needs`)."""
        text = json.dumps(key)
        if text not in self.known or any(field not in self.known[text] for field in needs):
            self.known[text] = compute()
            self.changed = True
        return self.known[text]

    def save(self) -> None:
        if self.cache and self.changed and self.keep:
            self.cache.parent.mkdir(parents=True, exist_ok=True)
            part = self.cache.with_name(f"{self.cache.name}.{os.getpid()}.part")
            part.write_text(json.dumps(self.known, indent=1))
            os.replace(part, self.cache)  # builds side by side: each file whole


def discover(cxx: str, env: Mapping[str, str], cache: Path | None = None, keep: bool = True) -> list[Linker]:
    """The linkers on PATH, fastest first, each with whether `cxx` accepts it (remembered in `cache`; `keep`:
    False where nothing may be written)."""
    remembered = Remembered(cache, keep)
    found = []
    compiler = shutil.which(cxx, path=env.get("PATH")) or cxx
    for name in FASTEST_FIRST:
        program = shutil.which(PROGRAM[name], path=env.get("PATH"))
        if not program:
            continue

        def probe(name: str = name, program: str = program) -> dict[str, object]:
            return {"version": version_of(program), **try_link(compiler, name, env)}

        entry = remembered.get([name, _ident(program), _ident(compiler), "lto"], probe, ("version", "accepted"))
        found.append(Linker(name, Path(program), str(entry["version"]), bool(entry["accepted"]),
                            str(entry.get("problem", ""))))
    remembered.save()
    return found


def version_of(program: str) -> str:
    out = run([program, "--version"], capture=True, echo=False, check=False).stdout
    m = re.search(r"(\d+\.\d+(?:\.\d+)?)", out.splitlines()[0] if out else "")
    return m.group(1) if m else "?"


def try_link(compiler: str, name: str, env: Mapping[str, str]) -> dict[str, object]:
    """Whether `compiler -fuse-ld=NAME` links a shared library (and why not), from a plain object and from
    an LTO one (`-flto`, as pybind11 and CMake's IPO compile Release builds): lld takes GCC's LTO objects
    without a word and links a library without their code (its symbols missing: an import that fails)."""
    with tempfile.TemporaryDirectory(prefix="tb-ld-") as tmp:
        src, lib = Path(tmp) / "t.cpp", Path(tmp) / "t.so"
        src.write_text("int torchbuild_probe() { return 0; }\n")
        res = run([compiler, f"-fuse-ld={name}", "-shared", "-fPIC", str(src), "-o", str(lib)],
                  capture=True, echo=False, check=False, base_env=dict(env))
        if res.returncode != 0:
            lines = (res.stderr or res.stdout).strip().splitlines()
            return {"accepted": False, "problem": lines[0][:200] if lines else f"exit {res.returncode}"}
        lib.unlink()
        lto = run([compiler, f"-fuse-ld={name}", "-shared", "-fPIC", "-flto", "-fno-fat-lto-objects", str(src),
                   "-o", str(lib)], capture=True, echo=False, check=False, base_env=dict(env))
        if lto.returncode == 0 and not any("torchbuild_probe" in symbol for symbol in defined_symbols(lib, env)):
            return {"accepted": False, "problem": f"it links {Path(compiler).name}'s LTO objects (-flto) into a "
                                                  "library without their code: their symbols are missing"}
    return {"accepted": True}


def defined_symbols(library: Path, env: Mapping[str, str]) -> set[str]:
    """The dynamic symbols a shared library defines, as binutils' nm lists them (empty where nm fails)."""
    res = run(["nm", "-D", "--defined-only", "--format=just-symbols", str(library)], capture=True, echo=False,
              check=False, base_env=dict(env))
    return set(res.stdout.split()) if res.returncode == 0 else set()


def choose(setting: str, linkers: list[Linker], measured: Mapping[str, float] | None = None) -> Linker | None:
    """The linker for `build.linker`: auto takes the fastest of mold and lld the compiler accepts, as this
    machine's linker trial measured them, else mold first (None: the toolchain's default); a named one
    must be here and accepted."""
    if setting == "auto":
        candidates = [ln for ln in linkers if ln.name in AUTO and ln.accepted]
        candidates.sort(key=lambda ln: (measured or {}).get(ln.name, float("inf")))
        return candidates[0] if candidates else None
    pick = next((ln for ln in linkers if ln.name == setting), None)
    if pick is None:
        raise TorchbuildError(f"build.linker is {setting}, and {PROGRAM[setting]} is not installed",
                              f"apt-get install {PACKAGE[setting]}, or set build.linker: auto")
    if not pick.accepted:
        raise TorchbuildError(f"the C++ compiler refuses -fuse-ld={setting}: {pick.problem}",
                              "use a newer compiler (GCC >= 12.1 knows mold), or set build.linker: auto")
    return pick


def build_changes(linker: Linker, cmake_version: str | None, base: Mapping[str, str]) -> dict[str, str]:
    """What a build gets to link with `linker`: CMAKE_LINKER_TYPE on CMake >= 3.29, else -fuse-ld in
    CMake's linker flags (setup.py passes CMAKE_* to CMake as -D); LDFLAGS for setuptools' build_ext."""
    flag = f"-fuse-ld={linker.name}"

    def plus(var: str) -> str:
        old = base.get(var, "")
        return old if flag in old.split() else f"{old} {flag}".strip()

    changes = {"LDFLAGS": plus("LDFLAGS")}
    if cmake_version and tuple(int(x) for x in re.findall(r"\d+", cmake_version)[:2]) >= (3, 29):
        changes["CMAKE_LINKER_TYPE"] = CMAKE_TYPE[linker.name]
    else:
        changes.update({var: plus(var) for var in LINKER_FLAGS})
    return changes


def cmake_version(prefix: Path, env: Mapping[str, str], cache: Path | None = None, keep: bool = True) -> str | None:
    """The version of the cmake a build in this env runs (the env's own first; remembered in `cache`)."""
    cmake = shutil.which("cmake", path=str(prefix / "bin") + os.pathsep + env.get("PATH", ""))
    if not cmake:
        return None

    def ask() -> dict[str, object]:
        out = run([cmake, "--version"], capture=True, echo=False, check=False).stdout
        m = re.search(r"version (\d+\.\d+(?:\.\d+)?)", out)
        return {"version": m.group(1) if m else None}

    remembered = Remembered(cache, keep)
    version = remembered.get(["cmake", _ident(cmake)], ask, ("version",))["version"]
    remembered.save()
    return str(version) if version else None


# ----------------------------------------------------------------------------- the linker trial
# mold is the fastest on many cores; on a few, lld can beat it (2 cores here: 0.3 s against 0.75 s for a
# 100 MB library with debug info). So auto asks the machine once: after a build whose longest link took
# TRIAL_FROM seconds or more, that link runs again with each linker auto could take that the compiler accepts
# (not the build's own: its time is the build's), and auto takes the fastest from the next build on
# (remembered with the linkers' and the compiler's identities).
TRIAL_FROM = 0.5
FUSE_LD = re.compile(r"\s-fuse-ld=\S+")
OUTPUT = re.compile(r"\s-o\s+(\S+)")


def _trial_key(linkers: list[Linker]) -> list[object]:
    return ["trial", *[[ln.name, _ident(ln.path)] for ln in linkers if ln.accepted]]


def measured(linkers: list[Linker], cache: Path | None) -> dict[str, float] | None:
    """The trial's seconds per linker on this machine (None: no trial yet)."""
    entry = Remembered(cache).find(_trial_key(linkers))
    return _seconds(entry) if entry else None


def _seconds(entry: Mapping[str, object]) -> dict[str, float]:
    seconds = entry.get("seconds")
    return {str(k): float(v) for k, v in seconds.items() if isinstance(v, (int, float))} \
        if isinstance(seconds, dict) else {}


def with_linker(command: str, name: str, output: str) -> str:
    """A compiler-driven link command line, linking with `name` into `output`."""
    bare = FUSE_LD.sub("", command)
    words = bare.split(" && ")
    step = next((i for i, w in enumerate(words) if OUTPUT.search(w)), 0)
    driver, _, rest = words[step].strip().partition(" ")
    words[step] = OUTPUT.sub(f" -o {output}", f"{driver} -fuse-ld={name} {rest}")
    return " && ".join(words)


def trial(command: str, cwd: Path, linkers: list[Linker], env: Mapping[str, str], cache: Path | None,
          library: str, known: Mapping[str, float] | None = None) -> dict[str, float]:
    """Run one link step of the build again with each linker auto could take that the compiler accepts (into
    a scratch file; the build's own linker at its time in the build, `known`), remember the seconds, and return
    them. A linker whose library defines other symbols than the build's own is left out: it gives another
    library, at whatever speed."""
    def time_each() -> dict[str, object]:
        seconds = {name: round(t, 3) for name, t in (known or {}).items()}
        built = defined_symbols(cwd / library, env) if (cwd / library).is_file() else set()
        for ln in (x for x in linkers if x.accepted and x.name in AUTO and x.name not in seconds):
            scratch = cwd / f".torchbuild-trial-{ln.name}-{os.getpid()}"
            line = with_linker(command, ln.name, str(scratch))
            try:
                start = time.monotonic()
                res = run(["sh", "-c", line], cwd=cwd, capture=True, echo=False, check=False, base_env=dict(env))
                took = time.monotonic() - start
                same = res.returncode == 0 and (not built or defined_symbols(scratch, env) == built)
            finally:
                scratch.unlink(missing_ok=True)
            if same:
                seconds[ln.name] = round(took, 3)
        return {"seconds": seconds, "library": library}

    remembered = Remembered(cache)
    entry = remembered.get(_trial_key(linkers), time_each, ("seconds",))
    remembered.save()
    return _seconds(entry)
