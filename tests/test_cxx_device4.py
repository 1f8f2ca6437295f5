"""C++ in device code, issue 36's fourth round (docs/cxx_device.md, "Fourth round"): lambdas
capturing ``*this`` by copy and local arrays by value, functions (plain, templates, lambdas and
member functions) returning lambdas, records holding lambdas; a gradient through a ``[*this]``
lambda held by a record.

Each kernel runs through the emulator, the LLVM backend (``polypy.compile``) and the C backend
against hand-computed values over two launch shapes."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

import polypy
from c_support import assert_load_refused, run_three_ways

KERNELS = r"""
// ------------------------------------------------------------ [*this]
struct Scale {
  float w, b;
  __device__ float run(float v) {
    auto f = [*this](float u) { return w * u + b; };  // a copy of the object, made now
    w = 100.0f;                                        // not seen by f
    auto g = [*this, v](float u) mutable { b += u; return b * v + w; };  // its own copy
    float r = f(v) + 10.0f * f(1.0f);
    float g1 = g(1.0f);
    auto h = g;                                        // a copy of g's object too
    float g2 = g(2.0f);
    float h1 = h(4.0f);
    return r + g1 + g2 + h1 + b;                       // b unchanged by g and h
  }
};

__global__ void this_copy(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Scale s{x[i], 2.0f};
  out[2 * i] = s.run(3.0f);
  out[2 * i + 1] = s.w + s.b;
}

// ------------------------------------------------------------ arrays captured by value
template <class F> __device__ float call_at(F f, int j) { return f(j); }
struct Q { float a; int b; };

__global__ void array_capture(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float a[3] = {v, 2.0f, 3.0f};
  int m[2][2] = {{1, 2}, {3, i}};
  auto f = [=](int j) { return a[j] + m[1][1]; };     // copies of a and m
  auto g = [a](int j) { return a[j] * 2.0f; };
  auto acc = [a](float u) mutable { a[0] += u; return a[0]; };
  a[0] = 7.0f;                                        // after the copies: not seen by f, g, acc
  m[1][1] = 100;
  acc(1.0f);
  auto acc2 = acc;                                    // a copy of acc's array
  acc(10.0f);
  out[4 * i] = f(0) + f(i % 3);
  out[4 * i + 1] = g(0) + call_at(g, 2);
  out[4 * i + 2] = acc(0.0f) + 100.0f * acc2(0.5f);
  out[4 * i + 3] = a[0] + (float)m[1][1];
  Q q[2] = {{v, 1}, {2.0f, i}};                       // records of mixed member types
  float2 f2[2] = {{1.0f, 2.0f}, {v, 4.0f}};
  auto r = [q, f2](int j) { return q[j].a + 10.0f * q[j].b + 100.0f * f2[j].x; };
  q[0].a = 50.0f;
  q[1].b = 9;
  f2[1].x = 0.0f;
  out[4 * n + i] = r(0) + 1000.0f * r(1);
}

// ------------------------------------------------------------ functions returning lambdas
__device__ auto make_scale(float s) { return [s](float x) { return s * x; }; }
template <class T> __device__ auto make_affine(T a, T b) { return [=](T x) { return a * x + b; }; }
__device__ auto make_counter(int& hits) { return [&hits](float x) { hits++; return x + 1.0f; }; }
template <class F, class G> __device__ auto compose(F f, G g) { return [=](float x) { return f(g(x)); }; }

struct Poly {
  float c0, c1;
  __device__ auto evaluator() const { return [this](float x) { return c0 + c1 * x; }; }
  __device__ auto snapshot() const { return [*this](float x) { return c0 - c1 * x; }; }
};

__global__ void returned_lambdas(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  auto f = make_scale(3.0f);
  auto g = make_affine(v, 1.0f);
  auto gi = make_affine(i, 2);
  int hits = 0;
  auto h = make_counter(hits);
  float h1 = h(v);
  h(0.0f);
  auto make = [](float k) { return [k](float u) { return k - u; }; };  // a lambda returning one
  auto d = make(v);
  auto fg = compose(f, g);
  Poly p{1.0f, v};
  auto e = p.evaluator();
  auto s = p.snapshot();
  p.c1 = 10.0f;                                       // seen by e (it holds `this`), not by s
  out[6 * i] = f(v) + g(2.0f);
  out[6 * i + 1] = (float)gi(3) + h1 + 10.0f * hits;
  out[6 * i + 2] = d(1.0f);
  out[6 * i + 3] = fg(2.0f);
  out[6 * i + 4] = e(2.0f);
  out[6 * i + 5] = s(2.0f);
}

