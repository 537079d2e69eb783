"""Gathering what a build needs to know about the machine: toolkit, env, host compiler, GPUs,
compiler cache, release checks. The only step of a build that probes; planning is pure after it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from .. import compat, envs, git, jobserver, patches
from .. import console as _console
from ..config import Config
from ..diagnose import unread_set
from ..envs import EnvChoice
from ..errors import TorchbuildError
from ..run import run
from ..toolchain import compiler_cache, compilers, cuda, gpu, linkers, sanitizers, system
from ..toolchain.compiler_cache import CompilerCache
from ..toolchain.cuda import Toolkit
from ..toolchain.linkers import Linker
from . import against, pools
from .against import TorchConfiguration
from .drivers import Driver, detect
from .drivers.pep517 import COMMENT, Pep517, calls_cmake, compiles_extensions, own_build_files
from .drivers.setuptools_era import SetuptoolsEra
from .drivers.skbuild import ScikitBuildCore
from .ownership import cmaketrees
from .request import BuildRequest, drives_cmake

DISTCC_HOST = re.compile(r"[A-Za-z0-9_.-]+(:\d+)?(/\d+)?")


@dataclass(frozen=True)
class BuildFacts:
    env: EnvChoice
    toolkit: Toolkit | None
    host_cxx: str | None = None  # CUDAHOSTCXX: a gcc the toolkit accepts
    gpu_arch: str | None = None  # the local GPUs' arch list
    launcher: str | None = None  # ccache / sccache
    distcc: str | None = None  # distcc, when build.distributed is distcc
    remote: str | None = None  # the remote cache url, password put in
    notes: tuple[str, ...] = ()
    jobserver: Path | None = None  # the fifo of a jobserver in MAKEFLAGS (inv matrix side by side)
    ninja_joins: bool = False  # the build's ninja takes its jobs from that jobserver by itself
    shims: Path | None = None  # that jobserver's `cmake` shims: only cmake's configure and build hold a token
    clone_mirrors: Mapping[str, Path] = field(default_factory=dict)  # the build's own clones: url -> cached mirror
    linker: Linker | None = None  # build.linker's choice (None: the toolchain's default)
    cmake_version: str | None = None  # the build's cmake (CMAKE_LINKER_TYPE needs 3.29)
    linker_trial: tuple[Linker, ...] = ()  # the linkers to time on this build's longest link (auto, no trial yet)
    generator: str | None = None  # CMAKE_GENERATOR for a project whose build names none (cmaketrees.generator)
    unit_peaks: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # by configuration (pools.recorded)
    commit: str | None = None  # the checkout's HEAD (a matrix slot, without git: its source checkout's)
    torch_folder: Path | None = None  # an extension's: the folder of the torch it builds against (against.py)
    driver: Driver | None = None  # the checkout's build driver, detected once (drivers/)
    cache_how: str = ""  # how the launcher was found, or why there is none (compiler_cache.find)
    masquerade: Path | None = None  # compiler names linked to ccache, where setuptools compiles by name
    sanitizer_env: Mapping[str, str] = field(default_factory=dict)  # --sanitize: what its import needs (preload)


def gather(cfg: Config, request: BuildRequest, env: Mapping[str, str]) -> BuildFacts:
    """Probe the machine for this request; make or update the managed env (unless a dry run or --explain:
    they write nothing)."""
    checkout = cfg.source_path
    looking = request.dry_run or request.explain
    if not (checkout / "setup.py").exists() and not (checkout / "pyproject.toml").exists():
        raise TorchbuildError(f"there is nothing to build at {checkout} (no setup.py or pyproject.toml)",
                              "run `inv clone` first, or point source.path / --path at a checkout")
    driver = detect(checkout)
    if not looking:
        check_disk(checkout, cfg.build.min_free_gb)
        system.check_writable(cfg.root / cfg.paths.logs, "log dir", "paths.logs")
    check_compiler(env)
    toolkit = choose_toolkit(cfg, request.cuda, env) if request.torch is None else torch_toolkit(cfg, request, env)
    choice = envs.choose(cfg, request.python, request.env_name, env) if request.torch is None else \
        torch_env(request.torch)
    preload = sanitizer_facts(request, toolkit, driver, env)
    against_folder = torch_folder(checkout, choice.prefix, request.torch, driver)
    if request.torch is None and toolkit is not None and against_folder:  # the env's own torch: which CUDA it takes
        toolkit = env_torch_toolkit(cfg, against_folder, toolkit, env)
    ccs = compilers.discover(env)
    notes = release_notes(checkout, choice.version, toolkit, ccs, request.force, driver.pytorch())
    if not looking and (checkout / ".git").exists():
        patches.auto_apply(cfg, checkout)
    if driver.pytorch():
        unread_set(checkout, dict(request.sets))
        check_pip_constraints(cfg, checkout, choice, {**env, **cfg.build.env, **dict(request.sets)})
    choice = envs.ensure(cfg, choice, checkout, toolkit.version if toolkit else None, env, looking)
    if not looking and request.torch is None:
        check_torch_at_hand(cfg, checkout, choice, driver)
    check_shadowed(checkout, choice, driver)
    host_cxx, gpus = cuda_facts(toolkit, ccs, env, notes)
    fifo = jobserver.fifo_of(env.get("MAKEFLAGS"))
    joins = fifo is not None and jobserver.joins_by_itself(ninja_version(choice.prefix, env))
    path = f"{choice.prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # The shim stands in for `cmake`; PyTorch's setup.py takes a newer `cmake3` instead where there is one.
    shims = jobserver.shims_of(fifo) if fifo is not None and joins and drives_cmake(checkout) \
        and shutil.which("cmake3", path=path) is None else None
    linker, version, trial = linker_facts(cfg, choice.prefix, env, not looking)
    cache = find_launcher(cfg, choice.prefix, env, provision=not looking)
    generator = None
    if not env.get("CMAKE_GENERATOR") and isinstance(driver, Pep517) and calls_cmake(checkout):
        generator, why = cmaketrees.generator(checkout, shutil.which("ninja", path=path))
        notes.append(why)
    return BuildFacts(choice, toolkit, host_cxx, gpus.arch_list if gpus else None,
                      cache.path, find_distcc(cfg, env), remote_url(cfg, env), tuple(notes), fifo, joins, shims,
                      git.buildclones.cached(git.tools(cfg)[1], checkout),
                      linker, version, trial, generator, pools.recorded(checkout),
                      source_commit(checkout) if request.wheel else None,
                      torch_folder(checkout, choice.prefix, request.torch, driver),  # a managed env made just now
                      driver, cache.how, masquerade(cfg, cache, driver, path, not looking), preload)


def sanitizer_facts(request: BuildRequest, toolkit: Toolkit | None, driver: Driver, env: Mapping[str, str]
                    ) -> dict[str, str]:
    """--sanitize's checks before anything is made, and what its import needs (the runtime preloaded)."""
    if not request.sanitize:
        return {}
    chosen = sanitizers.named(request.sanitize)
    if not driver.pytorch():
        raise TorchbuildError(f"--sanitize passes PyTorch's {chosen.variable}, which {driver.checkout} does not read",
                              f"pass the project's own flags instead, e.g. --set CFLAGS=-fsanitize={chosen.kind} "
                              f"--set CXXFLAGS=-fsanitize={chosen.kind}")
    if chosen.kind == "thread" and toolkit is not None:
        raise TorchbuildError("--sanitize thread: PyTorch's CMake turns CUDA off under USE_TSAN (USE_CUDA depends on "
                              f"NOT USE_TSAN), so a CUDA {toolkit.version} build of it would be a CPU build",
                              "add --cuda none")
    return sanitizers.run_env(chosen, sanitizers.runtime_path(chosen, env))


