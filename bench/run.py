"""Benchmarks: torchbuild against the plain manual recipe, measured in the same run.

    python bench/run.py [--quick] [--only NAME ...] [--readme]

Each figure is a median of >= 5 repetitions (min and max kept) and a ratio against the plain
recipe measured in the same run. Results go to bench/results.json; --readme rewrites README's
"Performance" table from them. Nothing here is a test: no figure fails anything.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from torchbuild.demo import git, make_upstream  # noqa: E402

INV = [sys.executable, "-m", "invoke", "--search-root", str(ROOT)]
NVCC = Path("/usr/local/cuda-13.0/bin/nvcc")


def timed(argv: list[str], env: dict[str, str], cwd: Path | None = None, check: bool = True) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{proc.stderr[-3000:]}")
    return elapsed


def stats(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "n": len(samples)}


def repeat(n: int, fn: Callable[[int], float]) -> dict[str, float]:
    return stats([fn(i) for i in range(n)])


class Bench:
    def __init__(self, quick: bool, work: Path) -> None:
        self.quick = quick
        self.reps = 5
        self.work = work
        self.results: dict[str, dict] = {}
        home = work / "home"
        home.mkdir(parents=True, exist_ok=True)
        (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
                                         "[protocol \"file\"]\n\tallow = always\n")
        self.env = {**os.environ, "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", "TORCHBUILD_BUILD_MIN_FREE_GB": "1",
                    "PIP_CACHE_DIR": str(Path.home() / ".cache" / "pip"),
                    "TORCHBUILD_PATHS_ENVS": str(work / "envs"), "TORCHBUILD_PATHS_LOGS": str(work / "logs")}

    def record(self, name: str, ours: dict, plain: dict, target: str, what: str, plain_what: str) -> None:
        ratio = ours["median"] / plain["median"]
        self.results[name] = {"ours": ours, "plain": plain, "ratio": ratio, "target": target, "what": what,
                              "plain_what": plain_what}
        print(f"{name:28s} {ours['median']:8.3f}s vs {plain['median']:8.3f}s  ratio {ratio:5.2f}  "
              f"(target {target}; ours min {ours['min']:.3f} max {ours['max']:.3f}; plain min {plain['min']:.3f} "
              f"max {plain['max']:.3f}; n={ours['n']})", flush=True)

    def record_pairs(self, name: str, pairs: list[tuple[float, float]], target: str, what: str,
                     plain_what: str) -> None:
        """A figure measured in turn with its baseline: its ratio is the median of the pairs' ratios (this
        machine's speed drifts over minutes; each pair ran within one), the ratio of medians kept too."""
        self.record(name, stats([m for m, _ in pairs]), stats([b for _, b in pairs]), target, what, plain_what)
        ratios = [m / b for m, b in pairs]
        row = self.results[name]
        row.update({"ratio of medians": row["ratio"], "ratio": statistics.median(ratios), "pair ratios": stats(ratios),
                    "pairs": [[round(m, 3), round(b, 3)] for m, b in pairs]})
        print(f"{'':28s} ratio of each pair: median {statistics.median(ratios):.3f} (min {min(ratios):.3f} "
              f"max {max(ratios):.3f})", flush=True)

    # ------------------------------------------------------------------ 1. clone
    def clone(self) -> None:
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

    # ------------------------------------------------------------------ demo helpers
    def demo(self, name: str, units: int) -> tuple[Path, dict[str, str]]:
        up = make_upstream(self.work / f"{name}-up", units=units)
        env = {**self.env, "TORCHBUILD_PATHS_CACHE_DIR": str(self.work / f"{name}-cache")}
        checkout = self.work / f"{name}-co"
        timed(INV + ["clone", "--url", up.url("pytorch"), "--path", str(checkout)], env)
        return checkout, env

    def build(self, checkout: Path, env: dict[str, str], *args: str) -> float:
        return timed(INV + ["build", "--path", str(checkout), *args], env)

    # ------------------------------------------------------------------ 2. tool overhead
    def overhead(self) -> None:
        checkout, env = self.demo("overhead", 4)
        self.build(checkout, env, "--cuda", "none")
        base = repeat(self.reps, lambda i: timed([sys.executable, "-c", "pass"], env))
        for label, argv, target in (("inv --list", INV + ["--list"], "<= 0.3 s"),
                                    ("inv build --dry-run", INV + ["build", "--path", str(checkout), "--cuda", "none",
                                                                   "--dry-run"], "< 0.5 s"),
                                    ("inv doctor", INV + ["doctor"], "< 1 s")):
            ours = repeat(self.reps, lambda i, a=argv: timed(a, env, check=False))
            self.record(label, ours, base, target, label, "python -c pass (interpreter start)")
        out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import tasks"], cwd=ROOT, env=env,
                             capture_output=True, text=True).stderr
        total = sum(int(m.group(1)) for m in re.finditer(r"import time:\s+(\d+) \|", out))
        heavy = [m for m in ("git", "yaml", "torchbuild.git", "torchbuild.build") if re.search(rf"\| +{m}$", out, re.M)]
        self.results["import tasks.py"] = {"microseconds": total, "heavy_modules_imported": heavy}
        print(f"{'import tasks.py':28s} {total / 1e6:.3f}s self-time sum; heavy modules imported: {heavy or 'none'}")

    # ------------------------------------------------------------------ 3. no-op rebuild
    def noop(self) -> None:
        checkout, env = self.demo("noop", 8 if self.quick else 24)
        self.build(checkout, env, "--cuda", "none")
        self.build(checkout, env, "--cuda", "none")
        log = max((self.work / "logs").rglob("*.log"), key=lambda p: p.stat().st_mtime).read_text().splitlines()[0]
        m = re.match(r"\(cd (\S+) && (.*)\)$", log)
        assert m, log
        underlying = ["bash", "-c", m.group(2)]
        ours = repeat(self.reps, lambda i: self.build(checkout, env, "--cuda", "none"))
        plain = repeat(self.reps, lambda i: timed(underlying, env, cwd=checkout))
        ninja = repeat(self.reps, lambda i: timed(["ninja", "-C", str(checkout / "build")], env))
        command = "setup.py develop" if "setup.py develop" in log else "pip install -e . --no-build-isolation"
        self.record("no-op build", ours, plain, "<= 0.2", "inv build (up to date)", f"the same {command} by hand")
        self.record("no-op build vs ninja", ours, ninja, "-", "inv build (up to date)", "ninja -C build alone")

    # ------------------------------------------------------------------ 4. configuration switch
    def switch(self) -> None:
        checkout, env = self.demo("switch", 8 if self.quick else 24)
        env = {**env, "TORCHBUILD_CACHE_TOOL": "none"}  # real compiles: no compiler cache in this figure
        other = ["--cuda", "13.0", "--arch", "8.0"] if NVCC.exists() else ["--cuda", "none", "--debug"]
        self.results["switch uses"] = " ".join(other)
        python = self.work / "envs" / f"py{sys.version_info[0]}.{sys.version_info[1]}" / "bin" / "python"
        cpu = ["None", "False", "False"]  # version.py's cuda and debug, _C's cuda_compiled()
        theirs = ["13.0", "False", "True"] if NVCC.exists() else ["None", "True", "False"]

        def imports(expected: list[str]) -> None:
            """The checkout imports the configuration just built or switched to: its own binaries."""
            out = subprocess.run([str(python), "-c", "import minitorch, minitorch.version as v; "
                                  "print(v.cuda, v.debug, minitorch.cuda_compiled())"], cwd=self.work, env=env,
                                 capture_output=True, text=True, check=True).stdout.split()
            assert out == expected, f"the checkout imports {out}, not the configuration just built {expected}"

        self.build(checkout, env, "--cuda", "none")
        self.build(checkout, env, *other)

        def switch_back(i: int) -> float:
            self.build(checkout, env, *other)
            imports(theirs)
            seconds = self.build(checkout, env, "--cuda", "none")
            imports(cpu)
            return seconds

        ours = repeat(self.reps, switch_back)

        def fresh_build(i: int) -> float:
            seconds = self.build(checkout, env, "--cuda", "none", "--clean")
            imports(cpu)
            return seconds

        fresh = repeat(self.reps, fresh_build)
        self.record("config switch back", ours, fresh, "<= 0.1", f"none -> {' '.join(other)} -> none: the third",
                    "a fresh build of the same configuration")

    # ------------------------------------------------------------------ 5. matrix
    def matrix_vs_build(self) -> None:
        """Only the matrix's row against one bare `inv build` (`--only matrix_vs_build`)."""
        self.matrix(only_vs_build=True)

    def matrix(self, only_vs_build: bool = False) -> None:
        """`inv matrix`, 3 Pythons x cpu on the demo, each repetition from nothing (no build trees, slots,
        wheels or compiler cache; the nox envs made once): side by side and one by one, with the split
        build, one shared ccache, or no sharing, each against a 1-session matrix; side by side against one
        bare `inv build`, the two in turn. Then a no-op matrix."""
        pythons = [p for p in ("3.10", "3.11", "3.12") if any((Path.home() / ".pyenv/versions").glob(f"{p}.*"))]
        if len(pythons) < 3:
            print("matrix: skipped (needs pyenv Pythons 3.10, 3.11 and 3.12)")
            return
        up = make_upstream(self.work / "matrix-up", units=8 if self.quick else 24)
        proj = self.work / "matrix-proj"
        proj.mkdir()
        for name in ("tasks.py", "noxfile.py"):
            shutil.copy(ROOT / name, proj / name)
        cache = self.work / "matrix-cache"
        (proj / "torchbuild.yaml").write_text(
            f"source:\n  url: {up.url('pytorch')}\n  path: {self.work / 'matrix-co'}\n"
            f"matrix:\n  pythons: {json.dumps(pythons)}\n  cudas: [\"none\"]\npaths:\n  cache_dir: {cache}\n")
        inv = [sys.executable, "-m", "invoke", "--search-root", str(proj)]
        env = {**self.env, "TORCHBUILD_PATHS_LOGS": str(proj / "logs")}
        timed(inv + ["clone"], env)
        timed(inv + ["matrix"], env)  # makes the nox envs once: the figures are about building

        def from_nothing(*args: str, split: bool = True, share: bool = True) -> Callable[[int], float]:
            def once(i: int) -> float:
                timed(inv + ["clean", "--all"], env)
                for folder in (cache / "ccache", cache / "slots", proj / "dist"):
                    shutil.rmtree(folder, ignore_errors=True)
                e = {**env, "TORCHBUILD_MATRIX_SPLIT": "true" if split else "false",
                     "TORCHBUILD_CACHE_TOOL": "auto" if share else "none"}
                return timed(inv + ["matrix", "--rerun", *args], e)
            return once

        one = ("--session", f"build-{pythons[0]}(cuda='none')")
        for label, args, kw, target in () if only_vs_build else (
                ("split, side by side", (), {}, "-"),
                ("split, one by one", ("--parallel", "1"), {}, "-"),
                ("shared ccache, side by side", (), {"split": False}, "-"),
                ("no sharing, one by one", ("--parallel", "1"), {"split": False, "share": False}, "~3.0")):
            base, ours = from_nothing(*one, **kw), from_nothing(*args, **kw)  # its own way, with one Python
            pairs = [(base(i), ours(i))[::-1] for i in range(self.reps)]  # in turn; the 3-Python run last
            self.record_pairs(f"matrix 3 Pythons ({label})", pairs, target, f"inv matrix: 3 Pythons x cpu, {label}",
                              "the same with 1 Python")
            info = json.loads((proj / "dist" / "matrix-summary.json").read_text())["run"]
            self.results[f"matrix 3 Pythons ({label})"]["usage"] = {
                k: info[k] for k in ("at once", "job budget", "most compilers at once", "peak rss bytes",
                                     "peak compilers rss bytes", "free memory bytes at start")}
            print(f"{'':28s} usage: {self.results[f'matrix 3 Pythons ({label})']['usage']}", flush=True)
        def single(i: int) -> float:  # one plain `inv build --wheel`: no nox, no split, no import check
            timed(inv + ["clean", "--all"], env)
            for folder in (cache / "ccache",):
                shutil.rmtree(folder, ignore_errors=True)
            return timed(inv + ["build", "--wheel", "--cuda", "none", "--python", pythons[0]], env)

        timed(inv + ["build", "--wheel", "--cuda", "none", "--python", pythons[0]], env)  # makes its env once
        side_by_side = from_nothing()
        pairs = [(side_by_side(i), single(i)) for i in range(self.reps + 2)]  # in turn: drift hits both alike
        self.record_pairs("matrix 3 Pythons vs inv build", pairs, "<= 1.25",
                          "inv matrix: 3 Pythons x cpu, split, side by side",
                          f"one inv build --wheel --cuda none --python {pythons[0]}, from nothing")
        if only_vs_build:
            return
        timed(inv + ["matrix"], env)
        noop = repeat(self.reps, lambda i: timed(inv + ["matrix"], env))
        self.results["no-op inv matrix (3 sessions)"] = {**noop, "target": "<= 2 s"}
        print(f"{'no-op inv matrix':28s} {noop['median']:.3f}s (target <= 2 s; min {noop['min']:.3f} "
              f"max {noop['max']:.3f})", flush=True)

    # ------------------------------------------------------------------ 5b. distcc
    def distcc(self) -> None:
        """A clean build with two loopback distccd hosts (2 slots each) against the same build on this machine
        alone, no compiler cache; and what it would be on real hosts, on paper, from measured parts."""
        distccd, distcc = shutil.which("distccd"), shutil.which("distcc")
        if not distccd or not distcc:
            print("distcc: skipped (apt-get install distcc)")
            return
        checkout, env = self.demo("distcc", 8 if self.quick else 24)
        env = {**env, "TORCHBUILD_CACHE_TOOL": "none"}
        daemons, hosts = [], []
        for _ in range(2):
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            daemons.append(subprocess.Popen([distccd, "--no-detach", "--daemon", "--port", str(port), "--listen",
                                             "127.0.0.1", "--allow", "127.0.0.1", "--jobs", "2"],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            hosts.append(f"127.0.0.1:{port}/2")
        time.sleep(1)
        try:
            remote = {**env, "TORCHBUILD_BUILD_DISTRIBUTED": "distcc", "TORCHBUILD_BUILD_HOSTS": ",".join(hosts)}
            local = repeat(self.reps, lambda i: self.build(checkout, env, "--cuda", "none", "--clean"))
            spread = repeat(self.reps, lambda i: self.build(checkout, remote, "--cuda", "none", "--clean"))
        finally:
            for d in daemons:
                d.kill()
                d.wait()
        self.record("distcc, 2 loopback hosts", spread, local, "- (overhead here)",
                    "inv build --clean, distcc on 2 loopback hosts (4 slots)", "the same build on this machine")
        # On paper: N units, each costing t to compile here, of which a share p is preprocessing (stays local).
        unit = next((checkout / "c10" / "core").glob("unit_*.cpp"))
        flags = ["-O2", "-std=c++17", f"-I{checkout / 'c10/include'}", f"-I{checkout / 'third_party/fbgemm/include'}"]
        compile_s = statistics.median(timed(["g++", *flags, "-c", str(unit), "-o", os.devnull], env)
                                      for _ in range(5))
        pre_s = statistics.median(timed(["g++", *flags, "-E", str(unit), "-o", os.devnull], env) for _ in range(5))
        units = len(list((checkout / "c10").rglob("unit_*.cpp")))
        cores, remote_slots = os.cpu_count() or 1, 16  # e.g. 4 real hosts x 4 slots
        compiling = units * compile_s / cores  # of the measured local build; the rest (configure, link,
        rest = max(0.0, local["median"] - compiling)  # packaging) stays local whatever the hosts
        paper = rest + max(units * pre_s / cores, units * (compile_s - pre_s) / remote_slots)
        self.results["distcc on paper"] = {
            "units": units, "compile seconds per unit": compile_s, "preprocess seconds per unit": pre_s,
            "preprocess share": pre_s / compile_s, "local cores": cores, "remote slots": remote_slots,
            "local build seconds": local["median"], "local compiling seconds": compiling, "rest seconds": rest,
            "with remote slots seconds": paper, "speed-up": local["median"] / paper}
        print(f"{'distcc on paper':28s} {units} units x {compile_s:.2f}s, preprocessing {pre_s / compile_s:.0%}: "
              f"{local['median']:.1f}s here ({compiling:.1f}s compiling on {cores} cores, {rest:.1f}s the rest); "
              f"with {remote_slots} remote slots {paper:.1f}s ({local['median'] / paper:.1f}x)", flush=True)

    # ------------------------------------------------------------------ 6b. env creation
    def envs(self) -> None:
        """`inv env.create` with the uv backend against the venv + pip backend (same deps, warm caches)."""
        import shutil as sh

        from torchbuild.toolchain import search_path

        if not sh.which("uv", path=search_path(os.environ)):
            print("envs: skipped (uv is not installed)")
            return
        checkout = self.work / "envs-co"
        checkout.mkdir(parents=True, exist_ok=True)
        (checkout / "requirements-build.txt").write_text("setuptools>=70.1\nwheel\nninja\npyyaml\n")
        py = f"{sys.version_info[0]}.{sys.version_info[1]}"

        def create(backend: str, i: int) -> float:
            envs = self.work / f"envs-{backend}-{i}"
            env = {**self.env, "TORCHBUILD_PATHS_ENVS": str(envs), "TORCHBUILD_SOURCE_PATH": str(checkout),
                   "HOME": str(Path.home())}
            return timed(INV + ["env.create", "--python", py, "--backend", backend], env)

        create("uv", 99)  # warm uv's cache like pip's
        uv = repeat(self.reps, lambda i: create("uv", i))
        venv = repeat(self.reps, lambda i: create("venv", i))
        self.record("env creation (uv)", uv, venv, "< 1", "inv env.create --backend uv", "--backend venv (venv + pip)")

    # ------------------------------------------------------------------ 7. real projects
    def realworld(self) -> None:
        """Real sdists wrapped in git upstreams with a submodule, served over http on loopback:
        `inv clone` + `inv build` (cold mirror cache, a new env each time) against the plain recipe
        by hand: `git clone --recursive` through the same mirror rule, a venv with the same build
        deps, `pip install -e . --no-build-isolation`, with the same CMake fix where it is needed."""
        from tests import upstreams

        for project in upstreams.PROJECTS:
            if project.name in ("python-rapidjson", "sentencepiece"):
                self.real_project(project)

    def real_project(self, project: object) -> None:
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

    # ------------------------------------------------------------------ 6. memory
    def memory(self) -> None:
        checkout, env = self.demo("memory", 8 if self.quick else 24)
        env = {**env, "TORCHBUILD_CACHE_TOOL": "none"}
        peaks = []
        for _ in range(self.reps):
            proc = subprocess.Popen(INV + ["build", "--path", str(checkout), "--cuda", "none", "--clean"], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            peak = 0
            while proc.poll() is None:
                try:
                    status = Path(f"/proc/{proc.pid}/status").read_text()
                    peak = max(peak, int(re.search(r"VmHWM:\s+(\d+)", status).group(1)))
                except (OSError, AttributeError):
                    pass
                time.sleep(0.02)
            peaks.append(peak / 1024)
        self.results["tool peak RSS (MiB)"] = {**stats(peaks), "target": "<= 100"}
        print(f"{'tool peak RSS':28s} {statistics.median(peaks):.1f} MiB (target <= 100; "
              f"min {min(peaks):.1f} max {max(peaks):.1f})")


    # ------------------------------------------------------------------ 9. Python-only development
    def nightly(self) -> None:
        """Fresh clone -> importable demo: `inv nightly` (the demo's wheel served as a nightly over http on
        loopback) against `inv build` from nothing; each run with its own empty env dir and cache."""
        units = 8 if self.quick else 24
        up = make_upstream(self.work / "nightly-up", units=units)
        env = {**self.env, "TORCHBUILD_PATHS_CACHE_DIR": str(self.work / "nightly-wheel-cache")}
        wheel_dir = self.work / "nightly-index" / "minitorch"
        wheel_dir.mkdir(parents=True)
        co = self.work / "nightly-wheel-co"
        timed(INV + ["clone", "--url", up.url("pytorch"), "--path", str(co)], env)
        self.build(co, env, "--cuda", "none", "--wheel", "--dist", str(wheel_dir),
                   "--set", "PYTORCH_BUILD_VERSION=0.1.0.dev20261201")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                                  cwd=wheel_dir.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        minor = f"{sys.version_info[0]}.{sys.version_info[1]}"

        def from_nothing(i: int, task: list[str], env_name: str) -> float:
            fresh = {**env, "TORCHBUILD_PATHS_ENVS": str(self.work / f"nightly-envs-{task[0]}{i}"),
                     "TORCHBUILD_PATHS_CACHE_DIR": str(self.work / f"nightly-cache-{task[0]}{i}"),
                     "TORCHBUILD_NIGHTLY_INDEX_URL": f"http://127.0.0.1:{port}/"}
            dest = self.work / f"nightly-{task[0]}{i}"
            seconds = timed(INV + ["clone", "--url", up.url("pytorch"), "--path", str(dest)], fresh)
            seconds += timed(INV + [*task, "--path", str(dest), "--cuda", "none"], fresh)
            python = Path(fresh["TORCHBUILD_PATHS_ENVS"]) / env_name / "bin" / "python"
            out = subprocess.run([str(python), "-c", "import minitorch; print(minitorch.__file__)"], cwd=self.work,
                                 capture_output=True, text=True, check=True).stdout
            assert out.startswith(str(dest)), out
            return seconds

        try:
            pairs = [(from_nothing(i, ["nightly"], f"nightly-py{minor}-cpu"), from_nothing(i, ["build"], f"py{minor}"))
                     for i in range(3)]
        finally:
            server.terminate()
        self.record_pairs("fresh clone to import: nightly", pairs, "<= 0.2",
                          "inv clone + inv nightly (the wheel over http on loopback)",
                          f"inv clone + inv build from nothing ({units} units, empty compiler cache)")


    # ------------------------------------------------------------------ 10. the edit-compile loop at scale
    def loop(self) -> None:
        """`inv demo --units N`'s core built with debug info (REL_WITH_DEB_INFO=1, as a C++ developer builds to
        debug; that is where links are long), one checkout per way sharing one compiler cache: (a) one .cpp of
        the core, (b) the header every unit includes, (c) one line of the bindings, each until importable again:
        torchbuild with the linker it picks (the linker trial's fastest here), with GNU ld, and going the whole
        way through pip (build.shortcut false), against `pip install -e . --no-build-isolation` by hand; and the
        physical limit of (a): the unit's compile and the library's link with the chosen linker, run alone.
        Python writes bytecode here (this machine's PYTHONDONTWRITEBYTECODE=1 is no user's setting)."""
        units = 200 if self.quick else 1000
        up = make_upstream(self.work / "loop-up", units=units)
        base = {k: v for k, v in self.env.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env = {**base, "TORCHBUILD_PATHS_CACHE_DIR": str(self.work / "loop-cache"), "REL_WITH_DEB_INFO": "1"}
        minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
        python = self.work / "envs" / f"py{minor}" / "bin" / "python"
        ways = ("auto", "bfd", "whole", "plain")
        env_of = {"auto": env, "bfd": {**env, "TORCHBUILD_BUILD_LINKER": "bfd"},
                  "whole": {**env, "TORCHBUILD_BUILD_SHORTCUT": "false"}}
        trees = {}
        for way in ways:
            co = self.work / f"loop-{way}"
            timed(INV + ["clone", "--url", up.url("pytorch"), "--path", str(co)], env)
            trees[way] = co
        for way in ("auto", "auto", "bfd", "whole"):  # auto twice: the linker trial, then its choice
            done = subprocess.run(INV + ["build", "--path", str(trees[way]), "--cuda", "none"], env=env_of[way],
                                  capture_output=True, text=True, check=True)
            out = done.stdout + done.stderr  # torchbuild's notes go to stderr
            chosen = re.search(r"linker: (\w+ [\d.]+)", out)
            self.results[f"loop linker {way}"] = chosen.group(1) if chosen else "the toolchain's default"
            trial = re.search(r"linker trial on .*", out)
            if trial:
                self.results["loop linker trial"] = trial.group(0)
        plain_env = {**env, "CCACHE_DIR": str(self.work / "loop-cache" / "ccache"),
                     "CCACHE_BASEDIR": str(trees["plain"]), "PATH": f"{Path(sys.executable).parent}:{env['PATH']}",
                     "MAX_JOBS": str(os.cpu_count() or 1)}
        plain_cmd = [str(python), "-m", "pip", "install", "-e", ".", "-v", "--no-build-isolation", "--no-deps"]
        timed(plain_cmd, plain_env, cwd=trees["plain"])

        def edit(co: Path, rel: str, i: int) -> None:
            """A change no other checkout makes: each way pays its own compiles (no cache hit from another)."""
            path = co / rel
            name = re.sub(r"\W", "_", f"loop_edit_{co.name}_{rel}_{i}")
            path.write_text(path.read_text() + f"\nstatic const int {name} = {i};\n")

        def importable(co: Path) -> None:
            subprocess.run([str(python), "-c", "import minitorch; minitorch.checksum()"], cwd=self.work, env=env,
                           check=True, capture_output=True)

        linker = self.results["loop linker auto"]
        unit = f"c10/core/unit_{units // 2:02d}.cpp"
        for label, rel, reps in (("(a) one core .cpp", unit, self.reps), ("(b) the header every unit includes",
                                 "c10/include/c10/util/scaled.h", 1), ("(c) one line of the bindings",
                                 "minitorch/csrc/module.cpp", self.reps)):
            rows = {}
            for way in ways:
                co = trees[way]

                def once(i: int, co: Path = co, way: str = way, rel: str = rel) -> float:
                    edit(co, rel, i)
                    start = time.perf_counter()
                    if way == "plain":
                        subprocess.run(plain_cmd, cwd=co, env=plain_env, check=True, capture_output=True)
                    else:
                        subprocess.run(INV + ["build", "--path", str(co), "--cuda", "none"], env=env_of[way],
                                       check=True, capture_output=True)
                    importable(co)
                    return time.perf_counter() - start

                rows[way] = repeat(reps, once)
            self.record(f"loop {label}, chosen linker vs GNU ld", rows["auto"], rows["bfd"], "<= 0.3 (a)",
                        f"inv build, {linker}", "inv build, GNU ld")
            self.record(f"loop {label}, the shortcut vs the whole way", rows["auto"], rows["whole"], "-",
                        f"inv build, {linker}", f"inv build, {linker}, build.shortcut false (pip every time)")
            self.record(f"loop {label} vs the plain recipe", rows["auto"], rows["plain"], "-",
                        f"inv build, {linker}", "pip install -e . by hand (GNU ld)")
        co = trees["auto"]
        compile_cmd = next(e["command"] for e in json.loads((co / "build" / "compile_commands.json").read_text())
                           if e["file"].endswith(unit))
        compile_cmd = re.sub(r"^\S*ccache\s+", "", compile_cmd)
        ninja = re.search(r"(?m)^CMAKE_MAKE_PROGRAM:\w+=(.*)$", (co / "build" / "CMakeCache.txt").read_text())
        link_cmd = subprocess.run([ninja.group(1) if ninja else "ninja", "-C", str(co / "build"), "-t", "commands",
                                   "libc10.so"], capture_output=True, text=True, check=True).stdout.strip()
        link_cmd = link_cmd.splitlines()[-1]
        limit = repeat(self.reps, lambda i: timed(["bash", "-c", f"cd {co / 'build'} && {compile_cmd} && {link_cmd}"],
                                                  env))
        row = self.results["loop (a) one core .cpp, chosen linker vs GNU ld"]
        self.record("loop (a) vs its physical limit", row["ours"], limit, "<= 1.2",
                    f"inv build, {linker}", f"the unit's compile + libc10.so's link with {linker} alone")


def write_readme(results: dict) -> None:
    rows = ["| figure | torchbuild | plain recipe | ratio | target |", "|---|---|---|---|---|"]
    for name, r in results.items():
        if isinstance(r, dict) and "ratio" in r:
            how = f" (median of {len(r['pairs'])} pairs' ratios; of the medians {r['ratio of medians']:.2f})" \
                if "pairs" in r else ""
            rows.append(f"| {name} | {r['what']}: {r['ours']['median']:.2f} s | {r['plain_what']}: "
                        f"{r['plain']['median']:.2f} s | {r['ratio']:.2f}{how} | {r['target']} |")
    noop = results.get("no-op inv matrix (3 sessions)")
    if noop:
        rows.append(f"| no-op inv matrix | 3 sessions up to date: {noop['median']:.2f} s | - | - | {noop['target']} |")
    paper = results.get("distcc on paper")
    if paper:
        rows.append(f"| distcc on paper | {paper['local build seconds']:.1f} s here -> "
                    f"{paper['with remote slots seconds']:.1f} s with {paper['remote slots']} remote slots "
                    f"(preprocessing {paper['preprocess share']:.0%} of a compile; configure/link "
                    f"{paper['rest seconds']:.1f} s stay local) | - | {1 / paper['speed-up']:.2f} | - |")
    mem = results.get("tool peak RSS (MiB)")
    if mem:
        rows.append(f"| tool peak RSS | {mem['median']:.0f} MiB | - | - | {mem['target']} MiB |")
    readme = ROOT / "README.md"
    text = readme.read_text()
    block = "<!-- bench:start -->\n" + "\n".join(rows) + "\n<!-- bench:end -->"
    text = re.sub(r"<!-- bench:start -->.*<!-- bench:end -->", lambda m: block, text, flags=re.S)
    readme.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller demo builds (still 5 repetitions)")
    parser.add_argument("--only", nargs="*", default=None,
                        help="clone overhead noop switch matrix matrix_vs_build distcc envs memory realworld nightly "
                             "loop")
    parser.add_argument("--readme", action="store_true", help="rewrite README's Performance table")
    args = parser.parse_args()
    names = args.only or ["overhead", "noop", "clone", "switch", "matrix", "distcc", "envs", "memory", "realworld",
                          "nightly", "loop"]
    with tempfile.TemporaryDirectory(prefix="tb-bench-") as tmp:
        bench = Bench(args.quick, Path(tmp))
        for name in names:
            getattr(bench, name)()
    out = ROOT / "bench" / "results.json"
    previous = json.loads(out.read_text()) if out.exists() and args.only else {}
    merged = {**previous.get("results", {}), **bench.results}
    out.write_text(json.dumps({"quick": args.quick, "machine": f"{os.cpu_count()} cores",
                               "when": time.strftime("%Y-%m-%d %H:%M"), "results": merged}, indent=2) + "\n")
    print(f"wrote {out}")
    if args.readme:
        write_readme(merged)
        print("rewrote README.md's Performance table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
