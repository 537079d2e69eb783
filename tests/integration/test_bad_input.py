"""Faults and bad input: every failure is one clear message, and nothing of the user's is lost.

The rest of the fault table lives next to the feature it guards: killed clone (test_clone:
test_resume_after_a_killed_clone), unreachable mirror (test_clone), dirty/locally-committed
submodules (test_clone), patch conflict (test_patches), malformed yaml (test_config), two builds
at once and SIGINT during a build (test_build)."""

from __future__ import annotations

import json
import os
import shutil
import sys

from torchbuild.demo import make_upstream

from ..helpers import fake_toolkit, git, inv, tmpfs, tree_state


def test_metacharacters_and_spaces_are_passed_literally(bare_demo, tmp_path):
    """A quote and spaces in the path, shell syntax in the values: nothing runs. (A double quote in the
    path is left out: CMake's own install script, which PyTorch's build runs, cannot hold one.)"""
    marker = tmp_path / "pwned"
    dest = tmp_path / "it's a co with spaces"
    inv("clone", "--url", bare_demo.url("pytorch"), "--path", str(dest), check=True)
    done = inv("build", "--path", str(dest), "--cuda", "none", "--set", f"X=$(touch {marker})",
               env={"USE_Y": f"`touch {marker}`; touch {marker}"}, check=True, timeout=600)  # --set: refused, unread
    assert "built in" in done.stderr
    assert not marker.exists()
    cache = (dest / "build/CMakeCache.txt").read_text()
    assert f"USE_Y:UNINITIALIZED=`touch {marker}`; touch {marker}" in cache


def test_a_full_disk_is_one_clear_line(bare_demo, tmp_path):
    """A checkout on a device with no space left, and the disk check turned off (min_free_gb: 0): one line
    that says so, exit 1, no traceback (the lock file's holder line is a courtesy that may fail)."""
    with tmpfs(tmp_path / "small", "size=8m") as small:
        dest = small / "co"
        inv("clone", "--url", bare_demo.url("pytorch"), "--path", str(dest), check=True)
        with open(small / "filler", "wb", buffering=0) as fh:  # take every byte that is left
            try:
                while True:
                    fh.write(b"\0" * 4096)
            except OSError:
                pass
        done = inv("build", "--path", str(dest), "--cuda", "none", env={"TORCHBUILD_BUILD_MIN_FREE_GB": "0"},
                   timeout=600)
        assert done.returncode == 1 and "Traceback" not in done.output, done.output
        assert "no space left" in done.stderr.lower()


def test_disk_preflight_refuses_with_the_numbers(bare_demo, tmp_path):
    dest = tmp_path / "co"
    inv("clone", "--url", bare_demo.url("pytorch"), "--path", str(dest), check=True)
    done = inv("build", "--path", str(dest), "--cuda", "none", env={"TORCHBUILD_BUILD_MIN_FREE_GB": "1000000"})
    assert done.returncode == 1
    assert "GiB free at" in done.stderr and "a build needs about 1000000 GiB (build.min_free_gb)" in done.stderr
    assert not (dest / "build").exists() and not (dest / ".torchbuild").exists()


def test_a_vanished_toolkit_is_a_clear_error(bare_demo, tmp_path):
    dest = tmp_path / "co"
    inv("clone", "--url", bare_demo.url("pytorch"), "--path", str(dest), check=True)
    root = fake_toolkit(tmp_path / "cuda-12.6", version_json="12.6.3")
    env = {"TORCHBUILD_TOOLCHAIN_CUDA_ROOTS": str(root)}
    assert "12.6.3" in inv("cuda.list", env=env, check=True).stdout
    (root / "bin/nvcc").unlink()  # half gone
    broken = inv("build", "--path", str(dest), "--cuda", "12.6", env=env)
    assert broken.returncode == 1 and "CUDA 12.6 at" in broken.stderr and "nvcc is missing" in broken.stderr
    import shutil

    shutil.rmtree(root)  # all gone
    gone = inv("build", "--path", str(dest), "--cuda", "12.6", env=env)
    assert gone.returncode == 1 and "CUDA 12.6 is not installed" in gone.stderr
    assert "Traceback" not in broken.output + gone.output and not (dest / "build").exists()


