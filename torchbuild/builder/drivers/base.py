"""What every build driver answers, and the PEP 517 pieces they share."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ...compat import pyproject

# A PEP 517 frontend in one line, as `python -m build --wheel --no-isolation` calls the backend: argv is
# the backend ("module:object"), the wheel folder, the config settings (JSON), then backend-path entries.
WHEEL_HOOK = ("import functools, importlib, json, os, sys; sys.path[:0] = [os.path.abspath(p) for p in sys.argv[4:]]; "
              "name, _, attrs = sys.argv[1].partition(':'); "
              "backend = functools.reduce(getattr, filter(None, attrs.split('.')), importlib.import_module(name)); "
              "os.makedirs(sys.argv[2], exist_ok=True); "
              "print('built ' + os.path.join(sys.argv[2], backend.build_wheel(sys.argv[2], json.loads(sys.argv[3]) "
              "or None)))")
LEGACY_BACKEND = "setuptools.build_meta:__legacy__"  # what frontends use without [build-system]


def build_backend(checkout: Path) -> tuple[str, tuple[str, ...]]:
    """The build backend pyproject.toml names and its backend-path (setuptools' legacy one without)."""
    table = pyproject(checkout).get("build-system", {})
    return str(table.get("build-backend") or LEGACY_BACKEND), tuple(table.get("backend-path") or ())


@dataclass(frozen=True)
class Driver:
    """A checkout's build driver (the generic PEP 517 one; the others override what differs)."""

    checkout: Path
    backend: str
    backend_path: tuple[str, ...] = ()

    name = "PEP 517"
    outputs_in_env = False  # compiled outputs installed into the env's site-packages, not the checkout

    def describe(self) -> str:
        """One line for `inv doctor` and the build's first lines."""
        return f"{self.name} ({self.backend})"

    def config_settings(self, build_type: str) -> dict[str, str]:
        """The backend's config settings for a build of this type (`-C key=value`)."""
        return {}

    def compile_flags(self, build_type: str) -> dict[str, str]:
        """Compiler flags the build type adds to the environment's (CFLAGS ...), where nothing else carries it."""
        return {}

    def env_install(self, build_type: str, env: Mapping[str, str]) -> tuple[str, bool] | None:
        """Where in site-packages the editable install puts what CMake installs, and whether it strips it
        (None: the outputs are in the checkout)."""
        return None

    def after_install(self, python: str) -> tuple[str, ...]:
        """The checkout's own step after an editable install of a CUDA build (() for none)."""
        return ()

    def pytorch(self) -> bool:
        """Whether the checkout is PyTorch's (its variables, BUILD_TEST, USE_NINJA, USE_CCACHE, USE_CUDA, are
        set only there: another project may read a USE_CUDA of its own)."""
        return False

    def forwards_cmake_variables(self) -> bool:
        """Whether the build passes the environment's CMAKE_* variables on to CMake as -D (PyTorch's does)."""
        return False

    def in_place(self, python: str) -> tuple[str, ...]:
        """The backend's own in-place build that can stand in for the editable install's rebuild (() for none)."""
        return ()

    def copies(self, package: str) -> dict[str, str]:
        """Files the driver copies elsewhere at every build (a change to the original stays stale in the copy
        until it runs: the shortcut refuses it): none."""
        return {}

    def loop(self, cmake: str, config: str, into: Path | None) -> list[list[str]]:
        """The driver's own step in its CMake tree after an edit, run without it (the shortcut): CMake's build of
        the install target, which installs into the package folder (PyTorch's tools/setup_helpers/cmake.py:
        `cmake --build . --target install`). `into`: where the editable install copied CMake's install."""
        return [[cmake, "--build", ".", "--target", "install", "--config", config]]

    def develop(self, python: str, setuptools: str, build_type: str = "release") -> tuple[str, ...]:
        """The editable install: PEP 660 through pip, in the env as it is (no isolation)."""
        settings = [f"--config-settings={k}={v}" for k, v in self.config_settings(build_type).items()]
        return (python, "-m", "pip", "install", "-e", ".", "-v", "--no-build-isolation", *settings)

    def wheel(self, python: str, dist: Path, setuptools: str = "", build_type: str = "release") -> tuple[str, ...]:
        """A wheel straight from the backend (no pip: its start-up and metadata step cost half a second)."""
        return (python, "-c", WHEEL_HOOK, self.backend, str(dist), json.dumps(self.config_settings(build_type)),
                *self.backend_path)
