"""Block coarsening (``gpu2cpu.coarsen_blocks``, ``polypy.coarsening``): consecutive blocks along
x run as one coarse block on the CPU.

Every sample is run with a forced factor (so every launch takes the coarse path, partial coarse
blocks included: the grids are not multiples of the factor) through the LLVM JIT and the C
backend, against the emulator; the plan's decisions and refusals, the IR form and the launch
rule are checked on their own."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from test_llvm_support import isolated_cache

import polypy
from c_support import copy_args, need_compiler
from polypy.driver.library import build_library
from gpu2cpu.coarsen_blocks import coarsen_blocks, join_partial_blocks, plan_coarsening
from polypy.coarsening import coarsening_pays
from polypy.driver.api import CompiledModule
from polypy.driver.coarsen import block_coarsener, coarsen_for_block
from polypy.driver.pipelines import to_cpu
from polypy.emulator import emulate
from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n
from polypy.ir import parse_module, print_module
from polypy.ir.verifier import verify_kernel
from polypy.ir.visitor import walk
from samples.spec import Sample, all_samples

pytestmark = pytest.mark.usefixtures("isolated_cache")
assert isolated_cache

SAMPLES = all_samples()
BY_NAME = {s.name: s for s in SAMPLES}


@functools.cache
def _load(name: str) -> n.Module:
    s = BY_NAME[name]
    return polypy.load(s.source, defines=dict(s.defines))


def _check_outputs(s: Sample, case, got: dict, emulated: dict, what: str) -> None:
    for out in s.outputs:
        np.testing.assert_allclose(np.asarray(got[out], np.float64), np.asarray(emulated[out], np.float64),
                                   rtol=s.rtol, atol=s.atol, err_msg=f"{s.name} {case} {out}: {what} vs emulator")


def _legal(s: Sample, factor: int) -> bool:
    case = s.cases[0]
    block = tuple(case.block) + (1,) * (3 - len(case.block))
    return plan_coarsening(_load(s.name).kernel(s.kernel), block=block, factor=factor).factor == factor


# Factor 3 for every sample (a partial coarse block wherever the grid is not a multiple of 3);
# factor 2 for a few shapes of kernel (the random kernels run coarse blocks of 2 through the JIT
# too, test_random_kernels.py): both for all samples took a twentieth of the suite's time.
FACTOR_TWO = ("gemm", "histogram", "jacobi2d", "matmul_tiled", "saxpy")


@pytest.mark.parametrize("name,factor", [(name, 3) for name in sorted(BY_NAME)]
                         + [(name, 2) for name in FACTOR_TWO])
def test_forced_coarsening_through_the_jit(name: str, factor: int) -> None:
    s = BY_NAME[name]
    # polypy.compile is load + from_ir; the sample's load is shared with the other tests here
    module = CompiledModule.from_ir(_load(name), coarsen=factor)
    for i, case in enumerate(s.cases[:2]):
        args = s.make_args(np.random.default_rng(77 + i), case, np.float32)
        emulated, got = copy_args(args), copy_args(args)
        emulate(_load(name).kernel(s.kernel), case.grid, case.block, emulated, shmem=case.shmem)
        module[s.kernel][case.grid, case.block, case.shmem](**got)
        _check_outputs(s, case, got, emulated, f"JIT coarsened by {factor}")
        block = tuple(case.block) + (1,) * (3 - len(case.block))
        expected = factor if _legal(s, factor) else 1
        assert module[s.kernel].coarsened[block] == expected


def _check_forced_in_c(name: str, factor: int, seed: int, *, narrower: bool = False) -> None:
    """The sample's first two cases through the C backend with every launch coarsened by
    ``factor``, against the emulator (``narrower``: the grids are narrower than the factor)."""
    need_compiler()
    s = BY_NAME[name]
    module = _load(name)
    shapes = {s.kernel: [tuple(c.block) + (1,) * (3 - len(c.block)) for c in s.cases[:2]]}
    library = build_library([to_cpu(k) for k in module.kernels], module.globals, source=str(s.source),
                            block_shapes=shapes, coarsen=block_coarsener(module, factor=factor), specialize=False)
    for i, case in enumerate(s.cases[:2]):
        assert not narrower or case.grid[0] < factor
        args = s.make_args(np.random.default_rng(seed + i), case, np.float32)
        emulated, got = copy_args(args), copy_args(args)
        emulate(module.kernel(s.kernel), case.grid, case.block, emulated, shmem=case.shmem)
        library.launch(s.kernel, case.grid, case.block, got, shmem=case.shmem)
        _check_outputs(s, case, got, emulated, f"C coarsened by {factor}")


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_forced_coarsening_through_the_c_backend(name: str) -> None:
    _check_forced_in_c(name, 3, 91)


def test_every_elementwise_sample_can_be_coarsened() -> None:
    legal = {s.name for s in SAMPLES if _legal(s, 2)}
    for name in ("saxpy", "blackscholes", "relu3", "jacobi2d", "conv2d", "nbody_step", "matmul_tiled"):
        assert name in legal, name
    # extern __shared__ memory is sized by the launch: no slice per sub-block
    assert "stencil1d" not in legal


ELEMENTWISE = """kernel axpy(n: i32, a: f32, x: const f32*, y: f32*) {
  var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  if (i < n) {
    y[i] = a * x[i] + y[i]
  }
}
"""

PER_BLOCK = """kernel first(n: i32, x: const f32*, y: f32*) {
  var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  if (i < n) {
    y[i] = x[(i32)blockIdx.x] + (f32)threadIdx.x
  }
}
"""

SCATTER = """kernel scatter(n: i32, x: const f32*, y: f32*) {
  var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  if (i < n) {
    atomic.add y[i], x[i]
  }
}
"""

STAGED = """kernel staged(n: i32, x: const f32*, y: f32*) {
  shared s: f32[8]
  var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  s[threadIdx.y] = x[0]
  if (i < n) {
    y[i] = s[threadIdx.y]
  }
}
"""

WARPS = """kernel lanes(x: f32*) {
  var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  var v: f32 = x[i]
  var t: f32
  t = shfl.down(4294967295u, v, 1u, 32)
  x[i] = t
}
"""


def _kernel(text: str) -> n.Kernel:
    from polypy.ir import parse_kernel
    from polypy.passes import SIMPLIFY, run_pipeline

    return run_pipeline(parse_kernel(text), SIMPLIFY)


def test_plan_chooses_runs_of_at_least_128_and_4096_threads() -> None:
    k = _kernel(ELEMENTWISE)
    assert plan_coarsening(k, block=(256, 1, 1)).factor == 16
    # Without shared memory a run along x is at least WIDE_RUN (4096) threads: a 2-D block
    # covers a long stretch of each of its rows.
    assert plan_coarsening(k, block=(32, 8, 1)).factor == 128
    assert plan_coarsening(k, block=(128, 4, 1)).factor == 32
    assert plan_coarsening(k, block=(32, 8, 1), max_run=1024).factor == 32
    # With shared memory, runs of 128: each sub-block has its own slice of the arrays; so with
    # atomics (a gradient's scattered adjoints).
    assert plan_coarsening(_kernel(STAGED), block=(32, 8, 1)).factor == 4
    assert plan_coarsening(_kernel(SCATTER), block=(32, 8, 1)).factor == 4
    assert plan_coarsening(k, block=(1024, 1, 1)).factor == 4
    assert plan_coarsening(k, block=(1024, 1, 1), max_run=1024).factor == 1  # large enough already
    residual = plan_coarsening(k := _kernel(PER_BLOCK), block=(64, 1, 1))
    assert residual.factor == 1 and "outside blockIdx.x * blockDim.x + threadIdx.x" in residual.why
    assert plan_coarsening(k, block=(64, 1, 1), factor=2).factor == 2  # exact, only not worth it


def test_per_thread_values_in_memory_keep_runs_of_1024() -> None:
    # vecnorm's lowered coarse block keeps two values per thread in memory (local buffers): its
    # run along x stays at SCRATCH_RUN threads, where jacobi2d's (no such buffers) is 4096.
    plans: list = []
    coarse = coarsen_for_block(_load("vecnorm").kernel("vecnorm"), block=(256, 1, 1), report=plans)
    assert coarse is not None and coarse.coarsen == (4, 1, 1)
    assert {b.space for b in coarse.buffers} == {"local"}
    assert plans[-1].factor == 4 and "per-thread values in memory" in plans[-1].why
    plans = []
    coarse = coarsen_for_block(_load("jacobi2d").kernel("jacobi2d"), block=(32, 8, 1), report=plans)
    assert coarse is not None and coarse.coarsen == (128, 1, 1) and not coarse.buffers
    assert "4096 consecutive" in plans[-1].why


def test_warp_operations_need_the_original_warps() -> None:
    k = _kernel(WARPS)
    refused = plan_coarsening(k, block=(16, 2, 1), factor=2)
    assert refused.factor == 1 and "warp operations" in refused.why
    assert plan_coarsening(k, block=(64, 1, 1), factor=2).factor == 2


def test_coarse_kernel_prints_parses_and_verifies() -> None:
    gpu = _kernel(ELEMENTWISE)
    joined = coarsen_for_block(gpu, block=(64, 1, 1), factor=4)
    assert joined is not None and joined.coarsen == (4, 1, 1) and joined.stage == "cpu"
    text = print_module(n.Module((joined,)))
    assert "coarsen (4, 1, 1)" in text
    assert parse_module(text).kernels[0] == joined
    verify_kernel(joined)
    import dataclasses

    with pytest.raises(InternalError, match="only in CPU form"):
        verify_kernel(dataclasses.replace(gpu, coarsen=(2, 1, 1)))
    with pytest.raises(UserError, match="positive coarsening factor"):
        parse_module(text.replace("coarsen (4, 1, 1)", "coarsen (0, 1, 1)"))


def test_coarse_block_does_the_work_of_its_blocks() -> None:
    gpu = _kernel(ELEMENTWISE)
    coarse = coarsen_blocks(gpu, block=(32, 1, 1), factor=3)
    # one GPU-form block of 96 threads at blockIdx.x = 0 does blocks 0, 1 and 2
    rng = np.random.default_rng(3)
    args = {"n": 200, "a": np.float32(1.5), "x": rng.standard_normal(224).astype(np.float32),
            "y": rng.standard_normal(224).astype(np.float32)}
    fine, merged = copy_args(args), copy_args(args)
    emulate(gpu, (7, 1, 1), (32, 1, 1), fine)
    emulate(coarse, (1, 1, 1), (96, 1, 1), merged)
    np.testing.assert_array_equal(merged["y"][:96], fine["y"][:96])
    np.testing.assert_array_equal(merged["y"][96:], args["y"][96:])  # nothing beyond its blocks


def test_partial_coarse_block_runs_the_blocks_left_as_one_loop() -> None:
    """The last coarse block of a row is the coarse kernel with ``blockDim.x`` counting the
    blocks left: one thread loop over them (no loop over blocks), the shared arrays the full
    coarse block's (one slice per sub-block, one name)."""
    joined = coarsen_for_block(_kernel(STAGED), block=(32, 8, 1), factor=4)
    assert joined is not None
    split = joined.body[0]
    assert isinstance(split, n.If) and split.orelse
    partial = split.orelse
    assert not any(isinstance(x, n.For) and x.kind == "serial" for s in partial for x in walk(s))
    loops = [x for s in partial for x in walk(s) if isinstance(x, n.For) and x.kind == "threads"]
    assert any(isinstance(v, n.GridDim) for x in loops for v in walk(x.stop))
    shared = [b for b in joined.buffers if b.space == "shared"]
    assert len(shared) == 1 and shared[0].shape is not None and int(shared[0].shape[0].value) == 4


