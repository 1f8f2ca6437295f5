"""C++ in device code, issue 36's fourth round (docs/cxx_device.md, "Fourth round"): records with
array members of several dimensions (``struct M { float a[3][3]; }``) as locals, copies, by-value
parameters of device functions and of kernels, indexed at run time; brace lists of such members;
``const T&`` functions returning one of their arguments (``std::max``'s form) read as values.

Each kernel runs through the emulator, the LLVM backend (``polypy.compile``) and the C backend
against hand-computed values over two launch shapes; a gradient through a matrix member."""
from __future__ import annotations


import numpy as np
import pytest

import polypy
from c_support import run_three_ways

KERNELS = r"""
struct M { float a[3][3]; int tag; };
struct Cube { float c[2][2][2]; };

__device__ float det(M m) {   // a copy: its changes stay in it
  m.a[0][0] += 0.0f;
  return m.a[0][0] * (m.a[1][1] * m.a[2][2] - m.a[1][2] * m.a[2][1])
       - m.a[0][1] * (m.a[1][0] * m.a[2][2] - m.a[1][2] * m.a[2][0])
       + m.a[0][2] * (m.a[1][0] * m.a[2][1] - m.a[1][1] * m.a[2][0]);
}
__device__ float bump_trace(M m, int k) { m.a[k][k] += 1.0f; return m.a[0][0] + m.a[1][1] + m.a[2][2]; }

__global__ void matrices(M g, const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int r = i % 3, s = (i + 1) % 3;
  M c;                                  // a local, set element by element at run-time indices
  for (int p = 0; p < 3; p++)
    for (int q = 0; q < 3; q++) c.a[p][q] = (p == q ? 2.0f : 0.0f) + x[i] * (p + 1) * (q == 2);
  c.tag = i;
  M d = c;                              // a copy
  d.a[r][s] = 100.0f;
  out[6 * i] = det(c) + c.a[r][s];
  out[6 * i + 1] = bump_trace(d, r) + d.a[r][r] + d.a[r][s];
  out[6 * i + 2] = g.a[r][s] + x[i] * g.tag + det(g);   // the kernel's by-value parameter
  g.a[r][r] = -1.0f;                    // each thread's own copy
  out[6 * i + 3] = g.a[0][0] + g.a[1][1] + g.a[2][2];
  Cube k = {{{{1.0f, 2.0f}, {3.0f, 4.0f}}, {{x[i]}}}};  // a brace list: the rest zero
  k.c[i & 1][(i >> 1) & 1][1] += 10.0f;
  float sum = 0.0f;
  for (int p = 0; p < 2; p++) for (int q = 0; q < 2; q++) for (int t = 0; t < 2; t++) sum += k.c[p][q][t] * (1 + p + 2 * q + 4 * t);
  out[6 * i + 4] = sum;
  M e = {{{x[i], 1.0f}, {}, {0.0f, 0.0f, 5.0f}}, 3};
  out[6 * i + 5] = e.a[0][0] + 10.0f * e.a[0][1] + 100.0f * e.a[1][r] + e.a[2][2] * e.tag;
}

// ------------------------------------------------------------ const T& results (std::max's form)
__device__ const float& mx(const float& a, const float& b) { return a < b ? b : a; }
__device__ const float& mx2(const float& a, const float& b) { if (a < b) return b; return a; }
template <class T> __device__ const T& lo(const T& a, const T& b) { return b < a ? b : a; }
__device__ const float& one_of(const float& a, const float& b, const float& c, int k) {
  return k == 0 ? a : (k == 1 ? b : c);
}

__global__ void const_refs(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i], b = -x[i];
  float r = mx(a, b);                   // a value: the larger
  const float& q = mx2(a, b);           // a reference to a or b
  const float& l = lo(a, b);
  float c = 3.0f;
  const float& o = one_of(a, b, c, i % 3);
  a = 5.0f;                             // seen through q, l and o when they name a
  c = 6.0f;
  out[4 * i] = r + mx(x[i], 0.25f);
  out[4 * i + 1] = q;
  out[4 * i + 2] = l + lo(i, 7);
  out[4 * i + 3] = o;
}
"""


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    path = tmp_path_factory.mktemp("cxx_device4_records") / "kernels.cu"
    path.write_text(KERNELS)
    return polypy.load(str(path)), polypy.compile(str(path))


SHAPES = [((1,), (32,)), ((3,), (16,))]


