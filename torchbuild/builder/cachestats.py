"""The compiler cache's counts of one build (ccache's stats log, sccache's statistics), and why it missed."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shlex
from collections import Counter
from pathlib import Path


def parse_stats_log(text: str) -> tuple[int, int, int]:
    """(hits, misses, remote hits) from a ccache stats log (one counter name a line, `#` file lines)."""
    hits = misses = remote = 0
    for line in text.splitlines():
        word = line.strip()
        if word in ("direct_cache_hit", "preprocessed_cache_hit"):
            hits += 1
        elif word == "cache_miss":
            misses += 1
        elif word == "remote_storage_hit":
            remote += 1
    return hits, misses, remote


def parse_sccache_stats(text: str) -> tuple[int, int]:
    """(hits, misses) from `sccache --show-stats` / `--stop-server` output."""
    hits = re.search(r"(?m)^Cache hits\s+(\d+)\s*$", text)
    misses = re.search(r"(?m)^Cache misses\s+(\d+)\s*$", text)
    return int(hits.group(1)) if hits else 0, int(misses.group(1)) if misses else 0


COMMANDS = ".torchbuild-compile-commands.json"  # in the tree: each source's compile command at its last build


def missed(stats_log: str) -> list[str]:
    """The sources whose compile missed the cache, from ccache's stats log (`# source` then its counters)."""
    found, source = [], None
    for line in stats_log.splitlines():
        if line.startswith("# "):
            source = line[2:].strip()
        elif line.strip() == "cache_miss" and source:
            found.append(source)
    return found


def compile_commands(build: Path) -> dict[str, str]:
    """Each source's compile command in the tree (compile_commands.json), by resolved path; read once a
    process while the file stays as it is (PyTorch's holds ~10k commands: a build asks twice)."""
    path = build / "compile_commands.json"
    try:
        st = path.stat()
    except OSError:
        return {}
    return dict(_compile_commands(str(path), st.st_mtime_ns, st.st_size, st.st_ino))


@functools.lru_cache(maxsize=8)
def _compile_commands(path: str, mtime: int, size: int, inode: int) -> dict[str, str]:
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        entries = json.loads(Path(path).read_text())
        folders: dict[str, str] = {}  # resolved once a folder: ten thousand sources share a few hundred

        def resolved(source: str) -> str:
            parent, name = os.path.split(source)
            if parent not in folders:
                folders[parent] = os.path.realpath(parent)
            return os.path.join(folders[parent], name)

        return {resolved(os.path.join(e["directory"], e["file"])): str(e["command"]) for e in entries}
    return {}


SYSTEM = ("/usr/", "/lib", "/opt/", "/etc/")  # the same on every tree of the machine


def outside(command: str, base: Path | None) -> str | None:
    """The first absolute path of a compile command that is neither under the compiler cache's base dir (which
    it rewrites as relative) nor a system folder: ccache hashes it as it is, so a tree whose command names
    another such path (another env's Python headers, a build's temporary folder) cannot reuse the entry."""
    for word in words(command)[1:]:
        path = word[2:] if word.startswith(("-I", "-L")) else word.split("=", 1)[-1] if word.startswith("-") else word
        if path.startswith("/") and not path.startswith(SYSTEM) and not (base and Path(path).is_relative_to(base)):
            return path
    return None


def miss_reasons(build: Path, stats_log: str, base: Path | None = None) -> list[str]:
    """Why the build's compiles missed the cache, a line a reason with how many: the unit's compile command
    against the one kept from the tree's last build (another compiler, a flag or define added or dropped),
    else its source or a header it includes changed. Keeps this build's commands for the next."""
    before: dict[str, str] = {}
    with contextlib.suppress(OSError, ValueError):
        kept = json.loads((build / COMMANDS).read_text())
        before = kept if isinstance(kept, dict) else {}
    now = compile_commands(build)
    reasons: Counter[str] = Counter()
    for source in missed(stats_log):
        path = str((build / source).resolve())
        old, new = before.get(path), now.get(path)
        if old is None or new is None:
            named = outside(new, base) if new else None
            reasons[f"not compiled in this tree before; its command names {named}, outside CCACHE_BASEDIR, which "
                    "the cache hashes as it is (a tree whose command names another never hits)" if named else
                    "not compiled in this tree before"] += 1
        elif old == new:
            reasons["the same command: the source or a header it includes changed"] += 1
        else:
            was, now_ = words(old), words(new)
            if was[:1] != now_[:1]:
                reasons[f"another compiler: {was[0] if was else '?'} -> {now_[0] if now_ else '?'}"] += 1
            else:
                flags = [f"+{w}" for w in now_ if w not in was][:3] + [f"-{w}" for w in was if w not in now_][:3]
                reasons[f"a flag or define changed: {' '.join(flags) or 'their order'}"] += 1
    with contextlib.suppress(OSError):
        (build / COMMANDS).write_text(json.dumps(now))
    return [f"{count} miss(es): {reason}" for reason, count in reasons.most_common()]


def words(command: str) -> list[str]:
    """A compile command's words without the cache launcher in front."""
    return [w for w in shlex.split(command) if not w.endswith(("ccache", "sccache"))]
