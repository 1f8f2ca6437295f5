"""C++ in device code that real programs use (issue 36, item 2, third round): delegating
constructors, local arrays of records with user default constructors or brace initializers,
lambdas made in device code (generic, ``mutable``, init-captures, ``this``, mixed captures,
immediately invoked, to forwarding references), functions returning one of several places by
reference, conditional objects, structured bindings, class template instances constructed.

Each kernel runs through the emulator, the LLVM backend (``polypy.compile``) and the C backend
against hand-computed or NumPy expectations over two launch shapes (docs/cxx_device.md); the gradient and the whole program are in
tests/test_cxx_device3_programs.py."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

import polypy
from c_support import assert_load_refused, run_three_ways

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

// ------------------------------------------------------------ lambdas made in device code
template <typename F, typename T>
__device__ T apply(F f, T x) { return f(x); }
template <typename F>
__device__ float apply_ref(F& f, float x) { return f(x); }

struct Scaler {
  float w, b;
  __device__ float run(float v) {
    auto f = [this](float u) { return w * u + b; };  // explicit `this`
    auto g = [=](float u) { return u * w; };         // implicit `this`
    auto h = [&](float u) { b += u; return b; };     // changes the object's member
    float r = f(v) + g(v);
    h(1.0f);
    return r + f(0.0f);
  }
};

__global__ void lambdas3(const float* x, float* out, int n, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float s = 2.0f;
  int c = 0;
  auto mul = [](auto a, auto b) { return a * b; };                    // generic
  out[10 * i] = mul(v, 3.0f) + (float)mul(i, 2);
  auto f = [n2 = 2 * k, s, &c](float u) { c++; return u * n2 + s; };  // init-capture, mixed
  s = 100.0f;
  float a = f(v);
  float b = f(1.0f);
  out[10 * i + 1] = a + b + c;
  auto g = [=, &c](float u) { c += 10; return u * s; };
  float gv = g(v);
  out[10 * i + 2] = gv + c;
  auto h = [&, s](float u) { c += 100; return u + s; };
  s = 5.0f;
  float hv = h(v);
  out[10 * i + 3] = hv + c + s;
  float t = 1.0f;
  auto acc = [t](float u) mutable { t += u; return t; };               // mutable
  acc(v);
  auto acc2 = acc;                                                     // a copy of its state
  acc(1.0f);
  float a0 = acc(0.0f);
  float a2 = acc2(2.0f);
  out[10 * i + 4] = a0 + 10.0f * a2 + 100.0f * t;
  auto sq = [](auto u) { return u * u; };
  out[10 * i + 5] = apply([s](float u) { return u - s; }, v) + apply(sq, v) + apply(sq, i);
  int iv = [&]() { c += 1000; return c; }();                           // immediately invoked
  out[10 * i + 6] = iv + s + [](int m) { return m + 1; }(4);
  float r1 = apply_ref(acc, 1.0f);                                     // by reference: changes acc
  float r2 = apply(acc, 5.0f);                                         // by value: a copy
  out[10 * i + 7] = r1 + r2 + 10.0f * acc(0.0f);
  Scaler sc = {v, 1.0f};
  float run = sc.run(2.0f);
  out[10 * i + 8] = run + 100.0f * sc.b;
  out[10 * i + 9] = c;
}
// ------------------------------------------------------------ local arrays of constructed records
struct Acc {
  float sum = 0.0f;
  int count;
  float w;
  __device__ Acc() : count(0), w(1.0f) {}
  __device__ void add(float v) { sum += w * v; count++; }
};
struct P3 {
  float x, y, z;
  __device__ P3() : P3(-1.0f, -2.0f, -3.0f) {}
  __device__ P3(float a, float b, float c) : x(a), y(b), z(c) {}
  __device__ float sum() const { return x + y + z; }
};
struct Plain { float a; int b; };

__global__ void record_arrays(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Acc acc[8];
  for (int j = 0; j < 8; j++) acc[j].w = (float)(j + 1);
  for (int r = 0; r < 16; r++) acc[r & 7].add(x[i] + r);
  float s = 0.0f;
  int cnt = 0;
  for (int j = 0; j < 8; j++) { s += acc[j].sum; cnt += acc[j].count; }
  out[6 * i] = s;
  out[6 * i + 1] = cnt;
  P3 pts[2][3];
  pts[1][2] = P3(x[i], 0.0f, 1.0f);
  out[6 * i + 2] = pts[0][0].sum() + 10.0f * pts[1][2].sum() + pts[i & 1][1].y;
  P3 v[3] = {{1.0f, 2.0f, 3.0f}, {x[i], x[i], x[i]}};
  P3 w[2] = {P3(4.0f, 5.0f, 6.0f), P3()};
  out[6 * i + 3] = v[0].sum() + v[1].sum() * 10.0f + v[2].sum() * 100.0f;
  out[6 * i + 4] = w[0].x + w[1].z + w[i & 1].y;
  Plain q[3] = {{1.5f, 2}, {x[i], 3}};
  out[6 * i + 5] = q[0].a + q[1].a * q[1].b + q[2].a + q[2].b;
}
// ------------------------------------------------------------ references chosen at run time
struct V3r {
  float x, y, z;
  __device__ float& operator[](int k) {
    switch (k) { case 0: return x; case 1: return y; default: return z; }
  }
  __device__ const float& operator[](int k) const { return k == 0 ? x : (k == 1 ? y : z); }
};
__device__ float& pick(float& a, float& b, bool first) { return first ? a : b; }
__device__ float& larger(float& a, float& b) { if (a < b) return b; return a; }

__global__ void ref_choice(V3r* ps, const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  V3r v = {x[3 * i], x[3 * i + 1], x[3 * i + 2]};
  for (int k = 0; k < 3; k++) v[k] *= 2.0f;
  v[i % 3] += 1.0f;
  const V3r& cv = v;
  float a = 1.0f, b = 2.0f;
  pick(a, b, i & 1) = 10.0f;
  larger(a, b) += 100.0f;
  ((i & 2) ? a : b) -= 0.5f;
  ps[i][(i + 1) % 3] = cv[0] + cv[2];
  out[5 * i] = v.x;
  out[5 * i + 1] = v.y;
  out[5 * i + 2] = v.z;
  out[5 * i + 3] = a;
  out[5 * i + 4] = b + ps[i][i % 3];
}
// ------------------------------------------------------------ structured bindings
struct MaxAt { float value; int index; };
__device__ MaxAt argmax3(float a, float b, float c) {
  MaxAt m{a, 0};
  if (b > m.value) m = {b, 1};
  if (c > m.value) m = {c, 2};
  return m;
}

__global__ void bindings(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  auto [v, at] = argmax3(x[3 * i], x[3 * i + 1], x[3 * i + 2]);
  MaxAt s{x[3 * i], 7};
  auto& [sv, si] = s;      // names of s's members
  sv *= 2.0f;
  si += 1;
  auto [cv, ci] = s;       // names of a copy's
  cv = 0.0f;
  out[4 * i] = v;
  out[4 * i + 1] = at;
  out[4 * i + 2] = s.value + si;
  out[4 * i + 3] = ci + cv;
}
// ------------------------------------------------------------ forwarding references, `template` disambiguators
template <int N, typename F>
__device__ void unroll(F&& f) { for (int j = 0; j < N; j++) f(j); }
struct Pw {
  template <int N> __device__ static float pw(float v) { float r = 1.0f; for (int j = 0; j < N; j++) r *= v; return r; }
};
template <typename T> struct Holder {
  T v;
  template <int N> __device__ T pow() const { return Pw::template pw<N>(v); }
  __device__ T square() const { return this->template pow<2>(); }
};
template <typename H> __device__ float cube(const H& h) { return h.template pow<3>(); }

__global__ void forwarding(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc = 0.0f;
  unroll<4>([&](int j) { acc += x[(i + j) % n]; });
  float sh[4];
  unroll<4>([&sh, x, i](int j) { sh[j] = x[i] * j; });
  Holder<float> h{x[i]};
  out[3 * i] = acc;
  out[3 * i + 1] = sh[i % 4] + sh[3];
  out[3 * i + 2] = h.square() + cube(h);
}
// a non-const member function called on a conditional's object: one of two places
struct Counter {
  float a;
  int hits;
  __device__ void bump(float d) { a += d; hits++; }
  __device__ float get() const { return a; }
};
__global__ void cond_object(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Counter v{x[i], 0};
  Counter w{100.0f, 0};
  bool c = i & 1;
  (c ? v : w).bump(5.0f);
  (i % 3 == 0 ? w : v).bump(1.0f);
  out[2 * i] = v.a + 10.0f * w.a + (c ? v : w).get();
  out[2 * i + 1] = v.hits + 10 * w.hits;
}
// ------------------------------------------------------------ class template instances constructed
template <typename T> struct TBase {
  T w;
  int id;
  __device__ TBase(T a, int i) : w(a), id(i) {}
  __device__ TBase() : TBase(T(1), -1) {}
};
template <class T> struct Defaults { T s = 5; T t{}; int n = 3; };
template <typename T> struct TDerived : TBase<T> {
  T extra;
  Defaults<T> d;
  __device__ TDerived(T a) : TBase<T>(a, 7), extra(a * 2) {}
  __device__ TDerived() : TBase<T>(), extra(0) {}
  __device__ T sum() const { return this->w + this->id + extra + d.s + d.t + d.n; }
};

__global__ void instances(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  TDerived<float> a(x[i]);
  TDerived<float> b;
  Defaults<float> loc;
  Defaults<double> arr[2];
  TBase<float> tb[2];  // the instance's user default constructor (clang's call of it, shown on the array)
  out[3 * i] = a.sum();
  out[3 * i + 1] = b.sum() + 10.0f * tb[1].w - 100.0f * tb[0].id;
  out[3 * i + 2] = loc.s + 10 * loc.n + 100 * (float)arr[1].s + loc.t;
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
    return run_three_ways(loaded, compiled, name, grid, block, args)


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


@pytest.mark.parametrize("grid,block", SHAPES)
def test_lambdas_made_in_device_code(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 3
    k = 3
    v = np.random.default_rng(2).standard_normal(n).astype(np.float32).astype(np.float64)
    i = np.arange(n, dtype=np.float64)
    e = np.zeros((n, 10))
    e[:, 0] = 3 * v + 2 * i
    e[:, 1] = (2 * k * v + 2) + (2 * k + 2) + 2
    e[:, 2] = 100 * v + 12
    e[:, 3] = (v + 100) + 112 + 5
    e[:, 4] = (2 + v) + 10 * (3 + v) + 100
    e[:, 5] = (v - 5) + v * v + i * i
    e[:, 6] = 1112 + 5 + 5
    e[:, 7] = (3 + v) + (8 + v) + 10 * (3 + v)
    e[:, 8] = (4 * v + 3) + 200
    e[:, 9] = 1112
    args = {"x": v.astype(np.float32), "out": np.zeros(10 * n, np.float32), "n": n, "k": k}
    for got in run_all(loaded, compiled, "lambdas3", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 10), e, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_local_arrays_of_constructed_records(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32).astype(np.float64)
    i = np.arange(n)
    e = np.zeros((n, 6))
    e[:, 0] = sum(((r & 7) + 1) * (x + r) for r in range(16))
    e[:, 1] = 16
    e[:, 2] = -6 + 10 * (x + 1) - 2
    e[:, 3] = 6 + 30 * x - 600
    e[:, 4] = 4 - 3 + np.where(i & 1, -2, 5)
    e[:, 5] = 1.5 + 3 * x
    args = {"x": x.astype(np.float32), "out": np.zeros(6 * n, np.float32), "n": n}
    for got in run_all(loaded, compiled, "record_arrays", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 6), e, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_references_chosen_at_run_time(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 3
    rng = np.random.default_rng(4)
    x = rng.standard_normal(3 * n).astype(np.float32)
    ps = rng.standard_normal(3 * n).astype(np.float32)
    i = np.arange(n)
    v = 2.0 * x.reshape(n, 3).astype(np.float64)
    v[i, i % 3] += 1.0
    odd = (i & 1) == 1
    a = np.where(odd, 10.0, 1.0)
    b = np.where(odd, 2.0, 10.0)
    a = np.where(odd, a + 100.0, a)
    b = np.where(odd, b, b + 100.0)
    twos = (i & 2) != 0
    a = np.where(twos, a - 0.5, a)
    b = np.where(twos, b, b - 0.5)
    p = ps.reshape(n, 3).astype(np.float64).copy()
    p[i, (i + 1) % 3] = v[:, 0] + v[:, 2]
    e = np.stack([v[:, 0], v[:, 1], v[:, 2], a, b + p[i, i % 3]], axis=1)
    args = {"ps": ps, "x": x, "out": np.zeros(5 * n, np.float32), "n": n}
    for got in run_all(loaded, compiled, "ref_choice", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 5), e, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["ps"].reshape(n, 3), p, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_structured_bindings(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(6).standard_normal(3 * n).astype(np.float32)
    q = x.reshape(n, 3).astype(np.float64)
    e = np.stack([q.max(axis=1), q.argmax(axis=1), 2 * q[:, 0] + 8, np.full(n, 8.0)], axis=1)
    args = {"x": x, "out": np.zeros(4 * n, np.float32), "n": n}
    for got in run_all(loaded, compiled, "bindings", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 4), e, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_lambdas_to_forwarding_references_and_template_disambiguators(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(7).standard_normal(n).astype(np.float32)
    v = x.astype(np.float64)
    i = np.arange(n)
    acc = sum(v[(i + j) % n] for j in range(4))
    e = np.stack([acc, v * (i % 4) + 3 * v, v ** 2 + v ** 3], axis=1)
    args = {"x": x, "out": np.zeros(3 * n, np.float32), "n": n}
    for got in run_all(loaded, compiled, "forwarding", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 3), e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_non_const_member_of_a_conditional_object(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(8).standard_normal(n).astype(np.float32)
    i = np.arange(n)
    c = (i & 1) == 1
    third = i % 3 == 0
    v = x.astype(np.float64) + np.where(c, 5.0, 0.0) + np.where(third, 0.0, 1.0)
    w = 100.0 + np.where(c, 0.0, 5.0) + np.where(third, 1.0, 0.0)
    vh = c.astype(int) + (~third).astype(int)
    wh = (~c).astype(int) + third.astype(int)
    e = np.stack([v + 10 * w + np.where(c, v, w), vh + 10 * wh], axis=1)
    args = {"x": x, "out": np.zeros(2 * n, np.float32), "n": n}
    for got in run_all(loaded, compiled, "cond_object", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 2), e, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_class_template_instances_constructed(loaded, compiled, grid, block) -> None:
    # Libclang lists no member of an implicit class template instance: the base named by its
    # template (`: TBase<T>(a, 7)`) and the template's default member initializers (silently
    # left unset before: NaN in the emulator) are followed.
    n = grid[0] * block[0] - 3
    x = np.random.default_rng(9).standard_normal(n).astype(np.float32)
    v = x.astype(np.float64)
    e = np.stack([3 * v + 15, np.full(n, 118.0), np.full(n, 535.0)], axis=1)
    args = {"x": x, "out": np.zeros(3 * n, np.float32), "n": n}
    for got in run_all(loaded, compiled, "instances", grid, block, args):
        np.testing.assert_allclose(got["out"].reshape(n, 3), e, rtol=1e-5, atol=1e-5)


REFUSED = [
    ("reference-to-a-place-indexed-by-a-callee-local",
     "__device__ float& at(float* p, int i) { if (i < 0) return p[0]; int j = i * 2; return p[j]; }\n"
     "__global__ void k(float* y) { at(y, threadIdx.x) = 1.0f; }\n",
     "returns a reference to a place indexed by its own local 'j'", (2, 31)),
    ("conditional-place-with-statements",
     "__device__ int g(int i) { int r = i; if (r > 3) r = 3; return r; }\n"
     "__global__ void k(float* x, float* y) { int i = threadIdx.x; (i ? x[g(i)] : y[0]) = 1.0f; }\n",
     "a side of this conditional place computes more than the place", (2, 63)),
    ("list-of-an-ambiguous-constructor",
     "struct V { float a, b; __device__ V(float x, float y) : a(x), b(y) {}\n"
     "  __device__ V(int x, int y) : a(x), b(-y) {} };\n"
     "__global__ void k(float* y) { V v[1] = {{1, 2}}; y[threadIdx.x] = v[0].a + v[0].b; }\n",
     "by a constructor polypy cannot tell", (3, 41)),
    ("array-member-of-constructed-records",
     "struct V { float a; __device__ V() : a(1.0f) {} };\n"
     "struct W { V v[2]; };\n"
     "__global__ void k(float* y) { W w; y[threadIdx.x] = w.v[1].a; }\n",
     "arrays of records with constructors ('V[2]')", (3, 33)),
    ("structured-bindings-through-a-tuple-protocol",
     "#include <utility>\n"
     "struct S { float a; int b; };\n"
     "namespace std { template <> struct tuple_size<S> { static constexpr size_t value = 2; };\n"
     "  template <> struct tuple_element<0, S> { using type = int; };\n"
     "  template <> struct tuple_element<1, S> { using type = float; }; }\n"
     "template <size_t I> __device__ auto get(const S& s) { if constexpr (I == 0) return s.b; else return s.a; }\n"
     "__global__ void k(float* y) { S s{y[threadIdx.x], 2}; auto [p, q] = s; y[threadIdx.x] = p + 10 * q; }\n",
     "structured bindings of 'S' (through its tuple protocol", (7, 60)),
    ("implicit-default-constructor-of-an-instance",
     "template <typename T> struct B { T w; __device__ B() : w(T(1)) {} };\n"
     "template <typename T> struct D : B<T> { T e; __device__ D() : e(0) {} };\n"
     "__global__ void k(float* out) { D<float> d; out[threadIdx.x] = d.w + d.e; }\n",
     "the default constructor of 'B<float>' (an instance of a class template)", (3, 42)),
]


@pytest.mark.parametrize("name,text,message,where", REFUSED, ids=[r[0] for r in REFUSED])
def test_still_refused_with_location(name, text, message, where, tmp_path: pathlib.Path) -> None:
    assert_load_refused(tmp_path, name, text, message, where)
