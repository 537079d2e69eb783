"""The build: a Plan (pure data, printed by --dry-run) and its execution.

One build tree per configuration (Python, CUDA, build type): PyTorch always builds in
`build/`, so the tree of the configuration being built is moved into `build/` and the others
wait in `.torchbuild/trees/<key>`. Switching back to a configuration is then an incremental
no-op instead of a rebuild. Within a tree, a changed configure environment (flags, arch list,
compiler) deletes CMakeCache.txt, which makes PyTorch's setup.py reconfigure (it otherwise keeps
the first options forever).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator, Mapping, Sequence

from . import console as _console
from .config import Config
from .envs import EnvChoice
from .errors import CommandError, TorchbuildError
from .progress import Tracker
from .run import format_command, run
from .toolchain import system
from .toolchain.cuda import Toolkit

MARKER = ".torchbuild.json"
STATE = ".torchbuild"
# Environment that changes what CMake configures (a change means: reconfigure this tree).
CONFIGURE_PREFIXES = ("USE_", "BUILD_", "CMAKE_")
CONFIGURE_NAMES = {"TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CUDACXX", "CUDAHOSTCXX", "DEBUG", "REL_WITH_DEB_INFO", "CC",
                   "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "BLAS"}
NOT_CONFIGURE = {"CMAKE_FRESH"}


def affects_configure(name: str) -> bool:
    """Whether a variable changes what CMake configures (launchers and CMAKE_FRESH do not)."""
    if name in NOT_CONFIGURE or name.endswith("_COMPILER_LAUNCHER"):
        return False
    return name in CONFIGURE_NAMES or name.startswith(CONFIGURE_PREFIXES)


@dataclass(frozen=True)
class BuildOptions:
    cuda: str = "auto"
    python: str | None = None
    env_name: str | None = None
    build_type: str = "release"
    jobs: int | None = None
    arch: str | None = None
    wheel: bool = False
    clean: bool = False
    sets: tuple[tuple[str, str], ...] = ()
    force: bool = False
    dry_run: bool = False
    verbose: bool = False
    dist: Path | None = None
    rerun: bool = False


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


@dataclass
class BuildResult:
    key: str
    seconds: float
    hits: int = 0
    misses: int = 0
    remote_hits: int = 0
    log: Path | None = None
    wheel: Path | None = None
    compiles: int = 0
    python: Path | None = None
    package: str = "torch"
    up_to_date: bool = False

    @property
    def hit_rate(self) -> float | None:
        total = self.hits + self.misses
        return self.hits / total if total else None


# ----------------------------------------------------------------------------- planning (pure)


def config_key(version: str, toolkit: Toolkit | None, build_type: str) -> str:
    minor = ".".join(version.split(".")[:2])
    cuda = f"cu{toolkit.version.replace('.', '')}" if toolkit else "cpu"
    return f"py{minor}-{cuda}-{build_type}"


def uses_pip_editable(checkout: Path, setuptools: str) -> bool:
    """setup.py develop where it works; `pip install -e` for setuptools >= 80 or no setup.py."""
    if not (checkout / "setup.py").is_file():
        return True
    major = re.match(r"(\d+)", setuptools or "")
    return major is None or int(major.group(1)) >= 80


def build_command(checkout: Path, env: EnvChoice, wheel: bool, dist: Path) -> tuple[str, ...]:
    py = str(env.python)
    pip = uses_pip_editable(checkout, env.setuptools)
    if wheel:
        if pip:
            return (py, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v", "-w", str(dist), ".")
        return (py, "setup.py", "bdist_wheel", "-d", str(dist))
    if pip:
        return (py, "-m", "pip", "install", "--no-build-isolation", "-v", "-e", ".")
    return (py, "setup.py", "develop")


def arch_supported(cuda: str, arch: str) -> bool:
    """Whether nvcc of this CUDA version accepts compute capability `arch` (8.0, 9.0a, 12.0+PTX)."""
    from .compat import vkey

    cap = vkey(arch.replace("+PTX", ""))[:2]
    cv = vkey(cuda)[:2]
    oldest = (7, 5) if cv >= (13, 0) else (5, 0) if cv >= (12, 0) else (3, 5) if cv >= (11, 0) else (3, 0)
    newest = next(cap_ for since, cap_ in (((12, 8), (12, 9)), ((11, 8), (9, 0)), ((11, 4), (8, 7)),
                                            ((11, 1), (8, 6)), ((11, 0), (8, 0)), ((10, 0), (7, 5)), ((0, 0), (7, 2)))
                  if cv >= since)
    return oldest <= cap <= newest


def make_plan(cfg: Config, opts: BuildOptions, env: EnvChoice, toolkit: Toolkit | None,
              host_cxx: str | None, gpu_arch: str | None, launcher: str | None, base_env: Mapping[str, str],
              notes: Sequence[str] = (), now: float | None = None, remote: str | None = None) -> Plan:
    """Everything a build will do, as data. Pure: the caller gathers the facts."""
    from .compat import default_arch_list
    from .toolchain.cuda import toolkit_env

    checkout = cfg.source_path
    key = config_key(env.version, toolkit, opts.build_type)
    notes = list(notes)
    changes: dict[str, str | None] = dict(toolkit_env(toolkit, base_env))
    env_bin = str(env.prefix / "bin")
    path = changes.get("PATH") or base_env.get("PATH", "")
    changes["PATH"] = env_bin + (os.pathsep + path if path else "")
    if env.name is not None or base_env.get("VIRTUAL_ENV") != str(env.prefix):
        changes["VIRTUAL_ENV"] = str(env.prefix)
    if toolkit is not None:
        arch = opts.arch or cfg.build.arch or gpu_arch or default_arch_list(toolkit.version)
        bad = [a for a in re.split(r"[;\s]+", arch) if a and not arch_supported(toolkit.version, a)]
        if bad:
            raise TorchbuildError(f"CUDA {toolkit.version} does not support compute capability {', '.join(bad)} "
                                  f"(TORCH_CUDA_ARCH_LIST={arch})",
                                  f"pass --arch with archs CUDA {toolkit.version} supports, e.g. "
                                  f"\"{default_arch_list(toolkit.version)}\"")
        source = "--arch" if opts.arch else "build.arch" if cfg.build.arch else "local GPUs" if gpu_arch else \
            f"CUDA {toolkit.version}'s release default"
        changes["TORCH_CUDA_ARCH_LIST"] = arch
        notes.append(f"TORCH_CUDA_ARCH_LIST={arch} ({source})")
        if host_cxx:
            changes["CUDAHOSTCXX"] = host_cxx
    jobs = opts.jobs or cfg.build.jobs
    if jobs:
        jobs_reason = f"{jobs} (--jobs / build.jobs)"
    else:
        chosen = system.choose_jobs(os.cpu_count() or 1, system.available_memory(), toolkit is not None)
        jobs, jobs_reason = chosen.jobs, chosen.reason
    changes["MAX_JOBS"] = str(jobs)
    prefix_path = base_env.get("CMAKE_PREFIX_PATH")
    changes["CMAKE_PREFIX_PATH"] = str(env.prefix) + (os.pathsep + prefix_path if prefix_path else "")
    changes["USE_NINJA"] = "1"
    changes["BUILD_TEST"] = "0"
    changes["DEBUG"] = "1" if opts.build_type == "debug" else None
    changes["REL_WITH_DEB_INFO"] = "1" if opts.build_type == "relwithdebinfo" else None
    if launcher:
        for lang in ("C", "CXX") + (("CUDA",) if toolkit else ()):
            changes[f"CMAKE_{lang}_COMPILER_LAUNCHER"] = launcher
    cache_dir = cfg.cache_root / "ccache"
    log_dir = cfg.root / cfg.paths.logs / key
    now = time.time() if now is None else now
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{int(now * 1000) % 1000:03d}"
    log = log_dir / f"{stamp}.log"
    stats_log = log_dir / f"{stamp}.ccache-stats"
    if launcher and Path(launcher).name.startswith("ccache"):
        changes.update({"CCACHE_DIR": str(cache_dir), "CCACHE_BASEDIR": str(checkout), "CCACHE_NOHASHDIR": "1",
                        "CCACHE_STATSLOG": str(stats_log)})
        if remote:
            changes["CCACHE_REMOTE_STORAGE"] = remote
    elif launcher:
        changes.update({"SCCACHE_DIR": str(cfg.cache_root / "sccache"), "SCCACHE_BASEDIRS": str(checkout)})
        if remote:
            changes["SCCACHE_REDIS_ENDPOINT" if remote.startswith("redis") else "SCCACHE_WEBDAV_ENDPOINT"] = remote
    dist = opts.dist or cfg.root / "dist"
    if opts.wheel:
        from .compat import checkout_version

        base = (checkout_version(checkout) or "0.0.0").split("+")[0]
        changes["PYTORCH_BUILD_VERSION"] = f"{base}+{'cu' + toolkit.version.replace('.', '') if toolkit else 'cpu'}"
    for k, v in {**cfg.build.env, **dict(opts.sets)}.items():
        changes[k] = v
    configure = {k: v for k, v in changes.items() if v is not None and affects_configure(k)}
    configure["python"] = str(env.python)
    return Plan(checkout, env, toolkit, key, configure, changes, build_command(checkout, env, opts.wheel, dist),
                log, stats_log, jobs_reason, tuple(notes), opts.wheel, dist if opts.wheel else None, launcher,
                package_name(checkout))


def package_name(checkout: Path) -> str:
    """What `import X` tests a build: torch for PyTorch, else the package next to setup.py."""
    if (checkout / "torch" / "__init__.py").exists() or not (checkout / "setup.py").exists():
        return "torch"
    pkgs = sorted(p.parent.name for p in checkout.glob("*/__init__.py") if not p.parent.name.startswith(("test", ".")))
    return pkgs[0] if pkgs else "torch"


def describe(plan: Plan, base_env: Mapping[str, str]) -> list[str]:
    """The plan as the lines `--dry-run` prints."""
    tk = plan.toolkit
    lines = [
        f"checkout:    {plan.checkout}",
        f"interpreter: {plan.env.python} (Python {plan.env.version}; {plan.env.reason})",
        f"toolkit:     {f'CUDA {tk.full_version} at {tk.root}' if tk else 'none (CPU build, USE_CUDA=0)'}",
        f"config:      {plan.key}",
        f"build tree:  {plan.checkout / 'build'} (others kept in {plan.checkout / STATE / 'trees'})",
        f"MAX_JOBS:    {plan.jobs_reason}",
        f"cache:       {plan.launcher or 'none (no ccache/sccache found)'}",
        f"log:         {plan.log}",
    ]
    if plan.dist:
        lines.append(f"wheel into:  {plan.dist}")
    lines += [f"note:        {n}" for n in plan.notes]
    lines.append("environment changes:")
    lines += [f"  {w}" for w in format_command([], base_env, plan.changes).split(" ") if w]
    lines.append(f"command:     (cd {plan.checkout} && {format_command(list(plan.command), base_env, {})})")
    return lines


# ----------------------------------------------------------------------------- build trees


def read_marker(tree: Path) -> dict[str, object] | None:
    try:
        data = json.loads((tree / MARKER).read_text())
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def trees_dir(checkout: Path) -> Path:
    return checkout / STATE / "trees"


def activate_tree(checkout: Path, key: str) -> str | None:
    """Put `key`'s tree at build/ (stashing the current one); return what happened, or None."""
    build = checkout / "build"
    stash = trees_dir(checkout)
    current = read_marker(build) if build.exists() else None
    if build.exists() and current and current.get("key") == key:
        return None
    stash.mkdir(parents=True, exist_ok=True)
    message = []
    if build.exists():
        old = str(current["key"]) if current else f"unknown-{time.strftime('%Y%m%d-%H%M%S')}"
        target = stash / old
        if target.exists():
            shutil.rmtree(target)
        os.replace(build, target)
        message.append(f"kept the {old} tree in {target}")
    if (stash / key).exists():
        os.replace(stash / key, build)
        message.append(f"restored the {key} tree")
    else:
        message.append(f"new tree for {key}")
    return "; ".join(message)


