"""The Python x CUDA matrix: what the nox sessions are, what one session does, and the summary.

A session builds a wheel of the checkout with the same library calls as `inv build --wheel`,
into dist/<session>/, then installs it into a fresh venv and imports it. Every session shares
one compiler cache (and one build tree per configuration), so the Python-independent core is
compiled once per CUDA version and reused by the other Pythons.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Mapping

from . import console as _console
from . import wheels
from .builder import BuildRequest, Outcome, build, report
from .builder.execute import BuildResult
from .builder.facts import needs_cuda
from .builder.ownership.changes import worktree_state
from .builder.ownership.records import read_marker
from .builder.ownership.trees import activate_tree, build_lock
from .builder.request import drives_cmake, split_supported
from .builder.slots import SLOTS_ENV, take_slot
from .config import Config
from .digest import digest
from .errors import Interrupted, TorchbuildError
from .freshness import STARTED, fingerprint, stamped
from .locks import locked
from .run import run
from .summary import SUMMARY, SessionRecord, install_torch, write_summary

CORE = "core"  # in place of a Python in the core's fingerprint
CORE_STAMP = "core.json"  # the core's wheel and fingerprint, beside the wheel
INSTALL_STAMP = ".torchbuild-installed"


CPU = ("none", "cpu")
# A session in nox's env builds its own tree (its key ends with this): the developer's tree of the same Python,
# CUDA and build type is another env's, and a build of it there would configure it again, twice.
APART = "nox"


def session_name(python: str, cuda: str) -> str:
    return f"build-{python}(cuda='{cuda}')"


def session_folder(python: str, cuda: str) -> str:
    """The session's folder under dist/: its name without shell-special characters (build-3.10-cuda-none)."""
    return f"build-{python}-cuda-{cuda}"


def combos(cfg: Config) -> list[tuple[str, str]]:
    """(python, cuda) pairs: pythons x cudas, plus include, minus exclude; config order."""
    pairs = [(p, c) for p in cfg.matrix.pythons for c in cfg.matrix.cudas]
    for item in cfg.matrix.include:
        py, _, cuda = item.partition(":")
        if (py, cuda) not in pairs:
            pairs.append((py, cuda))
    excluded = {tuple(e.split(":", 1)) for e in cfg.matrix.exclude}
    pairs = [pair for pair in pairs if pair not in excluded]
    if any(c not in CPU for _, c in pairs) and not needs_cuda(cfg.source_path):  # one CPU session a Python will do
        cpus = {p: c for p, c in reversed(pairs) if c in CPU}
        return list(dict.fromkeys((p, cpus.get(p, "none")) for p, _ in pairs))
    return pairs


def axes(cfg: Config) -> tuple[list[str], list[str], set[tuple[str, str]]]:
    """For the noxfile: (pythons, cudas, the pairs that are really sessions)."""
    pairs = combos(cfg)
    pythons = list(dict.fromkeys(p for p, _ in pairs))
    cudas = list(dict.fromkeys(c for _, c in pairs))
    return pythons, cudas, set(pairs)


def skip_reason(cfg: Config, python: str, cuda: str) -> str | None:
    """Why the compatibility table rejects this pair for the checkout (None: build it)."""
    from . import compat

    version = compat.checkout_version(cfg.source_path)
    if not version:
        return None
    hard, soft = compat.problems(version, python, None if cuda in ("none", "cpu") else cuda, None,
                                 compat.python_minimum(cfg.source_path))
    if not hard + soft:
        return None
    other = compat.newest_release_for_python(python)
    fix = f"`inv clone --ref v{other}` checks out a release that supports Python {python}" if other else ""
    if hard:  # the checkout's own limit: --force does not pass it
        return f"{hard[0]}" + (f" ({fix})" if fix else "")
    return f"{soft[0]} (--force builds it anyway" + (f"; {fix})" if fix else ")")


