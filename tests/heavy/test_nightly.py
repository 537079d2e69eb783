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


def served_clone(served, tmp_path: Path, monkeypatch) -> Path:
    """A fresh clone of the served upstream, with the index and the module's env in this test's env."""
    for key, value in served["env"].items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TORCHBUILD_NIGHTLY_INDEX_URL", served["url"])
    co = tmp_path / "co"
    inv("clone", "--url", served["up"].url("pytorch"), "--path", str(co), check=True)
    return co


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
