"""What the third hostile probe and the real-driver check found (issue 29): never a stale or foreign binary
served as "up to date", never a write outside the checkout or over the user's own files, one clear line
instead of a traceback. Real git, cmake, ninja and gcc on the demo."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from torchbuild.demo import make_upstream

from .conftest import git, inv
from .test_build import build, env_python, shared, small_demo  # noqa: F401  (fixtures)
from .test_shortcut import edit

UP_TO_DATE = "up to date:"


def where(checkout: Path) -> str:
    """Where the shared env imports minitorch's extension from."""
    return subprocess.run([str(env_python()), "-c", "import minitorch._C as c; print(c.__file__)"],
                          cwd=checkout.parent.parent, check=True, capture_output=True, text=True).stdout.strip()


# ----------------------------------------------------------------------------- 1. exact install paths


def test_a_checkout_whose_path_prefixes_another_is_not_up_to_date_when_the_env_imports_the_other(
        small_demo, tmp_path):  # noqa: F811
    fix = tmp_path / "co-fix"  # ~/pytorch and ~/pytorch-fix: one path starts the other
    shutil.copytree(small_demo, fix, symlinks=True)
    build(small_demo, "--cuda", "none")
    build(fix, "--cuda", "none")
    assert where(small_demo).startswith(str(fix / "minitorch") + os.sep)
    again = build(small_demo, "--cuda", "none")
    assert UP_TO_DATE not in again.stderr
    assert where(small_demo).startswith(str(small_demo / "minitorch") + os.sep)
    assert UP_TO_DATE in build(small_demo, "--cuda", "none").stderr


# ----------------------------------------------------------------------------- 2. edits outside ninja's graph


def test_an_edit_only_setup_py_builds_from_is_never_served_stale(small_demo, monkeypatch):  # noqa: F811
    monkeypatch.setenv("TORCHBUILD_BUILD_SHORTCUT", "false")  # it predates the shortcut: both ways must see it
    build(small_demo, "--cuda", "none")
    edit(small_demo / "minitorch/csrc/stub.c", "{ return initModule(); }",
         "{ PyObject* m = initModule(); if (m) PyModule_AddIntConstant(m, \"STUB_EDIT\", 7); return m; }")
    done = build(small_demo, "--cuda", "none")
    assert UP_TO_DATE not in done.stderr
    assert "minitorch/csrc/stub.c changed and ninja does not build from it" in done.stderr
    probe = "import minitorch._C as c; print(c.STUB_EDIT)"
    assert subprocess.run([str(env_python()), "-c", probe], cwd=small_demo.parent, capture_output=True,
                          text=True).stdout.strip() == "7"
    assert UP_TO_DATE in build(small_demo, "--cuda", "none").stderr  # built: that edit is the tree's now
    helper = next((small_demo / "tools").rglob("*.py"))
    helper.write_text(helper.read_text() + "\n# a change setup.py runs\n")
    done = build(small_demo, "--cuda", "none")
    assert UP_TO_DATE not in done.stderr and f"{helper.relative_to(small_demo)} changed" in done.stderr
    monkeypatch.delenv("TORCHBUILD_BUILD_SHORTCUT")
    (small_demo / "minitorch/csrc/new_helper.c").write_text("int helper(void) { return 1; }\n")
    assert UP_TO_DATE not in build(small_demo, "--cuda", "none").stderr  # a new file: not proven, the whole way


# ----------------------------------------------------------------------------- 5. worktrees, and info/exclude


def test_a_worktree_ignores_torchbuilds_folder_and_an_unwritable_exclude_is_one_line(tmp_path):
    repo = tmp_path / "co"
    inv("clone", "--url", make_upstream(tmp_path / "upstream", units=1).url("pytorch"), "--path", str(repo),
        check=True)
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "feature")
    inv("clean", "--path", str(tmp_path / "wt"), check=True)
    assert (tmp_path / "wt" / ".torchbuild").is_dir()
    assert git(tmp_path / "wt", "status", "--porcelain", "--untracked-files=all") == ""
    assert git(tmp_path / "wt", "rev-parse", "--git-path", "info/exclude").endswith(".git/info/exclude")

    other = tmp_path / "co2"
    shutil.copytree(repo, other, symlinks=True, ignore=shutil.ignore_patterns(".torchbuild"))
    exclude = other / ".git" / "info" / "exclude"
    exclude.unlink()
    exclude.mkdir()  # a folder in the file's place
    done = inv("clean", "--path", str(other), check=False)
    assert done.returncode != 0 and "Traceback" not in done.output
    assert f"{exclude} is not writable" in done.stderr and not (other / ".torchbuild").exists()


