"""Python-only development from prebuilt binaries, as PyTorch's tools/nightly.py does it: the nightly
wheel that matches the checkout is installed into a managed env without compiling anything, its
compiled outputs are placed into the checkout, and a .pth file makes the env import the checkout.

Which wheel: the newest one built from a commit in the checkout's history (its version.py's
git_version; for PyTorch's nightlies a commit of the `nightly` branch whose subject names the main
commit), or --version; with --checkout BRANCH, the newest, and a branch at its commit. Its files in
the checkout are a configuration like a build's (builder/ownership/): `inv build` switches away from
them and `inv nightly` back, by rename.

    index.py   the index, the download, what a wheel says about itself
    place.py   the wheel's compiled outputs into the checkout
"""

from __future__ import annotations

import datetime
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .. import console as _console
from .. import envs
from ..builder.ownership import channels, moves, records, trees
from ..compat import distribution_name
from ..config import Config
from ..digest import digest
from ..errors import CommandError, TorchbuildError
from ..locks import state_dir
from ..run import run
from . import index, place

MAX_TRIES = 8  # nightlies downloaded while looking for one built from the checkout's history
NIGHTLY_SUBJECT = re.compile(r"nightly release \(([0-9a-f]{40})\)")
NATIVE = re.compile(r"(\.(c|cc|cpp|cxx|cu|cuh|h|hpp|cmake|S)|(^|/)CMakeLists\.txt|(^|/)native_functions\.yaml)$")


@dataclass(frozen=True)
class NightlyRequest:
    python: str | None = None  # 3.X or a path (default: build.python, else torchbuild's own)
    cuda: str = "auto"
    version: str | None = None
    branch: str | None = None  # --checkout BRANCH


@dataclass(frozen=True)
class Outcome:
    wheel: index.Wheel
    commit: str  # the source commit the binaries were built from
    ahead: int  # commits HEAD is ahead of it
    native: tuple[str, ...]  # C++/CUDA/CMake files those commits change: not in the binaries
    env: envs.Env
    imported_from: str
    up_to_date: bool


def package_name(cfg: Config, checkout: Path) -> str:
    """The project name of the checkout's wheels: nightly.package, else the checkout's own."""
    return cfg.nightly.package or distribution_name(checkout)


def plan_lines(cfg: Config, request: NightlyRequest, base_env: Mapping[str, str]) -> list[str]:
    """What `inv nightly` would do, as lines: the checkout, the index, the env, the tree; nothing is asked of
    the index, downloaded, created or placed."""
    from ..toolchain import cuda as cudas
    from ..toolchain import python as pythons

    checkout = cfg.source_path
    if not (checkout / ".git").exists():
        raise TorchbuildError(f"{checkout} is not a git checkout", "run `inv clone` first (or pass --path)")
    if request.branch:
        check_branch(checkout, request.branch)
    toolkit = cudas.select(cudas.for_config(cfg, base_env), request.cuda)
    flavour = index.variant(cudas.major_minor(toolkit.version) if toolkit else None)
    creator = pythons.find(pythons.discover(base_env, cfg.toolchain.pythons), request.python or cfg.build.python
                           or pythons.OWN_MINOR)
    name = f"nightly-py{creator.minor}-{flavour}"
    made = (envs.envs_dir(cfg) / name).is_dir()
    which = f"{request.version}" if request.version else "the newest built from a commit in the checkout's history"
    return [f"checkout:    {checkout}",
            f"package:     {package_name(cfg, checkout)} nightly: {which}",
            f"index:       {index.index_url(cfg.nightly.index_url, flavour)}",
            f"env:         {name} (Python {creator.minor}; {'kept' if made else 'made'}), the wheel installed there",
            f"checkout:    its compiled outputs placed as configuration py{creator.minor}-{flavour}-nightly; your "
            f"files where they go moved to {state_dir(checkout) / 'kept'}/<time>/"
            + (f"; branch {request.branch} at the wheel's commit" if request.branch else ""),
            "--dry-run: nothing asked of the index, downloaded, made or placed"]


