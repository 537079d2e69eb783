"""`inv env.*`: managed build environments, made for real with venv and uv (conda via a stub)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from torchbuild.toolchain import search_path

from ..helpers import REAL_HOME, build, inv


def local_index(tmp_path: Path) -> Path:
    """A PEP 503 index in a folder holding one small wheel, `tbprobe` (written by hand: no network)."""
    files = {
        "tbprobe/__init__.py": "VALUE = 42\n",
        "tbprobe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tbprobe\nVersion: 1.0\n",
        "tbprobe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: torchbuild-tests\nRoot-Is-Purelib: true\n"
                                       "Tag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files["tbprobe-1.0.dist-info/RECORD"] = "\n".join(record + ["tbprobe-1.0.dist-info/RECORD,,"]) + "\n"
    simple = tmp_path / "simple"
    (simple / "tbprobe").mkdir(parents=True)
    with zipfile.ZipFile(simple / "tbprobe" / "tbprobe-1.0-py3-none-any.whl", "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    html = '<html><body><a href="tbprobe-1.0-py3-none-any.whl">tbprobe-1.0-py3-none-any.whl</a></body></html>'
    (simple / "tbprobe" / "index.html").write_text(html)
    (simple / "index.html").write_text('<html><body><a href="tbprobe/">tbprobe</a></body></html>')
    return simple


def test_an_unreachable_index_is_named_as_such(env_project):
    """pip says "no matching distribution" when the index cannot be reached: the error says which it was."""
    from ..helpers import free_port

    checkout = env_project / "checkout"
    checkout.mkdir()
    (checkout / "requirements-build.txt").write_text("cffi\n")
    (env_project / "tb.yaml").write_text(f"mirrors:\n  pip_index_url: http://127.0.0.1:{free_port()}/simple\n")
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    done = inv("env.create", "--python", py, env={"TORCHBUILD_CONFIG": str(env_project / "tb.yaml"),
                                                  "PIP_CONFIG_FILE": "/dev/null", "PIP_RETRIES": "1"}, timeout=300)
    assert done.returncode == 1 and "cannot reach the package index to install cffi" in done.stderr
    assert "Connection refused" in done.stderr and "pin a version" not in done.stderr


def test_mirror_config_is_written_into_the_env_and_used(env_project):
    simple = local_index(env_project)
    checkout = env_project / "checkout"
    checkout.mkdir()
    (checkout / "requirements-build.txt").write_text("tbprobe\n")
    (env_project / "tb.yaml").write_text(f"mirrors:\n  pip_index_url: {simple.as_uri()}\n"
                                     "  pip_trusted_hosts: [example.invalid]\n")
    env = {"TORCHBUILD_CONFIG": str(env_project / "tb.yaml"), "PIP_CONFIG_FILE": "/dev/null"}
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    inv("env.create", "--python", py, env=env, check=True, timeout=300)
    prefix = env_project / "envs" / f"py{py}"
    conf = (prefix / "pip.conf").read_text()
    assert f"index-url = {simple.as_uri()}" in conf and "trusted-host = example.invalid" in conf
    assert (prefix / "pip.conf").stat().st_mode & 0o777 == 0o600  # an index url may hold a token
    out = subprocess.run([str(prefix / "bin/python"), "-c", "import tbprobe; print(tbprobe.VALUE)"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "42"
    assert not (REAL_HOME / ".config" / "pip" / "pip.conf").exists() or "tbprobe" not in \
        (REAL_HOME / ".config" / "pip" / "pip.conf").read_text()


def test_uv_backend(env_project):
    if not shutil.which("uv", path=search_path(os.environ)):
        pytest.skip("uv is not installed (pip install uv)")
    simple = local_index(env_project)
    checkout = env_project / "checkout"
    checkout.mkdir()
    (checkout / "requirements-build.txt").write_text("tbprobe\n")
    (env_project / "tb.yaml").write_text(f"mirrors:\n  pip_extra_index_urls: [{simple.as_uri()}]\n")
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    done = inv("env.create", "--python", py, "--backend", "uv", env={"TORCHBUILD_CONFIG": str(env_project / "tb.yaml")},
               check=True, timeout=300)
    prefix = env_project / "envs" / f"py{py}-uv"
    assert "(uv)" in done.stderr and "uv pip install" in done.stderr
    out = subprocess.run([str(prefix / "bin/python"), "-c", "import tbprobe; print(tbprobe.VALUE)"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "42"


def test_conda_backend_commands(env_project):
    """Conda channels are unreachable here: a stub conda records its arguments and makes the prefix."""
    record = env_project / "calls.jsonl"
    stub_dir = env_project / "stubbin"
    stub_dir.mkdir()
    conda = stub_dir / "conda"
    conda.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, os, sys
        args = sys.argv[1:]
        with open({str(record)!r}, "a") as fh:
            fh.write(json.dumps({{"argv": args, "condarc": os.environ.get("CONDARC")}}) + "\\n")
        prefix = args[args.index("--prefix") + 1]
        os.makedirs(os.path.join(prefix, "bin"), exist_ok=True)
        py = os.path.join(prefix, "bin", "python")
        with open(py, "w") as fh:
            fh.write("#!/bin/sh\\necho \\"python $*\\" >> {record}.python\\n")
        os.chmod(py, 0o755)
    """))
    conda.chmod(0o755)
    (env_project / "tb.yaml").write_text("mirrors:\n  conda_channels: [https://mirror.example/conda-forge, "
                                     "https://mirror.example/nvidia]\n  conda_channel_priority: strict\n"
                                     "build:\n  cuda: '13.0'\n")
    env = {"TORCHBUILD_CONFIG": str(env_project / "tb.yaml"), "CONDA_EXE": str(conda), "TORCHBUILD_BUILD_MKL": "1",
           "PATH": f"{stub_dir}:{os.environ['PATH']}"}
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    inv("env.create", "--python", py, "--backend", "conda", env=env, check=True)
    (call,) = [json.loads(line) for line in record.read_text().splitlines()]
    prefix = env_project / "envs" / f"py{py}-conda"
    assert call["argv"] == ["create", "--yes", "--prefix", str(prefix), "--override-channels",
                            "-c", "https://mirror.example/conda-forge", "-c", "https://mirror.example/nvidia",
                            f"python={py}", "mkl", "mkl-include", "magma-cuda130"]
    assert call["condarc"] == str(prefix / ".condarc")
    assert (prefix / ".condarc").read_text() == ("channels:\n  - https://mirror.example/conda-forge\n"
                                                 "  - https://mirror.example/nvidia\nchannel_priority: strict\n")
    pip_calls = Path(f"{record}.python").read_text()
    assert "-m pip install -q" in pip_calls and "numpy" in pip_calls


