"""Device function pointers, closed world (issue 36; docs/function_pointers.md).

Every device function whose address the translation unit takes gets an id; a pointer is that id
(0: null); a call through a pointer dispatches over the functions of its type. Checked through
the emulator, the LLVM backend and the C backend against NumPy; a whole program with the host
idiom (``cudaMemcpyFromSymbol`` of a ``__device__`` pointer passed to a kernel), a ``__constant__``
table, a record member and a table a kernel fills (tests/programs/function_pointers.cu), translated,
compiled and emulated; a dispatch differentiated against finite differences; a call through a
null pointer fails the launch; what is not exact is refused, located.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

import polypy
from c_support import WAYS, assert_load_refused, build_from_parts, emulate, need_compiler, run_c, source_file
from codegen.c import find_compiler
from polypy.errors import DeviceAssertError

PROGRAM = pathlib.Path(__file__).resolve().parent / "programs" / "function_pointers.cu"

KERNELS = r"""
typedef float (*op_t)(float, float);
using unary_t = float (*)(float);
__device__ float add(float a, float b) { return a + b; }
__device__ float sub(float a, float b) noexcept { return a - b; }  // a noexcept function too
__device__ float mul(float a, float b) { return a * b; }
__host__ __device__ float sq(float a) { return a * a; }
__device__ float neg(float a) { return -a; }
__device__ op_t d_ops[] = {add, sub, mul};
__constant__ op_t c_ops[3] = {mul, add, sub};
struct Job { op_t f; float scale; };
template <unary_t G>
__device__ float twice(float v) { return G(G(v)); }
__device__ float apply_to(op_t f, float a, float b) { return f(a, b); }

__global__ void patterns(const float* x, const int* sel, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i], b = 2.0f;
  op_t f = add;                       // a local
  float r0 = f(a, b);
  f = (sel[i] & 1) ? add : mul;       // chosen at run time
  float r1 = f(a, b);
  float r2 = d_ops[sel[i] % 3](a, b); // a __device__ table
  float r3 = c_ops[sel[i] % 3](a, b); // a __constant__ table
  op_t local[2] = {sub, &mul};
  float r4 = (*local[sel[i] & 1])(a, b);
  Job job = {mul, 0.5f};
  float r5 = job.f(a, b) * job.scale; // a member of a record
  unary_t u = (sel[i] & 2) ? sq : neg;
  float r6 = u(a);                    // a __host__ __device__ function
  float r7 = twice<sq>(a) + twice<neg>(a);  // template arguments
  float r8 = apply_to(sub, a, b);     // passed to a device function
  op_t none = nullptr;
  int z = (none == nullptr) + (f != nullptr) * 2 + (f == add) * 4 + (!none) * 8;
  out[i * 10 + 0] = r0; out[i * 10 + 1] = r1; out[i * 10 + 2] = r2; out[i * 10 + 3] = r3;
  out[i * 10 + 4] = r4; out[i * 10 + 5] = r5; out[i * 10 + 6] = r6; out[i * 10 + 7] = r7;
  out[i * 10 + 8] = r8; out[i * 10 + 9] = (float)z;
}

// Arguments are evaluated once, after the callee: k++ in an argument runs once per call.
__global__ void side_effects(const int* sel, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int k = 0;
  op_t f = d_ops[sel[i] % 3];
  float r = f((float)(k++), (float)(k++));
  out[2 * i] = r;
  out[2 * i + 1] = (float)k;
}

// A kernel taking a pointer: the host (here Python) passes an id it read from the module.
__global__ void apply(op_t f, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = f(x[i], y[i]);
}

__global__ void store(op_t* table) {  // the host reads what it may pass back: opaque values
  table[0] = add; table[1] = sub; table[2] = mul; table[3] = nullptr;
}

typedef void (*upd_t)(float&, float);
__device__ void inc(float& v, float d) { v += d; }
__device__ void dbl(float& v, float d) { v = 2.0f * v + d; }
__device__ op_t pick(int k) { return k ? add : mul; }
__global__ void more(float* out) {
  __shared__ op_t s_ops[2];
  int t = threadIdx.x;
  if (t == 0) { s_ops[0] = mul; s_ops[1] = add; }
  __syncthreads();
  float v = (float)t;
  upd_t u = (t & 1) ? inc : dbl;      // reference parameters
  u(v, 1.0f);
  out[3 * t] = v;
  out[3 * t + 1] = pick(t & 1)((float)t, 3.0f);   // returned by a device function
  out[3 * t + 2] = s_ops[t & 1]((float)t, 5.0f);  // a __shared__ table
}