def nightly(cfg: Config, request: NightlyRequest, base_env: Mapping[str, str]) -> Outcome:
    """Install the matching nightly into a managed env and its compiled outputs into the checkout."""
    con = _console.get()
    checkout = cfg.source_path
    if not (checkout / ".git").exists():
        raise TorchbuildError(f"{checkout} is not a git checkout", "run `inv clone` first (or pass --path)")
    if request.branch:
        check_branch(checkout, request.branch)
    package = package_name(cfg, checkout)
    env, url, flavour, versions = listing(cfg, request, package, base_env)
    if not versions:
        raise TorchbuildError(f"the nightly index {url} has no {package} wheel for Python {env.minor} on this "
                              "platform", "check nightly.index_url and nightly.package, or choose --python/--cuda")
    pip_env = {"PIP_CONFIG_FILE": str(env.prefix / "pip.conf")}
    wheel, commit = choose(cfg, checkout, request, package, url, versions, env, pip_env)
    if request.branch:
        try:
            run(["git", "checkout", "-b", request.branch, commit], cwd=checkout, capture=True, echo=False)
        except CommandError as exc:
            said = next((ln for ln in reversed(exc.output.splitlines()) if ln.strip()), f"exit {exc.returncode}")
            raise TorchbuildError(f"git could not start branch {request.branch} at {commit[:12]}: {said.strip()}",
                                  "fix what git says, or pass another name to --checkout") from None
        con.ok(f"branch {request.branch} at {commit[:12]}, the commit {wheel.version} was built from")
    ahead, native = distance(checkout, commit)
    key = f"py{env.minor}-{flavour}-nightly"
    stamp = digest([wheel.path.name, wheel.path.stat().st_size, str(env.python), env.stamp], 16)
    with trees.build_lock(checkout):
        switched = trees.activate_tree(checkout, key)
        if switched:
            con.info(switched)
        build = checkout / "build"
        build.mkdir(exist_ok=True)
        marker = records.read_marker(build)
        recorded = records.recorded_outputs(marker)
        pth = place.pth_file(env.python, package)
        fresh = bool(marker and marker.done == stamp and channels.in_place(checkout, recorded) and pth.is_file())
        if not fresh:
            moves.remove(checkout, recorded)  # an older nightly's files: this one replaces them
            records.write_marker(build, records.Record(key))
            aside = state_dir(checkout) / "kept" / time.strftime("%Y%m%d-%H%M%S")
            with con.timed(f"place {wheel.path.name}'s compiled outputs into {checkout}"):
                done = place.place(checkout, wheel.path, aside, package)
            placed = done.files
            if done.moved:
                con.warn(f"{len(done.moved)} file(s) of your own stood where the nightly's go (no build of "
                         f"torchbuild's made them): moved, not overwritten, to {done.aside} "
                         f"({', '.join(done.moved[:3])}{', ...' if len(done.moved) > 3 else ''})")
            records.write_marker(build, records.Record(key, outputs=placed))
            if wheel.requires:
                with con.timed(f"install what {package} {wheel.version} requires ({len(wheel.requires)})"):
                    run([str(env.python), "-m", "pip", "--disable-pip-version-check", "install", "-q",
                         "--extra-index-url", url, *wheel.requires], env=pip_env)
            place.write_pth(pth, package, checkout)
            records.write_marker(build, records.Record(key, done=stamp, outputs=placed))
    where = place.import_check(env.python, package, checkout)
    return Outcome(wheel, commit, ahead, native, env, where, fresh)


def listing(cfg: Config, request: NightlyRequest, package: str, base_env: Mapping[str, str]
            ) -> tuple[envs.Env, str, str, list[str]]:
    """The nightly env (made once), the index, the flavour (cpu, cu130) and the versions there, newest first."""
    from ..toolchain import cuda as cudas
    from ..toolchain import python as pythons

    toolkit = cudas.select(cudas.for_config(cfg, base_env), request.cuda)
    flavour = index.variant(cudas.major_minor(toolkit.version) if toolkit else None)
    url = index.index_url(cfg.nightly.index_url, flavour)
    creator = pythons.find(pythons.discover(base_env, cfg.toolchain.pythons), request.python or cfg.build.python
                           or pythons.OWN_MINOR)
    env = envs.create(cfg, creator, f"nightly-py{creator.minor}-{flavour}", cfg.matrix.backend, env=base_env,
                      packages=[])
    with _console.get().timed(f"ask {url} for {package} nightlies for Python {env.minor}"):
        versions = index.available(env.python, package, url, {"PIP_CONFIG_FILE": str(env.prefix / "pip.conf")})
    return env, url, flavour, versions


def built_from(cfg: Config, checkout: Path, package: str, env: envs.Env, url: str,
               version: str) -> tuple[str, str | None]:
    """The commit nightly `version` names (its git_version) and the commit of the checkout's history it was
    built from (None where the checkout does not have it); the wheel is downloaded once into the cache."""
    pip_env = {"PIP_CONFIG_FILE": str(env.prefix / "pip.conf")}
    with _console.get().timed(f"get {package}=={version}"):
        wheel = index.read(index.download(env.python, package, version, url, cfg.cache_root / "nightly", pip_env),
                           package)
    return wheel.git_version, source_commit(checkout, wheel.git_version)


