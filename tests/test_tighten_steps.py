"""tighten-thread-bounds is a list of steps over one state (gpu2cpu.tighten_thread_bounds.STEPS),
and docs/architecture.md names them in the order the code tries them."""
from __future__ import annotations

import pathlib
import re

import numpy as np

from gpu2cpu.tighten_thread_bounds import STEPS

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def test_the_documented_steps_are_the_code_s_steps_in_order():
    text = DOC.read_text(encoding="utf-8")
    section = text.split("### Steps inside the schedule passes", 1)[1].split("- `sink-thread-loops`", 1)[0]
    named = [name for name in re.findall(r"`([a-z_]+)`", section)]
    functions = [step.__name__ for _, step in STEPS]
    assert [name for name in named if name in functions] == functions


def test_every_step_is_a_function_of_the_state_and_the_last_always_applies():
    names = [name for name, _ in STEPS]
    assert len(set(names)) == len(names)
    assert names[-1] == "version-conditions"
    for _, step in STEPS:
        assert list(step.__code__.co_varnames[:5]) == ["st", "loop", "facts", "needs", "depth"]


# A 2-D guard on the thread's named coordinates: after serialization the tx loop's body is
# `let j = ...; let i = ...; if (i < ni && j < nj) {...}`.
NAMED_GUARD = """
__global__ void scale2d(int ni, int nj, const float* a, float* c) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i < ni && j < nj) c[i * 40 + j] = 2.0f * a[i * 40 + j];
}
"""


def test_unswitch_looks_past_the_lets_a_thread_loop_starts_with() -> None:
    """``i < ni`` (uniform in tx, read through the let ``i``) is hoisted out of the tx loop and
    becomes the ty loop's bound in every version, the 32-bit fallback included (with the lets
    in the way, that version ran every ty and tested ``i < ni`` per thread); the values match
    the emulator through C on blocks that straddle both borders and on blocks inside."""
    from c_support import assert_same_as_emulator

    from polypy.driver.pipelines import to_cpu
    from polypy.driver.source import load
    from polypy.ir import nodes as n
    from polypy.ir.visitor import walk

    kernel = load(None, text=NAMED_GUARD).kernel("scale2d")
    cpu = to_cpu(kernel)
    ty_loops = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "threads" and x.var.startswith("ty")]
    assert len(ty_loops) >= 2
    assert all(not isinstance(x.stop, n.BlockDim) for x in ty_loops), [str(x.stop) for x in ty_loops]
    rng = np.random.default_rng(3)
    for ni, nj, grid, block in ((13, 29, (4, 2), (8, 8)), (16, 40, (5, 2), (8, 8))):
        args = {"ni": ni, "nj": nj, "a": rng.standard_normal(16 * 40).astype(np.float32),
                "c": np.zeros(16 * 40, np.float32)}
        assert_same_as_emulator(kernel, grid, block, args)


# A row filter in the shape of NVIDIA's convolutionSeparable (our own code): rows of a tile loaded
# through a pointer moved to the thread's element, `src += y0 * pitch + x0`. lockstep-warps orders
# each store `tile[ty][...] = src[...]` as `v = src[...]; var i = ty; tile[i][...] = v`, and the
# exact-index step used to write the load's `ty` as `i` already, before `i` was assigned (the whole
# filter read wrong rows: 7e-2 relative error in convolutionSeparable).
ROW_FILTER = r"""
#define BX 16
#define BY 4
#define STEPS 4
__global__ void rows(float* dst, const float* src, int w, int pitch) {
  __shared__ float tile[BY][(STEPS + 2) * BX];
  const int x0 = (blockIdx.x * STEPS - 1) * BX + threadIdx.x;
  const int y0 = blockIdx.y * BY + threadIdx.y;
  src += y0 * pitch + x0;
  dst += y0 * pitch + x0;
  for (int i = 1; i <= STEPS; i++) tile[threadIdx.y][threadIdx.x + i * BX] = src[i * BX];
  tile[threadIdx.y][threadIdx.x] = x0 >= 0 ? src[0] : 0.0f;
  tile[threadIdx.y][threadIdx.x + (STEPS + 1) * BX] = w - x0 > (STEPS + 1) * BX ? src[(STEPS + 1) * BX] : 0.0f;
  __syncthreads();
  for (int i = 1; i <= STEPS; i++) {
    float s = 0;
    for (int j = -2; j <= 2; j++) s += (j + 3) * tile[threadIdx.y][threadIdx.x + i * BX + j];
    dst[i * BX] = s;
  }
}
"""


