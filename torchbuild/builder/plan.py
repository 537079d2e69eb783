"""The build plan: everything a build will do, as data (printed by --dry-run). Pure."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from .. import jobserver
from ..config import Config
from ..envs import EnvChoice
from ..errors import TorchbuildError
from ..git.buildclones import git_config_env
from ..locks import STATE
from ..run import format_command, merged_env
from ..toolchain import sanitizers, system
from ..toolchain.cuda import Toolkit
from ..toolchain.linkers import Linker
from . import against
from .drivers import Driver, detect
from .drivers.pep517 import compiles_extensions
from .facts import BuildFacts
from .package import package_name
from .pools import per_job
from .request import BuildRequest

# Environment that changes what CMake configures: PyTorch's setup.py forwards every BUILD_*/USE_*/CMAKE_*
# variable as -D, but only when it configures (a change means: reconfigure this tree); CMake reads the
# compilers and flags at that moment too. Launchers count: they reach CMake only at configure time.
CONFIGURE_PREFIXES = ("USE_", "BUILD_", "CMAKE_")
# What gcc reads as it compiles and links (ninja never sees it): part of the configuration, and a change
# compiles every object again (ownership/changes.py)
COMPILER_ENVIRONMENT = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "GCC_EXEC_PREFIX",
                        "COMPILER_PATH")
CONFIGURE_NAMES = {"TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CUDACXX", "CUDAHOSTCXX", "CUDA_NVCC_EXECUTABLE", "DEBUG",
                   "REL_WITH_DEB_INFO", "CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "CUDAFLAGS", "BLAS",
                   *COMPILER_ENVIRONMENT}
NOT_CONFIGURE = {"CMAKE_FRESH", "CMAKE_ONLY", "CMAKE_BUILD_PARALLEL_LEVEL"}  # setup.py pops the first two
# What else reaches the build's outputs without reconfiguring (version.py, the wheel's name and version).
OUTPUT_PREFIXES = ("PYTORCH_", "TORCH_", "LIBTORCH_", "NATIVE_AOT",
                   "SKBUILD_")  # scikit-build-core's settings (its environment wins over the pyproject): the strip


def affects_configure(name: str) -> bool:
    """Whether a variable changes what CMake configures (CMAKE_FRESH and the parallel level do not)."""
    return name not in NOT_CONFIGURE and (name in CONFIGURE_NAMES or name.startswith(CONFIGURE_PREFIXES))


@dataclass(frozen=True)
class Plan:
    checkout: Path
    env: EnvChoice
    toolkit: Toolkit | None
    key: str
    configure: Mapping[str, str]
    changes: Mapping[str, str | None]
    command: tuple[str, ...]
    log: Path
    stats_log: Path
    jobs_reason: str
    notes: tuple[str, ...] = ()
    wheel: bool = False
    dist: Path | None = None
    launcher: str | None = None
    package: str = "torch"
    jobserver: Path | None = None  # take job tokens from this fifo around the build command
    ninja_joins: bool = False  # ninja takes the rest itself; otherwise MAX_JOBS = the tokens taken
    shims: bool = False  # the jobserver's `cmake` shim takes the token around cmake's configure and build
    inputs: Mapping[str, str] = field(default_factory=dict)  # every variable "up to date" compares
    linker_trial: tuple[Linker, ...] = ()  # time these on the build's longest link (toolchain/linkers.py)
    linker_memory: Path | None = None  # where the trial's answer is kept
    driver: Driver | None = None  # the checkout's build driver, detected once (drivers/): the era's mechanisms
    outputs_in_env: bool = False  # its editable install copies the compiled outputs into the env (scikit-build-core)
    env_install: tuple[str, bool] | None = None  # with outputs_in_env: the folder in site-packages, and strip
    after: tuple[str, ...] = ()  # the checkout's step after the editable install (PyTorch main's native-AOT stage 2)
    forwards_cmake: bool = False  # the build passes CMAKE_* variables on to CMake (pools.py)
    memory: int = 0  # bytes the build may use (build.memory_gb, the cgroup, MemAvailable) at planning
    in_place: tuple[str, ...] = ()  # setuptools' in-place build, standing in for the editable one (inplace.py)
    torch_folder: Path | None = None  # an extension's: the folder of the torch it builds against (against.py)
    cache_how: str = ""  # how the compiler cache was found, or why there is none (toolchain/compiler_cache.py)
    history: Path | None = None  # what each kind of step and configure cost on this machine (history.py)
    run_env: Mapping[str, str] = field(default_factory=dict)  # what an import of it needs (--sanitize: a preload)


# ----------------------------------------------------------------------------- planning (pure)


def config_key(version: str, toolkit: Toolkit | None, build_type: str) -> str:
    minor = ".".join(version.split(".")[:2])
    cuda = f"cu{toolkit.version.replace('.', '')}" if toolkit else "cpu"
    return f"py{minor}-{cuda}-{build_type}"


def build_command(driver: Driver, env: EnvChoice, wheel: bool, dist: Path, build_type: str = "release"
                  ) -> tuple[str, ...]:
    """The checkout's build driver's command: the editable install, or a wheel into `dist`."""
    return driver.wheel(str(env.python), dist, env.setuptools, build_type) if wheel else \
        driver.develop(str(env.python), env.setuptools, build_type)


def arch_supported(cuda: str, arch: str) -> bool:
    """Whether nvcc of this CUDA version accepts compute capability `arch` (8.0, 9.0a, 12.0+PTX)."""
    from ..compat import vkey

    cap = vkey(arch.replace("+PTX", ""))[:2]
    cv = vkey(cuda)[:2]
    oldest = (7, 5) if cv >= (13, 0) else (5, 0) if cv >= (12, 0) else (3, 5) if cv >= (11, 0) else (3, 0)
    newest = next(cap_ for since, cap_ in (((12, 8), (12, 9)), ((11, 8), (9, 0)), ((11, 4), (8, 7)),
                                            ((11, 1), (8, 6)), ((11, 0), (8, 0)), ((10, 0), (7, 5)), ((0, 0), (7, 2)))
                  if cv >= since)
    return oldest <= cap <= newest


def make_plan(cfg: Config, request: BuildRequest, facts: BuildFacts, base_env: Mapping[str, str],
              now: float | None = None) -> Plan:
    """Everything a build will do, as data. Pure: `gather` found the facts."""
    env, toolkit, opts = facts.env, facts.toolkit, request
    checkout = cfg.source_path
    driver = facts.driver or detect(checkout)
    key, notes = plan_key(env.version, toolkit, opts), list(facts.notes)
    changes = base_changes(facts, base_env, driver.pytorch())
    if toolkit is not None:
        changes.update(cuda_changes(toolkit, opts, facts, notes))
    jobs, jobs_reason, memory = plan_jobs(cfg, opts, facts, base_env, key)
    changes.update(jobs_changes(jobs, facts, opts, base_env))
    if facts.jobserver:  # side by side under `inv matrix`: one budget for every build
        jobs_reason = shared_jobs(facts, opts, jobs)
    joins = facts.ninja_joins and not opts.jobs
    shims = facts.shims is not None and joins
    if shims:  # ahead of the env's cmake too; the shim finds the real one after itself
        changes["PATH"] = f"{facts.shims}{os.pathsep}{changes['PATH']}"
    changes.update(driver_changes(driver, facts, opts, base_env, toolkit))
    if facts.torch_folder and facts.launcher:  # cpp_extension puts a compiler cache it finds on PATH before both
        changes["PATH"] = f"{changes['PATH']}{os.pathsep}{Path(facts.launcher).parent}"  # compilers (torch 2.13's)
    if facts.masquerade:  # setuptools compiles by the compilers' names: ccache under them, first
        changes["PATH"] = f"{facts.masquerade}{os.pathsep}{changes['PATH']}"
    log, stats_log, log_dir, stamp = log_paths(cfg, key, now)
    if shims:
        changes[jobserver.WAITS] = str(log_dir / f"{stamp}.job-waits")
    changes.update(launcher_changes(cfg, facts, toolkit, checkout, stats_log, driver.pytorch()))
    if facts.linker:
        changes.update(linker_changes(cfg, facts, base_env, notes))
    dist = opts.dist or cfg.root / "dist"
    if opts.wheel:
        changes.update(wheel_version(checkout, toolkit, facts.commit))
    # git in the build (NCCL, Eigen, setup.py's own submodule update): through the mirror cache and rules
    changes.update(git_config_env(cfg.mirrors.git, facts.clone_mirrors, base_env))
    set_here = {**cfg.build.env, **dict(opts.sets)}
    changes.update(set_here)
    if opts.part != "all":
        changes["BUILD_LIBTORCH_WHL" if opts.part == "core" else "BUILD_PYTHON_ONLY"] = "1"
    if opts.sanitize:
        changes[sanitizers.named(opts.sanitize).variable] = "1"  # PyTorch's CMake reads it (both drivers forward it)
    full = merged_env(base_env, changes)  # the shell's BUILD_*/USE_*/CMAKE_*, CC, CXXFLAGS... count too
    in_place = driver.in_place(str(env.python))
    configure = configure_of(full, opts, env, cmake=not (in_place and compiles_extensions(checkout)))
    inputs = {**configure, **{k: v for k, v in full.items() if k.startswith(OUTPUT_PREFIXES) or k in set_here}}
    return Plan(checkout, env, toolkit, key, configure, changes, build_command(driver, env, opts.wheel, dist,
                                                                                opts.build_type),
                log, stats_log, jobs_reason, tuple(notes), opts.wheel, dist if opts.wheel else None, facts.launcher,
                package_name(checkout), facts.jobserver, joins, shims, inputs, facts.linker_trial,
                cfg.cache_root / "linkers.json", driver, driver.outputs_in_env and not opts.wheel,
                driver.env_install(opts.build_type, full), after_install(driver, env, toolkit, opts.wheel, full),
                driver.forwards_cmake_variables(), memory,
                () if opts.wheel else in_place, facts.torch_folder, facts.cache_how,
                cfg.cache_root / "build-history.json", facts.sanitizer_env)


def plan_key(version: str, toolkit: Toolkit | None, opts: BuildRequest) -> str:
    """The configuration's key: Python x CUDA x build type, the split build's part, the torch it builds against."""
    key = config_key(version, toolkit, opts.build_type)
    if opts.part == "core":  # Python-independent: one tree for every Python
        key = "core-" + key.split("-", 1)[1]
    elif opts.part == "python":
        key += "-python"
    if opts.sanitize:  # a tree of its own, switched to and from like --debug
        key += "-" + sanitizers.named(opts.sanitize).suffix
    if opts.torch is not None:  # one tree per (its configuration x the torch it is built against)
        key += "-" + opts.torch.tag
    if opts.apart:  # another env of the same Python: its own tree, never a reconfigure of the developer's
        key += "-" + opts.apart
    return key


def base_changes(facts: BuildFacts, base_env: Mapping[str, str], pytorch: bool) -> dict[str, str | None]:
    """The toolkit's variables (PyTorch's USE_CUDA only where PyTorch reads it), the env first on PATH."""
    from ..toolchain.cuda import toolkit_env

    env = facts.env
    changes: dict[str, str | None] = {k: v for k, v in toolkit_env(facts.toolkit, base_env).items()
                                      if pytorch or k != "USE_CUDA"}
    path = changes.get("PATH") or base_env.get("PATH", "")
    changes["PATH"] = str(env.prefix / "bin") + (os.pathsep + path if path else "")
    if env.name is not None or base_env.get("VIRTUAL_ENV") != str(env.prefix):
        changes["VIRTUAL_ENV"] = str(env.prefix)
    return changes


def cuda_changes(toolkit: Toolkit, opts: BuildRequest, facts: BuildFacts, notes: list[str]) -> dict[str, str]:
    """TORCH_CUDA_ARCH_LIST (checked against the toolkit) and the host compiler nvcc takes."""
    from ..compat import default_arch_list

    arch = opts.arch or facts.gpu_arch or default_arch_list(toolkit.version)
    bad = [a for a in re.split(r"[;\s]+", arch) if a and not arch_supported(toolkit.version, a)]
    if bad:
        raise TorchbuildError(f"CUDA {toolkit.version} does not support compute capability {', '.join(bad)} "
                              f"(TORCH_CUDA_ARCH_LIST={arch})",
                              f"pass --arch with archs CUDA {toolkit.version} supports, e.g. "
                              f"\"{default_arch_list(toolkit.version)}\"")
    source = "the torch's configuration" if opts.torch and opts.arch == opts.torch.arch else \
        "--arch" if opts.arch else "local GPUs" if facts.gpu_arch else f"CUDA {toolkit.version}'s release default"
    notes.append(f"TORCH_CUDA_ARCH_LIST={arch} ({source})")
    return {"TORCH_CUDA_ARCH_LIST": arch, **({"CUDAHOSTCXX": facts.host_cxx} if facts.host_cxx else {})}


def plan_jobs(cfg: Config, opts: BuildRequest, facts: BuildFacts, base_env: Mapping[str, str], key: str
              ) -> tuple[int, str, int]:
    """MAX_JOBS and why (--jobs, MAX_JOBS in the shell, else cores and memory, plus distcc's slots), and the
    bytes the build may use."""
    jobs, memory = opts.jobs, system.available_memory(cfg.build.memory_gb)
    shell_jobs = base_env.get("MAX_JOBS", "").strip()
    if jobs:
        return jobs, f"{jobs} (--jobs / build.jobs)", memory
    if shell_jobs and not facts.jobserver:  # as PyTorch's docs tell developers to cap a build's memory
        if not shell_jobs.isdigit() or int(shell_jobs) < 1:
            raise TorchbuildError(f"MAX_JOBS={shell_jobs} in the environment is not a number of jobs",
                                  "set it to a whole number (MAX_JOBS=4), or unset it to let torchbuild choose")
        return int(shell_jobs), f"{shell_jobs} (MAX_JOBS in the environment; --jobs wins)", memory
    chosen = system.choose_jobs(os.cpu_count() or 1, memory, facts.toolkit is not None,
                                per_job(facts.unit_peaks.get(key, {})))
    if not facts.distcc:
        return chosen.jobs, chosen.reason, memory
    slots = remote_slots(cfg.build.hosts)  # remote slots compile; only preprocessing and linking stay here
    return chosen.jobs + slots, f"{chosen.jobs + slots} ({chosen.reason} here + {slots} distcc slots on " \
                                f"{len(cfg.build.hosts)} host(s))", memory


def jobs_changes(jobs: int, facts: BuildFacts, opts: BuildRequest, base_env: Mapping[str, str]
                 ) -> dict[str, str | None]:
    """MAX_JOBS, and CMAKE_BUILD_PARALLEL_LEVEL for scikit-build-core and other CMake drivers (PyTorch's setup.py
    passes -j MAX_JOBS itself); neither where ninja takes its jobs from `inv matrix`'s jobserver."""
    if facts.jobserver and facts.ninja_joins and not opts.jobs:
        return {"MAX_JOBS": None, "CMAKE_BUILD_PARALLEL_LEVEL": None}  # no -j: ninja asks the jobserver
    changes: dict[str, str | None] = {"MAX_JOBS": str(jobs)}
    if not base_env.get("CMAKE_BUILD_PARALLEL_LEVEL"):
        changes["CMAKE_BUILD_PARALLEL_LEVEL"] = str(jobs)
    return changes


def shared_jobs(facts: BuildFacts, opts: BuildRequest, jobs: int) -> str:
    if facts.ninja_joins and not opts.jobs:
        return f"shared: ninja takes its jobs from the jobserver in MAKEFLAGS ({facts.jobserver})"
    return f"the jobserver's tokens free at the start, at most {jobs} (this ninja cannot join it)"


def driver_changes(driver: Driver, facts: BuildFacts, opts: BuildRequest, base_env: Mapping[str, str],
                   toolkit: Toolkit | None) -> dict[str, str | None]:
    """What the checkout's driver reads: CMAKE_PREFIX_PATH, PyTorch's variables, the generator, the build type's
    flags, an extension's FORCE_CUDA and compiler cache on PATH."""
    env, pytorch = facts.env, driver.pytorch()
    prefix_path = base_env.get("CMAKE_PREFIX_PATH")
    changes: dict[str, str | None] = {"CMAKE_PREFIX_PATH": str(env.prefix) + (os.pathsep + prefix_path
                                                                                if prefix_path else "")}
    if pytorch:
        changes["USE_NINJA"] = "1"
    if facts.torch_folder and toolkit is not None:  # torchvision's switch: CUDA code even where no GPU is visible
        changes["FORCE_CUDA"] = "1"
    pins = env.prefix / against.CONSTRAINTS
    if pytorch and pins.is_file() and not base_env.get("PIP_CONSTRAINT"):  # its own pin may not refuse a new build
        changes["PIP_CONSTRAINT"] = " ".join(against.pinned_before(pins)) or os.devnull
    if facts.generator:
        changes["CMAKE_GENERATOR"] = facts.generator
    if pytorch and not base_env.get("BUILD_TEST"):  # PyTorch's C++ tests: off unless the shell asks for them
        changes["BUILD_TEST"] = "0"
    changes["DEBUG"] = "1" if opts.build_type == "debug" else None
    changes["REL_WITH_DEB_INFO"] = "1" if opts.build_type == "relwithdebinfo" else None
    for name, flags in driver.compile_flags(opts.build_type).items():  # after the shell's own
        changes[name] = " ".join(filter(None, (base_env.get(name), flags)))
    return changes


def log_paths(cfg: Config, key: str, now: float | None) -> tuple[Path, Path, Path, str]:
    """The build's log, its compiler cache's stats log, their folder, and the stamp naming them."""
    log_dir = cfg.root / cfg.paths.logs / key
    now = time.time() if now is None else now
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{int(now * 1000) % 1000:03d}"
    return log_dir / f"{stamp}.log", log_dir / f"{stamp}.ccache-stats", log_dir, stamp


def launcher_changes(cfg: Config, facts: BuildFacts, toolkit: Toolkit | None, checkout: Path, stats_log: Path,
                     pytorch: bool) -> dict[str, str | None]:
    """The compiler launchers (ccache or sccache, distcc behind ccache or alone), their cache and remote storage."""
    launcher, remote = facts.launcher, facts.remote
    ccache = bool(launcher and Path(launcher).name.startswith("ccache"))
    changes: dict[str, str | None] = {}
    c_launcher = launcher
    if facts.distcc:
        changes.update({"DISTCC_HOSTS": " ".join(cfg.build.hosts), "DISTCC_DIR": str(cfg.cache_root / "distcc")})
        if ccache:
            changes["CCACHE_PREFIX"] = facts.distcc  # ccache first; what it misses compiles on the hosts
        else:
            c_launcher = facts.distcc
    cuda_launcher = None if facts.distcc and ccache else launcher  # CCACHE_PREFIX would send nvcc to distcc
    for lang, value in (("C", c_launcher), ("CXX", c_launcher), ("CUDA", cuda_launcher if toolkit else None)):
        if value:
            changes[f"CMAKE_{lang}_COMPILER_LAUNCHER"] = value
    if pytorch and not c_launcher:  # PyTorch's CMakeLists.txt takes a ccache from PATH by itself (USE_CCACHE ON)
        changes["USE_CCACHE"] = "OFF"
    if ccache:
        # an extension's editable build compiles in a new temporary folder (its cwd) by absolute paths: with no
        # base dir they hash alike there and in the kept tree, so its first in-place build hits
        changes.update({"CCACHE_DIR": str(cfg.cache_root / "ccache"), "CCACHE_BASEDIR": None if facts.torch_folder
                        else str(checkout), "CCACHE_NOHASHDIR": "1", "CCACHE_STATSLOG": str(stats_log),
                        "CCACHE_MAXSIZE": f"{cfg.cache.max_size_gb:g}G"})
        if remote:
            changes["CCACHE_REMOTE_STORAGE"] = remote
    elif launcher:
        changes.update({"SCCACHE_DIR": str(cfg.cache_root / "sccache"), "SCCACHE_BASEDIRS": str(checkout),
                        "SCCACHE_CACHE_SIZE": f"{int(cfg.cache.max_size_gb * 1024)}M"})
        if remote:
            changes["SCCACHE_REDIS_ENDPOINT" if remote.startswith("redis") else "SCCACHE_WEBDAV_ENDPOINT"] = remote
    return changes


def linker_changes(cfg: Config, facts: BuildFacts, base_env: Mapping[str, str], notes: list[str]
                   ) -> dict[str, str]:
    from ..toolchain.linkers import build_changes

    assert facts.linker is not None
    changes = build_changes(facts.linker, facts.cmake_version, base_env)
    how = "CMAKE_LINKER_TYPE" if "CMAKE_LINKER_TYPE" in changes else f"-fuse-ld={facts.linker.name}"
    notes.append(f"linker: {facts.linker.name} {facts.linker.version} (build.linker {cfg.build.linker}; {how})")
    return changes


def wheel_version(checkout: Path, toolkit: Toolkit | None, commit: str | None) -> dict[str, str]:
    """PYTORCH_BUILD_VERSION: the commit, then the variant (two commits' wheels differ, as PyTorch's own +git<sha>
    ones do, PEP 440), and PYTORCH_BUILD_NUMBER, which generate_torch_version.py asserts with it (> 1: .postN)."""
    from ..compat import checkout_version

    base = (checkout_version(checkout) or "0.0.0").split("+")[0]
    variant = "cu" + toolkit.version.replace(".", "") if toolkit else "cpu"
    return {"PYTORCH_BUILD_VERSION": f"{base}+git{commit[:7]}.{variant}" if commit else f"{base}+{variant}",
            "PYTORCH_BUILD_NUMBER": "1"}


def configure_of(full: Mapping[str, str], opts: BuildRequest, env: EnvChoice, cmake: bool = True
                 ) -> dict[str, str]:
    """The variables that change what CMake configures, and the interpreter (the core's: none, one for every
    Python). Where setuptools compiles the project itself (no CMake: torch-cluster, mmh3), CMAKE_* configure
    nothing: the compiler cache's launchers among them, whose folder may move without a unit changing."""
    configure = {k: v for k, v in full.items() if affects_configure(k) and (cmake or not k.startswith("CMAKE_"))}
    if opts.part == "core":
        configure.pop("CMAKE_PREFIX_PATH", None)  # each Python's env differs; the core does not
    else:
        configure["python"] = str(env.python)
    return configure


def after_install(driver: Driver, env: EnvChoice, toolkit: Toolkit | None, wheel: bool,
                  full: Mapping[str, str]) -> tuple[str, ...]:
    """The driver's step after an editable install of a CUDA build, unless TORCH_NATIVE_AOT=0 (or
    NATIVE_AOT=0, its earlier name) turns it off."""
    if wheel or toolkit is None or "0" in (full.get("TORCH_NATIVE_AOT"), full.get("NATIVE_AOT")):
        return ()
    return driver.after_install(str(env.python))


def remote_slots(hosts: list[str]) -> int:
    """Compile slots of distcc hosts `HOST[:PORT][/SLOTS]` (distcc's default: 4 a host)."""
    return sum(int(h.rsplit("/", 1)[1]) if "/" in h else 4 for h in hosts)


def describe(plan: Plan, base_env: Mapping[str, str]) -> list[str]:
    """The plan as the lines `--dry-run` prints."""
    tk = plan.toolkit
    lines = [
        f"checkout:    {plan.checkout}",
        f"interpreter: {plan.env.python} (Python {plan.env.version}; {plan.env.reason})",
        f"toolkit:     {f'CUDA {tk.full_version} at {tk.root}' if tk else 'none (a CPU build)'}",
        f"config:      {plan.key}",
        f"driver:      {plan.driver.describe() if plan.driver else 'unknown'}",
        f"build tree:  {plan.checkout / 'build'} (others kept in {plan.checkout / STATE / 'trees'})",
        f"MAX_JOBS:    {plan.jobs_reason}",
        f"cache:       {plan.launcher or 'none'} ({plan.cache_how})",
        f"log:         {plan.log}",
    ]
    if plan.dist:
        lines.append(f"wheel into:  {plan.dist}")
    lines += [f"note:        {n}" for n in plan.notes]
    lines.append("environment changes:")
    lines += [f"  {w}" for w in format_command([], base_env, plan.changes).split(" ") if w]
    lines.append(f"command:     (cd {plan.checkout} && {format_command(list(plan.command), base_env, {})})")
    return lines


