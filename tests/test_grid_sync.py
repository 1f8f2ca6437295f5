"""``grid.sync()`` of cooperative groups with ``cudaLaunchCooperativeKernel`` (issue 36).

Our own kernels and programs, checked against NumPy through the C backend (every block on its own
thread, a barrier of the team at each grid barrier), the emulator (the whole grid in lockstep) and
whole translated programs; the refused forms, located. See docs/cooperative_groups.md."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import polypy
from c_support import run_c, run_emulated
from polypy.errors import UserError

CORES = os.cpu_count() or 1

# Two phases: each block reduces its part into partial[b] (a tree in shared memory); after the grid
# barrier block 0 sums the partials; every thread then also adds its own register `acc` (kept
# across the barrier) and the block's shared s[0] (kept too) into its slot of `mine`.
REDUCE = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void reduce2(const float* x, float* partial, float* out, float* mine, int n) {
    extern __shared__ float s[];
    cg::grid_group grid = cg::this_grid();
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        acc += x[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k /= 2) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
    grid.sync();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        float t = 0.0f;
        for (int b = 0; b < gridDim.x; b++) t += partial[b];
        out[0] = t;
    }
    int other = (blockIdx.x + 1) % gridDim.x;
    mine[grid.thread_rank()] = acc + 2.0f * s[0] + 4.0f * partial[other];
}
"""


