"""`inv doctor`: one table of what the machine has for building PyTorch, each row with a fix.

Facts are gathered once (probes in parallel) into `Facts`; rows are computed from them by pure
functions, one per section.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Mapping

from . import compat
from .builder.drivers import detect
from .builder.drivers.setuptools_era import SetuptoolsEra
from .builder.drivers.skbuild import ScikitBuildCore
from .builder.facts import needs_cuda
from .builder.ownership import keeping
from .config import Config
from .errors import TorchbuildError
from .run import run
from .toolchain import compiler_cache, compilers, cuda, gpu, linkers, python, search_path, system

OK, WARN, PROBLEM = "ok", "warning", "problem"
TOOLS = {
    "git": (["git", "--version"], "apt-get install git"),
    "cmake": (["cmake", "--version"], "pip install cmake (in the build env) or apt-get install cmake"),
    "ninja": (["ninja", "--version"], "pip install ninja"),
    "distcc": (["distcc", "--version"], "apt-get install distcc (only needed for build.distributed: distcc)"),
}


@dataclass(frozen=True)
class Row:
    name: str
    status: str
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class Submodules:
    total: int
    missing: int
    other_commit: int
    conflict: int
    nested: tuple[str, ...] = ()  # a submodule's own submodules not checked out, in a project that is not PyTorch
    left_out: int = 0  # not checked out, and `update = none` in .gitmodules: git's own update leaves them out too


@dataclass(frozen=True)
class Facts:
    """Everything the doctor reports, probed once."""

    tools: dict[str, str | None]
    pythons: list[python.Python]
    toolkits: list[cuda.Toolkit]
    compilers: list[compilers.Compiler]
    gpu: gpu.GpuInfo
    submodules: Submodules | None
    checkout: Path
    torch_version: str | None
    memory: int
    cpus: int
    disk: dict[str, int]
    min_free_gb: float
    linkers: list[linkers.Linker] = field(default_factory=list)
    linker_setting: str = "auto"
    linker_times: dict[str, float] | None = None  # the linker trial's seconds (toolchain/linkers.py)
    driver: str | None = None  # the checkout's build driver (builder/drivers), None without a checkout
    pytorch: bool = True  # the checkout is PyTorch's (or not cloned yet): PyTorch's words apply
    cuda_project: bool = True  # its build uses CUDA (builder.facts.needs_cuda): CUDA jobs' memory applies
    cache: compiler_cache.CompilerCache | str = ""  # the builds' compiler cache, or why cache.tool finds none
    next_tree: tuple[str, int] | None = None  # a first build of the configuration asked needs about this tree's size

    @property
    def release(self) -> compat.Release | None:
        return compat.release_for(self.torch_version) if self.torch_version else None


def tool_version(argv: list[str], env: Mapping[str, str]) -> str | None:
    program = shutil.which(argv[0], path=search_path(env))
    if program is None:
        return None
    res = run([program, *argv[1:]], capture=True, echo=False, check=False)
    m = re.search(r"\d+\.\d+(\.\d+)?", res.stdout + res.stderr)
    return m.group(0) if res.returncode == 0 and m else "?"


def gather(cfg: Config, env: Mapping[str, str]) -> Facts:
    """Every fact the doctor reports, probed once, in parallel."""
    checkout = cfg.source_path
    with ThreadPoolExecutor(max_workers=8) as pool:
        tools = {name: pool.submit(tool_version, argv, env) for name, (argv, _) in TOOLS.items()}
        pythons = pool.submit(python.discover, env, cfg.toolchain.pythons)
        kits = pool.submit(cuda.for_config, cfg, env)
        ccs = pool.submit(compilers.discover, env)
        gpus = pool.submit(gpu.detect, env)
        subs = pool.submit(_submodule_state, checkout)
        lds = pool.submit(linkers.discover, env.get("CXX") or "c++", env, cfg.cache_root / "linkers.json")
        cache = pool.submit(builds_cache, cfg, env)
        return Facts(
            tools={k: f.result() for k, f in tools.items()},
            pythons=pythons.result(),
            toolkits=kits.result(),
            compilers=ccs.result(),
            gpu=gpus.result(),
            submodules=subs.result(),
            checkout=checkout,
            torch_version=compat.checkout_version(checkout),
            memory=system.available_memory(cfg.build.memory_gb),
            cpus=os.cpu_count() or 1,
            disk={str(checkout): system.free_disk(checkout), str(cfg.cache_root): system.free_disk(cfg.cache_root)},
            min_free_gb=cfg.build.min_free_gb,
            linkers=lds.result(),
            linker_setting=cfg.build.linker,
            linker_times=linkers.measured(lds.result(), cfg.cache_root / "linkers.json"),
            driver=detect(checkout).describe() if buildable(checkout) else None,
            pytorch=detect(checkout).pytorch() if buildable(checkout) else True,
            cuda_project=needs_cuda(checkout),
            cache=cache.result(),
            next_tree=next_tree(cfg),
        )


def next_tree(cfg: Config) -> tuple[str, int] | None:
    """The tree whose size a first build of the configuration asked (build.python, build.cuda, build.build_type)
    likely needs: the kept tree nearest it (the most of those parts alike, then the largest); None where that
    configuration has a tree already (its next build is incremental) or there is none to measure."""
    if not cfg.source_path.is_dir():
        return None
    wanted = asked_parts(cfg)
    trees = keeping.configurations(cfg.source_path)
    if None not in wanted and any(t.key == "-".join(wanted) for t in trees):  # type: ignore[arg-type]
        return None
    nearest = max(trees, key=lambda t: (sum(w == p for w, p in zip(wanted, t.key.split("-"))), t.bytes),
                  default=None)
    return (nearest.key, nearest.bytes) if nearest else None


def asked_parts(cfg: Config) -> tuple[str | None, str | None, str]:
    """The parts of the configuration key the settings fix (py3.12, cu130 or cpu, release); None: found at build."""
    py = cfg.build.python
    minor = f"py{py}" if py and re.fullmatch(r"\d+\.\d+", py) else None if py else \
        f"py{sys.version_info[0]}.{sys.version_info[1]}"
    cuda = cfg.build.cuda
    tag = "cpu" if cuda in ("none", "cpu") else None if cuda == "auto" else \
        "cu" + (cuda if "." in cuda else f"{cuda}.0").replace(".", "")
    return minor, tag, cfg.build.build_type


def builds_cache(cfg: Config, env: Mapping[str, str]) -> compiler_cache.CompilerCache | str:
    """The compiler cache a build would run behind (nothing provisioned here), with its version."""
    try:
        found = compiler_cache.find(cfg.cache.tool, cfg.build.ccache, cfg.cache_root, Path(sys.prefix), env,
                                    sys.executable, (), provision=False)
    except TorchbuildError as err:
        return f"{err.message} ({err.hint})"
    if found.path and found.how.endswith("from PATH"):
        name = Path(found.path).name
        return compiler_cache.CompilerCache(found.path, f"{name} {tool_version([found.path, '--version'], env)} "
                                                        "from PATH")
    return found


def _submodule_state(checkout: Path) -> Submodules | None:
    """`git submodule status --recursive`, counted. A missing submodule whose .gitmodules says `update = none`
    is left out, as git's update leaves it; outside PyTorch (whose build reads fbgemm's own submodules), a
    missing submodule of a submodule (rapidjson's googletest) is one the project's build seldom reads."""
    if not (checkout / ".git").exists():
        return None
    res = run(["git", "submodule", "status", "--recursive"], cwd=checkout, capture=True, echo=False, check=False)
    lines = [(ln[:1], ln[1:].split()[1]) for ln in res.stdout.splitlines() if len(ln[1:].split()) > 1]
    paths = {path for _, path in lines}
    absent = [path for mark, path in lines if mark == "-"]
    left_out = [path for path in absent if declared_update(checkout, path, paths) == "none"]
    pytorch = SetuptoolsEra.matches(checkout) or ScikitBuildCore.is_pytorch(checkout)
    nested = [path for path in absent if path not in left_out and not pytorch and parent_of(path, paths)]
    missing = len(absent) - len(left_out) - len(nested)
    return Submodules(len(lines), missing, sum(m == "+" for m, _ in lines), sum(m == "U" for m, _ in lines),
                      tuple(nested), len(left_out))


def submodule_row(subs: Submodules) -> Row:
    """A problem where the project's own submodules are missing or conflicted; a warning where only a
    submodule's own submodules are (the project's build may never read them)."""
    bad = subs.missing + subs.conflict
    detail = f"{subs.total} submodules, {subs.missing} missing, {subs.other_commit} at other commits" + \
        (f", {subs.left_out} left out by .gitmodules (update = none)" if subs.left_out else "")
    if subs.nested:
        detail += f"; not checked out: {len(subs.nested)} submodule(s) of a submodule " \
            f"({', '.join(subs.nested[:3])}), which a build reads only where it builds that submodule's own tree"
    status = PROBLEM if bad else WARN if subs.nested else OK
    return Row("submodules", status, detail, "inv sync" if bad or subs.nested else "")


def parent_of(path: str, paths: set[str]) -> str | None:
    """The submodule (of `paths`) whose tree holds `path`, the nearest (None: the checkout's own)."""
    return max((p for p in paths if path.startswith(p + "/")), key=len, default=None)


GITMODULES_SECTION = re.compile(r'(?m)^\s*\[submodule\s+"[^"]*"\]((?:\n(?!\s*\[).*)*)')


def declared_update(checkout: Path, path: str, paths: set[str]) -> str | None:
    """The `update` its parent's .gitmodules declares for the submodule at `path` (None: none)."""
    parent = parent_of(path, paths)
    root = checkout / parent if parent else checkout
    try:
        text = (root / ".gitmodules").read_text(errors="replace")
    except OSError:
        return None
    own = path[len(parent) + 1:] if parent else path
    for body in GITMODULES_SECTION.findall(text):
        fields = dict(re.findall(r"(?m)^\s*(\w+)\s*=\s*(.*?)\s*$", body))
        if fields.get("path") == own:
            return fields.get("update")
    return None


def rows(facts: Facts) -> list[Row]:
    """The doctor's table from gathered facts. Pure."""
    return (tool_rows(facts) + compiler_rows(facts) + linker_rows(facts) + cuda_rows(facts) + gpu_rows(facts)
            + python_rows(facts) + machine_rows(facts) + checkout_rows(facts))


def cache_row(facts: Facts) -> Row:
    """The builds' compiler cache: found, provisioned, to be provisioned by the first build, or none."""
    cache = facts.cache
    if isinstance(cache, str):
        return Row("compiler cache", PROBLEM, cache)
    if cache.path is None:
        return Row("compiler cache", WARN, cache.how, "set cache.tool: auto (ccache from PATH, else provisioned)")
    return Row("compiler cache", OK, f"{cache.path} ({cache.how})" if os.access(cache.path, os.X_OK) else cache.how)


def tool_rows(facts: Facts) -> list[Row]:
    out = [cache_row(facts)] if facts.cache else []
    release = facts.release
    for name, version in facts.tools.items():
        fix = TOOLS[name][1]
        if version is None:
            out.append(Row(name, PROBLEM if name == "git" else WARN, "not found", fix))
        elif name == "cmake" and release and compat.vkey(version) < compat.vkey(release.cmake):
            out.append(Row(name, WARN, f"{version} (PyTorch {release.version} needs >= {release.cmake})",
                           f"pip install 'cmake>={release.cmake}' in the build env"))
        else:
            out.append(Row(name, OK, version))
    return out


def compiler_rows(facts: Facts) -> list[Row]:
    release = facts.release
    if not facts.compilers:
        return [Row("compiler", PROBLEM, "no gcc/g++ or clang found", "apt-get install g++")]
    out = []
    for c in facts.compilers:
        low = release is not None and c.kind == "gcc" and compat.vkey(c.version)[:2] < compat.vkey(release.gcc)[:2]
        out.append(Row(f"{c.kind} {c.cxx.name}", WARN if low else OK, f"{c.version} ({c.cxx})",
                       f"PyTorch {release.version} needs gcc >= {release.gcc}" if low and release else ""))
    return out


def linker_rows(facts: Facts) -> list[Row]:
    """Each linker here, whether the compiler takes it, and which one a build would use."""
    try:
        chosen = linkers.choose(facts.linker_setting, facts.linkers, facts.linker_times)
        problem = ""
    except TorchbuildError as exc:
        chosen, problem = None, f"{exc.message} ({exc.hint})"
    times = facts.linker_times or {}
    out = [Row(f"linker {ln.name}", OK if ln.accepted else WARN,
               f"{ln.version} ({ln.path})" + (f", {times[ln.name]:.2f}s in the linker trial" if ln.name in times
                                               else "")
               + (" <- builds link with it" if chosen == ln else "")
               + ("" if ln.accepted else f"; the compiler refuses it: {ln.problem}"))
           for ln in facts.linkers]
    missing = [n for n in linkers.AUTO if n not in {ln.name for ln in facts.linkers}]
    if missing:
        out.append(Row("linker", WARN if chosen is None else OK, f"{' and '.join(missing)} not installed",
                       f"apt-get install {' '.join(linkers.PACKAGE[n] for n in missing)} (faster relinks)"))
    if problem:
        out.append(Row("linker", PROBLEM, problem))
    return out


def cuda_rows(facts: Facts) -> list[Row]:
    info = facts.gpu
    if not facts.toolkits:
        return [Row("cuda", WARN, "no CUDA toolkit found (CPU builds only)", "inv cuda.install 13.0")]
    out = []
    gccs = [c for c in facts.compilers if c.kind == "gcc"]
    for i, tk in enumerate(facts.toolkits):
        alias = f", alias {', '.join(map(str, tk.aliases))}" if tk.aliases else ""
        detail = f"{tk.full_version} at {tk.root}{alias}; cudart {'yes' if tk.cudart else 'no'}; " \
                 f"cuDNN {tk.cudnn or 'no'}{' (default)' if i == 0 else ''}"
        limit = compilers.max_gcc(tk.version)
        if tk.problems:
            out.append(Row(f"cuda {tk.version}", PROBLEM, detail + "; " + "; ".join(tk.problems),
                           "reinstall it or remove it from toolchain.cuda_roots"))
        elif limit and gccs and min(c.major for c in gccs) > limit:
            out.append(Row(f"cuda {tk.version}", PROBLEM, detail + f"; needs gcc <= {limit}, none found",
                           f"apt-get install g++-{limit}"))
        elif info.driver_cuda and compat.vkey(tk.version) > compat.vkey(info.driver_cuda):
            out.append(Row(f"cuda {tk.version}", WARN, detail + f"; newer than the driver's CUDA {info.driver_cuda}",
                           "update the NVIDIA driver, or build with an older toolkit"))
        else:
            out.append(Row(f"cuda {tk.version}", OK, detail))
    return out


def gpu_rows(facts: Facts) -> list[Row]:
    info = facts.gpu
    if not info.gpus:
        return [Row("gpu", OK, "none found: CUDA builds target the toolkit's default arch list")]
    return [Row("gpu", OK, f"{g.name}, compute {g.compute_cap}, driver {g.driver} (CUDA {info.driver_cuda or '?'})")
            for g in info.gpus]


def python_rows(facts: Facts) -> list[Row]:
    release = facts.release
    out = []
    for py in facts.pythons:
        if py.problem:
            out.append(Row(f"python {py.path}", WARN, py.problem, "remove or repair that interpreter"))
            continue
        notes = []
        level = OK
        if not py.venv:
            notes.append("no venv module" if py.key >= (3,) else
                         "Python 2: no venv" + (", no PyTorch since 1.5" if facts.pytorch else ""))
            level = WARN
        if release and facts.torch_version and compat.problems(facts.torch_version, py.version, None, None)[1]:
            notes.append(f"outside PyTorch {release.version}'s {release.python[0]}–{release.python[1]}")
        extra = f" ({'; '.join(notes)})" if notes else ""
        out.append(Row(f"python {py.minor}", level, f"{py.version} {py.implementation} at {py.path} [{py.found_by}]"
                       f"{extra}", "install python3-venv" if not py.venv and py.key >= (3,) else ""))
    return out


def machine_rows(facts: Facts) -> list[Row]:
    jobs = system.choose_jobs(facts.cpus, facts.memory, cuda=bool(facts.toolkits) and facts.cuda_project)
    out = [Row("memory", OK, f"{facts.memory / system.GIB:.1f} GiB available; MAX_JOBS would be {jobs.reason}")]
    need = facts.min_free_gb * system.GIB
    for where, free in facts.disk.items():
        level = OK if free >= need else PROBLEM
        out.append(Row("disk", level, f"{free / system.GIB:.1f} GiB free at {where}",
                       "" if level == OK else f"free space: a {'PyTorch ' if facts.pytorch else ''}build needs about "
                       f"{facts.min_free_gb:g} GiB (build.min_free_gb)"))
    tree = facts.next_tree
    left = facts.disk.get(str(facts.checkout))
    if tree and left is not None and left < tree[1]:
        out.append(Row("disk", WARN, f"{left / system.GIB:.1f} GiB free at {facts.checkout}, and a first build of "
                       f"the configuration asked needs about {tree[1] / system.GIB:.1f} GiB (the size of the "
                       f"{tree[0]} tree, the nearest kept)", "free space: `torchbuild trees` lists what torchbuild "
                       "keeps; `torchbuild clean --older-than DAYS` or `--keep N` removes the least used"))
    return out


def buildable(checkout: Path) -> bool:
    return (checkout / "setup.py").is_file() or (checkout / "pyproject.toml").is_file()


def checkout_rows(facts: Facts) -> list[Row]:
    if facts.torch_version:
        out = [Row("checkout", OK, f"PyTorch {facts.torch_version} at {facts.checkout}")]
    elif facts.driver:
        out = [Row("checkout", OK, f"{facts.checkout.name} at {facts.checkout}")]
    else:
        out = [Row("checkout", WARN, f"no checkout at {facts.checkout}", "inv clone")]
    if facts.driver:
        out.append(Row("build driver", OK, facts.driver))
    if facts.submodules:
        out.append(submodule_row(facts.submodules))
    return out


def as_json(facts: Facts, table: list[Row]) -> dict[str, object]:
    def plain(value: object) -> object:
        if hasattr(value, "__dataclass_fields__"):
            return {k: plain(v) for k, v in asdict(value).items()}  # type: ignore[call-overload]
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, Path):
            return str(value)
        return value

    levels = {r.status for r in table}
    status = PROBLEM if PROBLEM in levels else WARN if WARN in levels else OK
    return {"status": status, "rows": [asdict(r) for r in table],
            "facts": {f.name: plain(getattr(facts, f.name)) for f in fields(facts)}}
