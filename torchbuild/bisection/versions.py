"""What a bisection step's binaries say they are: the version file the env imports (found as the import system
finds it, without running the package's code), checked against the commit before COMMAND runs."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Mapping

from ..builder.ownership import moves
from ..errors import TorchbuildError
from ..run import run
from .worktree import diff

VERSION_CHECK = """
import importlib.util, json, re, sys
pkg = sys.argv[1]
top = importlib.util.find_spec(pkg)
locs = list(top.submodule_search_locations or []) if top else []
spec = None
for finder in sys.meta_path:  # as the import system finds pkg.version, without running the package's code
    find = getattr(finder, "find_spec", None)
    spec = find(pkg + ".version", locs) if find else None
    if spec:
        break
text = open(spec.origin).read() if spec and spec.origin else ""
get = lambda key: (re.search(key + r"\\s*(?::[^=]*)?=\\s*['\\"]([^'\\"]*)", text) or [None, None])[1]
print(json.dumps({"package": top.origin if top else None, "file": spec.origin if spec else None,
                  "version": get("__version__"), "git_version": get("git_version")}))
"""


def version_info(python: Path, tree: Path) -> dict[str, Any]:
    done = run([str(python), "-c", VERSION_CHECK, package_of(tree)], cwd=tree.parent, capture=True, echo=False)
    data = json.loads(done.stdout.strip().splitlines()[-1])
    return data if isinstance(data, dict) else {}


@functools.lru_cache(maxsize=None)
def package_of(tree: Path) -> str:
    """What `import X` tests in the worktree (asked once a bisection: each step would glob the checkout again)."""
    from ..builder.package import package_name

    return package_name(tree)


def check_version(python: Path, tree: Path, commit: str, state: Mapping[str, Any]) -> tuple[str, str | None]:
    """The binaries the env imports name `commit` (git_version, `+git<sha7>`) and come from the worktree or the
    bisection's env; else an error: a wrong binary never reaches COMMAND. A project without PyTorch's
    version.py (git_version) names no commit: its binaries are those the bisection built, or reused by the
    ladder's rule, from `state`. Returns what the binaries say, and the version file the env imports."""
    from ..builder.drivers import detect

    found = version_info(python, tree)
    version, sha, origin = found.get("version") or "", found.get("git_version"), found.get("package") or ""
    where = f"{found.get('file')}"
    owned = (tree.resolve(), python.parent.parent.resolve())
    if not origin or not any(Path(origin).resolve().is_relative_to(root) for root in owned):
        raise TorchbuildError(f"the bisection's env imports {package_of(tree)} from {origin or 'nowhere'}, not from "
                              f"its worktree {tree} or env", "run `inv bisect --reset` and start again")
    if sha is None and not detect(tree).pytorch():
        return f"{package_of(tree)} names no commit (no version.py git_version); from {origin}, binaries of " \
               f"{str(state.get('built'))[:10]}", found.get("file")
    if sha != commit or ("+git" in version and f"+git{commit[:7]}" not in version):
        raise TorchbuildError(f"the binaries for {commit[:10]} say {version} (git_version {sha}, {where}): not that "
                              "commit's; COMMAND was not run", "run `inv bisect --resume` (it builds again), or "
                              "`inv bisect --reset`")
    return f"{version} (git_version {sha[:10]})", found.get("file")


def drop_bytecode(tree: Path, version_file: str | None, before: str | None, commit: str) -> int:
    """Python's cached bytecode of every module that may differ from what the last step's COMMAND imported:
    the .py files the commits between changed (all of the package's without a last step), the version file
    the env imports (`version_file`) and the .py files CMake installed. Steps come faster than a second
    apart, and a cache is trusted by the source's size and mtime in whole seconds: a version.py rewritten
    within the second would import as the last commit's. Returns how many cache files were removed."""
    sources = [tree / p for p in diff(tree, before, commit).changed if p.endswith(".py")] if before else \
        list((tree / package_of(tree)).rglob("*.py"))
    manifest = tree / "build" / "install_manifest.txt"
    installed = manifest.read_text(errors="replace").splitlines() if manifest.is_file() else []
    sources += [Path(p) for p in [version_file, *installed] if p and p.endswith(".py")]
    return moves.drop_bytecode(sources)
