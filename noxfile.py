"""Nox sessions: `nox -l`. The build matrix (build-3.X(cuda=...)) is torchbuild's own, from
torchbuild/noxfile.py over this repo's torchbuild.yaml; the rest are the repo's: tests, unit, heavy, realworld,
docs,
lint, typecheck, bench."""

import os
from pathlib import Path

import nox

os.environ.setdefault("TORCHBUILD_ROOT", str(Path(__file__).resolve().parent))  # freshness.ROOT_ENV
from torchbuild.noxfile import build  # noqa: E402,F401  (importing registers the build sessions)

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite (README's test command)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-ra", *session.posargs)


@nox.session
def unit(session: nox.Session) -> None:
    """The unit tier: parsers, the verdict on recorded data, config, drivers, docs and layout, without building."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-ra", "-p", "no:xdist", "tests/unit", *session.posargs)


@nox.session
def heavy(session: nox.Session) -> None:
    """The heavy tier (CI runs it after README's test command): end-to-end scenarios of half a minute or more on
    the demo, and real projects from the package index."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-ra", "tests/heavy", *session.posargs)


@nox.session
def realworld(session: nox.Session) -> None:
    """torchbuild on real projects from the package index (clone through a mirror, patch, build, import, call),
    the projects that build for minutes included."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-ra", "tests/heavy/test_realworld.py", *session.posargs,
                env={"TORCHBUILD_REALWORLD_HEAVY": "1"})  # spglib too


@nox.session
def docs(session: nox.Session) -> None:
    """The docs site into site/, with strict warnings (a broken link fails), after checking its generated pages."""
    session.install("-e", ".[docs]")
    session.run("python", "docs/generate.py", "--check")
    session.run("python", "-m", "sphinx", "-W", "--keep-going", "-n", "-b", "html", "docs", "site", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the library, the entry points and the tests."""
    session.install("ruff")
    session.run("ruff", "check", "torchbuild", "tests", "tasks.py", "noxfile.py", "bench", "docs")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy over torchbuild/."""
    session.install("-e", ".", "mypy", "types-PyYAML", "types-colorama")
    session.run("mypy")


@nox.session(venv_backend="none")
def bench(session: nox.Session) -> None:
    """Benchmarks against the plain recipe (quick run)."""
    session.run("python", "bench/run.py", "--quick", *session.posargs)
