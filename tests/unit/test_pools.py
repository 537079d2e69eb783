"""Memory-aware scheduling (builder/pools.py): the demo's heavy unit (FlashAttentionKernel.cpp, about three
times the memory of the others, as PyTorch's flash-attention kernels are) in a ninja job pool of its own
under a memory cap, every other step at MAX_JOBS; with a CMake that cannot pool one source, MAX_JOBS comes
down for all."""

from __future__ import annotations

from torchbuild.builder import pools

GIB, MIB = 2 ** 30, 2 ** 20


def test_the_pool_holds_the_units_over_their_share_as_many_at_once_as_the_memory_fits():
    peaks = {"a.o": 100 * MIB, "b.o": 120 * MIB, "c.o": 90 * MIB, "flash.o": 5 * GIB}
    pool = pools.plan_pool(peaks, 16 * GIB, 8)  # a share of 2 GiB a job
    assert pool is not None and dict(pool.units) == {"flash.o": 5 * GIB} and pool.depth == 3
    assert 3 * 5 * GIB + 5 * 100 * MIB <= 16 * GIB < 4 * 5 * GIB + 4 * 100 * MIB  # three fit beside the rest, four not
    assert pools.plan_pool(peaks, 64 * GIB, 8) is None  # 8 GiB a job: every unit fits its share
    assert pools.jobs_for_all(peaks, 16 * GIB, 8) == 3  # no pool: MAX_JOBS as the heaviest needs
    assert pools.per_job(peaks) == int(110 * MIB * 1.5)  # half again the median, for MAX_JOBS from memory


def test_nvccs_own_processes_are_one_compile_and_their_memory_counts():
    """Issue 58, item 5: the matrix said "at most 7 compilers at once (budget 2)", counting nvcc's cudafe++, cicc,
    ptxas and host cc1plus apart from nvcc; two compiles ran."""
    from torchbuild.usage import tree_usage

    mib = 2**20
    table = {10: (1, "ninja", 5 * mib),
             11: (10, "nvcc", 10 * mib), 12: (11, "cicc", 300 * mib), 13: (11, "ptxas", 50 * mib),
             14: (11, "cc1plus", 100 * mib),
             15: (10, "c++", 2 * mib), 16: (15, "cc1plus", 200 * mib)}
    compiles, rss, compilers_rss = tree_usage(10, table)
    assert compiles == 2
    assert rss == 667 * mib and compilers_rss == 660 * mib
