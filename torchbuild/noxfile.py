"""The build matrix as Nox sessions, for `inv matrix` in any project (and `nox -s build-3.12` in
torchbuild's repo, whose noxfile imports this one). The project is $TORCHBUILD_ROOT (set by `inv
matrix`; nox runs a noxfile from its own folder), else the current folder's; the matrix comes from its
torchbuild.yaml.

Interpreters come from torchbuild's discovery (pyenv, conda, uv, PATH): a folder of python3.X links
is put first on PATH, so `nox -s build-3.6` finds a pyenv 3.6 its shims do not expose.
"""

import os
import time
from pathlib import Path

import nox

from torchbuild import config, matrix, run
from torchbuild.envs import by_virtualenv
from torchbuild.freshness import ROOT_ENV
from torchbuild.toolchain.python import compile_installed

PROJECT = (config.project_at(Path(os.environ[ROOT_ENV]), os.environ) if os.environ.get(ROOT_ENV)
           else config.locate(Path.cwd(), os.environ))
CONFIG = config.load(PROJECT.root, os.environ, defaults=PROJECT.defaults)
PYTHONS, CUDAS, PAIRS = matrix.axes(CONFIG)
os.environ["PATH"] = f"{matrix.expose_interpreters(CONFIG, PYTHONS)}{os.pathsep}{os.environ.get('PATH', '')}"

nox.options.reuse_existing_virtualenvs = True
# "venv" sessions are made as `inv env.create` makes venvs: by virtualenv where every Python of the matrix allows it
VIRTUALENV = CONFIG.matrix.backend == "venv" and all(by_virtualenv(p) for p in PYTHONS)


@nox.session(python=PYTHONS, venv_backend="virtualenv" if VIRTUALENV else CONFIG.matrix.backend,
             venv_params=["--no-periodic-update"] if VIRTUALENV else (), allow_parallel=True)
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
    if installs:
        compile_installed(venv / "bin" / "python")
    matrix.mark_installed(venv, stamp)
    record = matrix.run_session(CONFIG, str(session.python), cuda, force, venv, started=started)
    if record.result == "failed":
        session.error(record.reason)