def run_session(cfg: Config, python: str, cuda: str, force: bool = False, venv: Path | None = None,
                env: Mapping[str, str] | None = None, started: float | None = None) -> SessionRecord:
    """Build one pair's wheel (in `venv`, nox's env for the session) and smoke-import it.

    The record (with what the session waited for, and its fingerprint) is merged into
    dist/matrix-summary.json."""
    env = dict(os.environ if env is None else env)
    if venv is not None:  # nox's env: the build runs in it as "the active environment"
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = str(venv / "bin") + os.pathsep + env.get("PATH", "")
    name = session_name(python, cuda)
    source = worktree_state(cfg.source_path, True)  # before the build: an edit during it leaves the session stale
    start = time.monotonic()
    waits = {"queued": round(max(0.0, (started or time.time()) - float(env[STARTED])), 2)} if env.get(STARTED) else {}
    record = SessionRecord(name, python, cuda, env=str(venv or ""))
    con = _console.get()
    reason = None if force else skip_reason(cfg, python, cuda)
    if reason:
        record = dataclasses.replace(record, result="skipped", reason=reason)
        con.warn(f"{name}: skipped: {reason}")
    else:
        try:
            record = build_session(cfg, record, force, venv, env, source, waits)
        except TorchbuildError as exc:
            record = dataclasses.replace(record, result="failed", reason=exc.message)
            con.error(f"{name}: {exc.message}", exc.hint)
        except Exception as exc:  # a crash is a failed session too: the summary never keeps an old "ok"
            if env.get("TORCHBUILD_DEBUG"):
                raise
            reason = f"torchbuild crashed: {type(exc).__name__}: {exc}"
            record = dataclasses.replace(record, result="failed", reason=reason)
            con.error(f"{name}: {reason}", "run it alone with TORCHBUILD_DEBUG=1 for the traceback, and report it")
    if record.result == "skipped":
        record = stamped(cfg, record, venv, source, [])
    record = dataclasses.replace(record, seconds=round(time.monotonic() - start, 2),
                                 waits={k: round(v, 2) for k, v in waits.items() if v >= 0.05})
    write_summary(cfg.root / "dist" / SUMMARY, record)
    return record


def build_session(cfg: Config, record: SessionRecord, force: bool, venv: Path | None, env: Mapping[str, str],
                  source: list[object], waits: dict[str, float]) -> SessionRecord:
    """The session's wheel (the split build's Python part against its core, or the whole build), imported in a
    fresh env; the record stamped with what it depends on (`waits` gains what it waited for)."""
    python, cuda = record.python, record.cuda
    dist = cfg.root / "dist" / session_folder(python, cuda)
    own = dataclasses.replace(cfg, build=dataclasses.replace(cfg.build, torch=None))  # the env's torch: its wheel
    request = dataclasses.replace(BuildRequest.resolve(own, wheel=True, dist=dist, force=force), cuda=cuda,
                                  python=None if venv is not None else python, apart=APART if venv else "",
                                  again_as=f'inv matrix --session "{record.session}"')  # what the hints name
    split = cfg.matrix.split and split_supported(cfg.source_path)
    against = install_torch(cfg, python, cuda, venv / "bin" / "python" if venv else Path(sys.executable))
    core, core_waits = build_core(cfg, request, env, source, venv / "bin" / "python" if venv else None) \
        if split else (None, {})
    if split:
        result = build_in_slot(cfg, dataclasses.replace(request, part="python"), env)
    elif drives_cmake(cfg.source_path) and compiler_cache(cfg, venv, env):
        result, core_waits = build_after_first(cfg, request, env, source)
    else:
        result = build_in_slot(cfg, request, env)
    for what, seconds in (*core_waits.items(), ("checkout", result.waited_for_checkout),
                          ("job slot", result.waited_for_jobs)):
        waits[what] = waits.get(what, 0.0) + seconds
    record = dataclasses.replace(record, hits=result.hits, misses=result.misses, hit_rate=result.hit_rate,
                                 wheel=str(result.wheel) if result.wheel else None,
                                 path="split" if split else "one build",
                                 profile=str((result.profile or {}).get("html") or ""))
    if result.wheel is None:
        raise TorchbuildError(f"the build left no wheel in {dist}", "look at the build log")
    given = [*against, *([core] if core else [])]
    smoke_import(Path(str(result.python)), result.wheel, result.package, given, split or bool(against))
    record = dataclasses.replace(record, warning=wheels.manylinux_warning(result.wheel, given))
    if record.warning:
        _console.get().warn(f"{record.session}: the wheel {record.warning}")
    return stamped(cfg, dataclasses.replace(record, core=str(core) if core else None), venv, source,
                   [result.wheel, core])


