"""Launches of kernel templates from host templates and classes (issue 36): a member of a class
template (defined in the class or outside it) launching ``k<Real>``, instantiated explicitly
(``template class X<int>;``) and implicitly (``X<float>``, ``X<double>``); a function template
launching ``k<T>``; a launch in an in-class member of an ordinary class. Each program is translated
whole, compiled with the C++ compiler and run, and run on the emulator; the outputs are checked
against what CUDA prints (worked out by hand in the comments)."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from c_support import assert_load_refused, need_compiler
from codegen.c import find_compiler

CLASSES = r"""
#include <cstdio>
template <typename T> __global__ void fill(T* x, T v, int shift) { x[threadIdx.x] = v * (T)(threadIdx.x + shift); }

template <typename Real> class Filler {
 public:
  Filler(int n) : n_(n) { cudaMalloc(&d_, n * sizeof(Real)); }
  ~Filler() { cudaFree(d_); }
  Real operator()(Real v) {                  // in-class member body
    fill<Real><<<1, n_>>>(d_, v, 0);
    return last();
  }
  Real twice(Real v);
  Real last() {
    Real h[64];
    cudaMemcpy(h, d_, n_ * sizeof(Real), cudaMemcpyDeviceToHost);
    return h[n_ - 1];
  }
 private:
  int n_;
  Real* d_;
};

template <typename R> R Filler<R>::twice(R v) {   // out-of-class member, its own parameter name
  fill<R><<<1, n_>>>(d_, v + v, 1);
  return last();
}

template class Filler<int>;                     // explicit: every member instantiated

struct Plain {                                   // an ordinary class, launch in an in-class body
  float* d;
  void go(float v) { fill<float><<<1, 32>>>(d, v, 0); }
};

template <typename T> T run(T v) {                // a function template
  T* d; cudaMalloc(&d, 8 * sizeof(T));
  fill<T><<<1, 8>>>(d, v, 2);
  T h[8]; cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  cudaFree(d);
  return h[7];
}

