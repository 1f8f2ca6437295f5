"""C++ in device code (issue 36, item 2): member functions, constructors, member and free
overloaded operators, ``operator()`` of function objects passed to templates, references,
namespaces, ``constexpr`` and static constant members, non-type template parameters, default
arguments.

Each kernel runs through the emulator, the LLVM backend (``polypy.compile``) and the C backend
against a NumPy reference over several launch shapes; a kernel with member operators is
differentiated and checked against central finite differences in float64; what is still refused
(lambdas capturing arrays, virtual calls on objects in memory, virtual base classes) is refused with a
located message naming the feature (tests/test_cxx_device3.py: what later rounds enabled).
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

import polypy
from c_support import run_three_ways
from polypy.errors import UserError

KERNELS = r"""
namespace geo {
struct V3 {
  float x, y, z;
  __device__ V3() : x(0.0f), y(0.0f), z(0.0f) {}
  __device__ V3(float a, float b, float c) : x(a), y(b), z(c) {}
  __device__ float dot(const V3& o) const { return x * o.x + y * o.y + z * o.z; }
  __device__ float norm2() const { return dot(*this); }
  __device__ V3 operator+(const V3& o) const { return V3(x + o.x, y + o.y, z + o.z); }
  __device__ V3 operator-(const V3& o) const { return V3(x - o.x, y - o.y, z - o.z); }
  __device__ V3& operator+=(const V3& o) { x += o.x; y += o.y; z += o.z; return *this; }
  __device__ void scale(float s) { x *= s; this->y *= s; (*this).z *= s; }
};
__device__ inline V3 operator*(float s, const V3& v) { return V3(s * v.x, s * v.y, s * v.z); }
constexpr int kTwo = 2;
}  // namespace geo

using geo::V3;

// Member functions, constructors, member and free operators, compound assignment returning *this.
__global__ void vec_ops(const float* a, const float* b, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  V3 p(a[3 * i], a[3 * i + 1], a[3 * i + 2]);
  V3 q = V3(b[3 * i], b[3 * i + 1], b[3 * i + 2]);
  V3 r = p + geo::kTwo * q - p;     // r = 2 q
  r += p;                           // r = p + 2 q
  r.scale(0.5f);                    // r = (p + 2 q) / 2
  V3 z;                             // user default constructor: zeros
  z += (p - q);
  out[4 * i] = r.dot(q);
  out[4 * i + 1] = (p + q).norm2();
  out[4 * i + 2] = z.x + z.y * 10.0f + z.z * 100.0f;
  out[4 * i + 3] = (r += q).y;
}

// Default member initializers, initializer order (declaration order, not list order).
struct Acc {
  float sum = 0.0f;
  int count = 0;
  float w;
  __device__ Acc(float weight) : w(weight) {}
  __device__ void add(float v) { sum += w * v; count++; }
  __device__ float mean() const { return count > 0 ? sum / count : 0.0f; }
};

__global__ void accumulate(const float* x, float* out, int n, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Acc acc(2.0f);
  for (int j = 0; j < m; j++) acc.add(x[i * m + j]);
  out[i] = acc.mean();
}

// Members whose own default constructor runs (an explicit and an implicit outer constructor).
struct Ray { V3 o; float t; __device__ Ray(float tt) : t(tt) {} };
struct Box { V3 lo; int id = 7; };
struct Zeroed { float x, y; int n; float w; __device__ Zeroed() : x(), y{}, n(), w{2.5f} {} };

__global__ void nested(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Ray r(x[i]);
  Box b;
  r.o += V3(x[i], 1.0f, 2.0f);
  Zeroed zd;
  out[i] = r.o.x + r.o.y + r.o.z + r.t + b.lo.z + b.id + zd.x + zd.y + zd.n + zd.w;
}

// Members of a record in device memory, through a pointer and an element.
struct Particle {
  float px, py, vx, vy;
  __device__ const float& vel_x() const { return vx; }
  __device__ void step(float dt) { px += dt * vx; py += dt * vy; }
  __device__ float speed2() const { return vx * vx + vy * vy; }
};

__device__ float& at(float* a, int i) { return a[i]; }