def test_clean_where_there_is_no_checkout_says_so_in_one_line(tmp_path):
    for folder in (tmp_path / "empty", tmp_path / "missing"):
        if folder.name == "empty":
            folder.mkdir()
        done = inv("clean", "--path", str(folder), check=False)
        assert done.returncode != 0 and "Traceback" not in done.output
        assert f"no checkout at {folder}" in done.stderr
    assert not (tmp_path / "missing").exists() and list((tmp_path / "empty").iterdir()) == []


# ----------------------------------------------------------------------------- 6. a copied checkout's env


def test_a_copied_checkouts_env_record_is_not_trusted_and_the_copy_gets_its_own(tmp_path):
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


# ----------------------------------------------------------------------------- 9. a slot's tracked files


def test_a_slots_files_from_the_checkout_are_never_outputs_though_bdist_wheel_rewrites_license(
        small_demo, tmp_path):  # noqa: F811
    import json

    from torchbuild.builder import slots

    slot = tmp_path / "slot"
    slots.sync(small_demo, slot)
    license_text = (slot / "LICENSE").read_text()
    build(slot, "--cuda", "none", "--wheel", "--dist", str(tmp_path / "dist"))
    marker = json.loads((slot / "build" / ".torchbuild.json").read_text())
    assert "LICENSE" not in marker["outputs"] and any(n.endswith(".so") for n in marker["outputs"])
    build(slot, "--cuda", "none", "--wheel", "--debug", "--dist", str(tmp_path / "dist"))  # the switch stashes
    assert (slot / "LICENSE").read_text() == license_text
    back = build(slot, "--cuda", "none", "--wheel", "--dist", str(tmp_path / "dist"))
    assert "restored the" in back.stderr and (slot / "LICENSE").read_text() == license_text


# ----------------------------------------------------------------------------- 7. a failed new configuration


