"""PyTorch release compatibility: which Python, CUDA, GCC and CMake a checkout's version wants.

Data in compat.yaml (sources cited there). The checkout's version comes from version.txt; its
hard Python minimum from setup.py's python_min_version when present.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import TorchbuildError

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def vkey(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


@dataclass(frozen=True)
class Release:
    version: str  # "2.11"
    python: tuple[str | None, str | None]
    cuda: tuple[str, ...]
    gcc: str  # the minimum, major.minor: CMakeLists.txt compares both (9.3)
    cmake: str


@functools.lru_cache(maxsize=None)
def _data() -> dict[str, Any]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    data: dict[str, Any] = yaml.load((Path(__file__).parent / "compat.yaml").read_text(), Loader=loader)
    return data


def releases() -> list[Release]:
    rows = [Release(v, tuple(r["python"]), tuple(r["cuda"]), str(r["gcc"]), str(r["cmake"]))
            for v, r in _data()["releases"].items()]
    return sorted(rows, key=lambda r: vkey(r.version))


def release_for(torch_version: str) -> Release | None:
    """The row for `2.11.0a0` (2.11), or the newest row for a newer version; None if older than the table."""
    key = vkey(torch_version)[:2]
    rows = [r for r in releases() if vkey(r.version) <= key]
    return rows[-1] if rows else None


def checkout_version(checkout: Path) -> str | None:
    path = checkout / "version.txt"
    return path.read_text().strip() if path.is_file() else None


def pyproject(checkout: Path) -> dict[str, Any]:
    """The checkout's pyproject.toml as data ({} without one); not TOML is an error naming the file."""
    path = checkout / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(errors="replace"))
    except tomllib.TOMLDecodeError as e:
        raise TorchbuildError(f"{path} is not valid TOML ({e})",
                              "fix that file: the build reads its [build-system] and [project] tables") from None
    return data


def distribution_name(checkout: Path) -> str:
    """The project name of a PyTorch checkout's wheels and install: pyproject's [project] name (2.8 and on, where
    it wins over the variable), else setup.py's TORCH_PACKAGE_NAME default, else torch."""
    named = pyproject(checkout).get("project", {}).get("name")
    if isinstance(named, str) and named:
        return named
    setup = checkout / "setup.py"
    text = setup.read_text(errors="replace") if setup.is_file() else ""
    m = re.search(r"""TORCH_PACKAGE_NAME["']\s*,\s*["']([A-Za-z0-9_.-]+)["']""", text)
    return m.group(1) if m else "torch"


def python_minimum(checkout: Path) -> str | None:
    """setup.py's `python_min_version = (3, 10, 0)` as "3.10", else pyproject's `requires-python = ">=3.10"`
    (the scikit-build-core era and other projects)."""
    setup = checkout / "setup.py"
    m = re.search(r"python_min_version\s*=\s*\((\d+),\s*(\d+)", setup.read_text(errors="replace")) \
        if setup.is_file() else None
    if m:
        return f"{m.group(1)}.{m.group(2)}"
    requires = pyproject(checkout).get("project", {}).get("requires-python")
    m = re.search(r">=\s*(\d+)\.(\d+)", requires) if isinstance(requires, str) else None
    return f"{m.group(1)}.{m.group(2)}" if m else None


def tool_bounds(torch_version: str) -> dict[str, str]:
    """{package: specifier} the build env needs for this release line ({} before the table)."""
    table: dict[str, dict[str, str]] = _data()["tool_bounds"]
    usable = [v for v in table if vkey(v) <= vkey(torch_version)[:2]]
    return dict(table[max(usable, key=vkey)]) if usable else {}


def newest_release_for_python(python: str) -> str | None:
    """The newest release (its last patch tag, e.g. 1.10.2) whose table row includes this Python."""
    pv = vkey(python)[:2]
    rows = [r for r in releases() if r.python[0] and r.python[1]
            and vkey(r.python[0]) <= pv <= vkey(r.python[1])]
    if not rows:
        return None
    return str(_data()["last_patch"].get(rows[-1].version, f"{rows[-1].version}.0"))


def releases_for_cuda(cuda: str) -> list[str]:
    """The releases whose binaries were built for this CUDA version."""
    return [r.version for r in releases() if cuda in r.cuda]


def default_arch_list(cuda_version: str) -> str:
    """The release builders' arch list for the nearest CUDA at or below this one."""
    table = _data()["arch_lists"]
    usable = [v for v in table if vkey(v) <= vkey(cuda_version)[:2]]
    if not usable:
        return str(table[min(table, key=vkey)])
    return str(table[max(usable, key=vkey)])


def problems(torch_version: str, python: str | None, cuda: str | None, gcc: str | None,
             python_min: str | None = None) -> tuple[list[str], list[str]]:
    """(errors, overridable) for a PyTorch version with this Python/CUDA/GCC.

    errors: hard limits (setup.py's python minimum). overridable: outside the release table,
    an error unless --force.
    """
    hard: list[str] = []
    soft: list[str] = []
    if python and python_min and vkey(python)[:2] < vkey(python_min):
        hard.append(f"{f'PyTorch {torch_version}' if torch_version else 'the checkout'} needs Python >= "
                    f"{python_min}, not {python}")
    row = release_for(torch_version) if torch_version else None
    if row is None:
        return hard, soft
    low, high = row.python
    pv = vkey(python)[:2] if python else None
    if pv and ((low and pv < vkey(low)) or (high and pv > vkey(high))):
        soft.append(f"PyTorch {row.version} supports Python {low}–{high}, not {python}")
    if cuda and cuda not in row.cuda:
        soft.append(f"PyTorch {row.version} was released for CUDA {', '.join(row.cuda)}, not {cuda}")
    if gcc is not None and vkey(gcc)[:2] < vkey(row.gcc)[:2]:
        soft.append(f"PyTorch {row.version} needs GCC >= {row.gcc}, not {gcc}")
    return hard, soft


def check(torch_version: str, python: str | None, cuda: str | None, gcc: str | None,
          python_min: str | None = None, force: bool = False) -> list[str]:
    """Raise for an unsupported combination (unless force); return the warnings to show."""
    hard, soft = problems(torch_version, python, cuda, gcc, python_min)
    if hard:
        raise TorchbuildError(hard[0], "choose a newer Python with --python")
    if soft and not force:
        raise TorchbuildError(soft[0] + (f" (and {len(soft) - 1} more)" if len(soft) > 1 else ""),
                              "choose a supported combination, or pass --force to build anyway")
    return soft
