"""CUDA toolkits: discovery, selection, and the environment that selects one (no sudo, no relinking).

Where toolkits are looked for, in order: extra roots from the config (toolchain.cuda_roots),
CUDA_HOME / CUDA_PATH, nvcc on PATH, /usr/local/cuda-* (/usr/local/cuda is reported as an
alias of the toolkit it points to), /opt/cuda*, conda environments, NVIDIA's PyPI nvcc wheels
in site-packages, and toolkits installed by `inv cuda.install` under the cache dir. The
version comes from version.json / version.txt or `nvcc --version`, never from a folder name.
"""

from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ..config import Config
from ..errors import TorchbuildError
from ..run import run


@dataclass(frozen=True)
class Toolkit:
    root: Path
    version: str  # major.minor, e.g. "13.0"
    full_version: str  # e.g. "13.0.88"
    nvcc: Path | None
    include: Path
    lib: Path
    cudart: bool
    cudnn: str | None
    found_by: str
    aliases: tuple[Path, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[int, ...]:
        return version_key(self.full_version)

    @property
    def usable(self) -> bool:
        return not self.problems


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


# ----------------------------------------------------------------------------- parsers


def parse_version_json(text: str) -> str | None:
    """`{"cuda": {"version": "12.4.1"}}` -> "12.4.1"."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    version = data.get("cuda", {}).get("version") if isinstance(data, dict) else None
    return version if isinstance(version, str) and re.match(r"^\d+\.\d+", version) else None


def parse_version_txt(text: str) -> str | None:
    """`CUDA Version 10.0.130` -> "10.0.130"."""
    m = re.search(r"CUDA Version\s+(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else None


def parse_nvcc_version(text: str) -> str | None:
    """nvcc --version's `release 13.0, V13.0.88` -> "13.0.88"."""
    m = re.search(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)", text)
    if m:
        return m.group(2)
    m = re.search(r"release (\d+\.\d+)", text)
    return m.group(1) if m else None


def parse_cudnn_version(header: str) -> str | None:
    parts = [re.search(rf"#define CUDNN_{n}\s+(\d+)", header) for n in ("MAJOR", "MINOR", "PATCHLEVEL")]
    return ".".join(p.group(1) for p in parts if p) if parts[0] else None


def major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


# ----------------------------------------------------------------------------- discovery


SYSTEM_DIRS = (Path("/usr/local"), Path("/opt"))


def candidate_roots(env: Mapping[str, str], extra: Sequence[str] = (), cache_root: Path | None = None,
                    site_dirs: Sequence[Path] = (),
                    system_dirs: Sequence[Path] = SYSTEM_DIRS) -> list[tuple[Path, str]]:
    """Folders that may hold a toolkit, each with how it was found, in precedence order."""
    out: list[tuple[Path, str]] = [(Path(p).expanduser(), "config") for p in extra]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var):
            out.append((Path(env[var]), var))
    for folder in env.get("PATH", "").split(os.pathsep):
        nvcc = Path(folder or ".") / "nvcc"
        if nvcc.is_file():
            out.append((_root_of_nvcc(nvcc), "nvcc on PATH"))
    for system in system_dirs:
        out += [(p, str(system)) for p in sorted(system.glob("cuda*"))]
    for prefix in _conda_prefixes(env):
        if (prefix / "bin" / "nvcc").exists():
            out.append((prefix, "conda env"))
    for site in site_dirs:
        out += [(p, "PyPI wheels") for p in sorted((site / "nvidia").glob("cu[0-9]*")) if (p / "bin" / "nvcc").exists()]
        if (site / "nvidia" / "cuda_nvcc" / "bin" / "nvcc").exists():
            out.append((site / "nvidia" / "cuda_nvcc", "PyPI wheels"))
    if cache_root is not None:
        out += [(p, "inv cuda.install") for p in sorted((cache_root / "cuda").glob("cuda-*"))]
    return out


def _root_of_nvcc(nvcc: Path) -> Path:
    """The toolkit root of an nvcc, following a wrapper script like `exec /usr/local/cuda-X/bin/nvcc`."""
    try:
        head = nvcc.read_bytes()[:512]
    except OSError:
        return nvcc.parent.parent
    if head.startswith(b"#!"):
        m = re.search(rb"exec\s+\"?(/\S+?/bin/nvcc)\b", head)
        if m:
            return Path(m.group(1).decode()).parent.parent
    return nvcc.resolve().parent.parent


