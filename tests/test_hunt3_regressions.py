"""Regressions found by running unseen CUDA programs (hunt 3): each test is a minimized program
that polypy refused, crashed on or answered wrongly, checked on the emulator and the LLVM backend."""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

import polypy
from polypy.errors import DeviceAssertError

ASSERT_MESSAGES = r"""
#include <cassert>
__global__ void k(const int *x, int *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    assert(x[i] >= 0 && "x must be non-negative");
    if (x[i] > 100) assert(!"unreachable: x > 100");
    y[i] = 2 * x[i];
  }
}
"""


@pytest.mark.parametrize("backend", ["emulate", "llvm"])
def test_assert_with_a_message_string(tmp_path, capfd, backend):
    # `assert(cond && "message")` and `assert(!"message")`: a string literal converted to bool is
    # true (its address is not null). polypy refused the literal ("string literals are not
    # supported in device code").
    (tmp_path / "a.cu").write_text(ASSERT_MESSAGES)
    mod = polypy.compile(str(tmp_path / "a.cu"))
    kernel = mod.k.emulate if backend == "emulate" else mod.k
    x = np.array([0, 5, 7], dtype=np.int32)
    y = np.zeros(3, dtype=np.int32)
    kernel[1, 4](x, y, 3)
    np.testing.assert_array_equal(y, [0, 10, 14])
    x[1] = -1
    with pytest.raises(DeviceAssertError, match='x must be non-negative'):
        kernel[1, 4](x, y, 3)
    assert "thread: [1,0,0] Assertion `x[i] >= 0 && \"x must be non-negative\"` failed." in capfd.readouterr().err
    x[1] = 101
    with pytest.raises(DeviceAssertError, match='unreachable'):
        kernel[1, 4](x, y, 3)
    assert "thread: [1,0,0] Assertion `!\"unreachable: x > 100\"` failed." in capfd.readouterr().err


