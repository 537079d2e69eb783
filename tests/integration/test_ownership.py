"""What a configuration owns and when it is up to date, under real conditions (issue 40): a copied checkout,
hostile and damaged records, the user's own files written while a build runs, a source saved while it
compiles, a submodule git status is told to ignore, a lib folder linked to another disk, a kept-trees folder
on another file system. Real git, cmake, ninja and gcc on the demo."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..helpers import (
    REPO,
    UP_TO_DATE,
    build,
    checksum,
    edit,
    env_python,
    inv,
)


@pytest.fixture
def checkout(upstream, tmp_path):
    dest = tmp_path / "co"
    inv("clone", "--url", upstream.url("pytorch"), "--path", str(dest), check=True)
    return dest


def files_under(*roots: Path) -> list[Path]:
    return [p for root in roots if root.exists() for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


@pytest.mark.parametrize("config", ["../..", "..", "/ABS"])
def test_clean_config_must_name_a_tree_torchbuild_made(checkout, tmp_path, config):
    """(issue 15)"""
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    before = sorted(str(p) for p in files_under(checkout) if ".git" not in p.parts)
    done = inv("clean", "--path", str(checkout), "--config", config.replace("/ABS", str(outside)), check=False)
    assert done.returncode != 0 and "Traceback" not in done.output
    assert "is not a configuration name" in done.stderr or "no build tree for configuration" in done.stderr
    assert (outside / "keep.txt").read_text() == "mine"
    assert sorted(str(p) for p in files_under(checkout) if ".git" not in p.parts) == before


@pytest.mark.slow
def test_a_changed_cpath_compiles_again(small_demo, tmp_path):  # noqa: F811
    co = small_demo
    for name, value in (("a", 1), ("b", 2)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "tb_cpath.h").write_text(f"#define TB_VALUE {value}\n")
    edit(co / "c10/core/unit_02.cpp", "long unit_02(long n) { return",
         '#include "tb_cpath.h"\nlong unit_02(long n) { return TB_VALUE +')
    build(co, "--cuda", "none", "--set", f"CPATH={tmp_path / 'a'}")
    first = checksum(co)
    other = build(co, "--cuda", "none", "--set", f"CPATH={tmp_path / 'b'}")
    assert "CPATH changed" in other.stderr and UP_TO_DATE not in other.stderr
    assert int(checksum(co)) == int(first) + 1  # the header CPATH finds now, compiled in
    (co / "version.txt").write_text((co / "version.txt").read_text().replace("a0", "a1"))
    assert "the whole way: version.txt changed since its last complete build" in build(
        co, "--cuda", "none", "--set", f"CPATH={tmp_path / 'b'}").stderr
    # Python imported in place, but setup.py copies it into tools/shared/ at every build, as PyTorch's does
    edit(co / "minitorch/_utils_internal.py", '"WARNING"', '"INFO"')
    copied = build(co, "--cuda", "none", "--set", f"CPATH={tmp_path / 'b'}")
    assert "minitorch/_utils_internal.py changed and setup.py copies it to tools/shared/_utils_internal.py" \
        in copied.stderr
    assert (co / "tools/shared/_utils_internal.py").read_text() == (co / "minitorch/_utils_internal.py").read_text()


@pytest.mark.slow
def test_files_written_during_a_build_and_a_linked_lib_folder_stay_the_users(small_demo, tmp_path):  # noqa: F811
    co = small_demo
    elsewhere = tmp_path / "disk2" / "lib"  # the package's lib/ linked to another disk
    elsewhere.mkdir(parents=True)
    (co / "minitorch" / "lib").symlink_to(elsewhere)
    with open(co / ".git" / "info" / "exclude", "a") as exclude:  # the link is ignored as the folder was
        exclude.write("/notes/\n/mybuild/\n/.venv/\n/minitorch/lib\n")
    proc = subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), "build", "--path", str(co),
                             "--cuda", "none"], stderr=subprocess.PIPE, text=True, stdout=subprocess.DEVNULL)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "; log: " in line:  # the build's command is starting
            break
    mine = {"notes/todo.txt": "call the team\n", ".venv/lib/site.py": "# a venv of the user's\n",
            "mybuild/CMakeCache.txt": f"CMAKE_HOME_DIRECTORY:INTERNAL={co}\n"}
    for name, text in mine.items():
        (co / name).parent.mkdir(parents=True, exist_ok=True)
        (co / name).write_text(text)
    rest = proc.stderr.read()
    assert proc.wait() == 0, rest
    record = json.loads((co / "build" / ".torchbuild.json").read_text())
    assert not set(record["outputs"]) & set(mine) and record["outputs"]
    release = (elsewhere / "libc10.so").read_bytes()
    build(co, "--cuda", "none", "--debug")  # a switch moves the configuration's files, not these
    assert (elsewhere / "libc10.so").read_bytes() != release  # the debug build wrote through the link
    back = build(co, "--cuda", "none")
    assert UP_TO_DATE not in back.stderr  # the linked files are checked though never moved
    assert (elsewhere / "libc10.so").read_bytes() == release and (co / "minitorch" / "lib").is_symlink()
    build(co, "--cuda", "none", "--set", "CMAKE_FRESH=1")  # a fresh configure: not the user's tree
    cleaned = inv("clean", "--path", str(co), "--all", check=True)
    assert {name: (co / name).read_text() for name in mine} == mine
    assert "notes" not in cleaned.stderr and "mybuild" not in cleaned.stderr


def where(checkout: Path) -> str:
    """Where the shared env imports minitorch's extension from."""
    return subprocess.run([str(env_python()), "-c", "import minitorch._C as c; print(c.__file__)"],
                          cwd=checkout.parent.parent, check=True, capture_output=True, text=True).stdout.strip()


