"""split-scatter-adds (``gpu2cpu.split_scatter_adds``): a block's adds at loaded indices into a
shared array of unsigned integers go to copies of it, one per thread of a group of four, added
into it after the statement. Checked: the histogram sample's structure, its values through the C
backend and the LLVM JIT against the emulator on launch shapes whose element counts are not
multiples of four, and the arrays the pass must leave alone.
"""
from __future__ import annotations

import numpy as np
import pytest
from c_support import copy_args, gpu_kernel, need_compiler
from test_llvm_support import compile_cpu, run_compiled

from polypy.driver.library import build_library
from gpu2cpu.split_scatter_adds import COPIES, split_scatter_adds
from polypy.driver.pipelines import to_cpu
from polypy.emulator import emulate
from polypy.ir import nodes as n
from polypy.ir.visitor import walk

# The histogram of samples/histogram.cu with bins of type {elem}; {extra} is added after the
# grid-stride loop (a read of the bins in the same statement, for the cases left alone).
HISTOGRAM = """kernel hist(data: const u8*, bins: {elem}*, n: i32) {{
  shared local: {elem}[256]
  for b: i32 = (i32)threadIdx.x to 256 step (i32)blockDim.x {{
    local[b] = {zero}
  }}
  barrier
  for i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x) to n step (i32)(blockDim.x * gridDim.x) {{
    atomic.add local[data[i]], {one}
    {extra}
  }}
  barrier
  for b2: i32 = (i32)threadIdx.x to 256 step (i32)blockDim.x {{
    atomic.add bins[b2], local[b2]
  }}
}}"""

# One element per thread: no serial loop around the adds, too few of them per block to pay.
PER_THREAD = """kernel once(data: const u8*, bins: u32*, n: i32) {
  shared local: u32[256]
  for b: i32 = (i32)threadIdx.x to 256 step (i32)blockDim.x {
    local[b] = 0u
  }
  barrier
  var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
  if (i < n) {
    atomic.add local[data[i]], 1u
  }
  barrier
  for b2: i32 = (i32)threadIdx.x to 256 step (i32)blockDim.x {
    atomic.add bins[b2], local[b2]
  }
}"""


def _histogram(elem: str = "u32", extra: str = "") -> str:
    zero, one = {"f32": ("0.0f", "1.0f"), "i32": ("0", "1"), "u32": ("0u", "1u"), "u64": ("0ul", "1ul")}[elem]
    return HISTOGRAM.format(elem=elem, zero=zero, one=one, extra=extra)


def _split(kernel: n.Kernel) -> bool:
    return any(b.name.startswith("local_sub") for b in kernel.buffers)


def test_the_histogram_adds_into_four_copies_four_threads_at_a_time() -> None:
    cpu = to_cpu(gpu_kernel(_histogram()))
    subs = [b for b in cpu.buffers if b.name.startswith("local_sub")]
    assert len(subs) == 1 and subs[0].space == "shared"
    assert [int(e.value) for e in subs[0].shape] == [COPIES, 256]  # type: ignore[union-attr]
    unrolled = [x for x in walk(cpu) if isinstance(x, n.For) and x.kind == "serial"
                and isinstance(x.step, n.Const) and int(x.step.value) == COPIES]
    assert unrolled
    copies = sorted(int(s.index[0].value) for s in walk(unrolled[0])  # type: ignore[union-attr]
                    if isinstance(s, n.Store) and s.buffer == subs[0].name)
    assert copies == list(range(COPIES))
    # the copies are added into the bins once, after the statement
    merges = [s for s in walk(cpu) if isinstance(s, n.Store) and s.buffer == "local"
              and sum(isinstance(x, n.Load) and x.buffer == subs[0].name for x in walk(s.value)) == COPIES]
    assert len(merges) == 1


@pytest.mark.parametrize("elem", ["u32", "u64"])
def test_split_histograms_match_the_emulator(elem: str) -> None:
    need_compiler()
    gpu = gpu_kernel(_histogram(elem))
    cpu = to_cpu(gpu)
    assert _split(cpu)
    lib = build_library([cpu], specialize=False)
    jit = compile_cpu(cpu)
    rng = np.random.default_rng(5)
    dtype = np.uint32 if elem == "u32" else np.uint64
    for grid, block, count in [(4, 256, 10_001), (5, 64, 3_333), (1, 3, 1_001), (3, 1, 7), (2, 32, 0)]:
        skewed = np.clip(rng.normal(100.0, 4.0, count), 0, 255)
        data = np.where(rng.random(count) < 0.7, skewed, rng.integers(0, 256, count)).astype(np.uint8)
        args = {"data": np.concatenate([data, np.zeros(1, np.uint8)]), "bins": np.arange(256, dtype=dtype),
                "n": np.int32(count)}
        want = copy_args(args)
        emulate(gpu, (grid,), (block,), want)
        got = copy_args(args)
        lib.launch("hist", (grid,), (block,), got)
        np.testing.assert_array_equal(got["bins"], want["bins"], err_msg=f"C {grid} {block} {count}")
        got = copy_args(args)
        run_compiled(jit, "hist", (grid,), (block,), got)
        np.testing.assert_array_equal(got["bins"], want["bins"], err_msg=f"LLVM {grid} {block} {count}")


@pytest.mark.parametrize("text", [
    _histogram("f32"),  # float sums would round differently
    _histogram("i32"),  # signed: the merge could overflow where the adds wrap
    _histogram("u32", "local[0] = local[0] + 0u"),  # the statement also writes the bins
    PER_THREAD,  # one add per thread: the copies would not pay
], ids=["float", "signed", "written", "per-thread"])
def test_arrays_the_pass_leaves_alone(text: str) -> None:
    cpu = to_cpu(gpu_kernel(text))
    assert not _split(cpu)
    assert split_scatter_adds(cpu) is cpu


# 200 bins for byte values: isl cannot prove the adds in bounds, so launches run the
# bounds-checked code, which checks the copies row by row, as the array they copy.
SMALL_BINS = r"""
__global__ void hist(const unsigned char* data, unsigned int* bins, int n)
{
    __shared__ unsigned int local[200];
    for (int b = threadIdx.x; b < 200; b += blockDim.x)
        local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < 200; b += blockDim.x)
        atomicAdd(&bins[b], local[b]);
}
"""


def test_the_copies_are_bounds_checked_as_the_array_they_copy(tmp_path) -> None:
    import polypy

    path = tmp_path / "hist.cu"
    path.write_text(SMALL_BINS)
    kernel = polypy.compile(str(path)).hist
    assert any(name.startswith("local_sub") for name in (b.name for b in kernel.cpu.buffers))
    data = (np.arange(10_000) % 150).astype(np.uint8)
    bins = np.zeros(200, np.uint32)
    kernel[4, 64](data, bins, 10_000)
    np.testing.assert_array_equal(bins, np.bincount(data, minlength=200))
    checked = dict(kernel.bounds_checked)[(64, 1, 1)]
    assert "local" in checked and any(name.startswith("local_sub") for name in checked)
    data[5_000] = 230  # past the 200 bins: inside the copies' storage, outside a row
    with pytest.raises(polypy.UserError, match=r"read index 230 of shared array 'local' of 200 elements"):
        kernel[4, 64](data, np.zeros(200, np.uint32), 10_000)
