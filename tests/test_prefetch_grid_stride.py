"""Grid-stride loops on a CPU (issue 11): ``prefetch-grid-stride`` prefetches the stretch a block
reads two iterations ahead (the IR's ``prefetch`` hint), and a thread loop that stores at indices
it loads (a histogram's ``local[data[i]]++``) is unrolled instead of left alone. Checked: where
the prefetches go and where they must not, the hint through the IR's printer, parser, verifier
and emulator, and the values against the emulator through C (with and without bounds checks:
the prefetched addresses run past the arrays' ends) and LLVM, on several launch shapes."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import assert_same_as_emulator, need_compiler
from polypy.driver.library import build_library
from polypy.driver.library import emit_kernels
from codegen.llvm import emit_llvm_ir
from polypy.driver.pipelines import to_cpu
from polypy.driver.source import load
from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir import parse_kernel
from polypy.ir.printer import print_kernel as format_kernel
from polypy.ir.verifier import verify_kernel as verify
from polypy.ir.visitor import walk

SOURCE = r"""
// Grid-stride: each block reads blockDim.x consecutive elements, then jumps a grid ahead.
__global__ void axpy_stride(float a, const float* x, float* y, int n, int shift)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = a * x[i + shift] + y[i];
}

// Block-stride: consecutive stretches, which the hardware prefetchers follow: no prefetch.
__global__ void block_sum(const float* x, float* out, int n)
{
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s += x[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

#define NBINS 64
__global__ void hist(const unsigned char* data, unsigned int* bins, int n)
{
    __shared__ unsigned int local[NBINS];
    for (int b = threadIdx.x; b < NBINS; b += blockDim.x)
        local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[data[i] % NBINS], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < NBINS; b += blockDim.x)
        atomicAdd(&bins[b], local[b]);
}
"""


def _module():
    return load(None, text=SOURCE)


def _prefetches(cpu: n.Kernel) -> list[n.Prefetch]:
    return [x for x in walk(cpu) if isinstance(x, n.Prefetch)]


def test_grid_stride_loops_prefetch_two_iterations_ahead_and_block_stride_loops_do_not():
    report: list = []
    cpu = to_cpu(_module().kernel("axpy_stride"), report=report)
    got = _prefetches(cpu)
    assert {p.buffer for p in got} == {"x", "y"}
    text = format_kernel(cpu)
    assert "prefetch x[i_base + 2l * " in text and "(i64)shift" in text
    assert any("prefetches x, y 2 iterations ahead" in d.message for d in report)
    assert not _prefetches(to_cpu(_module().kernel("block_sum")))
    assert not _prefetches(to_cpu(_module().kernel("axpy_stride"), optimize=False))


def test_the_prefetch_hint_prints_parses_verifies_and_does_nothing_in_the_emulator():
    cpu = to_cpu(_module().kernel("axpy_stride"))
    text = format_kernel(cpu)
    again = parse_kernel(text)
    assert format_kernel(again) == text
    verify(again)
    gpu_text = """kernel k(x: const f32*, y: f32*) {
  prefetch x[(i64)threadIdx.x]
  y[0] = x[0]
}
"""
    with pytest.raises(InternalError, match="prefetch in GPU form"):
        verify(parse_kernel(gpu_text))


@pytest.mark.parametrize("grid,block,size,shift", [(4, 64, 3000, 0), (3, 128, 2501, 7), (1, 32, 100, 3),
                                                   (7, 96, 5000, 0)])
def test_grid_stride_values_match_the_emulator_through_c_with_and_without_bounds_checks(grid, block, size, shift):
    need_compiler()
    rng = np.random.default_rng(size)
    args = {"a": np.float32(1.5), "x": rng.standard_normal(size + shift).astype(np.float32),
            "y": rng.standard_normal(size).astype(np.float32), "n": size, "shift": shift}
    kernel = _module().kernel("axpy_stride")
    assert_same_as_emulator(kernel, grid, block, args)
    assert_same_as_emulator(kernel, grid, block, args, check_bounds=True)  # prefetches are not accesses


@pytest.mark.parametrize("grid,block,size", [(5, 64, 10000), (2, 256, 777), (16, 32, 4096)])
def test_histogram_through_c_and_llvm_from_an_unaligned_start(grid, block, size):
    need_compiler()
    rng = np.random.default_rng(size)
    raw = np.clip(rng.normal(30, 4, size + 16), 0, 255).astype(np.uint8)
    data = raw[13:13 + size]  # not at a cache-line boundary, as NumPy's arrays often are not
    want = np.bincount(data % 64, minlength=64).astype(np.uint32)
    kernel = _module().kernel("hist")
    got = assert_same_as_emulator(kernel, grid, block, {"data": data, "bins": np.zeros(64, np.uint32), "n": size})
    np.testing.assert_array_equal(got["bins"], want)
    lib = build_library([to_cpu(kernel)], ())
    bins = np.zeros(64, np.uint32)
    lib.launch("hist", grid, block, {"data": data, "bins": bins, "n": size})
    np.testing.assert_array_equal(bins, want)
    module = polypy.compile(None, text=SOURCE, threads=2)
    bins = np.zeros(64, np.uint32)
    module.hist[grid, block](data, bins, size)
    np.testing.assert_array_equal(bins, want)


def test_scatter_loops_are_unrolled_in_both_backends():
    cpu = to_cpu(_module().kernel("hist"))
    c = emit_kernels([cpu])
    lines = c.splitlines()
    scatter = [i for i, line in enumerate(lines) if line.strip() == "POLYPY_SCATTER_LOOP"]
    assert scatter and all("for (" in lines[i + 1] for i in scatter)
    # the scatter is the loop's first statement after the thread's bindings (`long long i = ...`)
    body = [[line for line in lines[i + 2:i + 5] if not line.strip().startswith("long long ")] for i in scatter]
    assert any("local[" in b[0] and "data[" in b[0] for b in body)
    ll = emit_llvm_ir(n.Module((cpu,)))
    assert '!"llvm.loop.unroll.count", i32 4' in ll
    # a loop that only stores at its own indices keeps the thread loops' no-unroll hint
    plain = emit_kernels([to_cpu(_module().kernel("axpy_stride"))])
    assert not [line for line in plain.splitlines() if line.strip() == "POLYPY_SCATTER_LOOP"]
