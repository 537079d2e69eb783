"""Managed build environments (`inv env.*`): venv, uv, conda/mamba/micromamba, with build deps.

An env lives under the project's env dir (`.envs/<name>`). It is trusted only when its stamp
file (`torchbuild-env.json`, written last) matches the requirement set it was made for; an env
without a stamp is the remains of a failed creation and is made again. Mirrors are written into
the env's own pip.conf / .condarc, never into the user's files.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Mapping, Sequence

from .. import console as _console
from ..config import Config
from ..errors import CommandError, TorchbuildError
from ..locks import locked
from ..run import run
from ..toolchain import search_path, system
from ..toolchain.python import Python, compile_installed
from . import shared
from .requirements import (
    KNOWN,
    PINS,
    add_backend_requires,
    checkout_requirements,
    conda_packages,
    condarc,
    expected_stamp,
    pip_bootstrap,
    pip_conf,
    requirements,
    stamp_of,
)

__all__ = ["KNOWN", "PINS", "checkout_requirements", "condarc", "expected_stamp", "pip_bootstrap", "pip_conf",
           "requirements"]

STAMP = "torchbuild-env.json"
BACKENDS = ("venv", "uv", "conda", "mamba", "micromamba")
# pip installs into a build env byte-compile nothing (half of env creation's CPU; Python compiles what a build
# imports, once; compile_installed where Python writes no bytecode), as uv's.
PIP_INSTALL = ("install", "-q", "--no-compile")


@dataclass(frozen=True)
class Env:
    """A managed environment on disk."""

    name: str
    prefix: Path
    backend: str
    python: Path  # the env's interpreter
    version: str  # its Python version
    stamp: str  # hash of what it was made with
    setuptools: str = ""  # its version ("" when missing)

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


@dataclass(frozen=True)
class EnvChoice:
    """The Python environment a build runs in, and why that one."""

    prefix: Path
    python: Path
    version: str
    reason: str
    name: str | None = None  # managed env name (None: the user's own env)
    exists: bool = True
    backend: str = "venv"
    setuptools: str = ""
    creator: object | None = None  # the toolchain Python that creates a missing managed env

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


def envs_dir(cfg: Config) -> Path:
    return (cfg.root / cfg.paths.envs).resolve()


def check_name(name: str) -> str:
    """An env name is a plain folder name inside the envs dir: no '/', no '..'."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", name) or ".." in name:
        raise TorchbuildError(f"env name '{name}' is not a plain name (letters, digits, '.', '_', '+', '-'; "
                              "no '/' or '..')", "pass a name like py3.12 (`inv env.list` shows them)")
    return name


def named(cfg: Config, name: str) -> Path:
    """The prefix of the managed env `name`; an error naming the known envs when there is none."""
    prefix = envs_dir(cfg) / check_name(name)
    if read(prefix) is None and not prefix.exists():
        known = ", ".join(p.name for p, _ in list_envs(cfg)) or "none"
        raise TorchbuildError(f"there is no managed env '{name}' (envs: {known})",
                              f"make it with `inv env.create --name {name} --python 3.X`")
    return prefix


def default_name(version: str, backend: str) -> str:
    minor = ".".join(version.split(".")[:2])
    return f"py{minor}" if backend == "venv" else f"py{minor}-{backend}"


def read(prefix: Path) -> Env | None:
    """The env at `prefix` if its stamp says it was finished there: a record that names another folder
    (a copied or moved checkout's `.torchbuild/envs`, `cp -a pt pt2`) describes the original's env, whose
    scripts and installs point at the original, and is not trusted."""
    try:
        data = json.loads((prefix / STAMP).read_text())
        made = Env(data["name"], Path(data["prefix"]), data["backend"], Path(data["python"]), data["version"],
                   data["stamp"], data.get("setuptools", ""))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return made if made.prefix.resolve() == prefix.resolve() else None


