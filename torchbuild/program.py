"""The installed `torchbuild` command: Invoke's Program over the same tasks as `inv` in this repo
(torchbuild/tasks.py), with the project found from the current folder (config.locate)."""

from invoke.program import Program

from . import __version__
from .tasks import namespace

program = Program(namespace=namespace(None), version=__version__, name="torchbuild", binary="torchbuild",
                  binary_names=["torchbuild"])
