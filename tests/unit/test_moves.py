"""A switch's moves at PyTorch's size (issue 55): a folder that holds nothing but a configuration's files goes
in one rename (9,000 headers in include/), and nothing else changes: a user's file, a file changed since the
build and anything behind a link stay where they are, and a file in the way stops the whole move back."""

from __future__ import annotations

import os
from pathlib import Path

from torchbuild.builder.ownership.moves import STASH, Moves, restore, stash


def built(checkout: Path, names: list[str]) -> dict[str, object]:
    """The files a build made, and their record (name: [size, mtime_ns])."""
    for name in names:
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text(name)
    return {name: [(checkout / name).stat().st_size, (checkout / name).stat().st_mtime_ns] for name in names}


def headers(count: int) -> list[str]:
    return [f"pkg/include/ATen/ops/op_{i}.h" for i in range(count)] + ["pkg/include/c10/core.h"]


def test_a_folder_holding_only_the_configurations_files_moves_in_one_rename_and_back(tmp_path):
    checkout, tree = tmp_path / "co", tmp_path / "tree"
    (checkout / "pkg").mkdir(parents=True)
    (checkout / "pkg" / "__init__.py").write_text("")  # the project's own: the package folder is not the build's
    recorded = built(checkout, [*headers(300), "pkg/lib/libtorch.so", "pkg/version.py"])
    include = os.stat(checkout / "pkg/include").st_ino
    journal = Moves()
    assert stash(checkout, tree, recorded, journal) == 303
    assert sorted(str(dest.relative_to(tree / STASH)) for _, dest in journal.done) == \
        ["pkg/include", "pkg/lib", "pkg/version.py"]  # three renames for 303 files
    assert os.stat(tree / STASH / "pkg/include").st_ino == include
    assert sorted(os.listdir(checkout / "pkg")) == ["__init__.py"]

    assert restore(checkout, tree, Moves()) == (303, None)
    assert os.stat(checkout / "pkg/include").st_ino == include
    assert (checkout / "pkg/include/ATen/ops/op_299.h").read_text() == "pkg/include/ATen/ops/op_299.h"
    assert not (tree / STASH).exists()


def test_a_users_file_or_a_file_changed_since_stays_and_the_rest_moves_a_file_at_a_time(tmp_path):
    checkout, tree = tmp_path / "co", tmp_path / "tree"
    recorded = built(checkout, headers(3))
    (checkout / "pkg/include/ATen/ops/notes.txt").write_text("mine")  # the user's, in the build's folder
    (checkout / "pkg/include/c10/core.h").write_text("edited by hand")
    assert stash(checkout, tree, recorded, Moves()) == 3
    assert sorted(os.listdir(checkout / "pkg/include/ATen/ops")) == ["notes.txt"]
    assert (checkout / "pkg/include/c10/core.h").read_text() == "edited by hand"
    assert sorted(os.listdir(tree / STASH / "pkg/include/ATen/ops")) == ["op_0.h", "op_1.h", "op_2.h"]

    (checkout / "pkg/include/c10/core.h").unlink()
    assert restore(checkout, tree, Moves()) == (3, None)
    assert sorted(os.listdir(checkout / "pkg/include/ATen/ops")) == ["notes.txt", "op_0.h", "op_1.h", "op_2.h"]


def test_nothing_behind_a_link_is_moved_and_a_link_in_a_kept_tree_is_never_put_back(tmp_path):
    checkout, tree, elsewhere = tmp_path / "co", tmp_path / "tree", tmp_path / "elsewhere"
    recorded = built(checkout, ["pkg/lib/libc10.so", "pkg/lib/libtorch.so"])
    os.rename(checkout / "pkg/lib", elsewhere)
    (checkout / "pkg/lib").symlink_to(elsewhere)  # the same names, through the user's link
    assert stash(checkout, tree, recorded, Moves()) == 0
    assert sorted(os.listdir(elsewhere)) == ["libc10.so", "libtorch.so"]

    (checkout / "pkg/lib").unlink()
    os.rename(elsewhere, checkout / "pkg/lib")
    assert stash(checkout, tree, recorded, Moves()) == 2
    (tree / STASH / "pkg/lib/evil").symlink_to("/etc")  # a kept tree damaged by hand
    assert restore(checkout, tree, Moves()) == (2, None)
    assert sorted(os.listdir(checkout / "pkg/lib")) == ["libc10.so", "libtorch.so"]


def blocked(checkout: Path, tree: Path) -> tuple[int, str | None]:
    """A configuration stashed, then someone's file where its library goes: its move back, blocked."""
    stash(checkout, tree, built(checkout, [*headers(3), "pkg/lib/libtorch.so"]), Moves())
    (checkout / "pkg/lib").mkdir(parents=True, exist_ok=True)
    (checkout / "pkg/lib/libtorch.so").write_text("someone's")
    return restore(checkout, tree, Moves())


def test_a_file_in_the_way_stops_the_whole_move_back(tmp_path):
    checkout, tree = tmp_path / "co", tmp_path / "tree"
    assert blocked(checkout, tree) == (0, "pkg/lib/libtorch.so stands where one of its files goes")
    assert not (checkout / "pkg/include").exists()
    assert (checkout / "pkg/lib/libtorch.so").read_text() == "someone's"
    assert (tree / STASH / "pkg/include/c10/core.h").is_file()


def test_what_a_blocked_move_back_left_in_a_tree_never_nests_the_next_stash(tmp_path):
    checkout, tree = tmp_path / "co", tmp_path / "tree"
    assert blocked(checkout, tree)[0] == 0  # the stash stays in the tree
    (checkout / "pkg/lib/libtorch.so").unlink()
    recorded = built(checkout, [*headers(3), "pkg/lib/libtorch.so"])  # the build that went the whole way
    assert stash(checkout, tree, recorded, Moves()) == 5
    assert not (tree / STASH / "pkg/include/include").exists()
    assert restore(checkout, tree, Moves()) == (5, None)
    assert sorted(os.listdir(checkout / "pkg/include")) == ["ATen", "c10"]
