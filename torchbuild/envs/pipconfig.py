"""pip's own configuration where it decides a build: the constraint files a machine or user sets for every pip
run (`constraint` in pip.conf, PIP_CONSTRAINT). A cap on torch there (`torch<=2.14.1`) meets a checkout of a newer
torch only at the editable install, after the env is made; read here, it is said before anything is made."""

from __future__ import annotations

import configparser
import os
from pathlib import Path
from typing import Mapping


def config_files(env: Mapping[str, str], prefix: Path | None) -> list[Path]:
    """pip's configuration files, in the order it reads them (a later one overrides): global, user, site
    (the env's own), then PIP_CONFIG_FILE."""
    home = Path(env.get("HOME", "~")).expanduser()
    xdg_dirs = env.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep)
    files = [Path(d) / "pip" / "pip.conf" for d in reversed(xdg_dirs) if d] + [Path("/etc/pip.conf")]
    files += [home / ".pip" / "pip.conf", Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "pip" / "pip.conf"]
    files += [prefix / "pip.conf"] if prefix else []
    files += [Path(env["PIP_CONFIG_FILE"])] if env.get("PIP_CONFIG_FILE") else []
    return files


def constraint_files(env: Mapping[str, str], prefix: Path | None = None) -> list[tuple[Path, str]]:
    """The constraint files pip applies to an install, each with where it was set."""
    if env.get("PIP_CONSTRAINT") is not None:
        return [(Path(p), "PIP_CONSTRAINT") for p in env["PIP_CONSTRAINT"].split()]
    found: list[tuple[Path, str]] = []
    for conf in config_files(env, prefix):
        parser = configparser.RawConfigParser()
        try:
            parser.read(conf)
        except (OSError, configparser.Error):
            continue
        for section in ("global", "install"):
            if parser.has_option(section, "constraint"):
                found = [(Path(p), f"{conf} [{section}] constraint")
                         for p in parser.get(section, "constraint").split()]
    return found


def cap(name: str, version: str, env: Mapping[str, str], prefix: Path | None = None) -> tuple[str, Path, str] | None:
    """The first constraint line pip applies that excludes `name` at `version`, with its file and where that
    file was set; None where none does."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    try:
        wanted = Version(version)
    except InvalidVersion:
        return None
    for path, where in constraint_files(env, prefix):
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in (text.split("#", 1)[0].strip() for text in lines):
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if canonicalize_name(req.name) == canonicalize_name(name) and req.specifier \
                    and not req.specifier.contains(wanted, prereleases=True):
                return line, path, where
    return None
