"""C++ in device code, issue 36's fourth round (docs/cxx_device.md, "Fourth round"): range-based
``for`` (over local arrays, array members, arrays of records, rows, brace lists, classes whose
``begin()``/``end()`` return pointers, ``std::array``), ``std::array``'s members, ``std::min`` /
``std::max`` of records, with comparators and of brace lists, ``std::clamp``,
``std::initializer_list`` parameters, ``std::pair`` (``make_pair``,
constructors, comparisons, structured bindings), nested brace lists of array
members; a gradient through a range-for, a returned lambda and an array captured by value.

Each kernel runs through the emulator, the LLVM backend (``polypy.compile``) and the C backend
against hand-computed values over two launch shapes. The ``std::`` kernels need the system's
C++ headers (libstdc++'s ``<array>``, ``<algorithm>``: polypy's bundled ones declare less)."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

import polypy
from c_support import assert_load_refused, run_three_ways
from frontend.clang_setup import header_mode

KERNELS = r"""
#include <initializer_list>
struct P { float a, b; };
struct Buf {  // begin() and end() return pointers: a range
  float d[4];
  int n;
  __device__ float* begin() { return d; }
  __device__ float* end() { return d + n; }
};
struct Row { float d[3]; int tag; };

__global__ void ranges(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float s = 0.0f;
  float b[3] = {v, 10.0f, 100.0f};
  for (float e : b) s += e;                        // copies
  for (float& e : b) { if (e > 50.0f) break; e += 1.0f; }  // references; break
  for (float e : b) { if (e < 5.0f) continue; s += 1000.0f * e; }  // continue
  out[5 * i] = s + b[0] + 10.0f * b[2];
  P ps[2] = {{1.0f, 2.0f}, {v, 4.0f}};
  for (P& p : ps) p.a += p.b;                      // records by reference
  float t = 0.0f;
  for (const P p : ps) t += p.a * p.b;             // records by value
  out[5 * i + 1] = t;
  float u = 0.0f;
  for (float e : {1.0f, v, 3.0f}) u += e;          // a brace list
  for (int k : {1, 2, i}) u += 10.0f * k;
  out[5 * i + 2] = u;
  Buf q = {{v, 2.0f, 3.0f, 4.0f}, 2 + i % 3};      // a nested list for the array member
  float w = 0.0f;
  for (float e : q) w += e;
  out[5 * i + 3] = w + 100.0f * q.n;
  Row r = {{1.0f}, 7};                             // d[1], d[2] value-initialized
  r.d[2] += v;
  for (float& e : r.d) e *= 3.0f;                  // an array member
  float z = 0.0f;
  for (float e : r.d) z = 10.0f * z + e;
  out[5 * i + 4] = z + r.tag;
}

struct Mat { float a[3][3]; };
__global__ void row_ranges(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float m[2][3] = {{1.0f, 2.0f, 3.0f}, {x[i], 5.0f, 6.0f}};
  float s = 0.0f;
  for (auto& row : m) {                            // rows of a local array
    for (float v : row) s += v;
    row[1] *= 10.0f;
  }
  Mat q = {{{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}, {7.0f, 8.0f, x[i]}}};
  for (auto& row : q.a) for (float& v : row) v += 1.0f;   // rows of a matrix member
  for (const auto& row : q.a) s += 100.0f * row[2];
  out[i] = s + m[0][1] + m[1][1];
}

struct Coef { float d[3]; int n; };
__device__ float coef_sum(Coef c) { float t = 0.0f; for (float v : c.d) t += v; return t; }
__global__ void param_ranges(Coef c, const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float p = 0.0f;
  for (float v : c.d) p = p * x[i] + v;           // an array member of a by-value kernel parameter
  out[i] = p + 10.0f * coef_sum(c) + c.n;
}
"""

STD_KERNELS = r"""
#include <algorithm>
#include <array>
#include <initializer_list>
#include <utility>
struct Pt {
  float v;
  int id;
  __device__ bool operator<(const Pt& o) const { return v < o.v; }
};
struct ByAbs { __device__ bool operator()(float a, float b) const { return fabsf(a) < fabsf(b); } };