def copied_from(prefix: Path) -> Path | None:
    """The folder an env record at `prefix` names when that is another one (a copy of that env)."""
    try:
        recorded = Path(json.loads((prefix / STAMP).read_text())["prefix"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return recorded if recorded.resolve() != prefix.resolve() else None


def list_envs(cfg: Config) -> list[tuple[Path, Env | None]]:
    root = envs_dir(cfg)
    return [(p, read(p)) for p in sorted(root.glob("*")) if p.is_dir()] if root.is_dir() else []


def backend_exe(backend: str, env: Mapping[str, str]) -> str:
    """The program for a backend; a clear error saying how to get it when missing."""
    if backend == "venv":
        return ""
    if backend == "uv":
        exe = shutil.which("uv", path=search_path(env))
        hint = "pip install uv"
    else:
        var = {"conda": "CONDA_EXE", "mamba": "MAMBA_EXE", "micromamba": "MAMBA_EXE"}[backend]
        exe = env.get(var) if env.get(var) and Path(env[var]).name.startswith(backend) else None
        exe = exe or shutil.which(backend, path=env.get("PATH"))
        hint = {"conda": "install Miniforge (https://conda-forge.org/download/) or set CONDA_EXE",
                "mamba": "install Miniforge, which ships mamba, or set MAMBA_EXE",
                "micromamba": "install micromamba (https://mamba.readthedocs.io) or set MAMBA_EXE"}[backend]
    if not exe:
        raise TorchbuildError(f"the {backend} backend is not installed ({backend} not found)", hint)
    return exe


def create(cfg: Config, python: Python, name: str | None = None, backend: str = "venv",
           checkout: Path | None = None, env: Mapping[str, str] | None = None, cuda: str | None = None,
           dry_run: bool = False, packages: Sequence[str] | None = None) -> Env:
    """Make (or verify) the env; a second call with the same inputs installs nothing. `packages`: what
    to install instead of the checkout's build requirements ([]: a bare env, for `inv nightly`)."""
    env = os.environ if env is None else env
    if backend not in BACKENDS:
        raise TorchbuildError(f"unknown backend '{backend}'", f"use one of {', '.join(BACKENDS)}")
    if python.problem:
        raise TorchbuildError(f"Python {python.path} cannot be used: {python.problem}", "choose another with --python")
    exe = backend_exe(backend, env)
    name = check_name(name or default_name(python.version, backend))
    prefix = envs_dir(cfg) / name
    if packages is None:
        reqs = requirements(checkout, python.version, mkl=cfg.build.mkl)
        conda_pkgs = conda_packages(backend, cuda, cfg.build.mkl)
        stamp = expected_stamp(cfg, backend, python.version, checkout, cuda)
    else:
        reqs, conda_pkgs = list(packages), []
        stamp = stamp_of(backend, python.version, reqs, cfg)
    if not dry_run:
        system.check_writable(prefix.parent, "env dir", "paths.envs")
    lock = contextlib.nullcontext() if dry_run else \
        locked(prefix.parent / f".{name}.lock", f"creating env {name}", f"another torchbuild is creating env {name}")
    with lock:  # two creations of one env take turns; the second finds it made
        return _create(cfg, python, name, backend, exe, prefix, checkout, reqs, conda_pkgs, stamp, dry_run)


def _create(cfg: Config, python: Python, name: str, backend: str, exe: str, prefix: Path, checkout: Path | None,
            reqs: list[str], conda_pkgs: list[str], stamp: str, dry_run: bool) -> Env:
    con = _console.get()
    existing = read(prefix)
    if existing and existing.stamp == stamp and existing.python.exists():
        con.info(f"env {name} ({prefix}) is up to date: nothing to install")
        return existing
    if dry_run:
        con.info(f"would create env {name} at {prefix} with Python {python.version} ({backend}): {' '.join(reqs)}")
        return Env(name, prefix, backend, prefix / "bin" / "python", python.version, stamp)
    if existing and existing.version == python.version and existing.python.exists() and \
            existing.backend == backend and backend in ("venv", "uv"):
        updated = _update_in_place(cfg, existing, checkout, reqs, stamp)
        if updated:
            return updated
    if prefix.exists():
        original = copied_from(prefix)
        why = f"is a copy of {original}, whose scripts and installs point there" if original else \
            "was left unfinished by a failed run" if existing is None else "is out of date"
        con.info(f"env {name} {why}: making it again")
        shutil.rmtree(prefix)
    try:
        with con.timed(f"create env {name} with Python {python.version} ({backend})"):
            py = _make(backend, exe, python, prefix, cfg, reqs, conda_pkgs)
            reqs += add_backend_requires(py, checkout, prefix / "pip.conf")
            compile_installed(py)
            made = Env(name, prefix, backend, py, python.version, stamp, setuptools_version(py))
            (prefix / STAMP).write_text(json.dumps({**asdict(made), "prefix": str(prefix), "python": str(py),
                                                    "requirements": reqs}, indent=2) + "\n")
    except BaseException:
        shutil.rmtree(prefix, ignore_errors=True)
        raise
    return made


def setuptools_version(python: Path) -> str:
    """The env's setuptools version ("" when missing), which decides `setup.py develop` or `pip install -e`."""
    from ..toolchain.python import installed_versions

    return installed_versions(python, ("setuptools",))["setuptools"]


def private(path: Path, text: str) -> None:
    """Write a file only its owner reads (0600): an env's pip.conf / .condarc may hold an index url's token."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def _make(backend: str, exe: str, python: Python, prefix: Path, cfg: Config, reqs: list[str],
          conda_pkgs: list[str]) -> Path:
    """A new env with the build requirements at their newest matching versions, as pip's isolated build env has
    them (`--upgrade`: a `setuptools>=64` is not left at the 65.5 a Python 3.11 venv seeds, which builds no
    editable wheel without `wheel`)."""
    py = prefix / "bin" / "python"
    if backend == "venv":
        run(venv_command(python, prefix))
        private(prefix / "pip.conf", pip_conf(cfg))
        pin = pip_bootstrap(python.version)
        pip = [str(py), "-m", "pip", "--disable-pip-version-check"]
        if pin:
            run([*pip, *PIP_INSTALL, "--upgrade", pin], env={"PIP_CONFIG_FILE": str(prefix / "pip.conf")})
        stored, reqs = shared.split(reqs)  # MKL: linked from the cache dir's store, not a copy an env (uv links too)
        shared.install(py, prefix, stored, cfg.cache_root, {"PIP_CONFIG_FILE": str(prefix / "pip.conf")})
        _install([*pip, *PIP_INSTALL, "--upgrade"], reqs, python.version,
                 {"PIP_CONFIG_FILE": str(prefix / "pip.conf")})
    elif backend == "uv":
        run([exe, "venv", "--quiet", "--seed", "--python", str(python.path), str(prefix)])
        private(prefix / "pip.conf", pip_conf(cfg))
        flags = cfg.mirrors.pip_options(trusted_hosts=False)
        _install([exe, "pip", "install", "--quiet", "--upgrade", "--python", str(py), *flags], reqs, python.version,
                 {})
    else:
        prefix.mkdir(parents=True)
        private(prefix / ".condarc", condarc(cfg))
        channels = [a for c in (cfg.mirrors.conda_channels or ["conda-forge"]) for a in ("-c", c)]
        run([exe, "create", "--yes", "--prefix", str(prefix), "--override-channels", *channels,
             f"python={python.minor}", *conda_pkgs], env={"CONDARC": str(prefix / ".condarc")})
        (prefix / "pip.conf").write_text(pip_conf(cfg))
        _install([str(py), "-m", "pip", *PIP_INSTALL, "--upgrade"], reqs, python.version,
                 {"PIP_CONFIG_FILE": str(prefix / "pip.conf")})
    return py


def by_virtualenv(version: str) -> bool:
    """Whether a venv for this Python is made by virtualenv (nox's own, so always here): 3.9+, where it seeds pip
    from its wheel cache in a fraction of a second and `python -m venv` runs ensurepip for three (virtualenv
    ships no pip for older ones)."""
    new = tuple(int(x) for x in version.split(".")[:2]) >= (3, 9)
    return new and importlib.util.find_spec("virtualenv") is not None


def venv_command(python: Python, prefix: Path) -> list[str]:
    """How a venv is made: by virtualenv where by_virtualenv says so, else by the Python's own venv module."""
    if by_virtualenv(python.version):
        return [sys.executable, "-m", "virtualenv", "--quiet", "--no-periodic-update", "--python", str(python.path),
                str(prefix)]
    if not python.venv:
        raise TorchbuildError(f"Python {python.version} at {python.path} cannot create venvs (no venv/ensurepip)",
                              "install its venv package (apt-get install python3-venv), or use --backend uv")
    return [str(python.path), "-m", "venv", str(prefix)]


UNREACHABLE = re.compile(r"Failed to establish a new connection[^'\"]*|Connection refused|Name or service not known|"
                         r"Temporary failure in name resolution|No route to host|Network is unreachable|"
                         r"ConnectTimeout\w*|Read timed out|dns error[^\n]*|error sending request[^\n]*")


def _install(argv: list[str], reqs: list[str], version: str, env: Mapping[str, str]) -> None:
    if not reqs:
        return
    try:
        run([*argv, *reqs], env=env)
    except CommandError as exc:
        m = re.search(r"(?:No matching distribution found for|Could not find a version that satisfies the "
                      r"requirement|Because)\s+(\S+)", exc.output)
        what = m.group(1) if m else "a requirement"
        offline = UNREACHABLE.search(exc.output)
        if offline:  # pip then says "no matching distribution", which is not the cause
            raise TorchbuildError(f"cannot reach the package index to install {what} for Python {version} "
                                  f"({offline.group(0)})", "check mirrors.pip_index_url (or pip's own index "
                                  "setting) and the network, then run the command again") from None
        raise TorchbuildError(f"cannot install {what} for Python {version}",
                              f"pin a version that supports Python {version} in the checkout's requirements, "
                              "or choose another Python") from None


def _update_in_place(cfg: Config, made: Env, checkout: Path | None, reqs: list[str], stamp: str) -> Env | None:
    """Add what this checkout needs to an env made for another one (instead of making it again);
    False (and why) when the result has conflicting packages, so that the caller makes it anew."""
    con = _console.get()
    (made.prefix / "pip.conf").write_text(pip_conf(cfg))
    pip = [str(made.python), "-m", "pip", "--disable-pip-version-check"]
    with con.timed(f"env {made.name}: add what {checkout.name if checkout else 'the build'} needs "
                   f"({len(reqs)} requirements) instead of making it again"):
        _install([*pip, *PIP_INSTALL], reqs, made.version, {"PIP_CONFIG_FILE": str(made.prefix / "pip.conf")})
        reqs = reqs + add_backend_requires(made.python, checkout, made.prefix / "pip.conf")
        compile_installed(made.python)
    check = run(pip + ["check"], capture=True, echo=False, check=False)
    if check.returncode != 0:
        first = (check.stdout + check.stderr).strip().splitlines()[:1]
        con.warn(f"env {made.name} has conflicting packages after the update ({'; '.join(first)}): making it again")
        return None
    updated = replace(made, stamp=stamp, setuptools=setuptools_version(made.python))
    (made.prefix / STAMP).write_text(json.dumps({**asdict(updated), "prefix": str(made.prefix),
                                                 "python": str(made.python), "requirements": reqs}, indent=2) + "\n")
    return updated


def activation(env: Env, shell: str = "bash") -> str:
    """The line that activates `env` in the user's shell."""
    if env.backend in ("conda", "mamba", "micromamba"):
        return f"{env.backend} activate {env.prefix}"
    if shell == "fish":
        return f"source {env.prefix}/bin/activate.fish"
    if shell in ("csh", "tcsh"):
        return f"source {env.prefix}/bin/activate.csh"
    return f"source {env.prefix}/bin/activate"


def choose(cfg: Config, python_spec: str | None, env_name: str | None, base_env: Mapping[str, str],
           tool_prefix: str | None = None) -> EnvChoice:
    """The env a build uses: --env NAME, --python X (managed), the active env, else the default Python's."""
    from ..toolchain import python as pythons

    backend = cfg.matrix.backend
    root = envs_dir(cfg)
    if env_name:
        made = read(named(cfg, env_name))
        if made is None:
            raise TorchbuildError(f"env {env_name} is unfinished",
                                  f"make it again with `inv env.create --name {env_name}`")
        return EnvChoice(made.prefix, made.python, made.version, f"--env {env_name}", made.name, True, made.backend,
                         made.setuptools)
    reason = f"--python {python_spec}" if python_spec else ""
    if python_spec is None:
        active = base_env.get("VIRTUAL_ENV") or base_env.get("CONDA_PREFIX")
        own = Path(tool_prefix or sys.prefix).resolve()
        if active and Path(active).resolve() != own and Path(active).resolve().parent != root:
            py = pythons.probe(Path(active) / "bin" / "python", "active env")
            if py.problem:
                raise TorchbuildError(f"the active environment {active} is broken: {py.problem}",
                                      "deactivate it, or pass --python / --env")
            var = "VIRTUAL_ENV" if base_env.get("VIRTUAL_ENV") else "CONDA_PREFIX"
            return EnvChoice(Path(active), Path(active) / "bin" / "python", py.version,
                             f"the active environment ({var})", None, True, "external",
                             setuptools_version(Path(active) / "bin" / "python"))
        python_spec = cfg.build.python or pythons.OWN_MINOR
        reason = "build.python" if cfg.build.python else "the default Python"
    if "/" not in python_spec:  # a finished managed env for this version needs no discovery
        for prefix in (root / default_name(python_spec, backend),):
            made = read(prefix)
            if made and (made.minor == python_spec or made.version == python_spec):
                return EnvChoice(made.prefix, made.python, made.version, f"{reason}: managed env {made.name}",
                                 made.name, True, made.backend, made.setuptools)
    creator = pythons.find(pythons.discover(base_env, cfg.toolchain.pythons), python_spec)
    name = default_name(creator.version, backend)
    made = read(root / name)
    return EnvChoice(root / name, root / name / "bin" / "python", creator.version,
                     f"{reason}: managed env {name}", name, made is not None, backend,
                     made.setuptools if made else "", creator)


def ensure(cfg: Config, choice: EnvChoice, checkout: Path, cuda: str | None, base_env: Mapping[str, str],
           dry_run: bool = False) -> EnvChoice:
    """Create or update a managed env when needed (its stamp decides); the choice with what it has."""
    from ..toolchain import python as pythons

    if choice.name is None:
        return choice
    made = read(choice.prefix)
    creator = choice.creator
    if made is not None and made.python.exists():
        if made.stamp == expected_stamp(cfg, made.backend, made.version, checkout, cuda):
            return choice
    if creator is None:
        creator = pythons.find(pythons.discover(base_env, cfg.toolchain.pythons), choice.version)
    assert isinstance(creator, Python)
    new = create(cfg, creator, choice.name, choice.backend if choice.backend in BACKENDS else "venv", checkout,
                 base_env, cuda, dry_run)
    return replace(choice, prefix=new.prefix, python=new.python, version=new.version, exists=not dry_run,
                   setuptools=new.setuptools)
