"""Local NVIDIA GPUs through nvidia-smi: names, compute capabilities, driver and its CUDA."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from typing import Mapping

from ..run import run


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_cap: str  # "9.0"
    driver: str


@dataclass(frozen=True)
class GpuInfo:
    gpus: tuple[Gpu, ...]
    driver_cuda: str | None  # newest CUDA the driver supports

    @property
    def arch_list(self) -> str | None:
        caps = sorted({g.compute_cap for g in self.gpus}, key=lambda c: tuple(int(x) for x in c.split(".")))
        return ";".join(caps) or None


def parse_query(text: str) -> list[Gpu]:
    """`nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader` lines."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and re.match(r"^\d+\.\d+$", parts[1]):
            gpus.append(Gpu(*parts))
    return gpus


def parse_driver_cuda(text: str) -> str | None:
    m = re.search(r"CUDA Version:\s*(\d+\.\d+)", text)
    return m.group(1) if m else None


def detect(env: Mapping[str, str]) -> GpuInfo:
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if smi is None:
        return GpuInfo((), None)
    res = run([smi, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"], capture=True,
              echo=False, check=False)
    if res.returncode != 0:
        return GpuInfo((), None)
    header = run([smi], capture=True, echo=False, check=False).stdout
    return GpuInfo(tuple(parse_query(res.stdout)), parse_driver_cuda(header))
