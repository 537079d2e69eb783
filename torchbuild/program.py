"""The installed `torchbuild` command: Invoke's Program over the same tasks as `inv` in this repo
(torchbuild/tasks.py), with the project found from the current folder (config.locate). `torchbuild build`
with long flags takes the lean path (buildflags): no Invoke, no task collection, before a no-op's check;
a warm process (warm.py) that has the build path imported runs it where one is there."""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # no typing module on the lean path
if TYPE_CHECKING:
    from typing import Any


def main() -> None:
    """The command's entry point."""
    from . import buildflags

    given = buildflags.parse(sys.argv[2:]) if sys.argv[1:2] == ["build"] else None
    if given is not None:
        from . import warm

        where = warm.address()  # asked once: the same for the start below
        code = warm.ask(where, sys.argv)
        if code is not None:
            sys.exit(code)
        try:
            buildflags.run_build(None, **given)
        except BrokenPipeError:
            from .console import stdout_closed

            stdout_closed()
        finally:
            warm.start(where)
        sys.exit(0)
    program().run()


def program() -> Any:
    """Invoke's Program over the task collection, quiet when whoever reads its output stops reading
    (`torchbuild --list | head`)."""
    from invoke.program import Program

    from . import __version__
    from .console import stdout_closed
    from .tasks import namespace

    class TorchbuildProgram(Program):
        def run(self, argv=None, exit=True):  # type: ignore[no-untyped-def]
            try:
                return super().run(argv, exit)
            except BrokenPipeError:
                stdout_closed()
                sys.exit(0)

    return TorchbuildProgram(namespace=namespace(None), version=__version__, name="torchbuild",
                             binary="torchbuild", binary_names=["torchbuild"])
