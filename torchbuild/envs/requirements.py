"""What a build env gets: the checkout's build requirements, per-Python pins, the release line's
tool bounds, the mirrors' pip.conf / .condarc, and the stamp that says an env is up to date."""

from __future__ import annotations

import json
import platform
import re
from pathlib import Path
from typing import Sequence

from .. import compat
from .. import console as _console
from ..config import Config
from ..digest import digest
from ..errors import TorchbuildError
from ..run import run

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
    return stamp_of(backend, version, requirements(checkout, version, mkl=cfg.build.mkl), cfg,
                    conda + backend_settings(checkout))


def backend_settings(checkout: Path | None) -> list[str]:
    """What a build backend's added requirements depend on (its `[tool]` settings and the dynamic metadata:
    scikit-build-core asks for setuptools-scm where its version provider is setuptools_scm), so that an env
    is asked again when they change; nothing for setuptools, which is not asked (`backend_requires`)."""
    table = compat.pyproject(checkout) if checkout else {}
    backend = str(table.get("build-system", {}).get("build-backend") or "")
    if not backend or backend.startswith("setuptools.") or not (table.get("tool") or table.get("project")):
        return []
    return [f"backend-settings:{digest([table.get('tool'), table.get('project', {}).get('dynamic')], 12)}"]


def conda_packages(backend: str, cuda: str | None, mkl: bool = True) -> list[str]:
    """What a conda-like backend provides better than pip: MKL (unless build.mkl is off), and magma for the
    CUDA in use; nothing for the others."""
    if backend not in ("conda", "mamba", "micromamba"):
        return []
    pkgs = ["mkl", "mkl-include"] if mkl else []
    if cuda and cuda not in ("none", "cpu", "auto"):
        pkgs.append(f"magma-cuda{cuda.replace('.', '')}")
    return pkgs




# What pip asks a PEP 517 backend before it builds in an isolated env, and a no-isolation build never does: the
# requirements the backend adds (scikit-build-core: setuptools-scm for its version provider), less those the env
# has. argv: the backend ("module:object"), then its backend-path entries.
BACKEND_REQUIRES = """import functools, importlib, json, os, sys
sys.path[:0] = [os.path.abspath(p) for p in sys.argv[2:]]
name, _, attrs = sys.argv[1].partition(":")
backend = functools.reduce(getattr, filter(None, attrs.split(".")), importlib.import_module(name))
try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement
from importlib.metadata import PackageNotFoundError, version
wanted = set()
for hook in ("get_requires_for_build_editable", "get_requires_for_build_wheel"):
    if hasattr(backend, hook):
        wanted.update(getattr(backend, hook)(None))
def met(text):
    req = Requirement(text)
    if req.marker is not None and not req.marker.evaluate():
        return True
    try:
        return req.specifier.contains(version(req.name), prereleases=True)
    except PackageNotFoundError:
        return False
print(json.dumps(sorted(r for r in wanted if not met(r))))"""


def backend_requires(python: Path, checkout: Path | None) -> tuple[list[str], str | None]:
    """The requirements the checkout's build backend asks for beyond `build-system.requires` that the env at
    `python` lacks (setuptools' own hooks are not asked: they run setup.py, and add nothing a build needs);
    and why none could be learnt, if the backend failed to answer."""
    table = compat.pyproject(checkout).get("build-system", {}) if checkout else {}
    backend = str(table.get("build-backend") or "")
    if not backend or backend.startswith("setuptools."):
        return [], None
    done = run([str(python), "-c", BACKEND_REQUIRES, backend, *(table.get("backend-path") or [])], cwd=checkout,
               capture=True, echo=False, check=False)
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        said = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        return [], f"{backend} did not say what else it needs to build ({said})"
    return [str(r) for r in found], None


def add_backend_requires(python: Path, checkout: Path | None, pip_conf: Path) -> list[str]:
    """Install what the build backend asks for beyond its declared requirements (pip asks it before an isolated
    build; a no-isolation build never does, so `No module named 'setuptools_scm'`); what was installed."""
    extra, why = backend_requires(python, checkout)
    if why:
        _console.get().warn(f"{why}: the env has its declared build requirements only")
    if extra:
        done = run([str(python), "-m", "pip", "--disable-pip-version-check", "install", "-q", "--no-compile", *extra],
                   env={"PIP_CONFIG_FILE": str(pip_conf)}, check=False, capture=True, echo=False)
        if done.returncode:
            raise TorchbuildError(f"cannot install {', '.join(extra)}, which the build backend asks for",
                                  "check the package index (mirrors.pip_index_url), then run the command again")
        _console.get().info(f"the build backend asks for {', '.join(extra)} too: installed")
    return extra
