"""localize-uniform-loads (gpu2cpu): the taps every thread of a loop reads from a read-only array
are copied once before the loop, into an array of the block function's frame (``Buffer.frame``).
Checked: where the pass applies and where it must not (a store that may alias the taps before
the read, a conditional read, too many taps, an array the kernel writes), the C output, and
results against NumPy and the emulator through both backends on several block shapes, bounds
checked included."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import assert_same_as_emulator, run_c
from polypy.driver.library import emit_kernels
from gpu2cpu.localize_uniform_loads import MAX_TABLE, localize_uniform_loads
from polypy.driver.pipelines import to_cpu
from polypy.driver.source import load
from polypy.ir import nodes as n
from polypy.ir.parser import parse_kernel
from polypy.ir.printer import print_kernel
from polypy.ir.visitor import walk, walk_block

# A 5-tap filter with a bias tap w[5] (written for this test): every thread reads w[0..4] in a
# loop of constant trip count and w[5] at a constant index.
SMOOTH = r"""
#ifndef T
#define T float
#endif
__global__ void smooth(const T* in, const T* w, T* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        T acc = w[5];
        for (int k = 0; k < 5; ++k)
            acc += w[k] * (i + k < n ? in[i + k] : (T)0);
        BEFORE
        out[i] = acc;
    }
}
"""


def _smooth(real: str = "float") -> n.Kernel:
    return load(None, text=f"#define T {real}\n" + SMOOTH.replace("BEFORE", "")).kernel("smooth")


def _thread_loops(kernel: n.Kernel) -> list[n.For]:
    """The innermost loops over threads."""
    return [x for x in walk(kernel) if isinstance(x, n.For) and x.kind == "threads"
            and not any(isinstance(y, n.For) and y.kind == "threads" for y in walk_block(x.body))]


def _reads(loop: n.For, buffer: str) -> list[n.Load]:
    return [x for x in walk_block(loop.body) if isinstance(x, n.Load) and x.buffer == buffer]


def _want(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    padded = np.concatenate([x.astype(np.float64), np.zeros(4)])
    return w[5] + sum(w[k] * padded[k:k + len(x)] for k in range(5))


def test_the_taps_are_copied_once_before_the_loop_and_the_bias_is_a_local():
    report: list = []
    cpu = to_cpu(_smooth(), report=report)
    lines = [d.format() for d in report if "read once before the loop" in d.format()]
    assert lines and all("w[5], w[0..4] (into w_tab)" in line for line in lines), lines
    tables = [b for b in cpu.buffers if b.frame]
    assert [(b.space, int(b.shape[0].value)) for b in tables] == [("shared", 5)]
    table = tables[0].name
    loops = [loop for loop in _thread_loops(cpu) if _reads(loop, table)]
    assert loops, "no loop reads the copy"
    for loop in loops:
        assert not _reads(loop, "w")  # every read of w in the loop goes to the copy or the local
    # the bias tap: one local before the loop
    assert any(isinstance(x, n.Decl) and isinstance(x.init, n.Load) and x.init.buffer == "w"
               and isinstance(x.init.index[0], n.Const) and x.init.index[0].value == 5 for x in walk(cpu))
    # printed and parsed back as it is
    printed = print_kernel(cpu)
    assert f"frame shared {table}: f32[5]" in printed
    assert print_kernel(parse_kernel(printed)) == printed
    # the copy is the block function's own array, not scratch memory from the launcher
    text = emit_kernels([cpu])
    assert f"float {table}[5];" in text
    assert f"* POLYPY_RESTRICT {table}" not in text


def test_a_store_that_may_alias_the_taps_before_they_are_read_keeps_the_reads():
    """A thread's own store to out (which may be w's storage) before its reads of w: they must see
    it. With __restrict__ on w nothing else can be w's storage, and the copy is made."""
    early = SMOOTH.replace("T acc = w[5];", "out[i] = 0.0f; T acc = w[5];").replace("BEFORE", "")
    cpu = to_cpu(load(None, text=early).kernel("smooth"))
    assert not any(b.frame for b in cpu.buffers)
    assert not any(isinstance(x, n.Decl) and x.name.startswith("w_u") for x in walk(cpu))
    restricted = early.replace("const T* w", "const T* __restrict__ w")
    assert any(b.frame for b in to_cpu(load(None, text=restricted).kernel("smooth")).buffers)
    # a store after the reads (the filter's own out[i] = acc) does not matter
    assert any(b.frame for b in to_cpu(_smooth()).buffers)


