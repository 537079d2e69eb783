"""`inv patch.*`: a series applied on top of the checkout and its submodules, atomically and idempotently."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time

import pytest

from ..helpers import git, inv, make_patch, patch, run_torchbuild, tree_state
from ..skbuild import make_skbuild_project


@pytest.fixture
def checkout(upstream, tmp_path):
    dest = tmp_path / "co"
    inv("clone", "--url", upstream.url("pytorch"), "--path", str(dest), check=True)
    return dest


def test_series_entries_that_leave_the_checkout_or_the_patches_folder_are_refused(upstream, checkout, tmp_path):
    """(issue 15)"""
    sibling = tmp_path / "other"
    git(tmp_path, "clone", "-q", upstream.url("pybind11"), str(sibling))
    sibling_head = git(sibling, "rev-parse", "HEAD")
    out = tmp_path / "patches"
    name = make_patch(tmp_path, sibling, out, {"LICENSE": "changed\n"}, "sibling change")
    (tmp_path / "loose.patch").write_text((out / name).read_text())
    escaping = make_patch(tmp_path, checkout, out, {"README.md": "x\n"}, "escape")
    text = (out / escaping).read_text().replace("README.md", "../escaped.txt")
    (out / escaping).write_text(text)
    cases = {
        f"../other: {name}": "'../other' leaves the checkout",
        f"{tmp_path}/other: {name}": "leaves the checkout",
        "../loose.patch": "'../loose.patch' leaves the patches folder",
        f"{tmp_path / 'loose.patch'}": "leaves the patches folder",
        f"third_party/nothere: {name}": "third_party/nothere is not a submodule checkout",
        escaping: "writes outside its repo (../escaped.txt)",
    }
    for line, message in cases.items():
        (out / "series").write_text(line + "\n")
        done = patch("apply", checkout, out, check=False)
        assert done.returncode == 1 and message in done.stderr, (line, done.output)
    assert git(sibling, "rev-parse", "HEAD") == sibling_head
    assert "torchbuild/patches" not in git(sibling, "branch", "-a")
    assert not (tmp_path / "escaped.txt").exists() and git(checkout, "status", "--porcelain") == ""


def test_plain_unified_diff_without_git_headers_applies(checkout, tmp_path):
    """(issue 15)"""
    out = tmp_path / "patches"
    name = make_patch(tmp_path, checkout, out, {"README.md": "# patched by a plain diff\n"}, "plain", plain=True)
    text = "".join(ln for ln in (out / name).read_text().splitlines(keepends=True)
                   if not ln.startswith(("diff --git", "index ")))
    assert text.startswith("--- a/README.md")
    (out / name).write_text(text)
    (out / "series").write_text(name + "\n")
    patch("apply", checkout, out, check=True)
    assert (checkout / "README.md").read_text() == "# patched by a plain diff\n"


def test_a_refused_patch_shows_gits_cause_not_its_advice(checkout, tmp_path):
    """(issue 15)"""
    out = tmp_path / "patches"
    name = make_patch(tmp_path, checkout, out, {"README.md": "one\n"}, "first")
    (checkout / "README.md").write_text("conflicting\n")
    git(checkout, "commit", "-qam", "local change")
    (out / "series").write_text(name + "\n")
    done = patch("apply", checkout, out, check=False)
    assert done.returncode == 1 and "README.md" in done.stderr
    assert "git am --abort" not in done.stderr.split("next:")[0]


ASMJIT = "third_party/fbgemm/third_party/asmjit"


@pytest.fixture
def series(upstream, checkout, tmp_path):
    """Three patches: the checkout (mbox), the checkout (plain diff), the depth-2 submodule (mbox)."""
    out = tmp_path / "patches"
    a = make_patch(tmp_path, checkout, out, {"version.txt": "2.11.0a0+patched\n"}, "bump version")
    b = make_patch(tmp_path, checkout, out, {"torch/extra.py": "X = 1\n"}, "add extra", plain=True)
    c = make_patch(tmp_path, checkout / ASMJIT, out, {"LICENSE": "asmjit: patched\n"}, "asmjit fix")
    (out / "series").write_text(f"# local fixes\n{a}\n{b}  # plain diff\n\n{ASMJIT}: {c}\n")
    return out


def test_apply_series_with_a_nested_submodule_patch(checkout, series):
    done = patch("apply", checkout, series, check=True)
    assert (checkout / "version.txt").read_text() == "2.11.0a0+patched\n"
    assert (checkout / "torch/extra.py").read_text() == "X = 1\n"
    assert (checkout / ASMJIT / "LICENSE").read_text() == "asmjit: patched\n"
    assert git(checkout, "rev-parse", "--abbrev-ref", "HEAD") == "torchbuild/patches"
    assert git(checkout, "log", "--format=%s", "-2").splitlines() == ["add extra", "bump version"]
    assert git(checkout / ASMJIT, "log", "--format=%s", "-1") == "asmjit fix"
    assert git(checkout, "status", "--porcelain", "--untracked-files=no", "--ignore-submodules=all") == ""
    assert "applied 2" in done.stderr
    status = patch("status", checkout, series, check=True).stdout.splitlines()
    assert len(status) == 3 and all(line.endswith("  applied") for line in status)
    # sync treats the patched submodule as at its recorded commit: nothing to do, nothing lost
    synced = inv("sync", "--path", str(checkout), check=True)
    assert "nothing to do" in synced.stderr
    assert (checkout / ASMJIT / "LICENSE").read_text() == "asmjit: patched\n"


def test_second_apply_does_nothing(checkout, series, tmp_path):
    patch("apply", checkout, series, check=True)
    before = tree_state(checkout)
    renamed = tmp_path / "renamed"  # applied is known by patch-id, not by file name
    shutil.copytree(series, renamed)
    for p in renamed.glob("*.patch"):
        p.rename(p.with_name("x-" + p.name))
    (renamed / "series").write_text("\n".join(
        (f"{line.split(': ')[0]}: x-{line.split(': ')[1]}" if ": " in line else f"x-{line.split()[0]}")
        for line in (series / "series").read_text().splitlines() if line.strip() and not line.startswith("#")))
    done = patch("apply", checkout, renamed, check=True)
    assert "all 3 patch(es) already applied: nothing to do" in done.stderr
    assert tree_state(checkout) == before


def test_a_series_adding_a_binary_file_is_recognised_as_applied(checkout, tmp_path):
    """`git format-patch --binary` of a text commit and a commit adding a binary file: applied once, then
    known as applied (status, a second apply, a build's auto-apply), and revert takes both off."""
    scratch = tmp_path / "scratch-bin"
    git(tmp_path, "clone", "-q", str(checkout), str(scratch))
    (scratch / "notes.txt").write_text("text\n")
    git(scratch, "add", "notes.txt")
    git(scratch, "commit", "-qm", "text commit")
    (scratch / "blob.bin").write_bytes(bytes(range(256)) * 8)
    git(scratch, "add", "blob.bin")
    git(scratch, "commit", "-qm", "binary commit")
    out = tmp_path / "bin-patches"
    out.mkdir()
    git(scratch, "format-patch", "--binary", "-q", "-2", "-o", str(out))
    (out / "series").write_text("\n".join(sorted(p.name for p in out.glob("*.patch"))) + "\n")
    patch("apply", checkout, out, check=True)
    assert (checkout / "blob.bin").read_bytes() == bytes(range(256)) * 8
    again = patch("apply", checkout, out, check=True)
    assert "all 2 patch(es) already applied: nothing to do" in again.stderr
    status = patch("status", checkout, out, check=True).stdout
    assert status.count("applied") == 2 and "does not apply" not in status and "not applied" not in status
    patch("revert", checkout, out, check=True)
    assert not (checkout / "blob.bin").exists()


def test_two_applies_at_once_take_turns(checkout, series):
    """The series is applied under the checkout's lock (the one builds take): two `inv patch.apply` started
    while a build holds the checkout both wait, then one applies and the other finds it applied."""
    import subprocess

    from torchbuild.locks import checkout_lock

    from ..helpers import REPO

    args = [sys.executable, "-m", "invoke", "--search-root", str(REPO), "patch.apply", "--path", str(checkout),
            "--patches", str(series)]
    with checkout_lock(checkout, "a build, held by the test"):
        procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        time.sleep(3)
        assert all(p.poll() is None for p in procs)  # both wait for the checkout
    outs = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert all("another torchbuild is building or patching" in out for out in outs)
    assert sum("already applied: nothing to do" in out for out in outs) == 1
    assert git(checkout, "log", "--format=%s", "-2") == "add extra\nbump version"
    assert git(checkout, "log", "--format=%s", "-3").splitlines()[2] != "bump version"  # applied once


def test_conflict_midway_restores_everything(checkout, series, tmp_path):
    # The submodule patch goes first (so a second repo is changed before the failure), then a
    # good patch, then one that conflicts with it.
    names = [line.split("#")[0].strip() for line in (series / "series").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    bad = make_patch(tmp_path, checkout, series, {"version.txt": "something else\n"}, "conflicting bump")
    (series / "series").write_text(f"{names[2]}\n{names[0]}\n{bad}\n{names[1]}\n")
    (checkout / "notes.txt").write_text("untracked work\n")
    (checkout / "README.md").write_text("edited, not committed\n")
    before = tree_state(checkout)
    branches = git(checkout, "branch", "--list"), git(checkout / ASMJIT, "branch", "--list")
    done = patch("apply", checkout, series, check=False)
    assert done.returncode == 1
    assert f"patch {bad} does not apply to co: version.txt (hunk at line 1)" in done.stderr
    assert "git am --3way" in done.stderr and "restored" in done.stderr
    assert tree_state(checkout) == before
    assert (git(checkout, "branch", "--list"), git(checkout / ASMJIT, "branch", "--list")) == branches
    assert git(checkout, "for-each-ref", "refs/torchbuild") == ""
    assert git(checkout / ASMJIT, "for-each-ref", "refs/torchbuild") == ""
    assert (checkout / "notes.txt").read_text() == "untracked work\n"
    assert (checkout / "README.md").read_text() == "edited, not committed\n"
    status = patch("status", checkout, series, check=True).stdout
    assert re.search(rf"{bad}\s+does not apply", status) and re.search(r"0002-add-extra.patch\s+not applied", status)


def test_revert_leaves_no_trace(checkout, series):
    before = tree_state(checkout)
    patch("apply", checkout, series, check=True)
    (checkout / "README.md").write_text("unrelated work\n")
    done = patch("revert", checkout, series, check=True)
    assert "reverted the series in: co, third_party/fbgemm/third_party/asmjit" in done.stderr
    after = tree_state(checkout)
    assert after["."][0] == before["."][0] and after[ASMJIT] == before[ASMJIT]
    assert git(checkout, "rev-parse", "--abbrev-ref", "HEAD") == "main"  # back on the branch it was on
    assert git(checkout, "diff", "--name-only") == "README.md" and git(checkout, "diff", "--cached") == ""
    assert "torchbuild" not in git(checkout, "branch", "--list") + git(checkout, "for-each-ref")
    assert (checkout / "README.md").read_text() == "unrelated work\n"
    assert "nothing to do" in patch("revert", checkout, series, check=True).stderr


def test_revert_refuses_when_work_is_in_the_way(checkout, series):
    patch("apply", checkout, series, check=True)
    (checkout / "version.txt").write_text("my edit\n")
    done = patch("revert", checkout, series, check=False)
    assert done.returncode == 3 and "uncommitted changes in files the patches changed: version.txt" in done.stderr
    assert (checkout / "version.txt").read_text() == "my edit\n"
    assert git(checkout, "rev-parse", "--abbrev-ref", "HEAD") == "torchbuild/patches"


def test_export_round_trip(upstream, checkout, series, tmp_path):
    patch("apply", checkout, series, check=True)
    (checkout / "torch/more.py").write_text("Y = 2\n")
    git(checkout, "add", "torch/more.py")
    git(checkout, "commit", "-qm", "my local change")
    exported = tmp_path / "exported"
    exported.mkdir()
    done = patch("export", checkout, exported, check=True)
    assert "wrote 4 patch(es)" in done.stderr
    lines = [ln for ln in (exported / "series").read_text().splitlines() if not ln.startswith("#")]
    assert lines[-1].startswith(f"{ASMJIT}: 0004-") and lines[2].startswith("0003-my-local-change")
    fresh = tmp_path / "fresh"
    inv("clone", "--url", upstream.url("pytorch"), "--path", str(fresh), check=True)
    patch("apply", fresh, exported, check=True)
    for sub in (".", ASMJIT):
        assert git(fresh / sub, "rev-parse", "HEAD^{tree}") == git(checkout / sub, "rev-parse", "HEAD^{tree}")


@pytest.mark.parametrize("case, message", [
    ("missing", "patch file {dir}/0009-gone.patch does not exist"),
    ("empty", "{dir}/0009-empty.patch is empty"),
    ("garbage", "{dir}/0009-garbage.patch is not a text patch"),
    ("nodiff", "{dir}/0009-nodiff.patch is not a patch (no diff headers)"),
    ("nosub", "third_party/nothere is not a submodule checkout"),
])
def test_bad_series_changes_nothing(checkout, series, case, message):
    lines = (series / "series").read_text()
    if case == "missing":
        lines += "0009-gone.patch\n"
    elif case == "empty":
        (series / "0009-empty.patch").write_text("")
        lines += "0009-empty.patch\n"
    elif case == "garbage":
        (series / "0009-garbage.patch").write_bytes(bytes(range(256)) * 4)
        lines += "0009-garbage.patch\n"
    elif case == "nodiff":
        (series / "0009-nodiff.patch").write_text("just some words\n")
        lines += "0009-nodiff.patch\n"
    else:
        lines += "third_party/nothere: 0001-bump-version.patch\n"
    (series / "series").write_text(lines)
    before = tree_state(checkout)
    done = patch("apply", checkout, series, check=False)
    assert done.returncode == 1
    assert message.format(dir=series) in done.stderr
    assert "Traceback" not in done.output
    assert tree_state(checkout) == before


def test_dirty_files_a_patch_touches_are_refused(checkout, series):
    (checkout / ASMJIT / "LICENSE").write_text("my asmjit edit\n")
    before = tree_state(checkout)
    done = patch("apply", checkout, series, check=False)
    assert done.returncode == 3
    assert f"uncommitted changes in files the patches change: {ASMJIT}/LICENSE" in done.stderr
    assert tree_state(checkout) == before and (checkout / ASMJIT / "LICENSE").read_text() == "my asmjit edit\n"


def test_clone_applies_the_series_when_auto(upstream, series, tmp_path):
    cfg = tmp_path / "tb.yaml"
    cfg.write_text(f"patches:\n  auto: true\n  dir: {series}\n")
    dest = tmp_path / "auto"
    inv("clone", "--url", upstream.url("pytorch"), "--path", str(dest), env={"TORCHBUILD_CONFIG": str(cfg)}, check=True)
    assert (dest / "version.txt").read_text() == "2.11.0a0+patched\n"
    assert (dest / ASMJIT / "LICENSE").read_text() == "asmjit: patched\n"


def test_in_a_checkout_without_config_the_series_lives_in_its_torchbuild_folder(tmp_path):
    """README: with the installed command in a checkout, the patch series is `.torchbuild/patches/` there. (issue 31)"""
    co = make_skbuild_project(tmp_path / "co", units=1)
    module = co / "src/module.cpp"
    module.write_text(module.read_text() + "// patched by the series\n")
    diff = subprocess.run(["git", "diff"], cwd=co, capture_output=True, text=True, check=True).stdout
    subprocess.run(["git", "checkout", "--", "src/module.cpp"], cwd=co, check=True)
    series = co / ".torchbuild/patches"
    series.mkdir(parents=True)
    (series / "0001-mark.patch").write_text(diff)
    (series / "series").write_text("0001-mark.patch\n")
    shown = run_torchbuild("config", cwd=co / "src")
    assert ".torchbuild/patches" in shown.stdout
    applied = run_torchbuild("patch.apply", cwd=co / "src")
    assert applied.returncode == 0, applied.stderr
    assert module.read_text().endswith("// patched by the series\n")
    status = subprocess.run(["git", "status", "--porcelain"], cwd=co, capture_output=True, text=True).stdout
    assert status == ""  # the series' folder is ignored by git: the checkout stays clean
