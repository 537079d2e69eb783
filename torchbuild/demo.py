"""A small PyTorch-shaped upstream made of real git repos, for `inv demo`, the tests and bench/.

    pytorch/                      version.txt, sources
      third_party/fbgemm/         submodule
        third_party/asmjit/       nested submodule (depth 2)
      third_party/pybind11/       submodule

Submodule urls are `<url_base>/<name>`; by default file:// urls of the repos' own
folders. A url_base that does not exist (https://git.example.invalid) makes the
upstream reachable only through a mirror rule, `mirror_rule()`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from .run import run

IDENTITY = {
    "GIT_AUTHOR_NAME": "torchbuild demo",
    "GIT_AUTHOR_EMAIL": "demo@torchbuild.invalid",
    "GIT_COMMITTER_NAME": "torchbuild demo",
    "GIT_COMMITTER_EMAIL": "demo@torchbuild.invalid",
}

# repo -> [(submodule path, submodule repo)]
LAYOUT: dict[str, list[tuple[str, str]]] = {
    "pytorch": [("third_party/fbgemm", "fbgemm"), ("third_party/pybind11", "pybind11")],
    "fbgemm": [("third_party/asmjit", "asmjit")],
    "pybind11": [],
    "asmjit": [],
}


def git(repo: Path, *args: str) -> str:
    """Run git quietly in a demo repo with a fixed identity; return stdout."""
    return run(["git", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", *args], cwd=repo,
               env=IDENTITY, capture=True, echo=False).stdout.strip()


@dataclass
class Upstream:
    """The demo upstream under `root`, with helpers to move it forward like a real one."""

    root: Path
    url_base: str
    extra_files: Mapping[str, Mapping[str, str | bytes]] = field(default_factory=dict)

    def repo(self, name: str) -> Path:
        return self.root / name

    def url(self, name: str) -> str:
        return f"{self.url_base}/{name}"

    def mirror_rule(self) -> dict[str, str]:
        """The mirrors.git rule that reaches this upstream when url_base is not real."""
        return {self.url_base + "/": self.root.as_uri() + "/"}

    def head(self, name: str) -> str:
        return git(self.repo(name), "rev-parse", "HEAD")

    def commit(self, name: str, files: Mapping[str, str | bytes], message: str) -> str:
        """Write `files` into repo `name` and commit them."""
        repo = self.repo(name)
        for rel, content in files.items():
            path = repo / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        git(repo, "add", "-A", *files)
        git(repo, "commit", "-q", "-m", message)
        return self.head(name)

    def link(self, parent: str, path: str, child: str, url: str | None = None) -> str:
        """Record `child`'s HEAD at `path` in `parent` (adding the .gitmodules entry) and commit."""
        repo = self.repo(parent)
        url = url or self.url(child)
        git(repo, "config", "-f", ".gitmodules", f"submodule.{path}.path", path)
        git(repo, "config", "-f", ".gitmodules", f"submodule.{path}.url", url)
        git(repo, "update-index", "--add", "--cacheinfo", f"160000,{self.head(child)},{path}")
        git(repo, "add", ".gitmodules")
        git(repo, "commit", "-q", "-m", f"{path} -> {self.head(child)[:10]}")
        return self.head(parent)

    def advance(self, child: str, parents: tuple[str, ...] = ()) -> str:
        """A new upstream commit in `child`, recorded by each of `parents` (innermost first)."""
        self.commit(child, {"CHANGES": f"{child} {os.urandom(4).hex()}\n"}, f"{child}: move forward")
        for parent in parents:
            for path, sub in LAYOUT[parent]:
                if sub == child:
                    self.link(parent, path, child)
            child = parent
        return self.head(child)

    def move_url(self, child: str, new_name: str, parent: str) -> str:
        """Rename `child`'s repo upstream (`git clone` to a new name) and point `parent` at it."""
        git(self.root, "clone", "-q", str(self.repo(child)), new_name)
        path = next(p for p, sub in LAYOUT[parent] if sub == child)
        return self.link(parent, path, child, url=self.url(new_name))


def make_upstream(root: Path, url_base: str | None = None,
                  extra_files: Mapping[str, Mapping[str, str | bytes]] | None = None) -> Upstream:
    """Create the demo repos under `root` (leaves first) and return the Upstream."""
    root.mkdir(parents=True, exist_ok=True)
    up = Upstream(root.resolve(), url_base or root.resolve().as_uri(), extra_files or {})
    for name in ("asmjit", "pybind11", "fbgemm", "pytorch"):
        repo = up.repo(name)
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        files: dict[str, str | bytes] = {"LICENSE": f"{name}: demo license\n", "README.md": f"# {name} (demo)\n"}
        if name == "pytorch":
            files["version.txt"] = "2.11.0a0\n"
        files.update(up.extra_files.get(name, {}))
        up.commit(name, files, f"{name}: initial")
        for path, sub in LAYOUT[name]:
            up.link(name, path, sub)
    return up
