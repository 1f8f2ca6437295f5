"""C++ in device code that real programs use (issue 36, item 2, third round): delegating
constructors, local arrays of records with user default constructors or brace initializers,
lambdas made in device code (generic, ``mutable``, init-captures, ``this``, mixed captures,
immediately invoked), functions returning one of several places by reference.

Each kernel runs through the emulator, the LLVM backend (``polypy.compile``) and the C backend
against hand-computed or NumPy expectations over two launch shapes (docs/cxx_device.md)."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

import polypy
from c_support import assert_load_refused, run_c

KERNELS = r"""
// ------------------------------------------------------------ delegating constructors
struct D3 {
  float x, y, z;
  __device__ D3(float a, float b, float c) : x(a), y(b), z(c) {}
  __device__ D3() : D3(0.0f, 0.0f, 0.0f) {}
  __device__ D3(float a) : D3(a, 2.0f * a, a) { z += 1.0f; }
};
struct Tagged : D3 {
  int tag;
  __device__ Tagged(float a, int t) : D3(a, a, a), tag(t) {}
  __device__ Tagged(int t) : Tagged(0.5f * t, t + 1) { tag *= 2; }
};

__global__ void delegating(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  D3 v(x[i]);
  D3 w;
  Tagged t(i);
  out[3 * i] = v.x + 10.0f * v.y + 100.0f * v.z;
  out[3 * i + 1] = w.x + w.y + w.z;
  out[3 * i + 2] = t.x + t.y + t.z + (float)t.tag;
}
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("cxx_device3") / "kernels.cu"
    path.write_text(KERNELS)
    return path


@pytest.fixture(scope="module")
def loaded(source):
    return polypy.load(str(source))


@pytest.fixture(scope="module")
def compiled(source):
    return polypy.compile(str(source))


def run_all(loaded, compiled, name: str, grid, block, args: dict) -> list[dict]:
    """``args`` copied and run by the emulator, the LLVM backend and the C backend."""
    out = []
    for how in ("emulator", "llvm"):
        a = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}
        if how == "emulator":
            polypy.emulate(loaded.kernel(name), grid, block, a)
        else:
            getattr(compiled, name)[grid, block](*a.values())
        out.append(a)
    out.append(run_c(loaded.kernel(name), grid, block, args))
    return out


SHAPES = [((1,), (32,)), ((3,), (16,))]


@pytest.mark.parametrize("grid,block", SHAPES)
def test_delegating_constructors(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    i = np.arange(n, dtype=np.float32)
    expected = np.zeros((n, 3), np.float32)
    expected[:, 0] = x + np.float32(10.0) * (np.float32(2.0) * x) + np.float32(100.0) * (x + np.float32(1.0))
    expected[:, 1] = 0.0
    h = np.float32(0.5) * i
    expected[:, 2] = h + h + h + 2.0 * (i + 1)
    for got in run_all(loaded, compiled, "delegating", grid, block,
                       {"x": x, "out": np.zeros(3 * n, np.float32), "n": n}):
        np.testing.assert_allclose(got["out"].reshape(n, 3), expected, rtol=1e-6, atol=1e-5)