def configure_changes(old: Mapping[str, object] | None, new: Mapping[str, str]) -> list[str]:
    """What differs between the tree's last configure environment and this one."""
    if not old:
        return []
    diffs = []
    for k in sorted(set(old) | set(new)):
        if old.get(k) != new.get(k):
            diffs.append(f"{k}: {old.get(k, '(unset)')} -> {new.get(k, '(unset)')}")
    return diffs


@contextlib.contextmanager
def build_lock(checkout: Path) -> Iterator[None]:
    """One build per checkout at a time; the second waits and says so."""
    state = checkout / STATE
    state.mkdir(exist_ok=True)
    with open(state / "lock", "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            _console.get().warn(f"another build is running in {checkout} ({holder}); waiting for it to finish")
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}")
        fh.flush()
        try:
            yield
        finally:
            fh.truncate(0)
            fcntl.flock(fh, fcntl.LOCK_UN)


def exclude_state(checkout: Path) -> None:
    """Keep .torchbuild/ out of the checkout's `git status` (in .git/info/exclude, not .gitignore)."""
    git_dir = checkout / ".git"
    if git_dir.is_file():
        text = git_dir.read_text().strip()
        git_dir = (checkout / text.split(":", 1)[1].strip()).resolve() if text.startswith("gitdir:") else git_dir
    exclude = git_dir / "info" / "exclude"
    if not git_dir.is_dir():
        return
    current = exclude.read_text() if exclude.exists() else ""
    if f"/{STATE}/" not in current.split():
        exclude.parent.mkdir(parents=True, exist_ok=True)
        exclude.write_text(current + ("" if current.endswith("\n") or not current else "\n") + f"/{STATE}/\n")