__device__ std::pair<float, int> argmin2(float a, float b) {
  return a <= b ? std::make_pair(a, 0) : std::make_pair(b, 1);
}

__global__ void std_pairs(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  std::pair<float, int> p = argmin2(x[i], 0.0f);      // make_pair, returned from a function
  p.first *= 2.0f;
  p.second += 10;
  std::pair<float, int> q{1.0f, i};
  bool lt = p < q;
  std::pair<float, int> m = std::max(p, q);           // pair's operator<
  auto [v, k] = p;                                    // structured bindings
  std::pair<int, int> z;                              // value-initialized
  out[3 * i] = p.first + 100.0f * p.second + 1000.0f * lt;
  out[3 * i + 1] = m.first + 10.0f * m.second;
  out[3 * i + 2] = v + k + z.first + z.second;
}

__device__ float total(std::initializer_list<float> l) {
  float s = 0.0f;
  for (float v : l) s += v;
  return s + 100.0f * l.size();
}

__global__ void init_lists(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[3 * i] = std::max({x[i], 0.1f, -x[i]});
  out[3 * i + 1] = std::min({x[i], 0.5f, 2.0f * x[i]});
  out[3 * i + 2] = total({x[i], 2.0f, 3.0f}) + 1000.0f * total({1.0f});
}

__global__ void std_arrays(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  std::array<float, 4> a = {1.0f, 2.0f, 3.0f, x[i]};
  float s = 0.0f;
  for (float v : a) s += v;
  for (auto& v : a) v *= 2.0f;
  a[i % 4] += 100.0f;
  out[3 * i] = s;
  out[3 * i + 1] = a[0] + 10.0f * a[3] + 1000.0f * a.size();
  out[3 * i + 2] = a.front() + a.back() + a[1];
}

