"""The compiler cache's counts of one build: ccache's stats log, sccache's statistics."""

from __future__ import annotations

import re


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
