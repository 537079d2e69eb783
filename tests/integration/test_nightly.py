"""`inv nightly`: Python-only development over a prebuilt wheel served as a nightly, offline.

The demo's wheel is built by torchbuild at a known upstream commit and served from a local index over
http on loopback; the checkout is cloned afresh and `inv nightly` runs with no compiler on PATH."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from ..helpers import FIRST, git, inv, served_clone

pytestmark = pytest.mark.slow


def altered(wheel: Path, dest: Path, change) -> Path:
    """A copy of `wheel` in `dest` (a folder of the index) with `change(zipfile_out, info, data)` deciding
    what each member becomes; returns the copy."""
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            change(dst, info, src.read(info))
    return out


def test_a_hostile_or_broken_nightly_is_refused_before_anything_is_written(served, tmp_path, monkeypatch):
    for key, value in served["env"].items():
        monkeypatch.setenv(key, value)
    (first,) = (served["root"] / "index" / "minitorch").glob(f"minitorch-{FIRST}-*.whl")
    index = served["root"] / "index"

    def climbing(dst, info, data):
        dst.writestr(info, data)
        if info.filename.endswith("version.py"):
            dst.writestr("minitorch/lib/../../../outside/evil.so", b"\x7fELF evil")

    def linked(dst, info, data):
        dst.writestr(info, data)
        if info.filename.endswith("version.py"):
            link = zipfile.ZipInfo("minitorch/lib/libevil.so")
            link.external_attr = (0o120777 << 16)
            dst.writestr(link, "../../../../etc/passwd")

    def unparsable(dst, info, data):
        dst.writestr(info, b"git_version = '\n" if info.filename.endswith("minitorch/version.py") else data)

    monkeypatch.setenv("TORCHBUILD_PATHS_CACHE_DIR", str(tmp_path / "cache"))  # no good wheel kept yet
    co = tmp_path / "co"
    inv("clone", "--url", served["up"].url("pytorch"), "--path", str(co), check=True)
    cache = tmp_path / "cache" / "nightly"
    cases = {"climbing": (climbing, "minitorch/lib/../../../outside/evil.so (a path that climbs out"),
             "linked": (linked, "minitorch/lib/libevil.so (a symbolic link)"),
             "unparsable": (unparsable, "minitorch/version.py does not parse")}
    for name, (change, message) in cases.items():
        altered(first, index / name / "minitorch", change)
        monkeypatch.setenv("TORCHBUILD_NIGHTLY_INDEX_URL", served["url"] + f"{name}/")
        done = inv("nightly", "--path", str(co), "--cuda", "none", check=False)
        assert done.returncode != 0 and "Traceback" not in done.output, done.output
        assert message in done.stderr and first.name in done.stderr, done.output
        assert not (tmp_path / "outside").exists() and not (co.parent.parent / "outside").exists()
        assert not (co / "minitorch" / "lib").exists() and not (co / "minitorch" / "version.py").exists()
        assert not any(cache.glob(f"minitorch-{FIRST}-*/*.whl"))  # never kept: the good index works next

    monkeypatch.setenv("TORCHBUILD_NIGHTLY_INDEX_URL", served["url"])

    # the user's own files where the nightly's go (git ignores them, no build of torchbuild's made them)
    notes = co / "minitorch" / "include" / "c10" / "core.h"
    notes.parent.mkdir(parents=True)
    notes.write_text("// my notes\n")
    by_hand = co / "minitorch" / "lib" / "libtorch.so"
    by_hand.parent.mkdir(parents=True)
    by_hand.write_bytes(b"from my own setup.py develop")
    done = inv("nightly", "--path", str(co), "--cuda", "none", check=True)
    assert "moved, not overwritten, to" in done.stderr
    kept = next((co / ".torchbuild" / "kept").iterdir())
    assert (kept / "minitorch/include/c10/core.h").read_text() == "// my notes\n"
    assert (kept / "minitorch/lib/libtorch.so").read_bytes() == b"from my own setup.py develop"
    assert notes.read_text() != "// my notes\n" and by_hand.read_bytes() != b"from my own setup.py develop"
    assert git(co, "status", "--porcelain") == ""

    # members outside the package's folder (issue 54): never written, though the checkout has those folders
    def beside(dst, info, data):
        dst.writestr(info, data)
        if info.filename.endswith("version.py"):
            for name in (".git/hooks/pre-commit", "c10/core/evil.cpp", "tools/evil.py"):
                member = zipfile.ZipInfo(name)
                member.external_attr = 0o755 << 16
                dst.writestr(member, b"#!/bin/sh\necho evil\n")

    altered(first, index / "beside" / "minitorch", beside)
    monkeypatch.setenv("TORCHBUILD_NIGHTLY_INDEX_URL", served["url"] + "beside/")
    monkeypatch.setenv("TORCHBUILD_PATHS_CACHE_DIR", str(tmp_path / "cache-beside"))  # this wheel, not the kept one
    inv("nightly", "--path", str(co), "--cuda", "none", check=True)
    (taken,) = (tmp_path / "cache-beside" / "nightly").rglob("*.whl")
    assert "tools/evil.py" in zipfile.ZipFile(taken).namelist()
    assert (co / "minitorch" / "version.py").exists()  # the package's own files are placed
    for name in (".git/hooks/pre-commit", "c10/core/evil.cpp", "tools/evil.py"):
        assert not (co / name).exists(), name
    assert git(co, "status", "--porcelain") == ""


def test_a_lib_folder_linked_outside_is_never_written_through(served, tmp_path, monkeypatch):
    co = served_clone(served, tmp_path, monkeypatch)
    elsewhere = tmp_path / "disk2"
    elsewhere.mkdir()
    (co / "minitorch" / "lib").symlink_to(elsewhere)
    done = inv("nightly", "--path", str(co), "--cuda", "none", check=False)
    assert done.returncode != 0 and "Traceback" not in done.output
    assert "minitorch/lib is a link to" in done.stderr and "nothing was placed" in done.stderr
    assert not any(elsewhere.iterdir()) and not list((co / "minitorch").glob("_C*.so"))


def test_checkout_names_what_git_says_of_a_branch_name(served, tmp_path, monkeypatch):
    co = served_clone(served, tmp_path, monkeypatch)
    done = inv("nightly", "--path", str(co), "--cuda", "none", "--checkout", "@{-1}", check=False)
    assert done.returncode != 0 and "Traceback" not in done.output
    assert "'@{-1}' is not a valid branch name" in done.stderr
