"""What torchbuild keeps on disk (issue 72), on the demo's real builds: three configurations and a budget smaller
than them, the dropped one built again right; `clean --all` reaching a matrix slot with its tree, a finished
bisection and the store's idle entries; a user's files in the checkout's kept trees and in the cache dir never
counted or removed."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from torchbuild.bisection import worktree
from torchbuild.builder import slots
from torchbuild.config import load
from torchbuild.envs import shared

from ..helpers import build, checksum, edit, git, inv

GIB = 1024 ** 3


def listed(checkout: Path) -> dict:
    return json.loads(inv("trees", "--json", "--path", str(checkout), check=True).stdout)


def test_a_budget_smaller_than_three_trees_drops_the_least_recently_used_never_the_current(small_demo):
    build(small_demo, "--cuda", "none")
    first = checksum(small_demo)
    time.sleep(0.05)
    build(small_demo, "--cuda", "none", "--debug")
    time.sleep(0.05)
    build(small_demo, "--cuda", "none", "--rel-with-deb-info")
    assert checksum(small_demo) == first  # the build type does not change what the demo computes
    mine = small_demo / ".torchbuild" / "trees" / "my-notes"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    trees = {t["key"].split("-")[-1]: t for t in listed(small_demo)["configurations"]}
    assert sorted(trees) == ["debug", "release", "relwithdebinfo"]  # my-notes is not counted
    assert trees["relwithdebinfo"]["current"] and not trees["release"]["current"]
    assert trees["release"]["used"] < trees["debug"]["used"] < trees["relwithdebinfo"]["used"]
    assert all(t["bytes"] > 0 and t["built"] for t in trees.values())
    budget = (trees["relwithdebinfo"]["bytes"] + trees["debug"]["bytes"] + trees["release"]["bytes"] // 2) / GIB
    env = {"TORCHBUILD_TREES_MAX_GB": f"{budget:.9f}"}

    unit = small_demo / "c10" / "core" / "unit_00.cpp"
    edit(unit, "{ return work", "{ return 1000 + work")
    kept = build(small_demo, "--cuda", "none", "--rel-with-deb-info", env=env)  # both used within 24 hours
    assert "dropped" not in kept.stderr and "over trees.max_gb" in kept.stderr
    edit(unit, "return 1000 +", "return 2000 +")
    dropped = build(small_demo, "--cuda", "none", "--rel-with-deb-info",
                    env={**env, "TORCHBUILD_TREES_KEEP_RECENT_HOURS": "0"})
    assert "dropped the kept tree of" in dropped.stderr and "-cpu-release (" in dropped.stderr
    assert "cpu-debug (" not in dropped.stderr and "its next build starts from nothing" in dropped.stderr
    edited = checksum(small_demo)
    assert edited != first
    after = {t["key"].split("-")[-1] for t in listed(small_demo)["configurations"]}
    assert after == {"debug", "relwithdebinfo"} and (mine / "notes.txt").read_text() == "mine"

    again = build(small_demo, "--cuda", "none")  # the dropped configuration, from nothing, right
    assert "no tree of" in again.stderr and checksum(small_demo) == edited
    assert git(small_demo, "status", "--porcelain") == "M c10/core/unit_00.cpp"

    keep = inv("clean", "--keep", "2", "--path", str(small_demo), check=True)
    assert "cpu-debug" in keep.stderr and "last used" in keep.stderr and "freed" in keep.stderr
    assert {t["key"].split("-")[-1] for t in listed(small_demo)["configurations"]} == {"release", "relwithdebinfo"}
    assert checksum(small_demo) == edited and (mine / "notes.txt").read_text() == "mine"


def store_entry(store: Path, name: str) -> Path:
    entry = store / name
    (entry / "lib").mkdir(parents=True)
    (entry / "lib" / "libmkl.a").write_bytes(os.urandom(50_000))
    (entry / shared.COMPLETE).touch()
    return entry


def test_clean_all_reaches_a_slot_and_its_tree_a_finished_bisection_and_the_stores_idle_entries(
        small_demo, tmp_path, monkeypatch):
    monkeypatch.delenv("TORCHBUILD_PATHS_CACHE_DIR")  # the test's own cache dir (its HOME's), not the run's
    cache = load(small_demo, dict(os.environ)).cache_root
    slot = slots.slot_path(cache, small_demo, 1)
    slots.sync(small_demo, slot)  # as `matrix` makes a slot for a session beside another
    build(slot, "--cuda", "none")
    place = worktree.home(small_demo)
    worktree.add(small_demo, place / "worktree", git(small_demo, "rev-parse", "HEAD"))
    worktree.write_state(place, {"result": [git(small_demo, "rev-parse", "HEAD")], "steps": [{}, {}]})
    idle, linked = store_entry(cache / "store", "idle-1.0-py3-none-any"), store_entry(cache / "store", "used-1.0")
    os.link(linked / "lib" / "libmkl.a", tmp_path / "an-envs-file")
    mine = cache / "slots" / "my-own-file"
    mine.write_text("mine")

    found = {o["kind"]: o for o in listed(small_demo)["others"]}
    assert found["slot"]["path"] == str(slot) and found["slot"]["state"] == "idle"
    assert [t["key"].endswith("-cpu-release") for t in found["slot"]["configurations"]] == [True]
    assert found["bisection"]["state"] == "finished" and found["bisection"]["idle"] == [str(place)]
    assert found["store"]["idle"] == [str(idle)]
    assert "2 unpacked wheel(s), 1 linked by no env" in found["store"]["state"]

    dry = inv("clean", "--all", "--dry-run", "--path", str(small_demo), check=True)
    assert slot.exists() and place.exists() and idle.exists() and "nothing was removed" in dry.stderr
    done = inv("clean", "--all", "--path", str(small_demo), check=True)
    for what in (f"slot {slot}", f"bisection {place}", "store idle-1.0-py3-none-any"):
        assert f"removed {what}" in done.stderr, done.stderr
    assert not slot.exists() and not place.exists() and not idle.exists()
    assert (linked / "lib" / "libmkl.a").exists() and mine.read_text() == "mine"
    assert len(git(small_demo, "worktree", "list").splitlines()) == 1  # git's record of it went with it
    assert git(small_demo, "status", "--porcelain") == "" and not (small_demo / "build").exists()
    assert {o["kind"] for o in listed(small_demo)["others"]} <= {"store", "compiler cache"}
