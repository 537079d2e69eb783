"""torchbuild's tasks in its own repo: `inv --list`. The tasks live in torchbuild/tasks.py, shared
with the installed `torchbuild` command; here the project is this repo (its torchbuild.yaml, pytorch/)."""

from pathlib import Path

from torchbuild.tasks import namespace

ns = namespace(Path(__file__).resolve().parent)
