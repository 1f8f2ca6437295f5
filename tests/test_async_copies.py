"""Asynchronous copies and block barriers (polypy's <cuda/barrier>, <cuda/pipeline>,
<cuda_pipeline.h>, <cooperative_groups/memcpy_async.h>; docs/async_copies.md): our own kernels
checked against NumPy through the emulator, the LLVM JIT and the C backend on several launch
shapes, a whole program translated, compiled and run, and located refusals."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import polypy
from c_support import find_compiler, run_c, run_emulated
from polypy.errors import DeviceAssertError

HEADERS = ("#include <cooperative_groups.h>\n#include <cooperative_groups/memcpy_async.h>\n#include <cuda_pipeline.h>\n"
           "#include <cuda/barrier>\n#include <cuda/pipeline>\nnamespace cg = cooperative_groups;\n")

KERNELS = HEADERS + r"""
// Two stages of a per-thread pipeline: each thread stages 4 floats per stage in shared memory.
__global__ void staged(const float* x, float* y) {
  __shared__ float buf[2][256 * 4];
  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  const auto shape = cuda::aligned_size_t<16>(4 * sizeof(float));
  int t = threadIdx.x + blockDim.x * threadIdx.y;
  int nt = blockDim.x * blockDim.y;
  int base = blockIdx.x * nt * 8;
  for (int s = 0; s < 2; ++s) {
    pipe.producer_acquire();
    cuda::memcpy_async(&buf[s][4 * t], &x[base + s * nt * 4 + 4 * t], shape, pipe);
    pipe.producer_commit();
  }
  for (int s = 0; s < 2; ++s) {
    if (s == 0) cuda::pipeline_consumer_wait_prior<1>(pipe); else pipe.consumer_wait();
    float acc = 0.0f;
    for (int k = 0; k < 4; ++k) acc += buf[s][4 * t + k] * (float)(k + 1);
    y[blockIdx.x * nt * 2 + s * nt + t] = acc;
    pipe.consumer_release();
  }
}

// A block-scoped barrier: write, arrive, wait, read a neighbour's value; twice more with arrive_and_wait.
__global__ void neighbours(const float* x, float* y) {
  __shared__ float s[256];
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  int t = threadIdx.x + blockDim.x * threadIdx.y;
  int nt = blockDim.x * blockDim.y;
  if (t == 0) init(&bar, blockDim.x * blockDim.y);
  __syncthreads();
  int i = blockIdx.x * nt + t;
  s[t] = x[i];
  auto token = bar.arrive();
  float mine = 2.0f * s[t];  // between arrive and wait: reads only what this thread wrote
  bar.wait(std::move(token));
  y[i] = s[(t + 1) % nt] + mine;
  bar.arrive_and_wait();
  s[t] = 2.0f * y[i];
  bar.arrive_and_wait();
  y[i] += s[(t + 3) % nt];
}

// The block copies a tile with cg::memcpy_async, waits, and each thread reads other threads' parts.
__global__ void cg_window(const float* x, float* y, int tile) {
  extern __shared__ float s[];
  cg::thread_block cta = cg::this_thread_block();
  cg::memcpy_async(cta, s, x + blockIdx.x * tile, sizeof(float) * tile);
  cg::wait(cta);
  int t = cta.thread_rank();
  float acc = 0.0f;
  for (int k = 0; k < 3; ++k) acc += s[(t + k) % tile];
  y[blockIdx.x * cta.size() + t] = acc;
  cg::wait_prior<1>(cta);
}

// The per-thread primitives of <cuda_pipeline.h>.
__global__ void primitives(const int* x, int* y) {
  __shared__ int s[2 * 256];
  int t = threadIdx.x + blockDim.x * threadIdx.y;
  int g = blockIdx.x * blockDim.x * blockDim.y + t;
  __pipeline_memcpy_async(&s[2 * t], &x[2 * g], 2 * sizeof(int));
  __pipeline_commit();
  __pipeline_wait_prior(0);
  y[g] = s[2 * t] * 10 + s[2 * t + 1];
}