def masquerade(cfg: Config, cache: CompilerCache, driver: Driver, path: str, make: bool) -> Path | None:
    """ccache under the compilers' names, for a project whose setup.py compiles its extensions itself."""
    if not cache.path or not Path(cache.path).name.startswith("ccache") or not isinstance(driver, Pep517) \
            or not compiles_extensions(driver.checkout):
        return None
    return compiler_cache.masquerade(cfg.cache_root, cache.path, path, make)


def release_notes(checkout: Path, python: str, toolkit: cuda.Toolkit | None, ccs: list[compilers.Compiler],
                  force: bool, pytorch: bool) -> list[str]:
    """What the release table says of this Python, CUDA and GCC for the checkout's version (before any env is
    made: a refused Python makes none)."""
    torch_version = compat.checkout_version(checkout)
    gcc = compilers.default_gcc(ccs)
    notes = []
    if not torch_version and pytorch:
        notes.append(f"no version.txt in {checkout}: PyTorch's release table is not checked")
    return notes + compat.check(torch_version or "", python, toolkit.version if toolkit else None,
                                gcc.version if gcc else None, compat.python_minimum(checkout), force)


def cuda_facts(toolkit: cuda.Toolkit | None, ccs: list[compilers.Compiler], env: Mapping[str, str],
               notes: list[str]) -> tuple[str | None, gpu.GpuInfo | None]:
    """nvcc's host compiler and the local GPUs (a driver older than the toolkit is said)."""
    if toolkit is None:
        return None, None
    pick, why = compilers.host_compiler(ccs, toolkit.version)
    if pick:
        notes.append(why)
    gpus = gpu.detect(env)
    if gpus and gpus.driver_cuda and compat.vkey(toolkit.version) > compat.vkey(gpus.driver_cuda):
        _console.get().warn(f"CUDA {toolkit.version} is newer than the driver's CUDA {gpus.driver_cuda}: the build "
                            "works, running its kernels needs a newer driver")
    return str(pick.cxx) if pick else None, gpus


