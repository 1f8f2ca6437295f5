"""The race checks and the shared-memory dataflow ask isl small questions (issues 36/37).

Rodinia's dwt2d (``fdwt53.cu``) has three versions of its transform, picked per block by where
the block lies (``if (atBottomBoundary) ... else if (atRightBoundary) ... else ...``), each a
loop holding four barriers around loops of shared accesses: 144 shared accesses and 12 barriers
in a 37-dimensional instance space. The warp race check (``lockstep-warps``) and the dataflow
(``forward-shared-stores``, ``eliminate-dead-shared-stores``) built, for every pair of accesses,
every barrier's "between" relation over the whole copy space, and subtracted their union:
translating the file took more than 300 s. Now each barrier's relation is built inside the pair's
own instances (``Copies.between_within``), barrier by barrier until nothing is left, and pairs of
two blocks (two versions) leave before any barrier is asked about. The kernel below is our own,
of the same shape; the work counted is the number of whole-space barrier relations built.
"""
from __future__ import annotations

import pytest

import polypy
from polypy.poly import dead_shared_stores, forwardable_loads
from polypy.poly.block_races import block_races, may_warp_race_arrays
from polypy.poly.relations import Copies

VERSIONS = r"""
#define W 32
#define S (W + 2)

// One window step of a lifting transform on rows of W + 2 values (a halo on each side).
template <bool EDGE>
__device__ void step(int *buf, const int *in, int *out, int n, int first, int steps)
{
    for (int w = 0; w < steps; w++) {
        for (int r = 0; r < 4; r++) {
            int y = first + w * 4 + r;
            buf[r * S + threadIdx.x + 1] = (!EDGE || y < n) ? in[y * n + threadIdx.x] : 0;
        }
        if (SYNC || !EDGE)
            __syncthreads();
        for (int r = 0; r < 4; r++)
            buf[4 * S + r * W + threadIdx.x] = buf[r * S + threadIdx.x] - buf[r * S + threadIdx.x + 2];
        __syncthreads();
        for (int r = 0; r < 4; r++)
            buf[r * S + threadIdx.x + 1] += buf[4 * S + r * W + threadIdx.x] / 2;
        __syncthreads();
        for (int r = 0; r < 4; r++) {
            int y = first + w * 4 + r;
            if (!EDGE || y < n)
                out[y * n + blockIdx.x * W + threadIdx.x] = buf[r * S + threadIdx.x + 1];
        }
        __syncthreads();
    }
}

__global__ void windows(const int *in, int *out, int n, int steps)
{
    __shared__ int buf[4 * S + 4 * W];
    int first = blockIdx.y * 4 * steps;
    if (blockIdx.x == 0)
        step<true>(buf, in, out, n, first, steps);
    else if ((blockIdx.y + 1) * 4 * steps >= n)
        step<true>(buf, in, out, n, first, steps);
    else
        step<false>(buf, in, out, n, first, steps);
}
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """The kernel with every barrier (``SYNC`` 1) and with the edge versions' first one missing."""
    path = tmp_path_factory.mktemp("versions") / "versions.cu"
    path.write_text(VERSIONS)
    return {sync: polypy.load(str(path), defines={"SYNC": sync}).kernel("windows") for sync in ("1", "0")}


@pytest.fixture
def whole_space_relations(monkeypatch):
    """Counts the barrier relations built over the whole copy space (``Copies.between``)."""
    calls: list[tuple] = []
    real = Copies.between

    def counting(self, *args, **kwargs):
        calls.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Copies, "between", counting)
    return calls


def test_the_race_check_of_a_kernel_with_versions_asks_within_each_pair(kernels, whole_space_relations) -> None:
    # Before: 6,697 whole-space relations here (6,048 of them in block_races), 4,121 in the next
    # test, 577 in the dataflow's.
    assert block_races(kernels["1"]) == []
    assert may_warp_race_arrays(kernels["1"]) == frozenset()
    assert whole_space_relations == []


def test_a_race_in_the_edge_versions_is_still_found(kernels, whole_space_relations) -> None:
    # Without the first barrier, thread t + 1's load into buf[r * S + t + 2] races with thread t's
    # read of it, one warp, in each edge version (block 0, and block 1 of the last row): the same
    # two races as before the change.
    races = block_races(kernels["0"])
    assert [(r.same_warp, r.kinds, r.first, r.second) for r in races] == [
        (True, ("write", "read"), (("tx", 0), ("bx", bx), ("by", 0)), (("tx", 1), ("bx", bx), ("by", 0)))
        for bx in (0, 1)]
    assert whole_space_relations == []


def test_the_dataflow_of_a_kernel_with_versions_asks_within_each_pair(kernels, whole_space_relations) -> None:
    k = kernels["1"]
    assert [str(f.load) for f in forwardable_loads(k)] == []
    assert dead_shared_stores(k) == []
    assert whole_space_relations == []