def budget(cfg: Config, pairs: list[tuple[str, str]]) -> tuple[int, str]:
    """The job budget: MAX_JOBS of one build from cores and memory (CUDA's if any), plus distcc's slots."""
    from .builder.plan import remote_slots
    from .toolchain import system

    chosen = system.choose_jobs(os.cpu_count() or 1, system.available_memory(cfg.build.memory_gb),
                                any(c not in ("none", "cpu") for _, c in pairs))
    if cfg.build.jobs:
        return cfg.build.jobs, f"{cfg.build.jobs} (build.jobs)"
    if cfg.build.distributed == "distcc" and cfg.build.hosts:
        slots = remote_slots(cfg.build.hosts)
        return chosen.jobs + slots, f"{chosen.jobs + slots} ({chosen.reason} + {slots} distcc slots)"
    return chosen.jobs, chosen.reason


def build_in_slot(cfg: Config, request: BuildRequest, env: Mapping[str, str]) -> BuildResult:
    """Build in a free slot: the checkout, or beside another session a synced copy of it. In the checkout, the
    configuration it held before is put back afterwards (build_and_give_back)."""
    with take_slot(cfg.cache_root, cfg.source_path, int(env.get(SLOTS_ENV) or 1)) as where:
        if where != cfg.source_path:
            _console.get().info(f"building in the slot {where} (a synced copy of {cfg.source_path})")
        here = dataclasses.replace(cfg, source=dataclasses.replace(cfg.source, path=str(where)))
        outcome = build_and_give_back(here, request, env) if where == cfg.source_path else build(here, request, env)
    report(outcome)
    assert outcome.result is not None
    return outcome.result


def build_and_give_back(cfg: Config, request: BuildRequest, env: Mapping[str, str]) -> Outcome:
    """A session's build in the checkout itself, then the configuration the checkout held before (the
    developer's) put back, if no other build came in between: their env imports it again at once."""
    checkout = cfg.source_path
    held = read_marker(checkout / "build")
    outcome = build(cfg, request, env)
    if held and outcome.result is not None:
        with build_lock(checkout):
            now = read_marker(checkout / "build")
            back = activate_tree(checkout, held.key) if now and now.key == outcome.result.key else None
        if back:
            _console.get().info(f"gave the checkout back to {held.key}: {back}")
    return outcome


def build_core(cfg: Config, request: BuildRequest, env: Mapping[str, str], source: list[object],
               python: Path | None = None, install: bool = True) -> tuple[Path, dict[str, float]]:
    """The split build's first half: the Python-independent core's wheel for this CUDA and build type,
    built once, tagged for any Python, and installed into this session's env (`python`'s) unless it is
    there already (or `install` is off). A session that finds the core's fingerprint unchanged (what
    `source` and the settings say; the wheel kept) takes the wheel without a build: sessions side by side
    do not queue on the checkout to learn that there is nothing to do. Returns the wheel and the seconds
    waited: for another session building the core, for the checkout, for job slots."""
    core = cfg.root / "dist" / f"core-{request.cuda}-{request.build_type}"
    waits: dict[str, float] = {}
    built = False
    wheel = kept_core(cfg, request, core) if python else None
    if wheel is None:
        asked = time.monotonic()
        with locked(core.with_suffix(".lock"), f"building the core into {core}",
                    "another session is building the core"):  # sessions side by side: the first builds it
            waits["core"] = time.monotonic() - asked
            wheel = kept_core(cfg, request, core) if python else None  # built while this one waited
            if wheel is None:
                with take_slot(cfg.cache_root, cfg.source_path, 1):  # the core builds in the checkout itself
                    done = build_and_give_back(cfg, dataclasses.replace(request, part="core", dist=core), env).result
                if done is None or done.wheel is None:
                    raise TorchbuildError(f"the core build left no wheel in {core}", "look at the build log")
                python, built = python or Path(str(done.python)), True
                waits.update({"checkout": done.waited_for_checkout, "job slot": done.waited_for_jobs})
                wheel = wheels.any_python(done.wheel, core / "py3")
                (core / CORE_STAMP).write_text(json.dumps(
                    {"wheel": str(wheel), "fingerprint": core_fingerprint(cfg, request, source, wheel)}))
    assert python is not None
    stamp = python.parent.parent / ".torchbuild-core"
    installed = f"{wheel} {wheel.stat().st_mtime_ns}"
    if install and not (stamp.exists() and stamp.read_text() == installed):
        wheels.install([wheel], python, replace=True)
        stamp.write_text(installed)
    _console.get().info(f"core: {wheel.name}, built once for every Python of this CUDA"
                        + ("" if built else "; nothing it depends on changed since it was built"))
    return wheel, waits


def compiler_cache(cfg: Config, venv: Path | None, env: Mapping[str, str]) -> bool:
    """Whether the sessions' builds have a compiler cache to fill (only then does waiting for the first pay)."""
    from .builder.facts import find_launcher

    with contextlib.suppress(TorchbuildError):
        return find_launcher(cfg, venv or Path(sys.prefix), env).path is not None
    return False


