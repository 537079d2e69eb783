"""The nightly index: which prebuilt wheels it has for an env's Python, one downloaded into the cache
(once), and what a wheel says about itself (version.py's git_version, its requirements).

pip does the asking, with the env's own interpreter, so the wheels listed are the ones that install
there (its Python tag, its platform), through the mirrors of the env's pip.conf.
"""

from __future__ import annotations

import ast
import re
import shutil
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from .. import wheels
from ..errors import CommandError, TorchbuildError
from ..run import run

PYTORCH_NIGHTLY = "https://download.pytorch.org/whl/nightly/{variant}"
DEV_DATE = re.compile(r"\.dev(\d{8})")


@dataclass(frozen=True)
class Wheel:
    """A downloaded nightly wheel and what it says about itself."""

    path: Path
    version: str
    git_version: str  # the commit it was built from (PyTorch's nightlies: a commit of the `nightly` branch)
    requires: tuple[str, ...]  # its Requires-Dist, extras left out


def variant(toolkit_version: str | None) -> str:
    """PyTorch's name for a wheel's flavour: cpu, or cu130 for CUDA 13.0."""
    return "cu" + toolkit_version.replace(".", "") if toolkit_version else "cpu"


def index_url(template: str, flavour: str) -> str:
    """nightly.index_url with {variant} filled in."""
    return template.replace("{variant}", flavour)


def available(python: Path, package: str, url: str, env: Mapping[str, str]) -> list[str]:
    """The versions of `package` at `url` that install into `python`'s env, newest first; [] if none."""
    argv = [str(python), "-m", "pip", "--disable-pip-version-check", "index", "versions", package, "--pre",
            "--index-url", url]
    result = run(argv, env=env, capture=True, echo=False, check=False)
    listed = re.search(r"^Available versions:\s*(.*)$", result.stdout, re.M)
    if result.returncode and not listed:
        text = result.stdout + result.stderr
        if "No matching distribution" in text:
            return []
        reason = next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "no output")
        raise TorchbuildError(f"cannot list {package} at the nightly index {url}: {reason}",
                              "check nightly.index_url (and the mirrors), then run the command again")
    return [v.strip() for v in listed.group(1).split(",") if v.strip()] if listed else []


def dev_date(version: str) -> str | None:
    """The day a nightly was built, from its version (2.6.0.dev20241201+cpu -> 20241201)."""
    m = DEV_DATE.search(version)
    return m.group(1) if m else None


def download(python: Path, package: str, version: str, url: str, cache: Path, env: Mapping[str, str]) -> Path:
    """The wheel of `package==version` for `python`'s env, from the cache or downloaded into it."""
    tag = run([str(python), "-c", "import sys; print('cp%d%d' % sys.version_info[:2])"], capture=True,
              echo=False).stdout.strip()
    folder = cache / f"{package}-{version}-{tag}"
    kept = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    if kept:
        try:
            read(kept[0], package)
            return kept[0]
        except (TorchbuildError, zipfile.BadZipFile):  # kept by an older torchbuild that did not read first
            shutil.rmtree(folder, ignore_errors=True)
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    argv = [str(python), "-m", "pip", "--disable-pip-version-check", "download", "--no-deps", "--pre",
            "--only-binary", ":all:", "--index-url", url, "-d", str(partial), f"{package}=={version}"]
    try:
        run(argv, env=env, capture=True)
    except CommandError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        raise TorchbuildError(f"cannot download {package}=={version} from the nightly index {url}",
                              "check nightly.index_url and the network, then run the command again") from exc
    wheels = sorted(partial.glob("*.whl"))
    if not wheels:
        shutil.rmtree(partial, ignore_errors=True)
        raise TorchbuildError(f"the nightly index {url} gave no wheel for {package}=={version}",
                              "check nightly.index_url, or pass --version")
    try:
        read(wheels[0], package)  # read before kept: a bad wheel is never served from the cache later
    except (TorchbuildError, zipfile.BadZipFile):
        shutil.rmtree(partial, ignore_errors=True)
        raise
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)  # whole or not at all: a cut download is never taken for a wheel
    return folder / wheels[0].name


def unsafe_member(info: zipfile.ZipInfo) -> str | None:
    """Why a wheel member may not be written into a checkout (None: it may): an absolute path, one that
    climbs out or is not in its normal form (`torch/lib/../../x`), a link."""
    name = info.filename
    parts = name.rstrip("/").split("/")
    if name.startswith("/") or "\\" in name or re.match(r"^[A-Za-z]:", name):
        return "an absolute path"
    if any(part in ("", ".", "..") for part in parts):
        return "a path that climbs out or is not in normal form"
    if stat.S_ISLNK(info.external_attr >> 16):
        return "a symbolic link"
    return None


def refuse_unsafe(wheel: Path, members: Sequence[zipfile.ZipInfo]) -> None:
    """An error naming the first member of `wheel` that may not be written into a checkout (unsafe_member)."""
    for info in members:
        why = unsafe_member(info)
        if why:
            raise TorchbuildError(f"{wheel.name} has a member that would be written outside its folder: "
                                  f"{info.filename} ({why}); nothing was placed",
                                  "check nightly.index_url: that index serves a wheel no build made")


def read(path: Path, package: str) -> Wheel:
    """Version, git_version and requirements of a wheel of `package`; a wheel with a member that could
    write outside the checkout, or whose version.py does not parse, is refused, naming it."""
    import_name = package.replace("-", "_")
    with zipfile.ZipFile(path) as whl:
        refuse_unsafe(path, whl.infolist())
        names = whl.namelist()
        meta = next((n for n in names if n.endswith(".dist-info/METADATA") and "/" not in n[:-len("/METADATA")]), None)
        version_py = next((n for n in names if n == f"{import_name}/version.py"), None) or \
            next((n for n in names if n.count("/") == 1 and n.endswith("/version.py")), None)
        if meta is None or version_py is None:
            raise TorchbuildError(f"{path.name} is not a nightly wheel of {package} (no METADATA or version.py)",
                                  "check nightly.package and nightly.index_url")
        metadata = whl.read(meta).decode(errors="replace")
        try:
            values = assignments(whl.read(version_py).decode(errors="replace"))
        except (SyntaxError, ValueError) as exc:
            why = exc.msg if isinstance(exc, SyntaxError) else str(exc)
            raise TorchbuildError(f"{path.name}: {version_py} does not parse ({why})",
                                  "pass --version for another nightly, or check nightly.index_url") from None
    version = re.search(r"^Version:\s*(\S+)", metadata, re.M)
    requires = wheels.requires(metadata)
    git_version = values.get("git_version", "")
    if not re.fullmatch(r"[0-9a-f]{40}", git_version):
        raise TorchbuildError(f"{path.name} does not say which commit it was built from ({version_py} has no "
                              "git_version)", "pass --version for another nightly")
    return Wheel(path, version.group(1) if version else "", git_version, requires)


def assignments(source: str) -> dict[str, str]:
    """The string constants a module assigns (version.py: __version__, git_version, cuda)."""
    out: dict[str, str] = {}
    for node in ast.parse(source).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        value = getattr(node, "value", None)
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            out.update({t.id: value.value for t in targets if isinstance(t, ast.Name)})
    return out


def compiled_members(path: Path, folders: Sequence[str]) -> list[zipfile.ZipInfo]:
    """The wheel's files under the checkout's package folders (the only ones a checkout can take)."""
    with zipfile.ZipFile(path) as whl:
        return [i for i in whl.infolist() if not i.is_dir() and i.filename.split("/", 1)[0] in folders]
