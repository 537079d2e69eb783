"""The build requirements too big to copy into every env: MKL (`mkl-static`, `mkl-include`, with intel-openmp,
tbb and the rest pip resolves for them), 350 MB of wheels and about 1.4 GB unpacked. Each wheel is unpacked once
into a store in the cache dir, laid out as an env is, and its files are hard-linked into every env that needs
it, as uv links from its cache: a second env costs seconds and no space. pip sees each project installed (its
dist-info and RECORD, INSTALLER `torchbuild`) and uninstalls it by unlinking; nothing writes through a link.
Where the env's folder is on another file system than the store, the files are copied instead."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import TorchbuildError
from ..locks import locked
from ..run import run

SHARED = ("mkl-static", "mkl-include")
SITE = Path("lib", "python", "site-packages")  # the store's site-packages: three levels deep, as an env's
COMPLETE = ".complete"
IDENTITIES = ".identities"  # each file's size and mtime as unpacked: what `whole` checks before a new env links it
SAID = re.compile(r"(?:Saved|File was already downloaded) (\S+\.whl)")


def split(reqs: Sequence[str]) -> tuple[list[str], list[str]]:
    """The requirements the store serves, and the rest (pip installs those)."""
    shared = [r for r in reqs if re.split(r"[<>=!~; \[]", r, maxsplit=1)[0].lower() in SHARED]
    return shared, [r for r in reqs if r not in shared]


def install(python: Path, prefix: Path, reqs: Sequence[str], cache_root: Path, env: Mapping[str, str]) -> int:
    """Put `reqs` and what they depend on into the env at `prefix` from the store; the number of projects."""
    if not reqs:
        return 0
    store = cache_root / "store"
    store.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=store, prefix=".wheels-") as tmp:  # pip's own cache keeps them
        wheels = download(python, reqs, Path(tmp), env)
        site = next(prefix.glob("lib/python*/site-packages"))
        for wheel in wheels:
            name = wheel.name[: -len(".whl")]
            with locked(store / f".{name}.lock", f"unpacking {wheel.name}", f"another torchbuild unpacks {wheel.name}"):
                link(unpacked(wheel, store), prefix, site)  # under its lock: `clean --all` never prunes it halfway
    return len(wheels)


def download(python: Path, reqs: Sequence[str], dest: Path, env: Mapping[str, str]) -> list[Path]:
    """The wheels of `reqs` and their dependencies, through the env's pip and its index, into `dest`."""
    done = run([str(python), "-m", "pip", "download", "--only-binary=:all:", "--disable-pip-version-check",
                "-d", str(dest), *reqs], env=dict(env), capture=True, echo=False, check=False)
    wheels = [dest / Path(name).name for name in SAID.findall(done.stdout)]
    if done.returncode != 0 or not wheels:
        said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("WARNING")]
        raise TorchbuildError(f"cannot download {' '.join(reqs)}: {said[-1].strip() if said else 'no wheels'}",
                              "check mirrors.pip_index_url (or pip's own index setting), or set build.mkl: false")
    return wheels


