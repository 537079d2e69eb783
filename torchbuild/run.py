"""The one subprocess runner.

Every program torchbuild starts goes through `run`: an argument list (never a shell
string), the program checked on PATH, the command echoed with only the environment
variables it changes, dry-run, streamed output with a log file, and its own process
group so that Ctrl-C (or SIGTERM/SIGHUP to torchbuild) stops the whole tree below.
"""

from __future__ import annotations

import collections
import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Mapping, Sequence

from . import console as _console
from .console import mask
from .errors import CommandError, Interrupted, ToolNotFound

EnvChanges = Mapping[str, "str | None"]

TAIL_LINES = 60


@dataclass(frozen=True)
class Result:
    argv: list[str]
    returncode: int
    stdout: str = ""
    stderr: str = ""
    tail: str = ""


def merged_env(base: Mapping[str, str], changes: EnvChanges | None) -> dict[str, str]:
    """`base` with `changes` applied; a None value removes the variable."""
    env = dict(base)
    for key, value in (changes or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def describe_env(base: Mapping[str, str], changes: EnvChanges | None) -> list[str]:
    """The changed variables as shell words; a grown PATH-like value shows `$VAR`; credentials hidden."""
    words = []
    for key, value in sorted((changes or {}).items()):
        old = base.get(key)
        if value is None:
            if old is not None:
                words.append(f"-u {key}")
            continue
        if value == old:
            continue
        if old and value.endswith(os.pathsep + old):
            shown = shlex.quote(value[: -len(old)]) + "$" + key
        elif old and value.startswith(old + os.pathsep):
            shown = "$" + key + shlex.quote(value[len(old):])
        else:
            shown = shlex.quote(value)
        words.append(mask(f"{key}={shown}"))
    return words


def format_command(argv: Sequence[str], base: Mapping[str, str], changes: EnvChanges | None,
                   cwd: Path | str | None = None) -> str:
    parts = describe_env(base, changes) + [mask(shlex.join(argv))]
    text = " ".join(parts)
    return f"(cd {shlex.quote(str(cwd))} && {text})" if cwd else text


class _Children:
    """Process groups started by `run` and still alive, for stopping on interrupt."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()
        self.interrupted = False

    def add(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.add(proc)

    def discard(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop_all(self, grace: float = 0.5) -> None:
        """SIGINT each group, then SIGTERM, then SIGKILL whatever is left."""
        self.interrupted = True
        with self._lock:
            procs = list(self._procs)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            alive = [p for p in procs if p.poll() is None]
            if not alive:
                break
            for proc in alive:
                _signal_group(proc.pid, sig)
            for proc in alive:
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    pass
        # The leader may be gone while its group lives on (a compiler under make).
        for proc in procs:
            _signal_group(proc.pid, signal.SIGKILL)


    def signal_all(self, sig: int) -> None:
        """Send `sig` to every group still alive and to the groups their descendants made (ninja puts each
        compile in a group of its own): job control, SIGSTOP on Ctrl-Z and SIGCONT on `fg`."""
        with self._lock:
            procs = [p.pid for p in self._procs if p.poll() is None]
        for pgid in [*procs, *sorted(_descendant_groups(procs) - set(procs))]:
            _signal_group(pgid, sig)


def _descendant_groups(roots: Sequence[int]) -> set[int]:
    """The process groups of every descendant of `roots` (Linux's /proc; none elsewhere)."""
    parents: dict[int, list[int]] = {}
    groups: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError, ValueError, IndexError):
                    with open(f"/proc/{entry.name}/stat") as fh:
                        fields = fh.read().rsplit(")", 1)[1].split()
                    parents.setdefault(int(fields[1]), []).append(int(entry.name))
                    groups[int(entry.name)] = int(fields[2])
    found, todo = set(), list(roots)
    while todo:
        for child in parents.get(todo.pop(), []):
            found.add(groups[child])
            todo.append(child)
    return found


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


children = _Children()


def _own_group_kwargs() -> dict[str, object]:
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"start_new_session": True}