int main() {
  Filler<float> f(32);
  Filler<double> g(16);
  printf("%.2f %.3f %.2f\n", f(1.5f), g(0.25), f.twice(2.0f));   // 1.5*31, 0.25*15, 4*32
  Filler<int> i(4);
  printf("%d %d\n", i(3), i.twice(5));                           // 3*3, 10*4
  Plain p; cudaMalloc(&p.d, 32 * sizeof(float)); p.go(0.5f);
  float h[32]; cudaMemcpy(h, p.d, sizeof h, cudaMemcpyDeviceToHost);
  printf("%.2f %.3f %d\n", h[31], run(0.125), run(3));            // 0.5*31, 0.125*9, 3*9
  return 0;
}
"""
CLASSES_OUT = "46.50 3.750 128.00\n9 40\n15.50 1.125 27\n"

ONE_INSTANCE = r"""
#include <cstdio>
template <typename T> __global__ void put(T* x, int n) { x[threadIdx.x] = (T)(n + threadIdx.x); }
template <typename T> struct Box {
  T* d;
  void set(int n) { put<T><<<1, 4>>>(d, n); }
};
int main() {
  Box<double> b; cudaMalloc(&b.d, 4 * sizeof(double));
  b.set(7);
  double h[4]; cudaMemcpy(h, b.d, sizeof h, cudaMemcpyDeviceToHost);
  printf("%.1f %.1f\n", h[0], h[3]);
  return 0;
}
"""


def _polypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=300)


def _translate_and_run(tmp_path: pathlib.Path, name: str, source: str) -> tuple[str, str]:
    """(the translated C++ text, what the compiled program prints)."""
    need_compiler(cpp=True)
    cu = tmp_path / f"{name}.cu"
    cu.write_text(source)
    out = tmp_path / f"{name}.cpp"
    translated = _polypy("translate", str(cu), "-o", str(out))
    assert translated.returncode == 0, translated.stderr
    exe = tmp_path / name
    built = subprocess.run([find_compiler(cpp=True), "-O1", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert native.returncode == 0, native.stderr
    return out.read_text(), native.stdout


def test_class_template_members_launch_the_instance_of_their_arguments(tmp_path: pathlib.Path) -> None:
    text, printed = _translate_and_run(tmp_path, "classes", CLASSES)
    assert printed == CLASSES_OUT
    # The class template stays a template: each launch picks its instance at compile time.
    assert "template <typename Real> class Filler" in text
    assert "__is_same(Real, double)" in text and "__is_same(R, int)" in text
    assert "<<<" not in text.split("int main()")[-1]
    assert "fill<<<" not in text and "fill<Real><<<" not in text and "fill<float><<<" not in text


def test_class_template_program_on_the_emulator(tmp_path: pathlib.Path) -> None:
    cu = tmp_path / "classes.cu"
    cu.write_text(CLASSES)
    emulated = _polypy("run", str(cu), "--emulate")
    assert emulated.returncode == 0, emulated.stderr
    assert emulated.stdout == CLASSES_OUT


def test_a_template_with_one_instance_still_tests_its_argument(tmp_path: pathlib.Path) -> None:
    # One instance, Box<double>: the launch still names it by the template's argument, so that
    # another instance the translation did not see is a compile error, never the double kernel.
    text, printed = _translate_and_run(tmp_path, "one", ONE_INSTANCE)
    assert printed == "7.0 10.0\n"
    assert "if constexpr ((__is_same(T, double)))" in text and "static_assert" in text


REFUSED = [
    ("never-instantiated",
     "template <typename T> __global__ void k(T* x) { x[threadIdx.x] = T(1); }\n"
     "template <typename T> struct E { void run(T* d) { k<T><<<1, 32>>>(d); } };\n"
     "int main() { E<float>* e = nullptr; (void)e; return 0; }\n",
     "kernel launch in a member of a class template that this program never instantiates", (2, 51)),
    ("member-template-of-class-template",
     "template <typename T> __global__ void k(T* x) { x[threadIdx.x] = T(1); }\n"
     "template <typename T> struct E { template <typename U> void run(U* d) { k<U><<<1, 32>>>(d); } };\n"
     "int main() { E<int> e; float* a; double* b; e.run(a); e.run(b); return 0; }\n",
     "member function template or of a nested class of a class template", (2, 73)),
]


@pytest.mark.parametrize("name,source,message,where", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_with_location(name: str, source: str, message: str, where: tuple[int, int],
                               tmp_path: pathlib.Path) -> None:
    assert_load_refused(tmp_path, name, source, message, where)


ATTRIBUTES = r"""
#include <cstdio>
template <typename T> __global__ void scale(T* x, T a) {
  __shared__ T tile[64];
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = a * tile[63 - threadIdx.x];
}
template <typename Real> struct Scaler {
  int shared() {                       // the instance's host stub, named through Real
    cudaFuncAttributes attr;
    cudaFuncGetAttributes(&attr, scale<Real>);
    int per_sm = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, scale<Real>, 64, 0);
    return per_sm > 0 ? (int)attr.sharedSizeBytes : -1;
  }
  Real run(Real* d, Real a) {
    scale<Real><<<1, 64>>>(d, a);
    Real h; cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost); return h;
  }
};
template struct Scaler<double>;
template __global__ void scale<int>(int*, int);   // explicit, never launched: its stub is named below
int main() {
  Scaler<float> s; Scaler<double> t;
  float hf[64]; double hd[64];
  for (int i = 0; i < 64; ++i) { hf[i] = i; hd[i] = i; }
  float* df; double* dd;
  cudaMalloc(&df, sizeof hf); cudaMalloc(&dd, sizeof hd);
  cudaMemcpy(df, hf, sizeof hf, cudaMemcpyHostToDevice); cudaMemcpy(dd, hd, sizeof hd, cudaMemcpyHostToDevice);
  cudaFuncAttributes ai;
  cudaFuncGetAttributes(&ai, scale<int>);
  int a = s.shared(), b = t.shared();
  printf("%d %d %d %.1f %.2f\n", a, b, (int)ai.sharedSizeBytes, s.run(df, 2.0f), t.run(dd, 0.5));
  return 0;
}
"""
ATTRIBUTES_OUT = "256 512 256 126.0 31.50\n"  # 64 floats, 64 doubles, 64 ints; 2*63, 0.5*63


def test_function_attributes_and_occupancy_of_a_kernel_template_instance(tmp_path: pathlib.Path) -> None:
    text, printed = _translate_and_run(tmp_path, "attributes", ATTRIBUTES)
    assert printed == ATTRIBUTES_OUT
    assert "template <> void scale<double>(double * x, double a)" in text
    cu = tmp_path / "attributes.cu"
    emulated = _polypy("run", str(cu), "--emulate")
    assert emulated.returncode == 0, emulated.stderr
    assert emulated.stdout == ATTRIBUTES_OUT


# Kernel template instances whose template arguments are declared after the template (issue 36,
# C++ in device code): the instance's code goes after the last of those types, not at the template.
LATER_TYPES = r"""
#include <cstdio>
template <class Op> __global__ void apply(const float* x, float* y, int n, Op op) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = op(x[i], i);
}
template <class A, class B> struct Both {
  A a; B b;
  __device__ float operator()(float v, int i) const { return b(a(v, i), i); }
};
struct Scale { float s; __device__ float operator()(float v, int) const { return s * v; } };
struct Shift { int k; __device__ float operator()(float v, int i) const { return v + (float)((i + k) % 4); } };
static float run_on(const float* dx, float* dy, int n) { return 0.0f; }
int main() {
  const int n = 100;
  float hx[n], hy[n];
  for (int i = 0; i < n; ++i) hx[i] = (float)i;
  float *dx, *dy;
  cudaMalloc(&dx, sizeof hx); cudaMalloc(&dy, sizeof hy);
  cudaMemcpy(dx, hx, sizeof hx, cudaMemcpyHostToDevice);
  apply<<<(n + 31) / 32, 32>>>(dx, dy, n, Scale{3.0f});
  cudaMemcpy(hy, dy, sizeof hy, cudaMemcpyDeviceToHost);
  printf("%.1f %.1f\n", hy[1], hy[99]);
  apply<<<(n + 15) / 16, 16>>>(dx, dy, n, Both<Scale, Shift>{{0.5f}, {7}});
  cudaMemcpy(hy, dy, sizeof hy, cudaMemcpyDeviceToHost);
  printf("%.1f %.1f %.1f\n", hy[0], hy[1], hy[98]);
  apply<<<4, 32>>>(dx, dy, n, Shift{1});
  cudaMemcpy(hy, dy, sizeof hy, cudaMemcpyDeviceToHost);
  printf("%.1f %.1f\n", hy[2], hy[99]);
  return (int)run_on(dx, dy, n);
}
"""
# Scale 3: 3, 297; Both: 0.5 * i + (i + 7) % 4 at 0, 1, 98: 3, 0.5, 50; Shift 1: 2 + 3, 99 + 0
LATER_TYPES_OUT = "3.0 297.0\n3.0 0.5 50.0\n5.0 99.0\n"


def test_an_instance_whose_argument_types_come_later_is_placed_after_them(tmp_path: pathlib.Path) -> None:
    # The launchers of apply<Scale>, apply<Both<Scale, Shift>> and apply<Shift> take those types:
    # they used to stand at the template, before the types (C++ that did not compile).
    text, printed = _translate_and_run(tmp_path, "later", LATER_TYPES)
    assert printed == LATER_TYPES_OUT
    scale, shift = text.index("struct Scale {"), text.index("struct Shift {")
    assert shift > text.index("apply_Scale_launch(") > scale  # right after the last type it takes
    assert text.index("static float run_on(") > text.index("apply_Both_Scale_Shift_launch(") > shift
    assert text.index("static float run_on(") > text.index("apply_Shift_launch(") > shift
    emulated = _polypy("run", str(tmp_path / "later.cu"), "--emulate")
    assert emulated.returncode == 0, emulated.stderr
    assert emulated.stdout == LATER_TYPES_OUT


def test_a_local_type_as_a_kernel_template_argument_is_refused_as_nvcc_does(tmp_path: pathlib.Path) -> None:
    cu = tmp_path / "local.cu"
    source = LATER_TYPES.replace("int main() {", "int main() {\n  struct Local { __device__ float operator()(float v, int) "
                                 "const { return v; } };", 1).replace("Shift{1}", "Local{}")
    cu.write_text(source)
    out = tmp_path / "local.cpp"
    result = _polypy("translate", str(cu), "-o", str(out))
    assert result.returncode == 1 and not out.exists()
    assert f"{cu}:15:10: error: a type defined inside a function ('Local') cannot be a template argument" \
        in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