def choose(cfg: Config, checkout: Path, request: NightlyRequest, package: str, url: str, versions: list[str],
           env: envs.Env, pip_env: Mapping[str, str]) -> tuple[index.Wheel, str]:
    """The nightly to use and its source commit: --version's; with --checkout, the newest; else the
    newest built from a commit in HEAD's history (nightlies dated after HEAD's day are not tried)."""
    con = _console.get()
    cache = cfg.cache_root / "nightly"
    if request.version:
        if request.version not in versions:
            raise TorchbuildError(f"the nightly index {url} has no {package}=={request.version} for Python "
                                  f"{env.minor}", f"newest there: {', '.join(versions[:3])}")
        candidates = [request.version]
    elif request.branch:
        candidates = versions[:1]
    else:
        latest = (head_day(checkout) + datetime.timedelta(days=1)).strftime("%Y%m%d")
        candidates = [v for v in versions if (index.dev_date(v) or latest) <= latest][:MAX_TRIES]
    head = run(["git", "rev-parse", "HEAD"], cwd=checkout, capture=True, echo=False).stdout.strip()
    tried = []
    for version in candidates:
        with con.timed(f"get {package}=={version}"):
            wheel = index.read(index.download(env.python, package, version, url, cache, pip_env), package)
        commit = source_commit(checkout, wheel.git_version)
        if request.version or request.branch:
            if commit is None:
                raise TorchbuildError(f"{package} {version} was built from {wheel.git_version[:12]}, which this "
                                      "checkout does not have and its origin did not give",
                                      "fetch the upstream (git fetch origin), then run the command again")
            return wheel, commit
        if commit and is_ancestor(checkout, commit, head):
            return wheel, commit
        tried.append(f"{version} ({wheel.git_version[:12]})")
    raise TorchbuildError(f"no {package} nightly at {url} was built from a commit in this checkout's history "
                          f"(HEAD {head[:12]}; tried: {', '.join(tried) or 'none dated before HEAD'})",
                          "rebase onto a newer upstream, pass --version, or start a branch at the newest nightly "
                          "with --checkout BRANCH")


def check_branch(checkout: Path, branch: str) -> None:
    """--checkout BRANCH needs a clean tree (tracked files) and a new branch name, as tools/nightly.py."""
    dirty = run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=checkout, capture=True,
                echo=False).stdout.splitlines()
    if dirty:
        names = [line[3:] for line in dirty]
        raise TorchbuildError(f"--checkout needs a clean working tree; changed: {', '.join(names[:5])}"
                              + (f" and {len(names) - 5} more" if len(names) > 5 else ""),
                              "commit or stash those changes, then run the command again")
    valid = run(["git", "check-ref-format", f"refs/heads/{branch}"], cwd=checkout, capture=True, echo=False,
                check=False)  # not --branch, which takes `@{-1}` for the branch it names
    if valid.returncode:
        raise TorchbuildError(f"--checkout '{branch}' is not a valid branch name", "pass a name like my-nightly")
    exists = run(["git", "show-ref", "--verify", "--quiet", f"refs/heads/{branch}"], cwd=checkout, echo=False,
                 check=False)
    if exists.returncode == 0:
        raise TorchbuildError(f"branch {branch} already exists", "pass another name to --checkout")


def head_day(checkout: Path) -> datetime.datetime:
    stamp = run(["git", "show", "-s", "--format=%ct", "HEAD"], cwd=checkout, capture=True, echo=False).stdout
    return datetime.datetime.fromtimestamp(int(stamp.strip()), tz=datetime.timezone.utc)


def has_commit(checkout: Path, sha: str) -> bool:
    return run(["git", "cat-file", "-e", f"{sha}^{{commit}}"], cwd=checkout, echo=False, check=False,
               capture=True).returncode == 0


def source_commit(checkout: Path, git_version: str) -> str | None:
    """The commit a wheel was built from, fetched from origin when missing: a `nightly` branch commit
    ("YYYY-MM-DD nightly release (<sha>)") stands for the main commit its subject names."""
    if not fetched(checkout, git_version):
        return None
    subject = run(["git", "show", "-s", "--format=%s", git_version], cwd=checkout, capture=True, echo=False).stdout
    named = NIGHTLY_SUBJECT.search(subject)
    if not named:
        return git_version
    return named.group(1) if fetched(checkout, named.group(1)) else None


def fetched(checkout: Path, sha: str) -> bool:
    """Whether the checkout has the commit, fetching it from origin when it does not."""
    if not has_commit(checkout, sha):
        run(["git", "fetch", "--quiet", "origin", sha], cwd=checkout, capture=True, check=False)
    return has_commit(checkout, sha)


def is_ancestor(checkout: Path, commit: str, head: str) -> bool:
    return run(["git", "merge-base", "--is-ancestor", commit, head], cwd=checkout, echo=False,
               check=False, capture=True).returncode == 0


def distance(checkout: Path, commit: str) -> tuple[int, tuple[str, ...]]:
    """How many commits HEAD is ahead of `commit`, and the C++/CUDA/CMake files they change."""
    count = int(run(["git", "rev-list", "--count", f"{commit}..HEAD"], cwd=checkout, capture=True,
                    echo=False).stdout.strip() or 0)
    if not count:
        return 0, ()
    changed = run(["git", "diff", "--name-only", commit, "HEAD"], cwd=checkout, capture=True, echo=False).stdout
    return count, tuple(n for n in changed.splitlines() if NATIVE.search(n))