def _det(m: np.ndarray) -> np.ndarray:
    return np.linalg.det(m)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_two_dimensional_array_members(modules, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(31).standard_normal(n).astype(np.float32)
    v = x.astype(np.float64)
    i = np.arange(n)
    r, s = i % 3, (i + 1) % 3
    g = np.array([[2.0, 0.5, -1.0], [1.5, 3.0, 0.25], [0.0, -2.0, 1.0]])
    e = np.zeros((n, 6))
    for k in range(n):
        c = 2.0 * np.eye(3)
        c[:, 2] += v[k] * np.arange(1, 4)
        d = c.copy()
        d[r[k], s[k]] = 100.0
        e[k, 0] = _det(c) + c[r[k], s[k]]
        bumped = d.copy()
        bumped[r[k], r[k]] += 1.0
        e[k, 1] = np.trace(bumped) + d[r[k], r[k]] + d[r[k], s[k]]
        e[k, 2] = g[r[k], s[k]] + v[k] * 7 + _det(g)
        h = g.copy()
        h[r[k], r[k]] = -1.0
        e[k, 3] = np.trace(h)
        cube = np.zeros((2, 2, 2))
        cube[0] = [[1, 2], [3, 4]]
        cube[1, 0, 0] = v[k]
        cube[k & 1, (k >> 1) & 1, 1] += 10.0
        w = np.array([[[1 + p + 2 * q + 4 * t for t in range(2)] for q in range(2)] for p in range(2)])
        e[k, 4] = (cube * w).sum()
        e[k, 5] = v[k] + 10.0 + 0.0 + 5.0 * 3
    args = {"g": {"a": g.astype(np.float32), "tag": 7}, "x": x, "out": np.zeros(6 * n, np.float32), "n": n}
    for got in run_three_ways(*modules, "matrices", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 6), e, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_const_reference_results_read_as_values(modules, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(32).standard_normal(n).astype(np.float32)
    v = x.astype(np.float64)
    i = np.arange(n)
    e = np.zeros((n, 4))
    e[:, 0] = np.abs(v) + np.maximum(v, 0.25)
    e[:, 1] = np.where(v < -v, -v, 5.0)       # q names b when a < b, else a (then 5)
    e[:, 2] = np.where(-v < v, -v, 5.0) + np.minimum(i, 7)
    e[:, 3] = np.choose(i % 3, [np.full(n, 5.0), -v, np.full(n, 6.0)])
    args = {"x": x, "out": np.zeros(4 * n, np.float32), "n": n}
    for got in run_three_ways(*modules, "const_refs", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 4), e, rtol=1e-6, atol=1e-6)


GRAD_KERNEL = r"""
struct M2 { double a[2][2]; };
__device__ double quad(M2 m, const double* v) {   // v^T m v
  double s = 0.0;
  for (int r = 0; r < 2; r++) for (int c = 0; c < 2; c++) s += v[r] * m.a[r][c] * v[c];
  return s;
}
__global__ void energy(const double* p, double* e, double k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  M2 m;
  m.a[0][0] = k; m.a[0][1] = p[2 * i]; m.a[1][0] = 0.5; m.a[1][1] = k * p[2 * i + 1];
  e[i] = quad(m, p + 2 * i) + m.a[i % 2][(i + 1) % 2];
}
"""


@pytest.mark.parametrize("grid,block", [((1,), (32,)), ((3,), (16,))])
def test_gradient_through_a_matrix_member(tmp_path, grid, block) -> None:
    from autodiff.check import check_gradients
    from polypy.driver.gradients import grad_kernel

    path = tmp_path / "energy.cu"
    path.write_text(GRAD_KERNEL)
    module = polypy.load(str(path))
    k_grad = grad_kernel(module, "energy", wrt=["p", "k"])
    k_fwd = grad_kernel(module, "energy", wrt=["p", "k"], mode="forward")
    n = grid[0] * block[0] - 3
    p = np.random.default_rng(33).standard_normal(2 * n)
    args = {"p": p, "e": np.zeros(n), "k": 0.7, "n": n}
    result = check_gradients(module.kernel("energy"), k_grad, grid, block, args, k_fwd=k_fwd)
    assert abs(result.finite_difference) > 1e-8
    assert result.error() < 1e-6, result
    assert result.forward_effect_error < 1e-12, result
    got = dict(args, e=np.zeros(n))
    polypy.emulate(module.kernel("energy"), grid, block, got)
    q = p.reshape(n, 2)
    i = np.arange(n)
    m = np.zeros((n, 2, 2))
    m[:, 0, 0] = 0.7
    m[:, 0, 1] = q[:, 0]
    m[:, 1, 0] = 0.5
    m[:, 1, 1] = 0.7 * q[:, 1]
    want = np.einsum("nr,nrc,nc->n", q, m, q) + m[i, i % 2, (i + 1) % 2]
    np.testing.assert_allclose(got["e"], want, rtol=1e-12)
