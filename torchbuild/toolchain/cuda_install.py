"""`inv cuda.install 13.x`: a CUDA toolkit assembled from NVIDIA's PyPI wheels, laid out like
/usr/local/cuda-X.Y (bin, include, lib + lib64, nvvm, targets/x86_64-linux) under the cache dir."""

from __future__ import annotations

import json
import os
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Sequence

from .. import console as _console
from ..errors import TorchbuildError
from ..locks import locked
from ..run import run
from .cuda import how_to_get, version_key

PACKAGES = ("nvidia-cuda-crt", "nvidia-cuda-runtime", "nvidia-nvvm")


def requirement(package: str, version: str) -> str:
    """`13` -> any 13.x, `13.0` -> 13.0.*, `13.0.88` -> exactly that."""
    parts = version.split(".")
    if len(parts) == 1:
        return f"{package}>={parts[0]},<{int(parts[0]) + 1}"
    if len(parts) == 2:
        return f"{package}=={version}.*"
    return f"{package}=={version}"


def install(version: str, cache_root: Path, pip_options: Sequence[str] = (), python: str = sys.executable,
            dry_run: bool = False) -> Path:
    """Download, unpack and lay out the toolkit; return its root. Idempotent, never half-made."""
    if not version.replace(".", "").isdigit():
        raise TorchbuildError(f"bad CUDA version '{version}'", "use a version like 13.0 or 13")
    if version_key(version) < (13,):
        raise TorchbuildError(f"CUDA {version} cannot be installed from PyPI", how_to_get(version))
    base = cache_root / "cuda"
    partial = base / f".cuda-{version}.partial"
    pip = [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "-q", *pip_options, "-d", str(partial / "wheels")]
    if dry_run:
        found = _installed(base, version)
        if not found:
            run([*pip, requirement("nvidia-cuda-nvcc", version)], dry_run=True)
        return found or base / f"cuda-{version}"
    with locked(base / f".cuda-{version}.lock", f"installing CUDA {version}",
                f"another torchbuild is installing CUDA {version}"):  # the later one finds it installed
        return _installed(base, version) or _install(version, partial, pip)


def _installed(base: Path, version: str) -> Path | None:
    """The newest toolkit already laid out for `version` (13.0 or 13.0.88; a bare major always looks again)."""
    existing = sorted(base.glob(f"cuda-{version}*"), key=lambda p: version_key(p.name), reverse=True)
    found = next((p for p in existing if (p / "bin" / "nvcc").exists()), None)
    if found is None or len(version.split(".")) < 2:
        return None
    _console.get().info(f"CUDA {version} is already installed at {found}: nothing to do")
    return found


def _install(version: str, partial: Path, pip: list[str]) -> Path:
    """Download into `partial`, lay the toolkit out there, then rename it into place."""
    con = _console.get()
    base = partial.parent
    if partial.exists():
        shutil.rmtree(partial)
    try:
        run([*pip, requirement("nvidia-cuda-nvcc", version)],
            hint="check the pip index (mirrors.pip_index_url) and that this CUDA version exists on it")
        nvcc_wheel = next((partial / "wheels").glob("nvidia_cuda_nvcc-*.whl"))
        full = nvcc_wheel.name.split("-")[1]
        major, minor = full.split(".")[:2]
        root = base / f"cuda-{major}.{minor}"
        if (root / "bin" / "nvcc").exists():
            con.info(f"CUDA {major}.{minor} is already installed at {root}: nothing to do")
            return root
        reqs = [requirement(p, full) for p in PACKAGES]
        reqs.append(f"nvidia-cuda-cccl>={major}.0,<{major}.{int(minor) + 1}")  # cccl releases lag the toolkit
        run([*pip, *reqs], hint="check the pip index (mirrors.pip_index_url)")
        tree = partial / "tree"
        for wheel in sorted((partial / "wheels").glob("*.whl")):
            _unpack(wheel, tree)
        _lay_out(tree, full)
        shutil.rmtree(partial / "wheels")
        if root.exists():
            shutil.rmtree(root)
        tree.rename(root)
        return root
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)


def _unpack(wheel: Path, dest: Path) -> None:
    """Extract a wheel's nvidia/cuXX/ tree into `dest`, keeping executable bits."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            parts = info.filename.split("/")
            if len(parts) < 3 or parts[0] != "nvidia" or info.is_dir():
                continue
            rel = Path(*parts[2:])
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(target, mode)


def _lay_out(tree: Path, version: str) -> None:
    """The links and files CMake's FindCUDAToolkit and PyTorch's setup expect."""
    if not (tree / "bin" / "nvcc").exists():
        raise TorchbuildError("the downloaded wheels hold no bin/nvcc", "report this torchbuild bug with the version")
    if not (tree / "lib64").exists():
        (tree / "lib64").symlink_to("lib")
    target = tree / "targets" / "x86_64-linux"
    target.mkdir(parents=True, exist_ok=True)
    for name in ("include", "lib"):
        if not (target / name).exists():
            (target / name).symlink_to(Path("..", "..", name))
    for so in (tree / "lib").glob("libcudart.so.*"):
        link = tree / "lib" / "libcudart.so"
        if not link.exists():
            link.symlink_to(so.name)
    (tree / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": version}}, indent=2) + "\n")