def run(
    argv: Sequence[str | os.PathLike[str]],
    *,
    cwd: Path | str | None = None,
    env: EnvChanges | None = None,
    base_env: Mapping[str, str] | None = None,
    dry_run: bool = False,
    echo: bool = True,
    capture: bool = False,
    on_line: Callable[[str], None] | None = None,
    log: IO[str] | None = None,
    check: bool = True,
    hint: str | None = None,
    input: str | None = None,
) -> Result:
    """Run `argv` and return its Result; raise CommandError on failure when `check`.

    capture=True collects stdout and stderr apart (for commands whose output is parsed);
    otherwise stdout and stderr are merged and streamed line by line to `on_line` and
    `log`, keeping the last lines for the error message.
    """
    args = [os.fspath(a) for a in argv]
    base = os.environ if base_env is None else base_env
    full_env = merged_env(base, env)
    con = _console.get()
    if echo:
        con.command(format_command(args, base, env, cwd))
    elif con.verbose:
        con.detail("$ " + format_command(args, base, env, cwd))
    if dry_run:
        return Result(args, 0)
    program = shutil.which(args[0], path=full_env.get("PATH"))
    if program is None:
        raise ToolNotFound(f"'{args[0]}' was not found on PATH", f"install {args[0]} or add it to PATH")
    if children.interrupted:
        raise Interrupted()
    proc = _start([program, *args[1:]], cwd, full_env, capture, input is not None)
    children.add(proc)
    try:
        stdout, stderr, tail = _collect(proc, capture, input, on_line, log)
    except KeyboardInterrupt:
        children.stop_all()
        raise Interrupted(f"interrupted while running {args[0]}; its process tree was stopped") from None
    finally:
        children.discard(proc)
    if children.interrupted:
        raise Interrupted(f"interrupted while running {args[0]}; its process tree was stopped")
    result = Result(args, proc.returncode, stdout, stderr, tail)
    if check and proc.returncode != 0:
        raise CommandError(args, proc.returncode, tail, hint)
    return result


def _start(argv: list[str], cwd: Path | str | None, env: Mapping[str, str], capture: bool, stdin: bool
           ) -> subprocess.Popen[bytes]:
    """The process, in a process group of its own; stdout and stderr apart (`capture`) or merged."""
    try:
        return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
            argv, cwd=cwd, env=env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if capture else subprocess.STDOUT, **_own_group_kwargs())
    except OSError as exc:
        raise ToolNotFound(f"cannot start {Path(argv[0]).name}: {exc.strerror}",
                           f"check that {argv[0]} is executable") from exc


def _collect(proc: subprocess.Popen[bytes], capture: bool, input: str | None,
             on_line: Callable[[str], None] | None, log: IO[str] | None) -> tuple[str, str, str]:
    """The process's stdout, stderr and the last lines of its output, once it ended."""
    if capture:
        out, err = proc.communicate(input.encode() if input is not None else None)
        stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
        return stdout, stderr, "\n".join((stderr + stdout).splitlines()[-TAIL_LINES:])
    if input is not None and proc.stdin:
        proc.stdin.write(input.encode())
        proc.stdin.close()
    tail = _stream(proc, on_line, log)
    proc.wait()
    return "", "", tail


def _stream(proc: subprocess.Popen[bytes], on_line: Callable[[str], None] | None,
            log: IO[str] | None) -> str:
    """Read merged output, splitting on \\n and \\r (progress), until EOF."""
    assert proc.stdout is not None
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    pending = b""
    while True:
        chunk = proc.stdout.read1(65536) if hasattr(proc.stdout, "read1") else proc.stdout.read(4096)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        _emit(lines, tail, on_line, log)
    _emit([pending], tail, on_line, log)
    return "\n".join(tail)


def _emit(raws: list[bytes], tail: collections.deque[str], on_line: Callable[[str], None] | None,
          log: IO[str] | None) -> None:
    """A chunk's lines: to the log in one write (a line-buffered log flushes once; an install's 9,000 lines
    were 9,000 writes), then each to `on_line`."""
    lines = [line for line in (raw.decode(errors="replace") for raw in raws) if line.strip()]
    tail.extend(lines)
    if log is not None and lines:
        log.write("".join(mask(line) + "\n" for line in lines))
    if on_line is not None:
        for line in lines:
            on_line(line)


def passthrough(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Run `argv` on this process's stdin, stdout and stderr and return its exit status: for a stand-in
    for a tool (the jobserver's cmake shim), whose output belongs to whoever ran the tool."""
    return subprocess.call(list(argv), env=dict(env))


def detached(argv: Sequence[str], cwd: str) -> None:
    """Start `argv` in a session of its own on /dev/null and leave it running: a process that outlives the
    command that started it (warm.py's), out of reach of its terminal's Ctrl-C."""
    subprocess.Popen(list(argv), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def install_signal_handlers() -> None:
    """Turn SIGTERM and SIGHUP into the same clean stop as Ctrl-C, and make Ctrl-Z stop the whole build (each
    command runs in a process group of its own, out of the terminal's reach) and `fg` go on with it (main
    thread only)."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    def suspend(signum: int, frame: object) -> None:
        children.signal_all(signal.SIGSTOP)
        os.kill(os.getpid(), signal.SIGSTOP)  # here until SIGCONT (`fg`, `bg`)
        children.signal_all(signal.SIGCONT)

    for sig, action in ((signal.SIGTERM, handler), (signal.SIGHUP, handler), (signal.SIGTSTP, suspend)):
        try:
            signal.signal(sig, action)
        except (ValueError, OSError, AttributeError):  # not the main thread, or no such signal here
            pass