__global__ void advance(Particle* ps, float* speed, float dt, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  ps[i].step(dt);
  Particle* p = &ps[i];
  speed[i] = p->speed2() + at(speed, i) + ps[i].vel_x() - p->vx;
}

// Function objects passed to templates (operator()), static members, non-type parameters,
// default arguments, references.
struct Affine {
  float a, b;
  static constexpr float kBias = 0.25f;
  static const int kReps = 3;
  __device__ float operator()(float v) const { return a * v + b + kBias; }
};
struct Square {
  __device__ float operator()(float v) const { return v * v; }
};

template <int N, typename F>
__device__ float apply_n(F f, float v) {
  for (int k = 0; k < N; k++) v = f(v);
  return v;
}

__device__ float shifted(float v, float by = 1.5f, int times = 2) { return v + by * times; }

__device__ void bump(float& r, const float& by) { r += by; }

template <typename F, int N>
__device__ void map_n(F f, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = apply_n<N>(f, x[i]);
    bump(v, 1.0f);
    y[i] = shifted(v) + shifted(v, 0.5f);
  }
}

__global__ void functors(const float* x, float* y, float* z, int n, float a) {
  Affine f = {a, -1.0f};
  map_n<Affine, Affine::kReps>(f, x, y, n);
  map_n<Square, 1>(Square(), x, z, n);
}

// Conversion operators and static member functions.
struct Fix {
  int raw;
  __device__ Fix(float v) : raw((int)(v * 256.0f)) {}
  __device__ operator float() const { return raw / 256.0f; }
  __device__ static Fix half() { return Fix(0.5f); }
};
__global__ void fixed_point(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { Fix f(x[i]); float g = f; y[i] = g + (float)Fix::half() + f.operator float(); }
}

// Functions returning pointers: a template's member (the SharedMemory<T> idiom) and a free function.
template <typename T> struct SharedMem {
  __device__ T* get() { extern __shared__ int smem_[]; return (T*)smem_; }
};
__device__ const float* row_of(const float* a, int r, int w) { if (r < 0) return a; return a + r * w; }

__global__ void pointers(const float* a, float* out, int w) {
  SharedMem<int> s;
  int* sd = s.get();
  sd[threadIdx.x] = threadIdx.x * 3;
  __syncthreads();
  const float* p = row_of(a, blockIdx.x, w);
  out[blockIdx.x * blockDim.x + threadIdx.x] = p[threadIdx.x] + sd[blockDim.x - 1 - threadIdx.x];
}

// A const reference result of a conditional (read at the function's one return).
__device__ const float& larger(const float& a, const float& b) { return a < b ? b : a; }

__global__ void clamp_low(const float* x, float* out, float lo, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = larger(x[i], lo);
}

// Lambdas: by value (a copy when evaluated), by reference, passed to a template, a temporary.
template <typename F>
__device__ float twice(F f, float v) { return f(f(v)); }

