"""Python interpreters: PATH, pyenv (even when its shims hide them), conda envs, uv, /usr/bin.

Each candidate is started once with a tiny probe (Python 2.7 included) that reports its
version, implementation, prefix, site-packages and whether venv and pip work; results are
cached per process. An interpreter that crashes is listed with the problem, never raised.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import TorchbuildError
from ..run import run

OWN_MINOR = f"{sys.version_info[0]}.{sys.version_info[1]}"  # torchbuild's own Python, the default

PROBE = r"""
import json, platform, sys
def has(name):
    try:
        import importlib.util
        return importlib.util.find_spec(name) is not None
    except ImportError:
        import imp
        try:
            imp.find_module(name)
            return True
        except ImportError:
            return False
try:
    import site
    sites = site.getsitepackages()
except Exception:
    sites = []
print(json.dumps({"version": "%d.%d.%d" % tuple(sys.version_info[:3]),
  "implementation": platform.python_implementation(), "executable": sys.executable, "prefix": sys.prefix,
  "base_prefix": getattr(sys, "base_prefix", sys.prefix),
  "venv": has("venv") and has("ensurepip"), "pip": has("pip"), "site": sites}))
"""

# The versions of installed distributions, from their metadata (importing setuptools takes ~0.5 s);
# before Python 3.8, from the name of the dist-info / egg-info folder.
VERSIONS = r"""
import glob, json, os, sys
def version(name):
    try:
        from importlib.metadata import version as meta
        return meta(name)
    except Exception:
        pass
    for folder in sys.path:
        for info in glob.glob(os.path.join(folder or ".", name + "-*.*-info")):
            return os.path.basename(info)[len(name) + 1:].rsplit(".", 1)[0].split("-")[0]
    return ""
print(json.dumps(dict((n, version(n)) for n in sys.argv[1:])))
"""


def installed_versions(python: Path, names: Sequence[str]) -> dict[str, str]:
    """{name: version, "" when not installed} in the env of `python`; not cached (envs change)."""
    out = run([str(python), "-c", VERSIONS, *names], capture=True, echo=False, check=False)
    try:
        data = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        data = {}
    return {n: str(data.get(n) or "") for n in names}


COMPILE_INSTALLED = ("import compileall, re, sysconfig; compileall.compile_dir(sysconfig.get_path('purelib'), "
                     "quiet=2, rx=re.compile('site-packages/.*/tests?/'))")


def compile_installed(python: Path) -> None:
    """Byte-compile what is installed in the env of `python` where Python writes no bytecode itself
    (PYTHONDONTWRITEBYTECODE, common in containers): else pip, each PEP 517 hook and CMake's FindPython probe
    compile pip and setuptools from source at every build, a second of CPU each time. Up-to-date files and the
    packages' test suites (no build imports them: a third of the time) are skipped; a file this Python cannot
    compile is left as pip would leave it."""
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        run([str(python), "-c", COMPILE_INSTALLED], echo=False, check=False)


@dataclass(frozen=True)
class Python:
    path: Path
    version: str
    implementation: str
    prefix: str
    venv: bool
    pip: bool
    found_by: str
    site: tuple[str, ...] = ()
    problem: str | None = None

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def key(self) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", self.version))


def candidates(env: Mapping[str, str], extra: Sequence[str] = ()) -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = [(Path(p).expanduser(), "config") for p in extra]
    home = Path(env.get("HOME", "~")).expanduser()
    for folder in env.get("PATH", "").split(os.pathsep):
        if not folder or "shims" in Path(folder).parts:
            continue
        d = Path(folder)
        if d.is_dir():
            out += [(p, "PATH") for p in sorted(d.glob("python*")) if re.fullmatch(r"python(\d(\.\d+)?)?", p.name)]
    pyenv = Path(env.get("PYENV_ROOT") or home / ".pyenv")
    for version in sorted((pyenv / "versions").glob("*")):
        exe = next((version / "bin" / n for n in ("python3", "python") if (version / "bin" / n).exists()), None)
        if exe:
            out.append((exe, "pyenv"))
    for base in ("miniconda3", "anaconda3", "miniforge3", "mambaforge", ".conda", "micromamba"):
        for prefix in [home / base, *sorted((home / base / "envs").glob("*"))]:
            if (prefix / "bin" / "python").exists():
                out.append((prefix / "bin" / "python", "conda"))
    uv_dir = Path(env.get("UV_PYTHON_INSTALL_DIR") or home / ".local" / "share" / "uv" / "python")
    out += [(p / "bin" / "python3", "uv") for p in sorted(uv_dir.glob("*")) if (p / "bin" / "python3").exists()]
    out += [(p, "system") for p in sorted(Path("/usr/bin").glob("python3.*")) if re.fullmatch(r"python3\.\d+", p.name)]
    return out


@functools.lru_cache(maxsize=None)
def probe(path: Path, found_by: str) -> Python:
    """Start `path` once and describe it (a crash becomes `problem`)."""
    try:
        res = run([str(path), "-c", PROBE], capture=True, echo=False, check=False)
    except TorchbuildError as exc:
        return Python(path, "?", "?", "", False, False, found_by, problem=exc.message)
    try:
        data = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        last = (res.stderr or res.stdout).strip().splitlines()
        why = last[-1] if last else f"exit {res.returncode}"
        return Python(path, "?", "?", "", False, False, found_by, problem=f"crashes on start: {why}")
    return Python(Path(data["executable"] or path), data["version"], data["implementation"], data["prefix"],
                  bool(data["venv"]), bool(data["pip"]), found_by, tuple(data["site"]))


def discover(env: Mapping[str, str], extra: Sequence[str] = ()) -> list[Python]:
    """Every distinct interpreter, newest first; broken ones last."""
    cands, seen = [], set()
    for path, found_by in candidates(env, extra):
        try:
            real = path.resolve()
        except OSError:
            continue
        if real not in seen:
            seen.add(real)
            cands.append((path, found_by))
    with ThreadPoolExecutor(max_workers=8) as pool:
        found = list(pool.map(lambda c: probe(*c), cands))
    unique: dict[Path, Python] = {}
    for py in found:
        key = py.path.resolve() if py.problem is None else py.path
        unique.setdefault(key, py)
    return sorted(unique.values(), key=lambda p: (p.problem is None, p.key), reverse=True)


def find(pythons: Sequence[Python], spec: str) -> Python:
    """`3.12` (newest 3.12.x), `3` (newest 3.x) or a path."""
    if "/" in spec:
        py = probe(Path(spec).expanduser(), "path")
        if py.problem:
            raise TorchbuildError(f"Python {spec} cannot be used: {py.problem}", "choose another with --python")
        return py
    match = [p for p in pythons if p.problem is None and (p.minor == spec or p.version == spec
                                                           or p.version.split(".")[0] == spec)]
    if match:
        return match[0]
    minors = {p.minor for p in pythons if p.problem is None}
    found = ", ".join(sorted(minors, key=lambda v: [int(x) for x in v.split(".")]))
    raise TorchbuildError(f"Python {spec} was not found (found: {found or 'none'})",
                          f"install it (pyenv install {spec} or uv python install {spec}), or pass --python PATH")
