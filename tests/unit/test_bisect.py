"""`inv bisect` on the demo's history of 64 commits (Python-only, C++, the header every unit includes,
native_functions.yaml, a submodule bump, one that does not build, one regression): it finds the regression
in a worktree of its own, never touching the user's checkout, branch, env or tree."""

from __future__ import annotations

from torchbuild.bisection.ladder import Diff, choose, first_bad, pr_number, rewrite_version, verdict


def test_the_ladder_reuses_binaries_only_across_python_changes_as_pytorch_ci_does():
    built, commit = "a" * 40, "b" * 40
    python = Diff(("torch/nn/modules/linear.py", "test/test_nn.py", "docs/source/nn.rst"))
    assert choose(commit, built, built, python, "torch", maps_files=True).kind == "python"
    for changed, why in [(("torch/csrc/api.py",), "not the package's Python"),  # csrc: compiled in
                         (("third_party/fbgemm",), "not the package's Python"),  # a submodule bump
                         (("aten/src/ATen/native/native_functions.yaml",), "not the package's Python"),
                         (("tools/setup_helpers/cmake.py",), "not the package's Python")]:
        way = choose(commit, built, built, Diff(changed), "torch", maps_files=False)
        assert way.kind == "build" and why in way.why, changed
    gone = Diff(("torch/old.py",), deleted=("torch/old.py",))
    assert choose(commit, built, built, gone, "torch", maps_files=False).kind == "build"
    new = Diff(("torch/new.py",), added=("torch/new.py",))
    assert choose(commit, built, built, new, "torch", maps_files=True).kind == "build"  # a redirect maps files
    assert choose(commit, built, built, new, "torch", maps_files=False).kind == "python"  # the checkout on sys.path
    assert choose(commit, None, None, None, "torch", maps_files=False).kind == "build"
    assert choose(commit, built, commit, None, "torch", maps_files=False).kind == "kept"
    assert choose(commit, commit, commit, None, "torch", maps_files=False).kind == "kept"


def test_a_steps_exit_a_pr_number_and_gits_answer_are_read_as_git_bisect_run_reads_them():
    assert [verdict(c) for c in (0, 1, 125, 127, 128, 255)] == ["good", "bad", "skip", "bad", None, None]
    assert pr_number("Fix the cuDNN path (#123456)") == "123456"
    assert pr_number("[inductor] fuse\n\nPull Request resolved: https://github.com/pytorch/pytorch/pull/98765\n"
                     "Approved by: x") == "98765"
    assert pr_number("no pull request") is None
    sha = "c" * 40
    assert first_bad(f"{sha} is the first bad commit\ncommit {sha}\n") == (sha,)
    skipped = f"There are only 'skip'ped commits left to test.\nThe first bad commit could be any of:\n{sha}\n" \
              f"{'d' * 40}\nWe cannot bisect more!\n"
    assert first_bad(skipped) == (sha, "d" * 40) and first_bad("Bisecting: 3 revisions left") == ()
    text = f"__version__ = '2.15.0a0+git{'a' * 7}'\ngit_version = '{'a' * 40}'\n"
    assert rewrite_version(text, "a" * 40, "b" * 40) == f"__version__ = '2.15.0a0+git{'b' * 7}'\n" \
                                                        f"git_version = '{'b' * 40}'\n"
