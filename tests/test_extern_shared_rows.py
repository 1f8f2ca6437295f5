"""``extern __shared__ T s[][C]``: the launch's dynamic shared memory seen as rows of C elements
(issue 41). ``s[r][c]`` is element ``r * C + c`` of the one dynamic buffer, which every other
``extern __shared__`` declaration of the kernel aliases (docs/typed_views.md). Our own kernels,
checked against NumPy through the emulator, the LLVM JIT and the C backend, several launch shapes."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import WAYS, run_way
from polypy.emulator import emulate
from polypy.errors import UserError

# Rows of 40 floats filled by the warps (warp w fills rows w, w + warps, ...), a barrier, then
# every thread reads a row backwards through a row pointer and the same bytes through a flat
# float array and through rows of another width.
ROWS = r"""
#define C 40
__global__ void rows(const float* in, float* out, int nrows) {
    extern __shared__ float s[][C];
    extern __shared__ float flat[];
    extern __shared__ float pairs[][2 * C];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int nw = blockDim.x / 32;
    for (int r = warp; r < nrows; r += nw)
        for (int c = lane; c < C; c += 32)
            s[r][c] = in[blockIdx.x * nrows * C + r * C + c];
    __syncthreads();
    for (int i = threadIdx.x; i < nrows * C; i += blockDim.x) {
        int r = i / C, c = i % C;
        float* row = &s[r][0];
        float* row2 = s[r];
        out[blockIdx.x * nrows * C + i] = row[C - 1 - c] + 2.0f * flat[i] + 4.0f * row2[c]
                                          + 8.0f * pairs[i / (2 * C)][i % (2 * C)];
    }
}
"""

# Rows of half (the tensor-core samples' layout, rows with a skew) written as int4 vectors and
# read back as halves.
HALF_ROWS = r"""
#include <cuda_fp16.h>
#define K 16
#define SKEW 8
__global__ void half_rows(const int4* in, float* out) {
    extern __shared__ half sh[][K + SKEW];
    int r = threadIdx.x / 2, part = threadIdx.x % 2;
    *((int4*)&sh[r][part * 8]) = in[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    for (int c = 0; c < K; c++)
        out[(blockIdx.x * (blockDim.x / 2) + r) * K * 2 + part * K + c] =
            __half2float(sh[(r + part) % (blockDim.x / 2)][K - 1 - c]);
}
"""


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block,nrows", [(1, 32, 3), (3, 64, 5), (2, 128, 4)])
def test_rows_of_the_dynamic_buffer(tmp_path, way: str, grid: int, block: int, nrows: int) -> None:
    C = 40
    nrows = nrows + nrows % 2  # `pairs` reads rows of 2 * C
    x = np.random.default_rng(grid * block).standard_normal(grid * nrows * C).astype(np.float32)
    args = {"in": x, "out": np.zeros_like(x), "nrows": nrows}
    out = run_way(ROWS, "rows", grid, block, args, way, shmem=nrows * C * 4)
    tiles = x.reshape(grid, nrows, C)
    want = tiles[:, :, ::-1] + 2 * tiles + 4 * tiles + 8 * tiles
    np.testing.assert_allclose(out["out"], want.reshape(-1), rtol=1e-6)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", [(1, 32), (2, 64)])
def test_rows_of_half_with_a_skew(tmp_path, way: str, grid: int, block: int) -> None:
    rows = block // 2
    halves = np.random.default_rng(block).standard_normal(grid * rows * 16).astype(np.float16)
    x = halves.view(np.int32).reshape(-1, 4).copy()  # int4 vectors: 8 halves each
    args = {"in": x, "out": np.zeros(grid * rows * 32, np.float32)}
    out = run_way(HALF_ROWS, "half_rows", grid, block, args, way, shmem=rows * 24 * 2)
    h = halves.reshape(grid, rows, 16).astype(np.float32)
    want = np.zeros((grid, rows, 2, 16), np.float32)
    for part in range(2):
        want[:, :, part, :] = np.roll(h, -part, axis=1)[:, :, ::-1]
    np.testing.assert_array_equal(out["out"], want.reshape(-1))


def test_rows_of_a_template_width_and_a_pointer_to_rows_refused(tmp_path) -> None:
    src = tmp_path / "t.cu"
    src.write_text("template <int N> __global__ void k(float* o) {\n"
                   "    extern __shared__ float s[][N];\n"
                   "    s[threadIdx.x / N][threadIdx.x % N] = (float)threadIdx.x;\n"
                   "    __syncthreads();\n"
                   "    o[threadIdx.x] = s[(threadIdx.x + 1) % (blockDim.x / N)][0];\n}\n"
                   "void host(float* o) { k<4><<<1, 16, 64>>>(o); }\n")
    out = {"o": np.zeros(16, np.float32)}
    emulate(polypy.load(str(src)).kernel("k_4"), 1, 16, out, shmem=64)
    np.testing.assert_array_equal(out["o"], 4.0 * ((np.arange(16) + 1) % 4))
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k(float* o) {\n"
                   "    extern __shared__ float s[][8];\n"
                   "    float (*rows)[8] = s;\n"
                   "    o[0] = rows[0][0];\n}\n")
    with pytest.raises(UserError) as e:
        polypy.load(str(bad))
    assert ":3:" in str(e.value)