__global__ void lambdas(float* y, int* cnt, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 2.0f;
  int c = 0;
  auto f = [=](float v) { return v * s; };
  s = 5.0f;
  auto g = [&](float v) { c++; s += v; };
  auto h = [&c, &s] { return c + s; };
  const int N = 3;
  auto k3 = [](float v) { return v + N; };  // a constant, not captured
  y[i] = f(y[i]) + twice(f, 1.0f) + twice([&](float v) { return v + s; }, 0.0f);
  g(1.0f);
  g(y[i] > 0.0f ? 2.0f : 3.0f);
  cnt[i] = c * 100 + (int)h() + 1000 * (int)k3(0.0f);
}
"""


def _affine(x, a):
    v = x.astype(np.float64)
    for _ in range(3):
        v = a * v - 1.0 + 0.25
    return v


def _finish(v):
    v = v + 1.0
    return (v + 3.0) + (v + 1.0)


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("cxx_device") / "kernels.cu"
    path.write_text(KERNELS)
    return path


@pytest.fixture(scope="module")
def loaded(source):
    return polypy.load(str(source))


@pytest.fixture(scope="module")
def compiled(source):
    return polypy.compile(str(source))


def run_all(loaded, compiled, name: str, grid, block, args: dict, shmem: int = 0) -> list[dict]:
    """``args`` copied and run by the emulator, the LLVM backend and the C backend."""
    return run_three_ways(loaded, compiled, name, grid, block, args, shmem=shmem)


SHAPES = [((1,), (32,)), ((3,), (16,)), ((2,), (64,))]


@pytest.mark.parametrize("grid,block", SHAPES)
def test_member_functions_constructors_and_operators(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 5
    rng = np.random.default_rng(1)
    a = rng.standard_normal(3 * n).astype(np.float32)
    b = rng.standard_normal(3 * n).astype(np.float32)
    p, q = a.reshape(n, 3).astype(np.float64), b.reshape(n, 3).astype(np.float64)
    r = (p + 2 * q) / 2
    z = p - q
    want = np.stack([(r * q).sum(1), ((p + q) ** 2).sum(1), z[:, 0] + 10 * z[:, 1] + 100 * z[:, 2],
                     (r + q)[:, 1]], axis=1).ravel()
    for out in run_all(loaded, compiled, "vec_ops", grid, block,
                       {"a": a, "b": b, "out": np.zeros(4 * n, np.float32), "n": n}):
        np.testing.assert_allclose(out["out"], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_default_member_initializers_and_mutating_members(loaded, compiled, grid, block) -> None:
    n, m = grid[0] * block[0] - 3, 5
    x = np.random.default_rng(2).standard_normal(n * m).astype(np.float32)
    want = 2.0 * x.reshape(n, m).astype(np.float64).sum(1) / m
    for out in run_all(loaded, compiled, "accumulate", grid, block,
                       {"x": x, "out": np.zeros(n, np.float32), "n": n, "m": m}):
        np.testing.assert_allclose(out["out"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_members_constructed_by_their_own_default_constructors(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 2
    x = np.random.default_rng(9).standard_normal(n).astype(np.float32)
    want = 2.0 * x.astype(np.float64) + 3.0 + 7.0 + 2.5  # r.o = (0,0,0) + (x, 1, 2); b.lo = 0; b.id = 7; zd
    for out in run_all(loaded, compiled, "nested", grid, block, {"x": x, "out": np.zeros(n, np.float32), "n": n}):
        np.testing.assert_allclose(out["out"], want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_members_of_records_in_device_memory(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 1
    dt = np.float32(0.5)
    ps = np.random.default_rng(3).standard_normal((n, 4)).astype(np.float32)
    want_ps = ps.copy()
    want_ps[:, 0] += dt * ps[:, 2]
    want_ps[:, 1] += dt * ps[:, 3]
    want_speed = ps[:, 2] ** 2 + ps[:, 3] ** 2 + 1.5  # + at(speed, i), its old value
    for how, out in zip(("emulator", "llvm", "c"),
                        run_all(loaded, compiled, "advance", grid, block,
                                {"ps": ps.ravel().copy(), "speed": np.full(n, 1.5, np.float32),
                                 "dt": dt, "n": n})):
        got = out["ps"].reshape(n, 4)  # a record of floats only: a float buffer
        np.testing.assert_allclose(got, want_ps, rtol=1e-6, err_msg=how)
        np.testing.assert_allclose(out["speed"], want_speed, rtol=1e-6, err_msg=how)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_function_objects_templates_static_members_defaults_references(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 7
    a = np.float32(0.75)
    x = np.random.default_rng(4).standard_normal(n).astype(np.float32)
    want_y = _finish(_affine(x, float(a)))
    want_z = _finish(x.astype(np.float64) ** 2)
    for out in run_all(loaded, compiled, "functors", grid, block,
                       {"x": x, "y": np.zeros(n, np.float32), "z": np.zeros(n, np.float32), "n": n, "a": a}):
        np.testing.assert_allclose(out["y"], want_y, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out["z"], want_z, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_lambdas_by_value_by_reference_and_passed_to_templates(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 2
    y = np.random.default_rng(6).standard_normal(n).astype(np.float32)
    new_y = 2.0 * y.astype(np.float64) + 4.0 + 10.0
    want_cnt = 3000 + 200 + np.where(new_y > 0, 8, 9) + 2
    for out in run_all(loaded, compiled, "lambdas", grid, block,
                       {"y": y, "cnt": np.zeros(n, np.int32), "n": n}):
        np.testing.assert_allclose(out["y"], new_y, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(out["cnt"], want_cnt)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_conversion_operators_and_static_member_functions(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 4
    x = (np.random.default_rng(8).standard_normal(n) * 10).astype(np.float32)
    want = 2.0 * np.trunc(x.astype(np.float64) * 256.0) / 256.0 + 0.5
    for out in run_all(loaded, compiled, "fixed_point", grid, block,
                       {"x": x, "y": np.zeros(n, np.float32), "n": n}):
        np.testing.assert_allclose(out["y"], want, rtol=1e-6)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_functions_returning_pointers(loaded, compiled, grid, block) -> None:
    g, b = grid[0], block[0]
    a = np.random.default_rng(10).standard_normal(g * b).astype(np.float32)
    want = a.reshape(g, b) + 3.0 * np.arange(b)[::-1]
    for out in run_all(loaded, compiled, "pointers", grid, block,
                       {"a": a, "out": np.zeros(g * b, np.float32), "w": b}, shmem=4 * b):
        np.testing.assert_allclose(out["out"].reshape(g, b), want, rtol=1e-6)


@pytest.mark.parametrize("grid,block", SHAPES)
def test_const_reference_results(loaded, compiled, grid, block) -> None:
    n = grid[0] * block[0] - 1
    x = np.random.default_rng(11).standard_normal(n).astype(np.float32)
    for out in run_all(loaded, compiled, "clamp_low", grid, block,
                       {"x": x, "out": np.zeros(n, np.float32), "lo": np.float32(0.25), "n": n}):
        np.testing.assert_array_equal(out["out"], np.maximum(x, np.float32(0.25)))


# A whole program: function objects passed to a kernel template (instances made by the host's launches).
PROGRAM = r"""#include <cstdio>
struct Scale {
  float k;
  __device__ float operator()(float v) const { return k * v; }
};
struct AddTo {
  float b;
  __device__ float operator()(float v) const { return v + b; }
};
template <typename F>
__global__ void apply(F f, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = f(x[i]);
}
int main() {
  const int n = 100;
  float hx[n], hy[n];
  for (int i = 0; i < n; i++) hx[i] = 0.5f * i - 7.0f;
  float *x, *y;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaMemcpy(x, hx, n * sizeof(float), cudaMemcpyHostToDevice);
  Scale s = {3.0f};
  apply<<<(n + 31) / 32, 32>>>(s, x, y, n);
  cudaMemcpy(hy, y, n * sizeof(float), cudaMemcpyDeviceToHost);
  float sum = 0.0f;
  for (int i = 0; i < n; i++) sum += hy[i];
  apply<<<4, 64>>>(AddTo{1.5f}, y, x, n);
  cudaMemcpy(hx, x, n * sizeof(float), cudaMemcpyDeviceToHost);
  printf("%.3f %.3f %.3f\n", sum, hx[0], hx[n - 1]);
  cudaFree(x); cudaFree(y);
  return 0;
}
"""


def test_function_objects_passed_to_kernel_templates_in_a_program(tmp_path: pathlib.Path) -> None:
    from c_support import need_compiler
    from codegen.c import find_compiler

    x = np.float32(0.5) * np.arange(100, dtype=np.float32) - np.float32(7.0)
    y = np.float32(3.0) * x
    expected = f"{float(y.sum(dtype=np.float32)):.3f} {float(y[0] + np.float32(1.5)):.3f} {float(y[-1] + np.float32(1.5)):.3f}\n"
    path = tmp_path / "prog.cu"
    path.write_text(PROGRAM)
    cli = [sys.executable, "-m", "polypy.driver.cli"]
    emulated = subprocess.run(cli + ["run", str(path), "--emulate"], capture_output=True, text=True)
    assert emulated.returncode == 0, emulated.stderr
    assert emulated.stdout == expected
    need_compiler(cpp=True)
    out = tmp_path / "prog.cpp"
    done = subprocess.run(cli + ["translate", str(path), "-o", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    exe = tmp_path / "prog"
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stdout == expected, (ran.stdout, ran.stderr)


# ---------------------------------------------------------------------------- gradients
GRAD_KERNEL = r"""
struct D3 {
  double x, y, z;
  __device__ D3(double a, double b, double c) : x(a), y(b), z(c) {}
  __device__ D3 operator*(double s) const { return D3(x * s, y * s, z * s); }
  __device__ D3 operator-(const D3& o) const { return D3(x - o.x, y - o.y, z - o.z); }
  __device__ double dot(const D3& o) const { return x * o.x + y * o.y + z * o.z; }
};

