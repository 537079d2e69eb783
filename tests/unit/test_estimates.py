"""`--explain`'s prices (issue 58 item 6): a step or configure of a kind the checkout never ran is priced from
what that kind cost on this machine, and a configure from earlier ones of its kind (CUDA or CPU, first or
again), never from another kind's."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from torchbuild.builder import history
from torchbuild.builder.explain import configure_seconds, estimate, kind_medians


def a_plan(root: Path, cuda: bool) -> SimpleNamespace:
    (root / "co" / "build").mkdir(parents=True, exist_ok=True)
    return SimpleNamespace(checkout=root / "co", log=root / "logs" / "key" / "now.log", history=root / "history.json",
                           toolkit=object() if cuda else None)


def recorded_build(root: Path, name: str, configure: float, kind: str | None) -> None:
    """A successful build's record, as record.write leaves it."""
    path = root / "logs" / "key" / f"{name}.record.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    profile = {"phases": [["configure", configure], ["compile and link", 10.0]],
               **({"configure kind": kind} if kind else {})}
    path.write_text(json.dumps({"result": "ok", "seconds": configure + 11, "profile": profile}))


def test_a_first_cuda_configure_is_priced_from_cuda_configures_never_from_cpu_ones(tmp_path):
    recorded_build(tmp_path, "a", 1.2, "configure a new CPU tree")
    recorded_build(tmp_path, "b", 0.3, "configure a CPU tree again")
    recorded_build(tmp_path, "c", 0.4, None)  # a record from before kinds were recorded
    cuda = a_plan(tmp_path, cuda=True)
    assert configure_seconds(cuda, first=True) == (0.4, "the median of the earlier builds'")  # nothing better
    history.add(cuda.history, {"configure a new CUDA tree": 18.0})
    history.add(cuda.history, {"configure a new CUDA tree": 16.0})
    machine = "the median of this machine's builds that configure a new CUDA tree"
    assert configure_seconds(cuda, first=True) == (17.0, machine)
    recorded_build(tmp_path, "d", 21.0, "configure a new CUDA tree")
    assert configure_seconds(cuda, first=True) == (21.0, machine.replace("machine", "checkout"))
    assert configure_seconds(a_plan(tmp_path, cuda=False), first=True)[0] == 1.2
    assert configure_seconds(a_plan(tmp_path, cuda=False), first=False)[0] == 0.3


def test_nvcc_units_no_tree_of_the_checkout_timed_are_priced_at_this_machines_cuda_median(tmp_path):
    plan = a_plan(tmp_path, cuda=True)
    (plan.checkout / "build" / ".ninja_log").write_text(
        "# ninja log v5\n0\t800\t1\tCMakeFiles/c10.dir/a.cpp.o\t1\n0\t600\t1\tCMakeFiles/c10.dir/b.cpp.o\t1\n")
    assert kind_medians(plan) == {"C++": 0.7}
    history.add(plan.history, {"CUDA": 6.0, "C++": 9.0, "configure a new CPU tree": 2.0})
    medians = kind_medians(plan)
    assert medians == {"CUDA": 6.0, "C++": 0.7}  # the checkout's own C++ steps, the machine's nvcc ones
    line, wall = estimate({}, {"CMakeFiles/c10_cuda.dir/k.cu.o", "CMakeFiles/c10.dir/c.cpp.o"}, 1, "the tree",
                          medians, (17.0, "the median of this machine's builds that configure a new CUDA tree"))
    assert wall == 6.0 + 0.7 + 17.0 and "17.0s of CMake configure (the median of this machine's" in line


def test_the_history_keeps_the_newest_samples_and_survives_a_damaged_file(tmp_path):
    path = tmp_path / "history.json"
    for i in range(history.KEEP + 5):
        history.add(path, {"CUDA": float(i)})
    assert history.read(path)["CUDA"] == [float(i) for i in range(5, history.KEEP + 5)]
    path.write_text("{not json")
    assert history.medians(path) == {}
    history.add(path, {"link": 1.0})
    assert history.medians(path) == {"link": 1.0}


def test_a_first_cuda_tree_adds_the_checkouts_own_nvcc_units_to_the_nearest_trees_steps(tmp_path):
    from torchbuild.builder.explain import cuda_units, kind_of

    from ..repo import write_repo

    repo = write_repo(tmp_path / "co", {"c10/cuda/k.cu": "\n", "c10/core/a.cpp": "\n", "third.cuh": "\n"}, "one")
    units = cuda_units(repo)
    assert units == ["CMakeFiles/cuda.dir/c10/cuda/k.cu.o"] and kind_of(units[0]) == "CUDA"