RECORD_ARRAYS = r"""
#include <cstdio>
struct Inner { int lut[5]; };
struct Conf { float coef[4]; Inner in; const float *src; int n; double scale; };
__global__ void k(const Conf c, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < c.n) out[i] = (float)(c.coef[i % 4] * c.src[i] * c.scale) + c.in.lut[(i * 7) % 5];
}
int main() {
  const int n = 90;
  Conf c = {{1.5f, -2.0f, 0.25f, 3.0f}, {{-4, -3, 0, 5, 12}}, 0, n, 0.5};
  float src[n], out[n];
  for (int i = 0; i < n; ++i) src[i] = i * 0.25f;
  float *ds, *dout;
  cudaMalloc(&ds, sizeof src); cudaMalloc(&dout, sizeof out);
  cudaMemcpy(ds, src, sizeof src, cudaMemcpyHostToDevice);
  c.src = ds;
  k<<<3, 32>>>(c, dout);
  cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; i += 7) printf("%d %.4f\n", i, out[i]);
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                    reason="no C++ compiler: polypy run cannot build the host program")
@pytest.mark.parametrize("emulate", [True, False])
def test_struct_by_value_with_array_members_in_a_whole_program(tmp_path, emulate):
    # A struct passed by value whose array members the kernel indexes at run time: `polypy run
    # --emulate` refused the launch ("argument 'c_coef' of kernel 'k' does not point into memory
    # from cudaMalloc": it read the array's first bytes as a pointer).
    src = tmp_path / "p.cu"
    src.write_text(RECORD_ARRAYS)
    command = [sys.executable, "-m", "polypy.driver.cli", "run", *(["--emulate"] if emulate else []), str(src)]
    run = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    coef, lut = [1.5, -2.0, 0.25, 3.0], [-4, -3, 0, 5, 12]
    expected = [f"{i} {float(np.float32(np.float32(coef[i % 4]) * np.float32(i * 0.25)) * 0.5) + lut[i * 7 % 5]:.4f}"
                for i in range(0, 90, 7)]
    assert run.stdout.splitlines() == expected


CHARS = r"""
#include <cstdio>
__global__ void k(const signed char *c, const unsigned char *u) {
  int t = threadIdx.x;
  printf("%d: [%hhd] [%4hhu] [%02hhx] [%hhi]\n", t, c[t], u[t], u[t], c[t] * 3);
}
"""


@pytest.mark.parametrize("backend", ["emulate", "llvm"])
def test_printf_hh_length_modifier(tmp_path, capfd, backend):
    # `%hhd`/`%hhu`/`%hhx`: the int argument printed as a char (was refused).
    (tmp_path / "c.cu").write_text(CHARS)
    mod = polypy.compile(str(tmp_path / "c.cu"))
    kernel = mod.k.emulate if backend == "emulate" else mod.k
    c = np.array([-5, 100, -128], dtype=np.int8)
    u = np.array([7, 200, 255], dtype=np.uint8)
    kernel[1, 3](c, u)
    want = ["0: [-5] [   7] [07] [-15]", "1: [100] [ 200] [c8] [44]", "2: [-128] [ 255] [ff] [-128]"]
    assert sorted(capfd.readouterr().out.splitlines()) == sorted(want)


@pytest.mark.parametrize("kernel, col", [
    # a local record: each member was a variable of its own type, so `b.a = 9` read back 9, not 1
    ("__global__ void k(int *o) {\n  Bits b; b.a = o[0]; b.c = o[1]; o[2] = b.a + b.c;\n}\n", 3),
    ("__global__ void k(Bits p, int *o) {\n  o[threadIdx.x] = p.a;\n}\n", 24),
    ("__global__ void k(const Bits *p, int *o) {\n  o[threadIdx.x] = p[threadIdx.x].c;\n}\n", 31),
])
def test_bit_fields_are_refused_where_used(tmp_path, capsys, kernel, col):
    from polypy.driver.cli import main
    src = tmp_path / "bits.cu"
    src.write_text("struct Bits { unsigned a : 3; int c : 6; };\n" + kernel)
    assert main(["translate", str(src), "-o", str(tmp_path / "bits.cpp")]) == 1
    err = capsys.readouterr().err
    line = 3 if "Bits b;" in kernel else 2
    assert f"bits.cu:{line}:{col}: error: bit-field member " in err and "is not supported in device code" in err, err
    assert "Traceback" not in err and not (tmp_path / "bits.cpp").exists()


CONTINUE_PAST_LOCALS = r"""
struct Acc { float s; int c; };
__device__ Acc add(Acc a, float v) { Acc r; r.s = a.s + v; r.c = a.c + 1; return r; }
__global__ void k(const float *a, float *out, int *count, int m) {
  const float *p = a + threadIdx.x * m, *end = p + m;
  Acc acc = {0.0f, 0};
  for (; p < end; ++p) {
    if (*p == 0.0f) continue;
    float v = *p * 2.0f;
    acc = add(acc, v);
  }
  out[threadIdx.x] = acc.s;
  count[threadIdx.x] = acc.c;
}
"""


@pytest.mark.parametrize("cpp", [False, True])
def test_continue_in_a_loop_with_an_update_before_local_declarations(tmp_path, cpp):
    # The C backend's `goto` to the loop's update (a `continue`) jumped across the initialized
    # locals of the body, which C++ refuses: whole programs failed to compile.
    from tests.c_support import assert_same_as_emulator, cuda_source
    mod, kernel = cuda_source(tmp_path, "c.cu", CONTINUE_PAST_LOCALS, "k")
    a = np.array([[1, 0, -2, 0, 3], [0, 0, 0, 0, 0], [4, 4, 0, 4, 1]], dtype=np.float32)
    got = assert_same_as_emulator(kernel, 1, 3, {"a": a.ravel(), "out": np.zeros(3, np.float32),
                                                 "count": np.zeros(3, np.int32), "m": np.int32(5)}, cpp=cpp)
    np.testing.assert_array_equal(got["out"], [4.0, 0.0, 26.0])
    np.testing.assert_array_equal(got["count"], [3, 0, 4])
    out, count = np.zeros(3, np.float32), np.zeros(3, np.int32)
    mod.k[1, 3](a.ravel(), out, count, 5)  # the LLVM backend
    np.testing.assert_array_equal(out, [4.0, 0.0, 26.0])
    np.testing.assert_array_equal(count, [3, 0, 4])


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: whole programs cannot be compiled")
def test_pasted_headers_with_pragma_once_compile_without_warnings(tmp_path):
    # The inlined text of a user header kept its `#pragma once`, in what is then the main file:
    # "warning: #pragma once in main file" from g++.
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "util.cuh").write_text(
        "#pragma once\n#include \"plain.h\"\n"
        "template <typename T> __device__ T clampv(T v, T lo, T hi) { return v < lo ? lo : (v > hi ? hi : v); }\n")
    (tmp_path / "inc" / "plain.h").write_text("  #  pragma   once\ninline int div_up(int a, int b) { return (a + b - 1) / b; }\n")
    src = tmp_path / "p.cu"
    src.write_text(r"""#include <cstdio>