def linker_facts(cfg: Config, prefix: Path, env: Mapping[str, str], keep: bool
                 ) -> tuple[Linker | None, str | None, tuple[Linker, ...]]:
    """build.linker's choice, the cmake version that says how to pass it, and the linkers to time on this build's
    longest link (auto, no trial yet); answers remembered in the cache dir unless `keep` is off."""
    remembered = cfg.cache_root / "linkers.json"
    found = linkers.discover(env.get("CXX") or "c++", env, remembered, keep)
    timed = linkers.measured(found, remembered)
    linker = linkers.choose(cfg.build.linker, found, timed)
    trial = tuple(found) if cfg.build.linker == "auto" and timed is None and linker else ()
    return linker, linkers.cmake_version(prefix, env, remembered, keep) if linker else None, trial


def torch_folder(checkout: Path, prefix: Path, torch: TorchConfiguration | None, driver: Driver) -> Path | None:
    """Where the torch an extension builds against keeps lib/ and include/: its configuration's (--torch), else
    the env's own; None for a project that does not build against torch (PyTorch itself included)."""
    package = None if driver.pytorch() else against.extends(checkout)
    return against.folder(package, prefix, torch.checkout if torch else None) if package else None


def check_pip_constraints(cfg: Config, checkout: Path, choice: EnvChoice, env: Mapping[str, str]) -> None:
    """A PyTorch checkout whose version the constraints pip applies exclude (a machine's `torch<=2.14.1`
    against 2.15.0a0) is refused before its env is made: pip would refuse its install only after. Once the env
    pins its torch, each build that runs pip asks again (`pip_capped`), with the constraints it passes."""
    pins = choice.prefix / against.CONSTRAINTS
    if pins.is_file() and not env.get("PIP_CONSTRAINT"):  # torchbuild's own pins replace them: see pip_capped
        return
    pip_capped(cfg.nightly.package or compat.distribution_name(checkout), checkout, choice.prefix, env,
               "once the env is made; nothing was made")


def pip_capped(name: str, checkout: Path, prefix: Path, env: Mapping[str, str], when: str) -> None:
    """One line where the constraints pip applies under `env` in the env at `prefix` exclude the checkout's
    version of `name`."""
    from ..envs import pipconfig

    version = compat.checkout_version(checkout)
    found = pipconfig.cap(name, version, env, prefix) if version else None
    if found:
        line, path, where = found
        raise TorchbuildError(
            f"pip's constraint {line!r} ({path}, from {where}) excludes {name} {version}, this checkout's version: "
            f"pip would refuse its install {when}",
            f"lift it for torchbuild's builds (build.env: {{PIP_CONSTRAINT: {os.devnull}}} in torchbuild.yaml, or a "
            f"copy of {path} without that line), or remove the line from {path}")


