"""The heavy tier's scenarios of tests/integration/test_shortcut.py's area, half a minute or more each (`nox -s heavy`,
and CI after README's test command): what only setup py reads goes the whole way and a commit of ninja inputs does
not."""

from __future__ import annotations

from ..helpers import SHORTCUT, build, edit, git, last_log, run_python


def test_what_only_setup_py_reads_goes_the_whole_way_and_a_commit_of_ninja_inputs_does_not(small_demo):  # noqa: F811
    build(small_demo, "--cuda", "none")
    edit(small_demo / "minitorch/csrc/stub.c", "#include <Python.h>", "#include <Python.h>\n/* edited */")
    edit(small_demo / "c10/core/unit_02.cpp", "(n / 2)", "(n / 5)")
    done = build(small_demo, "--cuda", "none")
    assert "the whole way through setup.py: minitorch/csrc/stub.c changed and ninja does not build from it" \
        in done.stderr
    assert "build_ext" in last_log(small_demo)
    edit(small_demo / "c10/core/unit_02.cpp", "(n / 5)", "(n / 7)")
    assert SHORTCUT in build(small_demo, "--cuda", "none").stderr  # stub.c is unchanged since that build
    versions = "import importlib.metadata as m, minitorch.version as v; print(v.git_version, m.version('minitorch'))"
    for subject, new in (("loop", None), ("loop again", "(n / 8)")):
        if new:
            edit(small_demo / "c10/core/unit_02.cpp", "(n / 7)", new)
        git(small_demo, "commit", "-qam", subject)  # what was built, committed; then an edit, committed
        assert "another commit: the" in build(small_demo, "--cuda", "none", "--explain").stdout  # as it will build
        again = build(small_demo, "--cuda", "none")  # version.py names the commit: the build writes it anew
        assert SHORTCUT in again.stderr and "a build of another commit" in again.stderr
        head = git(small_demo, "rev-parse", "HEAD").strip()  # pip's record says that commit's version too
        assert run_python(versions, small_demo.parent) == f"{head} 2.11.0a0+git{head[:7]}"
    edit(small_demo / "tools/setup_helpers/env.py", "", "# edited\n")
    git(small_demo, "commit", "-qam", "setup.py's helpers")
    assert "the whole way through setup.py: tools/setup_helpers/env.py changed and ninja does not build from it" \
        in build(small_demo, "--cuda", "none").stderr
    edit(small_demo / "c10/core/unit_02.cpp", "(n / 8)", "(n / 9)")
    assert SHORTCUT not in build(small_demo, "--cuda", "none", "--rerun").stderr  # --rerun: the whole way
