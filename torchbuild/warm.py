"""A warm `torchbuild build`: the installed command's build path, imported once and forked per build.

Importing the build path costs ~70 ms against a no-op's ~30 ms of checking. After a `torchbuild build`
with long flags, a warm process stays (15 idle minutes, TORCHBUILD_WARM_IDLE) behind a socket in a
folder only this user can open ($XDG_RUNTIME_DIR or $TMPDIR, then torchbuild-UID). The next such build
hands it the terminal (stdin, stdout, stderr, as descriptors), its folder, its whole environment, umask,
sys.path and argv; the warm process forks, and the child runs the same code the command would, as the
command would: a child of a process that imported and ran nothing. The command waits for its exit code
and passes on Ctrl-C, SIGTERM and SIGHUP; if the command dies, the child stops as on Ctrl-C. The
socket's name is a digest of the interpreter, sys.path, what a process keeps from its start (PYTHON* and
locale variables, ulimits, CPU affinity, niceness, groups) and every file of the package, so an edit, an
upgrade, another env or `ulimit -v` never meets a process that differs. TORCHBUILD_WARM=0 turns it off
(on a CI runner, CI set, it is off unless TORCHBUILD_WARM=1); any failure to reach one runs the build in
the command itself.
"""

from __future__ import annotations

import atexit
import contextlib
import marshal
import os
import signal
import socket
import stat
import struct
import sys
import time
import zlib

TYPE_CHECKING = False  # the command's side imports no more than it needs (typing, pathlib, json: 6 ms)
if TYPE_CHECKING:
    from typing import Any, Callable

IDLE = 15 * 60
HEADER = struct.Struct("!I")
SERVING = False  # set in a forked child: it runs the build itself


def enabled() -> bool:
    """On unless TORCHBUILD_WARM=0; off by default on a CI runner (CI set), where no next build comes."""
    wanted = os.environ.get("TORCHBUILD_WARM", "0" if os.environ.get("CI") else "1") != "0"
    return wanted and not SERVING and hasattr(socket, "send_fds")


def folder() -> str | None:
    """This user's private socket folder, made if missing; None if it is anyone else's or open to others."""
    base = os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("TMPDIR") or "/tmp"
    path = os.path.join(base, f"torchbuild-{os.getuid()}")
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
        st = os.lstat(path)
    except OSError:
        return None
    if st.st_uid != os.getuid() or st.st_mode & 0o077 or not stat.S_ISDIR(st.st_mode):  # a link is no folder
        return None
    return path


def code_key() -> str:
    """A digest of what a process keeps from its start: the interpreter, its flags, sys.path, the
    environment its start reads (PYTHON*, locale), its limits, CPUs, niceness and groups; and each file
    of the package (name, size, mtime)."""
    import resource

    package = os.path.dirname(os.path.realpath(__file__))
    started = sorted((k, v) for k, v in os.environ.items() if k.startswith(("PYTHON", "LC_")) or k == "LANG")
    limits = [resource.getrlimit(getattr(resource, name)) for name in sorted(dir(resource))
              if name.startswith("RLIMIT_")]
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    parts = [os.path.realpath(sys.executable), repr([sys.path, started, sys.flags, sys.warnoptions,
                                                     sorted(map(str, sys._xoptions.items())), limits, cpus,
                                                     os.getpriority(os.PRIO_PROCESS, 0), os.getgroups(),
                                                     placement()])]
    for top, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "demo_project"))
        for name in sorted(files):
            if name.endswith((".py", ".yaml")):
                st = os.stat(os.path.join(top, name))
                parts.append(f"{os.path.join(top, name)}:{st.st_size}:{st.st_mtime_ns}")
    text = "\n".join(parts).encode()
    return f"{zlib.crc32(text):08x}{zlib.adler32(text):08x}"


