"""The torch an extension or domain library builds against (DESIGN: the torch you built is the torch everything
else builds against; PYTORCH_FACTS.md, "Extensions and domain libraries").

    extends()        whether a checkout builds against torch (cpp_extension, CMake's find_package(Torch)), and which
    configuration()  --torch PATH: the configuration a PyTorch checkout torchbuild builds holds now, and its env
    folder()         the torch package's folder (include/, lib/): the checkout's up to 2.13, the env's from 2.14
    built_cuda()     the CUDA a torch was built with (its version.py): a wheel's decides an extension's toolkit
    pending()        what of the torch an extension's binaries depend on beyond ninja's graph changed: its
                     libraries' exported symbols (its headers are inputs ninja's depfiles name)
    device_code()    whether a built library holds CUDA device code (an ELF `.nv_fatbin` section)
    protect()        the env's pip pinned to the torch built there: nothing installed later replaces it
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from .. import config as _config
from ..envs.copies import CONSTRAINTS as CONSTRAINTS
from ..errors import TorchbuildError
from ..run import run
from .drivers import detect
from .ownership.moves import dist_metadata, editable_record
from .ownership.records import read_marker

CPP_EXTENSION = re.compile(r"\b(\w+)\.utils(?:\.cpp_extension\b|\s+import\s+(?:\([^)]*)?\bcpp_extension\b)")
FIND_TORCH = re.compile(r"find_package\s*\(\s*Torch\b", re.I)
KEY = re.compile(r"(?:core-)?py(?P<python>\d+\.\d+)-(?P<cuda>cpu|cu\d+)-(?P<build_type>release|debug|relwithdebinfo)")
SYMBOLS = ".torchbuild-against.json"  # in the extension's tree: the torch's libraries' exported symbols it linked


def extends(checkout: Path) -> str | None:
    """The torch package a checkout's build imports to build against (`torch`; the demo's `minitorch`): its
    setup.py uses `<package>.utils.cpp_extension`, or its CMake finds Torch; None for any other project."""
    setup = checkout / "setup.py"
    found = CPP_EXTENSION.search(setup.read_text(errors="replace")) if setup.is_file() else None
    if found:
        return found.group(1)
    cmake = checkout / "CMakeLists.txt"
    return "torch" if cmake.is_file() and FIND_TORCH.search(cmake.read_text(errors="replace")) else None


@dataclass(frozen=True)
class TorchConfiguration:
    """The configuration a PyTorch checkout torchbuild builds holds now (its build/ tree's record)."""

    checkout: Path
    key: str  # py3.11-cu130-release
    python: str  # the Python minor (3.11)
    cuda: str | None  # the toolkit's root (CUDA_HOME), None for a CPU build
    build_type: str
    env_python: Path  # the interpreter of the env it is installed in
    arch: str | None = None  # its TORCH_CUDA_ARCH_LIST: an extension's default, so its kernels run where torch's do

    @property
    def tag(self) -> str:
        """The torch in an extension's configuration name: the checkout's folder and where it is."""
        return f"on-{re.sub(r'[^A-Za-z0-9._-]', '_', self.checkout.name)}-" \
               f"{hashlib.sha256(str(self.checkout).encode()).hexdigest()[:6]}"


def configuration(torch: str | Path, env: Mapping[str, str]) -> TorchConfiguration:
    """What `--torch PATH` names: the PyTorch checkout at PATH (or the source of the torchbuild project at PATH)
    and the configuration its last complete build installed; a clear error for anything else."""
    path = Path(torch).expanduser().resolve()
    if not path.is_dir():
        raise TorchbuildError(f"--torch {torch}: there is no folder {path}",
                              "pass the PyTorch checkout (or its torchbuild project) the extension builds against")
    own = {k: v for k, v in env.items() if k != "TORCHBUILD_CONFIG"}
    project = _config.locate(path, own)
    checkout = _config.load(project.root, own, defaults=project.defaults).source_path
    if not (checkout / "setup.py").is_file() and not (checkout / "pyproject.toml").is_file() \
            or not detect(checkout).pytorch():
        raise TorchbuildError(f"--torch {torch}: {checkout} is not a PyTorch checkout (neither tools/setup_helpers "
                              "nor cmake/EnvVarForwarding.cmake)", "pass the PyTorch checkout torchbuild builds, "
                              "or leave --torch out to build against the env's own torch")
    marker = read_marker(checkout / "build") if (checkout / "build").is_dir() else None
    key = marker.key if marker else ""
    found = KEY.fullmatch(key)
    configure = marker.configure if marker else {}
    python = configure.get("python")
    if not marker or not marker.done or not found or not python or key.startswith("core-") or marker.wheel:
        raise TorchbuildError(f"--torch {torch}: {checkout} holds no complete develop build"
                              + (f" (its tree is {key})" if key else ""),
                              f"build it first: `torchbuild build --path {checkout}` (with the Python, CUDA and build "
                              "type the extension needs)")
    cuda = configure.get("CUDA_HOME")
    arch = configure.get("TORCH_CUDA_ARCH_LIST")
    return TorchConfiguration(checkout, key, found["python"], str(cuda) if cuda and found["cuda"] != "cpu" else None,
                              found["build_type"], Path(str(python)), str(arch) if arch else None)


def folder(package: str, env_prefix: Path, checkout: Path | None) -> Path | None:
    """The torch package's folder holding lib/: in its checkout (setup.py installs there up to 2.13), else in
    the env's site-packages (scikit-build-core's installs from 2.14, a wheel from the index)."""
    candidates = [checkout / package] if checkout else []
    candidates += sorted(env_prefix.glob(f"lib/python*/site-packages/{package}"))
    return next((c for c in candidates if (c / "lib").is_dir()), None)


def libraries(torch_folder: Path) -> list[Path]:
    return sorted(p for p in (torch_folder / "lib").glob("*.so*") if p.is_file())


def exported(libs: Iterable[Path], kept: Mapping[str, object]) -> dict[str, object]:
    """Each library's exported (defined, dynamic) symbols as a digest, with the size and mtime it was read at;
    a library unchanged since `kept` keeps its digest unread."""
    out: dict[str, object] = {}
    for lib in libs:
        st = lib.stat()
        stat = [st.st_size, st.st_mtime_ns]
        before = kept.get(lib.name)
        if isinstance(before, dict) and before.get("stat") == stat:
            out[lib.name] = before
            continue
        names = run(["nm", "-D", "--defined-only", "--format=posix", str(lib)], capture=True, echo=False,
                    check=False).stdout
        symbols = sorted(line.split(" ", 1)[0] for line in names.splitlines() if line)
        out[lib.name] = {"stat": stat, "symbols": hashlib.sha256("\n".join(symbols).encode()).hexdigest()[:20]}
    return out


def relinks(tree: Path, torch_folder: Path | None) -> tuple[list[str], tuple[Path, dict[str, object]] | None]:
    """Why the extension's binaries must be linked again for the torch it builds against, in ninja's words
    (none: its libraries export what they exported at the last build), and the exports as read now, which the
    build keeps in the tree (`keep_symbols`; a build that then fails leaves its record unfinished, which builds
    again anyway)."""
    if torch_folder is None:
        return [], None
    kept_file = tree / SYMBOLS
    try:
        kept = json.loads(kept_file.read_text())
    except (OSError, ValueError):
        kept = None
    now = exported(libraries(torch_folder), kept if isinstance(kept, dict) else {})
    keep = (kept_file, now) if kept != now else None
    if not isinstance(kept, dict):
        return [], keep  # the first build against it: nothing to compare with (the record says whether it finished)
    changed = sorted(name for name in {*kept, *now} if symbols(kept.get(name)) != symbols(now.get(name)))
    return [f"ninja explain: {torch_folder / 'lib' / name} (torch) exports other symbols than at the last build: "
            "the extension links again" for name in changed], keep


def keep_symbols(kept: tuple[Path, Mapping[str, object]] | None) -> None:
    """Keep the torch's exports in the extension's tree, for the next build's relink check."""
    if kept is not None:
        kept[0].parent.mkdir(parents=True, exist_ok=True)
        kept[0].write_text(json.dumps(kept[1], indent=1))


def symbols(entry: object) -> object:
    return entry.get("symbols") if isinstance(entry, dict) else None


def device_code(library: Path) -> bool:
    """Whether an ELF shared library holds CUDA device code: a `.nv_fatbin` section (nvcc's fat binary). Reads
    the section headers and their names only (a CUDA library runs to hundreds of MB; every build asks)."""
    try:
        with open(library, "rb") as elf:
            head = elf.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:
                return False
            shoff, = struct.unpack_from("<Q", head, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
            elf.seek(shoff)
            table = elf.read(shentsize * shnum)
            names_at, names_size = struct.unpack_from("<QQ", table, shstrndx * shentsize + 0x18)
            elf.seek(names_at)
            names = elf.read(names_size)
        for i in range(shnum):
            name, = struct.unpack_from("<I", table, i * shentsize)
            if names[name:names.index(b"\0", name)] == b".nv_fatbin":
                return True
    except (OSError, struct.error, ValueError, IndexError):
        return False
    return False


def pinned_before(pins: Path) -> list[str]:
    """The constraints files that applied before the env's pin (its `-c` lines)."""
    return [line[3:].strip() for line in pins.read_text().splitlines() if line.startswith("-c ")]


def configured_constraints(env_python: Path, pins: Path) -> list[str]:
    """The constraints files pip's configuration names for an install in this env (the machine's, the user's),
    but the env's own pin."""
    listed = run([str(env_python), "-m", "pip", "config", "list"], capture=True, echo=False, check=False).stdout
    found = re.findall(r"^(?:global|install|:env:)\.constraint='(.*)'$", listed, re.M)
    return list(dict.fromkeys(c for value in found for c in value.split() if Path(c) != pins))


def protect(env_python: Path, dist: str, version: str) -> Path:
    """Pin the env's `dist` to the version just built there: a constraints file in the env, named by the env's
    own pip.conf (`[install] constraint`, which wins over the user's and the machine's config and so carries
    theirs as `-c` lines). pip then refuses any resolution that would replace it, naming it ("The user
    requested (constraint) torch==..."); torchbuild's own builds of the checkout pass PIP_CONSTRAINT without it.
    Returns the constraints file."""
    prefix = env_python.parent.parent
    pins = prefix / CONSTRAINTS
    before = pinned_before(pins) if pins.is_file() else configured_constraints(env_python, pins)
    head = f"# torchbuild: the {dist} built in this env; pip may not replace it (torchbuild's builds write this file)"
    text = "\n".join([head, f"{dist}=={version}", *[f"-c {c}" for c in before]]) + "\n"
    if not pins.is_file() or pins.read_text() != text:
        pins.write_text(text)
    conf = prefix / "pip.conf"
    current = conf.read_text() if conf.is_file() else ""
    line = f"constraint = {pins}"
    if line not in current:
        section = "[install]\n"
        conf.write_text(current.replace(section, section + line + "\n", 1) if section in current
                        else current + ("\n" if current and not current.endswith("\n") else "") + section + line + "\n")
    return pins


def installed_dist(env_prefix: Path, checkout: Path) -> tuple[str, str] | None:
    """The distribution name and version of the env's editable install of `checkout` (its dist-info's METADATA)."""
    said = dist_metadata(editable_record(env_prefix, checkout))
    return (said["Name"], said["Version"]) if "Name" in said and "Version" in said else None


def without_device_code(outputs: Iterable[Path]) -> list[str] | None:
    """The names of an extension's built libraries when none holds device code (None: one does, or none
    was built)."""
    libs = [p for p in outputs if p.suffix == ".so" or ".so." in p.name]
    return None if not libs or any(device_code(p) for p in libs) else sorted(p.name for p in libs)


BUILT_CUDA = re.compile(r"^cuda(?::[^=\n]*)?=\s*(None|'([\d.]+)')\s*$", re.M)


def built_cuda(torch_folder: Path) -> str | None:
    """The CUDA version a torch was built with, as its version.py says (`cuda = '12.8'`), "cpu" for a CPU build
    (`cuda = None`), None where it says neither."""
    version = torch_folder / "version.py"
    found = BUILT_CUDA.search(version.read_text(errors="replace")) if version.is_file() else None
    return None if found is None else found.group(2) or "cpu"