def test_a_read_after_a_store_that_may_alias_it_stays_a_read_of_memory():
    """w[5] read first (copied), then out[i] stored (out may be w's storage), then w[5] read again
    under a condition: the second read is the same expression, but it must see the thread's own
    store, so it still loads w."""
    text = SMOOTH.replace("BEFORE", "out[i] = acc; if (in[i] > (T)0) acc += w[5];")
    cpu = to_cpu(load(None, text=text).kernel("smooth"))
    assert any(isinstance(x, n.Decl) and x.name.startswith("w_u") for x in walk(cpu))  # the first read
    localized = [loop for loop in _thread_loops(cpu) if _reads(loop, "w_tab")]
    assert localized
    for loop in localized:  # (the run-time check's fallback loop is left as written anyway)
        late = [x for x in _reads(loop, "w") if isinstance(x.index[0], n.Const) and x.index[0].value == 5]
        assert late, "the read after the store no longer reads w"


def test_conditional_reads_too_many_taps_and_written_arrays_are_left_alone():
    conditional = SMOOTH.replace("acc += w[k] * (i + k < n ? in[i + k] : (T)0);",
                                 "if (in[i] > (T)0) acc += w[k] * in[i];").replace("T acc = w[5];", "T acc = 0;")
    cpu = to_cpu(load(None, text=conditional.replace("BEFORE", "")).kernel("smooth"))
    assert not any(b.frame for b in cpu.buffers)
    wide = SMOOTH.replace("k < 5", f"k < {MAX_TABLE + 1}").replace("T acc = w[5];", "T acc = 0;")
    cpu = to_cpu(load(None, text=wide.replace("BEFORE", "")).kernel("smooth"))
    assert not any(b.frame for b in cpu.buffers)
    written = SMOOTH.replace("const T* w", "T* w").replace("BEFORE", "if (i == 0) w[6] = acc;")
    cpu = to_cpu(load(None, text=written).kernel("smooth"))
    assert not any(b.frame for b in cpu.buffers)
    # the pass alone gives a kernel it cannot change back as it is
    assert localize_uniform_loads(cpu) is cpu


@pytest.mark.parametrize("block", [(32, 1, 1), (24, 1, 1), (64, 1, 1), (256, 1, 1)])
@pytest.mark.parametrize("real", ["float", "double"])
def test_results_equal_numpy_and_the_emulator_through_both_backends(block, real):
    dtype = np.float32 if real == "float" else np.float64
    rng = np.random.default_rng(3)
    n_ = 301
    x = rng.standard_normal(n_).astype(dtype)
    w = rng.standard_normal(6).astype(dtype)
    grid = (-(-n_ // block[0]), 1, 1)
    args = {"in": x, "w": w, "out": np.zeros(n_, dtype), "n": np.int32(n_)}
    tol = dict(rtol=1e-5, atol=1e-5) if real == "float" else dict(rtol=1e-12, atol=1e-12)
    kernel = _smooth(real=real)
    got = assert_same_as_emulator(kernel, grid, block, args, rtol=0.0, atol=0.0)
    np.testing.assert_allclose(got["out"], _want(x, w), **tol)
    for options in (dict(cpp=True), dict(check_bounds=True)):
        np.testing.assert_allclose(run_c(kernel, grid, block, args, **options)["out"], _want(x, w), **tol)
    text = f"#define T {real}\n" + SMOOTH.replace("BEFORE", "")
    out = np.zeros(n_, dtype)
    polypy.compile(None, text=text).smooth[grid, block](x, w, out, n_)
    np.testing.assert_allclose(out, _want(x, w), **tol)