def check_shadowed(checkout: Path, choice: EnvChoice, driver: Driver) -> None:
    """Where the editable install maps the package into the checkout (PyTorch up to 2.13, setuptools projects),
    a folder or module of its name in the env's site-packages that no install pip records is what Python
    imports (site-packages comes first): refused, naming it, before the build reports a success that does
    not import. Not torchbuild's to move."""
    from ..wheels import record_paths
    from .package import package_name

    if driver.outputs_in_env or not choice.exists:
        return
    package = package_name(checkout, choice.prefix)
    for site in choice.prefix.glob("lib/python*/site-packages"):
        found = [p for p in (site / package, *site.glob(f"{package}.py"), *site.glob(f"{package}.*.so")) if p.exists()]
        recorded = {path.split("/")[0] for record in site.glob("*.dist-info/RECORD")
                    for path in record_paths(record)} if found else set()
        stray = [p for p in found if p.name not in recorded]
        if stray:
            raise TorchbuildError(f"{stray[0]} is in the env's site-packages, and no install pip records made it: "
                                  f"Python imports {package} from there, not from the editable install of {checkout}",
                                  f"move it out of the env (mv {stray[0]} /tmp/), then build again")


def check_torch_at_hand(cfg: Config, checkout: Path, choice: EnvChoice, driver: Driver) -> None:
    """An extension whose setup.py imports torch needs one in its env before pip asks it for metadata: most
    (torch-scatter) declare no build requirement on it, so pip's raw ModuleNotFoundError would be all it says.
    The way out is named: a PyTorch checkout's configuration (--torch), an env that has one, or an install."""
    package = None if driver.pytorch() else against.extends(checkout)
    if package is None or against.folder(package, choice.prefix, None) is not None:
        return
    found = run([str(choice.python), "-c", f"import importlib.util, sys; sys.exit(not importlib.util.find_spec("
                                           f"{package!r}))"], capture=True, echo=False, check=False)
    if found.returncode == 0:  # an editable install of a checkout's torch (a path entry, a finder)
        return
    have = sorted(p.parents[3].name for p in (cfg.root / cfg.paths.envs).glob(f"*/lib/python*/site-packages/{package}")
                  if (p / "lib").is_dir())
    raise TorchbuildError(
        f"{checkout.name}'s setup.py builds against {package} (its utils.cpp_extension), and the env {choice.prefix} "
        f"has none: pip would stop at `No module named '{package}'`",
        "build against the torch of a PyTorch checkout torchbuild builds (--torch ../pytorch)"
        + (f", use an env that has one (--env {have[0]})" if have else "")
        + f", or install one into this env first ({choice.python} -m pip install {package})")


def source_commit(checkout: Path) -> str | None:
    """The commit the checkout's files are: its HEAD (a matrix slot's own git says the checkout's, slots.py)."""
    if not (checkout / ".git").exists():
        return None
    return run(["git", "rev-parse", "HEAD"], cwd=checkout, capture=True, echo=False, check=False).stdout.strip() or None


def ninja_version(prefix: Path, env: Mapping[str, str]) -> str | None:
    """The version of the ninja a build in this env runs (its own first, then PATH's)."""
    from ..run import run

    ninja = shutil.which("ninja", path=str(prefix / "bin") + os.pathsep + env.get("PATH", ""))
    return run([ninja, "--version"], capture=True, echo=False, check=False).stdout.strip() if ninja else None


def check_disk(checkout: Path, min_free_gb: float) -> None:
    free = system.free_disk(checkout)
    if free < min_free_gb * system.GIB:
        raise TorchbuildError(f"only {free / system.GIB:.1f} GiB free at {checkout}; a build needs about "
                              f"{min_free_gb:.10g} GiB (build.min_free_gb)",
                              "free some space (inv clean --all removes stashed build trees), "
                              "or lower build.min_free_gb for a small project")


def choose_toolkit(cfg: Config, spec: str, env: Mapping[str, str]) -> Toolkit | None:
    """The toolkit for --cuda (None: a CPU build); a broken one is an error. `auto` builds for CPU a project
    that does not use CUDA."""
    if spec in ("none", "cpu"):
        return None
    if spec == "auto" and not uses_cuda(cfg.source_path):
        _console.get().info(f"{cfg.source_path.name} does not use CUDA (no CUDA language or package in its CMake "
                            "files, no CUDA extension, no .cu file): building for CPU; --cuda X asks for a toolkit")
        return None
    try:
        toolkit = cuda.select(cuda.for_config(cfg, env), spec)
    except TorchbuildError as exc:
        if "is not installed" not in exc.message:
            raise
        raise TorchbuildError(f"{exc.message}; {what_cuda_needs(spec, compilers.discover(env))}", exc.hint) from None
    if toolkit is None:
        _console.get().info("no CUDA toolkit found: building for CPU (USE_CUDA=0); `inv cuda.install 13.0` adds one")
    elif not toolkit.nvcc or not Path(toolkit.nvcc).exists():
        raise TorchbuildError(f"the CUDA {toolkit.version} toolkit at {toolkit.root} is gone or broken",
                              "run `inv cuda.list` and choose another with --cuda")
    return toolkit