@pytest.mark.parametrize("name", ["jacobi2d", "conv2d", "matmul_tiled"])
def test_grids_narrower_than_the_factor_run_partial_coarse_blocks(name: str) -> None:
    """A factor of 16 is wider than these grids: every block runs in a partial coarse block."""
    _check_forced_in_c(name, 16, 13, narrower=True)


def test_join_refuses_what_it_cannot_join() -> None:


    cpu = to_cpu(_kernel(ELEMENTWISE))
    with pytest.raises(InternalError):
        join_partial_blocks(cpu, cpu, factor=1)


def test_launch_rule() -> None:
    assert coarsening_pays((64, 1, 1), (4, 1, 1), 2)  # 16 coarse blocks >= 8 per worker
    assert coarsening_pays((61, 1, 1), (4, 1, 1), 2)  # 15 full ones and a partial one
    assert not coarsening_pays((60, 1, 1), (4, 1, 1), 2)  # 15
    assert coarsening_pays((3, 16, 1), (32, 1, 1), 2)  # one partial coarse block per row
    assert coarsening_pays((3, 1, 1), (4, 1, 1), 2, blocks_per_worker=0)
    # the same rule, printed into a C launcher from the guard (codegen.c.versions)
    from codegen.c.kernel import Options
    from codegen.c.versions import guard_text
    from polypy.ir.versions import EnoughCoarseBlocks, Guard

    assert guard_text(Guard((EnoughCoarseBlocks((4, 1, 1), 8),)), Options(cpp=True)) == \
        "(((unsigned long long)grid.x + 3ULL) / 4ULL) * (unsigned long long)grid.y * (unsigned long long)grid.z >= " \
        "8ULL * (unsigned long long)(POLYPY_WORKERS())"
    assert guard_text(Guard((EnoughCoarseBlocks((4, 1, 1), 0),)), Options(threads=3)) == "true"


