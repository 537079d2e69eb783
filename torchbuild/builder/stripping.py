"""scikit-build-core's strip in the loop, for only what CMake's install copied.

`cmake --install --strip` strips every library it installs, at every install: the install script runs the
target's strip command after each file(INSTALL), copied or up to date. The stripped copy's mtime then never
matches the build's, so the next install copies every library again and strips it again: at PyTorch's size,
every library (libtorch_cuda's gigabyte included) at every edit. The loop installs without `--strip`, then runs
the install script's own strip command (cmake_install.cmake: `if(CMAKE_INSTALL_DO_STRIP) execute_process(...)`)
on each file CMake says it copied ("-- Installing:"), and gives the stripped copy the mtime CMake gave the
copy. The bytes are those of `--strip` (the same command on the same copy, after the same RPATH change), and
CMake's next install calls a library it did not relink "Up-to-date", as it does without a strip. Where a strip
command names anything but the install prefix, or the install does not say what it copies
(CMAKE_INSTALL_MESSAGE=NEVER), the loop runs the install again with `--strip`."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping

from .ownership.channels import INSTALLING

STRIP_RULE = re.compile(r'if\(CMAKE_INSTALL_DO_STRIP\)\s*execute_process\(COMMAND\s+((?:[^()"]|"(?:[^"\\]|\\.)*")+)\)'
                        r'\s*endif\(\)')
TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|([^\s"]+)')
FOREACH = re.compile(r'foreach\(file\s+((?:"(?:[^"\\]|\\.)*"\s*)+)\)(.*?)endforeach\(\)', re.S)
INCLUDE = re.compile(r'(?m)^\s*include\("((?:[^"\\]|\\.)*cmake_install\.cmake)"')


def unquoted(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def strip_rules(build: Path, prefix: Path, destdir: str = "") -> dict[Path, list[str]] | None:
    """The strip command `--strip` runs after installing each file, by installed path: read from the tree's
    install script and the subdirectories' it includes (None: a command that depends on more than the
    prefix, which only CMake can run, or an install that does not say what it copies)."""
    rules: dict[Path, list[str]] = {}
    scripts, seen = [build / "cmake_install.cmake"], set()
    while scripts:
        script = scripts.pop()
        if script in seen or not script.is_file():
            continue
        seen.add(script)
        text = script.read_text(errors="surrogateescape")
        if "MESSAGE_NEVER" in text:  # CMAKE_INSTALL_MESSAGE=NEVER: the install does not say what it copied
            return None
        scripts += [Path(unquoted(m)) for m in INCLUDE.findall(text)]
        for argv in script_rules(text):
            argv = [a.replace("$ENV{DESTDIR}", destdir).replace("${CMAKE_INSTALL_PREFIX}", str(prefix)) for a in argv]
            if len(argv) < 2 or any("${" in a or "$ENV{" in a for a in argv):
                return None
            rules[Path(argv[-1])] = argv
    return rules


def script_rules(text: str) -> list[list[str]]:
    """One install script's strip commands, as written; a versioned library's (libfoo.so.1.2 and libfoo.so.1)
    are one command in a `foreach(file ...)` over its files."""
    found: list[list[str]] = []

    def each(block: re.Match[str]) -> str:
        files = words(block.group(1))
        found.extend([a.replace("${file}", f) for a in argv] for argv in map(words, STRIP_RULE.findall(block.group(2)))
                     for f in files)
        return ""

    rest = FOREACH.sub(each, text)
    return found + [words(rule) for rule in STRIP_RULE.findall(rest)]


def words(arguments: str) -> list[str]:
    return [unquoted(quoted) if quoted or not bare else bare for quoted, bare in TOKEN.findall(arguments)]


def copied(install_output: str) -> list[Path]:
    """The files CMake's install copied, in its order (an up-to-date file is "-- Up-to-date:")."""
    return [Path(p) for p in dict.fromkeys(INSTALLING.findall(install_output))]


def commands(install_output: str, build: Path, prefix: Path, env: Mapping[str, str | None]
             ) -> list[list[str]] | None:
    """The strip commands `--strip` would have run on what this install copied (None: see strip_rules)."""
    rules = strip_rules(build, prefix, env.get("DESTDIR") or "")
    if rules is None:
        return None
    return [rules[path] for path in copied(install_output)
            if path in rules and path.is_file() and not path.is_symlink()]  # as the script: not a namelink


def keep_times(path: Path) -> tuple[int, int] | None:
    """The times CMake gave its copy, to give back after the strip."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_atime_ns, st.st_mtime_ns


def give_back(path: Path, times: tuple[int, int] | None) -> None:
    if times is not None and path.is_file():
        os.utime(path, ns=times)