def test_a_failed_build_of_a_new_configuration_leaves_the_previous_one_importable(small_demo):  # noqa: F811
    build(small_demo, "--cuda", "none")
    checksum = subprocess.run([str(env_python()), "-c", "import minitorch; print(minitorch.checksum())"],
                              cwd=small_demo.parent, capture_output=True, text=True).stdout.strip()
    failed = build(small_demo, "--cuda", "none", "--debug", "--set", "CMAKE_CXX_FLAGS=-fno-such-flag-at-all",
                   check=False)
    assert failed.returncode != 0 and "Traceback" not in failed.output
    release = next(p.name for p in (small_demo / ".torchbuild" / "trees").iterdir() if p.name.endswith("-debug"))
    assert f"{release.replace('-debug', '-release')} is back in the checkout and importable" in failed.stderr
    assert (small_demo / "minitorch" / "lib" / "libc10.so").is_file()
    again = subprocess.run([str(env_python()), "-c", "import minitorch; print(minitorch.checksum())"],
                           cwd=small_demo.parent, capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.strip() == checksum, again.stderr
    assert UP_TO_DATE in build(small_demo, "--cuda", "none").stderr  # the checkout is that configuration's again


# ----------------------------------------------------------------------------- remembered answers of another shape


def test_linker_answers_of_another_shape_are_dropped_and_asked_again(tmp_path):
    import json

    from torchbuild.toolchain import linkers

    cache = tmp_path / "linkers.json"
    for text in ("[]", "null", '{"key": {}}', '{"[\\"x\\"]": 3}', "{not json"):
        cache.write_text(text)
        found = linkers.discover("g++", dict(os.environ), cache)
        assert found and all(isinstance(ln.accepted, bool) and ln.version for ln in found), text
        kept = json.loads(cache.read_text())
        assert isinstance(kept, dict) and all(isinstance(v, dict) for v in kept.values())
        cache.write_text(text)
        assert linkers.cmake_version(tmp_path, dict(os.environ), cache)  # cmake's answer, asked anew
    key = json.dumps(["trial", ["bfd", [1, 2]]])
    cache.write_text(json.dumps({key: {"seconds": {"bfd": "fast", "lld": 0.3}}}))
    assert linkers._seconds(json.loads(cache.read_text())[key]) == {"lld": 0.3}


# ----------------------------------------------------------------------------- ci.summary's table


def test_the_ci_summary_escapes_cells_and_leaves_out_records_of_another_shape(tmp_path):
    import json

    from .conftest import copy_project

    proj = copy_project(tmp_path / "proj")
    (proj / "dist").mkdir()
    hostile = "boom\n| injected | row |\n<img src=x onerror=alert(1)>"
    (proj / "dist" / "matrix-summary.json").write_text(json.dumps({"sessions": [
        {"session": "build-3.12(cuda='none')", "python": "3.12", "cuda": "none", "result": "failed",
         "seconds": 3.5, "reason": hostile},
        {"session": "build-3.13(cuda='none')", "python": "3.13", "cuda": "none", "seconds": "fast"}]}))
    step = tmp_path / "step.md"
    done = inv("ci.summary", root=proj, env={"GITHUB_STEP_SUMMARY": str(step)}, check=True)
    assert "Traceback" not in done.output and "seconds is 'fast', not float" in done.stderr
    text = step.read_text()
    rows = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert len(rows) == 3 and rows[2].count(" | ") == 6  # header, rule, one row of 7 cells
    assert "<img" not in text and "&lt;img" in text and "\\| injected \\|" in rows[2]


# ----------------------------------------------------------------------------- a Python the checkout refuses


def test_a_python_the_checkout_refuses_is_named_before_any_env_is_made(small_demo, tmp_path, monkeypatch):  # noqa: F811
    from .conftest import REAL_HOME

    if not list((REAL_HOME / ".pyenv" / "versions").glob("2.7*/bin/python")):
        import pytest

        pytest.skip("no Python 2.7 under ~/.pyenv/versions")
    monkeypatch.setenv("TORCHBUILD_PATHS_ENVS", str(tmp_path / "envs"))
    monkeypatch.setenv("HOME", str(REAL_HOME))  # pyenv's Pythons are found under the real home
    done = build(small_demo, "--python", "2.7", check=False)
    assert done.returncode != 0 and "Traceback" not in done.output
    assert "needs Python >= 3.10, not 2.7" in done.stderr and "venv" not in done.stderr  # requires-python
    assert not (tmp_path / "envs").exists() or list((tmp_path / "envs").iterdir()) == []


# ----------------------------------------------------------------------------- a misspelt option


def test_an_option_cmake_does_not_use_is_named_on_the_terminal(small_demo):  # noqa: F811
    done = build(small_demo, "--cuda", "none", "--set", "USE_CUDAA=1")
    warned = [ln for ln in done.stderr.splitlines() if "CMake did not use" in ln]
    assert len(warned) == 1 and "USE_CUDAA" in warned[0] and "misspelt" in warned[0]
    assert "CMake did not use" not in build(small_demo, "--cuda", "none", "--rerun").stderr


# ----------------------------------------------------------------------------- 8. the split build on PyTorch's files


def test_the_split_build_is_refused_up_front_where_a_project_name_overrides_setup_py(tmp_path):
    from torchbuild.builder.request import split_refusal

    today, older = (make_upstream(tmp_path / name, units=1, project_table=table).repo("pytorch")
                    for name, table in (("today", True), ("older", False)))
    assert split_refusal(older) is None
    assert 'pyproject.toml\'s [project] name = "minitorch" is fixed' in (split_refusal(today) or "")
    co = tmp_path / "co"
    inv("clone", "--url", today.as_uri(), "--path", str(co), check=True)
    for part in ("core", "python"):
        done = inv("build", "--path", str(co), "--part", part, check=False)
        assert done.returncode != 0 and "Traceback" not in done.output
        assert f"--part {part}: the checkout at {co} cannot make the split build" in done.stderr
        assert "tagged py3-none-any" in done.stderr
    assert not (co / "build").exists()  # refused before anything ran
