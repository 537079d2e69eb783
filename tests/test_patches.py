"""`inv patch.*`: a series applied on top of the checkout and its submodules, atomically and idempotently."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from torchbuild.errors import TorchbuildError
from torchbuild.patches import parse_series, to_mbox, touched_files

from .conftest import git, inv, tree_state

ASMJIT = "third_party/fbgemm/third_party/asmjit"


def make_patch(tmp: Path, source: Path, out: Path, files: dict[str, str], message: str, plain: bool = False) -> str:
    """Commit `files` in a scratch clone of `source` and write the patch into `out`; return its name."""
    scratch = tmp / f"scratch-{len(list(tmp.glob('scratch-*')))}"
    git(tmp, "clone", "-q", str(source), str(scratch))
    for rel, text in files.items():
        (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
        (scratch / rel).write_text(text)
    git(scratch, "add", "-A")
    git(scratch, "commit", "-qm", message)
    out.mkdir(parents=True, exist_ok=True)
    number = len(list(out.glob("*.patch"))) + 1
    name = f"{number:04d}-{message.replace(' ', '-')}.patch"
    if plain:
        (out / name).write_text(git(scratch, "diff", "HEAD~1", "HEAD") + "\n")
    else:
        (out / name).write_text(git(scratch, "format-patch", "-1", "--stdout") + "\n")
    return name


@pytest.fixture
def checkout(upstream, tmp_path):
    dest = tmp_path / "co"
    inv("clone", "--url", upstream.url("pytorch"), "--path", str(dest), check=True)
    return dest


@pytest.fixture
def series(upstream, checkout, tmp_path):
    """Three patches: the checkout (mbox), the checkout (plain diff), the depth-2 submodule (mbox)."""
    out = tmp_path / "patches"
    a = make_patch(tmp_path, checkout, out, {"version.txt": "2.11.0a0+patched\n"}, "bump version")
    b = make_patch(tmp_path, checkout, out, {"torch/extra.py": "X = 1\n"}, "add extra", plain=True)
    c = make_patch(tmp_path, checkout / ASMJIT, out, {"LICENSE": "asmjit: patched\n"}, "asmjit fix")
    (out / "series").write_text(f"# local fixes\n{a}\n{b}  # plain diff\n\n{ASMJIT}: {c}\n")
    return out


def patch(task: str, checkout: Path, series: Path, *extra: str, check: bool | None = None):
    return inv(f"patch.{task}", "--path", str(checkout), "--patches", str(series), *extra, check=check)


def test_series_parser():
    entries = parse_series("# c\n0001-a.patch\n\nthird_party/x: 0002-b.patch  # note\n")
    found = [(e.target, e.name, e.line) for e in entries]
    assert found == [("", "0001-a.patch", 2), ("third_party/x", "0002-b.patch", 4)]
    with pytest.raises(TorchbuildError, match="series:1: cannot read"):
        parse_series("a b c\n")
    with pytest.raises(TorchbuildError, match=r"series:2: the line holds an invisible character \(U\+FEFF\)"):
        parse_series("0001-a.patch\n\ufeff0002-b.patch\n")  # a byte-order mark the message shows
    assert touched_files("diff --git a/x/y.c b/x/y.c\n--- a/x/y.c\n+++ b/x/y.c\n") == ["x/y.c"]
    assert to_mbox("diff --git a/f b/f\n", "0002-fix-the-thing.patch").count("Subject: [PATCH] fix the thing") == 1


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
    import sys
    import time

    from torchbuild.locks import checkout_lock

    from .conftest import REPO

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