def build_after_first(cfg: Config, request: BuildRequest, env: Mapping[str, str],
                      source: list[object]) -> tuple[BuildResult, dict[str, float]]:
    """A whole build (no split build) once the compiler cache is warm for this checkout: the first session
    of a CUDA builds alone, the others wait for it, then compile from the cache it filled instead of
    compiling the same units beside it at the same time. A stamp (the checkout's fingerprint, as the
    core's) says the cache is warm; a failed first build leaves none, and the next session goes first."""
    stamp = cfg.root / "dist" / f"warm-{request.cuda}-{request.build_type}.json"
    wanted = fingerprint(cfg, "warm", request.cuda, None, [request.build_type, *source], [])

    def warm() -> bool:
        try:
            return bool(json.loads(stamp.read_text()).get("fingerprint") == wanted)
        except (OSError, ValueError, AttributeError):
            return False

    waits: dict[str, float] = {}
    if not warm():
        asked = time.monotonic()
        with locked(stamp.with_suffix(".lock"), f"filling the compiler cache for {stamp.stem}",
                    "another session of this CUDA builds first, filling the compiler cache"):
            waits["first build"] = time.monotonic() - asked
            if not warm():
                result = build_in_slot(cfg, request, env)
                stamp.parent.mkdir(parents=True, exist_ok=True)
                stamp.write_text(json.dumps({"fingerprint": wanted}))
                return result, waits
    return build_in_slot(cfg, request, env), waits


def cores_ahead(cfg: Config, todo: list[tuple[str, str]]) -> dict[str, Path]:
    """The cores `inv matrix` can build itself while nox starts the sessions: for each CUDA of the split
    sessions to run, the env an earlier run made and filled for one of them (nox's, in cfg.nox_envs),
    {cuda: venv}. The sessions find the core being built, wait and take it: nox's start-up is
    off the core's path."""
    if not todo or not (cfg.matrix.split and split_supported(cfg.source_path)):
        return {}
    ready = []
    for conf in sorted(cfg.nox_envs.glob("*/pyvenv.cfg")):
        found = re.search(r"(?m)^version(?:_info)?\s*=\s*(\d+\.\d+)", conf.read_text(errors="replace"))
        venv = conf.parent
        if found and (venv / "bin" / "python").exists() and not installs(cfg, found.group(1), venv)[0]:
            ready.append((found.group(1), venv))
    ahead: dict[str, Path] = {}
    for python, cuda in todo:  # the env of a session to run: a Python the checkout builds with
        env = next((v for p, v in ready if p == python), None)
        if env and cuda not in ahead and skip_reason(cfg, python, cuda) is None:
            ahead[cuda] = env
    return ahead


def build_core_ahead(cfg: Config, cuda: str, venv: Path, env: Mapping[str, str]) -> None:
    """One CUDA's core built in a session's env (not installed there: the session does that) before the
    sessions ask for it; a failure is said, and the sessions then build it themselves."""
    env = {**env, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}
    request = dataclasses.replace(BuildRequest.resolve(cfg, wheel=True), cuda=cuda, python=None, apart=APART)
    if kept_core(cfg, request, cfg.root / "dist" / f"core-{cuda}-{request.build_type}"):
        return
    _console.get().info(f"the core for CUDA {cuda}: built now, ahead of its sessions, in the env {venv}")
    try:
        build_core(cfg, request, env, worktree_state(cfg.source_path, True), venv / "bin" / "python",
                   install=False)
    except Interrupted:
        pass  # Ctrl-C: `inv matrix` says so
    except TorchbuildError as exc:
        _console.get().warn(f"the core for CUDA {cuda} was not built ahead of its sessions ({exc.message}); "
                            "they build it themselves")


