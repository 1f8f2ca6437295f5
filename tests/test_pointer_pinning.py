"""A pointer keeps the address it was given (C's meaning), not one recomputed from later values.

``const float* p = a + i; i = i + 1; *p`` read ``a[i + 1]`` before: the pointer's offset was kept
as the expression ``i`` and evaluated at the read. Each kernel runs through the emulator, the LLVM
JIT and the C backend against a NumPy reference."""
from __future__ import annotations

import numpy as np
import pytest

from c_support import WAYS, run_way

SOURCE = r"""
__device__ float read_after_bump(const float* p, int& i)
{
    i = i + 5;      // the caller's i changes; p was bound to a + i before
    return *p;
}

__global__ void pinned(const float* a, const int* idx, int* scratch, float* out, int n)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    bool in = t < n;                 // no early return: a barrier follows
    int i = t;
    const float* p = a + i;          // a variable offset
    i = i + 1;
    if (in)
        out[4 * t] = *p;             // a[t], not a[t + 1]

    __shared__ float rows[4][64];
    int r = t % 4;
    rows[r][threadIdx.x] = a[t];
    rows[(r + 1) % 4][threadIdx.x] = -a[t];
    __syncthreads();
    const float* row = rows[r];      // a row pointer with a variable row
    r = (r + 1) % 4;
    if (!in)
        return;
    out[4 * t + 1] = row[threadIdx.x];

    scratch[t] = idx[t];
    const float* q = a + scratch[t]; // an offset read from memory
    scratch[t] = 0;
    out[4 * t + 2] = *q;

    int j = t;
    out[4 * t + 3] = read_after_bump(a + j, j) + (float)(j - t);  // a[t] + 5
}

__global__ void in_loop(const float* a, float* out, int n)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n)
        return;
    float acc = 0.0f;
    for (int k = 0; k < 3; k++) {
        const float* q = a + t + k;  // a fresh pointer each iteration
        acc += q[0];
    }
    out[t] = acc;
}
"""


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", [(1, 32), (3, 64)])
def test_a_pointer_keeps_its_address(way: str, grid: int, block: int) -> None:
    n = grid * block - 3
    rng = np.random.default_rng(block)
    a = rng.standard_normal(grid * block + 8).astype(np.float32)
    idx = rng.integers(0, n, grid * block).astype(np.int32)
    args = {"a": a, "idx": idx, "scratch": np.zeros(grid * block, np.int32),
            "out": np.zeros(4 * grid * block, np.float32), "n": n}
    got = run_way(SOURCE, "pinned", (grid, 1, 1), (block, 1, 1), args, way, name="pinned.cu")["out"]
    t = np.arange(n)
    want = np.zeros(4 * grid * block, np.float32)
    want[4 * t] = a[t]
    want[4 * t + 1] = a[t]
    want[4 * t + 2] = a[idx[:n]]
    want[4 * t + 3] = a[t] + 5.0
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("way", WAYS)
def test_a_pointer_made_in_each_iteration(way: str) -> None:
    n = 100
    a = np.random.default_rng(1).standard_normal(n + 2).astype(np.float32)
    got = run_way(SOURCE, "in_loop", (2, 1, 1), (64, 1, 1), {"a": a, "out": np.zeros(n, np.float32), "n": n},
                  way, name="pinned.cu")["out"]
    want = (a[:n] + a[1:n + 1]) + a[2:n + 2]
    np.testing.assert_allclose(got, want, rtol=1e-6)