#include "inc/util.cuh"
#include "inc/plain.h"
__global__ void k(int *o, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = clampv(i, 3, 10); }
int main() {
  int *d, h[20];
  cudaMalloc(&d, sizeof h);
  k<<<div_up(20, 8), 8>>>(d, 20);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 20; ++i) printf("%d ", h[i]);
  printf("\n");
  return 0;
}
""")
    out = tmp_path / "p.cpp"
    subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o", str(out)],
                   check=True, cwd=tmp_path)
    build = subprocess.run(["g++", "-O1", "-fopenmp", "-Wall", str(out), "-o", str(tmp_path / "p"), "-lm"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0 and "warning" not in build.stderr, build.stderr
    run = subprocess.run([str(tmp_path / "p")], capture_output=True, text=True, cwd=tmp_path)
    assert run.stdout.split() == [str(min(max(i, 3), 10)) for i in range(20)]


DP4A = r"""
__global__ void k(const int *a, const int *b, int *s, unsigned *u, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    s[i] = __dp4a(a[i], b[i], a[i] ^ b[i]);
    u[i] = __dp4a((unsigned)a[i], (unsigned)b[i], 0xFFFFFF00u + i);
  }
}
"""


def _dp4a(a, b, c, signed):
    dt = np.int8 if signed else np.uint8
    x, y = a.view(np.uint32).view(dt).reshape(-1, 4), b.view(np.uint32).view(dt).reshape(-1, 4)
    return ((x.astype(np.int64) * y.astype(np.int64)).sum(axis=1) + c.astype(np.int64)) % 2 ** 32


@pytest.mark.parametrize("way", ["emulate", "llvm", "c"])
def test_dp4a_both_overloads(tmp_path, way):
    # `__dp4a` (int8/uint8 dot products, quantized kernels) was an undeclared identifier.
    from tests.c_support import cuda_source, run_c
    mod, kernel = cuda_source(tmp_path, "d.cu", DP4A, "k")
    rng = np.random.default_rng(3)
    a = rng.integers(-2 ** 31, 2 ** 31, 70, dtype=np.int64).astype(np.int32)
    b = rng.integers(-2 ** 31, 2 ** 31, 70, dtype=np.int64).astype(np.int32)
    a[:4] = [-2 ** 31, -1, 0x7F7F7F7F, -0x7F7F7F80]
    b[:4] = [-2 ** 31, -1, 0x7F7F7F7F, -0x7F7F7F80]
    s, u = np.zeros(70, np.int32), np.zeros(70, np.uint32)
    if way == "c":
        out = run_c(kernel, 3, 32, {"a": a, "b": b, "s": s, "u": u, "n": np.int32(70)})
        s, u = out["s"], out["u"]
    else:
        (mod.k.emulate if way == "emulate" else mod.k)[3, 32](a, b, s, u, 70)
    np.testing.assert_array_equal(s.view(np.uint32), _dp4a(a, b, (a ^ b).view(np.uint32), True))
    np.testing.assert_array_equal(u, _dp4a(a, b, np.uint32(0xFFFFFF00) + np.arange(70, dtype=np.uint32), False))
