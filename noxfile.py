"""Nox sessions: `nox -l`. The build matrix comes from torchbuild.yaml; each session calls torchbuild.

Interpreters come from torchbuild's discovery (pyenv, conda, uv, PATH): a folder of python3.X links
is put first on PATH, so `nox -s build-3.6` finds a pyenv 3.6 its shims do not expose.
"""

import os
import time
from pathlib import Path

import nox

from torchbuild import config, matrix, run

ROOT = Path(__file__).resolve().parent
CONFIG = config.load(ROOT, os.environ)
PYTHONS, CUDAS, PAIRS = matrix.axes(CONFIG)
os.environ["PATH"] = f"{matrix.expose_interpreters(CONFIG, PYTHONS)}{os.pathsep}{os.environ.get('PATH', '')}"

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True


@nox.session(python=PYTHONS, venv_backend=CONFIG.matrix.backend, allow_parallel=True)
@nox.parametrize("cuda", CUDAS)
def build(session: nox.Session, cuda: str) -> None:
    """Build a wheel for this Python x CUDA into dist/<session>/ and import it in a fresh env."""
    started = time.time()
    run.install_signal_handlers()  # nox -j stops a session with SIGTERM: stop its build's process tree too
    if (session.python, cuda) not in PAIRS:
        session.skip(f"{session.python}:{cuda} is not in the matrix (matrix.exclude)")
    force = "--force" in session.posargs
    reason = None if force else matrix.skip_reason(CONFIG, str(session.python), cuda)
    if reason:
        matrix.run_session(CONFIG, str(session.python), cuda)  # records the skip in the summary
        session.skip(reason)
    venv = Path(session.virtualenv.location)
    installs, stamp = matrix.installs(CONFIG, str(session.python), venv)
    for args in installs:
        session.install(*args)
    matrix.mark_installed(venv, stamp)
    record = matrix.run_session(CONFIG, str(session.python), cuda, force, venv, started=started)
    if record.result == "failed":
        session.error(record.reason)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite (README's test command)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-ra", *session.posargs)


@nox.session
def realworld(session: nox.Session) -> None:
    """torchbuild on real projects from the package index: clone through a mirror, patch, build, import, call."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-ra", "-m", "realworld", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the library, the entry points and the tests."""
    session.install("ruff")
    session.run("ruff", "check", "torchbuild", "tests", "tasks.py", "noxfile.py", "bench")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy over torchbuild/."""
    session.install("-e", ".", "mypy", "types-PyYAML", "types-colorama")
    session.run("mypy")


@nox.session(venv_backend="none")
def bench(session: nox.Session) -> None:
    """Benchmarks against the plain recipe (quick run)."""
    session.run("python", "bench/run.py", "--quick", *session.posargs)
