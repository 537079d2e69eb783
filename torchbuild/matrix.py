"""The Python x CUDA matrix: what the nox sessions are, what one session does, and the summary.

A session builds a wheel of the checkout with the same library calls as `inv build --wheel`,
into dist/<session>/, then installs it into a fresh venv and imports it. Every session shares
one compiler cache (and one build tree per configuration), so the Python-independent core is
compiled once per CUDA version and reused by the other Pythons.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from . import console as _console
from .build import BuildRequest, build, report
from .build.request import split_supported
from .config import Config
from .console import mask
from .errors import TorchbuildError
from .locks import locked
from .run import run

SUMMARY = "matrix-summary.json"


@dataclass(frozen=True)
class SessionRecord:
    """One session's line in dist/matrix-summary.json."""

    session: str
    python: str
    cuda: str
    result: str = "ok"  # ok, failed or skipped
    seconds: float = 0.0
    hit_rate: float | None = None
    hits: int = 0
    misses: int = 0
    wheel: str | None = None
    reason: str = ""
    path: str = ""  # "split": the core built once per CUDA, the Python part per Python; "one build"

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> SessionRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})  # type: ignore[arg-type]


def session_name(python: str, cuda: str) -> str:
    return f"build-{python}(cuda='{cuda}')"


def combos(cfg: Config) -> list[tuple[str, str]]:
    """(python, cuda) pairs: pythons x cudas, plus include, minus exclude; config order."""
    pairs = [(p, c) for p in cfg.matrix.pythons for c in cfg.matrix.cudas]
    for item in cfg.matrix.include:
        py, _, cuda = item.partition(":")
        if (py, cuda) not in pairs:
            pairs.append((py, cuda))
    excluded = {tuple(e.split(":", 1)) for e in cfg.matrix.exclude}
    return [pair for pair in pairs if pair not in excluded]


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
    problems = hard + soft
    if not problems:
        return None
    other = compat.newest_release_for_python(python)
    fix = f"; `inv clone --ref v{other}` checks out a release that supports Python {python}" if other else ""
    return f"{problems[0]} (--force builds it anyway{fix})"


def run_session(cfg: Config, python: str, cuda: str, force: bool = False, venv: Path | None = None,
                env: Mapping[str, str] | None = None) -> SessionRecord:
    """Build one pair's wheel (in `venv`, nox's env for the session) and smoke-import it.

    The record is also merged into dist/matrix-summary.json."""
    env = dict(os.environ if env is None else env)
    if venv is not None:  # nox's env: the build runs in it as "the active environment"
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = str(venv / "bin") + os.pathsep + env.get("PATH", "")
    name = session_name(python, cuda)
    dist = cfg.root / "dist" / name
    record = SessionRecord(name, python, cuda)
    start = time.monotonic()
    con = _console.get()
    reason = None if force else skip_reason(cfg, python, cuda)
    if reason:
        record = dataclasses.replace(record, result="skipped", reason=reason)
        con.warn(f"{name}: skipped: {reason}")
    else:
        request = dataclasses.replace(BuildRequest.resolve(cfg, wheel=True, dist=dist, force=force), cuda=cuda,
                                      python=None if venv is not None else python)
        split = cfg.matrix.split and split_supported(cfg.source_path)
        try:
            core = build_core(cfg, request, env) if split else None
            outcome = build(cfg, dataclasses.replace(request, part="python") if split else request, env)
            report(outcome)
            result = outcome.result
            assert result is not None
            record = dataclasses.replace(record, hits=result.hits, misses=result.misses, hit_rate=result.hit_rate,
                                         wheel=str(result.wheel) if result.wheel else None,
                                         path="split" if split else "one build")
            if result.wheel is None:
                raise TorchbuildError(f"the build left no wheel in {dist}", "look at the build log")
            smoke_import(Path(str(result.python)), result.wheel, result.package, [core] if core else [])
        except TorchbuildError as exc:
            record = dataclasses.replace(record, result="failed", reason=exc.message)
            con.error(f"{name}: {exc.message}", exc.hint)
    record = dataclasses.replace(record, seconds=round(time.monotonic() - start, 2))
    write_summary(cfg.root / "dist" / SUMMARY, record)
    return record


