"""C++ written as libraries write it (issue 36, C++ in device code), found by running such code:
a ``std::array``-like class template whose ``operator[]`` indexes its array member at run time
(``return v[i];`` through ``this``) — as a local and as a by-value kernel parameter (its array
member then stays in memory, param_arrays.py) — and a variadic function template whose
parameter pack expands to several parameters of one name (``Ts... xs`` in a fold expression:
each is its own variable; they were all bound to the last argument, a wrong answer). Run on the
emulator and the C backend, two launch shapes, against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

from c_support import run_way

SOURCE = r"""
template <class T, int N> struct Arr {
  T v[N];
  __host__ __device__ T& operator[](int i) { return v[i]; }
  __host__ __device__ const T& operator[](int i) const { return v[i]; }
  __host__ __device__ constexpr int size() const { return N; }
};
template <typename... Ts> __device__ float sum_all(Ts... xs) { return (xs + ... + 0.0f); }
template <typename... Ts> __device__ float weigh(float w, Ts... xs) { return ((w * xs) + ...); }
__global__ void poly(const float* x, float* y, float* z, int n, Arr<float, 4> coef) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Arr<float, 4> pw;
  pw[0] = 1.0f;
  for (int k = 1; k < pw.size(); ++k) pw[k] = pw[k - 1] * x[i];
  float acc = 0.0f;
  for (int k = 0; k < 4; ++k) acc += coef[k] * pw[k];
  y[i] = acc + coef[i % 4] + pw[(i + 1) % 4];
  z[i] = sum_all(1.0f, 2.0f, x[i]) + weigh(0.5f, x[i], 4.0f, 8.0f) * 10.0f;
}
"""

COEF = np.array([1.0, -2.0, 0.5, 0.25], np.float32)


@pytest.mark.parametrize("way", ["emulator", "c"])
@pytest.mark.parametrize("grid,block,n", [((1,), (1,), 1), ((3,), (16,), 37)])
def test_member_operator_index_and_parameter_packs(way: str, grid, block, n: int) -> None:
    f = np.float32
    x = (f(0.5) * (np.arange(n) - 3)).astype(f)
    args = {"x": x, "y": np.zeros(n, f), "z": np.zeros(n, f), "n": np.int32(n), "coef": {"v": COEF}}
    out = run_way(SOURCE, "poly", grid, block, args, way)
    pw = np.stack([np.ones(n, f), x, x * x, x * x * x]).astype(f)
    acc = np.zeros(n, f)
    for k in range(4):
        acc = (acc + COEF[k] * pw[k]).astype(f)
    i = np.arange(n)
    want_y = acc + COEF[i % 4] + pw[(i + 1) % 4, i]
    want_z = (f(1.0) + (f(2.0) + (x + f(0.0)))) + ((f(0.5) * x + f(0.5) * f(4.0)) + f(0.5) * f(8.0)) * f(10.0)
    np.testing.assert_array_equal(out["y"], want_y.astype(f))
    np.testing.assert_array_equal(out["z"], want_z.astype(f))


CHAINS = r"""
constexpr int cpow(int b, int e) { return e == 0 ? 1 : b * cpow(b, e - 1); }
struct Acc {
  float s = 0;
  template <class T> __device__ Acc& add(T v) { s += v; return *this; }
  __device__ Acc& operator+=(const Acc& o) { s += o.s; return *this; }
  __device__ void inc() { s += 1.0f; }
};
__global__ void chain(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Acc a;
  a.add(i).add(0.25f).add((short)3);
  (a += a).inc();
  constexpr int p = cpow(2, 5);
  const int q = cpow(3, 3) + p;
  out[i] = a.s * 10.0f + p + q;
}
"""


@pytest.mark.parametrize("way", ["emulator", "c"])
def test_chained_calls_on_the_returned_this_and_constexpr_recursion(way: str) -> None:
    """``a.add(i).add(0.25f)`` and ``(a += a).inc()`` (each call returns ``*this``: the next
    one changes the same object; it was refused as a call on a temporary) and ``constexpr int p = cpow(2, 5)`` of a
    recursive ``constexpr`` function (clang's constant value; it was refused as recursion)."""
    n = 13
    out = run_way(CHAINS, "chain", (2,), (8,), {"out": np.zeros(n, np.float32), "n": np.int32(n)}, way)
    f = np.float32
    i = np.arange(n).astype(f)
    s = (i + f(0.25)) + f(3)
    np.testing.assert_array_equal(out["out"], ((s + s) + f(1)) * f(10) + f(32) + f(59))