# A versioned update as a gradient writes it (autodiff.accumulation): plain where a condition of
# the launch holds, atomic otherwise. The condition is the same in every thread of the block.
ATOMIC_OR_PLAIN = """
__global__ void accumulate(const float* a, float* out, int n, int mode) {
  bool plain = mode > 0;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = a[i] * 2.0f;
    if (plain) out[i] = out[i] + v; else atomicAdd(&out[i], v);
  }
}
"""


def test_an_index_reads_a_binding_only_after_its_assignment() -> None:
    from c_support import assert_same_as_emulator

    import polypy
    from polypy.driver.source import load

    kernel = load(None, text=ROW_FILTER).kernel("rows")
    module = polypy.compile(None, text=ROW_FILTER)
    rng = np.random.default_rng(5)
    for w, h in ((128, 8), (192, 12)):
        src = rng.standard_normal(w * h).astype(np.float32)
        padded = np.pad(src.reshape(h, w).astype(np.float64), ((0, 0), (2, 2)))
        want = sum((j + 3) * padded[:, 2 + j:2 + j + w] for j in range(-2, 3)).reshape(-1)
        grid, block = (w // 64, h // 4), (16, 4)
        got = assert_same_as_emulator(kernel, grid, block, {"dst": np.zeros(w * h, np.float32), "src": src,
                                                            "w": w, "pitch": w})
        np.testing.assert_allclose(got["dst"], want, rtol=1e-5, atol=1e-5)
        dst = np.zeros(w * h, np.float32)
        module.rows[grid, block](dst, src, w, w)  # the LLVM backend
        np.testing.assert_array_equal(dst, got["dst"])


def test_a_uniform_choice_of_an_atomic_gets_a_copy_of_the_loop_without_it(tmp_path) -> None:
    """The thread loop runs in one copy per value of ``mode > 0`` (issue 38: a gradient's
    ``if (x_private) plain else atomicAdd`` kept its reverse loops scalar): the copy for the plain
    branch has no atomic and is a vector loop (``codegen.lanes``); both copies give the
    emulator's values through C and through the LLVM JIT, on blocks inside and across ``n``."""
    from c_support import assert_same_as_emulator, cuda_source, run_emulated

    from codegen.lanes import vector_loop
    from polypy.driver.pipelines import to_cpu
    from polypy.ir import nodes as n
    from polypy.ir.visitor import walk

    mod, kernel = cuda_source(tmp_path, "acc.cu", ATOMIC_OR_PLAIN, "accumulate")
    cpu = to_cpu(kernel)
    tx_loops = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "threads" and x.var.startswith("tx")]
    plain = [x for x in tx_loops if not any(isinstance(y, n.AtomicRMW) for y in walk(x))]
    assert plain and all(vector_loop(cpu, x) is not None for x in plain)
    rng = np.random.default_rng(5)
    for mode in (1, 0):
        for n_, grid, block in ((50, 4, 16), (64, 2, 32)):
            args = {"a": rng.standard_normal(64).astype(np.float32), "out": rng.standard_normal(64).astype(np.float32),
                    "n": np.int32(n_), "mode": np.int32(mode)}
            assert_same_as_emulator(kernel, grid, block, args)
            want = run_emulated(kernel, grid, block, args)
            got = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
            mod.accumulate[grid, block](**got)
            np.testing.assert_allclose(got["out"], want["out"], rtol=1e-6, atol=1e-6)
