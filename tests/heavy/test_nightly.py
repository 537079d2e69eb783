"""The heavy tier's scenarios of tests/integration/test_nightly.py's area, half a minute or more each (`nox -s heavy`,
and CI after README's test command): nightly gives an importable checkout without compiling; no matching nightly is
one line naming the index; checkout starts a branch at the newest nightly and refuses a dirty tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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