__global__ void std_min_max(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Pt a{x[i], 1}, b{-x[i], 2};
  Pt m = std::max(a, b);                                           // operator<
  Pt l = std::min(a, b, [](const Pt& p, const Pt& q) { return p.id > q.id; });  // a comparator
  const Pt& r = std::min(a, b);
  out[5 * i] = m.v + 10.0f * m.id;
  out[5 * i + 1] = l.id + 10.0f * r.id;
  out[5 * i + 2] = std::clamp(x[i], -0.5f, 0.25f);
  out[5 * i + 3] = std::max(x[i], 0.3f, ByAbs());
  out[5 * i + 4] = std::clamp(i, 3, 9) + std::min(i, 5) * 100;
}
"""


@pytest.fixture(scope="module")
def paths(tmp_path_factory) -> dict[str, pathlib.Path]:
    root = tmp_path_factory.mktemp("cxx_device4_ranges")
    out = {}
    for name, text in (("plain", KERNELS), ("std", STD_KERNELS)):
        out[name] = root / f"{name}.cu"
        out[name].write_text(text)
    return out


@pytest.fixture(scope="module")
def plain(paths):
    return polypy.load(str(paths["plain"])), polypy.compile(str(paths["plain"]))


@pytest.fixture(scope="module")
def std(paths):
    if header_mode() != "system":
        pytest.skip("no system C++ headers (libstdc++'s <array>, <algorithm>): polypy's bundled ones declare less")
    return polypy.load(str(paths["std"])), polypy.compile(str(paths["std"]))


SHAPES = [((1,), (32,)), ((3,), (16,))]


@pytest.mark.parametrize("grid,block", SHAPES)
def test_range_based_for(plain, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(21).standard_normal(n).astype(np.float32)
    v = x.astype(np.float64)
    i = np.arange(n)
    e = np.zeros((n, 5))
    b0 = v + 1                                   # v < 50 always; 11 too; 100 stops the loop
    s = v + 110 + 1000 * (np.where(b0 >= 5, b0, 0) + 11 + 100)
    e[:, 0] = s + b0 + 1000
    e[:, 1] = (1 + 2) * 2 + (v + 4) * 4
    e[:, 2] = 1 + v + 3 + 10 * (1 + 2 + i)
    d = np.stack([v, np.full(n, 2.0), np.full(n, 3.0), np.full(n, 4.0)], axis=1)
    cnt = 2 + i % 3
    e[:, 3] = np.array([d[k, :cnt[k]].sum() for k in range(n)]) + 100 * cnt
    e[:, 4] = 100 * 3 + 10 * 0 + 3 * v + 7
    args = {"x": x, "out": np.zeros(5 * n, np.float32), "n": n}
    for got in run_three_ways(*plain, "ranges", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 5), e, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_range_based_for_over_rows(plain, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(26).standard_normal(n).astype(np.float32)
    v = x.astype(np.float64)
    e = (6 + v + 11) + 100 * (4 + 7 + v + 1) + 20 + 50
    args = {"x": x, "out": np.zeros(n, np.float32), "n": n}
    for got in run_three_ways(*plain, "row_ranges", grid, block, args):
        np.testing.assert_allclose(got["out"], e, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_range_based_for_over_a_parameter_member(plain, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(27).standard_normal(n).astype(np.float32)
    v = x.astype(np.float64)
    d = np.array([1.5, -2.0, 4.0], np.float32)
    e = (d[0] * v + d[1]) * v + d[2] + 10 * d.sum() + 3
    args = {"c": {"d": d, "n": 3}, "x": x, "out": np.zeros(n, np.float32), "n": n}
    for got in run_three_ways(*plain, "param_ranges", grid, block, args):
        np.testing.assert_allclose(got["out"], e, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_std_array(std, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(22).standard_normal(n).astype(np.float32)
    v = x.astype(np.float64)
    i = np.arange(n)
    a = np.stack([np.full(n, 2.0), np.full(n, 4.0), np.full(n, 6.0), 2 * v], axis=1)
    a[i, i % 4] += 100
    e = np.stack([6 + v, a[:, 0] + 10 * a[:, 3] + 4000, a[:, 0] + a[:, 3] + a[:, 1]], axis=1)
    args = {"x": x, "out": np.zeros(3 * n, np.float32), "n": n}
    for got in run_three_ways(*std, "std_arrays", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 3), e, rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_initializer_lists(std, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(28).standard_normal(n).astype(np.float32)
    v = x.astype(np.float64)
    e = np.stack([np.maximum(np.maximum(v, 0.1), -v), np.minimum(np.minimum(v, 0.5), 2 * v),
                  v + 5 + 300 + 1000 * 101], axis=1)
    args = {"x": x, "out": np.zeros(3 * n, np.float32), "n": n}
    for got in run_three_ways(*std, "init_lists", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 3), e, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_std_pair(std, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(25).standard_normal(n).astype(np.float32)
    v = x.astype(np.float64)
    i = np.arange(n)
    first = np.where(v <= 0, v, 0.0) * 2
    second = np.where(v <= 0, 0, 1) + 10
    lt = (first < 1.0) | ((first == 1.0) & (second < i))
    m_first = np.where(lt, 1.0, first)
    m_second = np.where(lt, i, second)
    e = np.stack([first + 100 * second + 1000 * lt, m_first + 10 * m_second, first + second], axis=1)
    args = {"x": x, "out": np.zeros(3 * n, np.float32), "n": n}
    for got in run_three_ways(*std, "std_pairs", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 3), e, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_std_min_max_of_records_and_comparators(std, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(23).standard_normal(n).astype(np.float32)
    x[0] = 0.0  # a tie: std::max returns its first argument, std::min too
    v = x.astype(np.float64)
    i = np.arange(n)
    a_wins_max = ~(v < -v)                       # max(a, b) = a < b ? b : a
    e = np.zeros((n, 5))
    e[:, 0] = np.where(a_wins_max, v + 10, -v + 20)
    e[:, 1] = 2 + 10 * np.where(-v < v, 2, 1)    # min(a, b, comp) = comp(b, a) ? b : a; min(a, b) = b < a ? b : a
    e[:, 2] = np.clip(v, -0.5, 0.25)
    e[:, 3] = np.where(np.abs(v) < 0.3, 0.3, v)  # max(a, b, comp) = comp(a, b) ? b : a
    e[:, 4] = np.clip(i, 3, 9) + np.minimum(i, 5) * 100
    args = {"x": x, "out": np.zeros(5 * n, np.float32), "n": n}
    for got in run_three_ways(*std, "std_min_max", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 5), e, rtol=1e-6, atol=1e-6)


GRAD_KERNEL = r"""
__device__ auto make_poly(double c) { return [c](double v) { return c * v * v + v; }; }