def test_a_checkout_whose_path_prefixes_another_is_not_up_to_date_when_the_env_imports_the_other(
        small_demo, tmp_path):  # noqa: F811
    """(issue 29)"""
    fix = tmp_path / "co-fix"  # ~/pytorch and ~/pytorch-fix: one path starts the other
    shutil.copytree(small_demo, fix, symlinks=True)
    build(small_demo, "--cuda", "none")
    build(fix, "--cuda", "none")
    assert where(small_demo).startswith(str(fix / "minitorch") + os.sep)
    again = build(small_demo, "--cuda", "none")
    assert UP_TO_DATE not in again.stderr
    assert where(small_demo).startswith(str(small_demo / "minitorch") + os.sep)
    assert UP_TO_DATE in build(small_demo, "--cuda", "none").stderr


def test_a_copied_checkouts_env_record_is_not_trusted_and_the_copy_gets_its_own(tmp_path):
    """(issue 29)"""
    import sys

    from torchbuild import config, envs
    from torchbuild.toolchain import python

    original, copy = tmp_path / "pt", tmp_path / "pt2"
    creator = python.probe(Path(sys.executable).resolve(), "test")

    def make(project: Path) -> envs.Env:
        cfg = config.load(project, {"HOME": str(tmp_path), "TORCHBUILD_PATHS_ENVS": str(project / ".torchbuild/envs")})
        return envs.create(cfg, creator, "bare", packages=[])

    made = make(original)
    shutil.copytree(original, copy, symlinks=True)  # cp -a pt pt2
    assert envs.read(copy / ".torchbuild/envs/bare") is None
    assert envs.copied_from(copy / ".torchbuild/envs/bare") == made.prefix
    again = make(copy)
    assert again.prefix == copy / ".torchbuild/envs/bare" and again.python == again.prefix / "bin" / "python"
    own = subprocess.run([str(again.python), "-c", "import sys; print(sys.prefix)"], capture_output=True,
                              text=True, check=True).stdout.strip()
    assert Path(own).resolve() == again.prefix.resolve()  # its own interpreter, not the original's
    assert envs.read(original / ".torchbuild/envs/bare") == made  # the original's env is untouched


def test_a_stray_package_folder_in_site_packages_is_named_not_built_over(small_demo):  # noqa: F811
    """A folder of the package's name in the env's site-packages that no install records (left by a build by hand,
    or a failed one) is what Python imports before the checkout's editable install: the build refuses, naming
    it, instead of reporting a success that does not import; the folder is left where it is."""
    build(small_demo, "--cuda", "none")
    site = next(env_python().parent.parent.glob("lib/python*/site-packages"))
    stray = site / "minitorch"
    (stray / "lib").mkdir(parents=True)
    (stray / "lib" / "libc10.so").write_text("not a library\n")
    try:
        refused = build(small_demo, "--cuda", "none", check=False)
        assert refused.returncode != 0 and "Traceback" not in refused.output
        assert f"{stray} is in the env's site-packages, and no install pip records made it" in refused.stderr
        assert (stray / "lib" / "libc10.so").read_text() == "not a library\n"
    finally:
        shutil.rmtree(stray)
    assert "up to date" in build(small_demo, "--cuda", "none").stderr
