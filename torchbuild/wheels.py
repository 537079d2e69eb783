"""Wheels after the build: installed into an env without starting pip (the `installer` library, which
pip itself uses underneath: ~0.05 s where pip takes ~0.5-1.5 s), and retagged for any Python 3.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Sequence

from .run import run

SCHEME = "import json, sysconfig; print(json.dumps(sysconfig.get_paths()))"


def env_paths(python: Path) -> dict[str, str]:
    """The install paths of `python`'s env (purelib, platlib, scripts, data, include)."""
    return dict(json.loads(run([str(python), "-c", SCHEME], capture=True, echo=False).stdout.strip().splitlines()[-1]))


def record_rows(record: Path) -> list[list[str]]:
    """An installed distribution's RECORD, row by row (path, hash, size), read as CSV as pip reads it: a path
    holding a comma is quoted there. [] without a readable one. The one reader of RECORD files."""
    import csv

    try:
        text = record.read_text(errors="replace")
    except OSError:
        return []
    return [row for row in csv.reader(text.splitlines()) if row and row[0]]


def record_paths(record: Path) -> list[str]:
    """The paths a RECORD lists, relative to its site-packages."""
    return [row[0] for row in record_rows(record)]


def write_record(record: Path, rows: Sequence[Sequence[str]]) -> None:
    """A RECORD written whole (to a temporary file first), as CSV, as pip writes it."""
    import csv
    import io

    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    temp = record.with_name(f".{record.name}.torchbuild")
    temp.write_text(out.getvalue())
    temp.replace(record)


def requires(metadata: str) -> tuple[str, ...]:
    """A wheel's METADATA's Requires-Dist, those of extras left out."""
    return tuple(m.strip() for m in re.findall(r"^Requires-Dist:\s*(.+)$", metadata, re.M) if "extra ==" not in m)


def wheel_requires(wheel: Path) -> tuple[str, ...]:
    """What the wheel requires at run time (its .dist-info/METADATA)."""
    with zipfile.ZipFile(wheel) as whl:
        meta = next((n for n in whl.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1), None)
        return requires(whl.read(meta).decode(errors="replace")) if meta else ()


ELIMINATE = re.compile(r"following shared library dependencies will need to be eliminated:\s*\n\n((?:\S+\n?)+)")


def outside_manylinux(wheel: Path, provided: Sequence[Path] = ()) -> list[str]:
    """The shared libraries outside the wheel that even the newest manylinux policy does not allow
    (`auditwheel show`: a system libprotobuf, a toolkit's libcudart), but those the `provided` wheels
    hold (the split build's core): a wheel that runs here but not on another Linux as it is. [] for a
    wheel without any, a pure one, or without auditwheel."""
    shown = run([sys.executable, "-m", "auditwheel", "show", str(wheel)], capture=True, echo=False, check=False)
    found = ELIMINATE.search(shown.stdout) if shown.returncode == 0 else None
    theirs = set()
    for other in provided:
        with zipfile.ZipFile(other) as whl:
            theirs |= {Path(n).name for n in whl.namelist()}
    return [lib for lib in (found.group(1).split() if found else []) if lib not in theirs]


def manylinux_warning(wheel: Path, provided: Sequence[Path] = ()) -> str:
    """What the summary says of a wheel that links libraries outside every manylinux policy ("": none)."""
    foreign = outside_manylinux(wheel, provided)
    return (f"links {', '.join(foreign)} from this machine, outside every manylinux policy: it runs here, not on "
            "another Linux as it is (auditwheel repair copies them in)") if foreign else ""


