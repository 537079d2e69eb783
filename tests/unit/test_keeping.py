"""What torchbuild keeps on disk (issue 72): the budget's and clean's choices on made-up trees (no I/O), sizes
measured on real files (hard links once, no link followed), the store's entries no env links to, and the
marks a stopped removal leaves."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from torchbuild.builder.ownership import keeping
from torchbuild.builder.ownership.keeping import Kept, Usage, chosen, over_budget
from torchbuild.builder.ownership.records import Record, write_marker
from torchbuild.builder.ownership.trees import clean, trees_dir
from torchbuild.config import load
from torchbuild.envs import shared
from torchbuild.errors import ConfigError

NOW = 1_000_000.0
HOUR = 3600.0


def tree(key: str, gib: float, used_hours_ago: float, current: bool = False) -> Kept:
    return Kept(key, Path("/x") / key, int(gib * keeping.GIB), NOW - 5 * HOUR, NOW - used_hours_ago * HOUR, current,
                None)


TREES = [tree("py3.12-cu130-release", 10, 0, current=True), tree("py3.12-cpu-release", 6, 30),
         tree("py3.12-cu130-debug", 20, 50), tree("py3.11-cpu-release", 5, 2)]


@pytest.mark.parametrize("budget_gib, recent_hours, dropped", [
    (100, 24, []),  # it fits: nothing goes
    (35, 0, ["py3.12-cu130-debug"]),  # the least recently used first, and only as many as it takes
    (10, 0, ["py3.12-cu130-debug", "py3.12-cpu-release", "py3.11-cpu-release"]),
    (0, 0, ["py3.12-cu130-debug", "py3.12-cpu-release", "py3.11-cpu-release"]),  # never the current one
    (0, 24, ["py3.12-cu130-debug", "py3.12-cpu-release"]),  # never one used within the recent hours
    (0, 100, []),
])
def test_the_budget_drops_the_least_recently_used_kept_trees_until_the_rest_fit(budget_gib, recent_hours, dropped):
    going = over_budget(TREES, int(budget_gib * keeping.GIB), recent_hours * HOUR, NOW)
    assert [t.key for t in going] == dropped


@pytest.mark.parametrize("days, keep, removed", [
    (1, None, ["py3.12-cu130-debug", "py3.12-cpu-release"]),
    (2, None, ["py3.12-cu130-debug"]),
    (0, None, ["py3.12-cu130-debug", "py3.12-cpu-release", "py3.11-cpu-release"]),  # the current one stays
    (None, 1, ["py3.12-cu130-debug", "py3.12-cpu-release", "py3.11-cpu-release"]),  # --keep 1: the current one
    (None, 2, ["py3.12-cu130-debug", "py3.12-cpu-release"]),  # the current one and the most recently used
    (None, 9, []),
    (3, 3, ["py3.12-cu130-debug"]),  # both: what either removes
])
def test_clean_older_than_and_keep_choose_by_last_use_never_the_current_one(days, keep, removed):
    assert [t.key for t in chosen(TREES, NOW, days, keep)] == removed


def test_sizes_are_blocks_on_disk_each_inode_once_and_never_through_a_link(tmp_path):
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    (tree / "lib").mkdir(parents=True)
    outside.mkdir()
    (tree / "lib" / "libbig.so").write_bytes(os.urandom(1 << 20))
    os.link(tree / "lib" / "libbig.so", tree / "lib" / "libbig.so.1")  # a hard link: the same bytes
    (outside / "huge").write_bytes(os.urandom(4 << 20))
    (tree / "to-outside").symlink_to(outside, target_is_directory=True)  # never followed
    (tree / "sparse").write_bytes(b"")
    os.truncate(tree / "sparse", 64 << 20)  # 64 MiB long, no block on disk
    usage = Usage()
    size = usage.tree(tree)
    assert (1 << 20) <= size < (1 << 20) + (64 << 10)
    assert usage.files([str(tree / "lib" / "libbig.so")]) == 0  # counted once across calls
    assert Usage().tree(tree / "to-outside") >= 4 << 20  # a top that is a link (build/ on another disk) is read


def kept_tree(checkout: Path, key: str, done: bool = True) -> Path:
    place = trees_dir(checkout) / key
    (place / "obj").mkdir(parents=True)
    (place / "obj" / "unit.o").write_bytes(os.urandom(100_000))
    write_marker(place, Record(key, done="stamp" if done else None))
    return place


def test_a_kept_trees_last_use_is_when_it_was_set_aside_and_its_build_when_its_marker_was_written(tmp_path):
    checkout = tmp_path / "co"
    place = kept_tree(checkout, "py3.12-cpu-release")
    os.utime(place / ".torchbuild.json", (NOW, NOW))
    time.sleep(0.01)
    before = time.time()
    place.rename(place.with_name("x"))  # as a switch sets a tree aside: a rename
    place.with_name("x").rename(place)
    (found,) = keeping.configurations(checkout)
    assert found.key == "py3.12-cpu-release" and not found.current
    assert found.built == NOW and found.used >= before - 0.01
    assert found.bytes >= 100_000
    kept_tree(checkout, "py3.12-cpu-debug", done=False)
    assert [t.built for t in keeping.configurations(checkout) if t.key == "py3.12-cpu-debug"] == [None]


def test_a_users_folder_among_the_kept_trees_is_never_counted_and_a_stopped_removal_is_finished(tmp_path):
    checkout = tmp_path / "co"
    (checkout / ".git").mkdir(parents=True)
    kept_tree(checkout, "py3.12-cpu-release")
    mine = trees_dir(checkout) / "my-notes"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    half = kept_tree(checkout, "py3.12-cpu-debug").rename(trees_dir(checkout) / f"{keeping.REMOVING}py3.12-cpu-debug-1")
    assert [t.key for t in keeping.configurations(checkout)] == ["py3.12-cpu-release"]
    assert keeping.leftovers(checkout) == [half]
    removed, kept = clean(checkout, all_trees=True)
    assert [what.split(" (")[0] for what, *_ in removed] == ["what a stopped removal left", "py3.12-cpu-release"]
    assert kept == [mine] and (mine / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in trees_dir(checkout).iterdir()) == ["my-notes"]


def test_a_kept_tree_is_renamed_out_of_the_configurations_names_before_it_is_deleted(tmp_path, monkeypatch):
    checkout = tmp_path / "co"
    kept_tree(checkout, "py3.12-cpu-release")
    from torchbuild.builder.ownership import trees

    def killed(tree, keep=()):
        raise KeyboardInterrupt  # a kill while it deletes

    monkeypatch.setattr(trees, "remove_tree_folder", killed)
    with pytest.raises(KeyboardInterrupt):
        clean(checkout, key="py3.12-cpu-release")
    assert keeping.configurations(checkout) == [] and len(keeping.leftovers(checkout)) == 1


def store_entry(store: Path, name: str) -> Path:
    entry = store / name
    (entry / "lib").mkdir(parents=True)
    (entry / "lib" / "libmkl.a").write_bytes(b"x" * 5000)
    (entry / shared.COMPLETE).touch()
    return entry


def test_a_store_entry_is_pruned_only_where_no_env_links_to_it(tmp_path):
    store, env = tmp_path / "store", tmp_path / "env"
    linked, alone = store_entry(store, "mkl_static-1"), store_entry(store, "mkl_include-1")
    (store / ".mkl_static-2.partial").mkdir()  # an unpack in progress: not an entry
    env.mkdir()
    os.link(linked / "lib" / "libmkl.a", env / "libmkl.a")
    assert shared.entries(store) == [alone, linked]
    assert shared.referenced(linked) and not shared.referenced(alone)
    shared.prune(alone)
    shared.prune(linked)  # refused: an env links to it
    assert not alone.exists() and (linked / "lib" / "libmkl.a").exists() and (env / "libmkl.a").read_bytes()
    assert not list(store.glob(".removing-*"))


@pytest.mark.parametrize("variable, value, said", [
    ("TORCHBUILD_TREES_MAX_GB", "-1", "must be at least 0"),
    ("TORCHBUILD_TREES_MAX_GB", "lots", "expected a number"),
    ("TORCHBUILD_TREES_KEEP_RECENT_HOURS", "-2", "must be at least 0"),
])
def test_a_bad_budget_is_one_line_naming_the_setting(tmp_path, variable, value, said):
    with pytest.raises(ConfigError) as err:
        load(tmp_path, {variable: value})
    assert f"environment {variable}" in err.value.message and said in err.value.message


def test_the_budget_is_half_the_disk_unless_set(tmp_path):
    assert load(tmp_path, {}).trees.max_gb is None
    assert keeping.budget_bytes(None, tmp_path) == os.statvfs(tmp_path).f_blocks * os.statvfs(tmp_path).f_frsize // 2
    assert keeping.budget_bytes(1.5, tmp_path) == int(1.5 * keeping.GIB)
    assert json.loads(json.dumps(load(tmp_path, {"TORCHBUILD_TREES_MAX_GB": "0"}).trees.max_gb)) == 0


def tiny_wheel(folder: Path) -> Path:
    """A wheel as pip downloads one: a library and a header, its dist-info with RECORD."""
    import base64
    import hashlib
    import zipfile

    files = {"tinymkl-1.0.data/data/lib/libtiny.a": b"\x7fELF a static library" * 100,
             "tinymkl-1.0.data/data/include/tiny.h": b"#define TINY 1\n",
             "tinymkl-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinymkl\nVersion: 1.0\n",
             "tinymkl-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
                                            b"Tag: py3-none-any\n"}
    rows = [f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
            f"{len(data)}" for name, data in files.items()]
    wheel = folder / "tinymkl-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr("tinymkl-1.0.dist-info/RECORD", "\n".join([*rows, "tinymkl-1.0.dist-info/RECORD,,"]) + "\n")
    return wheel


def test_a_store_file_changed_through_an_envs_link_is_never_linked_into_a_new_env(tmp_path):
    """Issue 68 finding 7: `strip` (or patchelf, an editor) on one env's file changed it in every env and in the
    store, and a new env got the changed copy. The store's files are read-only, and an entry whose files moved since
    it was unpacked is unpacked again before a new env links it."""
    store, one, two = tmp_path / "store", tmp_path / "one", tmp_path / "two"
    store.mkdir()
    wheel = tiny_wheel(tmp_path)
    entry = shared.unpacked(wheel, store)
    lib = entry / "lib" / "libtiny.a"
    assert shared.whole(entry) and not lib.stat().st_mode & 0o222  # read-only, for every env
    for env in (one, two):
        (env / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    shared.link(entry, one, one / "lib" / "python3.11" / "site-packages")
    linked = one / "lib" / "libtiny.a"
    assert linked.stat().st_ino == lib.stat().st_ino and shared.whole(entry)  # a link moves no size or mtime
    linked.chmod(0o644)  # what root, or an editor that asks, can still do: write through the link
    with open(linked, "r+b") as fh:
        fh.write(b"stripped")
    assert not shared.whole(entry)
    again = shared.unpacked(wheel, store)
    shared.link(again, two, two / "lib" / "python3.11" / "site-packages")
    fresh = two / "lib" / "libtiny.a"
    assert fresh.read_bytes().startswith(b"\x7fELF") and fresh.stat().st_ino != linked.stat().st_ino
    assert linked.read_bytes().startswith(b"stripped") and shared.whole(again)
    assert not list(store.glob(".removing-*"))