def unpacked(wheel: Path, store: Path) -> Path:
    """The wheel unpacked into the store (once; never half-made: unpacked aside, then renamed), under the
    caller's lock of it."""
    from installer import install as unpack
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    target = store / wheel.name[: -len(".whl")]
    if (target / COMPLETE).exists():
        if whole(target):
            return target
        from .. import console as _console

        if (target / IDENTITIES).exists():
            _console.get().warn(f"the store's {target.name} is not as it was unpacked (a strip, patchelf or an "
                                "editor through an env's link?): unpacked again; the envs that link it keep the "
                                "changed files")
        else:
            _console.get().info(f"the store's {target.name}, unpacked by an older torchbuild, is unpacked again, "
                                "read-only and checked before each new env links it")
        gone = target.with_name(f".removing-{target.name}-{os.getpid()}")
        target.rename(gone)
        shutil.rmtree(gone)
    partial = store / f".{target.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    site = str(partial / SITE)
    with WheelFile.open(wheel) as source:
        scheme = {"purelib": site, "platlib": site, "scripts": str(partial / "bin"), "data": str(partial),
                  "headers": str(partial / "include" / source.distribution)}
        unpack(source, SchemeDictionaryDestination(scheme, "python", "posix", bytecode_optimization_levels=()),
               {"INSTALLER": b"torchbuild\n"})
    identities = {}
    for file in sorted(p for p in partial.rglob("*") if p.is_file() and not p.is_symlink()):
        file.chmod(file.stat().st_mode & ~0o222)  # read-only: nothing writes through a link into every env
        st = file.lstat()
        identities[file.relative_to(partial).as_posix()] = [st.st_size, st.st_mtime_ns]
    (partial / IDENTITIES).write_text(json.dumps(identities))
    (partial / COMPLETE).touch()
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return target


def whole(entry: Path) -> bool:
    """Whether every file of the entry is as it was unpacked (size and mtime: a strip, patchelf or an editor moves
    them; a link does not, as it moves the ctime); an entry of an older torchbuild, which kept no list, is not."""
    try:
        identities = json.loads((entry / IDENTITIES).read_text())
    except (OSError, ValueError):
        return False
    for name, (size, mtime) in identities.items():
        try:
            st = os.lstat(entry / name)
        except OSError:
            return False
        if (st.st_size, st.st_mtime_ns) != (size, mtime):
            return False
    return True


def entries(store: Path) -> list[Path]:
    """The store's unpacked projects (whole ones: a partial unpack is a dot folder)."""
    return sorted(p for p in store.glob("*") if not p.name.startswith(".") and p.is_dir() and not p.is_symlink()
                  and (p / COMPLETE).is_file()) if store.is_dir() else []


def inodes(store: Path) -> set[tuple[int, int]]:
    """The identities (device, inode) of the store's files: what an env holds of them is a link to one."""
    found = set()
    for entry in entries(store):
        for root, _dirs, files in os.walk(entry):
            for name in files:
                with contextlib.suppress(OSError):
                    st = os.lstat(os.path.join(root, name))
                    found.add((st.st_dev, st.st_ino))
    return found


def referenced(entry: Path) -> bool:
    """Whether an env still links to one of the entry's files (a hard link: a second name of the same file). An
    env on another file system holds copies, which need nothing of the store."""
    for root, _dirs, files in os.walk(entry):
        for name in files:
            try:
                if os.lstat(os.path.join(root, name)).st_nlink > 1:
                    return True
            except OSError:
                continue
    return False


def prune(entry: Path) -> None:
    """Remove an entry no env links to, under the lock `install` holds while it links: renamed out of the
    entries first, so a kill halfway leaves a dot folder, not a half entry a new env would link."""
    with locked(entry.parent / f".{entry.name}.lock", f"pruning {entry.name}", f"another torchbuild uses {entry.name}"):
        if referenced(entry):
            return
        gone = entry.with_name(f".removing-{entry.name}-{os.getpid()}")
        entry.rename(gone)
        shutil.rmtree(gone)


def link(tree: Path, prefix: Path, site: Path) -> None:
    """Every file of a stored project into the env: its site-packages part into `site`, the rest under
    `prefix`; hard links where the file system allows, else copies."""
    for src in sorted(tree.rglob("*")):
        rel = src.relative_to(tree)
        if src.is_dir() or rel in (Path(COMPLETE), Path(IDENTITIES)):
            continue
        dest = site / rel.relative_to(SITE) if rel.is_relative_to(SITE) else prefix / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink() or dest.exists():
            dest.unlink()  # the env's own earlier copy of the same file (an env made anew), as pip overwrites
        try:
            os.link(src, dest)
        except OSError:
            shutil.copy2(src, dest)