__device__ float poly(float v) { return v * v * v - 2.0f * v; }
__device__ float wave(float v) { return sinf(v) * v; }
__global__ void mapped(const float* x, const int* sel, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  unary_t g = (sel[i] & 1) ? poly : wave;
  if (i < n) y[i] = g(x[i]) * x[i];
}
"""

SHAPES = [((3,), (16,)), ((1,), (64,)), ((5,), (8,))]


@pytest.fixture(scope="module")
def path() -> pathlib.Path:
    return source_file(KERNELS, "fnptr.cu")


@pytest.fixture(scope="module")
def module(path):
    return polypy.load(str(path))


@pytest.fixture(scope="module")
def compiled(path):
    return polypy.compile(str(path))


def _run(module, compiled, kernel: str, grid, block, args: dict, way: str) -> dict:
    out = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    if way == "emulator":
        emulate(module.kernel(kernel), grid, block, out)
        return out
    if way == "c":
        return run_c(module.kernel(kernel), grid, block, args, globals_=module.globals)
    getattr(compiled, kernel)[grid, block](*out.values())
    return out


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block", SHAPES)
def test_calls_through_locals_tables_members_templates(module, compiled, grid, block, way) -> None:
    n = grid[0] * block[0] - 3
    x = np.linspace(-2, 3, n).astype(np.float32)
    sel = (np.arange(n, dtype=np.int32) * 7 % 11).astype(np.int32)
    a, b = x, np.float32(2)
    add, sub, mul = a + b, a - b, a * b
    want = np.zeros((n, 10), np.float32)
    want[:, 0] = add
    want[:, 1] = np.where(sel & 1, add, mul)
    want[:, 2] = np.choose(sel % 3, [add, sub, mul])
    want[:, 3] = np.choose(sel % 3, [mul, add, sub])
    want[:, 4] = np.where(sel & 1, mul, sub)
    want[:, 5] = mul * np.float32(0.5)
    want[:, 6] = np.where(sel & 2, a * a, -a)
    want[:, 7] = (a * a) * (a * a) + a
    want[:, 8] = sub
    want[:, 9] = 1 + 2 + np.where(sel & 1, 4, 0) + 8
    out = _run(module, compiled, "patterns", grid, block,
               {"x": x, "sel": sel, "out": np.zeros(10 * n, np.float32), "n": n}, way)
    np.testing.assert_array_equal(out["out"].reshape(n, 10), want)


@pytest.mark.parametrize("way", WAYS)
def test_reference_parameters_returned_pointers_shared_tables(module, compiled, way) -> None:
    t = np.arange(16, dtype=np.float32)
    odd = (np.arange(16) & 1).astype(bool)
    want = np.stack([np.where(odd, t + 1, 2 * t + 1), np.where(odd, t + 3, t * 3), np.where(odd, t + 5, t * 5)], 1)
    out = _run(module, compiled, "more", (1,), (16,), {"out": np.zeros(48, np.float32)}, way)["out"]
    np.testing.assert_array_equal(out.reshape(16, 3), want)


@pytest.mark.parametrize("way", WAYS)
def test_arguments_evaluated_once(module, compiled, way) -> None:
    n = 30
    sel = np.arange(n, dtype=np.int32)
    out = _run(module, compiled, "side_effects", (1,), (32,), {"sel": sel, "out": np.zeros(2 * n, np.float32),
                                                                 "n": n}, way)["out"].reshape(n, 2)
    # C++17 leaves the order of the two k++ unspecified: clang evaluates left to right (0, 1).
    np.testing.assert_array_equal(out[:, 0], np.choose(sel % 3, [1.0, -1.0, 0.0]).astype(np.float32))
    np.testing.assert_array_equal(out[:, 1], np.full(n, 2.0, np.float32))


@pytest.mark.parametrize("way", WAYS)
def test_pointer_stored_by_a_kernel_passed_back_and_null_call_fails(module, compiled, way) -> None:
    table = _run(module, compiled, "store", (1,), (1,), {"table": np.full(4, -7, np.int64)}, way)["table"]
    assert table[3] == 0 and len(set(table[:3].tolist())) == 3 and 0 not in table[:3]
    n = 20
    x = np.arange(n, dtype=np.float32)
    for fid, f in zip(table[:3], (np.add, np.subtract, np.multiply)):
        y = np.full(n, 3.0, np.float32)
        got = _run(module, compiled, "apply", (1,), (32,), {"f": int(fid), "x": x, "y": y, "n": n}, way)["y"]
        np.testing.assert_array_equal(got, f(x, np.float32(3)))
    if way == "c":
        return  # a file of kernels built by the C backend does not report device faults to Python: the
        # program test (tests/programs/function_pointers.cu) checks the fault of the C backend
    for bad in (0, int(table[:3].max()) + 1):  # null, and no function of this type
        with pytest.raises(DeviceAssertError):
            _run(module, compiled, "apply", (1,), (32,), {"f": bad, "x": x, "y": np.zeros(n, np.float32), "n": n},
                 way)


# ---------------------------------------------------------------------------- a whole program
def _polypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=300)


PROGRAM_OUTPUT = """symbol idiom: PASSED
record member: PASSED
constant table: PASSED
stored by a kernel: PASSED
host call: 12
constant records: 4 2 6 6
fixed<sub>: -2 1
fixed<add>: 2 5
call: 3
null call: launch failed
"""


def test_program_host_idiom_constant_table_record_member(tmp_path) -> None:
    need_compiler(cpp=True)
    out = tmp_path / "function_pointers.cpp"
    translated = _polypy("translate", str(PROGRAM), "-o", str(out))
    assert translated.returncode == 0, translated.stderr
    exe = tmp_path / "function_pointers"
    built = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    native = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert native.returncode == 0, native.stderr
    assert native.stdout == PROGRAM_OUTPUT
    assert "Assertion `call through a null or invalid function pointer` failed" in native.stderr
    emulated = _polypy("run", str(PROGRAM), "--emulate")
    assert emulated.returncode == 0, emulated.stderr
    assert emulated.stdout == PROGRAM_OUTPUT


# ---------------------------------------------------------------------------- separate compilation
SEPARATE_HEADER = r"""
#pragma once
typedef float (*op_t)(float, float);
__device__ inline float add(float a, float b) { return a + b; }
__global__ void apply(op_t f, const float* x, float* y, int n);
"""

SEPARATE_MAIN = r"""
#include <cstdio>
#include "ops.cuh"
__device__ op_t d_add = add;
int main() {
  float hx[4] = {1, 2, 3, 4}, hy[4] = {0, 0, 0, 0};
  float *x, *y;
  cudaMalloc(&x, sizeof hx);
  cudaMalloc(&y, sizeof hy);
  cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice);
  op_t h = nullptr;
  cudaMemcpyFromSymbol(&h, d_add, sizeof(op_t));
  apply<<<1, 4>>>(h, x, y, 4);
  cudaError_t e = cudaDeviceSynchronize();
  cudaMemcpy(hy, y, sizeof hy, cudaMemcpyDeviceToHost);
  printf("%s %g %g %g %g\n", e == cudaSuccess ? "ok" : "launch failed", hy[0], hy[1], hy[2], hy[3]);
  return 0;
}
"""

SEPARATE_KERNEL = r"""
#include "ops.cuh"
__device__ float mul(float a, float b) { return a * b; }
__device__ op_t d_mul = mul;
__global__ void apply(op_t f, const float* x, float* y, int n) {
  int i = threadIdx.x;
  if (i < n) y[i] = f(x[i], 10.0f);
}
"""


def test_pointer_from_another_file_never_reaches_another_function(tmp_path) -> None:
    """``-rdc=true``: main.cu passes a pointer to ``add`` to a kernel of apply.cu, which takes the
    address of ``mul`` only. Ids are hashes of the functions' USRs, the same in every file, so
    the call matches no function apply.cu can reach and the launch fails; it never computes
    ``mul`` (with ids numbered per file, ``add`` in main.cu and ``mul`` in apply.cu were both 1)."""
    need_compiler(cpp=True)
    exe = build_from_parts(tmp_path, {"ops.cuh": SEPARATE_HEADER, "main.cu": SEPARATE_MAIN, "apply.cu": SEPARATE_KERNEL},
                           ("-rdc=true",))
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "10 20 30 40" not in run.stdout, run.stdout  # mul's answer: a wrong function reached
    assert run.stdout.startswith("launch failed"), (run.stdout, run.stderr)
    assert "call through a null or invalid function pointer" in run.stderr


# ---------------------------------------------------------------------------- gradients
GRAD_KERNEL = r"""
typedef double (*fn_t)(double);
__device__ double cube(double v) { return v * v * v - 2.0 * v; }
__device__ double wave(double v) { return sin(v) * v; }
__device__ double soft(double v) { return log(1.0 + exp(v)); }
__constant__ fn_t table[3] = {cube, wave, soft};