def _reduce_reference(x: np.ndarray, grid: int, block: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(x)
    stride = grid * block
    acc = np.zeros(grid * block, np.float64)
    for g in range(grid * block):
        acc[g] = x[g:n:stride].astype(np.float64).sum()
    partial = acc.reshape(grid, block).sum(axis=1)
    other = np.roll(partial, -1)
    mine = acc + 2 * np.repeat(partial, block) + 4 * np.repeat(other, block)
    return partial, mine


def _needs_cores(grid: int) -> None:
    if grid > CORES:
        pytest.skip(f"a cooperative launch of {grid} blocks needs {grid} cores (this machine has {CORES})")


@pytest.mark.parametrize("way", ["emulator", "c"])
@pytest.mark.parametrize("grid,block", [(1, 32), (2, 64), (2, 128), (3, 32), (4, 256)])
def test_two_phase_reduction(tmp_path, way: str, grid: int, block: int) -> None:
    src = tmp_path / "r.cu"
    src.write_text(REDUCE)
    kernel = polypy.load(str(src)).kernel("reduce2")
    n = 1000
    x = np.random.default_rng(grid * block).standard_normal(n).astype(np.float32)
    args = {"x": x, "partial": np.zeros(grid, np.float32), "out": np.zeros(1, np.float32),
            "mine": np.zeros(grid * block, np.float32), "n": n}
    if way == "c":
        _needs_cores(grid)
        got = run_c(kernel, grid, block, args, shmem=block * 4)
    else:
        got = run_emulated(kernel, grid, block, args, shmem=block * 4)
    partial, mine = _reduce_reference(x, grid, block)
    np.testing.assert_allclose(got["partial"], partial, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["out"][0], partial.sum(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["mine"], mine, rtol=1e-5, atol=1e-4)


def test_python_api_emulates_and_the_jit_refuses(tmp_path) -> None:
    src = tmp_path / "r.cu"
    src.write_text(REDUCE)
    mod = polypy.compile(str(src))
    x = np.arange(300, dtype=np.float32) / 7
    partial, out, mine = np.zeros(3, np.float32), np.zeros(1, np.float32), np.zeros(3 * 64, np.float32)
    mod.reduce2.emulate[3, 64, 64 * 4](x, partial, out, mine, 300)
    np.testing.assert_allclose(out[0], x.astype(np.float64).sum(), rtol=1e-5)
    with pytest.raises(UserError) as e:
        mod.reduce2[2, 64, 64 * 4](x, partial, out, mine, 300)
    assert "r.cu:17:5" in str(e.value) and "LLVM backend" in str(e.value)


# Jacobi iterations of a 1-D Laplace problem in one cooperative launch: grid barriers inside a
# loop; a register (`last`) and shared memory (`part`) live across them; the grid is sized from
# the occupancy API, as CUDA's samples do; a grid one block too large is refused by the launch.
JACOBI = r"""
#include <cstdio>
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__global__ void jacobi(float* x, float* y, float* res, int n, int iters) {
    cg::grid_group grid = cg::this_grid();
    __shared__ float part[256];
    int stride = gridDim.x * blockDim.x;
    float last = 0.0f;
    for (int it = 0; it < iters; it++) {
        float local = 0.0f;
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
            float l = i > 0 ? x[i - 1] : 1.0f;
            float r = i < n - 1 ? x[i + 1] : 0.0f;
            y[i] = 0.5f * (l + r);
            local += (y[i] - x[i]) * (y[i] - x[i]);
        }
        part[threadIdx.x] = local;
        grid.sync();
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
            x[i] = y[i];
        __syncthreads();
        if (threadIdx.x == 0) {
            float s = 0.0f;
            for (int t = 0; t < blockDim.x; t++) s += part[t];
            res[it * gridDim.x + blockIdx.x] = s;
        }
        last = local;
        cg::sync(grid);
    }
    if (grid.thread_rank() == 0) res[iters * gridDim.x] = last;
}

int main() {
    const int n = 1000, iters = 50, block = 128;
    int coop = 0, per_sm = 0;
    cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, 0);
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, jacobi, block, 0);
    int blocks = prop.multiProcessorCount * per_sm;
    printf("cooperative %d, one block per multiprocessor %d\n", coop, per_sm == 1 && blocks == prop.multiProcessorCount);
    float *x, *y, *res;
    cudaMallocManaged(&x, n * sizeof(float));
    cudaMallocManaged(&y, n * sizeof(float));
    cudaMallocManaged(&res, (iters * blocks + 1) * sizeof(float));
    for (int i = 0; i < n; i++) x[i] = 0.0f;
    int nn = n, it = iters;
    void* args[] = {&x, &y, &res, &nn, &it};
    cudaError_t e = cudaLaunchCooperativeKernel((void*)jacobi, blocks, block, args);
    cudaDeviceSynchronize();
    printf("launch: %s\n", cudaGetErrorString(e));
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i] * (i + 1);
    double r = 0;
    for (int b = 0; b < blocks; b++) r += res[(iters - 1) * blocks + b];
    printf("%.4f %.6e\n", s, r);
    x[0] = -1.0f;
    e = cudaLaunchCooperativeKernel(jacobi, dim3(blocks + 1), dim3(block), args, 0, 0);
    printf("too large: %s, x[0] %.1f\n", cudaGetErrorString(e), x[0]);
    return 0;
}
"""


def _jacobi_reference() -> tuple[float, float]:
    n, iters = 1000, 50
    x = np.zeros(n, np.float32)
    d = 0.0
    for _ in range(iters):
        left = np.concatenate([[np.float32(1)], x[:-1]])
        right = np.concatenate([x[1:], [np.float32(0)]])
        y = (np.float32(0.5) * (left + right)).astype(np.float32)
        d = float(((y - x).astype(np.float64) ** 2).sum())
        x = y
    return float((x.astype(np.float64) * np.arange(1, n + 1)).sum()), d


def _check_jacobi_output(stdout: str) -> None:
    lines = stdout.splitlines()
    assert lines[0] == "cooperative 1, one block per multiprocessor 1"
    assert lines[1] == "launch: no error"
    checksum, residual = map(float, lines[2].split())
    want_sum, want_res = _jacobi_reference()
    assert abs(checksum - want_sum) < 1e-3 and abs(residual - want_res) < 1e-3 * want_res
    assert lines[3] == "too large: too many blocks in cooperative launch, x[0] -1.0"


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: whole programs cannot be compiled")
def test_jacobi_iterations_in_one_cooperative_launch(tmp_path) -> None:
    src = tmp_path / "j.cu"
    src.write_text(JACOBI)
    out = tmp_path / "j.cpp"
    subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o", str(out)],
                   check=True, cwd=tmp_path)
    build = subprocess.run(["g++", "-O2", "-fopenmp", str(out), "-o", str(tmp_path / "j"), "-lm"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(tmp_path / "j")], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr
    _check_jacobi_output(run.stdout)


@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                    reason="no C++ compiler: polypy run cannot build the host program")
def test_jacobi_emulated(tmp_path) -> None:
    src = tmp_path / "j.cu"
    src.write_text(JACOBI)
    run = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", "--emulate", str(src)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr
    _check_jacobi_output(run.stdout)


HEAD = "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"


@pytest.mark.parametrize("name,body,where,message", [
    ("thread_if", "if (threadIdx.x < 16) g.sync();", ":6:27", "grid.sync() under control"),
    ("block_if", "if (blockIdx.x == 0) g.sync();", ":6:26", "grid.sync() under control"),
    ("block_loop", "for (int i = 0; i < blockIdx.x; i++) g.sync();", ":6:42", "grid.sync() under control"),
    ("block_load", "if (x[blockIdx.x] > 0) cg::sync(g);", ":6:28", "grid.sync() under control"),
    ("block_return", "if (blockIdx.x == 1) return;\n    g.sync();", ":7:5", "grid.sync() under control"),
])
def test_grid_sync_under_divergent_control_is_refused(tmp_path, name, body, where, message) -> None:
    src = tmp_path / f"{name}.cu"
    src.write_text(HEAD + "__global__ void k(float* x) {\n    cg::grid_group g = cg::this_grid();\n"
                   f"    x[threadIdx.x] = 1.0f;\n    {body}\n}}\n")
    with pytest.raises(UserError) as e:
        polypy.load(str(src))
    assert f"{name}.cu{where}" in str(e.value) and message in str(e.value)


# A cuda::barrier (whose arrival asserts its count, which guards what follows with a flag) inside a
# branch of block 0 between two grid barriers: a failed assert aborts the launch, so the grid
# barrier after it is still reached by every block; every block reads what block 0 wrote.
AW = HEAD + r"""#include <cuda/barrier>
__global__ void aw(double* r) {
    cg::thread_block cta = cg::this_thread_block();
    cg::grid_group grid = cg::this_grid();
    cg::thread_block_tile<32> tile32 = cg::tiled_partition<32>(cta);
    __shared__ cuda::barrier<cuda::thread_scope_block> barrier;
    if (threadIdx.x == 0) init(&barrier, blockDim.x);
    cg::sync(cta);
    double s = threadIdx.x;
    cg::sync(grid);
    if (blockIdx.x == 0) {
        for (int o = 16; o > 0; o /= 2) s += tile32.shfl_down(s, o);
        auto token = barrier.arrive();
        barrier.wait(std::move(token));
        if (cta.thread_rank() == 32) r[0] = s;
    }
    cg::sync(grid);
    if (threadIdx.x == 0) r[1 + blockIdx.x] = r[0] + blockIdx.x;
}
"""


@pytest.mark.parametrize("way", ["emulator", "c"])
def test_cuda_barrier_in_a_block_branch_between_grid_barriers(tmp_path, way: str) -> None:
    src = tmp_path / "aw.cu"
    src.write_text(AW)
    kernel = polypy.load(str(src)).kernel("aw")
    grid = min(CORES, 2) if way == "c" else 3
    args = {"r": np.zeros(1 + grid, np.float64)}
    got = run_c(kernel, grid, 64, args) if way == "c" else run_emulated(kernel, grid, 64, args)
    want = float(sum(range(32, 64)))
    np.testing.assert_array_equal(got["r"], [want] + [want + b for b in range(grid)])


def test_plain_launch_of_a_grid_sync_kernel_is_refused(tmp_path) -> None:
    src = tmp_path / "p.cu"
    src.write_text(HEAD + "__global__ void k(float* x) { cg::this_grid().sync(); x[0] = 1.0f; }\n"
                   "int main() {\n  float* x; cudaMalloc(&x, 4);\n  k<<<2, 32>>>(x);\n  return 0;\n}\n")
    run = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o",
                          str(tmp_path / "p.cpp")], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert f"{src}:6:3: error: kernel 'k' uses grid.sync() and is launched with <<<...>>>" in run.stderr
    assert not (tmp_path / "p.cpp").exists()


