"""At PyTorch's size (issue 55): the demo at 1x, 10x and 100x its counts (units, installed headers, Python
modules, libtorch's megabytes, the codegen's fan-out; 100x is PyTorch's 9,000 headers and 2,000 modules), and
torchbuild's own costs against the physical limit measured in the same run: ninja's own no-op, the compile, link
and install of one edited unit by ninja alone, a rename of the configuration's folders."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from bench.measure import INV, Bench, repeat, stats, timed
from torchbuild.builder.ownership.cmaketrees import tree_ninja
from torchbuild.demo import Size, make_upstream

TORCHBUILD = [str(Path(sys.executable).parent / "torchbuild"), "build"]  # the installed command: no Invoke start


def at_size(self: Bench, era: str = "2.13") -> None:
    """Each scale's demo (setup.py era unless `era`) built from nothing once (CPU release, then --debug for the
    switch), then: the no-op, one .cpp edited to importable, the switch back to release, --explain."""
    for factor in (1, 10) if self.quick else (1, 10, 100):
        size = Size().scaled(factor)
        name = f"at-size-{era}-{factor}x"
        up = make_upstream(self.work / f"{name}-up", era=era, size=size)
        env = {**self.env, "TORCHBUILD_PATHS_CACHE_DIR": str(self.work / f"{name}-cache")}
        checkout = self.work / f"{name}-co"
        timed(INV + ["clone", "--url", up.url("pytorch"), "--path", str(checkout)], env)
        first = timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none"], env)
        label = f"at size {factor}x ({size.units} units, {size.headers} headers, {size.python_files} modules, " \
                f"{size.pad_mb} MB pad; {era})"
        print(f"{label}: first build {first:.1f}s", flush=True)
        self.results[f"{label}: first build (s)"] = {**stats([first]), "target": "-"}
        noop(self, label, checkout, env)
        edit(self, label, checkout, env)
        switch(self, label, checkout, env)
        explain(self, label, checkout, env)


def explain(self: Bench, label: str, checkout: Path, env: dict[str, str]) -> None:
    cost = repeat(3, lambda i: timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none", "--explain"], env))
    self.results[f"{label}: --explain (s)"] = {**cost, "target": "< 2"}
    print(f"{label}: --explain {cost['median']:.2f}s", flush=True)


def noop(self: Bench, label: str, checkout: Path, env: dict[str, str]) -> None:
    ours = repeat(self.reps, lambda i: timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none"], env))
    ninja = repeat(self.reps, lambda i: timed(own_ninja(checkout) + ["-C", str(checkout / "build")], env))
    self.record(f"{label}: no-op against ninja's", ours, ninja, "<= ninja + 0.1 s", "torchbuild build (up to date)",
                "ninja -C build alone")


def edit(self: Bench, label: str, checkout: Path, env: dict[str, str]) -> None:
    """One unit edited, to importable: torchbuild's build, three times, then the tree's own ninja's compile, link
    and install of the same kind of edit, three times (the physical limit). Not in turn: a build by hand
    changes the installed files behind torchbuild's back, and its next build rightly goes the whole way."""
    unit = checkout / "c10/core/unit_01.cpp"

    def edited(way: str, i: int) -> None:  # code, not a comment: the compiler cache has none of it
        unit.write_text(f"{unit.read_text()}\nnamespace {{ long tb_{way}_{i}_{time.time_ns()}() {{ return 1; }} }}\n")

    ours, plain = [], []
    for i in range(3):
        edited("ours", i)
        ours.append(timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none"], env))
    for i in range(3):
        edited("plain", i)
        plain.append(timed(own_ninja(checkout) + ["-C", str(checkout / "build"), "install"], env))
    timed(TORCHBUILD + ["--path", str(checkout), "--cuda", "none"], env)  # the tree as torchbuild keeps it
    self.record(f"{label}: one .cpp edited, against ninja's compile, link and install", stats(ours), stats(plain),
                "<= 1.2", "torchbuild build after the edit", "the tree's ninja install after the same kind of edit")


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
