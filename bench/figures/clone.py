"""The clone figure: 20 submodules (5 nested) over a slow upstream, cold and warm mirror cache."""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.measure import INV, Bench, repeat, timed
from torchbuild.demo import git


def clone(self: Bench) -> None:
    """20 submodules (5 nested); upstream fetches cost 0.2 s each (a network stand-in)."""
    up = self.work / "clone-up"
    subs = 20
    for i in range(subs):
        repo = up / f"sub{i:02d}"
        repo.mkdir(parents=True)
        git(repo, "init", "-q", "-b", "main")
        for f in range(30):
            (repo / f"file{f}.txt").write_text(f"sub {i} file {f}\n" * 200)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "init")
    for i in range(5):  # nested: sub0i has sub1i as its own submodule
        parent, child = up / f"sub{i:02d}", f"sub{i + 10:02d}"
        git(parent, "config", "-f", ".gitmodules", f"submodule.{child}.path", f"deps/{child}")
        git(parent, "config", "-f", ".gitmodules", f"submodule.{child}.url", (up / child).as_uri())
        sha = git(up / child, "rev-parse", "HEAD")
        git(parent, "update-index", "--add", "--cacheinfo", f"160000,{sha},deps/{child}")
        git(parent, "add", ".gitmodules")
        git(parent, "commit", "-qm", "nest")
    top = up / "super"
    top.mkdir()
    git(top, "init", "-q", "-b", "main")
    (top / "README").write_text("super\n")
    for i in list(range(5)) + list(range(15, 20)) + list(range(5, 10)):
        name = f"sub{i:02d}"
        git(top, "config", "-f", ".gitmodules", f"submodule.{name}.path", f"third_party/{name}")
        git(top, "config", "-f", ".gitmodules", f"submodule.{name}.url", (up / name).as_uri())
        git(top, "update-index", "--add", "--cacheinfo", f"160000,{git(up / name, 'rev-parse', 'HEAD')},"
            f"third_party/{name}")
    git(top, "add", ".gitmodules", "README")  # not -A: that would drop the gitlinks
    git(top, "commit", "-qm", "super")
    hook = self.work / "slow-upstream.sh"
    hook.write_text(f'#!/bin/sh\ncase "$PWD" in {up}*) sleep 0.2;; esac\nexec "$@"\n')
    hook.chmod(0o755)
    with open(Path(self.env["HOME"]) / ".gitconfig", "a") as fh:
        fh.write(f"[uploadpack]\n\tpackObjectsHook = {hook}\n")
    url = (up / "super").as_uri()
    dests = self.work / "clones"

    def plain(i: int) -> float:
        return timed(["git", "clone", "-q", "--recursive", url, str(dests / f"plain{i}")], self.env)

    def ours(cache: Path, i: int, tag: str, warm: bool) -> float:
        env = {**self.env, "TORCHBUILD_PATHS_CACHE_DIR": str(cache)}
        if not warm and cache.exists():
            shutil.rmtree(cache)
        return timed(INV + ["clone", "--url", url, "--path", str(dests / f"{tag}{i}")], env)

    plain_s = repeat(self.reps, plain)
    cold = repeat(self.reps, lambda i: ours(self.work / f"cache-cold{i}", i, "cold", warm=False))
    warm_cache = self.work / "cache-warm"
    ours(warm_cache, 99, "prime", warm=False)
    warm = repeat(self.reps, lambda i: ours(warm_cache, i, "warm", warm=True))
    self.record("clone (cold cache)", cold, plain_s, "-", "inv clone, empty mirror cache",
                "git clone --recursive")
    self.record("clone (warm cache)", warm, plain_s, "<= 0.3", "inv clone, mirrors cached",
                "git clone --recursive")