def kept_core(cfg: Config, request: BuildRequest, core: Path) -> Path | None:
    """The core's wheel when nothing it depends on has changed since it was built (the working tree
    as it is now, not when this session started: another session's build may have been under way)."""
    try:
        kept = json.loads((core / CORE_STAMP).read_text())
        wheel = Path(kept["wheel"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    same = core_fingerprint(cfg, request, worktree_state(cfg.source_path, True), wheel) == kept["fingerprint"]
    return wheel if same and wheel.exists() else None


def core_fingerprint(cfg: Config, request: BuildRequest, source: list[object], wheel: Path) -> str:
    """A session's fingerprint with the core in place of a Python: no env, the build type, the core's wheel."""
    return fingerprint(cfg, CORE, request.cuda, None, [request.build_type, *source], [wheel])


def smoke_import(env_python: Path, wheel: Path, package: str, extra: list[Path] | None = None,
                 call: bool = False) -> None:
    """Install the wheel (after the core's, for a split build) into a fresh venv, with what it requires as pip
    would (the core's wheel given here stands for its own requirement), and import it; with `call`, also call
    into its compiled code (`<package>._C` loads, the core's libraries found)."""
    with tempfile.TemporaryDirectory(prefix="tb-smoke-") as tmp:
        venv = Path(tmp) / "venv"
        base = run([str(env_python), "-c", "import sys; print(getattr(sys, 'base_prefix', sys.prefix))"],
                   capture=True, echo=False).stdout.strip()
        interpreter = next((p for p in (Path(base) / "bin" / "python3", Path(base) / "bin" / "python") if p.exists()),
                           env_python)
        run([str(interpreter), "-m", "venv", "--without-pip", str(venv)], echo=False)
        site = str(wheels.install([*(extra or []), wheel], venv / "bin" / "python"))  # the core first
        given = {wheels.project_of(w) for w in extra or []}
        needed = [r for r in wheels.wheel_requires(wheel) if wheels.normalize(re.split(r"[\s;<>=!~\[(]", r)[0])
                  not in given]
        if needed:  # nox's or cibuildwheel's test step installs them too: pip into the fresh env, from its mirrors
            run([str(env_python), "-m", "pip", "--disable-pip-version-check", "--python", str(venv / "bin" / "python"),
                 "install", "-q", "--no-compile", *needed], echo=False)
            _console.get().info(f"installed what {wheel.name} requires into the fresh env: {', '.join(needed)}")
        code = f"import {package}; print({package}.__file__)" + (f"; import {package}._C" if call else "")
        out = run([str(venv / "bin" / "python"), "-c", code], capture=True, echo=False, cwd=tmp, check=False)
        if out.returncode != 0 or not out.stdout.strip().startswith(site):
            raise TorchbuildError(f"the wheel {wheel.name} does not import in a fresh env: "
                                  f"{(out.stderr or out.stdout).strip().splitlines()[-1:]}",
                                  "look at what the wheel holds: python -m zipfile -l " + str(wheel))
        _console.get().ok(f"{wheel.name} imports in a fresh env")


def installs(cfg: Config, python_version: str, venv: Path) -> tuple[list[list[str]], str]:
    """What a session's env needs installed, as pip argument lists (the pip bootstrap pin, then the build
    requirements, as `inv env.create` has them), and the stamp to write once they are in. Nothing when
    the env's stamp says they were installed already: a session that runs again spends no time in pip."""
    from . import envs

    checkout = cfg.source_path if cfg.source_path.exists() else None
    pin, reqs = envs.pip_bootstrap(python_version), envs.requirements(checkout, python_version, mkl=cfg.build.mkl)
    stamp = digest([pin, reqs, cfg.mirrors.pip_options()])  # a hash: no mirror url is kept
    if (venv / INSTALL_STAMP).exists() and (venv / INSTALL_STAMP).read_text() == stamp:
        return [], stamp
    new = ["--no-compile", "--upgrade"]  # as envs.create: the newest matching, nothing byte-compiled ahead
    return [*([[*new, pin]] if pin else []), *([[*new, *reqs]] if reqs else [])], stamp


def mark_installed(venv: Path, stamp: str) -> None:
    (venv / INSTALL_STAMP).write_text(stamp)


def expose_interpreters(cfg: Config, pythons: list[str], env: Mapping[str, str] | None = None) -> Path:
    """Make nox find the matrix's Pythons wherever torchbuild finds them (pyenv behind shims, conda, uv):
    a folder of python3.X links, put first on PATH. Returns the folder."""
    from .toolchain import python as discovery

    env = os.environ if env is None else env
    links = cfg.cache_root / "pythons"
    missing = [p for p in pythons if not (links / f"python{p}").exists()]
    if missing:
        links.mkdir(parents=True, exist_ok=True)
        found = discovery.discover(env, cfg.toolchain.pythons)
        for minor in missing:
            match = [p for p in found if p.problem is None and p.minor == minor]
            if match:
                link = links / f"python{minor}"
                tmp = links / f".python{minor}.{os.getpid()}"
                tmp.symlink_to(match[0].path)
                tmp.replace(link)
    return links
