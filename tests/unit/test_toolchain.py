"""Toolchain discovery on this machine, and on fake toolkits/compilers/GPUs made as files in tmp."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from torchbuild import compat
from torchbuild.errors import TorchbuildError
from torchbuild.toolchain import compilers, cuda, gpu, python, system

from ..helpers import REAL_HOME, fake_toolkit

REAL_CUDA = Path("/usr/local/cuda-13.0")


PYENV_36 = REAL_HOME / ".pyenv/versions/3.6.15/bin/python3"


def discover(*roots: Path, env: dict | None = None) -> list[cuda.Toolkit]:
    return cuda.discover(env or {"PATH": ""}, [str(r) for r in roots], system_dirs=())


def test_version_parsers():
    assert cuda.parse_version_json('{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}') == "12.4.1"
    assert cuda.parse_version_json("not json") is None
    assert cuda.parse_version_txt("CUDA Version 10.0.130\n") == "10.0.130"
    out = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
    assert cuda.parse_nvcc_version(out) == "13.0.88"
    header = "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 1\n#define CUDNN_PATCHLEVEL 0\n"
    assert cuda.parse_cudnn_version(header) == "9.1.0"


def test_version_comes_from_the_toolkit_not_the_folder_name(tmp_path):
    (tk,) = discover(fake_toolkit(tmp_path / "cuda-12.1", version_json="12.4.131"))
    assert tk.version == "12.4" and tk.full_version == "12.4.131"
    (tk,) = discover(fake_toolkit(tmp_path / "cuda-x", nvcc_release="12.8"))
    assert tk.version == "12.8" and tk.cudart


def test_ordering_aliases_and_selection(tmp_path):
    old = fake_toolkit(tmp_path / "a", version_json="11.8.89")
    new = fake_toolkit(tmp_path / "b", version_json="12.6.77")
    newer = fake_toolkit(tmp_path / "c", version_json="12.8.61")
    link = tmp_path / "cuda"
    link.symlink_to(newer)
    kits = discover(old, link, new, newer)
    assert [t.full_version for t in kits] == ["12.8.61", "12.6.77", "11.8.89"]
    assert kits[0].aliases == (link,) and kits[0].root == newer.resolve()
    assert cuda.select(kits, "12").full_version == "12.8.61"
    assert cuda.select(kits, "12.6").root == new.resolve()
    assert cuda.select(kits, "auto").version == "12.8"
    assert cuda.select(kits, "none") is None and cuda.select(kits, "cpu") is None
    with pytest.raises(TorchbuildError, match=r"CUDA 10.0 is not installed \(found: 12.8 .*12.6 .*11.8") as err:
        cuda.select(kits, "10.0")
    assert "runfile" in (err.value.hint or "")
    with pytest.raises(TorchbuildError, match="bad CUDA version 'banana'"):
        cuda.select(kits, "banana")


def test_broken_toolkits_are_reported_not_used(tmp_path):
    missing = fake_toolkit(tmp_path / "m", version_json="12.4.0")
    (missing / "bin" / "nvcc").unlink()
    noexec = fake_toolkit(tmp_path / "n", version_json="12.6.0", executable=False)
    kits = discover(missing, noexec)
    assert any("nvcc is missing" in p for t in kits for p in t.problems)
    assert any("is not executable" in p for t in kits for p in t.problems)
    with pytest.raises(TorchbuildError, match="CUDA 12.6 at .* is broken: .* is not executable"):
        cuda.select(kits, "12.6")
    assert cuda.select(kits, "auto") is None


def test_selection_is_environment_only(tmp_path):
    tk = discover(fake_toolkit(tmp_path / "t", version_json="12.6.0"))[0]
    env = cuda.toolkit_env(tk, {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/x"})
    assert env["CUDA_HOME"] == str(tk.root) and env["CUDACXX"] == str(tk.root / "bin/nvcc")
    assert env["PATH"] == f"{tk.root}/bin:/usr/bin" and env["LD_LIBRARY_PATH"] == f"{tk.lib}:/x"
    assert env["USE_CUDA"] == "1"
    assert cuda.toolkit_env(None, {}) == {"USE_CUDA": "0"}


def test_nvcc_wrapper_script_points_at_its_toolkit(tmp_path):
    tk = fake_toolkit(tmp_path / "real", version_json="12.6.0")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvcc").write_text(f"#!/bin/sh\nexec {tk}/bin/nvcc \"$@\"\n")
    (bindir / "nvcc").chmod(0o755)
    roots = cuda.candidate_roots({"PATH": str(bindir)})
    assert (tk, "nvcc on PATH") in roots


@pytest.mark.skipif(not REAL_CUDA.exists(), reason="no CUDA 13.0 toolkit at /usr/local/cuda-13.0")
def test_real_discovery_finds_cuda_13_and_its_alias():
    kits = cuda.discover(os.environ)
    real = [t for t in kits if t.root == REAL_CUDA.resolve()]
    assert len(real) == 1 and real[0].version == "13.0" and real[0].usable
    if Path("/usr/local/cuda").is_symlink():
        assert Path("/usr/local/cuda") in real[0].aliases
        assert not any(t.root == Path("/usr/local/cuda") for t in kits)


def test_real_compilers_found():
    gccs = [c for c in compilers.discover(os.environ) if c.kind == "gcc"]
    assert gccs and all(c.major >= 4 for c in gccs)
    assert compilers.default_gcc(gccs).cxx.name.startswith("g++")


def fake_compilers(tmp_path: Path, versions: dict[str, str]) -> dict[str, str]:
    bindir = tmp_path / "ccbin"
    bindir.mkdir(parents=True)
    for name, version in versions.items():
        for tool in (name, name.replace("gcc", "g++")):
            (bindir / tool).write_text(f"#!/bin/sh\necho {version}\n")
            (bindir / tool).chmod(0o755)
    return {"PATH": str(bindir)}


def test_host_compiler_for_cuda(tmp_path):
    assert compilers.max_gcc("13.0") == 15 and compilers.max_gcc("12.4") == 13 and compilers.max_gcc("11.8") == 11
    env = fake_compilers(tmp_path, {"gcc": "16.1.0", "gcc-14": "14.2.0", "gcc-11": "11.4.0"})
    ccs = compilers.discover(env)
    pick, why = compilers.host_compiler(ccs, "13.0")
    assert pick is not None and pick.cxx.name == "g++-14" and "too new" in why
    pick, _ = compilers.host_compiler(ccs, "11.8")
    assert pick is not None and pick.cxx.name == "g++-11"
    with pytest.raises(TorchbuildError, match="gcc 16.1.0 is too new for CUDA 10.0, which supports gcc 7") as err:
        compilers.host_compiler(ccs, "10.0")
    assert "g++-7" in (err.value.hint or "")
    ok, _ = compilers.host_compiler(compilers.discover(fake_compilers(tmp_path / "x", {"gcc": "12.2.0"})), "13.0")
    assert ok is None


def test_gpu_parsing_and_fake_nvidia_smi(tmp_path):
    assert gpu.parse_query("NVIDIA H200, 9.0, 580.65\nNVIDIA A100, 8.0, 580.65\n")[1].compute_cap == "8.0"
    smi = tmp_path / "nvidia-smi"
    smi.write_text('#!/bin/sh\nif [ -n "$1" ]; then echo "NVIDIA H200, 9.0, 580.65"; else '
                   'echo "| NVIDIA-SMI 580.65   Driver Version: 580.65   CUDA Version: 13.0 |"; fi\n')
    smi.chmod(0o755)
    info = gpu.detect({"PATH": str(tmp_path)})
    assert info.arch_list == "9.0" and info.driver_cuda == "13.0"
    assert gpu.detect({"PATH": str(tmp_path / "none")}).gpus == ()


def test_max_jobs_from_cores_and_memory():
    gib = system.GIB
    assert system.choose_jobs(64, 16 * gib, cuda=False).jobs == 8
    assert system.choose_jobs(64, 16 * gib, cuda=True).jobs == 4
    assert system.choose_jobs(2, 64 * gib, cuda=False).jobs == 2
    assert system.choose_jobs(8, 1 * gib, cuda=True).jobs == 1
    assert "memory-bound" in system.choose_jobs(64, 16 * gib, cuda=False).reason


@pytest.mark.skipif(not PYENV_36.exists(), reason="no pyenv Python 3.6 on this machine")
def test_pyenv_pythons_are_found_though_shims_hide_them():
    env = {"HOME": str(REAL_HOME), "PATH": "/usr/bin"}
    found = python.discover(env)
    py36 = python.find(found, "3.6")
    assert py36.version.startswith("3.6.") and py36.found_by == "pyenv" and py36.venv
    with pytest.raises(TorchbuildError, match=r"Python 2.9 was not found \(found: .*3.6"):
        python.find(found, "2.9")


def test_a_crashing_interpreter_is_listed_not_raised(tmp_path):
    bad = tmp_path / "python3.99"
    bad.write_text("#!/bin/sh\necho 'Fatal Python error: init_fs_encoding' >&2\nexit 1\n")
    bad.chmod(0o755)
    py = python.probe(bad, "test")
    assert py.problem == "crashes on start: Fatal Python error: init_fs_encoding"
    with pytest.raises(TorchbuildError, match="cannot be used: crashes on start"):
        python.find([], str(bad))


def test_compat_table():
    row = compat.release_for("2.11.0a0")
    assert row is not None and row.version == "2.11" and "13.0" in row.cuda
    assert compat.release_for("1.0.1").version == "1.0" and compat.release_for("0.4.1") is None
    assert compat.default_arch_list("13.0").startswith("7.5;")
    assert compat.default_arch_list("12.4") == compat.default_arch_list("12.0")
    with pytest.raises(TorchbuildError, match="PyTorch 2.11 supports Python 3.10–3.14, not 3.6.15") as err:
        compat.check("2.11.0a0", "3.6.15", None, "12.2")
    assert "--force" in (err.value.hint or "")
    assert compat.check("2.11.0a0", "3.6.15", "12.4", "12.2", force=True) == [
        "PyTorch 2.11 supports Python 3.10–3.14, not 3.6.15",
        "PyTorch 2.11 was released for CUDA 12.6, 12.8, 13.0, not 12.4"]
    with pytest.raises(TorchbuildError, match=r"needs Python >= 3.10, not 3.9.1"):
        compat.check("2.11.0a0", "3.9.1", None, None, python_min="3.10", force=True)
    assert compat.check("2.11.0a0", "3.12.1", "13.0", "12.2") == []
    # CMakeLists.txt's `VERSION_LESS 9.3` compares the minor version too; RELEASE.md has 2.1 up to 3.11
    assert compat.problems("2.11.0a0", "3.12", None, "9.1.0")[1] == ["PyTorch 2.11 needs GCC >= 9.3, not 9.1.0"]
    assert compat.problems("2.11.0a0", "3.12", None, "9.3.0")[1] == []
    assert compat.problems("2.1.2", "3.12", None, None)[1] == ["PyTorch 2.1 supports Python 3.8–3.11, not 3.12"]


def test_a_ccache_whose_path_has_an_equals_sign_is_refused_before_any_compile(tmp_path):
    """ccache reads a word with '=' as a KEY=VALUE setting, its own path too: from a cache dir like
    `cache (use_ninja=False)` every compile fails with "Could not find compiler". Said before the build, with
    the setting to change (issue 59)."""
    from torchbuild.errors import TorchbuildError
    from torchbuild.toolchain import compiler_cache

    root = tmp_path / "cache (a=b)"
    home = compiler_cache.home(root)
    home.mkdir(parents=True)
    (home / "ccache").write_text("#!/bin/sh\n")
    (home / "ccache").chmod(0o755)
    with pytest.raises(TorchbuildError) as refused:
        compiler_cache.find("auto", True, root, tmp_path / "env", {"PATH": ""}, "python", (), provision=False)
    assert "'='" in refused.value.message and "paths.cache_dir" in refused.value.hint
    fine = compiler_cache.find("auto", True, tmp_path / "cache", tmp_path / "env", {"PATH": ""}, "python", (),
                               provision=False)
    assert fine.path == str(compiler_cache.home(tmp_path / "cache") / "ccache") and "by the first build" in fine.how


def test_ccache_under_the_compilers_names_only_for_the_compilers_there_are(tmp_path):
    """ccache's masquerade folder (setuptools compiles by the compiler's name): a link for each compiler PATH has,
    none for one it lacks, so a build that looks for clang does not find ccache pretending to be it."""
    from torchbuild.toolchain import compiler_cache

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("gcc", "g++"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    folder = compiler_cache.masquerade(tmp_path / "cache", "/opt/ccache/ccache", str(bin_dir))
    assert sorted(p.name for p in folder.iterdir()) == ["g++", "gcc"]
    assert all(os.readlink(p) == "/opt/ccache/ccache" for p in folder.iterdir())
    assert compiler_cache.masquerade(tmp_path / "cache", "/opt/ccache/ccache", str(bin_dir)) == folder  # made once


def test_a_provisioned_ccache_is_trusted_by_its_digest_and_by_running_it_never_by_its_presence(tmp_path):
    """Issue 68 finding 3: a provisioned ccache left empty or cut short by a crash was used by its presence: the
    build said "built" with the old objects kept."""
    import hashlib

    from torchbuild.toolchain import compiler_cache

    folder = compiler_cache.home(tmp_path)
    folder.mkdir(parents=True)
    binary = folder / "ccache"
    script = b"#!/bin/sh\necho 'ccache version 4.14.2'\n"
    binary.write_bytes(script)
    binary.chmod(0o755)
    assert compiler_cache.provisioned(tmp_path) == binary  # an older torchbuild's (no digest beside it): it runs
    (folder / compiler_cache.DIGEST).write_text(hashlib.sha256(script).hexdigest() + "\n")
    assert compiler_cache.provisioned(tmp_path) == binary
    for broken in (b"", script[:12], script.replace(b"4.14.2", b"4.14.3")):  # empty, cut short, another file
        binary.unlink()
        binary.write_bytes(broken)
        binary.chmod(0o755)
        assert compiler_cache.provisioned(tmp_path) is None, broken
    (folder / compiler_cache.DIGEST).unlink()
    binary.unlink()
    binary.write_bytes(b"")
    binary.chmod(0o755)
    assert compiler_cache.provisioned(tmp_path) is None  # empty: it does not run


def test_a_cxx_path_with_a_space_is_found_as_cmake_reads_it(tmp_path):
    """Issue 68 finding 8: CXX="/opt/my tools/g++" was "not found" (its first word was looked up), though CMake
    takes the whole value where it names a program."""
    import shutil

    from torchbuild.builder.facts import check_compiler

    gxx = shutil.which("g++") or shutil.which("c++")
    if gxx is None:
        pytest.skip("no C++ compiler on PATH")
    folder = tmp_path / "my tools"
    folder.mkdir()
    (folder / "g++").symlink_to(gxx)
    check_compiler({"CXX": str(folder / "g++"), "PATH": os.environ["PATH"]})
    check_compiler({"CXX": f"{gxx} -fdiagnostics-color", "PATH": os.environ["PATH"]})  # a program and its flags
    with pytest.raises(TorchbuildError) as err:
        check_compiler({"CXX": str(tmp_path / "no tools" / "g++"), "PATH": os.environ["PATH"]})
    assert "which was not found" in err.value.message