// ------------------------------------------------------------ records holding lambdas
template <class F> struct Mapper {
  F f;
  float bias;
  __device__ float operator()(float x) const { return f(x) + bias; }
};
template <class M> __device__ float apply_map(M m, float v) { return m(v); }
template <class F> struct Counter {
  F f;
  int calls;
  __device__ float step(float x) { calls++; return f(x); }
};

__global__ void held_lambdas(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 3.0f;
  auto l = [s](float v) { return v * s; };
  Mapper<decltype(l)> m{l, 1.0f};
  auto acc = [t = 0.0f](float v) mutable { t += v; return t; };
  Counter<decltype(acc)> c{acc, 0};                  // its own copy of acc's state
  c.step(x[i]);
  float r = c.step(1.0f);
  Counter<decltype(acc)> d = c;                     // a copy: copies the state too
  d.step(10.0f);
  float a0 = acc(0.0f);                             // acc itself: unchanged
  out[3 * i] = m(x[i]) + 10.0f * apply_map(m, 2.0f);
  out[3 * i + 1] = r + 100.0f * c.calls + 1000.0f * d.calls;
  out[3 * i + 2] = a0 + c.step(0.0f) + 100.0f * d.step(0.0f);
}
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("cxx_device4") / "kernels.cu"
    path.write_text(KERNELS)
    return path


@pytest.fixture(scope="module")
def loaded(source):
    return polypy.load(str(source))


@pytest.fixture(scope="module")
def compiled(source):
    return polypy.compile(str(source))


SHAPES = [((1,), (32,)), ((3,), (16,))]