def _conda_prefixes(env: Mapping[str, str]) -> list[Path]:
    prefixes = [Path(env["CONDA_PREFIX"])] if env.get("CONDA_PREFIX") else []
    home = Path(env.get("HOME", "~")).expanduser()
    for base in ("miniconda3", "anaconda3", "miniforge3", "mambaforge", ".conda", "micromamba"):
        prefixes += sorted((home / base / "envs").glob("*"))
    return prefixes


@functools.lru_cache(maxsize=None)
def probe(root: Path, found_by: str) -> Toolkit | None:
    """Describe the toolkit at `root` (None when nothing there looks like one)."""
    if not root.is_dir():
        return None
    nvcc = root / "bin" / "nvcc"
    include = _first_dir(root / "include", root / "targets" / "x86_64-linux" / "include")
    lib = _first_dir(root / "lib64", root / "lib", root / "targets" / "x86_64-linux" / "lib")
    if not nvcc.exists() and include is None:
        return None
    problems = []
    version = None
    for name, parse in (("version.json", parse_version_json), ("version.txt", parse_version_txt)):
        if (root / name).is_file():
            version = parse((root / name).read_text(errors="replace"))
            if version:
                break
    if not nvcc.exists():
        problems.append(f"{nvcc} is missing")
    elif not os.access(nvcc, os.X_OK):
        problems.append(f"{nvcc} is not executable")
    elif version is None:
        version, failure = nvcc_version(nvcc)
        if version is None:
            problems.append(f"{nvcc} --version failed: {failure}")
    if version is None:
        version = "?"
    include = include or root / "include"
    lib = lib or root / "lib64"
    cudart = any(lib.glob("libcudart.so*")) or any(lib.glob("libcudart_static.a"))
    cudnn = None
    for header in (include / "cudnn_version.h", include / "cudnn.h"):
        if header.is_file():
            cudnn = parse_cudnn_version(header.read_text(errors="replace"))
            if cudnn:
                break
    return Toolkit(root, major_minor(version), version, nvcc if nvcc.exists() else None, include, lib, cudart,
                   cudnn, found_by, problems=tuple(problems))


VERSION_CACHE: Path | None = None  # set by discover(): nvcc versions by (path, size, mtime)


def nvcc_version(nvcc: Path) -> tuple[str | None, str]:
    """`nvcc --version`, remembered on disk while the binary is unchanged (it costs ~15 ms)."""
    st = nvcc.stat()
    key = f"{nvcc}:{st.st_size}:{st.st_mtime_ns}"
    cache: dict[str, str] = {}
    if VERSION_CACHE is not None:
        try:
            cache = json.loads(VERSION_CACHE.read_text())
        except (OSError, ValueError):
            cache = {}
        if isinstance(cache, dict) and key in cache:
            return cache[key], ""
    res = run([str(nvcc), "--version"], capture=True, echo=False, check=False)
    version = parse_nvcc_version(res.stdout) if res.returncode == 0 else None
    if version is None:
        last = res.tail.strip().splitlines()
        return None, last[-1] if last else "?"
    if VERSION_CACHE is not None:
        try:
            VERSION_CACHE.parent.mkdir(parents=True, exist_ok=True)
            tmp = VERSION_CACHE.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({**cache, key: version}))
            tmp.replace(VERSION_CACHE)
        except OSError:
            pass
    return version, ""


def _first_dir(*paths: Path) -> Path | None:
    return next((p for p in paths if p.is_dir()), None)


def discover(env: Mapping[str, str], extra: Sequence[str] = (), cache_root: Path | None = None,
             site_dirs: Sequence[Path] = (), system_dirs: Sequence[Path] = SYSTEM_DIRS) -> list[Toolkit]:
    """Every toolkit on the machine, one per real folder (links become aliases), newest first."""
    global VERSION_CACHE
    if cache_root is not None:
        VERSION_CACHE = cache_root / "nvcc-versions.json"
    by_real: dict[Path, Toolkit] = {}
    aliases: dict[Path, list[Path]] = {}
    for root, found_by in candidate_roots(env, extra, cache_root, site_dirs, system_dirs):
        try:
            real = root.resolve()
        except OSError:
            continue
        if real in by_real:
            if root != real and root not in aliases.setdefault(real, []):
                aliases[real].append(root)
            continue
        tk = probe(real, found_by)
        if tk is None:
            continue
        by_real[real] = tk
        if root != real:
            aliases.setdefault(real, []).append(root)
    toolkits = [_with_aliases(tk, aliases.get(real, [])) for real, tk in by_real.items()]
    return sorted(toolkits, key=lambda t: t.key, reverse=True)


