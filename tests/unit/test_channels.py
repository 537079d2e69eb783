"""The ownership channels at PyTorch's size (issue 55): which of a build's 9,000 names git tracks is asked by
their folders, and answers exactly as asking name by name did."""

from __future__ import annotations

import subprocess
from pathlib import Path

from torchbuild.builder.ownership.channels import skipped_installs, tracked
from torchbuild.builder.profile import Step


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "-c", "protocol.file.allow=always", *args],
                   cwd=repo, check=True, capture_output=True)


def test_the_tracked_names_among_a_builds_are_found_by_folder_in_the_checkout_and_its_submodules(tmp_path):
    sub, co = tmp_path / "sub", tmp_path / "co"
    for repo, files in ((sub, ["include/s.h"]), (co, ["setup.py", "pkg/include/core.h", "pkg/include/x.h"])):
        repo.mkdir()
        git(repo, "init", "-q")
        for name in files:
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(name)
        git(repo, "add", ".")
        git(repo, "commit", "-qm", "files")
    git(co, "submodule", "add", "-q", str(sub), "third_party/sub")
    git(co, "commit", "-qm", "submodule")
    built = [f"pkg/include/ATen/ops/op_{i}.h" for i in range(3000)] + ["pkg/include/[x].h", "pkg/version.py",
                                                                       "build_info.txt"]
    for name in built:
        (co / name).parent.mkdir(parents=True, exist_ok=True)
        (co / name).write_text(name)
    theirs = ["setup.py", "pkg/include/core.h", "third_party/sub/include/s.h"]
    assert tracked(co, built + theirs) == set(theirs)  # `[x].h` is a name, not a pattern matching x.h
    assert tracked(co, built) == set()


def test_a_library_the_install_called_up_to_date_though_remade_is_found_but_not_one_it_copied_first():
    """CMake calls a copy a second apart "Up-to-date" (installed again by the build); a project that installs a
    file twice (spglib: its own and its subproject's install rule) has the second one up to date, rightly."""
    log = ("-- Installing: /env/pkg/lib/libtwice.so\n-- Up-to-date: /env/pkg/lib/libstale.so\n"
           "-- Up-to-date: /env/pkg/lib/libtwice.so\n-- Up-to-date: /env/pkg/lib/libkept.so\n")
    remade = [Step(f"lib/{name}", 0.0, 1.0, "link") for name in ("libtwice.so", "libstale.so")]
    assert skipped_installs(log, remade) == [Path("/env/pkg/lib/libstale.so")]