def test_grad_refuses_grid_sync(tmp_path) -> None:
    src = tmp_path / "g.cu"
    src.write_text(REDUCE)
    run = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "grad", str(src), "--kernel", "reduce2",
                          "--wrt", "x"], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "g.cu:17:5: error: kernel 'reduce2' uses grid.sync()" in run.stderr


def test_a_grid_sync_no_block_reaches_is_no_wait(tmp_path) -> None:
    # Every block returns before the barrier: nobody waits (CUDA too), in the emulator and in C.
    src = tmp_path / "e.cu"
    src.write_text(HEAD + "__global__ void k(float* x, float* y, int stop) {\n"
                   "    x[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;\n"
                   "    if (stop) return;\n    cg::this_grid().sync();\n"
                   "    y[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f + x[(blockIdx.x + 1) % gridDim.x * blockDim.x];\n}\n")
    kernel = polypy.load(str(src)).kernel("k")
    for stop, want in ((1, 0.0), (0, 2.0)):
        args = {"x": np.zeros(64, np.float32), "y": np.zeros(64, np.float32), "stop": stop}
        for got in [run_emulated(kernel, 2, 32, args)] + ([run_c(kernel, 2, 32, args)] if CORES >= 2 else []):
            np.testing.assert_array_equal(got["x"], 1.0)
            np.testing.assert_array_equal(got["y"], want)


def test_ir_text_round_trip() -> None:
    from polypy.ir import parse_kernel
    from polypy.ir.printer import print_kernel

    text = "kernel k(x: f32*) {\n  x[0] = 1.0f\n  barrier.grid\n  barrier\n}\n"
    kernel = parse_kernel(text)
    assert [type(s).__name__ + getattr(s, "scope", "") for s in kernel.body[1:]] == ["Barriergrid", "Barrierblock"]
    assert "barrier.grid" in print_kernel(kernel)


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: whole programs cannot be compiled")
def test_extern_c_kernel_in_a_whole_program(tmp_path) -> None:
    # `extern "C" __global__ void k(...)` (reductionMultiBlockCG's kernel): the translation replaces
    # the linkage specification too, so its static block function is not declared extern "C".
    src = tmp_path / "e.cu"
    src.write_text('#include <cstdio>\nextern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }\n'
                   "int main() {\n  float* x; cudaMallocManaged(&x, 4 * sizeof(float));\n"
                   "  for (int i = 0; i < 4; i++) x[i] = i;\n  twice<<<1, 4>>>(x); cudaDeviceSynchronize();\n"
                   '  printf("%g %g\\n", x[1], x[3]);\n  return 0;\n}\n')
    subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o", str(tmp_path / "e.cpp")],
                   check=True, cwd=tmp_path)
    build = subprocess.run(["g++", "-O2", "-fopenmp", str(tmp_path / "e.cpp"), "-o", str(tmp_path / "e"), "-lm"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(tmp_path / "e")], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert run.stdout == "2 6\n"