def install(wheels: Sequence[Path], python: Path, replace: bool = False) -> Path:
    """Install `wheels` into the env of `python` (no deps, no bytecode), in order, and return its site-packages.
    A file another wheel put there is overwritten, as pip does: the split build's two wheels both hold the
    package's __init__.py, include/ and share/ (install the core first). With `replace`, each project's
    earlier install is removed first, as `pip install --force-reinstall` does."""
    from installer import install as unpack
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    paths = env_paths(python)
    scheme = {"purelib": paths["purelib"], "platlib": paths["platlib"], "scripts": paths["scripts"],
              "data": paths["data"], "headers": paths["include"]}
    destination = SchemeDictionaryDestination(scheme, str(python), "posix", bytecode_optimization_levels=(),
                                             overwrite_existing=True)
    for wheel in wheels:
        with WheelFile.open(wheel) as source:
            if replace:
                for site in {paths["purelib"], paths["platlib"]}:
                    uninstall(Path(site), source.distribution, Path(paths["data"]))
            unpack(source, destination, {"INSTALLER": b"torchbuild\n"})
    return Path(paths["purelib"])


def normalize(name: str) -> str:
    """A project name as wheel file names and dist-info folders spell it (PEP 503, with underscores)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def project_of(wheel: Path) -> str:
    """The normalized project name of a wheel file (name-version-tags.whl)."""
    return normalize(wheel.name.split("-")[0])


def uninstall(site: Path, project: str, prefix: Path) -> None:
    """Remove every install of `project` from `site`: the files its RECORD lists (within the env's
    `prefix`), their __pycache__, the folders left empty, and the .dist-info itself."""
    for info in site.glob("*.dist-info"):
        if normalize(info.name[: -len(".dist-info")].split("-")[0]) != normalize(project):
            continue
        folders = set()
        for name in record_paths(info / "RECORD"):
            target = Path(os.path.abspath(site / name))
            if target.is_relative_to(prefix) and target.is_file():
                target.unlink()
                folders.add(target.parent)
        shutil.rmtree(info, ignore_errors=True)
        for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
            shutil.rmtree(folder / "__pycache__", ignore_errors=True)
            while folder != site and folder.is_relative_to(site) and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
                folder = folder.parent


def any_python(wheel: Path, folder: Path) -> Path:
    """The wheel tagged `py3-none-<platform>` (for one that holds no Python extension, as the split
    build's core), made once in `folder`. A setup.py tags every platform wheel with the Python that
    built it, which pip then refuses elsewhere; and a wheel without extension modules `py3-none-any`,
    although the libraries it holds run on this platform only."""
    import sysconfig

    name, version, python, abi, platform = wheel.name[:-4].split("-")[-5:]
    with zipfile.ZipFile(wheel) as whl:
        native = any(re.search(r"\.so(\.\d+)*$", n) for n in whl.namelist())
    here = re.sub(r"[-.]", "_", sysconfig.get_platform())
    tag = here if platform == "any" and native else platform
    if (python, abi, platform) == ("py3", "none", tag):
        return wheel
    out = folder / f"{name}-{version}-py3-none-{tag}.whl"
    if out.exists() and out.stat().st_mtime_ns >= wheel.stat().st_mtime_ns:
        return out
    folder.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        infos = src.infolist()
        record = next(i.filename for i in infos if i.filename.endswith(".dist-info/RECORD"))
        meta = record.rsplit("/", 1)[0] + "/WHEEL"
        data = src.read(meta).decode().replace(f"Tag: {python}-{abi}-{platform}", f"Tag: py3-none-{tag}")
        if tag != platform:
            data = data.replace("Root-Is-Purelib: true", "Root-Is-Purelib: false")
        digest = base64.urlsafe_b64encode(hashlib.sha256(data.encode()).digest()).rstrip(b"=").decode()
        rows = [f"{meta},sha256={digest},{len(data.encode())}" if line.startswith(meta + ",") else line
                for line in src.read(record).decode().splitlines()]
        for info in infos:
            body = data.encode() if info.filename == meta else ("\n".join(rows) + "\n").encode() \
                if info.filename == record else src.read(info)
            dst.writestr(info, body)
    tmp.replace(out)
    return out