def test_bad_input(env_project):
    missing = inv("env.create", "--python", "2.9")
    assert missing.returncode == 1 and "Python 2.9 was not found (found:" in missing.stderr
    backend = inv("env.create", "--backend", "micromamba", env={"PATH": "/usr/bin:/bin", "MAMBA_EXE": ""})
    assert backend.returncode == 1 and "the micromamba backend is not installed" in backend.stderr
    assert "install micromamba" in backend.stderr
    blocker = env_project / "not-a-folder"
    blocker.write_text("a file where the env dir should go\n")
    bad_dir = inv("env.create", env={"TORCHBUILD_PATHS_ENVS": str(blocker / "envs")})
    assert bad_dir.returncode == 1 and f"cannot write the env dir {blocker / 'envs'}" in bad_dir.stderr
    assert blocker.read_text() == "a file where the env dir should go\n"


def test_unresolvable_requirement_leaves_nothing_trusted(env_project):
    checkout = env_project / "checkout"
    checkout.mkdir()
    (checkout / "requirements-build.txt").write_text("torchbuild-no-such-package-xyz==99\n")
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    done = inv("env.create", "--python", py, timeout=300)
    assert done.returncode == 1
    assert f"cannot install torchbuild-no-such-package-xyz==99 for Python {py}." in done.stderr
    assert "Traceback" not in done.output
    assert not (env_project / "envs" / f"py{py}").exists()


def test_a_python_the_checkout_refuses_is_named_before_any_env_is_made(small_demo, tmp_path, monkeypatch):  # noqa: F811
    """(issue 29)"""
    from ..helpers import REAL_HOME

    if not list((REAL_HOME / ".pyenv" / "versions").glob("2.7*/bin/python")):
        import pytest

        pytest.skip("no Python 2.7 under ~/.pyenv/versions")
    monkeypatch.setenv("TORCHBUILD_PATHS_ENVS", str(tmp_path / "envs"))
    monkeypatch.setenv("HOME", str(REAL_HOME))  # pyenv's Pythons are found under the real home
    done = build(small_demo, "--python", "2.7", check=False)
    assert done.returncode != 0 and "Traceback" not in done.output
    assert "needs Python >= 3.10, not 2.7" in done.stderr and "venv" not in done.stderr  # requires-python
    assert not (tmp_path / "envs").exists() or list((tmp_path / "envs").iterdir()) == []


def test_a_pip_constraint_excluding_the_checkouts_version_is_named_before_any_env_is_made(small_demo, tmp_path,
                                                                                          monkeypatch):
    """Issue 58 item 13: a machine-wide pip constraint (`torch<=2.14.1` here, against a checkout of 2.15.0a0; the
    demo's package is minitorch) is said before the env is made, naming the line, its file and where pip took it
    from, with the way to lift it; lifted, the build goes on."""
    import os

    monkeypatch.setenv("TORCHBUILD_PATHS_ENVS", str(tmp_path / "envs"))
    caps = tmp_path / "constraints.txt"
    caps.write_text("numpy<3\nminitorch<=2.0.1  # the machine's cap\n")
    conf = tmp_path / "xdg" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text(f"[global]\nconstraint = {caps}\n")
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "xdg"))
    done = build(small_demo, "--cuda", "none", check=False)
    assert done.returncode != 0 and "Traceback" not in done.output
    assert "pip's constraint 'minitorch<=2.0.1' (" in done.stderr and str(conf) in done.stderr
    assert f"PIP_CONSTRAINT: {os.devnull}" in done.stderr and "nothing was made" in done.stderr
    assert not (tmp_path / "envs").exists() or list((tmp_path / "envs").iterdir()) == []
    lifted = build(small_demo, "--cuda", "none", "--dry-run", "--set", f"PIP_CONSTRAINT={os.devnull}")
    assert "pip's constraint" not in lifted.output
    # (issue 69 item 7) lifted for one build: the env pins its torch, carrying the machine's cap; a later build
    # that runs pip says so before it starts, not inside pip's resolver; one that does not run pip is not refused
    build(small_demo, "--cuda", "none", env={"PIP_CONSTRAINT": os.devnull})
    assert "up to date" in build(small_demo, "--cuda", "none").stderr
    later = build(small_demo, "--cuda", "none", "--rerun", check=False)
    assert later.returncode != 0 and "Traceback" not in later.output and "ResolutionImpossible" not in later.output
    assert "pip's constraint 'minitorch<=2.0.1' (" in later.stderr and "in this build; nothing was built" in \
        later.stderr, later.stderr
