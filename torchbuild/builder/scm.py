"""A version setuptools-scm derives from git (correctionlib, boost-histogram, most scikit-hep projects).

pip's build asks the backend, and the backend asks setuptools-scm, at every build: another commit changes the
distance and the hash (`2.8.1.dev3+gf3f02eb22`), an edit of a tracked file the date of a dirty tree
(`.d20261207`), and the backend writes setuptools-scm's version files (`version_file`, `write_to`) with it.
Where pyproject.toml's [tool.setuptools_scm] is the whole of that configuration and the backend's own hook runs
it (setuptools' plugin, scikit-build-core's setuptools_scm provider), setuptools-scm's own command, with the
env's setuptools-scm (the one pip's build without isolation imports), computes the same version and writes
the same files: a build that skips pip re-stamps the install's metadata with it, as pip's would be written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from .. import compat
from ..run import EnvChanges, run
from .drivers.pep517 import COMMENT, own_build_files
from .ownership.cmaketrees import cache_entry

PROVIDER = "scikit_build_core.metadata.setuptools_scm"
OWN_OPTIONS = re.compile(r"use_scm_version\s*=\s*(?!True\b)")  # setup.py's options, which the command does not read
READS_VERSION = re.compile(r"\bSKBUILD_PROJECT_VERSION")


@dataclass(frozen=True)
class ScmVersion:
    """The version setuptools-scm computes now, and its command that writes the version files as the backend
    does (and prints the version again)."""

    version: str
    argv: tuple[str, ...]
    cwd: Path


def configured(checkout: Path) -> bool:
    """Whether the version is setuptools-scm's, configured by pyproject.toml's [tool.setuptools_scm] alone and
    computed by the backend's own hook (hatch-vcs, or setup.py's `use_scm_version={...}`, have options the
    command does not read)."""
    data = compat.pyproject(checkout)
    if "version" not in data.get("project", {}).get("dynamic", []) or "setuptools_scm" not in data.get("tool", {}):
        return False
    backend = str(data.get("build-system", {}).get("build-backend", ""))
    if backend.startswith("scikit_build_core"):
        return provider(data) == PROVIDER
    setup = checkout / "setup.py"
    own = setup.is_file() and OWN_OPTIONS.search(COMMENT.sub("", setup.read_text(errors="replace")))
    return backend.startswith("setuptools") and not own


def provider(data: Mapping[str, Any]) -> object:
    """scikit-build-core's `metadata.version.provider` ([tool.scikit-build])."""
    metadata = data.get("tool", {}).get("scikit-build", {}).get("metadata", {})
    return metadata.get("version", {}).get("provider") if isinstance(metadata, dict) else None


def computed(checkout: Path, python: Path, site: Path, env: EnvChanges, base_env: Mapping[str, str]
             ) -> ScmVersion | str:
    """The version the env's setuptools-scm computes for the checkout now (its SETUPTOOLS_SCM_* variables
    heeded, as the backend's are), or why it cannot say it as the backend would."""
    found = sorted(site.glob("setuptools_scm-*.dist-info"), key=lambda p: compat.vkey(p.name.split("-")[1]))
    if not found:
        return f"the version is setuptools-scm's, and the env ({site}) has no setuptools-scm to compute it"
    have = found[-1].name.split("-")[1]
    if compat.vkey(have) < (8,):
        return f"the version is setuptools-scm's, and the env's setuptools-scm {have} cannot write its version " \
               "files alone (8.0 or later can)"
    argv = (str(python), "-m", "setuptools_scm", "-c", "pyproject.toml")
    done = run(list(argv), cwd=checkout, env=env, base_env=base_env, capture=True, echo=False, check=False)
    said = done.stdout.strip().splitlines()
    if done.returncode != 0 or not said:
        why = (done.stderr or "").strip().splitlines()[-1:] or ["no output"]
        return f"setuptools-scm cannot compute the version: {why[0]}"
    return ScmVersion(said[-1].strip(), (*argv, "--force-write-version-files"), checkout)


def configured_with_another(checkout: Path, trees: Iterable[Path], version: str) -> str | None:
    """Why CMake's tree holds a binary of another version (None: it does not): scikit-build-core passes the
    version to the configure (SKBUILD_PROJECT_VERSION, _FULL), and a CMake file of the project reads it (into
    a define, `project(VERSION)`), so a build that skips the configure would keep the old one in."""
    cached = next((v for v in (cache_entry(t, "SKBUILD_PROJECT_VERSION_FULL") for t in trees) if v and v != version),
                  None)
    if cached is None:
        return None
    for path in own_build_files(checkout):
        if path.name != "setup.py" and READS_VERSION.search(COMMENT.sub("", path.read_text(errors="replace"))):
            return f"the version is now {version}, CMake was configured with {cached}, and " \
                   f"{path.relative_to(checkout)} reads SKBUILD_PROJECT_VERSION: pip's build configures again"
    return None
