"""`--sanitize address|thread|leak` (issue 57): a configuration of its own built with PyTorch's USE_ASAN /
USE_TSAN / USE_LSAN, importable with the compiler's sanitizer runtime preloaded, which `use it` and `inv env.run`
do; ASAN catches the demo's planted out-of-bounds read, which the release configuration lets pass."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from ..conftest import small_demo  # noqa: F401
from ..helpers import UP_TO_DATE, build, env_python, inv

PEEK = "import minitorch._C as c; print(c.peek(1)); c.peek(4)"  # the table has 4 entries: index 4 is past its end


def use_it(done_stderr: str) -> list[str]:
    """The `use it` line's command (its variables and interpreter), without the import."""
    line = next(ln.split("use it: ", 1)[1] for ln in done_stderr.splitlines() if "use it: " in ln)
    return shlex.split(line.split(" -c ")[0])


def run_as_said(words: list[str], code: str, cwd: Path) -> subprocess.CompletedProcess:
    variables = dict(w.split("=", 1) for w in words[:-1])
    return subprocess.run([words[-1], "-c", code], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **variables})


@pytest.mark.slow
def test_an_address_sanitizer_configuration_catches_the_planted_read_and_switches_like_debug(small_demo):  # noqa: F811
    """The setup.py era here; the scikit-build-core era in the heavy tier (tests/heavy/test_main_era.py)."""
    address_sanitizer_round_trip(small_demo)


def address_sanitizer_round_trip(co: Path) -> None:
    done = build(co, "--cuda", "none", "--sanitize", "address")
    assert "py3.11-cpu-release-asan" in done.stderr, done.stderr
    words = use_it(done.stderr)
    assert words[0].startswith("LD_PRELOAD=/") and words[0].endswith("libasan.so") and "ASAN_OPTIONS=detect_leaks=0" \
        in words
    caught = run_as_said(words, PEEK, co.parent)
    assert caught.stdout.strip() == "2" and caught.returncode != 0, caught.stderr[-2000:]
    assert "AddressSanitizer: global-buffer-overflow" in caught.stderr
    ran = inv("env.run", "py3.11", "--", str(env_python()), "-c", PEEK,  # the shell's CXX is not the one it was
              env={"TORCHBUILD_SOURCE_PATH": str(co), "CXX": "/nonexistent/clang++"})  # built with (issue 68)
    assert ran.returncode != 0 and "AddressSanitizer: global-buffer-overflow" in ran.output
    assert "py3.11-cpu-release-asan is this env's build of the checkout: LD_PRELOAD=" in ran.output

    build(co, "--cuda", "none")  # the release configuration: its own tree, no sanitizer, the read goes unseen
    plain = subprocess.run([str(env_python()), "-c", PEEK], cwd=co.parent, capture_output=True, text=True)
    assert plain.returncode == 0 and "AddressSanitizer" not in plain.stderr
    back = build(co, "--cuda", "none", "--sanitize", "address")
    assert UP_TO_DATE in back.stderr and "restored the" in back.stderr  # switched back: nothing compiled


@pytest.mark.slow
def test_sanitize_refuses_what_cannot_be_built_with_one_line(small_demo):  # noqa: F811
    tsan = build(small_demo, "--cuda", "13.0", "--sanitize", "thread", check=False)
    assert tsan.returncode == 1 and "turns CUDA off under USE_TSAN" in tsan.stderr and "add --cuda none" in tsan.stderr
    bad = build(small_demo, "--cuda", "none", "--sanitize", "memory", check=False)
    assert bad.returncode == 1 and "--sanitize takes address, thread or leak, got 'memory'" in bad.stderr
    assert not (small_demo / "build").exists() and "Traceback" not in bad.output + tsan.output


def test_sanitize_where_the_cmake_never_acts_on_the_variable_is_refused_not_a_plain_build(small_demo):  # noqa: F811
    """Issue 69 item 5: `--sanitize address` where the project's CMake names USE_ASAN but never puts a sanitizer flag
    on a compile (PyTorch's driver files over a stand-in project: they forward it, as a cache string): the build
    said ✓ and printed a libasan preload for a plain build."""
    cmake = small_demo / "CMakeLists.txt"
    text = cmake.read_text()
    assert "    add_compile_options(${_san} -fno-omit-frame-pointer)\n" in text
    cmake.write_text(text.replace("    add_compile_options(${_san} -fno-omit-frame-pointer)\n", ""))
    done = build(small_demo, "--cuda", "none", "--sanitize", "address", check=False)
    assert done.returncode == 1 and "Traceback" not in done.output, done.output
    assert "--sanitize address: no unit of" in done.stderr and "does not read USE_ASAN" in done.stderr
    assert "LD_PRELOAD" not in done.stderr and "use it:" not in done.stderr and "✓ build" not in done.stderr
    cmake.write_text(text)
    assert "use it: LD_PRELOAD=" in build(small_demo, "--cuda", "none", "--sanitize", "address").stderr
