"""Installing wheels without pip: what pip then sees in the env, and a reinstall that leaves nothing stale."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from torchbuild.wheels import install


def make_wheel(folder: Path, version: str, modules: dict[str, str]) -> Path:
    """A real wheel of the project `tbdemo` from setuptools, with these modules and a console script."""
    src = folder / f"src-{version}"
    (src / "tbdemo").mkdir(parents=True)
    for name, text in modules.items():
        (src / "tbdemo" / name).write_text(text)
    (src / "setup.py").write_text(
        "from setuptools import setup\n"
        f"setup(name='tbdemo', version='{version}', packages=['tbdemo'],\n"
        "      entry_points={'console_scripts': ['tbdemo-hello = tbdemo:hello']})\n")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(folder / "dist"), str(src)], check=True, capture_output=True)
    return next((folder / "dist").glob(f"tbdemo-{version}-*.whl"))


def test_a_reinstall_replaces_the_old_files_and_pip_sees_one_version(tmp_path):
    old = make_wheel(tmp_path, "1.0", {"__init__.py": "def hello(): print('one')\n", "gone.py": "X = 1\n"})
    new = make_wheel(tmp_path, "2.0", {"__init__.py": "def hello(): print('two')\n"})
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "virtualenv", "-q", str(venv)], check=True)
    python = venv / "bin" / "python"

    site = install([old], python)
    assert (site / "tbdemo" / "gone.py").exists()
    subprocess.run([str(python), "-c", "import tbdemo.gone"], check=True, cwd=tmp_path)  # leaves __pycache__
    assert subprocess.run([str(venv / "bin" / "tbdemo-hello")], capture_output=True, text=True).stdout == "one\n"

    install([new], python, replace=True)
    assert not (site / "tbdemo" / "gone.py").exists() and not (site / "tbdemo" / "__pycache__").exists()
    assert [p.name for p in site.glob("tbdemo-*.dist-info")] == ["tbdemo-2.0.dist-info"]
    assert subprocess.run([str(venv / "bin" / "tbdemo-hello")], capture_output=True, text=True).stdout == "two\n"
    shown = subprocess.run([str(python), "-m", "pip", "show", "tbdemo"], capture_output=True, text=True).stdout
    assert "Version: 2.0" in shown
    subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "-q", "tbdemo"], check=True)  # its RECORD is sound
    assert not (site / "tbdemo").exists() and not (venv / "bin" / "tbdemo-hello").exists()


def test_torchbuilds_own_wheel_holds_every_subpackage_and_its_data(installed, tmp_path):
    """A non-editable install (the wheel, as `pip install .` or pipx make it), in a fresh venv outside the
    repo: every subpackage imports, the release and failure tables load, and the demo upstream is made."""
    py = str(installed.parent / "python")
    code = ("import pathlib, torchbuild, torchbuild.builder.execute, torchbuild.git.buildclones\n"
            "import torchbuild.commands.build\n"
            "from torchbuild import compat, diagnose, demo\n"
            "assert 'site-packages' in torchbuild.__file__, torchbuild.__file__\n"
            "assert compat.release_for('2.11.0').version == '2.11' and diagnose.table()\n"
            "up = demo.make_upstream(pathlib.Path('up'), units=2)\n"
            "print((up.repo('pytorch') / 'tools/optional_submodules.py').is_file())\n")
    out = subprocess.run([py, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr


def test_a_wheel_linking_a_library_of_this_machine_is_named_with_it(tmp_path):
    """auditwheel's report, as the matrix's summary shows it: a library from outside the wheel that no
    manylinux policy allows is named; one another wheel provides (the split build's core) is not."""
    from torchbuild.summary import SessionRecord, table
    from torchbuild.wheels import outside_manylinux

    subprocess.run(["gcc", "-shared", "-fPIC", "-x", "c", "-", "-o", str(tmp_path / "libtbextra.so")],
                   input="int extra(void) { return 3; }\n", text=True, check=True)
    src = tmp_path / "src"
    src.mkdir()
    (src / "m.c").write_text('#include <Python.h>\nint extra(void);\nstatic struct PyModuleDef m = '
                             '{PyModuleDef_HEAD_INIT, "awdemo", NULL, -1, NULL};\n'
                             "PyMODINIT_FUNC PyInit_awdemo(void) { extra(); return PyModule_Create(&m); }\n")
    (src / "setup.py").write_text(
        "from setuptools import Extension, setup\n"
        f"setup(name='awdemo', version='0.1', ext_modules=[Extension('awdemo', ['m.c'], libraries=['tbextra'],\n"
        f"      library_dirs=['{tmp_path}'], runtime_library_dirs=['{tmp_path}'])])\n")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(src)],
                   check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("awdemo-*.whl"))
    assert outside_manylinux(wheel) == ["libtbextra.so"]
    with zipfile.ZipFile(tmp_path / "core.whl", "w") as core:
        core.writestr("awcore/lib/libtbextra.so", b"")
    assert outside_manylinux(wheel, [tmp_path / "core.whl"]) == []
    pure = make_wheel(tmp_path, "1.0", {"__init__.py": "def hello(): pass\n"})
    assert outside_manylinux(pure) == []
    (row,) = table([SessionRecord("build-3.12", "3.12", "none", wheel=str(wheel), warning="links libtbextra.so")])
    assert row[-1] == f"{wheel} (warning: links libtbextra.so)"
