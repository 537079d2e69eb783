"""build.linker: mold or lld where the compiler takes them, announced, part of the configure key, and the
libraries really linked by it (the linker's own note in their .comment section)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from torchbuild.toolchain import linkers
from torchbuild.toolchain.linkers import Linker


def test_the_linker_trial_times_a_real_link_and_auto_takes_the_fastest(tmp_path):
    for i in range(3):
        (tmp_path / f"u{i}.cpp").write_text(f"int unit{i}(int n) {{ return n * {i}; }}\n")
        subprocess.run(["c++", "-fPIC", "-g", "-c", f"u{i}.cpp", "-o", f"u{i}.o"], cwd=tmp_path, check=True)
    command = ": && /usr/bin/c++ -fPIC -g  -fuse-ld=nosuch -shared -o libcore.so u0.o u1.o u2.o && :"  # as ninja's
    assert linkers.with_linker(command, "bfd", "/tmp/x.so") == \
        ": && /usr/bin/c++ -fuse-ld=bfd -fPIC -g  -shared -o /tmp/x.so u0.o u1.o u2.o && :"
    subprocess.run(linkers.with_linker(command, "bfd", "libcore.so"), shell=True, cwd=tmp_path, check=True)
    built = (tmp_path / "libcore.so").read_bytes()
    memory = tmp_path / "linkers.json"
    found = linkers.discover("c++", {"PATH": "/usr/bin:/bin"}, memory)
    assert linkers.measured(found, memory) is None
    seconds = linkers.trial(command, tmp_path, found, {"PATH": "/usr/bin:/bin"}, memory, "libcore.so", {"bfd": 0.5})
    assert set(seconds) == {"bfd"} | {ln.name for ln in found if ln.accepted and ln.name in linkers.AUTO}
    assert seconds["bfd"] == 0.5 and all(t > 0 for t in seconds.values())  # the build's own linker: not run again
    assert (tmp_path / "libcore.so").read_bytes() == built and not list(tmp_path.glob(".torchbuild-trial-*"))
    assert linkers.measured(found, memory) == seconds  # remembered: asked once a machine
    mold = Linker("mold", Path("/usr/bin/mold"), "1.10", True)
    lld = Linker("lld", Path("/usr/bin/ld.lld"), "14", True)
    assert linkers.choose("auto", [mold, lld]) == mold  # no trial yet: mold first
    assert linkers.choose("auto", [mold, lld], {"mold": 0.75, "lld": 0.31, "bfd": 1.0}) == lld


def test_a_linker_that_drops_gccs_lto_code_is_refused_and_never_wins_a_trial(tmp_path):
    """lld links GCC's slim LTO objects (`-flto`, pybind11's Release default) into a library without their code,
    exit 0: neither the probe nor the trial may take it for a linker that works."""
    if not shutil.which("ld.lld") or "clang" in subprocess.run(["c++", "--version"], capture_output=True,
                                                                text=True).stdout:
        pytest.skip("needs lld and GCC")
    refused = linkers.try_link("c++", "lld", {"PATH": "/usr/bin:/bin"})
    assert refused["accepted"] is False and "LTO objects" in str(refused["problem"])
    assert linkers.try_link("c++", "bfd", {"PATH": "/usr/bin:/bin"})["accepted"] is True
    for i in range(2):
        (tmp_path / f"u{i}.cpp").write_text(f"int unit{i}(int n) {{ return n * {i}; }}\n")
        subprocess.run(["c++", "-fPIC", "-O2", "-flto", "-fno-fat-lto-objects", "-c", f"u{i}.cpp", "-o", f"u{i}.o"],
                       cwd=tmp_path, check=True)
    command = "/usr/bin/c++ -fPIC -O2 -flto -fno-fat-lto-objects -shared -o libcore.so u0.o u1.o"
    subprocess.run(command, shell=True, cwd=tmp_path, check=True)
    lld = Linker("lld", Path(shutil.which("ld.lld") or "ld.lld"), "14", True)  # as an older probe took it
    seconds = linkers.trial(command, tmp_path, [lld], {"PATH": "/usr/bin:/bin"}, None, "libcore.so", {"bfd": 0.5})
    assert seconds == {"bfd": 0.5}  # its library lacks unit0 and unit1: not the same library, at any speed


def test_linker_answers_of_another_shape_are_dropped_and_asked_again(tmp_path):
    """(issue 29)"""
    import json

    from torchbuild.toolchain import linkers

    cache = tmp_path / "linkers.json"
    for text in ("[]", "null", '{"key": {}}', '{"[\\"x\\"]": 3}', "{not json"):
        cache.write_text(text)
        found = linkers.discover("g++", dict(os.environ), cache)
        assert found and all(isinstance(ln.accepted, bool) and ln.version for ln in found), text
        kept = json.loads(cache.read_text())
        assert isinstance(kept, dict) and all(isinstance(v, dict) for v in kept.values())
        cache.write_text(text)
        assert linkers.cmake_version(tmp_path, dict(os.environ), cache)  # cmake's answer, asked anew
    key = json.dumps(["trial", ["bfd", [1, 2]]])
    cache.write_text(json.dumps({key: {"seconds": {"bfd": "fast", "lld": 0.3}}}))
    assert linkers._seconds(json.loads(cache.read_text())[key]) == {"lld": 0.3}
