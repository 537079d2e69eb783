"""The edit-compile loop's shortcut: setup.py's own `cmake --build . --target install`, without pip, only
where it gives what the whole build gives."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from torchbuild.builder import scm, stripping
from torchbuild.builder.ownership.records import Record
from torchbuild.builder.shortcut import (
    changed_since,
    env_install_refusal,
    manifest_files,
    metadata_version,
    ninja_inputs,
    refusal,
    restamp,
    version_refusal,
)


def test_the_shortcut_decides_from_ninja_and_the_package(tmp_path):
    explain = [f"ninja explain: output CMakeFiles/c10.dir/c10/core/a.cpp.o older than most recent input "
               f"{tmp_path}/co/c10/core/a.cpp (2 vs 1)", "ninja explain: CMakeFiles/c10.dir/c10/core/a.cpp.o is dirty",
               "ninja explain: output x.o older than most recent input ../c10/include/c10/core.h (2 vs 1)",
               "ninja explain: output y.o older than most recent input /usr/include/stdio.h (2 vs 1)"]
    named = ninja_inputs(explain, tmp_path / "co" / "build", tmp_path / "co")
    assert named == {"c10/core/a.cpp", "c10/include/c10/core.h"}
    before = {"c10/core/a.cpp": [1, 1], "old.cpp": [1, 1]}
    now = {"c10/core/a.cpp": [1, 2], "minitorch/nn.py": [3, 3], "minitorch/csrc/stub.c": [1, 1]}
    assert changed_since(before, now) == ["c10/core/a.cpp", "minitorch/csrc/stub.c", "minitorch/nn.py", "old.cpp"]
    assert refusal(["c10/core/a.cpp", "minitorch/nn.py"], named, "minitorch", {}) is None
    assert refusal(["minitorch/csrc/stub.c"], named, "minitorch", {}) == \
        "minitorch/csrc/stub.c changed and ninja does not build from it"
    assert refusal(["old.cpp"], named, "minitorch", {}) is not None  # changed back since: not proven
    assert refusal(["minitorch/version.py"], named, "minitorch", {"minitorch/version.py": "x"}) is None


def test_a_restamped_dist_info_says_the_new_version_as_pip_writes_it(tmp_path):
    info = tmp_path / "minitorch-2.15.0a0+git1111111.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.2\nName: minitorch\nVersion: 2.15.0a0+git1111111\n\nbody\n")
    (info / "direct_url.json").write_text("{}")
    (info / "RECORD").write_text(f"{info.name}/METADATA,sha256=old,70\n{info.name}/direct_url.json,sha256=x,2\n"
                                 f"{info.name}/RECORD,,\n_minitorch_editable.py,sha256=y,9\n")
    record = restamp(info / "RECORD", "2.15.0a0+git2222222")
    moved = tmp_path / "minitorch-2.15.0a0+git2222222.dist-info"
    assert record == moved / "RECORD" and not info.exists()
    meta = (moved / "METADATA").read_bytes()
    assert b"Version: 2.15.0a0+git2222222\n" in meta and meta.endswith(b"\nbody\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(meta).digest()).rstrip(b"=").decode()
    assert record.read_text().splitlines() == [f"{moved.name}/METADATA,sha256={digest},{len(meta)}",
                                               f"{moved.name}/direct_url.json,sha256=x,2", f"{moved.name}/RECORD,,",
                                               "_minitorch_editable.py,sha256=y,9"]
    assert metadata_version(record) == "2.15.0a0+git2222222" and restamp(record, "2.15.0a0+git2222222") == record


def test_across_commits_pips_version_must_be_one_the_build_writes_at_every_build(tmp_path):
    co, build = tmp_path / "co", tmp_path / "co" / "build"
    (co / "pkg").mkdir(parents=True)
    build.mkdir()
    version = co / "pkg" / "version.py"
    version.write_text("__version__ = '1.0+git1111111'\n")
    info = tmp_path / "pkg-1.0+git1111111.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: pkg\nVersion: 1.0+git1111111\n")
    (co / "input.txt").write_text("x\n")
    made = {"pkg/version.py": [1, 1]}
    for edge, regenerated in ((f"build gen_never {version}: gen\n", True), (f"build {version}: gen ../input.txt\n",
                                                                             False)):
        (build / "build.ninja").write_text("rule gen\n  command = touch " + str(version) + "\n" + edge)
        subprocess.run(["ninja", "-C", str(build)], check=True, capture_output=True)  # built once: in its log
        why = version_refusal(co, "pkg", info / "RECORD", made, shutil.which("ninja"))
        assert why is None if regenerated else why == "the build's ninja does not write pkg/version.py at every build"
    assert "disagree" in str(version_refusal(co, "pkg", tmp_path / "none" / "RECORD", made, shutil.which("ninja")))
    assert "does not write pkg/version.py" in str(version_refusal(co, "pkg", info / "RECORD", {}, None))


SCM_BACKENDS = {
    "scikit-build-core, its setuptools_scm provider": (
        '[build-system]\nbuild-backend = "scikit_build_core.build"\n[project]\nname = "a"\ndynamic = ["version"]\n'
        '[tool.scikit-build]\nmetadata.version.provider = "scikit_build_core.metadata.setuptools_scm"\n'
        '[tool.setuptools_scm]\n', "", True),
    "setuptools' plugin": (
        '[build-system]\nbuild-backend = "setuptools.build_meta"\n[project]\nname = "a"\ndynamic = ["version"]\n'
        '[tool.setuptools_scm]\nversion_file = "a/_version.py"\n', "setup(use_scm_version=True)\n", True),
    "setup.py's own options": (
        '[build-system]\nbuild-backend = "setuptools.build_meta"\n[project]\nname = "a"\ndynamic = ["version"]\n'
        '[tool.setuptools_scm]\n', 'setup(use_scm_version={"local_scheme": "no-local-version"})\n', False),
    "hatch-vcs (its raw-options)": (
        '[build-system]\nbuild-backend = "hatchling.build"\n[project]\nname = "a"\ndynamic = ["version"]\n'
        '[tool.setuptools_scm]\n', "", False),
    "a static version": ('[build-system]\nbuild-backend = "setuptools.build_meta"\n[project]\nname = "a"\n'
                         'version = "1.0"\n[tool.setuptools_scm]\n', "", False),
}


def test_a_setuptools_scm_version_is_computed_only_where_pyproject_holds_all_its_options(tmp_path):
    for shape, (pyproject, setup, expected) in SCM_BACKENDS.items():
        checkout = tmp_path / shape.split()[0].strip("',")
        checkout.mkdir(exist_ok=True)
        (checkout / "pyproject.toml").write_text(pyproject)
        (checkout / "setup.py").unlink(missing_ok=True)
        if setup:
            (checkout / "setup.py").write_text(setup)
        assert scm.configured(checkout) is expected, shape


def test_a_version_compiled_in_by_the_projects_cmake_needs_the_configure(tmp_path):
    build = tmp_path / "build"
    build.mkdir()
    (build / "CMakeCache.txt").write_text("SKBUILD_PROJECT_VERSION_FULL:STRING=0.1.dev2+gabc\n")
    (tmp_path / ".gitmodules").write_text('[submodule "pybind11"]\n\tpath = extern/pb\n')
    (tmp_path / "pb").mkdir()
    (tmp_path / "pb" / "CMakeLists.txt").write_text("# SKBUILD_PROJECT_VERSION in a comment\n")
    (tmp_path / "CMakeLists.txt").write_text("project(x)\n")
    assert scm.configured_with_another(tmp_path, [build], "0.1.dev3+gdef") is None  # nothing reads it
    (tmp_path / "extern" / "pb").mkdir(parents=True)
    (tmp_path / "extern" / "pb" / "CMakeLists.txt").write_text("message(${SKBUILD_PROJECT_VERSION})\n")
    assert scm.configured_with_another(tmp_path, [build], "0.1.dev3+gdef") is None  # a submodule's, not the project's
    (tmp_path / "CMakeLists.txt").write_text("project(x VERSION ${SKBUILD_PROJECT_VERSION})\n")
    assert scm.configured_with_another(tmp_path, [build], "0.1.dev2+gabc") is None  # the same version
    why = scm.configured_with_another(tmp_path, [build], "0.1.dev3+gdef")
    assert why and "CMakeLists.txt reads SKBUILD_PROJECT_VERSION" in why and "0.1.dev2+gabc" in why


STRIPPED_PROJECT = """cmake_minimum_required(VERSION 3.18)
project(p C)
add_library(a SHARED a.c)
add_subdirectory(sub)
install(TARGETS a LIBRARY DESTINATION "lib dir")
"""


def test_the_loop_strips_what_the_install_copied_as_strip_would(tmp_path):
    """scikit-build-core's `--strip`, run by the loop on what CMake's install copied (stripping.py): the same
    bytes as `cmake --install --strip`, and the next install calls an unchanged library up to date."""
    src, build = tmp_path / "src", tmp_path / "build"
    (src / "sub").mkdir(parents=True)
    (src / "CMakeLists.txt").write_text(STRIPPED_PROJECT)
    (src / "a.c").write_text("int a(void) { return 1; }\n")
    (src / "sub" / "CMakeLists.txt").write_text("add_library(b SHARED b.c)\n"  # versioned: links beside it
                                               "set_target_properties(b PROPERTIES VERSION 1.2.3 SOVERSION 1)\n"
                                               "install(TARGETS b DESTINATION lib)\n")
    (src / "sub" / "b.c").write_text("int b(void) { return 2; }\n")
    cmake = shutil.which("cmake")
    subprocess.run([cmake, "-S", src, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"], check=True,
                   capture_output=True)
    subprocess.run([cmake, "--build", build], check=True, capture_output=True)

    def install(prefix, *strip):
        return subprocess.run([cmake, "--install", build, "--prefix", prefix, *strip], check=True,
                              capture_output=True, text=True).stdout

    def loop(prefix):
        for argv in stripping.commands(install(prefix), build, prefix, {}):
            times = stripping.keep_times(Path(argv[-1]))
            subprocess.run(argv, check=True)
            stripping.give_back(Path(argv[-1]), times)

    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    install(theirs, "--strip")
    loop(ours)
    libs = ["lib dir/liba.so", "lib/libb.so.1.2.3"]
    assert [(ours / lib).read_bytes() for lib in libs] == [(theirs / lib).read_bytes() for lib in libs]
    assert (ours / libs[0]).stat().st_size < (build / "liba.so").stat().st_size  # stripped
    assert (ours / "lib/libb.so").is_symlink() and (ours / "lib/libb.so.1").is_symlink()  # never stripped
    assert stripping.commands(install(ours), build, ours, {}) == []  # both "Up-to-date": neither copied again

    (src / "sub" / "b.c").write_text("int b(void) { return 3; }\n")
    subprocess.run([cmake, "--build", build], check=True, capture_output=True)
    relinked = (build / "sub" / libs[1][4:]).stat()  # CMake copies what is a second or more apart: a later link
    os.utime(build / "sub" / libs[1][4:], ns=(relinked.st_atime_ns, relinked.st_mtime_ns + 2_000_000_000))
    assert [Path(argv[-1]) for argv in stripping.commands(install(ours), build, ours, {})] == [ours / libs[1]]
    assert stripping.commands("", build, ours, {"DESTDIR": "/x"}) == []
    with open(build / "cmake_install.cmake", "a") as script:  # a strip command CMake resolves at install time
        script.write('if(CMAKE_INSTALL_DO_STRIP)\n  execute_process(COMMAND "${CMAKE_STRIP}" "x")\nendif()\n')
    assert stripping.commands("", build, ours, {}) is None  # the loop then installs again with --strip


def test_the_loop_installs_into_the_env_only_where_the_editable_install_holds_cmakes_files(tmp_path):
    """install_manifest.txt (into the env's folder, or the backend's staging one, `./` and all) against the
    names the editable install put into the env: the same files, else the whole way."""
    env, build = tmp_path / "env", tmp_path / "build"
    into, staged = env / "lib/python3.11/site-packages/pkg", tmp_path / "staging"
    build.mkdir()
    (build / "CMakeCache.txt").write_text(f"CMAKE_INSTALL_PREFIX:PATH={staged}\n")
    (build / "install_manifest.txt").write_text(f"{staged}/lib/liba.so\n{into}/./_C.so\n")
    site = "lib/python3.11/site-packages/"
    kept = {f"{site}pkg/lib/liba.so": [1, 1], f"{site}pkg/_C.so": [1, 1], f"{site}pkg-1.0.dist-info/RECORD": [1, 1],
            f"{site}_editable_skbc_pkg.pth": [1, 1], "bin/tool": [1, 1]}
    assert manifest_files(build, into) == {"lib/liba.so", "_C.so"}
    assert env_install_refusal(build, Record("k", env_files=kept, env_prefix=str(env)), into) is None
    fewer = {k: v for k, v in kept.items() if not k.endswith("_C.so")}
    assert "holds other files" in env_install_refusal(build, Record("k", env_files=fewer, env_prefix=str(env)), into)
    elsewhere = Record("k", env_files=kept, env_prefix=str(tmp_path / "other"))
    assert "holds other files" in env_install_refusal(build, elsewhere, into)
    with open(build / "install_manifest.txt", "a") as manifest:
        manifest.write("/usr/lib/libb.so\n")  # an absolute DESTINATION
    assert manifest_files(build, into) is None
    assert "outside the install prefix" in env_install_refusal(build, Record("k", env_files=kept,
                                                                             env_prefix=str(env)), into)


def test_a_strip_command_with_a_bare_option_and_a_quoted_path_is_read_whole():
    """macOS's `strip -x` is written bare, the path quoted (with a space, an escaped quote)."""
    script = ('if(CMAKE_INSTALL_DO_STRIP)\n  execute_process(COMMAND "/usr/bin/strip" -x '
              '"$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/lib/a \\"b\\".dylib")\nendif()\n')
    assert stripping.script_rules(script) == [["/usr/bin/strip", "-x",
                                               '$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/lib/a "b".dylib']]
