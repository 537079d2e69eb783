"""The real-world tier: real sdists built by torchbuild and by hand."""

from __future__ import annotations

import os
import sys
import time

from bench.measure import INV, Bench, repeat, timed


def realworld(self: Bench) -> None:
    """Real sdists wrapped in git upstreams with a submodule, served over http on loopback:
    `inv clone` + `inv build` (cold mirror cache, a new env each time) against the plain recipe
    by hand: `git clone --recursive` through the same mirror rule, a venv with the same build
    deps, `pip install -e . --no-build-isolation`, with the same CMake fix where it is needed."""
    from tests import upstreams

    for project in upstreams.PROJECTS:
        if project.name in ("python-rapidjson", "sentencepiece"):
            real_project(self, project)


def real_project(self: Bench, project: object) -> None:
    import contextlib

    from tests import upstreams
    from torchbuild.envs import KNOWN

    assert isinstance(project, upstreams.Project)
    reps, public = 3, upstreams.PUBLIC
    work = self.work / f"rw-{project.name}"
    url = upstreams.make_upstream(project, upstreams.download(project, self.work / "sdists"), work / "up")
    fix = {"CMAKE_POLICY_VERSION_MINIMUM": "3.5"} if project.needs_remedy else {}
    with contextlib.contextmanager(upstreams.serve)(work / "up") as base:
        def plain(i: int) -> float:
            co, venv = work / f"plain{i}", work / f"plain-venv{i}"
            start = time.perf_counter()
            timed(["git", "-c", f"url.{base}/.insteadOf={public}/", "clone", "-q", "--recursive",
                   url.replace(f"{public}/", f"{base}/"), str(co)], self.env)
            timed([sys.executable, "-m", "venv", str(venv)], self.env)
            timed([str(venv / "bin/python"), "-m", "pip", "install", "-q", *KNOWN], self.env)
            env = {**self.env, **fix, "PATH": f"{venv / 'bin'}{os.pathsep}{self.env['PATH']}"}
            timed([str(venv / "bin/python"), "-m", "pip", "install", "-q", "--no-build-isolation", "-e", "."],
                  env, cwd=co)
            return time.perf_counter() - start

        def ours(i: int) -> float:
            env = {**self.env, "TORCHBUILD_PATHS_CACHE_DIR": str(work / f"cache{i}"),
                   "TORCHBUILD_PATHS_ENVS": str(work / f"envs{i}"), "TORCHBUILD_BUILD_CUDA": "none",
                   "TORCHBUILD_MIRRORS_GIT": f"{public}/={base}/"}
            co = work / f"ours{i}"
            start = time.perf_counter()
            timed(INV + ["clone", "--url", url, "--path", str(co)], env)
            timed(INV + ["build", "--path", str(co)], env)
            return time.perf_counter() - start

        plain_s = repeat(reps, plain)
        ours_s = repeat(reps, ours)
    what = "inv clone + inv build" + (" (the CMake 4 remedy applied by itself)" if fix else "")
    self.record(f"real project: {project.name}", ours_s, plain_s, "<= 1.1", what,
                "git clone --recursive + venv + pip install -e by hand" + (" (same CMake fix)" if fix else ""))


def first_build(self: Bench) -> None:
    """iminuit's first build (scikit-build-core, C++ with LTO, its own build-dir), one pair in turn: the plain
    recipe (a venv, its build requirements, `pip install -e . --no-build-isolation` at the project's defaults)
    against `inv build`, each from nothing, with torchbuild's own phases from its profile (env creation,
    configure, compile, link) so the difference has a name. Heavy: about 5 minutes a build on 2 cores."""
    import json

    from tests import upstreams

    project = upstreams.Project("iminuit", "2.33.0", "extern", "README.rst", "", "")
    work = self.work / "first-iminuit"
    sdist = upstreams.download(project, self.work / "sdists")
    upstreams.make_upstream(project, sdist, work / "up")
    pairs, phases = [], []
    for i in range(1 if self.quick else 2):
        plain_co, ours_co = work / f"plain{i}", work / f"ours{i}"
        for co in (plain_co, ours_co):
            timed(["git", "-c", f"url.{(work / 'up').as_uri()}/.insteadOf={upstreams.PUBLIC}/", "clone", "-q",
                   "--recursive", str(work / "up" / "iminuit"), str(co)], self.env)
        venv = work / f"plain-venv{i}"
        start = time.perf_counter()
        timed([sys.executable, "-m", "venv", str(venv)], self.env)
        timed([str(venv / "bin/python"), "-m", "pip", "install", "-q", "scikit-build-core>=0.11", "pybind11>=3.0"],
              self.env)
        timed([str(venv / "bin/python"), "-m", "pip", "install", "-q", "--no-build-isolation", "-e", "."],
              {**self.env, "PATH": f"{venv / 'bin'}{os.pathsep}{self.env['PATH']}"}, cwd=plain_co)
        plain_s = time.perf_counter() - start
        env = {**self.env, "TORCHBUILD_PATHS_ENVS": str(work / f"envs{i}"), "TORCHBUILD_BUILD_CUDA": "none",
               "TORCHBUILD_PATHS_CACHE_DIR": str(work / f"cache{i}"), "TORCHBUILD_PATHS_LOGS": str(work / f"logs{i}")}
        ours_s = timed(INV + ["build", "--path", str(ours_co)], env)
        pairs.append((ours_s, plain_s))
        records = sorted((work / f"logs{i}").rglob("*.record.json"))
        if records:
            kept = json.loads(records[-1].read_text()).get("profile", {})
            phases.append({k: kept.get(k) for k in ("phases", "compile", "link", "job slots", "cache hit rate")})
    self.record_pairs("real project: iminuit first build", pairs, "<= 1.1",
                      "inv build from nothing (env included)", "venv + build requirements + pip install -e by hand")
    self.results["real project: iminuit first build"]["torchbuild phases"] = phases