@pytest.mark.parametrize("grid,block", SHAPES)
def test_lambda_capturing_a_copy_of_this(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(11).standard_normal(n).astype(np.float32)
    w = x.astype(np.float64)
    r = (3 * w + 2) + 10 * (w + 2)
    g1 = (2 + 1) * 3 + 100.0      # g's copy (made after w = 100): b 2 -> 3
    g2 = (3 + 2) * 3 + 100.0      # 3 -> 5
    h1 = (3 + 4) * 3 + 100.0      # h copied g when its b was 3
    e = np.stack([r + g1 + g2 + h1 + 2, np.full(n, 102.0)], axis=1)
    args = {"x": x, "out": np.zeros(2 * n, np.float32), "n": n}
    for got in run_three_ways(loaded, compiled, "this_copy", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 2), e, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_arrays_captured_by_value(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(12).standard_normal(n).astype(np.float32)
    v = x.astype(np.float64)
    i = np.arange(n)
    a = np.stack([v, np.full(n, 2.0), np.full(n, 3.0)], axis=1)
    e = np.zeros((n, 4))
    e[:, 0] = (v + i) + (a[i, i % 3] + i)
    e[:, 1] = 2 * v + 6
    e[:, 2] = (v + 11) + 100 * (v + 1.5)
    e[:, 3] = 107
    records = (v + 10 + 100) + 1000 * (2 + 10 * i + 100 * v)
    args = {"x": x, "out": np.zeros(5 * n, np.float32), "n": n}
    for got in run_three_ways(loaded, compiled, "array_capture", grid, block, args):
        np.testing.assert_allclose(got["out"][:4 * n].reshape(n, 4), e, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(got["out"][4 * n:], records, rtol=1e-5, atol=1e-2)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_functions_returning_lambdas(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(13).standard_normal(n).astype(np.float32)
    v = x.astype(np.float64)
    i = np.arange(n)
    e = np.zeros((n, 6))
    e[:, 0] = 3 * v + (2 * v + 1)
    e[:, 1] = (3 * i + 2) + (v + 1) + 20
    e[:, 2] = v - 1
    e[:, 3] = 3 * (2 * v + 1)
    e[:, 4] = 1 + 20
    e[:, 5] = 1 - 2 * v
    args = {"x": x, "out": np.zeros(6 * n, np.float32), "n": n}
    for got in run_three_ways(loaded, compiled, "returned_lambdas", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 6), e, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_records_holding_lambdas(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(14).standard_normal(n).astype(np.float32)
    v = x.astype(np.float64)
    e = np.zeros((n, 3))
    e[:, 0] = (3 * v + 1) + 10 * 7
    e[:, 1] = (v + 1) + 100 * 2 + 1000 * 3
    e[:, 2] = 0 + (v + 1) + 100 * (v + 11)
    args = {"x": x, "out": np.zeros(3 * n, np.float32), "n": n}
    for got in run_three_ways(loaded, compiled, "held_lambdas", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 3), e, rtol=1e-5, atol=1e-3)


REFUSED = [
    ("returned-lambda-capturing-a-parameter-by-reference",
     "__device__ auto bad(float s) { return [&s](float x) { return s * x; }; }\n"
     "__global__ void k(const float* x, float* out) { auto f = bad(3.0f); out[threadIdx.x] = f(x[threadIdx.x]); }\n",
     "returns a lambda capturing 's', its own local or by-value parameter, by reference", (1, 39)),
    ("returned-lambda-from-several-returns",
     "__device__ auto pick(float s) { auto l = [s](float x) { return s * x; };\n"
     "  if (s > 0) return l; return l; }\n"
     "__global__ void k(const float* x, float* out) { auto f = pick(3.0f); out[threadIdx.x] = f(x[threadIdx.x]); }\n",
     "returns a lambda from several returns", (3, 58)),
    ("record-holding-a-lambda-made-by-its-constructor",
     "template <class F> struct W { F f; __device__ W(F g) : f(g) {} };\n"
     "__global__ void k(const float* x, float* out) { float s = 3.0f; auto l = [s](float v) { return v * s; };\n"
     "  W<decltype(l)> w(l); out[threadIdx.x] = w.f(x[threadIdx.x]); }\n",
     "when a brace list makes it", (3, 18)),
    ("copy-of-this-with-a-user-copy-constructor",
     "struct A { float w; __device__ A(float v) : w(v) {} __device__ A(const A& o) : w(o.w + 1) {}\n"
     "  __device__ float run(float v) { auto f = [*this](float u) { return w * u; }; return f(v); } };\n"
     "__global__ void k(float* y) { A a(2.0f); y[threadIdx.x] = a.run(y[threadIdx.x]); }\n",
     "with its user-written copy constructor", (2, 44)),
]


@pytest.mark.parametrize("name,text,message,where", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_with_location(name, text, message, where, tmp_path: pathlib.Path) -> None:
    assert_load_refused(tmp_path, name, text, message, where)


GRAD_KERNEL = r"""
struct Spring {
  double k, rest;
  __device__ auto energy() const { return [*this](double d) { return 0.5 * k * (d - rest) * (d - rest); }; }
};
template <class F> struct Summed {
  F f;
  double w;
  __device__ double operator()(const double* v, int m) const {
    double s = 0.0;
    for (int j = 0; j < m; j++) s += w * f(v[j]);
    return s;
  }
};

__global__ void springs(const double* p, double* e, double k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Spring sp{k, p[3 * i]};
  auto f = sp.energy();
  sp.k = 100.0;                                   // not seen by f's copy
  Summed<decltype(f)> total{f, 2.0};
  e[i] = total(p + 3 * i + 1, 2);
}
"""


@pytest.mark.parametrize("grid,block", SHAPES)
def test_gradient_through_a_copy_of_this_and_a_record_holding_a_lambda(tmp_path, grid, block) -> None:
    from autodiff.check import check_gradients
    from polypy.driver.gradients import grad_kernel

    path = tmp_path / "springs.cu"
    path.write_text(GRAD_KERNEL)
    module = polypy.load(str(path))
    k_grad = grad_kernel(module, "springs", wrt=["p", "k"])
    k_fwd = grad_kernel(module, "springs", wrt=["p", "k"], mode="forward")
    n = grid[0] * block[0] - 3
    p = np.random.default_rng(15).standard_normal(3 * n)
    args = {"p": p, "e": np.zeros(n), "k": 0.7, "n": n}
    result = check_gradients(module.kernel("springs"), k_grad, grid, block, args, k_fwd=k_fwd)
    assert abs(result.finite_difference) > 1e-8
    assert result.error() < 1e-6, result
    assert result.forward_effect_error < 1e-12, result
    got = dict(args, e=np.zeros(n))
    polypy.emulate(module.kernel("springs"), grid, block, got)
    q = p.reshape(n, 3)
    want = 2.0 * 0.5 * 0.7 * ((q[:, 1] - q[:, 0]) ** 2 + (q[:, 2] - q[:, 0]) ** 2)
    np.testing.assert_allclose(got["e"], want, rtol=1e-12)