__global__ void energy(const double* p, const double* q, double* e, double k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    D3 a(p[3 * i], p[3 * i + 1], p[3 * i + 2]);
    D3 b(q[3 * i], q[3 * i + 1], q[3 * i + 2]);
    D3 d = (a - b) * k;
    e[i] = d.dot(d) * sin(a.x);
  }
}
"""


@pytest.mark.parametrize("grid,block", [((1,), (32,)), ((3,), (16,))])
def test_gradient_of_member_operators_matches_finite_differences(tmp_path, grid, block) -> None:
    from autodiff.check import check_gradients
    from polypy.driver.gradients import grad_kernel

    path = tmp_path / "energy.cu"
    path.write_text(GRAD_KERNEL)
    module = polypy.load(str(path))
    k_grad = grad_kernel(module, "energy", wrt=["p", "q", "k"])
    k_fwd = grad_kernel(module, "energy", wrt=["p", "q", "k"], mode="forward")
    n = grid[0] * block[0] - 3
    rng = np.random.default_rng(5)
    args = {"p": rng.standard_normal(3 * n), "q": rng.standard_normal(3 * n), "e": np.zeros(n), "k": 0.7, "n": n}
    result = check_gradients(module.kernel("energy"), k_grad, grid, block, args, k_fwd=k_fwd)
    assert abs(result.finite_difference) > 1e-8
    assert result.error() < 1e-6, result
    assert result.forward_effect_error < 1e-12, result


# ---------------------------------------------------------------------------- still refused
REFUSED = [
    ("returned-lambda-capturing-its-parameter-by-reference",  # arrays captured by value work: test_cxx_device4.py
     "__device__ auto mk(float s) {\n"
     "  float t = 2.0f * s;\n"
     "  return [&t](float v) { return v * t; };\n"
     "}\n"
     "__global__ void k(float* y) { auto f = mk(1.0f); y[threadIdx.x] = f(y[threadIdx.x]); }\n",
     "returns a lambda capturing 't', its own local or by-value parameter, by reference", (3, 10)),
    ("virtual-in-memory",  # virtual calls on local objects work: tests/test_virtual_device.py
     "struct B { float w; __device__ virtual float f(float v) const { return w * v; } };\n"
     "__global__ void k(const B* b, float* y) { y[threadIdx.x] = b[0].f(y[threadIdx.x]); }\n",
     "virtual call of 'f' on an object in memory", (2, 60)),
    ("virtual-base-class",
     "struct B { float w; __device__ float f(float v) const { return w * v; } };\n"
     "struct C : virtual B { };\n"
     "__global__ void k(float* y) { C c; c.w = 2.0f; y[threadIdx.x] = c.f(y[threadIdx.x]); }\n",
     "virtual base class 'B' of 'C'", (3, 33)),
]


@pytest.mark.parametrize("name,text,message,where", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_with_location(name: str, text: str, message: str, where: tuple[int, int],
                               tmp_path: pathlib.Path) -> None:
    path = tmp_path / f"{name}.cu"
    path.write_text(text)
    with pytest.raises(UserError) as info:
        polypy.load(str(path))
    err = info.value
    assert message in err.message, err.render()
    assert err.loc is not None and (err.loc.line, err.loc.col) == where, err.render()


def test_refusal_through_the_cli_is_located_without_output(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "lam.cu"
    path.write_text(REFUSED[0][1])
    out = tmp_path / "out.cpp"
    done = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(path), "-o", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert f"{path}:3:10: error: 'mk' returns a lambda capturing 't'" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not out.exists()
