"""One error hierarchy; the top-level handler in cli.py turns each into a message and exit code."""

from __future__ import annotations


class TorchbuildError(Exception):
    """A failure the user can act on: what failed, and the next thing to do."""

    code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class ConfigError(TorchbuildError):
    """torchbuild.yaml, an environment variable or a flag holds a bad value."""

    code = 2


class ToolNotFound(TorchbuildError):
    """A program torchbuild needs is not on PATH."""

    code = 127


class CommandError(TorchbuildError):
    """A subprocess exited non-zero."""

    def __init__(self, argv: list[str], returncode: int, output: str, hint: str | None = None) -> None:
        shown = " ".join(argv[:6]) + (" ..." if len(argv) > 6 else "")
        super().__init__(f"command failed (exit {returncode}): {shown}", hint)
        self.argv = argv
        self.returncode = returncode
        self.output = output


class GitError(TorchbuildError):
    """A git operation failed for a reason torchbuild can name (git's output kept for diagnosis)."""

    def __init__(self, message: str, hint: str | None = None, output: str = "") -> None:
        super().__init__(message, hint)
        self.output = output


class BuildFailed(TorchbuildError):
    """The build's own command failed: its first error and the known failures it matched (bisect skips such a
    commit, naming them)."""

    def __init__(self, message: str, hint: str | None = None, first_error: tuple[str, ...] = (),
                 known: tuple[str, ...] = ()) -> None:
        super().__init__(message, hint)
        self.first_error = first_error
        self.known = known


class UnsafeToProceed(TorchbuildError):
    """Going on would lose or overwrite the user's work."""

    code = 3


class Interrupted(TorchbuildError):
    """Ctrl-C or a termination signal; the process tree below us was stopped."""

    code = 130

    def __init__(self, message: str = "interrupted", hint: str | None = None) -> None:
        super().__init__(message, hint)
