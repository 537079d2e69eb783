"""The top-level handler: configure output, load the Config, run a command, map errors to exit codes.

The tasks (torchbuild/tasks.py, under `inv` in torchbuild's repo or the installed `torchbuild`
command) call `main`; nothing heavy is imported until a task runs.
"""

from __future__ import annotations

import errno
import importlib
import os
import sys
from pathlib import Path
from typing import Any, Mapping

from . import console
from .errors import Interrupted, TorchbuildError


def main(root: Path | None, command: str, flags: Mapping[str, Any] | None = None, verbose: bool = False,
         **options: Any) -> None:
    """Run torchbuild.commands.<module>.<function>(config, **options) for command "module.function";
    exit non-zero with one clear message on failure."""
    env = os.environ
    program = "torchbuild" if Path(sys.argv[0]).name == "torchbuild" else "inv"  # the installed command, or inv
    con = console.configure(env, verbose=verbose, program=program)
    debug = bool(env.get("TORCHBUILD_DEBUG"))
    from .run import children, install_signal_handlers

    install_signal_handlers()
    try:
        from . import config

        project = config.locate(Path.cwd(), env) if root is None else config.project_at(root, env)
        cfg = config.load(project.root, env, flags, project.defaults)  # it gives the config's secrets to the masker
        module, _, function = command.partition(".")
        code = getattr(importlib.import_module(f"torchbuild.commands.{module}"), function)(cfg, **options)
    except KeyboardInterrupt:
        children.stop_all()
        exc: TorchbuildError = Interrupted("interrupted; every process torchbuild started was stopped")
        con.error(exc.message, exc.hint)
        _exit(exc.code)
    except BrokenPipeError:  # `torchbuild config | head`: the reader has what it wanted
        _stdout_closed()
    except OSError as exc:
        if debug or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        con.error(f"no space left on the device writing {exc.filename or 'a file'}",
                  "free some space (inv clean --all removes kept build trees), then run the command again")
        children.stop_all()
        _exit(1)
    except TorchbuildError as exc:
        if debug:
            raise
        con.error(exc.message, exc.hint)
        if isinstance(exc, Interrupted):
            children.stop_all()
        _exit(exc.code)
    _exit(code or 0)


def _exit(code: int) -> None:
    """Leave with `code` (SystemExit: Invoke lets it through, and the lean path needs no Invoke)."""
    if code:
        raise SystemExit(code)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_closed()


def _stdout_closed() -> None:
    """Stop quietly when whoever read stdout closed it: no traceback, exit 0."""
    console.stdout_closed()
    raise SystemExit(0)
