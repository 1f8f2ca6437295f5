"""Rows of threads jammed into one serial loop (``polypy.passes.jam_threads``, run by block-shape
specialization): structure, exactness (bit-identical to the code before, through the JIT), and
the kernels it must leave alone. Never timings."""
from __future__ import annotations

import re

import numpy as np
import pytest

from test_llvm_support import ir, isolated_cache

from polypy.ir import nodes as n
from polypy.ir import parse_kernel, print_kernel
from polypy.ir.printer import format_expr
from polypy.ir.verifier import verify_kernel
from polypy.ir.visitor import walk
from polypy.passes.jam_threads import jam_thread_loops
from polypy.passes.specialize import specialize_block_shape

pytestmark = pytest.mark.usefixtures("isolated_cache")
assert isolated_cache

# matmul_tiled's compute nest in CPU form: each thread (ty, tx) sums a row of a times a column
# of the shared tile Bs into its own element of a per-thread buffer.
GEMM_CPU = """
    kernel mm(a: const f32*, b: const f32*, c: f32*) stage cpu {
      shared Bs: f32[16][16]
      local acc: f32[blockDim.y][blockDim.x]
      for threads ty: u32 = 0u to blockDim.y step 1u {
        for threads tx: u32 = 0u to blockDim.x step 1u {
          Bs[ty][tx] = b[ty * blockDim.x + tx]
          acc[ty][tx] = 0.5f
        }
      }
      for threads ty_1: u32 = 0u to blockDim.y step 1u {
        for threads tx_1: u32 = 0u to blockDim.x step 1u {
          var s: f32 = acc[ty_1][tx_1]
          for k: i32 = 0 to (i32)blockDim.y step 1 {
            s = s + a[(blockIdx.x * blockDim.y + ty_1) * 16u + (u32)k] * Bs[k][tx_1]
          }
          acc[ty_1][tx_1] = s
          GUARDED_STORE
        }
      }
    }
"""
STORE = "c[(blockIdx.x * blockDim.y + ty_1) * blockDim.x + tx_1] = acc[ty_1][tx_1]"


def _kernel(text: str = GEMM_CPU, store: str = STORE) -> n.Kernel:
    return parse_kernel(ir(text.replace("GUARDED_STORE", store)))


def _jammed_rows(k: n.Kernel) -> list[int]:
    """The steps of the loops over ty_1 (its copies included)."""
    return [int(x.step.value) for x in walk(k) if isinstance(x, n.For) and x.var.startswith("ty_1")]


def _run_jit(kernel: n.Kernel, grid: int, block: tuple[int, int, int], args: dict, scalars: dict | None = None) -> dict:
    from codegen.llvm import compile_module

    out = {k: v.copy() for k, v in args.items()}
    compile_module(n.Module((kernel,))).kernels[kernel.name].run((grid, 1, 1), block, 0, out, scalars or {}, threads=1)
    return out


def _declared(k: n.Kernel) -> list[str]:
    return [x.name if isinstance(x, n.Decl) else x.var for x in walk(k) if isinstance(x, (n.Decl, n.For))]


@pytest.mark.parametrize("block,step", [((16, 8, 1), 4), ((16, 6, 1), 2), ((16, 5, 1), 1), ((7, 12, 1), 4)])
def test_rows_of_a_gemm_nest_share_one_k_loop_and_compute_the_same_bits(block, step):
    generic = _kernel()
    k = specialize_block_shape(generic, block=block)
    verify_kernel(k)
    names = _declared(k)
    assert len(names) == len(set(names))  # names stay unique in the kernel
    assert _jammed_rows(k) == [step]
    if step > 1:
        loop = next(x for x in walk(k) if isinstance(x, n.For) and x.var == "k")
        # One k loop: one statement per row, each with its own accumulator.
        assert len(loop.body) == step and len({s.name for s in loop.body}) == step
    rng = np.random.default_rng(5)
    grid = 3
    args = {"a": rng.standard_normal(grid * block[1] * 16).astype(np.float32),
            "b": rng.standard_normal(block[1] * block[0]).astype(np.float32),
            "c": np.zeros(grid * block[1] * block[0], np.float32)}
    before = _run_jit(generic, grid, block, args)
    after = _run_jit(k, grid, block, args)
    np.testing.assert_array_equal(after["c"], before["c"])


