"""The repos PyTorch's build clones by itself, and the url rewrites its git needs.

tools/optional_submodules.py clones NCCL (CUDA builds) and Eigen (at configure time) by a pinned tag
(`.ci/docker/ci_commit_pins/nccl.txt`, `third_party/eigen_pin.txt`) from their real hosts, and
setup.py's check_submodules runs `git submodule update` itself when every submodule folder is empty.
None of that passes through `inv clone`. So `inv clone` fetches the repos the checkout names into the
mirror cache ahead, and a build's environment carries the rewrites (`GIT_CONFIG_COUNT`,
`GIT_CONFIG_KEY_n`, `GIT_CONFIG_VALUE_n`: git reads them as `-c` options): each such repo to its
mirror, and every mirrors.git rule, scp-like ssh spellings included.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

from .. import console as _console
from ..errors import GitError
from .core import Git, is_local, ssh_spellings
from .mirror import MirrorCache

CLONE_CALL = re.compile(r"""_checkout_by_tag\(\s*["']([^"']+)["']""")
PINS = {"nccl": ".ci/docker/ci_commit_pins/nccl.txt", "eigen": "third_party/eigen_pin.txt"}


def named(checkout: Path) -> dict[str, str | None]:
    """The repos the checkout's build clones by itself: url -> its pinned tag (None where unknown)."""
    source = checkout / "tools" / "optional_submodules.py"
    if not source.is_file():
        return {}
    out: dict[str, str | None] = {}
    for url in CLONE_CALL.findall(source.read_text(errors="replace")):
        name = re.sub(r"\.git$", "", url.rstrip("/")).rsplit("/", 1)[-1]
        pin = checkout / PINS[name] if name in PINS else None
        out[url] = pin.read_text().strip() if pin is not None and pin.is_file() else None
    return out


def folders(checkout: Path) -> list[str]:
    """Where the build's own clones land (`git clone` in third_party/: the url's last part), relative to the
    checkout: git-ignored repos of their own, which the build reads as it reads a submodule."""
    return [f"third_party/{re.sub(r'[.]git$', '', url.rstrip('/')).rsplit('/', 1)[-1]}" for url in named(checkout)]


def fetch_ahead(git: Git, cache: MirrorCache | None, checkout: Path) -> list[str]:
    """Put the repos the build will clone, at their pinned tags, into the mirror cache (through the mirror
    rules); the urls fetched. One the cache holds at its tag is not fetched again (a second `inv clone`
    works offline); one that cannot be reached is said, and the build then tries it itself."""
    wanted = {url: tag for url, tag in named(checkout).items()
              if cache is not None and not (cache.has(url, tag) if tag else (cache.path(url) / "HEAD").is_file())}
    if cache is None or not wanted:
        return []
    try:
        return sorted(cache.use(wanted, git.options.jobs))
    except GitError as exc:
        _console.get().warn(f"the build's own clones were not fetched ahead ({exc.message}); the build clones "
                            "them itself")
        return []


def cached(cache: MirrorCache | None, checkout: Path) -> dict[str, Path]:
    """The mirrors the cache already holds of the repos the build clones (no network)."""
    if cache is None:
        return {}
    return {url: cache.path(url) for url in named(checkout) if (cache.path(url) / "HEAD").is_file()}


def git_config_env(rules: Mapping[str, str], mirrors: Mapping[str, Path],
                   base_env: Mapping[str, str]) -> dict[str, str]:
    """The build's git settings as environment variables, after any the environment has already: each
    cached repo to its mirror, then the mirror rules (the longest prefix wins in git, as in `inv clone`)."""
    pairs = [(f"url.{mirror.as_uri()}.insteadOf", url) for url, mirror in sorted(mirrors.items())]
    pairs += [(f"url.{target}.insteadOf", prefix) for prefix, target in sorted(ssh_spellings(rules).items())]
    if not pairs:
        return {}
    if mirrors or any(is_local(target) for target in rules.values()):
        pairs.append(("protocol.file.allow", "always"))
    start = int(base_env.get("GIT_CONFIG_COUNT") or 0) if str(base_env.get("GIT_CONFIG_COUNT", "")).isdigit() else 0
    env = {"GIT_CONFIG_COUNT": str(start + len(pairs))}
    for i, (key, value) in enumerate(pairs, start):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env