def torch_toolkit(cfg: Config, request: BuildRequest, env: Mapping[str, str]) -> Toolkit | None:
    """The toolkit of the torch configuration an extension builds against (--torch): the one it was built with;
    none for a CPU torch, for --cuda none, and for a project without CUDA code (its configuration is CPU)."""
    if request.cuda in ("none", "cpu") or not uses_cuda(cfg.source_path):
        return None
    assert request.torch is not None
    found = [t for t in cuda.for_config(cfg, env) if str(t.root) == request.cuda]
    if not found:
        raise TorchbuildError(f"--torch {request.torch.checkout}: its configuration {request.torch.key} was built with "
                              f"the CUDA toolkit at {request.cuda}, which is not here any more",
                              "build that checkout again with a toolkit `inv cuda.list` shows, then this one")
    return found[0]


def env_torch_toolkit(cfg: Config, torch_folder: Path, toolkit: Toolkit, env: Mapping[str, str]) -> Toolkit | None:
    """An extension built against the env's own torch: a CPU torch makes it a CPU build (cpp_extension has no
    CUDA_HOME under a CPU torch); a CUDA torch takes a toolkit of its CUDA's major version (cpp_extension
    refuses another), the same minor where there is one."""
    built, package = against.built_cuda(torch_folder), torch_folder.name
    if built is None or built == toolkit.version:
        return toolkit
    if built == "cpu":
        _console.get().info(f"the env's {package} is a CPU build ({torch_folder}/version.py): the extension builds "
                            "for CPU; a CUDA torch in the env, or --torch with a CUDA configuration, builds its CUDA")
        return None
    toolkits = cuda.for_config(cfg, env)
    pick = cuda.select(toolkits, built) if any(t.version == built for t in toolkits) else \
        cuda.select(toolkits, built.split(".")[0]) if any(t.version.split(".")[0] == built.split(".")[0]
                                                          for t in toolkits) else None
    if pick is None:
        raise TorchbuildError(f"the env's {package} was built with CUDA {built}, and no CUDA {built.split('.')[0]}.x "
                              "toolkit is here (cpp_extension refuses another major version)",
                              f"add one: `inv cuda.install {built}`, or build for CPU with --cuda none")
    return pick


def torch_env(torch: TorchConfiguration) -> envs.EnvChoice:
    """The env the torch configuration is installed in: the extension builds there, importing that torch."""
    prefix = torch.env_python.parent.parent
    made = envs.read(prefix)
    if made is None or not torch.env_python.exists():
        raise TorchbuildError(f"--torch {torch.checkout}: the env its configuration {torch.key} was built in, "
                              f"{prefix}, is gone or unfinished", f"build it again: `torchbuild build --path "
                              f"{torch.checkout}`")
    return envs.EnvChoice(prefix, torch.env_python, made.version, f"--torch: {torch.key} of {torch.checkout} is "
                          "installed there", None, True, made.backend, made.setuptools)


def what_cuda_needs(version: str, ccs: list[compilers.Compiler]) -> str:
    """What building against this CUDA takes: its host gcc (and whether one is here), its releases."""
    parts = []
    limit = compilers.max_gcc(version)
    if limit:
        gccs = sorted({c.major for c in ccs if c.kind == "gcc"})
        ok = [g for g in gccs if g <= limit]
        found = f"gcc {', '.join(map(str, ok))} is installed" if ok else \
            f"none is installed (found gcc {', '.join(map(str, gccs)) or 'none'}); get one with " \
            f"`apt-get install g++-{limit}` where the distribution ships it, or " \
            f"`conda install -c conda-forge gxx_linux-64={limit}`"
        parts.append(f"CUDA {version} accepts host gcc <= {limit}: {found}")
    releases = compat.releases_for_cuda(version)
    parts.append(f"PyTorch releases built for CUDA {version}: {', '.join(releases)} "
                 f"(`inv clone --ref v{releases[-1]}.0` for the newest)" if releases else
                 f"no PyTorch release was built for CUDA {version}")
    return "; ".join(parts)


