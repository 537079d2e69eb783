"""`inv env.*`: managed build environments, made for real with venv and uv (conda via a stub)."""

from __future__ import annotations

import json

from torchbuild.envs import PINS, requirements
from torchbuild.envs.copies import local_installs


def test_requirements_take_the_checkout_and_pin_old_pythons(tmp_path):
    assert "numpy==1.19.5" in requirements(None, "3.6.15") and "dataclasses" in requirements(None, "3.6.15")
    assert "numpy" in requirements(None, "3.12.1") and "dataclasses" not in requirements(None, "3.12.1")
    assert "packaging" in requirements(None, "3.12.1") and "packaging<22" in requirements(None, "3.6.15")
    (tmp_path / "requirements-build.txt").write_text("# comment\nsetuptools>=70.1\nnumpy\n-r other.txt\n")
    assert requirements(tmp_path, "3.12.1") == ["numpy", "setuptools>=70.1"]
    assert requirements(tmp_path, "3.6.15") == ["dataclasses", "numpy==1.19.5", "setuptools>=70.1"]
    (tmp_path / "torch").mkdir()
    assert "mkl-static" in requirements(tmp_path, "3.12.1", machine="x86_64")
    assert "mkl-static" not in requirements(tmp_path, "3.12.1", machine="aarch64")
    assert "mkl-static" not in requirements(tmp_path, "3.12.1", machine="x86_64", mkl=False)
    assert PINS["3.6"]["pip"] == "pip<22"


def test_a_copy_leaves_out_what_was_installed_from_urls_files_and_folders_and_an_egg_link_is_not_copied(tmp_path):
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    mine, theirs = site / "mine-1.0.dist-info", site / "numpy-2.0.dist-info"
    for info in (mine, theirs):
        info.mkdir(parents=True)
    (site / "mine").mkdir()
    (site / "mine" / "_C.so").write_bytes(b"\x7fELF")
    (site / "_mine_editable.py").write_text("")
    (mine / "direct_url.json").write_text(json.dumps({"url": "file:///co", "dir_info": {"editable": True}}))
    (mine / "RECORD").write_text("mine/_C.so,,\n_mine_editable.py,,\nmine-1.0.dist-info/RECORD,,\n"
                                 "../../../../outside.txt,,\n")
    (theirs / "RECORD").write_text("numpy/__init__.py,,\n")
    wheel = site / "other-2.0.dist-info"  # installed from a wheel file: PEP 610's archive_info
    wheel.mkdir()
    (wheel / "direct_url.json").write_text(json.dumps({"url": "file:///dist/other-2.0.whl", "archive_info": {}}))
    (wheel / "RECORD").write_text("other.py,,\n")
    (site / "mine" / "lib").mkdir()
    (site / "mine" / "lib" / "installed_by_cmake.so").write_bytes(b"")  # beside pip's record: its folder goes
    found = {p.relative_to(site.resolve()).as_posix() if p.is_relative_to(site.resolve()) else str(p)
             for p in local_installs(tmp_path / "env")}
    assert found == {"mine/_C.so", "_mine_editable.py", "mine-1.0.dist-info/RECORD", "mine-1.0.dist-info", "mine",
                     "other.py", "other-2.0.dist-info"}
    (site / "mine.egg-link").write_text("/co\n.\n")  # a path entry no RECORD names: no copy
    assert local_installs(tmp_path / "env") is None


def test_a_nightly_places_only_the_files_git_ignores(tmp_path):
    """Issue 68 finding 8: a nightly placed non-.py files that git does not ignore (a source folder's data file in
    the wheel) into the checkout, where `git status` then listed them."""
    import subprocess
    import zipfile

    from torchbuild.nightly.place import place

    co = tmp_path / "co"
    (co / "pkg" / "data").mkdir(parents=True)
    (co / "pkg" / "__init__.py").write_text("")
    (co / ".gitignore").write_text("/pkg/lib/\n/pkg/version.py\n")
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "co"]):
        subprocess.run(["git", *args], cwd=co, check=True, capture_output=True)
    wheel = tmp_path / "pkg-1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name in ("pkg/__init__.py", "pkg/lib/libc10.so", "pkg/version.py", "pkg/data/schema.json",
                     "pkg/removed_since.py"):
            zf.writestr(name, f"{name}\n")
    placed = place(co, wheel, tmp_path / "aside", "pkg")
    assert sorted(placed.files) == ["pkg/lib/libc10.so", "pkg/version.py"]
    assert not (co / "pkg" / "data" / "schema.json").exists() and not (co / "pkg" / "removed_since.py").exists()
    assert subprocess.run(["git", "status", "--porcelain"], cwd=co, capture_output=True, text=True).stdout == ""
