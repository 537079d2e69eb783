"""Nox sessions: `nox -l`. Each session wires flags to torchbuild; no logic here."""

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite (README's test command)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-ra", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the library, the entry points and the tests."""
    session.install("ruff")
    session.run("ruff", "check", "torchbuild", "tests", "tasks.py", "noxfile.py")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy over torchbuild/."""
    session.install("-e", ".", "mypy", "types-PyYAML", "types-colorama")
    session.run("mypy")
