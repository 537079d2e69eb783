"""What one build is asked for: flags and Config resolved once into a typed request."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..config import Config, OriginKind
from ..console import add_secrets, secret_values
from ..errors import TorchbuildError
from ..toolchain.sanitizers import named
from .against import TorchConfiguration, configuration
from .debugfiles import patterns


@dataclass(frozen=True)
class BuildRequest:
    cuda: str = "auto"
    python: str | None = None  # set by a flag or the environment (build.python from the file is a default)
    env_name: str | None = None
    build_type: str = "release"
    jobs: int | None = None
    arch: str | None = None
    wheel: bool = False
    clean: bool = False
    sets: tuple[tuple[str, str], ...] = ()
    force: bool = False
    dry_run: bool = False
    explain: bool = False  # say what the build would run, why, and its cost; build nothing (explain.py)
    yes: bool = False  # a build estimated over build.confirm_over does not ask on the terminal
    verbose: bool = False
    dist: Path | None = None
    rerun: bool = False
    part: str = "all"  # the split build: "core" (BUILD_LIBTORCH_WHL=1) or "python" (BUILD_PYTHON_ONLY=1)
    shortcut: bool = True  # build.shortcut (shortcut.py)
    torch: TorchConfiguration | None = None  # build.torch: the PyTorch configuration an extension builds against
    again_as: str = ""  # the command that runs this build again, where `inv build` would not (a matrix session)
    debug_files: tuple[str, ...] = ()  # --debug-files: the sources compiled with -O0 -g (debugfiles.py)
    debug_files_max: int = 200  # build.debug_files_max
    sanitize: str = ""  # --sanitize: address, thread or leak, a configuration of its own (toolchain/sanitizers.py)
    apart: str = ""  # a tree of its own beside the developer's of the same key: a matrix session in nox's env

    def again(self) -> str:
        """The build command that builds this configuration again, with the flags that chose it."""
        if self.again_as:
            return self.again_as
        flags = [*(["--python", self.python] if self.python else []), *(["--env", self.env_name] if self.env_name
                                                                        else []),
                 *(["--cuda", self.cuda] if self.cuda != "auto" else []),
                 *({"debug": ["--debug"], "relwithdebinfo": ["--rel-with-deb-info"]}.get(self.build_type, [])),
                 *(["--arch", f'"{self.arch}"'] if self.arch else []), *(["--wheel"] if self.wheel else []),
                 *(["--part", self.part] if self.part != "all" else []),
                 *(["--sanitize", self.sanitize] if self.sanitize else []),
                 *(["--debug-files", "'" + ";".join(self.debug_files) + "'"] if self.debug_files else []),
                 *[f"--set {k}={v}" for k, v in self.sets]]
        return " ".join(["inv build", *flags])

    @classmethod
    def resolve(cls, cfg: Config, *, debug: bool = False, rel_with_deb_info: bool = False, sets: Sequence[str] = (),
                env_name: str | None = None, wheel: bool = False, clean: bool = False, force: bool = False,
                dry_run: bool = False, verbose: bool = False, dist: str | Path | None = None,
                rerun: bool = False, part: str = "all", explain: bool = False, yes: bool = False,
                debug_files: Sequence[str] = (), sanitize: str = "") -> BuildRequest:
        """The request for `cfg` (which already holds the flags for cuda, python, jobs, arch, path)."""
        if debug and rel_with_deb_info:
            raise TorchbuildError("--debug and --rel-with-deb-info exclude each other", "pass one of them")
        build_type = "debug" if debug else "relwithdebinfo" if rel_with_deb_info else cfg.build.build_type
        if debug_files and build_type == "debug":
            raise TorchbuildError("--debug-files: this configuration is a debug build already (every unit has -O0 "
                                  "-g)", "leave out --debug-files, or name it on a release build")
        torch = configuration((cfg.root / cfg.build.torch), os.environ) if cfg.build.torch else None
        cuda, python = cfg.build.cuda, cfg.build.python
        if torch is not None:  # its configuration's Python, CUDA and build type, unless a setting names another
            build_type, python, cuda = agree(cfg, torch, build_type, debug or rel_with_deb_info)
        if part not in ("all", "core", "python"):
            raise TorchbuildError(f"--part takes core or python, got '{part}'",
                                  "core: the Python-independent libraries (BUILD_LIBTORCH_WHL=1); python: the "
                                  "Python part against an installed core (BUILD_PYTHON_ONLY=1)")
        refused = split_refusal(cfg.source_path) if part != "all" else None
        if refused:
            raise TorchbuildError(f"--part {part}: the checkout at {cfg.source_path} cannot make the split build: "
                                  f"{refused}", "build it whole: leave out --part")
        origin = cfg.origins.get("build.python")
        explicit = torch is not None or origin is not None and origin.kind in (OriginKind.FLAG, OriginKind.ENV)
        return cls(cuda=cuda, python=python if explicit else None, env_name=env_name,
                   build_type=build_type, jobs=cfg.build.jobs,
                   arch=cfg.build.arch or (torch.arch if torch else None), wheel=wheel, clean=clean,
                   sets=tuple(parse_sets(sets)), force=force, dry_run=dry_run or explain, explain=explain, yes=yes,
                   verbose=verbose,
                   dist=Path(dist).resolve() if dist else None, rerun=rerun, part=part,
                   shortcut=cfg.build.shortcut, torch=torch, debug_files=tuple(patterns(debug_files, cfg.source_path)),
                   debug_files_max=cfg.build.debug_files_max, sanitize=named(sanitize).kind if sanitize else "")


def agree(cfg: Config, torch: TorchConfiguration, build_type: str, type_flag: bool) -> tuple[str, str, str]:
    """The build type, Python and CUDA of an extension built against `torch`: its configuration's; a setting
    that names another is an error (an extension loads only into the torch it was built against)."""
    def named(key: str) -> bool:
        origin = cfg.origins.get(key)
        return origin is not None and origin.kind != OriginKind.DEFAULT

    cpu, auto = cfg.build.cuda in ("none", "cpu"), cfg.build.cuda == "auto"
    theirs = torch.key.split("-")[1]  # cpu, cu130
    clashes = [f"{what} {mine}" for what, mine, given in (
        ("build type", build_type, (type_flag or named("build.build_type")) and build_type != torch.build_type),
        ("Python", cfg.build.python, named("build.python") and cfg.build.python != torch.python),
        ("CUDA", cfg.build.cuda, named("build.cuda") and not (cpu or auto) and  # a CPU extension goes with any
         not theirs.startswith("cu" + cfg.build.cuda.replace(".", ""))))
        if given]
    if clashes:
        raise TorchbuildError(f"--torch {torch.checkout}: it holds {torch.key}, and this build asks for "
                              f"{', '.join(clashes)}", "leave those flags out (the extension takes the torch's "
                              f"configuration), or build that configuration there first: `torchbuild build --path "
                              f"{torch.checkout}` with them")
    return torch.build_type, torch.python, "none" if cpu or torch.cuda is None else torch.cuda  # a CPU extension


SPLIT_READERS = ("setup.py", "cmake/EnvVarForwarding.cmake", "tools/metadata/dependencies.py")  # both eras


def split_refusal(checkout: Path) -> str | None:
    """Why the checkout's own files cannot make PyTorch's split build (None: they can). Its build files must read
    BUILD_LIBTORCH_WHL / BUILD_PYTHON_ONLY (setup.py; from 2.14 EnvVarForwarding.cmake and tools/metadata's
    dependencies provider), and no `[project] name` in pyproject.toml may override the
    package names setup.py gives the core (PyTorch 2.8+: `name = "torch"` wins over LIBTORCH_PACKAGE_NAME,
    so the core's wheel is named torch, tagged py3-none-any though it holds libraries, and `pip install -e`
    fails in setup.py; no PyTorch CI job runs the split any more, #159990)."""
    from ..compat import pyproject

    texts = {name: (checkout / name).read_text(errors="replace") for name in SPLIT_READERS
             if (checkout / name).is_file()}
    readers = [name for name, text in texts.items() if "BUILD_LIBTORCH_WHL" in text or "BUILD_PYTHON_ONLY" in text]
    if not readers:
        return "none of its build files (setup.py, cmake/EnvVarForwarding.cmake, tools/metadata) reads " \
               "BUILD_LIBTORCH_WHL and BUILD_PYTHON_ONLY"
    project = pyproject(checkout).get("project")
    if isinstance(project, dict) and isinstance(project.get("name"), str) and "name" not in project.get("dynamic", []):
        name = project["name"]
        said = f"{' and '.join(readers)} read{'s' if len(readers) == 1 else ''} BUILD_LIBTORCH_WHL / " \
            f"BUILD_PYTHON_ONLY, but its pyproject.toml's [project] name = \"{name}\" is fixed and wins over the " \
            f"name the split gives the core (LIBTORCH_PACKAGE_NAME): "
        if "tools/metadata/dependencies.py" in readers:  # scikit-build-core's era (2.14 on)
            return said + f"BUILD_LIBTORCH_WHL=1 would make the core's wheel under the name {name}, while " \
                f"BUILD_PYTHON_ONLY=1 makes the Python part require {name}_no_python==<its version>, which no " \
                "build provides (no PyTorch CI job runs the split)"
        return said + f"BUILD_LIBTORCH_WHL=1 would make a wheel named {name}, tagged py3-none-any, and its " \
            "editable install fails (PyTorch 2.8 and later; no PyTorch CI job runs it)"
    return None


def split_supported(checkout: Path) -> bool:
    """Whether the checkout's files make PyTorch's split build (BUILD_LIBTORCH_WHL / BUILD_PYTHON_ONLY)."""
    return split_refusal(checkout) is None


def drives_cmake(checkout: Path) -> bool:
    """Whether setup.py drives CMake at the top of the checkout, as PyTorch's does (compiles then go
    through CMake's compiler launcher, ccache, and `cmake --build`)."""
    from .drivers.pep517 import calls_cmake

    return (checkout / "setup.py").is_file() and (checkout / "CMakeLists.txt").is_file() and calls_cmake(checkout)


def parse_sets(sets: Sequence[str]) -> list[tuple[str, str]]:
    """`--set KEY=VALUE` items as pairs; a clear error for anything else."""
    out = []
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise TorchbuildError(f"--set takes KEY=VALUE, got '{item}'", "e.g. --set USE_DISTRIBUTED=0")
        out.append((key, value))
    add_secrets(secret_values(dict(out)))
    return out
