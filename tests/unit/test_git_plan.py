"""Pure git helpers and the per-level plan: no processes."""

from __future__ import annotations

from torchbuild.git.core import resolve_url, rewrite, same_url
from torchbuild.git.mirror import mirror_name
from torchbuild.git.submodules import Entry, State, plan_level

E = Entry("fbgemm", "third_party/fbgemm", "https://github.com/pytorch/fbgemm.git", "a" * 40)


def test_rewrite_uses_the_longest_prefix():
    rules = {"https://github.com/": "https://m.example/gh/", "https://github.com/pytorch/": "/srv/pt/"}
    assert rewrite("https://github.com/pytorch/cpuinfo.git", rules) == ("/srv/pt/cpuinfo.git", "https://github.com/pytorch/")
    assert rewrite("https://github.com/google/benchmark.git", rules)[0] == "https://m.example/gh/google/benchmark.git"
    assert rewrite("https://gitlab.com/x.git", rules) == ("https://gitlab.com/x.git", None)


def test_relative_submodule_urls_resolve_against_the_parent():
    assert resolve_url("https://github.com/pytorch/pytorch.git", "../cpuinfo.git") == "https://github.com/pytorch/cpuinfo.git"
    assert resolve_url("/srv/up/pytorch", "./sub") == "/srv/up/pytorch/sub"
    assert resolve_url("/srv/up/pytorch", "https://x/y") == "https://x/y"


def test_same_url_ignores_dot_git_and_slash():
    assert same_url("https://github.com/pytorch/pytorch.git", "https://github.com/pytorch/pytorch/")
    assert not same_url("https://github.com/pytorch/pytorch", "https://github.com/pytorch/vision")


def test_mirror_names_are_readable_and_distinct():
    a = mirror_name("https://github.com/pytorch/fbgemm.git")
    assert a.startswith("pytorch_fbgemm-") and a.endswith(".git")
    assert a != mirror_name("https://gitlab.com/pytorch/fbgemm.git")


def test_plan_at_recorded_commit_does_nothing():
    (a,) = plan_level([State(E, E.url, E.recorded, dirty=("x",))])
    assert not a.update and not a.sync_url and a.skip is None and a.descend


def test_plan_updates_uninitialised_and_behind():
    new, behind = plan_level([State(E, None, None), State(E, E.url, "b" * 40)])
    assert new.update and new.previous is None
    assert behind.update and behind.previous == "b" * 40


def test_plan_never_touches_work():
    dirty, local, blocked = plan_level([
        State(E, E.url, "b" * 40, dirty=("src/a.cc",)),
        State(E, E.url, "b" * 40, local_commits=2),
        State(E, None, None, blocked="third_party/fbgemm holds files but no checkout; move them away"),
    ])
    assert dirty.skip == "uncommitted changes (src/a.cc)" and not dirty.update and not dirty.descend
    assert local.skip and "2 local commit(s)" in local.skip and not local.update
    assert blocked.skip and not blocked.update


def test_plan_syncs_a_changed_url():
    (a,) = plan_level([State(E, "https://old.example/fbgemm.git", E.recorded)])
    assert a.sync_url and a.previous_url == "https://old.example/fbgemm.git" and not a.update