def test_default_module_coarsens_only_launches_with_enough_coarse_blocks() -> None:
    s = BY_NAME["saxpy"]
    module = polypy.compile(s.source, defines=dict(s.defines), threads=2)
    k = module[s.kernel]
    size = 256 * 320
    x = np.random.default_rng(1).standard_normal(size).astype(np.float32)
    y = np.zeros(size, np.float32)
    args = {p.name: v for p, v in zip(k.signature.params, (size, np.float32(2.0), x, y))}
    k[320, 256](**args)  # 320 blocks of 256: factor 16, 20 coarse blocks >= 8 per worker
    assert k.coarsened == {(256, 1, 1): 16}
    np.testing.assert_allclose(y, 2.0 * x, rtol=1e-6)
    fine = polypy.compile(s.source, defines=dict(s.defines), threads=2, coarsen=False)[s.kernel]
    y2 = np.zeros(size, np.float32)
    fine[320, 256](**{**args, "y": y2})
    assert fine.coarsened == {(256, 1, 1): 1}
    np.testing.assert_array_equal(y2, y)
    k[4, 256](**{**args, "n": 1024})  # 4 blocks: too few coarse blocks for 2 workers, run as they are
    with pytest.raises(UserError, match="coarsen must be"):
        polypy.compile(s.source, coarsen=0)


