"""The installed `torchbuild` command: Invoke's Program over the same tasks as `inv` in this repo
(torchbuild/tasks.py), with the project found from the current folder (config.locate)."""

import sys

from invoke.program import Program

from . import __version__
from .console import stdout_closed
from .tasks import namespace


class TorchbuildProgram(Program):
    """Invoke's Program, quiet when whoever reads its output stops reading (`torchbuild --list | head`)."""

    def run(self, argv=None, exit=True):  # type: ignore[no-untyped-def]
        try:
            return super().run(argv, exit)
        except BrokenPipeError:
            stdout_closed()
            sys.exit(0)


program = TorchbuildProgram(namespace=namespace(None), version=__version__, name="torchbuild",
                            binary="torchbuild", binary_names=["torchbuild"])