# ----------------------------------------------------------------------------- execution


def parse_stats_log(text: str) -> tuple[int, int, int]:
    """(hits, misses, remote hits) from a ccache stats log (one counter name a line, `#` file lines)."""
    hits = misses = remote = 0
    for line in text.splitlines():
        word = line.strip()
        if word in ("direct_cache_hit", "preprocessed_cache_hit"):
            hits += 1
        elif word == "cache_miss":
            misses += 1
        elif word == "remote_storage_hit":
            remote += 1
    return hits, misses, remote


def check_disk(checkout: Path, min_free_gb: float) -> None:
    free = system.free_disk(checkout)
    if free < min_free_gb * system.GIB:
        raise TorchbuildError(f"only {free / system.GIB:.1f} GiB free at {checkout}; a build needs about "
                              f"{min_free_gb:.10g} GiB (build.min_free_gb)",
                              "free some space (inv clean --all removes stashed build trees), "
                              "or lower build.min_free_gb for a small project")


def execute(plan: Plan, opts: BuildOptions, base_env: Mapping[str, str]) -> BuildResult:
    """Run the plan: lock, swap in the tree, build with progress and a log."""
    con = _console.get()
    checkout = plan.checkout
    start = time.monotonic()
    result = BuildResult(plan.key, 0.0, log=plan.log, python=plan.env.python, package=plan.package)
    with build_lock(checkout):
        exclude_state(checkout)
        if opts.clean:
            _remove_tree(checkout, plan.key)
        swapped = activate_tree(checkout, plan.key)
        if swapped:
            con.info(swapped)
        build = checkout / "build"
        marker = read_marker(build) if build.exists() else None
        changed = configure_changes(marker.get("configure") if marker else None, plan.configure)  # type: ignore[arg-type]
        if changed and (build / "CMakeCache.txt").exists():
            con.info("configuration changed, reconfiguring: " + "; ".join(changed[:4])
                     + (f" (+{len(changed) - 4} more)" if len(changed) > 4 else ""))
            (build / "CMakeCache.txt").unlink()
        stamp = inputs_stamp(plan)
        if not (opts.wheel or opts.clean or opts.rerun or changed) and marker and marker.get("done") == stamp \
                and nothing_to_do(build, plan, base_env) and installed(plan):
            con.info("up to date: ninja has no work, the inputs and the install are unchanged; nothing was run "
                     "(--rerun runs the build command anyway)")
            result.seconds = time.monotonic() - start
            result.up_to_date = True
            return result
        build.mkdir(exist_ok=True)  # the tree is this configuration's from now on, even if interrupted
        write_marker(build, plan, None)
        plan.log.parent.mkdir(parents=True, exist_ok=True)
        if plan.dist:
            plan.dist.mkdir(parents=True, exist_ok=True)
        before = set(plan.dist.glob("*.whl")) if plan.dist else set()
        tracker = Tracker()
        con.info(f"building {plan.key} with MAX_JOBS={plan.changes.get('MAX_JOBS')}; log: {plan.log}")
        with open(plan.log, "w", buffering=1) as log:  # line-buffered: `tail -f` works
            log.write(format_command(list(plan.command), base_env, plan.changes, checkout) + "\n")
            try:
                run(list(plan.command), cwd=checkout, env=plan.changes, base_env=base_env, echo=opts.verbose,
                    on_line=_show(tracker, opts.verbose, log), log=log)
            except CommandError as exc:
                con.clear_progress()
                report = tracker.error_report()
                con.error(f"the build of {plan.key} failed; the first error:")
                for line in report:
                    con.info(f"  | {line}")
                raise TorchbuildError(f"the build of {plan.key} failed (exit {exc.returncode}); full log: {plan.log}",
                                      "fix the error above, then run `inv build` again (it resumes)") from None
        con.clear_progress()
        write_marker(build, plan, None if plan.wheel else stamp)
    result.seconds = time.monotonic() - start
    result.compiles = tracker.compiles
    if plan.stats_log.exists():
        result.hits, result.misses, result.remote_hits = parse_stats_log(plan.stats_log.read_text())
    if plan.dist:
        made = sorted(set(plan.dist.glob("*.whl")) - before) or sorted(plan.dist.glob("*.whl"),
                                                                         key=lambda p: p.stat().st_mtime)[-1:]
        result.wheel = made[-1] if made else None
    return result