def test_rows_versioned_on_a_condition_of_the_row_are_jammed_where_it_holds_for_all():
    text = GEMM_CPU.replace("""      for threads ty_1: u32 = 0u to blockDim.y step 1u {
        for threads tx_1: u32 = 0u to blockDim.x step 1u {""", """      for threads ty_1: u32 = 0u to blockDim.y step 1u {
        if (blockIdx.x * blockDim.y + ty_1 < 20u) {
         for threads tx_1: u32 = 0u to blockDim.x step 1u {""").replace("""          GUARDED_STORE
        }
      }""", """          GUARDED_STORE
         }
        }
      }""")
    generic = _kernel(text, STORE)
    k = specialize_block_shape(generic, block=(16, 8, 1))
    verify_kernel(k)
    names = _declared(k)
    assert len(names) == len(set(names))
    assert _jammed_rows(k) == [4]
    text_k = print_kernel(k)
    assert "blockIdx.x * 8u + (ty_1 + 3u) < 20u" in text_k  # the jammed version: the condition for all 4 rows
    rng = np.random.default_rng(6)
    args = {"a": rng.standard_normal(3 * 8 * 16).astype(np.float32),
            "b": rng.standard_normal(8 * 16).astype(np.float32),
            "c": np.full(3 * 8 * 16, -1.0, np.float32)}
    before = _run_jit(generic, 3, (16, 8, 1), args)
    after = _run_jit(k, 3, (16, 8, 1), args)
    np.testing.assert_array_equal(after["c"], before["c"])
    assert (after["c"][20 * 16:] == -1.0).all() and (after["c"][:20 * 16] != -1.0).all()  # rows 20+ untouched


@pytest.mark.parametrize("change,why", [
    # An index into block-private memory that does not move with the row: two rows' copies could
    # touch one element (what lower_block_atomics leaves of an atomic is a load and a store).
    (("acc[ty_1][tx_1] = s", "acc[0u][tx_1] = s"), "private store shared by rows"),
    # A local of the block assigned by every thread (a sum over the threads, in their order).
    (("var s: f32 = acc[ty_1][tx_1]", "t = t + 1.0f\n          var s: f32 = acc[ty_1][tx_1]"), "outer local"),
    # Nothing the rows could share: every load in the k loop depends on the row.
    (("* Bs[k][tx_1]", "* acc[ty_1][tx_1]"), "no reuse"),
    # Fences (like warp operations) are not interleaved. (Barriers are refused too, but the CPU
    # form has none: specialization verifies its output, and a barrier there is invalid IR.)
    (("acc[ty_1][tx_1] = s", "acc[ty_1][tx_1] = s\n          fence.block"), "fence"),
])
def test_what_is_not_jammed(change, why):
    text = GEMM_CPU.replace(*change)
    if why == "outer local":
        text = text.replace("      for threads ty_1:", "      var t: f32 = 0.0f\n      for threads ty_1:")
    kernel = _kernel(text)
    k = specialize_block_shape(kernel, block=(16, 8, 1))
    assert _jammed_rows(k) == [1], why


def test_ordered_loops_are_not_jammed():
    k = specialize_block_shape(_kernel(), block=(16, 8, 1))
    assert _jammed_rows(k) == [4]
    ordered = _kernel(GEMM_CPU.replace("for threads ty_1: u32 = 0u to blockDim.y step 1u {",
                                       "for threads(ordered) ty_1: u32 = 0u to blockDim.y step 1u {"))
    assert any(isinstance(x, n.For) and x.ordered for x in walk(ordered))
    assert _jammed_rows(specialize_block_shape(ordered, block=(16, 8, 1))) == [1]


@pytest.mark.parametrize("rows", [8, 6, 3, 1])
def test_rows_counted_at_run_time_are_jammed_in_groups_and_the_rest_run_as_they_were(rows):
    """The pass alone on the generic kernel (``blockDim.y`` unknown: a partial block's ``ty_hi``
    in specialized code): groups of four rows jammed, the last ``blockDim.y % 4`` rows after them."""
    kernel = _kernel()
    k = jam_thread_loops(kernel)
    verify_kernel(k)
    names = _declared(k)
    assert len(names) == len(set(names))
    loops = [x for x in walk(k) if isinstance(x, n.For) and x.var.startswith("ty_1")]
    assert [int(x.step.value) for x in loops] == [4, 1]
    assert loops[1].var != "ty_1" and format_expr(loops[1].start) == "blockDim.y / 4u * 4u"
    block = (16, rows, 1)
    rng = np.random.default_rng(rows)
    args = {"a": rng.standard_normal(2 * rows * 16).astype(np.float32),
            "b": rng.standard_normal(rows * 16).astype(np.float32),
            "c": np.zeros(2 * rows * 16, np.float32)}
    np.testing.assert_array_equal(_run_jit(k, 2, block, args)["c"], _run_jit(kernel, 2, block, args)["c"])


def test_llvm_unrolls_the_jammed_loop_so_that_the_thread_loop_around_it_vectorizes():
    """LLVM's loop vectorizer takes innermost loops only: the short k loop inside the vector loop
    over tx is marked for full unrolling (its size threshold refused the jammed body, and
    matmul_tiled ran 8x slower as scalar code)."""
    from codegen.llvm import emit_llvm_ir

    k = specialize_block_shape(_kernel(), block=(16, 8, 1))
    text = emit_llvm_ir(n.Module((k,)))
    full = re.findall(r'!"llvm\.loop\.unroll\.full"', text)
    assert len(full) == 1
    assert "llvm.loop.parallel_accesses" in text


