"""split-quotient-runs (gpu2cpu): a thread loop that divides its linear index by an argument runs
per quotient, the quotient a scalar and the remainder affine in the counter (Rodinia srad_v1's
``row = (ei + 1) % Nr - 1; col = (ei + 1) / Nr``). Checked: the shape (no division left in the
runs, the remainder's boundary thread decided by range, contiguous loads instead of gathers) and
the values against NumPy and the emulator through C and LLVM, for divisors below the threshold
(the loop as written), above the block, and numerators that are negative or wrap for some
threads (the loop as written)."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import assert_same_as_emulator
from polypy.driver.pipelines import to_cpu
from polypy.driver.source import load
from gpu2cpu.thread_loops import let_definitions
from polypy.ir import nodes as n
from polypy.ir.queries import substitute_lets
from polypy.ir.visitor import walk, walk_block

SOURCE = r"""
// srad_v1's coordinates of a linear index, and its neighbours' loads through them.
__global__ void gather(const int* below, const float* img, float* out, int nr, long long ne)
{
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    int r = (e + 1) % nr - 1;
    int c = (e + 1) / nr;
    if ((e + 1) % nr == 0) {
        r = nr - 1;
        c = c - 1;
    }
    if (e < ne)
        out[e] = img[below[r] + nr * c] + img[r + nr * c];
}

// The same coordinates of any offset: numerators that are negative or wrap for some threads.
__global__ void coords(int* row, int* col, int nr, int off, long long ne)
{
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    int r = (e + off) % nr - 1;
    int c = (e + off) / nr;
    if ((e + off) % nr == 0) {
        r = nr - 1;
        c = c - 1;
    }
    if (e < ne) {
        row[e] = r;
        col[e] = c;
    }
}
"""


def _module():
    return load(None, text=SOURCE)


def _runs(cpu: n.Kernel) -> list[n.For]:
    """The thread loops inside a ``while`` (the runs of one quotient)."""
    return [x for w in walk(cpu) if isinstance(w, n.While)
            for x in walk_block(w.body) if isinstance(x, n.For) and x.kind == "threads"]


def test_the_runs_divide_nothing_and_read_contiguously():
    report: list = []
    cpu = to_cpu(_module().kernel("gather"), report=report)
    runs = _runs(cpu)
    assert runs, "no thread loop runs per quotient"
    for loop in runs:
        assert not [x for x in walk_block(loop.body) if isinstance(x, n.Binary) and x.op in ("div", "rem")]
    # The thread whose remainder is 0 (the `if`) is a range of its own; in the others `img[r + nr *
    # c]` is read at the counter plus a value of the run, no longer through `r` and `c`.
    # (The run's own bindings, `var r_1: i64 = B - q * nr + tx`, are looked through: they are the
    # counter plus a value of the run, named.)
    def through_coordinates(i: n.Expr, values) -> bool:
        return any(isinstance(v, n.Var) and v.name.startswith(("r", "c")) for v in walk(substitute_lets(i, values)))

    direct = [loop for loop in runs if not any(isinstance(x, n.If) for x in walk_block(loop.body))
              and any(isinstance(x, n.Load) and x.buffer == "img"
                      and not through_coordinates(x.index[-1], let_definitions(loop.body, len(loop.body)))
                      for x in walk_block(loop.body))]
    assert len(direct) >= 2  # before and after the boundary thread
    assert any("run per value of the quotient" in d.message for d in report)


def _llvm(name: str, grid: int, block: int, args: dict) -> dict:
    module = polypy.compile(None, text=SOURCE, threads=2)
    got = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    module[name][grid, block](**got)
    return got


@pytest.mark.parametrize("nr,ne,block", [(502, 3000, 512), (37, 4096, 128), (1000, 4096, 256), (5, 4096, 256)])
def test_gathers_match_numpy_and_the_emulator_through_c_and_llvm(nr, ne, block):
    grid = 4096 // block
    rng = np.random.default_rng(nr)
    below = np.minimum(np.arange(1, nr + 1, dtype=np.int32), nr - 1)  # srad's iS
    cols = (4096 + nr) // nr + 1
    img = rng.standard_normal(nr * cols).astype(np.float32)
    args = {"below": below, "img": img, "out": np.zeros(4096, np.float32), "nr": nr, "ne": np.int64(ne)}
    got = assert_same_as_emulator(_module().kernel("gather"), grid, block, args)
    e = np.arange(ne) + 1
    r, c = e % nr - 1, e // nr
    r[e % nr == 0], c[e % nr == 0] = nr - 1, c[e % nr == 0] - 1
    np.testing.assert_array_equal(got["out"][:ne], img[below[r] + nr * c] + img[r + nr * c])
    np.testing.assert_array_equal(_llvm("gather", grid, block, args)["out"], got["out"])


@pytest.mark.parametrize("nr,off,ne", [
    (64, -200, 4096),    # negative numerators in the first threads: the loop as written there
    (300, 2**31 - 1500, 4096),  # the sum wraps from thread 1500 on
    (-40, 1, 4096),      # a negative divisor: the loop as written
])
def test_coordinates_of_any_offset_match_the_emulator_through_c_and_llvm(nr, off, ne):
    grid, block = 16, 256
    args = {"row": np.full(4096, -99, np.int32), "col": np.full(4096, -99, np.int32), "nr": nr, "off": off,
            "ne": np.int64(ne)}
    got = assert_same_as_emulator(_module().kernel("coords"), grid, block, args)
    a = (np.arange(4096, dtype=np.int64) + off + 2**31) % 2**32 - 2**31  # the 32-bit sum, wrapped
    q = np.trunc(a / nr).astype(np.int64)
    rem = a - q * nr
    r, c = rem - 1, q.copy()
    r[rem == 0], c[rem == 0] = nr - 1, q[rem == 0] - 1
    np.testing.assert_array_equal(got["row"], r.astype(np.int32))
    np.testing.assert_array_equal(got["col"], c.astype(np.int32))
    jit = _llvm("coords", grid, block, args)
    for name in ("row", "col"):
        np.testing.assert_array_equal(jit[name], got[name], err_msg=name)
