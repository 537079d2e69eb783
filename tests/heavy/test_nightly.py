"""`inv nightly`: Python-only development over a prebuilt wheel served as a nightly, offline. All of it is in the
heavy tier (`nox -s heavy`, and CI after README's test command): its index (the `served` fixture) builds the demo's
wheel first, 38 s.

The demo's wheel is built by torchbuild at a known upstream commit and served from a local index over
http on loopback; the checkout is cloned afresh and `inv nightly` runs with no compiler on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ..helpers import FIRST, NEWER, git, inv, served_clone

pytestmark = pytest.mark.slow


def no_compiler_path(tmp: Path) -> str:
    """A PATH with git and nothing that compiles (no cc, c++, cmake, ninja, nvcc)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    os.symlink(shutil.which("git"), bin_dir / "git")
    return str(bin_dir)


def test_nightly_gives_an_importable_checkout_without_compiling(served, tmp_path, monkeypatch):
    co = served_clone(served, tmp_path, monkeypatch)
    assert git(co, "rev-parse", "HEAD") == served["c4"]
    git(co, "checkout", "-q", "-B", "work", served["c3"])  # a checkout the newest nightly is ahead of
    bare = {"PATH": no_compiler_path(tmp_path)}
    planned = inv("nightly", "--path", str(co), "--cuda", "none", "--dry-run", env=bare, check=True)
    assert "nothing asked of the index, downloaded, made or placed" in planned.output
    assert not (co / "minitorch" / "lib").exists() and "index:" in planned.stdout
    done = inv("nightly", "--path", str(co), "--cuda", "none", env=bare, check=True)
    assert f"minitorch-{FIRST}-" in done.output  # C4's nightly is not in the checkout's history
    assert "2 commit(s) ahead" in done.output and served["unit"] in done.output  # C3's C++ is not in the binaries
    assert "nothing compiled" in done.output
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    env_py = Path(served["env"]["TORCHBUILD_PATHS_ENVS"]) / f"nightly-py{minor}-cpu" / "bin" / "python"
    code = "import minitorch as m; print(m.__file__, m.checksum(), m.__version__, m.FROM_C2)"
    out = subprocess.run([str(env_py), "-c", code], cwd=tmp_path, capture_output=True, text=True, env=bare)
    assert out.returncode == 0, out.stderr
    where, checksum, version, c2 = out.stdout.split(maxsplit=3)
    assert where.startswith(str(co)) and checksum == "132875" and version == FIRST and c2.strip() == "python change"
    assert not (co / "build" / "CMakeCache.txt").exists()  # nothing was configured, let alone compiled
    assert git(co, "status", "--porcelain") == ""  # the placed files are the ones git ignores

    init = co / "minitorch" / "__init__.py"
    init.write_text(init.read_text() + "\nEDITED = 'at the next import'\n")
    out = subprocess.run([str(env_py), "-c", "import minitorch; print(minitorch.EDITED)"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.stdout.strip() == "at the next import", out.stderr
    git(co, "checkout", "-q", "--", "minitorch/__init__.py")

    again = inv("nightly", "--path", str(co), "--cuda", "none", env=bare, check=True)
    assert "already in place" in again.output

    # a build switches away from the nightly's files, and the nightly comes back by rename
    inv("build", "--path", str(co), "--cuda", "none", check=True, timeout=600)
    back = inv("nightly", "--path", str(co), "--cuda", "none", env=bare, check=True)
    assert "restored the" in back.output and "already in place" in back.output
    out = subprocess.run([str(env_py), "-c", "import minitorch; print(minitorch.__version__)"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.stdout.strip() == FIRST, out.stderr


def test_no_matching_nightly_is_one_line_naming_the_index(served, tmp_path, monkeypatch):
    for key, value in served["env"].items():
        monkeypatch.setenv(key, value)
    url = served["url"] + "elsewhere/"
    monkeypatch.setenv("TORCHBUILD_NIGHTLY_INDEX_URL", url)
    co = tmp_path / "co"
    inv("clone", "--url", served["up"].url("pytorch"), "--path", str(co), check=True)
    done = inv("nightly", "--path", str(co), "--cuda", "none", check=False)
    errors = [ln for ln in done.output.splitlines() if "error" in ln.lower()]
    assert len(errors) == 1 and url in errors[0] and "Traceback" not in done.output, done.output
    assert not (co / "build").exists()  # nothing was placed


def test_checkout_starts_a_branch_at_the_newest_nightly_and_refuses_a_dirty_tree(served, tmp_path, monkeypatch):
    for key, value in served["env"].items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TORCHBUILD_NIGHTLY_INDEX_URL", served["url"])
    co = tmp_path / "co"
    inv("clone", "--url", served["up"].url("pytorch"), "--path", str(co), "--ref", served["c1"], check=True)
    (co / "setup.py").write_text((co / "setup.py").read_text() + "\n# local work\n")
    refused = inv("nightly", "--path", str(co), "--cuda", "none", "--checkout", "mine", check=False)
    assert "clean working tree" in refused.output and "setup.py" in refused.output
    assert git(co, "branch", "--list", "mine") == "" and "# local work" in (co / "setup.py").read_text()
    git(co, "checkout", "-q", "--", "setup.py")
    inv("nightly", "--path", str(co), "--cuda", "none", "--checkout", "mine", check=True)
    assert git(co, "rev-parse", "--abbrev-ref", "HEAD") == "mine"
    assert git(co, "rev-parse", "HEAD") == served["c4"]
    version = (co / "minitorch" / "version.py").read_text()
    assert NEWER in version and served["c4"] in version


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
