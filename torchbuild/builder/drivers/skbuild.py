"""scikit-build-core: PyTorch 2.14 and main (PYTORCH_FACTS.md, "The scikit-build-core era": the backend switch,
PR #180247; cmake/EnvVarForwarding.cmake; tools/metadata), and any other scikit-build-core project.

An editable install is `editable.mode = "redirect"`: the .py files are imported from the checkout through
an import hook (`_editable_skbc_<name>.pth/.py` in site-packages), and everything CMake installs is copied
into the env's site-packages. The CMake tree is `build/` (`-C build-dir=build`; PyTorch's pyproject and
build_stage2.py assume `<checkout>/build`), which torchbuild keeps per configuration, as for setup.py; without
it scikit-build-core builds in a temporary folder, from nothing, every time. A project's own build-dir
(iminuit's `build/{wheel_tag}`) stays its users' own `pip install -e .`'s: a switch of configuration leaves
such a tree where it is and `clean` keeps it (trees.not_ours). setup.py, where there is one, is a shim
(PR #180248): torchbuild never runs it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

from ...compat import pyproject
from .base import Driver

STAGE2 = "tools/native_aot/build_stage2.py"  # PyTorch main: native-AOT stage 2, after the install (spin develop)

CMAKE_BUILD_TYPE = {"release": "Release", "debug": "Debug", "relwithdebinfo": "RelWithDebInfo"}


class ScikitBuildCore(Driver):
    name = "scikit-build-core"
    outputs_in_env = True

    def describe(self) -> str:
        era = "PyTorch's scikit-build-core driver (2.14 and main)" if self.is_pytorch(self.checkout) else self.name
        return f"{era} ({self.backend}); build tree build/, compiled outputs in the env's site-packages"

    @staticmethod
    def is_pytorch(checkout: Path) -> bool:
        """PyTorch's own files of this era: the CMake module that forwards the environment."""
        return (checkout / "cmake" / "EnvVarForwarding.cmake").is_file() or (checkout / "tools" / "metadata").is_dir()

    def pytorch(self) -> bool:
        return self.is_pytorch(self.checkout)

    def forwards_cmake_variables(self) -> bool:
        return self.is_pytorch(self.checkout)  # cmake/EnvVarForwarding.cmake, at every configure

    def config_settings(self, build_type: str) -> dict[str, str]:
        """The kept tree, and the build type (scikit-build-core reads neither DEBUG nor REL_WITH_DEB_INFO;
        PyTorch's pyproject maps them to the same setting through [[tool.scikit-build.overrides]])."""
        return {"build-dir": "build", "cmake.build-type": CMAKE_BUILD_TYPE[build_type]}

    def env_install(self, build_type: str, env: Mapping[str, str]) -> tuple[str, bool] | None:
        """`wheel.install-dir` (PyTorch: the package folder; CMake's prefix inside the wheel) and whether
        scikit-build-core strips what it installs (`strips`)."""
        settings = pyproject(self.checkout).get("tool", {}).get("scikit-build", {})
        return str(settings.get("wheel", {}).get("install-dir") or ""), strips(settings, build_type, env)

    def loop(self, cmake: str, config: str, into: Path | None) -> list[list[str]]:
        """CMake's build, then its install into the env's folder the editable install copied it to (no staging
        tree, no zip: #196619); the backend's strip follows, for what the install copied (stripping.py)."""
        if into is None:
            return super().loop(cmake, config, into)
        return [[cmake, "--build", ".", "--config", config],
                [cmake, "--install", ".", "--config", config, "--prefix", str(into)]]

    def after_install(self, python: str) -> tuple[str, ...]:
        """PyTorch's native-AOT stage 2 where the checkout has it: `spin develop` runs it after pip, which
        does not (tools/native_aot/build_stage2.py; it skips by itself without CUDA or with TORCH_NATIVE_AOT=0)."""
        return (python, STAGE2) if (self.checkout / STAGE2).is_file() else ()


def strips(settings: Mapping[str, object], build_type: str, env: Mapping[str, str]) -> bool:
    """scikit-build-core 1.x's `install.strip` (settings/skbuild_read_settings.py): SKBUILD_INSTALL_STRIP where
    set (its environment comes before the pyproject), else the pyproject's, else on for Release and
    MinSizeRel, unless `minimum-version` is under 0.5."""
    said = env.get("SKBUILD_INSTALL_STRIP", "")
    if said:
        return said.strip().lower() not in ("0", "false", "off", "no", "")
    install = settings.get("install")
    strip = install.get("strip") if isinstance(install, dict) else None
    if isinstance(strip, bool):
        return strip
    minimum = [int(n) for n in re.findall(r"\d+", str(settings.get("minimum-version") or "0.5"))[:2]]
    return minimum >= [0, 5] and CMAKE_BUILD_TYPE[build_type] in ("Release", "MinSizeRel")
