"""Colour and messages: one style for steps, commands, warnings, errors and progress.

Everything goes to stderr except `result` lines (tables, `export` lines), which go
to stdout so they can be piped or eval'ed. Colour only on a terminal and never when
NO_COLOR is set (https://no-color.org).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from typing import IO, Iterable, Iterator, Mapping

from colorama import Fore, Style

PREFIX = "tb>"

# ----------------------------------------------------------------------------- the secret masker
# Every line torchbuild shows or writes (terminal, logs, summaries, records, lock files) passes
# through `mask`: the user:password part of any url, and every registered secret value, become ***.

CREDENTIALS = re.compile(r"([A-Za-z][\w+.-]*://)([^/@\s'\"]+)@")
SSH_SCHEMES = ("ssh://", "git+ssh://", "ssh+git://")  # ssh://git@host: a login name, not a secret
SECRET_NAME = re.compile(r"(TOKEN|PASSWORD|PASSWD|SECRET|API_KEY|ACCESS_KEY)$", re.IGNORECASE)
_secrets: set[str] = set()


def add_secrets(values: Iterable[str | None]) -> None:
    """Values to hide wherever they appear (too-short values would hide ordinary text: ignored)."""
    _secrets.update(v for v in values if v and len(v) >= 4)


def secret_values(variables: Mapping[str, str]) -> list[str]:
    """The values of variables whose names say they hold a secret (*_TOKEN, *_PASSWORD, ...)."""
    return [value for name, value in variables.items() if SECRET_NAME.search(name)]


def mask(text: str) -> str:
    """`text` with url credentials and registered secrets replaced by ***."""
    if "://" in text:
        text = CREDENTIALS.sub(_hide_credentials, text)
    for secret in sorted(_secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***")
    return text


def _hide_credentials(found: re.Match[str]) -> str:
    scheme, userinfo = found.group(1), found.group(2)
    if ":" not in userinfo and scheme.lower() in SSH_SCHEMES:
        return found.group(0)
    return f"{scheme}***@"


# a hint's command: `inv build`, inv clone (doctor's fix column), as the installed command names them
INV_COMMAND = re.compile(r"(?<![\w/.-])inv (?=(?:clone|sync|build|bisect|doctor|demo|matrix|nightly|clean|config|"
                         r"pythons|env\.|cuda\.|patch\.|ci\.)\b)")

_RESET = Style.RESET_ALL
_STYLES = {
    "step": Style.BRIGHT + Fore.BLUE,
    "ok": Fore.GREEN,
    "warn": Fore.YELLOW,
    "error": Style.BRIGHT + Fore.RED,
    "hint": Fore.CYAN,
    "dim": Style.DIM,
}


class Console:
    """Writes styled messages to one stream."""

    def __init__(self, stream: IO[str] | None = None, color: bool | None = None,
                 env: Mapping[str, str] | None = None, out: IO[str] | None = None) -> None:
        self.stream = stream or sys.stderr
        self.out = out or sys.stdout
        env = os.environ if env is None else env
        self.tty = _isatty(self.stream)
        self.color = (self.tty and "NO_COLOR" not in env) if color is None else color
        self.verbose = False
        self.program = "inv"  # the command the user typed: hints name it (`torchbuild build`, not `inv build`)
        self._progress_shown = False
        self._last_plain_progress = 0.0
        if self.color and os.name == "nt":  # pragma: no cover - Windows terminals only
            import colorama

            colorama.just_fix_windows_console()

    def _style(self, kind: str, text: str) -> str:
        return f"{_STYLES[kind]}{text}{_RESET}" if self.color else text

    def _named(self, line: str) -> str:
        return line if self.program == "inv" else INV_COMMAND.sub(f"{self.program} ", line)

    def _write(self, line: str) -> None:
        self.clear_progress()
        self.stream.write(mask(self._named(line)) + "\n")
        self.stream.flush()

    def step(self, message: str) -> None:
        self._write(self._style("step", f"{PREFIX} {message}"))

    def info(self, message: str) -> None:
        self._write(f"{PREFIX} {message}")

    def ok(self, message: str) -> None:
        self._write(self._style("ok", f"{PREFIX} ✓ {message}"))

    def warn(self, message: str) -> None:
        self._write(self._style("warn", f"{PREFIX} warning: {message}"))

    def error(self, message: str, hint: str | None = None) -> None:
        self._write(self._style("error", f"{PREFIX} error: {message}"))
        if hint:
            self._write(self._style("hint", f"{PREFIX}   next: {hint}"))

    def command(self, text: str) -> None:
        self._write(self._style("dim", f"{PREFIX} $ {text}"))

    def detail(self, message: str) -> None:
        """A line shown only with --verbose."""
        if self.verbose:
            self._write(self._style("dim", f"{PREFIX}   {message}"))

    def result(self, line: str = "") -> None:
        """Program output proper (tables, export lines): stdout, unstyled."""
        self.clear_progress()
        self.out.write(mask(self._named(line)) + "\n")
        self.out.flush()

    def progress(self, text: str) -> None:
        """One line rewritten in place on a terminal; at most every 10 s otherwise."""
        if self.tty:
            width = 120
            self.stream.write("\r\x1b[2K" + mask(f"{PREFIX} {text}")[:width])
            self.stream.flush()
            self._progress_shown = True
            return
        now = time.monotonic()
        if now - self._last_plain_progress >= 10:
            self._last_plain_progress = now
            self.stream.write(mask(f"{PREFIX} {text}") + "\n")
            self.stream.flush()

    def clear_progress(self) -> None:
        if self._progress_shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._progress_shown = False

    @contextlib.contextmanager
    def timed(self, message: str) -> Iterator[None]:
        """`step` now, then `✓ message (1.23s)` when the block succeeds."""
        self.step(message)
        start = time.monotonic()
        yield
        self.ok(f"{message} ({time.monotonic() - start:.2f}s)")


def stdout_closed() -> None:
    """Whoever read stdout closed it (`torchbuild config | head`): point it at /dev/null, so that nothing more
    written there, the interpreter's last flush included, fails again (Python's own advice)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


console = Console()


def configure(env: Mapping[str, str], verbose: bool = False, program: str = "inv") -> Console:
    """Replace the shared console (called once by cli.main; `program`: the command the user ran)."""
    global console
    console = Console(env=env)
    console.verbose = verbose
    console.program = program
    return console


def get() -> Console:
    return console
