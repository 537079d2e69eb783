"""The progress line, the compile count, and the processes the watchers count (from the lines builds print)."""

from __future__ import annotations

from pathlib import Path

from torchbuild.progress import Tracker, target_name


def test_a_step_is_named_by_what_it_builds_never_by_a_flag():
    assert target_name("Building CXX object c10/CMakeFiles/c10.dir/core/a.cpp.o") == "a.cpp"
    assert target_name("Linking CXX shared library lib/libc10.so") == "libc10.so"
    # cpp_extension's build.ninja prints the bare command, its last word a flag
    assert target_name("c++ -MMD -MF /x/op.o.d -I/inc -c /x/src/op.cpp -o /x/build/op.o -O3 -std=c++20") == "op.cpp"
    assert target_name("g++ -shared /x/build/op.o -o /x/build/lib/_C.so -std=c++20") == "_C.so"


def test_compiles_are_counted_from_ninja_and_from_setuptools_build_ext():
    tracker = Tracker()
    lines = ["[1/3] Building CXX object c10/CMakeFiles/c10.dir/core/a.cpp.o",
             "[2/3] c++ -MMD -MF /x/op.o.d -c /x/src/op.cpp -o /x/build/op.o -std=c++20",
             "[3/3] Linking CXX shared library libc10.so",
             "x86_64-linux-gnu-gcc -fPIC -I/usr/include/python3.11 -c src/main.cpp -o build/temp/src/main.o -std=c++17",
             "g++ -shared build/temp/src/main.o -o build/lib/python_example.so"]
    shown = [tracker.feed(line) for line in lines]
    assert tracker.compiles == 3  # two through ninja, one build_ext ran itself; links are not compiles
    assert shown[1] is not None and shown[1].endswith("op.cpp") and shown[3] == "compiling main.cpp"
    assert shown[4] is None


def test_an_exited_compiler_not_yet_reaped_is_not_counted():
    import subprocess
    import time

    from torchbuild import usage

    child = subprocess.Popen(["true"])  # exits at once; not waited for: a zombie until reaped
    deadline = time.monotonic() + 5
    while Path(f"/proc/{child.pid}/stat").read_text().split(") ", 1)[1][0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert child.pid not in usage.processes()  # `inv matrix`'s "most compilers at once" never counts one
    child.wait()


def test_every_kind_of_error_line_is_still_caught_after_thousands_of_install_lines():
    """Issue 55: each line of CMake's install (9,000 at PyTorch's size) is no longer searched for an error or a
    step, and a line is searched only where one of the error's words is: every kind of error still reads as one."""
    errors = ["a.cpp:3:1: error: expected ';'", "CMake Error at CMakeLists.txt:4 (message):", "FAILED: x.o",
              "a.cpp:1:10: fatal error: b.h: No such file or directory", "x.o: undefined reference to `f'",
              "c++: fatal error: Killed signal terminated program cc1plus", "nvcc fatal   : Unsupported gpu",
              "ninja: build stopped: subcommand failed.", "Error: no such target", "ld: ERROR: bad"]
    for error in errors:
        tracker = Tracker()
        assert [tracker.feed(f"-- Up-to-date: /co/pkg/include/ATen/ops/op_{i}.h") for i in range(3000)] == \
            [None] * 3000
        tracker.feed("[3/9] Building CXX object c10/CMakeFiles/c10.dir/core/a.cpp.o")
        tracker.feed(error)
        assert error in tracker.error_report(), error
    quiet = Tracker()
    for line in ("-- Installing: /co/pkg/include/error_handling.h", "warning: unused variable 'terror'"):
        quiet.feed(line)
    assert quiet.error_context == []
