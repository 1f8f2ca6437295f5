"""divide-in-double (gpu2cpu): 32-bit ``/`` and ``%`` by an argument, in thread loops, computed in
f64 so that the loops vectorize; and the 64-bit guard ``(i64)i < n`` that became loop bounds
(``thread_affine``'s clamp) in the same kernels, Rodinia srad's shape. Checked: where the pass
applies and where it must not, and the values -- INT_MIN / -1, negative operands, divisors up to
2**31, unsigned operands above 2**31, 64-bit bounds beyond 2**32 and below zero -- against the
emulator through C and LLVM, on several block shapes."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import assert_same_as_emulator, run_emulated
from polypy.driver.pipelines import to_cpu
from polypy.driver.source import load
from polypy.ir import nodes as n
from polypy.ir.visitor import walk, walk_block

SOURCE = r"""
__global__ void divmod(const int* x, int* q, int* r, int d, long long n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        q[i] = x[i] / d;
        r[i] = x[i] % d;
    }
}

__global__ void udivmod(const unsigned* x, unsigned* q, unsigned* r, unsigned d, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        q[i] = x[i] / d;
        r[i] = x[i] % d;
    }
}

// srad's coordinates of a linear index, and a tree reduction's `(t + 1) % s` (left alone: `s`
// is a loop variable, a constant wherever the loop is unrolled).
__global__ void coords(int* row, int* col, int* tree, int nr, long long ne)
{
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    int rr = (e + 1) % nr - 1;
    int cc = (e + 1) / nr;
    if ((e + 1) % nr == 0) {
        rr = nr - 1;
        cc = cc - 1;
    }
    if (e < ne) {
        row[e] = rr;
        col[e] = cc;
        int hits = 0;
        for (int s = 2; s <= 16; s *= 2)
            if ((threadIdx.x + 1) % s == 0)
                hits++;
        tree[e] = hits;
    }
}
"""

INT_MIN = np.iinfo(np.int32).min
INT_MAX = np.iinfo(np.int32).max


def _module():
    return load(None, text=SOURCE)


def _innermost(kernel: n.Kernel) -> list[n.For]:
    return [x for x in walk(kernel) if isinstance(x, n.For) and x.kind == "threads"
            and not any(isinstance(y, n.For) and y.kind == "threads" for y in walk_block(x.body))]


def _integer_divisions(loop: n.For) -> list[n.Binary]:
    return [x for x in walk_block(loop.body) if isinstance(x, n.Binary) and x.op in ("div", "rem")
            and x.type.is_int]


def _fast_loops(cpu: n.Kernel) -> list[n.For]:
    """The innermost thread loops outside the fallbacks of run-time checks (the original code)."""
    fallbacks = {id(y) for x in walk(cpu) if isinstance(x, n.If) and x.orelse
                 for s in x.orelse for y in walk(s)}
    return [loop for loop in _innermost(cpu) if id(loop) not in fallbacks]


def test_divisions_by_arguments_are_computed_in_double_and_reported():
    report: list = []
    cpu = to_cpu(_module().kernel("divmod"), report=report)
    loops = _fast_loops(cpu)
    assert loops
    for loop in loops:
        assert not _integer_divisions(loop), "an integer division is left in a fast thread loop"
        assert any(isinstance(x, n.Binary) and x.op == "div" and x.type.name == "f64" for x in walk_block(loop.body))
    assert any("division(s) by a variable computed in double precision" in d.message for d in report)


def test_the_64_bit_guard_becomes_the_loop_bounds():
    cpu = to_cpu(_module().kernel("divmod"))
    loops = _fast_loops(cpu)
    # No `if` on the counter is left: the guard `(i64)i < n` is the loop's upper bound.
    assert all(not any(isinstance(x, n.If) for x in walk_block(loop.body)) for loop in loops)
    assert any(isinstance(loop.stop, n.Var) for loop in loops)


def test_loop_variables_and_constants_as_divisors_are_left_to_the_compiler():
    cpu = to_cpu(_module().kernel("coords"))
    loops = _fast_loops(cpu)
    kept = [x for loop in loops for x in _integer_divisions(loop)]
    # `(threadIdx.x + 1) % s`: the loop variable s (s_1, ... in the copies split-quotient-runs
    # makes); srad's `% nr` and `/ nr` are rewritten.
    assert kept and all({v.name.split("_")[0] for v in walk(x.b) if isinstance(v, n.Var)} == {"s"} for x in kept)


def _divmod_args(d: int, size: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.integers(INT_MIN, INT_MAX, size=size, dtype=np.int64, endpoint=True).astype(np.int32)
    x[:8] = [INT_MIN, INT_MAX, 0, -1, 1, d, -d if d != INT_MIN else 0, INT_MIN + 1]
    return {"x": x, "q": np.zeros(size, np.int32), "r": np.zeros(size, np.int32), "d": d}


@pytest.mark.parametrize("d", [1, -1, 3, -7, 65536, INT_MAX, INT_MIN, 1 << 30])
@pytest.mark.parametrize("block", [32, 128, 256])
def test_signed_quotients_and_remainders_match_the_emulator_through_c(d, block):
    size = 1000
    args = dict(_divmod_args(d, size, seed=abs(d) % 97), n=size)
    grid = (size + block - 1) // block
    got = assert_same_as_emulator(_module().kernel("divmod"), grid, block, args)
    x = args["x"].astype(np.int64)
    want_q = np.where(x == INT_MIN, np.where(d == -1, INT_MIN, np.trunc(x / d)), np.trunc(x / d)).astype(np.int64)
    np.testing.assert_array_equal(got["q"], want_q.astype(np.int32))
    np.testing.assert_array_equal(got["r"], (x - want_q * d).astype(np.int32))


@pytest.mark.parametrize("d", [1, 3, 1 << 31, 0xFFFFFFFF, 12345])
def test_unsigned_quotients_and_remainders_match_the_emulator_through_c(d):
    size = 700
    rng = np.random.default_rng(d % 1000)
    x = rng.integers(0, 0xFFFFFFFF, size=size, dtype=np.uint64, endpoint=True).astype(np.uint32)
    x[:4] = [0xFFFFFFFF, 0x80000000, 0, d]
    args = {"x": x, "q": np.zeros(size, np.uint32), "r": np.zeros(size, np.uint32), "d": np.uint32(d), "n": size}
    got = assert_same_as_emulator(_module().kernel("udivmod"), (size + 63) // 64, 64, args)
    np.testing.assert_array_equal(got["q"], (x.astype(np.uint64) // d).astype(np.uint32))
    np.testing.assert_array_equal(got["r"], (x.astype(np.uint64) % d).astype(np.uint32))


@pytest.mark.parametrize("ne", [0, -5, 1000, 777, (1 << 32) + 3])
@pytest.mark.parametrize("nr", [1, 7, 502, -3])
def test_coordinates_and_64_bit_bounds_match_the_emulator_through_c_and_llvm(ne, nr):
    grid, block = 8, 128
    size = grid * block  # every thread's element exists, whatever ne says
    args = {"row": np.full(size, -99, np.int32), "col": np.full(size, -99, np.int32),
            "tree": np.full(size, -99, np.int32), "nr": nr, "ne": np.int64(ne)}
    kernel = _module().kernel("coords")
    want = assert_same_as_emulator(kernel, grid, block, args)
    assert (want["row"] != -99).sum() == max(0, min(ne, size))
    module = polypy.compile(None, text=SOURCE, threads=2)
    got = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    module["coords"][grid, block](**got)
    for name in ("row", "col", "tree"):
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("d", [-1, 5, INT_MIN])
def test_signed_division_through_llvm(d):
    size = 600
    args = dict(_divmod_args(d, size, seed=5), n=size)
    want = run_emulated(_module().kernel("divmod"), (size + 63) // 64, 64, args)
    module = polypy.compile(None, text=SOURCE, threads=2)
    got = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    module["divmod"][(size + 63) // 64, 64](**got)
    np.testing.assert_array_equal(got["q"], want["q"])
    np.testing.assert_array_equal(got["r"], want["r"])