def test_a_python_that_cannot_make_venvs(tmp_path):
    """A Python older than virtualenv's targets (3.9) without the venv module (Debian's python3.8 without
    python3.8-venv): one line naming the fix, nothing half-made."""
    fake = tmp_path / "python3.8"
    fake.write_text(f"#!/bin/sh\ncase \"$*\" in *find_spec*) exec {sys.executable} -c 'import json,sys,platform; "
                    "print(json.dumps({\"version\": \"3.8.99\", \"implementation\": \"CPython\", "
                    f"\"executable\": \"{fake}\", \"prefix\": \"/x\", \"base_prefix\": \"/x\", \"venv\": False, "
                    "\"pip\": False, \"site\": []}))';; esac\n"
                    f"exec {sys.executable} \"$@\"\n")
    fake.chmod(0o755)
    done = inv("env.create", "--python", str(fake), env={"TORCHBUILD_PATHS_ENVS": str(tmp_path / "envs")})
    assert done.returncode == 1
    assert "cannot create venvs (no venv/ensurepip)" in done.stderr and "--backend uv" in done.stderr
    assert not (tmp_path / "envs" / "py3.8").exists()


def test_a_missing_compiler_is_caught_before_the_build(bare_demo, tmp_path):
    dest = tmp_path / "co"
    inv("clone", "--url", bare_demo.url("pytorch"), "--path", str(dest), check=True)
    done = inv("build", "--path", str(dest), "--cuda", "none", env={"CXX": "/nonexistent/g++-99"})
    assert done.returncode == 1 and "CXX is /nonexistent/g++-99, which was not found" in done.stderr
    assert not (dest / "build").exists()


def test_unreachable_clone_retries_with_backoff_then_one_error(tmp_path):
    env = {"TORCHBUILD_GIT_RETRIES": "3", "TORCHBUILD_GIT_RETRY_DELAY": "0.2"}
    done = inv("clone", "--url", (tmp_path / "nowhere").as_uri(), "--path", str(tmp_path / "co"), env=env)
    assert done.returncode == 1
    assert done.stderr.count("retrying in") == 2
    assert "retrying in 0.2s" in done.stderr and "retrying in 0.4s" in done.stderr
    assert done.stderr.count("error:") == 1 and "after 3 attempt(s)" in done.stderr
    assert not (tmp_path / "co").exists() and not (tmp_path / ".co.partial").exists()


def test_sync_after_patching_and_a_dirty_checkout_keeps_state(bare_demo, tmp_path):
    dest = tmp_path / "co"
    inv("clone", "--url", bare_demo.url("pytorch"), "--path", str(dest), check=True)
    (dest / "third_party/fbgemm/LICENSE").write_text("edited\n")
    before = tree_state(dest)
    inv("sync", "--path", str(dest), check=True)  # at the recorded commits: a dirty file is no reason to act
    assert tree_state(dest) == before
    assert os.path.exists(dest / "third_party/fbgemm/LICENSE")


def test_a_worktree_ignores_torchbuilds_folder_and_an_unwritable_exclude_is_one_line(tmp_path):
    """(issue 29)"""
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
    """(issue 29)"""
    for folder in (tmp_path / "empty", tmp_path / "missing"):
        if folder.name == "empty":
            folder.mkdir()
        done = inv("clean", "--path", str(folder), check=False)
        assert done.returncode != 0 and "Traceback" not in done.output
        assert f"no checkout at {folder}" in done.stderr
    assert not (tmp_path / "missing").exists() and list((tmp_path / "empty").iterdir()) == []


def test_a_bad_budget_or_clean_choice_is_one_line_and_removes_nothing(tmp_path):
    """(issue 72) --keep 0, a negative or wordy --older-than, --keep beside --all, a negative trees.max_gb."""
    checkout = tmp_path / "co"
    checkout.mkdir()
    git(checkout, "init", "-q")
    (checkout / "setup.py").write_text("")
    kept = checkout / ".torchbuild" / "trees" / "py3.12-cpu-release"
    kept.mkdir(parents=True)
    (kept / ".torchbuild.json").write_text(json.dumps({"key": "py3.12-cpu-release"}))
    cases = [(["clean", "--keep", "0"], "--keep '0' would keep no configuration"),
             (["clean", "--older-than", "-3"], "--older-than '-3' is not a number of days"),
             (["clean", "--older-than", "a week"], "--older-than 'a week' is not a number of days"),
             (["clean", "--keep", "2", "--all"], "--older-than and --keep choose trees by when they were used")]
    for args, said in cases:
        done = inv(*args, "--path", str(checkout), check=False)
        errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
        assert done.returncode == 1 and len(errors) == 1 and said in errors[0], done.output
        assert "Traceback" not in done.output and kept.exists()
    done = inv("trees", "--path", str(checkout), env={"TORCHBUILD_TREES_MAX_GB": "-1"}, check=False)
    assert done.returncode != 0 and "environment TORCHBUILD_TREES_MAX_GB: must be at least 0" in done.stderr
    listing = inv("trees", "--path", str(checkout), env={"TORCHBUILD_TREES_MAX_GB": "1.5"}, check=True).stdout
    assert "py3.12-cpu-release" in listing
    assert "budget of 1.50 GiB (trees.max_gb, env TORCHBUILD_TREES_MAX_GB)" in listing
