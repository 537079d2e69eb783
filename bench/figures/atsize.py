"""At PyTorch's size (issue 55): the demo at 1x, 10x and 100x its counts (units, installed headers, Python
modules, libtorch's megabytes, the codegen's fan-out; 100x is PyTorch's 9,000 headers and 2,000 modules), and
torchbuild's own costs against the physical limit measured in the same run: ninja's own no-op, the compile, link
and install of one edited unit by ninja alone, a rename of the configuration's folders."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Callable

from bench.measure import INV, ROOT, Bench, repeat, stats, timed
from torchbuild.builder import shortcut
from torchbuild.builder.drivers.skbuild import ScikitBuildCore
from torchbuild.builder.ownership.cmaketrees import tree_ninja
from torchbuild.builder.ownership.moves import editable_record
from torchbuild.demo import Size, Upstream, make_upstream

TORCHBUILD = [str(Path(sys.executable).parent / "torchbuild"), "build"]  # the installed command: no Invoke start
TREES = [TORCHBUILD[0], "trees"]
BUDGET_CHECK = ("import sys, time; from pathlib import Path; from torchbuild.builder.ownership import keeping, trees; "
                "c = Path(sys.argv[1]); fits = keeping.total(keeping.configurations(c)) / keeping.GIB + 1; "
                "start = time.perf_counter(); said = trees.enforce(c, fits, 24); "
                "print(time.perf_counter() - start, said, file=sys.stderr)")
BISECT_CHECK = "import minitorch, minitorch.history as h, sys; sys.exit(1 if hasattr(h, 'BROKEN') else 0)"


def at_size(self: Bench, era: str = "2.13") -> None:
    """Each scale's demo (setup.py era unless `era`) built from nothing once (CPU release, then --debug for the
    switch), then: the no-op, one .cpp edited to importable, the switch back to release, --explain."""
    for factor in self.scales or ((1, 10) if self.quick else (1, 10, 100)):
        size = Size().scaled(factor)
        name = f"at-size-{era}-{factor}x"
        env = {**self.env, "TORCHBUILD_PATHS_CACHE_DIR": str(self.work / f"{name}-cache")}
        checkout = self.work / f"{name}-co"
        label = f"at size {factor}x ({size.units} units, {size.headers} headers, {size.python_files} modules, " \
                f"{size.pad_mb} MB pad; {era})"
        if (checkout / "build" / ".torchbuild.json").is_file():  # `--work` again: built by an earlier run
            up = Upstream(self.work.resolve() / f"{name}-up", (self.work.resolve() / f"{name}-up").as_uri())
            timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none"], env)  # the release tree, current
        else:
            up = make_upstream(self.work / f"{name}-up", era=era, size=size)
            timed(INV + ["clone", "--url", up.url("pytorch"), "--path", str(checkout)], env)
            first = timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none"], env)
            print(f"{label}: first build {first:.1f}s", flush=True)
            self.results[f"{label}: first build (s)"] = {**stats([first]), "target": "-"}
        for figure in (noop, edit, switch, trees, explain, profile, wheel, matrix, bisect, restamp):
            if (figure is not restamp or era == "main") and figure.__name__ in (self.figures or [figure.__name__]):
                guarded(self, label, figure, up, checkout, env)


def guarded(self: Bench, label: str, figure: Callable[..., None], up: Upstream, checkout: Path,
            env: dict[str, str]) -> None:
    """One figure; one that fails is recorded as failed, with its error, and the scale's other figures still run
    (a 100x run is an hour: one figure's failure must not lose the others)."""
    try:
        if figure in (matrix, bisect):
            figure(self, label, up, checkout, env)
        elif figure is restamp:
            figure(self, label, checkout)
        else:
            figure(self, label, checkout, env)
    except Exception as exc:  # noqa: BLE001 - the run goes on; the failure is in the results, said
        self.results[f"{label}: {figure.__name__} failed"] = {"error": str(exc)[-500:]}
        print(f"{label}: {figure.__name__} FAILED: {str(exc)[-2000:]}", flush=True)


def profile(self: Bench, label: str, checkout: Path, env: dict[str, str]) -> None:
    own_time(self, label, checkout, env, "--profile")


def own_time(self: Bench, label: str, checkout: Path, env: dict[str, str], flag: str) -> None:
    """A flag that answers without building (`--explain`, `--profile`): its own time, three times."""
    cost = repeat(3, lambda i: timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none", flag], env))
    self.results[f"{label}: {flag} (s)"] = {**cost, "target": "< 2"}
    print(f"{label}: {flag} {cost['median']:.2f}s", flush=True)


def wheel(self: Bench, label: str, checkout: Path, env: dict[str, str]) -> None:
    """A wheel of the built configuration (nothing compiled), against writing the same files into a zip with
    the same compression: what any wheel of them costs at least."""
    dist = checkout.parent / f"{checkout.name}-dist"

    def ours(i: int) -> float:
        shutil.rmtree(dist, ignore_errors=True)
        return timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none", "--wheel", "--dist", str(dist)], env)

    made = repeat(3, ours)
    unpacked = dist / "unpacked"
    with zipfile.ZipFile(next(dist.glob("*.whl"))) as whl:
        whl.extractall(unpacked)
        members = [(unpacked / info.filename, info.filename) for info in whl.infolist() if not info.is_dir()]

    def zipping(i: int) -> float:
        start = time.perf_counter()
        with zipfile.ZipFile(dist / "plain.zip", "w", zipfile.ZIP_DEFLATED) as out:
            for path, name in members:
                out.write(path, name)
        return time.perf_counter() - start

    plain = repeat(3, zipping)
    shutil.rmtree(dist, ignore_errors=True)
    timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none"], env)  # the develop configuration: still up to date
    self.record(f"{label}: --wheel of the built tree, against zipping its files", made, plain, "-",
                f"torchbuild build --wheel ({len(members)} files)", "zipfile, ZIP_DEFLATED, the wheel's files")


def matrix(self: Bench, label: str, up: Upstream, checkout: Path, env: dict[str, str]) -> None:
    """`inv matrix` (this Python, CPU) built once, then its "nothing changed" check, three times: the slot's
    sync against the checkout and the wheel's fingerprint, at this size."""
    proj = self.work / f"at-size-matrix-{up.root.name}"
    proj.mkdir(exist_ok=True)
    for name in ("tasks.py", "noxfile.py"):
        shutil.copy(ROOT / name, proj / name)
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (proj / "torchbuild.yaml").write_text(
        f"source:\n  url: {up.url('pytorch')}\n  path: {checkout}\n"
        f"matrix:\n  pythons: [\"{python}\"]\n  cudas: [\"none\"]\n"
        f"paths:\n  cache_dir: {env['TORCHBUILD_PATHS_CACHE_DIR']}\n")
    inv = [sys.executable, "-m", "invoke", "--search-root", str(proj)]
    first = timed(inv + ["matrix"], env)
    cost = repeat(3, lambda i: timed(inv + ["matrix"], env))
    self.results[f"{label}: inv matrix, nothing changed (s)"] = {**cost, "target": "<= 2", "first": first}
    print(f"{label}: matrix first {first:.1f}s, nothing changed {cost['median']:.2f}s", flush=True)


def bisect(self: Bench, label: str, up: Upstream, checkout: Path, env: dict[str, str]) -> None:
    """`inv bisect` over six Python-only commits (the regression in the fourth): its first step builds in the
    bisection's tree from the compiler cache the checkout's build filled, every other step reuses those
    binaries. The figure: such a step, against the check command alone in the same env."""
    base = up.head("pytorch")
    history = '"""Helpers changed by Python-only commits."""\n'
    for i in range(1, 7):
        history += "\nBROKEN = True\n" if i == 4 else f"\n\ndef helper_{i}():\n    return {i}\n"
        up.commit("pytorch", {"minitorch/history.py": history}, f"python: change {i}")
    bad = up.head("pytorch")
    subprocess.run(["git", "-C", str(checkout), "fetch", "-q", "origin"], env=env, check=True)
    start = time.perf_counter()
    subprocess.run(INV + ["bisect", "--path", str(checkout), "--cuda", "none", "--good", base, "--bad", bad, "--",
                          "python", "-c", BISECT_CHECK], env=env, check=True, capture_output=True)
    wall = time.perf_counter() - start
    state = json.loads((checkout / ".torchbuild" / "bisect" / "state.json").read_text())
    reused = [step["seconds"] for step in state["steps"] if step["way"] in ("kept", "python")]
    plain = repeat(3, lambda i: timed([state["python_exe"], "-c", "import minitorch"], env, cwd=checkout))
    self.record(f"{label}: a bisect step that reuses binaries, against the check alone", stats(reused), plain, "-",
                f"a step of inv bisect over Python-only commits ({len(reused)} of {len(state['steps'])} steps; the "
                f"whole bisection {wall:.1f}s)", "python -c 'import minitorch' in the same env")


def restamp(self: Bench, label: str, checkout: Path) -> None:
    """The scikit-build-core era's re-stamp of the editable install for another version (a commit crossed by
    the shortcut): one rename of the dist-info and its RECORD written once, on a copy of the env's."""
    record = next(editable_record(prefix, checkout) for prefix in (self.work / "envs").iterdir()
                  if editable_record(prefix, checkout))
    rows = len(record.read_text().splitlines())
    scratch = self.work / "restamp"

    def once(i: int) -> float:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.copytree(record.parent, scratch / record.parent.name)
        start = time.perf_counter()
        shortcut.restamp(scratch / record.parent.name / "RECORD", f"9.9.{i}")
        return time.perf_counter() - start

    cost = repeat(3, once)
    shutil.rmtree(scratch, ignore_errors=True)
    self.results[f"{label}: RECORD re-stamped for another version (s)"] = {**cost, "target": "-", "rows": rows}
    print(f"{label}: RECORD of {rows} rows re-stamped in {cost['median'] * 1000:.1f} ms", flush=True)


def explain(self: Bench, label: str, checkout: Path, env: dict[str, str]) -> None:
    own_time(self, label, checkout, env, "--explain")


def noop(self: Bench, label: str, checkout: Path, env: dict[str, str]) -> None:
    """The no-op against ninja's own, and against the plain recipe's: the build command torchbuild ran (its
    log's first line: setup.py develop, or pip's editable install) run by hand, after which torchbuild's next
    build rightly goes the whole way (run here, untimed)."""
    recipe = plain_recipe(self, checkout)
    ours = repeat(self.reps, lambda i: timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none"], env))
    ninja = repeat(self.reps, lambda i: timed(own_ninja(checkout) + ["-C", str(checkout / "build")], env))
    self.record(f"{label}: no-op against ninja's", ours, ninja, "<= ninja + 0.1 s", "torchbuild build (up to date)",
                "ninja -C build alone")
    plain = repeat(3, lambda i: timed(["bash", "-c", recipe], env, cwd=checkout))
    timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none"], env)
    self.record(f"{label}: no-op against the plain recipe's", ours, plain, "<= 0.05", "torchbuild build (up to date)",
                f"the same {'setup.py develop' if 'setup.py' in recipe else 'pip install -e .'} by hand")


def plain_recipe(self: Bench, checkout: Path) -> str:
    """The build command of torchbuild's last build in `checkout`, as its log's first line says it."""
    for log in sorted((self.work / "logs").rglob("*.log"), key=lambda p: p.stat().st_mtime, reverse=True):
        first = log.read_text(errors="replace").split("\n", 1)[0]
        said = re.match(rf"\(cd {re.escape(str(checkout))} && (.*)\)$", first)
        if said:
            return said.group(1)
    raise RuntimeError(f"no build log of {checkout} in {self.work / 'logs'}")


def edit(self: Bench, label: str, checkout: Path, env: dict[str, str]) -> None:
    """One unit edited, to importable, against the tree's own ninja (`edited`). In the scikit-build-core era
    again with SKBUILD_INSTALL_STRIP=0: the backend strips a Release install, and the loop strips as it does,
    so the row without the strip says what the strip costs (the change of setting goes through pip once, and
    back, untimed)."""
    edited(self, label, checkout, env, "")
    edited(self, label, checkout, env, "", "minitorch/csrc/module.cpp", "libtorch_python .cpp")
    if ScikitBuildCore.is_pytorch(checkout):
        unstripped = {**env, "SKBUILD_INSTALL_STRIP": "0"}
        timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none"], unstripped)
        edited(self, label, checkout, unstripped, " with SKBUILD_INSTALL_STRIP=0")
        timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none"], env)


def edited(self: Bench, label: str, checkout: Path, env: dict[str, str], how: str,
           source: str = "c10/core/unit_01.cpp", what: str = ".cpp") -> None:
    """One unit edited, to importable: torchbuild's build, five times, then the tree's own ninja's compile, link
    and install of the same kind of edit, five times (the physical limit). Not in turn: a build by hand
    changes the installed files behind torchbuild's back, and its next build rightly goes the whole way.
    c10's unit relinks every library; libtorch_python's (torch/csrc's place) only it and _C."""
    unit = checkout / source

    def change(way: str, i: int) -> None:  # code, not a comment: the compiler cache has none of it
        unit.write_text(f"{unit.read_text()}\nnamespace {{ long tb_{way}_{i}_{time.time_ns()}() {{ return 1; }} }}\n")

    ours, plain = [], []
    for i in range(5):
        change("ours", i)
        if i == 0:  # what the build will run (the scikit-build-core era: pip's wheel, zipped, or the shortcut)
            said = subprocess.run(TORCHBUILD + ["--path", str(checkout), "--cuda", "none", "--dry-run"], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
            verdict = next((ln.split("verdict: ", 1)[1] for ln in said.splitlines() if "verdict: " in ln), "?")
        ours.append(timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none"], env))
    for i in range(5):
        change("plain", i)
        plain.append(timed(own_ninja(checkout) + ["-C", str(checkout / "build"), "install"], env))
    timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none"], env)  # the tree as torchbuild keeps it
    name = f"{label}: one {what} edited{how}, against ninja's compile, link and install"
    self.record(name, stats(ours), stats(plain), "<= 1.2", f"torchbuild build after the edit{how}",
                "the tree's ninja install after the same kind of edit")
    self.results[name]["verdict"] = verdict[:300]
    print(f"{label}: the edit's verdict{how}: {verdict[:300]}", flush=True)


def own_ninja(checkout: Path) -> list[str]:
    """The ninja the tree was configured for: another version would find its logs in a format it does not read
    and build everything again (the env's ninja from PyPI against Debian's, say)."""
    return [tree_ninja(checkout / "build") or "ninja"]


def switch(self: Bench, label: str, checkout: Path, env: dict[str, str]) -> None:
    """Back to the release configuration from --debug, against renaming two folders (the tree and the package's
    lib/) there and back: what a switch that copies nothing costs at least."""
    timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none", "--debug"], env)

    def back(i: int) -> float:
        timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none", "--debug"], env)
        return timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none"], env)

    ours = repeat(3, back)
    scratch = checkout.parent / f"{checkout.name}-rename"
    scratch.mkdir(exist_ok=True)

    libs = checkout / "minitorch" / "lib"  # setup.py era; scikit-build-core: the env's copy
    libs = libs if libs.is_dir() else next((self.work / "envs").glob("*/lib/python*/site-packages/minitorch/lib"))

    def rename(i: int) -> float:
        start = time.perf_counter()
        for n, folder in enumerate((checkout / "build", libs)):
            os.rename(folder, scratch / str(n))
            os.rename(scratch / str(n), folder)
        return time.perf_counter() - start

    plain = repeat(3, rename)
    shutil.rmtree(scratch, ignore_errors=True)
    self.record(f"{label}: switch back, against renaming its folders", ours, plain, "<= 1 s",
                "torchbuild build (switch back to release)", "os.rename of build/ and the package's lib/, and back")


def trees(self: Bench, label: str, checkout: Path, env: dict[str, str]) -> None:
    """`torchbuild trees` (every tree measured: the release tree, the --debug one the switch figure kept, the store
    and the compiler cache), and the budget check a build runs after it (forced to walk the trees: a budget over
    theirs but under the disk's use), each against `du -s` of the same trees: a walk of them, the physical limit."""
    places = [str(checkout / "build"), str(checkout / ".torchbuild" / "trees")]
    listing = repeat(self.reps, lambda i: timed(TREES + ["--path", str(checkout)], env))
    plain = repeat(self.reps, lambda i: timed(["du", "-s", *places], env))
    self.record(f"{label}: torchbuild trees, against du -s of the trees", listing, plain, "well under 1 s",
                "torchbuild trees", "du -s build .torchbuild/trees")

    def check(i: int) -> float:
        done = subprocess.run([sys.executable, "-c", BUDGET_CHECK, str(checkout)], env=env, capture_output=True,
                              text=True, check=True)
        return float(done.stderr.split()[0])

    self.record(f"{label}: the budget check after a build, against du -s of the trees", repeat(self.reps, check),
                plain, "well under 1 s", "trees.enforce (the walk of every tree, nothing dropped)",
                "du -s build .torchbuild/trees")