def placement() -> list[str]:
    """Where the process runs: its cgroup (its limits plan MAX_JOBS and the memory pools) and its namespaces
    (mount, pid, user: what a path or a process id names). A fork keeps its parent's, not the command's."""
    found = []
    with contextlib.suppress(OSError), open("/proc/self/cgroup") as fh:
        found.append(fh.read())
    with contextlib.suppress(OSError):
        for name in sorted(os.listdir("/proc/self/ns")):
            with contextlib.suppress(OSError):
                found.append(os.readlink(f"/proc/self/ns/{name}"))
    return found


def module_files() -> dict[str, tuple[int, int]]:
    """Every imported module's file by size and mtime: an upgraded dependency (PyYAML, invoke) is no longer
    what the process imported."""
    found = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            with contextlib.suppress(OSError):
                st = os.stat(path)
                found[path] = (st.st_size, st.st_mtime_ns)
    return found


def address() -> str | None:
    """The socket of the warm process for this command; None where it is off or no private folder is there."""
    where = folder() if enabled() else None
    path = os.path.join(where, f"warm-{code_key()}.sock") if where else None
    return path if path and len(os.fsencode(path)) <= 107 else None  # a unix socket's name: 107 bytes at most


def ask(path: str | None, argv: list[str]) -> int | None:
    """Run `argv` in the warm process at `path` and return its exit code; None where none answered (nothing
    ran)."""
    if path is None:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)  # a closed descriptor: the command runs the build itself
        conn.connect(path)
        body = marshal.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "path": sys.path,
                              "umask": _umask(), "encoding": [sys.stdout.encoding, sys.stdout.errors]})
        socket.send_fds(conn, [HEADER.pack(len(body))], [0, 1, 2])
        conn.sendall(body)
        pid = _read_int(conn)
    except (OSError, AttributeError):
        conn.close()
        return None
    if pid is None:  # it closed before forking: nothing ran
        return None

    def forward(signum: int, frame: object) -> None:
        with contextlib.suppress(OSError):
            os.kill(pid, signum)

    def suspend(signum: int, frame: object) -> None:  # Ctrl-Z: the child stops its build, then this command
        forward(signum, frame)
        os.kill(os.getpid(), signal.SIGSTOP)

    for sig, action in ((signal.SIGINT, forward), (signal.SIGTERM, forward), (signal.SIGHUP, forward),
                        (signal.SIGTSTP, suspend), (signal.SIGCONT, forward), (signal.SIGWINCH, forward)):
        signal.signal(sig, action)
    code = _read_int(conn)
    return 1 if code is None else code  # the child died without a word (killed): as the command would


def start(path: str | None) -> None:
    """Leave a warm process at `path` for the next build, unless one is there (or it is off: None)."""
    if path is None or _answers(path):
        return
    from .run import detached

    detached([sys.executable, "-c", "import sys; from torchbuild import program, warm; "
                                    "warm.serve(sys.argv[1:], program.main)", path, repr(sys.path)],
             cwd=os.path.dirname(path))


def serve(args: list[str], main: Callable[[], None]) -> None:
    """The warm process: import the build path, then fork a child per request (it runs `main`, the
    command's) until idle."""
    import ast

    path = args[0]
    sys.path[:] = ast.literal_eval(args[1])  # the command's, not this folder's
    from . import buildflags, cli, compat, config, run  # noqa: F401 - imported once, for every child
    from .commands import build  # noqa: F401
    from .toolchain import compilers

    compat.releases()  # its table parsed once (the file is part of the socket's name)
    compilers.discover(os.environ)  # their versions asked once (kept by each compiler file's stat)
    imported, started, served = module_files(), time.time(), 0
    if _answers(path):
        return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)
    server.settimeout(float(os.environ.get("TORCHBUILD_WARM_IDLE") or IDLE))
    inode = os.stat(path).st_ino
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reap themselves
    while True:
        try:
            conn, _ = server.accept()
        except socket.timeout:
            break
        try:
            header, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
            request = marshal.loads(_read_exactly(conn, HEADER.unpack(header)[0]))
        except (OSError, ValueError, EOFError, TypeError, struct.error):
            conn.close()
            continue
        stale = module_files() != imported  # a module it imported changed: closed unanswered, the command
        if request.get("op"):  # runs the build itself, and this process ends
            conn.sendall(marshal.dumps({"pid": os.getpid(), "started": started, "served": served,
                                        "idle": server.gettimeout(), "modules": len(imported)}))
        elif not stale:
            served += 1
            if os.fork() == 0:
                server.close()
                _child(conn, fds, request, main)
        conn.close()
        for fd in fds:
            os.close(fd)
        if stale or request.get("op") == "stop":
            break
    with contextlib.suppress(OSError):
        if os.stat(path).st_ino == inode:  # still ours, not a newer process's
            os.unlink(path)


