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

import islpy as isl
import numpy as np
import pytest

import polypy
from polypy.poly import dead_shared_stores, forwardable_loads
from polypy.poly.model import build_model
from polypy.poly.block_races import block_races, may_warp_race_arrays
from polypy.poly.relations import Copies
from c_support import run_c, run_emulated

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


# dwt2d's own selection: the versions picked by where the block's window ends,
# ``(i32)((blockIdx.x + 1u) * W + 1u) >= n``, an unsigned product that wraps over a symbolic grid.
WRAPPED = VERSIONS[:VERSIONS.index("__global__")] + r"""
__global__ void windows(const int *in, int *out, int n, int steps)
{
    __shared__ int buf[4 * S + 4 * W];
    int first = blockIdx.y * 4 * steps;
    const int maxX = (blockIdx.x + 1) * W + 1;
    const int maxY = (blockIdx.y + 1) * 4 * steps + 1;
    if (maxY >= n)
        step<true>(buf, in, out, n, first, steps);
    else if (maxX >= n)
        step<true>(buf, in, out, n, first, steps);
    else
        step<false>(buf, in, out, n, first, steps);
}
"""


@pytest.fixture(scope="module")
def wrapped(tmp_path_factory):
    """``WRAPPED`` with every barrier (``SYNC`` 1) and with the edge versions' first one missing."""
    path = tmp_path_factory.mktemp("wrapped") / "wrapped.cu"
    path.write_text(WRAPPED)
    return {sync: polypy.load(str(path), defines={"SYNC": sync}).kernel("windows") for sync in ("1", "0")}


def test_versions_picked_by_a_wrapping_bound_have_domains_without_divisions(wrapped) -> None:
    # The comparisons' operands that wrap are block values (``_Builder.wrapped_operand``): each
    # shared access's domain is one or two pieces without floor divisions. Before: up to five
    # pieces with two divisions by 2**32 (2**27 for the x bound), 36.5 s CPU for the passes of
    # the GPU form on this kernel, 4.0 s after (load 1-2 on 2 cores).
    k = wrapped["1"]
    model = build_model(k)
    shapes = [(len(a.domain.get_basic_sets()), max(b.dim(isl.dim_type.div) for b in a.domain.get_basic_sets()))
              for a in model.accesses if k.space(a.buffer) == "shared"]
    assert len(shapes) == 24
    assert max(divs for _, divs in shapes) == 0
    assert max(pieces for pieces, _ in shapes) <= 2
    names = [bv.name for bv in model.block_values]
    assert "((i32)((blockIdx.x + 1u) * 32u + 1u))" in names
    assert "((i32)((blockIdx.y + 1u) * 4u * (u32)steps + 1u))" in names


def test_the_checks_of_versions_picked_by_a_wrapping_bound_keep_their_answers(wrapped, whole_space_relations) -> None:
    assert block_races(wrapped["1"]) == []
    assert may_warp_race_arrays(wrapped["1"]) == frozenset()
    assert [str(f.load) for f in forwardable_loads(wrapped["1"])] == []
    assert dead_shared_stores(wrapped["1"]) == []
    # Without the first barrier both edge versions race, one warp: thread 1's load into
    # buf[r * S + 2] and thread 0's read of it. (Before, the second version's race was not
    # reported: a race is reported where it happens at every launch of the range, and the exact
    # bounds made the second version run at no block of the smallest one; as block values, some
    # block may run it at every launch.)
    races = block_races(wrapped["0"])
    assert [(r.same_warp, r.kinds, r.first, r.second) for r in races] == [
        (True, ("write", "read"), (("tx", 0), ("bx", 0), ("by", 0)), (("tx", 1), ("bx", 0), ("by", 0)))] * 2
    assert whole_space_relations == []


# Two versions picked by the same wrapping bound, run: the edge blocks mirror nothing and add,
# the others subtract, both reading the next thread's element after a barrier.
EDGES = r"""
#define W 32
__global__ void edges(const int *in, int *out, int n)
{
    __shared__ int buf[W];
    const int maxX = (blockIdx.x + 1) * W + 1;
    const int x = blockIdx.x * W + threadIdx.x;
    if (maxX >= n) {
        buf[threadIdx.x] = x < n ? in[x] : 0;
        __syncthreads();
        if (x < n)
            out[x] = buf[threadIdx.x] * 2 + buf[(threadIdx.x + 1) % W];
    } else {
        buf[threadIdx.x] = in[x];
        __syncthreads();
        out[x] = buf[threadIdx.x] - buf[(threadIdx.x + 1) % W];
    }
}
"""


def _edges_reference(x: np.ndarray, n: int, grid: int) -> np.ndarray:
    out = np.zeros(grid * 32, np.int32)
    for b in range(grid):
        v = np.array([x[b * 32 + t] if b * 32 + t < n else 0 for t in range(32)], np.int64)
        nxt = np.roll(v, -1)
        edge = (b + 1) * 32 + 1 >= n
        for t in range(32):
            if b * 32 + t < n:
                out[b * 32 + t] = 2 * v[t] + nxt[t] if edge else v[t] - nxt[t]
    return out


def test_versions_picked_by_a_wrapping_bound_run_as_numpy_says(tmp_path) -> None:
    path = tmp_path / "edges.cu"
    path.write_text(EDGES)
    gpu = polypy.load(str(path)).kernel("edges")
    mod = polypy.compile(str(path))
    rng = np.random.default_rng(36)
    for n, grid in ((97, 4), (64, 2), (40, 2)):  # block 2 of 4 at the edge but full; the last full; a partial one
        x = rng.integers(-1000, 1000, grid * 32).astype(np.int32)
        args = {"in": x, "out": np.zeros(grid * 32, np.int32), "n": n}
        want = _edges_reference(x, n, grid)
        llvm = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}
        mod.edges[grid, 32](*llvm.values())
        for got in (run_emulated(gpu, grid, 32, args), run_c(gpu, grid, 32, args), llvm):
            np.testing.assert_array_equal(got["out"], want)