__global__ void mapped(const double* x, const int* sel, double* y, double k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    fn_t g = table[sel[i] % 3];
    fn_t h = (sel[i] & 1) ? wave : cube;
    y[i] = g(x[i] * k) + h(x[i]) * x[i];
  }
}
"""


@pytest.mark.parametrize("grid,block", [((1,), (32,)), ((3,), (16,))])
def test_gradient_through_dispatch_matches_finite_differences(tmp_path, grid, block) -> None:
    from autodiff.check import check_gradients
    from polypy.driver.gradients import grad_kernel

    path = tmp_path / "mapped.cu"
    path.write_text(GRAD_KERNEL)
    module = polypy.load(str(path))
    k_grad = grad_kernel(module, "mapped", wrt=["x", "k"])
    k_fwd = grad_kernel(module, "mapped", wrt=["x", "k"], mode="forward")
    n = grid[0] * block[0] - 3
    rng = np.random.default_rng(7)
    args = {"x": rng.standard_normal(n), "sel": rng.integers(0, 9, n).astype(np.int32), "y": np.zeros(n),
            "k": 0.7, "n": n}
    result = check_gradients(module.kernel("mapped"), k_grad, grid, block, args, k_fwd=k_fwd)
    assert abs(result.finite_difference) > 1e-8
    assert result.error() < 1e-6, result
    assert result.forward_effect_error < 1e-12, result


# ---------------------------------------------------------------------------- still refused
REFUSED = [
    ("no-target",
     "typedef int (*iop)(int);\n"
     "__global__ void k(iop f, int* y) { y[threadIdx.x] = f(y[threadIdx.x]); }\n",
     "can reach no device function", (2, 53)),
    ("to-number",
     "typedef float (*op)(float);\n"
     "__device__ float twice(float v) { return 2.0f * v; }\n"
     "__global__ void k(long long* y) { op f = twice; y[threadIdx.x] = (long long)f; }\n",
     "is not supported in device code (a device function pointer is polypy's id", (3, 66)),
    ("other-type",
     "typedef float (*op)(float);\n"
     "typedef int (*iop)(int);\n"
     "__device__ float twice(float v) { return 2.0f * v; }\n"
     "__global__ void k(int* y) { iop f = (iop)twice; y[threadIdx.x] = f(1); }\n",
     "conversion from", (4, 37)),
    ("host-function",
     "typedef float (*op)(float);\n"
     "float host_only(float v) { return v; }\n"
     "__global__ void k(float* y) { op f = host_only; y[threadIdx.x] = f(1.0f); }\n",
     "host function 'host_only' used as a value in device code", (3, 38)),
    ("kernel-pointer",
     "typedef void (*kp)(float*);\n"
     "__global__ void other(float* y) { y[0] = 1.0f; }\n"
     "__global__ void k(float* y) { kp f = other; f(y); }\n",
     "pointers to kernels are not supported in device code", (3, 38)),
    ("lambda",
     "typedef float (*op)(float, float);\n"
     "__global__ void k(float* y) { op f = [](float a, float b) { return a + b; }; y[0] = f(1.0f, 2.0f); }\n",
     "converted to a function pointer is not supported", (2, 38)),
    ("device-function-in-host-code",
     "typedef float (*op)(float);\n"
     "__device__ float twice(float v) { return 2.0f * v; }\n"
     "__global__ void k(op f, float* y) { y[0] = f(y[0]); }\n"
     "int main() { op h = twice; float* y; cudaMalloc(&y, 4); k<<<1, 1>>>(h, y); return 0; }\n",
     "reference to __device__ function 'twice' in __host__ function", (4, 21)),  # clang's own error
    ("record-result",
     "struct P { float a, b; };\n"
     "typedef P (*pp)(float);\n"
     "__device__ P make(float v) { P p = {v, v}; return p; }\n"
     "__global__ void k(float* y) { pp f = make; y[0] = f(1.0f).a; }\n",
     "a call through a function pointer returning 'P' is not supported", (4, 51)),
]


@pytest.mark.parametrize("name,source,message,where", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_located(tmp_path, name, source, message, where) -> None:
    assert_load_refused(tmp_path, name, source, message, where)
