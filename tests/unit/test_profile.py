"""The build profile: where a build's time went, as a table, in the record, as a Chrome trace and a timeline."""

from __future__ import annotations

import pytest

from torchbuild.builder import profile


def test_ninja_log_runs_are_anchored_and_steps_told_apart(tmp_path):
    log = tmp_path / ".ninja_log"
    base = 1_800_000_000 * 10**9
    log.write_text("# ninja log v7\n"
                   f"0\t500\t{base}\tCMakeFiles/c10.dir/a.cpp.o\th\n"
                   f"10\t400\t{base}\tCMakeFiles/c10.dir/b.cpp.o\th\n"
                   f"500\t900\t{base}\tlibc10.so\th\n"
                   f"900\t950\t{base}\tCMakeFiles/gen_torch_version\th\n"
                   f"0\t20\t{base + 5 * 10**9}\tCMakeFiles/install.util\th\n")  # a second ninja run, 5 s later
    steps = profile.ninja_steps(log, 0)
    assert [s.kind for s in steps] == ["compile", "compile", "link", "codegen", "codegen"]
    assert steps[0].start == pytest.approx(1_800_000_000.0) and steps[2].seconds == pytest.approx(0.4)
    assert steps[4].start == pytest.approx(1_800_000_005.0)  # its own run's clock
    assert profile.lanes(steps[:3]) == [0, 1, 0]  # b starts while a runs; the link after a
    assert profile.ninja_steps(log, log.stat().st_size) == []  # only what this build appended


def test_a_log_ninja_compacted_during_the_build_keeps_only_this_builds_steps(tmp_path):
    log = tmp_path / ".ninja_log"
    base = 1_800_000_000 * 10**9
    log.write_text("# ninja log v7\n"
                   f"0\t500\t{base - 3600 * 10**9}\tCMakeFiles/c10.dir/old.cpp.o\th\n"  # an hour before, kept
                   f"0\t300\t{base}\tCMakeFiles/c10.dir/new.cpp.o\th\n")
    steps = profile.ninja_steps(log, 10_000, since=1_800_000_000 - 0.2)  # the offset is past the rewritten end
    assert [s.output for s in steps] == ["CMakeFiles/c10.dir/new.cpp.o"]


def test_pip_installing_the_builds_dependencies_is_not_packaging():
    """Issue 58, item 5: a first build's "Successfully installed cmake ..." before anything is built was labelled
    packaging; the wheel's own install after the build still is."""
    timeline = profile.Timeline()
    for line in ["Successfully installed cmake-3.31.6 ninja-1.13.0", "Successfully installed packaging-25.0",
                 "-- The CXX compiler identification is GNU 12.2.0", "[1/3] Building CXX object a.o",
                 "Successfully installed minitorch-2.11.0a0"]:
        timeline.feed(line)
    assert [phase for _, phase in timeline.marks] == ["build dependencies", "configure", "compile and link",
                                                      "packaging"]


def test_compiling_begins_when_cmake_has_written_the_build_files():
    """Issue 58 item 5 (correctionlib): ninja prints a step's line when it ends, and a build that reads no ninja
    log (scikit-build-core's in pip's temporary folder) had its first compile, 37 s, counted into configure.
    CMake's last configure line ends configure; the ninja lines after it stay in the same phase."""
    from torchbuild.builder import profile

    timeline = profile.Timeline()
    for line in ["-- Configuring done (2.1s)", "-- Generating done (0.1s)",
                 "-- Build files have been written to: /tmp/x/build", "[1/3] Building CXX object a.o",
                 "[2/3] Building CXX object b.o", "-- Installing: /tmp/x/lib/a.so"]:
        timeline.feed(line)
    assert [phase for _, phase in timeline.marks] == ["configure", "compile and link", "install"]