def write_marker(build: Path, plan: Plan, done: str | None) -> None:
    data = {"key": plan.key, "configure": dict(plan.configure), "done": done}
    (build / MARKER).write_text(json.dumps(data, indent=2))


def inputs_stamp(plan: Plan) -> str:
    """What a no-op build depends on beyond ninja's graph: the command, the configure environment,
    the commit, and the files setup.py reads (setup.py, pyproject.toml, version.txt, requirements)."""
    import hashlib

    head = plan.checkout / ".git"
    files = []
    for name in ("setup.py", "pyproject.toml", "version.txt", "requirements.txt", "requirements-build.txt",
                 "CMakeLists.txt", ".gitmodules"):
        path = plan.checkout / name
        if path.exists():
            st = path.stat()
            files.append((name, st.st_size, st.st_mtime_ns))
    commit = ""
    if head.exists():
        commit = run(["git", "rev-parse", "HEAD"], cwd=plan.checkout, capture=True, echo=False,
                     check=False).stdout.strip()
    data = json.dumps([plan.command, sorted(plan.configure.items()), commit, files, str(plan.env.python)])
    return hashlib.sha256(data.encode()).hexdigest()[:20]


def nothing_to_do(build: Path, plan: Plan, base_env: Mapping[str, str]) -> bool:
    """`ninja -n` in the tree says there is no work (False without ninja or a ninja tree)."""
    if not (build / "build.ninja").exists():
        return False
    path = str(plan.changes.get("PATH") or base_env.get("PATH", ""))
    ninja = shutil.which("ninja", path=path)
    if ninja is None:
        return False
    res = run([ninja, "-C", str(build), "-n"], capture=True, echo=False, check=False)
    return res.returncode == 0 and "no work to do" in res.stdout


