"""What a build env gets: the checkout's build requirements, per-Python pins, the release line's
tool bounds, the mirrors' pip.conf / .condarc, and the stamp that says an env is up to date."""

from __future__ import annotations

import platform
import re
from pathlib import Path
from typing import Sequence

from .. import compat
from ..config import Config
from ..digest import digest

# Without requirement files: PyTorch's build deps (packaging: tools/generate_torch_version.py imports it).
KNOWN = ["setuptools", "wheel", "ninja", "cmake", "numpy", "pyyaml", "cffi", "typing_extensions", "packaging"]

# Per-Python pins: the last releases that install and work there (pip's own too).
PINS: dict[str, dict[str, str]] = {
    "3.6": {"pip": "pip<22", "setuptools": "setuptools<59.7", "numpy": "numpy==1.19.5", "cmake": "cmake<3.28",
            "ninja": "ninja<1.11.1.2", "wheel": "wheel<0.38", "pyyaml": "pyyaml<6.1", "cffi": "cffi<1.16",
            "typing_extensions": "typing_extensions<4.2", "packaging": "packaging<22"},
    "3.7": {"pip": "pip<24.1", "setuptools": "setuptools<68.1", "numpy": "numpy<1.22", "wheel": "wheel<0.43",
            "typing_extensions": "typing_extensions<4.8"},
    "3.8": {"pip": "pip<25.1", "setuptools": "setuptools<75.4", "numpy": "numpy<1.25"},
    "3.9": {"numpy": "numpy<2.1"},
}



def _name(req: str) -> str:
    m = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    return m.group(1).lower().replace("-", "_").replace(".", "_") if m else req.lower()


def checkout_requirements(checkout: Path | None) -> list[str]:
    """requirements-build.txt, else pyproject's build-system requires, else (a PyTorch checkout)
    requirements.txt; [] if none. Another project's requirements.txt lists its users' needs, not its build's."""
    if checkout is None:
        return []
    files = ["requirements-build.txt"] + (["requirements.txt"] if (checkout / "torch").is_dir() else [])
    for name in files[:1]:
        if (checkout / name).is_file():
            return _requirement_lines(checkout / name)
    declared = compat.pyproject(checkout).get("build-system", {}).get("requires")
    if declared:
        return [str(r) for r in declared]
    for name in files[1:]:
        if (checkout / name).is_file():
            return _requirement_lines(checkout / name)
    return []


def _requirement_lines(path: Path) -> list[str]:
    lines = [ln.split("#", 1)[0].strip() for ln in path.read_text().splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("-")]


def requirements(checkout: Path | None, version: str, machine: str | None = None, mkl: bool = True) -> list[str]:
    """The build deps for this checkout on this Python, with per-Python pins applied (`mkl`: build.mkl)."""
    minor = ".".join(version.split(".")[:2])
    reqs = checkout_requirements(checkout) or list(KNOWN)
    names = {_name(r) for r in reqs}
    if minor == "3.6" and "dataclasses" not in names:
        reqs.append("dataclasses")
    if mkl and checkout is not None and (checkout / "torch").is_dir() and (machine or platform.machine()) == "x86_64":
        reqs += [r for r in ("mkl-static", "mkl-include") if _name(r) not in names]
    pins = PINS.get(minor, {})
    version_txt = compat.checkout_version(checkout) if checkout is not None else None
    bounds = {_name(k): v for k, v in compat.tool_bounds(version_txt).items()} if version_txt else {}
    out = []
    for req in reqs:
        bare = re.fullmatch(r"\s*[A-Za-z0-9][A-Za-z0-9._-]*\s*", req) is not None
        pinned = pins.get(_name(req), req) if bare else req
        bound = bounds.get(_name(req))
        if bound:
            pinned += ("," if re.search(r"[<>=!~]", pinned) else "") + bound
        out.append(pinned)
    return sorted(dict.fromkeys(out), key=str.lower)


def pip_bootstrap(version: str) -> str | None:
    return PINS.get(".".join(version.split(".")[:2]), {}).get("pip")


def pip_conf(cfg: Config) -> str:
    lines = ["[global]"]
    if cfg.mirrors.pip_index_url:
        lines.append(f"index-url = {cfg.mirrors.pip_index_url}")
    if cfg.mirrors.pip_extra_index_urls:
        lines.append("extra-index-url = " + " ".join(cfg.mirrors.pip_extra_index_urls))
    if cfg.mirrors.pip_trusted_hosts:
        lines.append("trusted-host = " + " ".join(cfg.mirrors.pip_trusted_hosts))
    return "\n".join(lines) + "\n"


def condarc(cfg: Config) -> str:
    lines = ["channels:"] + [f"  - {c}" for c in cfg.mirrors.conda_channels or ["conda-forge"]]
    if cfg.mirrors.conda_channel_priority:
        lines.append(f"channel_priority: {cfg.mirrors.conda_channel_priority}")
    return "\n".join(lines) + "\n"


def stamp_of(backend: str, version: str, reqs: Sequence[str], cfg: Config, extra: Sequence[str] = ()) -> str:
    return digest([backend, version, sorted(reqs), pip_conf(cfg), condarc(cfg), list(extra)], 16)


def expected_stamp(cfg: Config, backend: str, version: str, checkout: Path | None, cuda: str | None) -> str:
    """The stamp an env of this backend and Python must carry to be up to date for this checkout."""
    conda = conda_packages(backend, cuda, cfg.build.mkl)
    return stamp_of(backend, version, requirements(checkout, version, mkl=cfg.build.mkl), cfg, conda)


def conda_packages(backend: str, cuda: str | None, mkl: bool = True) -> list[str]:
    """What a conda-like backend provides better than pip: MKL (unless build.mkl is off), and magma for the
    CUDA in use; nothing for the others."""
    if backend not in ("conda", "mamba", "micromamba"):
        return []
    pkgs = ["mkl", "mkl-include"] if mkl else []
    if cuda and cuda not in ("none", "cpu", "auto"):
        pkgs.append(f"magma-cuda{cuda.replace('.', '')}")
    return pkgs


