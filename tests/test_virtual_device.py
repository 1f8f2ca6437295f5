"""Virtual member functions in device code, closed world (issue 36; docs/function_pointers.md).

A virtual call runs the final overrider of the object's dynamic class, which polypy knows for
the objects a kernel makes: locals of concrete classes, reached directly, through ``Base&`` /
``Base*`` bound to them, a ``Base&`` parameter of a device function, ``this`` in a member
function. A copy into a base local is a base
object; ``b.Base::f()`` calls that very function. Checked through the emulator, the LLVM backend
and the C backend against NumPy, differentiated against finite differences; the calls polypy
cannot make exact are refused, located.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import WAYS, assert_load_refused, run_way

SHAPES = r"""
struct Shape {
  float s;
  __device__ Shape(float v) : s(v) {}
  __device__ virtual float area() const { return 0.0f; }
  __device__ virtual float scaled(float k) const { return k * area(); }
  __device__ float twice() const { return 2.0f * area(); }
  __device__ virtual ~Shape() {}
};
struct Square : Shape {
  __device__ Square(float v) : Shape(v) {}
  __device__ float area() const override { return s * s; }
};
struct Circle : Shape {
  float r2;  // in Shape's tail padding (the Itanium C++ ABI)
  __device__ Circle(float v) : Shape(v), r2(v * v) {}
  __device__ float area() const override { return 3.0f * r2; }
  __device__ float scaled(float k) const override { return k + area(); }
};
struct Unit final : Square {
  __device__ Unit() : Square(1.0f) {}
  __device__ float area() const override { return 10.0f + Square::area(); }
};
__device__ float measure(const Shape& sh) { return sh.area(); }
namespace geo {
__device__ const Shape& same(const Shape& sh) { return sh; }
}

__global__ void through_calls(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Square q(x[i]);
  Circle c(x[i] + 1.0f);
  out[3 * i + 0] = geo::same(q).area();        // the object a returned reference names
  out[3 * i + 1] = Square(x[i]).area();        // a new object
  out[3 * i + 2] = geo::same(c).scaled(1.0f);
}

__global__ void shapes(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  Square q(x[i]);
  Circle c(x[i] + 1.0f);
  Unit u;
  Shape* p = &q;
  const Shape& r = c;
  Shape plain(x[i]);
  Shape sliced = c;                  // a Shape: its area is Shape's
  out[8 * i + 0] = p->area();
  out[8 * i + 1] = r.area();
  out[8 * i + 2] = measure(q) + measure(u);
  out[8 * i + 3] = c.twice() + q.twice();   // a non-virtual base member calling a virtual one
  out[8 * i + 4] = q.Shape::area() + plain.area() + sliced.area();
  out[8 * i + 5] = p->scaled(2.0f) + r.scaled(2.0f);
  Square* pu = &u;
  out[8 * i + 6] = pu->area();
  out[8 * i + 7] = u.twice();
}