__global__ void ranged(const double* p, double* e, double k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double a[3] = {p[3 * i], p[3 * i + 1], p[3 * i + 2]};
  auto f = make_poly(k);
  auto g = [a](int j) { return a[j] * a[j]; };   // a copy of a
  a[0] = 0.0;
  double s = 0.0;
  for (double& v : a) v += 1.0;
  for (double v : a) s += f(v);
  e[i] = s + g(0) * k;
}
"""


@pytest.mark.parametrize("grid,block", [((1,), (32,)), ((3,), (16,))])
def test_gradient_through_ranges_and_returned_lambdas(tmp_path, grid, block) -> None:
    from autodiff.check import check_gradients
    from polypy.driver.gradients import grad_kernel

    path = tmp_path / "ranged.cu"
    path.write_text(GRAD_KERNEL)
    module = polypy.load(str(path))
    k_grad = grad_kernel(module, "ranged", wrt=["p", "k"])
    k_fwd = grad_kernel(module, "ranged", wrt=["p", "k"], mode="forward")
    n = grid[0] * block[0] - 3
    p = np.random.default_rng(24).standard_normal(3 * n)
    args = {"p": p, "e": np.zeros(n), "k": 0.7, "n": n}
    result = check_gradients(module.kernel("ranged"), k_grad, grid, block, args, k_fwd=k_fwd)
    assert abs(result.finite_difference) > 1e-8
    assert result.error() < 1e-6, result
    assert result.forward_effect_error < 1e-12, result
    got = dict(args, e=np.zeros(n))
    polypy.emulate(module.kernel("ranged"), grid, block, got)
    q = p.reshape(n, 3).copy()
    g0 = q[:, 0] ** 2
    q[:, 0] = 0.0
    q += 1.0
    np.testing.assert_allclose(got["e"], (0.7 * q * q + q).sum(axis=1) + g0 * 0.7, rtol=1e-12)


REFUSED = [
    ("range-over-rows-by-value",
     "__global__ void k(float* y) { float m[2][2] = {{1, 2}, {3, 4}}; float s = 0;\n"
     "  for (auto row : m) s += row[0]; y[threadIdx.x] = s; }\n",
     "over the rows of an array with a loop variable that is not a reference", (2, 13)),
    ("range-over-iterators-of-class-type",
     "struct It { float* p; __device__ float& operator*() { return *p; } __device__ It& operator++() { ++p; return *this; }\n"
     "  __device__ bool operator!=(const It& o) const { return p != o.p; } };\n"
     "struct R { float d[2]; __device__ It begin() { return It{d}; } __device__ It end() { return It{d + 2}; } };\n"
     "__global__ void k(float* y) { R r{{1, 2}}; float s = 0; for (float v : r) s += v; y[threadIdx.x] = s; }\n",
     "over iterators of class type", (4, 72)),
]


@pytest.mark.parametrize("name,text,message,where", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_with_location(name, text, message, where, tmp_path: pathlib.Path) -> None:
    assert_load_refused(tmp_path, name, text, message, where)
