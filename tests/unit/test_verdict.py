"""The verdict's pieces on recorded data, without building: the evidence read from a deps log, and what a switch
out of an env leaves behind (issue 54)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from torchbuild.builder.evidence import Evidence, collect, deps_log, stale_outputs


def test_evidence_reads_the_deps_log_and_digests_only_what_moved(tmp_path):
    """The deps log is ninja's own (a real ninja writes it); a file rewritten with an older time is found by its
    content; an unchanged stat costs no digest."""

    co = tmp_path / "co"
    tree = co / "build"
    tree.mkdir(parents=True)
    (co / "a.h").write_text("#define A 1\n")
    (co / "a.c").write_text('#include "a.h"\nint a(void) { return A; }\n')
    (tree / "build.ninja").write_text("rule cc\n  command = cc -MD -MF $out.d -c $in -o $out\n  deps = gcc\n"
                                      "  depfile = $out.d\nbuild a.o: cc ../a.c\n")
    ninja = shutil.which("ninja")
    if ninja is None:
        pytest.skip("no ninja on PATH")
    subprocess.run([ninja, "-C", str(tree)], check=True, capture_output=True)
    log = deps_log(tree)
    assert "a.o" in log.paths and {log.paths[i] for i in next(iter(log.deps.values()))} >= {"../a.c", "../a.h"}
    assert deps_log(tree, log.at).read == set()  # read up to its end: nothing new since
    seen = collect(co, [tree], Evidence(), ())
    assert seen.logs == {str(tree): log.at}
    assert any(name.startswith("/usr/include") for name in seen.files) or seen.files == {}  # outside: kept
    assert "a.h" not in seen.files  # no git here: nothing inside the checkout is hidden from it
    outside = Evidence({str(co / "a.h"): (0, 0, "0" * 64, 0, 0, 0)})
    assert outside.changed(co) == [str(co / "a.h")]
    st = (co / "a.h").stat()
    identity = (st.st_size, st.st_mtime_ns, "not a digest", st.st_ctime_ns, st.st_ino, st.st_dev)
    kept = Evidence({str(co / "a.h"): identity}, at=st.st_ctime_ns + 2 * 10 ** 9)
    assert kept.changed(co) == []  # the identity did not move: no digest taken
    assert Evidence({str(co / "a.h"): identity}, at=st.st_ctime_ns).changed(co) == [str(co / "a.h")]  # racy
    assert stale_outputs(co, [tree], outside) == (tree / "a.o",)
    assert subprocess.run([ninja, "-C", str(tree), "-n"], capture_output=True, text=True).stdout.strip() \
        .endswith("no work to do.")  # ninja's clock sees nothing: only the content says a.o is stale


@pytest.mark.parametrize("rewrite", ["cp -p", "touch -r", "mtime 1"])
def test_a_file_rewritten_with_its_old_size_and_mtime_is_found_by_its_ctime_and_inode(tmp_path, rewrite):
    """Issue 68 finding 1: a header outside the checkout rewritten with its old size and mtime (`cp -p`, `touch -r`,
    `rsync -t`, `tar x`, a Nix store where every mtime is 1) kept an extension "up to date" with an object compiled
    against the old header: the evidence digested a file only where its size or mtime moved."""
    import dataclasses
    import time

    co, outside = tmp_path / "co", tmp_path / "include"
    co.mkdir()
    outside.mkdir()
    header = outside / "torch.h"
    header.write_text("#define VALUE 2290250\n")
    if rewrite == "mtime 1":
        os.utime(header, ns=(1, 1))
    seen = collect(co, [], Evidence({str(header): (0, 0, "0" * 64, 0, 0, 0)}), ())
    seen = dataclasses.replace(seen, at=seen.at + 5 * 10 ** 9)  # recorded later: not racy, its identity decides
    assert seen.changed(co) == [] and seen.now(co) == [(str(header), seen.files[str(header)][2])]
    time.sleep(0.01)
    before = header.stat()
    new = tmp_path / "new.h"
    new.write_text("#define VALUE 2291250\n")  # the same size
    if rewrite == "cp -p":
        os.utime(new, ns=(before.st_atime_ns, before.st_mtime_ns))
        shutil.copy2(new, tmp_path / "staged.h")
        os.replace(tmp_path / "staged.h", header)  # a new inode, the old mtime
    else:
        header.write_text(new.read_text())  # the same inode, a new ctime
        os.utime(header, ns=(before.st_atime_ns, before.st_mtime_ns))  # touch -r / tar x / the store's 1
    after = header.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert seen.changed(co) == [str(header)]
    assert seen.now(co)[0][1] != seen.files[str(header)][2]


def test_a_switch_out_of_an_env_leaves_no_bytecode_folder_behind(tmp_path):
    """Issue 54: the package's `__pycache__` stayed in the env a configuration left, an empty namespace package
    there (`import` gave one without attributes, shadowing the next install)."""
    from torchbuild.builder.ownership.moves import Moves, stash_env

    checkout, prefix, tree = tmp_path / "co", tmp_path / "env", tmp_path / "tree"
    checkout.mkdir()
    site = prefix / "lib" / "python3.11" / "site-packages"
    info, package = site / "pkg-1.0.dist-info", site / "pkg"
    info.mkdir(parents=True)
    package.mkdir()
    (info / "direct_url.json").write_text('{"url": "%s", "dir_info": {"editable": true}}' % checkout.as_uri())
    (package / "helpers.py").write_text("x = 1\n")
    (package / "_C.so").write_bytes(b"\x7fELF")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "helpers.cpython-311.pyc").write_bytes(b"cached")
    names = ["pkg-1.0.dist-info/direct_url.json", "pkg/helpers.py", "pkg/_C.so"]
    recorded = {f"lib/python3.11/site-packages/{n}": [(site / n).stat().st_size, (site / n).stat().st_mtime_ns]
                for n in names}
    assert stash_env(tree, prefix, checkout, recorded, Moves()) == 3
    assert not package.exists() and not info.exists()


def test_a_dry_run_started_ahead_answers_its_verdict_and_never_a_later_question(tmp_path):
    """Issue 55: ninja's dry run starts beside git's status (the no-op at PyTorch's size waits for both at once).
    Its answer is taken once; one left untaken is dropped with the verdict, so a question asked after a build
    (the tree changed since) is asked of ninja again."""
    from torchbuild.builder.ownership.uptodate import AHEAD, ahead, dry_run, forget_ahead

    tree = tmp_path / "build"
    tree.mkdir()
    (tmp_path / "in.txt").write_text("1")
    (tree / "build.ninja").write_text(f"rule copy\n  command = cp $in $out\nbuild out.txt: copy {tmp_path}/in.txt\n")
    ninja = shutil.which("ninja")
    ahead([tree], os.environ["PATH"])
    assert dry_run(ninja, tree)[1] == [f"cp {tmp_path}/in.txt out.txt"] and not AHEAD  # started ahead, taken
    ahead([tree], os.environ["PATH"])
    forget_ahead()  # the verdict made without asking it
    subprocess.run([ninja, "-C", str(tree)], check=True, capture_output=True)  # the build
    assert dry_run(ninja, tree) == ([], [])  # asked again: nothing to do now, not the stale copy step


def test_the_redirect_hooks_paths_resolve_as_path_resolve_does_a_folder_at_a_time(tmp_path):
    """Issue 55: the paths of scikit-build-core's redirect hook (2,000 modules at PyTorch's size) are resolved
    a folder at a time, and give what Path.resolve gives each: through a linked folder, and a linked file."""
    from torchbuild.builder.ownership.uptodate import resolved

    real, elsewhere = tmp_path / "co" / "pkg", tmp_path / "elsewhere"
    real.mkdir(parents=True)
    elsewhere.mkdir()
    (real / "a.py").write_text("")
    (elsewhere / "b.py").write_text("")
    (real / "b.py").symlink_to(elsewhere / "b.py")  # a file led outside the checkout
    (tmp_path / "linked").symlink_to(tmp_path / "co")
    paths = [str(tmp_path / "linked" / "pkg" / "a.py"), str(real / "b.py"), str(real / "missing.py"),
             str(tmp_path / "co" / "pkg" / ".." / "pkg" / "a.py")]
    assert resolved(paths) == [str(Path(p).resolve()) for p in paths]
    assert resolved(paths)[1] == str(elsewhere / "b.py")


def test_the_envs_files_are_read_from_record_only_when_record_changed(tmp_path, monkeypatch):
    """Issue 55: the install's 12,000 RECORD rows are not parsed again on a no-op where RECORD is as it was
    recorded; each file is still stat'ed, and a RECORD rewritten with a new row is read again."""
    from types import SimpleNamespace

    from torchbuild.builder.ownership import uptodate

    checkout, prefix = tmp_path / "co", tmp_path / "env"
    checkout.mkdir()
    site = prefix / "lib/python3.11/site-packages"
    info = site / "pkg-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "direct_url.json").write_text(f'{{"url": "{checkout.resolve().as_uri()}", "dir_info": {{}}}}')
    for rel in ("pkg/lib/libx.so", "pkg/include/x.h"):
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(rel)
    rows = ["pkg/lib/libx.so,,", "pkg/include/x.h,,", "pkg-1.0.dist-info/direct_url.json,,",
            "pkg-1.0.dist-info/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    plan = SimpleNamespace(env=SimpleNamespace(prefix=prefix), checkout=checkout)
    recorded = uptodate.env_files(plan)
    assert sorted(recorded) == sorted(f"lib/python3.11/site-packages/{r[:-2]}" for r in rows)

    parsed = uptodate.record_paths
    monkeypatch.setattr(uptodate, "record_paths", lambda record: pytest.fail("RECORD read again"))
    assert uptodate.env_files(plan, recorded) == recorded
    (site / "pkg/include/x.h").write_text("an edit that changes the size")
    assert uptodate.env_files(plan, recorded) != recorded  # each file is still stat'ed

    monkeypatch.setattr(uptodate, "record_paths", parsed)
    (site / "pkg/include/y.h").write_text("new")
    (info / "RECORD").write_text("\n".join(["pkg/include/y.h,,", *rows]) + "\n")
    assert "lib/python3.11/site-packages/pkg/include/y.h" in uptodate.env_files(plan, recorded)


def test_a_tree_with_a_configure_depends_glob_is_asked_its_three_questions_at_once(tmp_path):
    """Issue 55: a `file(GLOB ... CONFIGURE_DEPENDS)` (PyTorch main's torch_cuda) makes ninja show CMake's glob
    check on every run; the check and the dry run past it start ahead with the dry run, and answer as asked one
    after the other would: nothing to do with the globs as they were, a reconfigure once a file is added."""
    from types import SimpleNamespace

    from torchbuild.builder.ownership.uptodate import AHEAD, ahead, forget_ahead, ninja_dry_run, nothing_to_do

    src, tree = tmp_path / "src", tmp_path / "build"
    (src / "parts").mkdir(parents=True)
    (src / "parts" / "a.c").write_text("int a(void) { return 1; }\n")
    (src / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.18)\nproject(g C)\n"
                                        "file(GLOB PARTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/parts/*.c)\n"
                                        "add_library(g STATIC ${PARTS})\n")
    subprocess.run(["cmake", "-G", "Ninja", "-S", str(src), "-B", str(tree)], check=True, capture_output=True)
    subprocess.run(["ninja", "-C", str(tree)], check=True, capture_output=True)
    plan = SimpleNamespace(changes={"PATH": os.environ["PATH"]})
    try:
        ahead([tree], os.environ["PATH"])
        assert sorted(what for what, _, _ in AHEAD) == ["dry", "globs", "past"]
        lines, steps = ninja_dry_run(tree, plan, {})
        assert nothing_to_do(lines) and steps == [] and not AHEAD, (lines, steps)
        (src / "parts" / "b.c").write_text("int b(void) { return 2; }\n")
        ahead([tree], os.environ["PATH"])
        lines, steps = ninja_dry_run(tree, plan, {})
        assert not nothing_to_do(lines), lines  # the glob finds more: CMake runs again
    finally:
        forget_ahead()