def site_dirs(cfg: Config, env: Mapping[str, str]) -> list[Path]:
    """site-packages that may hold NVIDIA's nvcc wheels: pyenv versions, managed envs, the active env."""
    home = Path(env.get("HOME", "~")).expanduser()
    pyenv = Path(env.get("PYENV_ROOT") or home / ".pyenv")
    dirs = list(pyenv.glob("versions/*/lib/python*/site-packages"))
    dirs += list((cfg.root / cfg.paths.envs).glob("*/lib/python*/site-packages"))
    if env.get("VIRTUAL_ENV"):
        dirs += list(Path(env["VIRTUAL_ENV"]).glob("lib/python*/site-packages"))
    return dirs


def for_config(cfg: Config, env: Mapping[str, str]) -> list[Toolkit]:
    """`discover` with the places `cfg` adds: toolchain.cuda_roots, the cache dir, envs' site-packages."""
    return discover(env, cfg.toolchain.cuda_roots, cfg.cache_root, site_dirs(cfg, env))


def _with_aliases(tk: Toolkit, links: Iterable[Path]) -> Toolkit:
    from dataclasses import replace

    return replace(tk, aliases=tuple(links)) if links else tk


# ----------------------------------------------------------------------------- selection


def select(toolkits: Sequence[Toolkit], spec: str) -> Toolkit | None:
    """`13.0` exact minor, `13` newest 13.x, `auto` newest, `none`/`cpu` no toolkit."""
    spec = spec.strip().lower()
    if spec in ("none", "cpu"):
        return None
    if not re.match(r"^(auto|\d+(\.\d+)?)$", spec):
        raise TorchbuildError(f"bad CUDA version '{spec}'", "use a version like 13.0 or 13, auto, or none/cpu")
    usable = [t for t in toolkits if t.usable]
    if spec == "auto":
        return usable[0] if usable else None
    match = [t for t in usable if t.version == spec or t.version.split(".")[0] == spec]
    if match:
        return match[0]
    broken = [t for t in toolkits if not t.usable and (t.version == spec or t.version.split(".")[0] == spec)]
    if broken:
        raise TorchbuildError(f"CUDA {spec} at {broken[0].root} is broken: {'; '.join(broken[0].problems)}",
                              "reinstall that toolkit, or choose another with --cuda")
    found = ", ".join(f"{t.version} ({t.root})" for t in usable) or "none"
    raise TorchbuildError(f"CUDA {spec} is not installed (found: {found})", how_to_get(spec))


def how_to_get(version: str) -> str:
    if version_key(version)[:1] == (13,):  # NVIDIA ships nvcc on PyPI for the 13.x line
        return f"`inv cuda.install {version}` assembles it from NVIDIA's PyPI wheels into the cache dir"
    if version_key(version)[:1] > (13,):
        return (f"no CUDA {version} is known to torchbuild (the newest line is 13.x): check the version, "
                "or install that toolkit and add its folder to toolchain.cuda_roots")
    return (f"PyPI has no nvcc for CUDA {version} (its wheels ship ptxas only): install NVIDIA's runfile "
            f"(sh cuda_{version}*_linux.run --toolkit --silent --installpath=$HOME/cuda-{version}) or "
            f"`conda install -c nvidia cuda-toolkit={version}`, then add the folder to toolchain.cuda_roots")


def toolkit_env(tk: Toolkit | None, base: Mapping[str, str]) -> dict[str, str | None]:
    """Environment changes that select `tk` for one command (None: a CPU build)."""
    if tk is None:
        return {"USE_CUDA": "0"}
    bin_dir = str(tk.root / "bin")
    path = base.get("PATH", "")
    ld = base.get("LD_LIBRARY_PATH", "")
    return {
        "CUDA_HOME": str(tk.root),
        "CUDA_PATH": str(tk.root),
        "CUDACXX": str(tk.nvcc or tk.root / "bin" / "nvcc"),
        "PATH": bin_dir + (os.pathsep + path if path else ""),
        "LD_LIBRARY_PATH": str(tk.lib) + (os.pathsep + ld if ld else ""),
        "USE_CUDA": "1",
    }