"""


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", [((3,), (16,)), ((1,), (64,))])
def test_virtual_calls_on_objects_the_kernel_makes(grid, block, way) -> None:
    n = grid[0] * block[0] - 5
    f = np.float32
    x = np.linspace(-2, 3, n).astype(f)
    q, cc, u = x * x, f(3) * ((x + f(1)) * (x + f(1))), f(11)
    want = np.stack([q, cc, q + u, f(2) * cc + f(2) * q, np.zeros(n, f), f(2) * q + (f(2) + cc),
                     np.full(n, u), np.full(n, 2 * u)], 1)
    out = run_way(SHAPES, "shapes", grid, block, {"x": x, "out": np.zeros(8 * n, f), "n": n}, way, name="shapes.cu")
    np.testing.assert_array_equal(out["out"].reshape(n, 8), want)


@pytest.mark.parametrize("way", WAYS)
def test_virtual_calls_on_returned_references_and_temporaries(way) -> None:
    n = 30
    f = np.float32
    x = np.linspace(-2, 3, n).astype(f)
    want = np.stack([x * x, x * x, f(1) + f(3) * ((x + f(1)) * (x + f(1)))], 1)
    out = run_way(SHAPES, "through_calls", (1,), (32,), {"x": x, "out": np.zeros(3 * n, f), "n": n}, way,
                  name="shapes.cu")
    np.testing.assert_array_equal(out["out"].reshape(n, 3), want)


GRAD_KERNEL = r"""
struct Law {
  double k;
  __device__ Law(double v) : k(v) {}
  __device__ virtual double force(double d) const { return -k * d; }
  __device__ double energy(double d) const { return 0.5 * d * force(d); }
};
struct Cubic : Law {
  __device__ Cubic(double v) : Law(v) {}
  __device__ double force(double d) const override { return -k * d * d * d + sin(d); }
};
__device__ double total(const Law& a, const Law& b, double d) { return a.energy(d) + b.force(d) * d; }
__global__ void springs(const double* x, double* e, double k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    Law l(k);
    Cubic c(2.0 * k);
    e[i] = total(c, l, x[i]) + total(l, c, x[i] * k);
  }
}
"""


@pytest.mark.parametrize("grid,block", [((1,), (32,)), ((3,), (16,))])
def test_gradient_through_virtual_calls_matches_finite_differences(tmp_path, grid, block) -> None:
    from autodiff.check import check_gradients
    from polypy.driver.gradients import grad_kernel

    path = tmp_path / "springs.cu"
    path.write_text(GRAD_KERNEL)
    module = polypy.load(str(path))
    k_grad = grad_kernel(module, "springs", wrt=["x", "k"])
    k_fwd = grad_kernel(module, "springs", wrt=["x", "k"], mode="forward")
    n = grid[0] * block[0] - 3
    args = {"x": np.random.default_rng(3).standard_normal(n), "e": np.zeros(n), "k": 0.7, "n": n}
    result = check_gradients(module.kernel("springs"), k_grad, grid, block, args, k_fwd=k_fwd)
    assert abs(result.finite_difference) > 1e-8
    assert result.error() < 1e-6, result
    assert result.forward_effect_error < 1e-12, result


_HEAD = ("struct S { float v; __device__ S(float a) : v(a) {} __device__ virtual float f() const { return v; } };\n"
         "struct T : S { __device__ T(float a) : S(a) {} __device__ float f() const override { return 2 * v; } };\n")

CHOSEN_PLACE = _HEAD + """__device__ float g(const S& s) { return s.f(); }
__global__ void k(const float* x, float* y) {
  T a(1.0f), b(2.0f);
  y[threadIdx.x] = g(x[threadIdx.x] > 0 ? a : b);
}
"""


def test_virtual_call_on_a_reference_bound_to_a_chosen_place(tmp_path) -> None:
    """``g(c ? a : b)`` binds ``g``'s ``const S&`` to one of two ``T`` locals, chosen per thread
    (a place, docs/cxx_device.md): the call is ``T::f`` on the chosen one (refused while such a
    reference was a copy)."""
    from c_support import run_c, run_emulated

    path = tmp_path / "chosen.cu"
    path.write_text(CHOSEN_PLACE)
    kernel = polypy.load(str(path)).kernel("k")
    x = np.array([1, -1, 1, -1, -1], np.float32)
    want = np.where(x > 0, 2.0, 4.0).astype(np.float32)
    for run in (run_emulated, run_c):
        got = run(kernel, (1,), (5,), {"x": x, "y": np.zeros(5, np.float32)})["y"]
        np.testing.assert_array_equal(got, want, err_msg=run.__name__)


REFUSED = [
    ("chosen-reference", _HEAD + "__global__ void k(const float* x, float* y) {\n"
     "  S a(1.0f); T b(2.0f);\n"
     "  y[threadIdx.x] = (x[0] > 0 ? static_cast<const S&>(a) : static_cast<const S&>(b)).f();\n}\n",
     "virtual call of 'f' on this kind of object expression", (5, 20)),
    ("by-value-parameter", _HEAD + "__global__ void k(T t, float* y) { y[threadIdx.x] = t.f(); }\n",
     "kernel parameter 't' is an object of a class with virtual functions", (3, 21)),
    ("in-device-memory", _HEAD + "__global__ void k(const T* objs, float* y) { y[threadIdx.x] = objs[0].f(); }\n",
     "virtual call of 'f' on an object in memory", (3, 63)),
    ("one-of-several", _HEAD + "__global__ void k(const float* x, float* y) {\n"
     "  S a(1.0f); T b(2.0f); S* p;\n"
     "  if (x[threadIdx.x] > 0) p = &a; else p = &b;\n"
     "  y[threadIdx.x] = p->f();\n}\n",
     "cannot tell which buffer pointer 'p' points into", (5, 27)),
    ("during-construction",
     "struct S { float v; __device__ S(float a) : v(a) { v = f(); } __device__ virtual float f() const { return v; } };\n"
     "struct T : S { __device__ T(float a) : S(a) {} __device__ float f() const override { return 2 * v; } };\n"
     "__global__ void k(float* y) { T t(1.0f); y[threadIdx.x] = t.v; }\n",
     "while a constructor or destructor runs", (1, 56)),
]


@pytest.mark.parametrize("name,source,message,where", [r for r in REFUSED if r[3] is not None],
                         ids=[r[0] for r in REFUSED if r[3] is not None])
def test_refused_located(tmp_path, name, source, message, where) -> None:
    assert_load_refused(tmp_path, name, source, message, where)