def build_core(cfg: Config, request: BuildRequest, env: Mapping[str, str]) -> Path:
    """The split build's first half: the Python-independent core's wheel for this CUDA and build type,
    built once (later sessions find its tree up to date) and installed into this session's env."""
    core = cfg.root / "dist" / f"core-{request.cuda}-{request.build_type}"
    with locked(core.with_suffix(".lock"), f"building the core into {core}"):  # sessions side by side: once
        done = build(cfg, dataclasses.replace(request, part="core", dist=core), env).result
    if done is None or done.wheel is None:
        raise TorchbuildError(f"the core build left no wheel in {core}", "look at the build log")
    run([str(done.python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(done.wheel)],
        echo=False)
    _console.get().info(f"core: {done.wheel.name}, built once for every Python of this CUDA")
    return done.wheel


def smoke_import(env_python: Path, wheel: Path, package: str, extra: list[Path] | None = None) -> None:
    """Install the wheel (and the core's, for a split build) into a fresh venv (no deps) and import it."""
    with tempfile.TemporaryDirectory(prefix="tb-smoke-") as tmp:
        venv = Path(tmp) / "venv"
        base = run([str(env_python), "-c", "import sys; print(getattr(sys, 'base_prefix', sys.prefix))"],
                   capture=True, echo=False).stdout.strip()
        interpreter = next((p for p in (Path(base) / "bin" / "python3", Path(base) / "bin" / "python") if p.exists()),
                           env_python)
        run([str(interpreter), "-m", "venv", "--without-pip", str(venv)], echo=False)
        site = run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   capture=True, echo=False).stdout.strip()
        run([str(env_python), "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", site,
             str(wheel), *map(str, extra or [])], echo=False)
        out = run([str(venv / "bin" / "python"), "-c", f"import {package}; print({package}.__file__)"],
                  capture=True, echo=False, cwd=tmp, check=False)
        if out.returncode != 0 or not out.stdout.strip().startswith(site):
            raise TorchbuildError(f"the wheel {wheel.name} does not import in a fresh env: "
                                  f"{(out.stderr or out.stdout).strip().splitlines()[-1:]}",
                                  "look at what the wheel holds: python -m zipfile -l " + str(wheel))
        _console.get().ok(f"{wheel.name} imports in a fresh env")


def write_summary(path: Path, record: SessionRecord) -> None:
    """Merge one record into the summary file: atomically (a reader never sees half a file) and under a
    lock (two writers never lose each other's records)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path.with_suffix(".lock"), "writing the matrix summary"):  # sessions of two matrices at once
        others = [r for r in read_summary_file(path) if r.session != record.session]
        data = {"sessions": [dataclasses.asdict(r) for r in [*others, record]]}
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(mask(json.dumps(data, indent=2)) + "\n")
        tmp.replace(path)


def read_summary_file(path: Path) -> list[SessionRecord]:
    try:
        return [SessionRecord.from_json(s) for s in json.loads(path.read_text()).get("sessions", [])]
    except (OSError, ValueError, TypeError, AttributeError):
        return []


def read_summary(root: Path) -> list[SessionRecord]:
    return read_summary_file(root / "dist" / SUMMARY)


def table(records: list[SessionRecord]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for r in records:
        rate = f"{r.hit_rate:.0%}" if r.hit_rate is not None else "-"
        rows.append((r.session, r.python, r.cuda, r.result, f"{r.seconds:.1f}s", rate, r.path or "-",
                     r.wheel or r.reason or "-"))
    return rows


def requirements(cfg: Config, python_version: str) -> tuple[str | None, list[str]]:
    """(pip bootstrap pin, build requirements) for a session's env, as `inv env.create` has them."""
    from . import envs

    checkout = cfg.source_path if cfg.source_path.exists() else None
    return envs.pip_bootstrap(python_version), envs.requirements(checkout, python_version)


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