def find_launcher(cfg: Config, env_prefix: Path, env: Mapping[str, str], provision: bool = True) -> CompilerCache:
    """cache.tool's compiler cache, looked up in the build env first; ccache provisioned where none is found."""
    python = env_prefix / "bin" / "python"
    return compiler_cache.find(cfg.cache.tool, cfg.build.ccache, cfg.cache_root, env_prefix, env,
                               str(python) if python.exists() else sys.executable, cfg.mirrors.pip_options(),
                               provision)


def find_distcc(cfg: Config, env: Mapping[str, str]) -> str | None:
    """distcc, when build.distributed asks for it; its hosts must be given and well-formed."""
    if cfg.build.distributed != "distcc":
        return None
    bad = [h for h in cfg.build.hosts if not DISTCC_HOST.fullmatch(h)]
    if not cfg.build.hosts or bad:
        raise TorchbuildError(f"build.hosts: {'bad host ' + repr(bad[0]) if bad else 'no hosts'} for distcc",
                              'list them as HOST[:PORT][/SLOTS], e.g. build.hosts: ["10.0.0.2/8", "10.0.0.3:3632/8"]')
    found = shutil.which("distcc", path=env.get("PATH"))
    if found is None:
        raise TorchbuildError("build.distributed is distcc, but distcc was not found",
                              "apt-get install distcc (and distccd on the hosts), or set build.distributed: none")
    return found


def check_compiler(env: Mapping[str, str]) -> None:
    """A C++ compiler must exist before a build starts (CXX if set, else g++/clang++/c++ on PATH)."""
    cxx = env.get("CXX")
    if cxx:  # as CMake reads it (get_filename_component PROGRAM): the whole value where it names a program, a
        # path with a space included, else its first word (CXX="ccache g++")
        if shutil.which(cxx, path=env.get("PATH")) is None and shutil.which(cxx.split()[0], path=env.get("PATH")) \
                is None:
            raise TorchbuildError(f"CXX is {cxx}, which was not found", "point CXX at a C++ compiler, or unset it")
        return
    if not any(shutil.which(c, path=env.get("PATH")) for c in ("g++", "clang++", "c++")):
        raise TorchbuildError("no C++ compiler found on PATH (g++, clang++, c++)",
                              "install one (apt-get install g++), or set CXX")


def remote_url(cfg: Config, env: Mapping[str, str]) -> str | None:
    """cache.remote with the password from its variable put in (never printed: run.mask hides it)."""
    url = cfg.cache.remote
    password = env.get(cfg.cache.password_env)
    if url and password and "@" not in url.split("://", 1)[-1]:
        scheme, rest = url.split("://", 1)
        url = f"{scheme}://:{password}@{rest}" if scheme.startswith("redis") else f"{scheme}://user:{password}@{rest}"
    return url


CUDA_USE = re.compile(r"\bCUDA\b|CUDAToolkit|CUDAExtension|\bcuda_add_|\.cu\b")


def uses_cuda(checkout: Path) -> bool:
    """Whether the checkout builds CUDA code: PyTorch (its own build files), a CMake file naming CUDA (the
    language, FindCUDA, CUDAToolkit), a setup.py with torch's CUDAExtension, or a .cu/.cuh file of its own;
    the project's own files only, as its configure sees them: comments, vendored trees and submodules (pybind11's
    tests and tools name CUDA) left out."""
    if SetuptoolsEra.matches(checkout) or ScikitBuildCore.is_pytorch(checkout) or (checkout / "torch").is_dir():
        return True
    for path in own_build_files(checkout, (".cu", ".cuh")):
        if path.suffix in (".cu", ".cuh"):
            return True
        with contextlib.suppress(OSError):
            if CUDA_USE.search(COMMENT.sub("", path.read_text(errors="replace"))):
                return True
    return False


def needs_cuda(checkout: Path) -> bool:
    """Whether the checkout's build uses CUDA (`uses_cuda`); True before it is cloned (nothing to read yet)."""
    return not ((checkout / "setup.py").is_file() or (checkout / "pyproject.toml").is_file()) or uses_cuda(checkout)