// A barrier of the whole block completing a group copy (reversed by the readers).
__global__ void barrier_copy(const double* x, double* y) {
  __shared__ double s[256];
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  cg::thread_block cta = cg::this_thread_block();
  if (cta.thread_rank() == 0) init(&bar, cta.size());
  cta.sync();
  int n = cta.size();
  cuda::memcpy_async(cta, s, x + blockIdx.x * n, sizeof(double) * n, bar);
  bar.arrive_and_wait();
  int t = cta.thread_rank();
  y[blockIdx.x * n + t] = s[n - 1 - t];
}

// Shared arrays aligned for vector copies, as nvcc accepts them (alignas after __shared__).
__global__ void aligned(const float* x, float* y) {
  __shared__ alignas(16) float s[256];
  __shared__ alignas(alignof(float4)) float t[256];
  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  cuda::memcpy_async(&s[threadIdx.x], &x[blockIdx.x * blockDim.x + threadIdx.x], cuda::aligned_size_t<4>(4), pipe);
  pipe.consumer_wait();
  t[threadIdx.x] = 3.0f * s[threadIdx.x];
  __syncthreads();
  y[blockIdx.x * blockDim.x + threadIdx.x] = t[blockDim.x - 1 - threadIdx.x];
}

// A barrier initialized with fewer threads than the block has: not run (a device assert).
__global__ void half_barrier(float* x) {
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  if (threadIdx.x == 0) init(&bar, blockDim.x / 2);
  __syncthreads();
  x[threadIdx.x] = 1.0f;
  bar.arrive_and_wait();
}
"""

SHAPES = [(3, 64), (2, (16, 4)), (1, 256), (4, 32)]


def _threads(block) -> int:
    return block if isinstance(block, int) else block[0] * block[1]


def _results(tmp_path, kernel: str, grid, block, args: dict, shmem: int = 0) -> list[tuple[str, dict]]:
    """The arrays after the kernel, from the emulator, the LLVM JIT and the C backend."""
    path = tmp_path / "async.cu"
    path.write_text(KERNELS)
    gpu = polypy.load(str(path)).kernel(kernel)
    results = [("emulator", run_emulated(gpu, grid, block, args, shmem=shmem))]
    llvm = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    launch = getattr(polypy.compile(str(path)), kernel)
    (launch[grid, block, shmem] if shmem else launch[grid, block])(*llvm.values())
    results.append(("llvm", llvm))
    if find_compiler(False) is not None:
        results.append(("c", run_c(gpu, grid, block, args, shmem=shmem)))
    return results


@pytest.mark.parametrize("grid, block", SHAPES)
def test_per_thread_pipeline_stages_through_shared_memory(tmp_path, grid, block) -> None:
    nt = _threads(block)
    x = np.random.default_rng(nt).standard_normal(grid * nt * 8).astype(np.float32)
    args = {"x": x, "y": np.zeros(grid * nt * 2, np.float32)}
    weights = np.arange(1, 5, dtype=np.float32)
    want = (x.reshape(grid, 2, nt, 4) * weights).sum(-1, dtype=np.float32).reshape(-1)
    for name, got in _results(tmp_path, "staged", grid, block, args):
        np.testing.assert_allclose(got["y"], want, rtol=1e-6, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("grid, block", SHAPES)
def test_block_barrier_arrive_wait_orders_the_blocks_threads(tmp_path, grid, block) -> None:
    nt = _threads(block)
    x = np.random.default_rng(nt + 1).standard_normal(grid * nt).astype(np.float32)
    args = {"x": x, "y": np.zeros(grid * nt, np.float32)}
    xb = x.reshape(grid, nt)
    y1 = np.roll(xb, -1, axis=1) + np.float32(2) * xb
    want = (y1 + np.float32(2) * np.roll(y1, -3, axis=1)).reshape(-1)
    for name, got in _results(tmp_path, "neighbours", grid, block, args):
        np.testing.assert_allclose(got["y"], want, rtol=1e-6, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("grid, block", [(3, 64), (2, 96), (2, 32)])
def test_cooperative_groups_memcpy_async_then_wait(tmp_path, grid, block) -> None:
    x = np.random.default_rng(block).standard_normal(grid * block).astype(np.float32)
    args = {"x": x, "y": np.zeros(grid * block, np.float32), "tile": block}
    xb = x.reshape(grid, block)
    want = (xb + np.roll(xb, -1, 1) + np.roll(xb, -2, 1)).reshape(-1)
    for name, got in _results(tmp_path, "cg_window", grid, block, args, shmem=4 * block):
        np.testing.assert_allclose(got["y"], want, rtol=1e-6, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("grid, block", SHAPES)
def test_pipeline_primitives(tmp_path, grid, block) -> None:
    nt = _threads(block)
    x = np.random.default_rng(nt).integers(0, 9, grid * nt * 2).astype(np.int32)
    args = {"x": x, "y": np.zeros(grid * nt, np.int32)}
    for name, got in _results(tmp_path, "primitives", grid, block, args):
        np.testing.assert_array_equal(got["y"], x[0::2] * 10 + x[1::2], err_msg=name)


@pytest.mark.parametrize("grid, block", [(3, 64), (2, (8, 8)), (2, (16, 2))])
def test_group_copy_completed_by_a_block_barrier(tmp_path, grid, block) -> None:
    nt = _threads(block)
    x = np.random.default_rng(nt).standard_normal(grid * nt)
    args = {"x": x, "y": np.zeros(grid * nt)}
    for name, got in _results(tmp_path, "barrier_copy", grid, block, args):
        np.testing.assert_array_equal(got["y"], x.reshape(grid, nt)[:, ::-1].reshape(-1), err_msg=name)


@pytest.mark.parametrize("grid, block", [(2, 64), (3, 256)])
def test_shared_arrays_with_alignas_after_shared(tmp_path, grid, block) -> None:
    x = np.random.default_rng(block).standard_normal(grid * block).astype(np.float32)
    args = {"x": x, "y": np.zeros(grid * block, np.float32)}
    want = (np.float32(3) * x.reshape(grid, block)[:, ::-1]).reshape(-1)
    for name, got in _results(tmp_path, "aligned", grid, block, args):
        np.testing.assert_array_equal(got["y"], want, err_msg=name)


def test_other_attribute_lists_after_a_specifier_stay_errors(tmp_path) -> None:
    src = tmp_path / "attr.cu"
    src.write_text("__global__ void k(float* x) {\n  static __attribute__((unused)) [[maybe_unused]] int y = 1;\n"
                   "  x[0] = y;\n}\n")
    result = _polypy("translate", str(src), "-o", str(tmp_path / "out.cpp"))
    assert result.returncode == 1 and f"{src}:2:34: error: an attribute list cannot appear here" in result.stderr


def test_a_barrier_of_fewer_threads_than_the_block_is_a_device_assert(tmp_path) -> None:
    path = tmp_path / "async.cu"
    path.write_text(KERNELS)
    gpu = polypy.load(str(path)).kernel("half_barrier")
    with pytest.raises(DeviceAssertError, match="expected count other than the block's thread count"):
        run_emulated(gpu, 1, 64, {"x": np.zeros(64, np.float32)})
    with pytest.raises(DeviceAssertError, match="expected count other than the block's thread count") as info:
        polypy.compile(str(path)).half_barrier[1, 64](np.zeros(64, np.float32))
    assert info.value.loc is not None and info.value.loc.file == str(path)


PROGRAM = r"""#include <cstdio>
#include <cuda_runtime.h>
#include <cuda/pipeline>
#include <cuda/barrier>
__global__ void staged(const float* x, float* y) {
  __shared__ float buf[2][64 * 4];
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  if (threadIdx.x == 0) init(&bar, blockDim.x);
  __syncthreads();
  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  const auto shape = cuda::aligned_size_t<16>(4 * sizeof(float));
  int t = threadIdx.x;
  for (int s = 0; s < 2; ++s) {
    pipe.producer_acquire();
    cuda::memcpy_async(&buf[s][4 * t], &x[(blockIdx.x * 2 + s) * 256 + 4 * t], shape, pipe);
    pipe.producer_commit();
  }
  cuda::pipeline_consumer_wait_prior<0>(pipe);
  bar.arrive_and_wait();
  float acc = 0.0f;
  for (int k = 0; k < 4; ++k) acc += buf[1][(4 * t + 4 + k) % 256];
  y[blockIdx.x * 64 + t] = acc + buf[0][t];
}
int main() {
  const int nb = 4;
  static float hx[nb * 512], hy[nb * 64];
  for (int i = 0; i < nb * 512; ++i) hx[i] = (float)(i % 17);
  float *dx, *dy;
  cudaMalloc(&dx, sizeof hx); cudaMalloc(&dy, sizeof hy);
  cudaMemcpy(dx, hx, sizeof hx, cudaMemcpyHostToDevice);
  staged<<<nb, 64>>>(dx, dy);
  cudaMemcpy(hy, dy, sizeof hy, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int b = 0; b < nb; ++b) for (int t = 0; t < 64; ++t) {
    float want = 0.0f;
    for (int k = 0; k < 4; ++k) want += hx[(b * 2 + 1) * 256 + (4 * t + 4 + k) % 256];
    want += hx[(b * 2) * 256 + t];
    if (hy[b * 64 + t] != want) ++bad;
  }
  printf("bad=%d y[5]=%g\n", bad, hy[5]);
  return bad != 0;
}
"""


def _polypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=600)


def test_a_whole_program_with_a_pipeline_and_a_barrier_runs_translated_and_emulated(tmp_path) -> None:
    if find_compiler(True) is None:
        pytest.skip("no C++ compiler (c++/g++/clang++) on this machine")
    src = tmp_path / "prog.cu"
    src.write_text(PROGRAM)
    hx = (np.arange(4 * 512) % 17).astype(np.float32)
    want = sum(hx[256 + (20 + 4 + k) % 256] for k in range(4)) + hx[5]
    for extra in ((), ("--emulate",)):
        result = _polypy("run", str(src), *extra)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout == f"bad=0 y[5]={want:g}\n", extra


REFUSED = [
    ("if (threadIdx.x < 32) bar.arrive_and_wait();", 11, 25, "so must every arrival on a cuda::barrier"),
    ("bar.arrive_and_drop();", 11, 7, "arrive_and_drop (a barrier whose expected count changes) is not supported"),
    ("__shared__ cuda::barrier<cuda::thread_scope_device> dev;\n  init(&dev, 1);", 12, 3,
     "a cuda::barrier of another scope than thread_scope_block is not supported"),
    ("__shared__ cuda::pipeline_shared_state<cuda::thread_scope_block, 2> state;\n"
     "  auto pipe = cuda::make_pipeline(cg::this_thread_block(), &state);", 12, 21,
     "a block-scoped cuda::pipeline (pipeline_shared_state, make_pipeline of a group) is not supported"),
    ("auto pipe = cuda::make_pipeline();\n  cuda::memcpy_async(cg::this_thread_block(), x, x + 32, 128, pipe);",
     12, 9, "cuda::memcpy_async of a group into a thread-scoped cuda::pipeline is not supported"),
]


@pytest.mark.parametrize("body, line, col, message", REFUSED)
def test_what_is_not_run_exactly_is_a_located_error(tmp_path, body, line, col, message) -> None:
    src = tmp_path / "refused.cu"
    src.write_text(HEADERS + "__global__ void k(float* x) {\n  __shared__ cuda::barrier<cuda::thread_scope_block> bar;\n"
                   "  if (threadIdx.x == 0) init(&bar, blockDim.x);\n  __syncthreads();\n  " + body + "\n}\n")
    result = _polypy("translate", str(src), "-o", str(tmp_path / "out.cpp"))
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"{src}:{line}:{col}: error: " in result.stderr and message in result.stderr, result.stderr
    assert "^" in result.stderr and not (tmp_path / "out.cpp").exists()


def test_other_libcu_headers_stay_refused_by_name(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("POLYPY_CCCL_INCLUDE", "off")  # without polypy[thrust] (with it: tests/test_thrust.py)
    src = tmp_path / "atomic.cu"
    src.write_text("#include <cuda/atomic>\n__global__ void k(float* x) { x[0] = 1.0f; }\n")
    result = _polypy("translate", str(src), "-o", str(tmp_path / "out.cpp"))
    assert result.returncode == 1 and f"{src}:1:10: error: libcu++" in result.stderr, result.stderr