# Found by test_codegen_c_fuzz (hypothesis seed 29): each thread reads its right neighbour's value
# in a loop with barriers. Through C in a partial coarse block (grid 1, factor 2), GCC 12 -O3 gave
# the first 16 threads the values from before the second round's stores when both reading loops
# carried `omp simd` (their indices divide the counter: `sh[tx / 64u][(tx % 64u + 1u) % 64u]`).
NEIGHBOUR_ROUNDS = """kernel rounds(out: u32*) {
  shared sh: u32[128]
  var tid: u32 = threadIdx.y * blockDim.x + threadIdx.x
  var nt: u32 = blockDim.x * blockDim.y
  var g: u32 = blockIdx.x * nt + tid
  var v: u32 = 1u
  for r: i32 = 0 to 2 step 1 {
    sh[tid] = v
    barrier
    v = v + sh[(tid + 1u) % nt] * (u32)(r + 1)
    barrier
  }
  out[g] = v
}"""


def test_neighbour_rounds_in_partial_coarse_blocks_match_the_emulator():
    from c_support import run_emulated

    need_compiler()
    kernel = _kernel(NEIGHBOUR_ROUNDS)
    library = build_library([to_cpu(kernel)], block_shapes={kernel.name: [(64, 1, 1)]}, specialize=False,
                            coarsen=block_coarsener(n.Module((kernel,)), factor=2))
    for grid in (1, 2, 3):
        args = {"out": np.zeros(64 * grid, np.uint32)}
        want = run_emulated(kernel, grid, (64, 1), args)
        got = copy_args(args)
        library.launch(kernel.name, grid, (64, 1), got)
        np.testing.assert_array_equal(got["out"], want["out"], err_msg=f"grid {grid}")
        assert (want["out"] == 6).all()