def test_the_loop_over_the_threads_of_a_row_is_never_jammed_itself():
    """A 1-D stencil's taps reuse the weights for every thread, but its loop over tx is the vector
    loop: it has no rows of threads inside and stays as it is (the jam once cut it into groups
    of four threads, one vector lane each)."""
    text = """
        kernel taps(w: const f32*, x: const f32*, y: f32*) stage cpu {
          for threads tx: u32 = 0u to blockDim.x step 1u {
            var acc: f32 = 0.0f
            for k: i32 = 0 to 7 step 1 {
              acc = acc + w[k] * x[blockIdx.x * blockDim.x + tx + (u32)k]
            }
            y[blockIdx.x * blockDim.x + tx] = acc
          }
        }
    """
    kernel = parse_kernel(ir(text))
    assert jam_thread_loops(kernel) is kernel
    special = specialize_block_shape(kernel, block=(256, 1, 1))
    assert jam_thread_loops(special) is special


# PolyBench's shape: the loop over tx inside the loop over k, c updated in memory.
K_OUTER = """
    kernel kouter(w: u32, a: const f32*, b: const f32*, c: f32*) stage cpu {
      for threads ty: u32 = 0u to blockDim.y step 1u {
        var run: u32 = min(w, blockDim.x)
        for k: i32 = 0 to 8 step 1 {
          for threads tx: u32 = 0u to run step 1u {
            c[(blockIdx.x * blockDim.y + ty) * blockDim.x + tx] = c[(blockIdx.x * blockDim.y + ty) * blockDim.x + tx] + a[(blockIdx.x * blockDim.y + ty) * 8u + (u32)k] * b[(u32)k * blockDim.x + tx]
          }
        }
      }
    }
"""


@pytest.mark.parametrize("width,jammed", [(64, "always"), (512, "short runs"), (4096, "short runs")])
def test_rows_updating_memory_in_a_shared_loop_are_jammed_only_for_short_runs(width, jammed):
    """Four rows of a k-outer nest keep four rows of c (and one of b) in the L1 cache at each k:
    shared only where the loops over tx are short (at most JAM_RUN threads), known now or tested
    at run time (PolyBench 2MM in coarse blocks of 2048-thread rows ran 4x slower jammed)."""
    generic = parse_kernel(ir(K_OUTER))
    block = (width, 4, 1)
    k = specialize_block_shape(generic, block=block)
    verify_kernel(k)
    assert len(_declared(k)) == len(set(_declared(k)))
    text = print_kernel(k)
    rows = [int(x.step.value) for x in walk(k) if isinstance(x, n.For) and x.var.startswith("ty")]
    if jammed == "always":
        assert rows == [4] and "<= 256u" not in text
    else:
        assert sorted(rows) == [1, 4] and "min(w, " + str(width) + "u) <= 256u" in text
    rng = np.random.default_rng(width)
    for w in (100, 300):
        args = {"a": rng.standard_normal(2 * 4 * 8).astype(np.float32),
                "b": rng.standard_normal(8 * width).astype(np.float32),
                "c": rng.standard_normal(2 * 4 * width).astype(np.float32)}
        np.testing.assert_array_equal(_run_jit(k, 2, block, args, {"w": w})["c"],
                                      _run_jit(generic, 2, block, args, {"w": w})["c"])


# Each thread walks its own row of b (ADI's forward sweep): a chain through memory, stored as
# it goes; ROW elements a row. SUM_ONLY: a sum kept in a local, stored after the loop (ATAX).
ROW_SWEEP = """
    kernel sweep(a: const f32*, b: f32*, y: f32*, n: i32) stage cpu {
      for threads tx: u32 = 0u to 64u step 1u {
        var r: u32 = blockIdx.x * 64u + tx
        var s: f32 = 0.0f
        for i: i32 = 1 to n step 1 {
          BODY
        }
        y[r] = s
      }
    }
"""
CHAIN = "b[r * ROWu + (u32)i] = b[r * ROWu + (u32)i] - a[r * ROWu + (u32)i] / b[r * ROWu + (u32)(i - 1)]"
SUM_ONLY = "s = s + a[r * ROWu + (u32)i] * b[r * ROWu + (u32)i]"


@pytest.mark.parametrize("body,row,jammed", [
    (CHAIN, 1000, True),    # rows 4000 bytes apart: four rows' chains in flight
    (CHAIN, 1024, False),   # rows 4 KiB apart: each load would wait on another row's store
    (CHAIN, 512, False),    # 2 KiB: the rows two apart alias
    (CHAIN, 1040, True),
    (SUM_ONLY, 1024, True),  # nothing stored in the row loop: nothing to wait on
])
def test_threads_walking_rows_4k_apart_and_storing_are_not_jammed(body, row, jammed):
    k = parse_kernel(ir(ROW_SWEEP.replace("BODY", body).replace("ROW", str(row))))
    out = jam_thread_loops(k)
    steps = [int(x.step.value) for x in walk(out) if isinstance(x, n.For) and x.kind == "threads"]
    assert steps == ([4] if jammed else [1]), print_kernel(out)
    if not jammed:
        assert out is k
