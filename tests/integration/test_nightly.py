"""`inv nightly`: Python-only development over a prebuilt wheel served as a nightly, offline.

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

from torchbuild.demo import make_upstream

from ..helpers import free_port, git, inv, wait_for_port

pytestmark = pytest.mark.slow


FIRST = "0.1.0.dev20261201"


NEWER = "0.1.0.dev20261203"


def repack(wheel: Path, dest: Path, version: str, git_version: str) -> Path:
    """The same wheel as another nightly: its version and the commit it says it was built from."""
    old = wheel.name.split("-")[1]
    out = dest / wheel.name.replace(old, version)
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info)
            name = info.filename.replace(f"-{old}.dist-info", f"-{version}.dist-info")
            if name.endswith(("version.py", "METADATA")):
                text = data.decode().replace(old, version)
                if name.endswith("version.py"):
                    text = "\n".join(f"git_version = '{git_version}'" if ln.startswith("git_version") else ln
                                     for ln in text.splitlines()) + "\n"
                data = text.encode()
            info.filename = name
            dst.writestr(info, data)
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """An upstream whose commit C1 has a nightly (built here), then C2 (a .py change) and C3 (a .cpp
    change) on top, and C4 after those, whose nightly is newer than any checkout at C3; the index on
    loopback serves both wheels."""
    root = tmp_path_factory.mktemp("nightly")
    env = {"TORCHBUILD_PATHS_ENVS": str(root / "envs"), "TORCHBUILD_PATHS_CACHE_DIR": str(root / "cache"),
           "TORCHBUILD_PATHS_LOGS": str(root / "logs"), "TORCHBUILD_BUILD_MIN_FREE_GB": "1",
           "HOME": str(root), "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "T", "GIT_COMMITTER_NAME": "T",
           "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    (root / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        up = make_upstream(root / "upstream", units=4)
        c1 = up.head("pytorch")
        inv("clone", "--url", up.url("pytorch"), "--path", str(root / "at-c1"), check=True)
        inv("build", "--path", str(root / "at-c1"), "--cuda", "none", "--wheel", "--dist", str(root / "dist"),
            "--set", f"PYTORCH_BUILD_VERSION={FIRST}", check=True, timeout=600)
        (wheel,) = (root / "dist").glob("minitorch-*.whl")
        init = (up.repo("pytorch") / "minitorch" / "__init__.py").read_text()
        up.commit("pytorch", {"minitorch/__init__.py": init + "\nFROM_C2 = 'python change'\n"}, "C2: python")
        unit = up.repo("pytorch") / "c10" / "core" / "unit_00.cpp"
        up.commit("pytorch", {str(unit.relative_to(up.repo("pytorch"))): unit.read_text() + "\n// C3\n"},
                  "C3: C++")
        c3 = up.head("pytorch")
        up.commit("pytorch", {"NOTES.md": "C4\n"}, "C4")
        c4 = up.head("pytorch")
        shutil.rmtree(root / "at-c1")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    index = root / "index" / "minitorch"
    index.mkdir(parents=True)
    shutil.copy(wheel, index)
    repack(wheel, index, NEWER, c4)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                              cwd=root / "index", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, server, "the index")
    yield {"root": root, "up": up, "c1": c1, "c3": c3, "c4": c4, "env": env, "unit": unit.name,
           "url": f"http://127.0.0.1:{port}/"}
    server.terminate()
    server.wait()


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


def served_clone(served, tmp_path: Path, monkeypatch) -> Path:
    """A fresh clone of the served upstream, with the index and the module's env in this test's env."""
    for key, value in served["env"].items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TORCHBUILD_NIGHTLY_INDEX_URL", served["url"])
    co = tmp_path / "co"
    inv("clone", "--url", served["up"].url("pytorch"), "--path", str(co), check=True)
    return co


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