def _child(conn: socket.socket, fds: list[int], request: dict[str, Any], main: Callable[[], None]) -> None:
    """Become the command: its descriptors, folder, environment, umask, sys.path and argv; run it."""
    import threading

    global SERVING
    SERVING = True
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    encoding, errors = request["encoding"]
    sys.stdin = open(0, encoding=encoding, errors=errors, closefd=False)
    sys.stdout = open(1, "w", encoding=encoding, errors=errors, buffering=1 if os.isatty(1) else -1, closefd=False)
    sys.stderr = open(2, "w", encoding=encoding, errors="backslashreplace", buffering=1, closefd=False)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.umask(request["umask"])
    sys.path[:] = request["path"]
    sys.argv = list(request["argv"])
    conn.sendall(HEADER.pack(os.getpid()))

    def watch() -> None:  # the command gone (killed): stop as on Ctrl-C
        with contextlib.suppress(OSError):
            if not conn.recv(1):
                os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=watch, daemon=True).start()
    code = 1
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # noqa: BLE001 - as the interpreter would: the traceback, exit 1
        import traceback

        traceback.print_exc()
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # done: the command leaving now is no stop
        with contextlib.suppress(Exception):
            atexit._run_exitfuncs()  # what the interpreter's exit would do (temporary folders), before the word
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(OSError):
            conn.sendall(HEADER.pack(code & 0xFF))
        os._exit(code & 0xFF)


def processes(stop: bool = False) -> list[dict[str, Any]]:
    """The warm processes of this user (their sockets in the private folder) and what each says of itself
    (pid, start, builds served, idle timeout); `stop`: each is told to exit."""
    where = folder()
    found = []
    for name in sorted(os.listdir(where)) if where else []:
        if not (name.startswith("warm-") and name.endswith(".sock")):
            continue
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(os.path.join(where, name))  # type: ignore[arg-type]
            body = marshal.dumps({"op": "stop" if stop else "status"})
            conn.sendall(HEADER.pack(len(body)) + body)
            said = marshal.loads(conn.recv(4096))
            found.append({**said, "socket": os.path.join(where, name)})  # type: ignore[arg-type]
        except (OSError, ValueError, EOFError, TypeError):
            continue
        finally:
            conn.close()
    return found


def report(stop: bool = False) -> int:
    """`torchbuild warm --status` (each warm process, one line) or `--stop` (each told to exit)."""
    found = processes(stop)
    for entry in found:
        age = time.time() - float(entry["started"])
        print(f"{'stopped' if stop else 'warm'} pid {entry['pid']}: up {age / 60:.1f} min, {entry['served']} "
              f"build(s) served, exits after {float(entry['idle']) / 60:.0f} idle min; {entry['socket']}")
    if not found:
        print("no warm process" + ("" if enabled() else " (TORCHBUILD_WARM=0 or a CI runner: off)"))
    return 0


def _answers(path: str) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _read_int(conn: socket.socket) -> int | None:
    data = _read_exactly(conn, HEADER.size)
    return HEADER.unpack(data)[0] if len(data) == HEADER.size else None


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data

