"""The matrix's summary, dist/matrix-summary.json: one record a session (result, time, what it waited
for, cache hits, which path, the wheel, the fingerprint) and the last `inv matrix` run's figures."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .config import Config, locate
from .console import mask
from .errors import TorchbuildError
from .locks import locked

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
    waits: dict[str, float] = dataclasses.field(default_factory=dict)  # queued / core / job slot: seconds
    env: str = ""  # the session's env (nox's venv)
    core: str | None = None  # the split build's core wheel it installed
    fingerprint: str = ""  # what the result depends on; unchanged: `inv matrix` does not run it again
    depends: dict[str, str] = dataclasses.field(default_factory=dict)  # the fingerprint's parts, each hashed
    profile: str = ""  # its build's timeline (builder/profile.py), when it built
    warning: str = ""  # what a good wheel still lacks (libraries outside the manylinux policies)

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> SessionRecord:
        """The record a summary file holds; ValueError naming the field when a value has another type
        (a summary written by hand or by another tool: `"seconds": "fast"`)."""
        if not isinstance(data, Mapping):
            raise ValueError("a session record is not an object")
        fields = {f.name: str(f.type) for f in dataclasses.fields(cls)}
        for name, value in data.items():
            if name in fields and not of_type(value, fields[name]):
                raise ValueError(f"{name} is {value!r}, not {fields[name]}")
        return cls(**{k: v for k, v in data.items() if k in fields})  # type: ignore[arg-type]


def of_type(value: object, kind: str) -> bool:
    """Whether a JSON value fits a field's annotation (str, int, float, X | None, dict[str, X])."""
    if kind.endswith(" | None"):
        return value is None or of_type(value, kind[:-len(" | None")])
    if kind.startswith("dict[str, "):
        return isinstance(value, dict) and all(isinstance(k, str) and of_type(v, kind[10:-1]) for k, v in value.items())
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    return kind == "str" and isinstance(value, str)


def write_summary(path: Path, record: SessionRecord | None = None, run_info: Mapping[str, object] | None = None
                  ) -> None:
    """Merge one session's record (or the last `inv matrix` run's figures) into the summary file:
    atomically (a reader never sees half a file) and under a lock (two writers never lose each other's)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path.with_suffix(".lock"), "writing the matrix summary"):  # sessions of two matrices at once
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError):
            old = {}
        others = [r for r in read_summary_file(path) if record is None or r.session != record.session]
        records = sorted([*others, *([record] if record else [])], key=matrix_order)  # not the finishing order
        data = {"sessions": [dataclasses.asdict(r) for r in records],
                "run": dict(run_info) if run_info is not None else old.get("run", {}) if isinstance(old, dict) else {}}
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(mask(json.dumps(data, indent=2)) + "\n")
        tmp.replace(path)


def matrix_order(record: SessionRecord) -> tuple[object, ...]:
    """Python then CUDA, numbers compared as numbers (3.9 before 3.10, cuda 'none' first)."""
    def natural(text: str) -> tuple[tuple[int, object], ...]:
        return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part)
    return natural(record.python), record.cuda != "none", natural(record.cuda)


def read_summary_file(path: Path, problems: list[str] | None = None) -> list[SessionRecord]:
    """The file's session records; one of another shape is left out (and said in `problems`)."""
    try:
        sessions = json.loads(path.read_text()).get("sessions", [])
    except (OSError, ValueError, TypeError, AttributeError):
        return []
    records = []
    for i, data in enumerate(sessions if isinstance(sessions, list) else []):
        try:
            records.append(SessionRecord.from_json(data))
        except (ValueError, TypeError) as exc:
            if problems is not None:
                problems.append(f"session record {i + 1} of {path}: {exc}")
    return records


def read_summary(root: Path, problems: list[str] | None = None) -> list[SessionRecord]:
    return read_summary_file(root / "dist" / SUMMARY, problems)


def table(records: list[SessionRecord], fresh: set[str] | None = None) -> list[tuple[str, ...]]:
    """Summary rows; sessions not in `fresh` (when given) were up to date and did not run."""
    rows: list[tuple[str, ...]] = []
    for r in records:
        rate = f"{r.hit_rate:.0%}" if r.hit_rate is not None else "-"
        time_ = f"{r.seconds:.1f}s" if fresh is None or r.session in fresh else "up to date"
        waited = ", ".join(f"{k} {v:.1f}s" for k, v in r.waits.items()) or "-"
        rows.append((r.session, r.python, r.cuda, r.result, time_, waited, rate, r.path or "-",
                     (r.wheel or r.reason or "-") + (f" (warning: {r.warning})" if r.warning else "")))
    return rows


def torch_wheels(cfg: Config, python: str, cuda: str) -> list[Path]:
    """The wheels (the core's first, for a split build) the matrix of the torch project build.torch names made for
    this Python x CUDA (its dist/matrix-summary.json): an extension's session builds against them."""
    where = (cfg.root / str(cfg.build.torch)).resolve()
    project = locate(where, {k: v for k, v in os.environ.items() if k != "TORCHBUILD_CONFIG"})
    record = next((r for r in read_summary(project.root) if (r.python, r.cuda) == (python, cuda) and r.result == "ok"
                   and r.wheel), None)
    made = [Path(p) for p in (record.core, record.wheel) if p] if record else []
    if not made or not all(p.is_file() for p in made):
        raise TorchbuildError(f"build.torch {cfg.build.torch}: its matrix made no wheel for Python {python} x CUDA "
                              f"{cuda} ({project.root / 'dist' / SUMMARY})", f"run `inv matrix` in {project.root} "
                              "first, with this Python and CUDA in its matrix")
    return made


def install_torch(cfg: Config, python: str, cuda: str, env_python: Path) -> list[Path]:
    """An extension's session (build.torch): the torch project's wheels for this Python x CUDA installed into its
    env, which its build then takes as the env's own torch; the wheels ([] for any other project)."""
    from . import wheels

    made = torch_wheels(cfg, python, cuda) if cfg.build.torch else []
    if made:
        wheels.install(made, env_python, replace=True)
    return made