def installed(plan: Plan) -> bool:
    """The env still points at this checkout (an editable install) and the package's extensions exist."""
    package = plan.checkout / plan.package
    if not package.is_dir() or not any(package.glob("*.so")):
        return False
    for site in plan.env.prefix.glob("lib/python*/site-packages"):
        for link in list(site.glob("*.pth")) + list(site.glob("*.egg-link")) + list(site.glob("__editable__*")):
            try:
                if str(plan.checkout) in link.read_text(errors="replace"):
                    return True
            except (OSError, IsADirectoryError):
                continue
    return False


def _show(tracker: Tracker, verbose: bool, log: IO[str]):  # type: ignore[no-untyped-def]
    con = _console.get()

    def on_line(line: str) -> None:
        text = tracker.feed(line)
        if verbose:
            con.result(line)
        elif text:
            con.progress(text)

    return on_line


def _remove_tree(checkout: Path, key: str) -> int:
    freed = 0
    build = checkout / "build"
    marker = read_marker(build) if build.exists() else None
    for tree in ([build] if marker and marker.get("key") == key else []) + [trees_dir(checkout) / key]:
        if tree.exists():
            freed += tree_size(tree)
            shutil.rmtree(tree)
    return freed


def tree_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, f)).st_size
    return total


def clean(checkout: Path, all_trees: bool = False, key: str | None = None) -> list[tuple[str, int]]:
    """Remove build trees (never sources): the current one, `key`'s, or all. Returns (what, bytes)."""
    removed = []
    build = checkout / "build"
    marker = read_marker(build) if build.exists() else None
    current = str(marker["key"]) if marker else ("build" if build.exists() else None)
    targets: list[tuple[str, Path]] = []
    if all_trees:
        if build.exists():
            targets.append((current or "build", build))
        targets += [(p.name, p) for p in sorted(trees_dir(checkout).glob("*")) if p.is_dir()]
    elif key:
        if current == key:
            targets.append((key, build))
        if (trees_dir(checkout) / key).is_dir():
            targets.append((key, trees_dir(checkout) / key))
        if not targets:
            known = [p.name for p in trees_dir(checkout).glob("*")] + ([current] if current else [])
            raise TorchbuildError(f"no build tree for configuration '{key}'",
                                  f"known: {', '.join(sorted(known)) or 'none'}")
    elif build.exists():
        targets.append((current or "build", build))
    for what, path in targets:
        size = tree_size(path)
        shutil.rmtree(path)
        removed.append((f"{what} ({path})", size))
    return removed

