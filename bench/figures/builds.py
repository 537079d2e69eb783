"""The build figures: tool overhead, the no-op, switching configurations, memory."""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.figures.atsize import own_ninja
from bench.measure import INV, NVCC, ROOT, Bench, repeat, stats, timed


def overhead(self: Bench) -> None:
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
    heavy = [m for m in ("git", "yaml", "torchbuild.git", "torchbuild.builder") if re.search(rf"\| +{m}$", out, re.M)]
    self.results["import tasks.py"] = {"microseconds": total, "heavy_modules_imported": heavy}
    print(f"{'import tasks.py':28s} {total / 1e6:.3f}s self-time sum; heavy modules imported: {heavy or 'none'}")


def noop(self: Bench) -> None:
    checkout, env = self.demo("noop", 8 if self.quick else 24)
    self.build(checkout, env, "--cuda", "none")
    self.build(checkout, env, "--cuda", "none")
    log = max((self.work / "logs").rglob("*.log"), key=lambda p: p.stat().st_mtime).read_text().splitlines()[0]
    m = re.match(r"\(cd (\S+) && (.*)\)$", log)
    assert m, log
    underlying = ["bash", "-c", m.group(2)]
    ours = repeat(self.reps, lambda i: self.build(checkout, env, "--cuda", "none"))
    plain = repeat(self.reps, lambda i: timed(underlying, env, cwd=checkout))
    ninja = repeat(self.reps, lambda i: timed(own_ninja(checkout) + ["-C", str(checkout / "build")], env))
    command = "setup.py develop" if "setup.py develop" in log else "pip install -e . --no-build-isolation"
    self.record("no-op build", ours, plain, "<= 0.2", "inv build (up to date)", f"the same {command} by hand")
    self.record("no-op build vs ninja", ours, ninja, "-", "inv build (up to date)", "ninja -C build alone")


def switch(self: Bench) -> None:
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


def memory(self: Bench) -> None:
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
