"""Device printf and assert: formatting against the C library, the emulator, whole programs
compiled with the C backend, and the LLVM backend's located refusal."""
from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys

import numpy as np
import pytest

import polypy
from polypy.errors import DeviceAssertError, UserError
from polypy.ir.parser import parse_module
from polypy.ir.printer import print_module
from polypy.ir.printf import format_call

KERNELS = r"""
#include <cstdio>
#include <cassert>
__global__ void show(const int *x, float f, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) printf("[%s] t=%03d x=%-4d|%5.2f|%e|%x|%c|%ld%%\n", "id", t, x[t], f * t, (double)x[t], x[t], 'A' + t,
                    (long)t * 100000000000L);
}
__global__ void check(const int *x, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) {
    assert(x[t] < 8);
  }
}
"""

EXPECTED_SHOW = [f"[id] t={t:03d} x={t:<4d}|{1.5 * t:5.2f}|{float(t):e}|{t:x}|{chr(65 + t)}|{t * 100000000000}%"
                 for t in range(5)]


@pytest.mark.parametrize("fmt, value", [
    ("%d", -7), ("%5d", 42), ("%-5d|", 42), ("%+d", 3), ("% d", 3), ("%05d", -42), ("%.3d", 7), ("%.0d", 0),
    ("%u", 4294967295), ("%x", 255), ("%#x", 255), ("%#x", 0), ("%#o", 8), ("%o", 0), ("%#o", 0), ("%X", 48879),
    ("%hd", 40000), ("%hu", -1), ("%hx", 0x12345),
    ("%hhd", 200), ("%hhd", -129), ("%hhu", -1), ("%hhx", 0x1234), ("%+05hhd", 127), ("%#hho", 300),
    ("%lld", -(2 ** 62)), ("%llu", 2 ** 63), ("%c", 65), ("%3c|", 66),
    ("%f", 3.14159), ("%.2f", 2.675), ("%10.3f|", -1.5), ("%-10.3f|", 1.5), ("%+f", 0.0), ("%010.2f", -3.25),
    ("%e", 12345.678), ("%E", 1e-300), ("%.0e", 5.5), ("%g", 0.0001), ("%g", 1e20), ("%G", 1.5e-7), ("%#g", 1.0),
    ("%a", 1.0), ("%a", 0.1), ("%a", 0.0), ("%A", 255.5), ("%.2a", 1.0 / 3), ("%a", 5e-324), ("%f", float("inf")),
    ("%5f|", float("-inf")), ("%F", float("nan")), ("%08.3f", float("inf")),
])
def test_formatting_matches_the_c_library(fmt, value):
    libc = ctypes.CDLL(None)
    buf = ctypes.create_string_buffer(256)
    conv = fmt.rstrip("|")[-1]
    if isinstance(value, float):
        arg = ctypes.c_double(value)
    elif "ll" in fmt:
        arg = ctypes.c_ulonglong(value) if conv in "uxXo" else ctypes.c_longlong(value)
    else:
        arg = ctypes.c_uint(value) if conv in "uxXo" else ctypes.c_int(value)
    libc.snprintf(buf, 256, fmt.encode(), arg)
    assert format_call(fmt, [value]) == buf.value.decode()


def test_star_width_matches_the_c_library():
    libc = ctypes.CDLL(None)
    buf = ctypes.create_string_buffer(256)
    fmt = "[%*d|%-*d|%*.2f|%0*x]"
    libc.snprintf(buf, 256, fmt.encode(), ctypes.c_int(5), ctypes.c_int(42), ctypes.c_int(-4), ctypes.c_int(7),
                  ctypes.c_int(8), ctypes.c_double(3.14159), ctypes.c_int(6), ctypes.c_uint(255))
    assert format_call(fmt, [5, 42, -4, 7, 8, 3.14159, 6, 255]) == buf.value.decode()


WIDTHS = r"""
#include <cstdio>
__global__ void widths(const int *w, const short *h) {
  int t = threadIdx.x;
  printf("[%*d] [%-*d] [%hd]\n", w[t], t, w[t], t * 3, h[t]);
}
"""


@pytest.mark.parametrize("backend", ["emulate", "llvm"])
def test_star_width_and_short_in_a_kernel(tmp_path, capfd, backend):
    (tmp_path / "w.cu").write_text(WIDTHS)
    mod = polypy.compile(str(tmp_path / "w.cu"))
    kernel = mod.widths.emulate if backend == "emulate" else mod.widths
    w = np.array([3, -4, 1], dtype=np.int32)
    h = np.array([-7, 300, -32768], dtype=np.int16)
    kernel[1, 3](w, h)
    want = ["[  0] [0  ] [-7]", "[1   ] [3   ] [300]", "[2] [6] [-32768]"]
    assert sorted(capfd.readouterr().out.splitlines()) == sorted(want)


CHOICE = r"""
#include <cstdio>
__global__ void k(const int *x, int n) {
  int t = threadIdx.x;
  printf("%d is %s and %-5s|%s\n", t, x[t] % 2 ? "odd" : "even", t < 2 ? "low" : (t < 3 ? "mid" : "high"),
         t < n ? (x[t] > 4 ? "+" : "-") : "none");
}
"""


@pytest.mark.parametrize("backend", ["emulate", "llvm"])
def test_string_choice(tmp_path, capfd, backend):
    # The nested choice reads x[t] only where t < n holds: bounds-checked by the emulator.
    (tmp_path / "c.cu").write_text(CHOICE)
    mod = polypy.compile(str(tmp_path / "c.cu"))
    kernel = mod.k.emulate if backend == "emulate" else mod.k
    kernel[1, 4](np.array([3, 4, 5, 6], dtype=np.int32), 3)
    assert sorted(capfd.readouterr().out.splitlines()) == [
        "0 is odd and low  |-", "1 is even and low  |-", "2 is odd and mid  |+", "3 is even and high |none"]


def test_emulator_prints_each_thread_whole(tmp_path, capfd):
    (tmp_path / "k.cu").write_text(KERNELS)
    mod = polypy.compile(str(tmp_path / "k.cu"))
    x = np.arange(5, dtype=np.int32)
    mod.show.emulate[2, 4](x, 1.5, 5)
    assert sorted(capfd.readouterr().out.splitlines()) == EXPECTED_SHOW


def test_emulator_assert(tmp_path, capfd):
    (tmp_path / "k.cu").write_text(KERNELS)
    mod = polypy.compile(str(tmp_path / "k.cu"))
    x = np.arange(6, dtype=np.int32)
    mod.check.emulate[2, 4](x, 6)  # passes: nothing printed
    assert capfd.readouterr().err == ""
    x[4] = 9
    with pytest.raises(DeviceAssertError, match="Assertion `x\\[t\\] < 8` failed"):
        mod.check.emulate[2, 4](x, 6)
    err = capfd.readouterr().err
    assert "k.cu:12: void check(const int *, int): block: [1,0,0], thread: [0,0,0] Assertion `x[t] < 8` failed." in err


def test_llvm_jit_prints_and_asserts(tmp_path, capfd):
    (tmp_path / "k.cu").write_text(KERNELS)
    mod = polypy.compile(str(tmp_path / "k.cu"))
    x = np.arange(6, dtype=np.int32)
    mod.show[2, 4](x, 1.5, 5)
    assert sorted(capfd.readouterr().out.splitlines()) == EXPECTED_SHOW
    mod.check[2, 4](x, 6)
    x[4] = 9
    with pytest.raises(DeviceAssertError, match="Assertion `x\\[t\\] < 8` failed") as info:
        mod.check[2, 4](x, 6)
    assert info.value.loc is not None and info.value.loc.line == 12
    err = capfd.readouterr().err
    assert err == f"{tmp_path / 'k.cu'}:12: void check(const int *, int): block: [1,0,0], thread: [0,0,0] " \
                  "Assertion `x[t] < 8` failed.\n"
    x[4] = 4
    mod.check[2, 4](x, 6)  # the failure is not left behind for the next launch
    assert capfd.readouterr().err == ""


UNIFORM = r"""
#include <cstdio>
__global__ void hello(const float *y, int n) {
  printf("hello\n");
  for (int i = 0; i < n; i++) printf("i=%d\n", i);
  if (blockIdx.x == 1) printf("block one %u %.1f\n", threadIdx.x, y[threadIdx.x]);
}
"""


@pytest.mark.parametrize("backend", ["emulate", "llvm"])
def test_every_thread_prints_even_identical_ones(tmp_path, capfd, backend):
    # threadIdx.y is never read: the threads that differ only in it are identical, and a print
    # that reads no thread index is block-uniform; each still prints once per thread.
    (tmp_path / "u.cu").write_text(UNIFORM)
    mod = polypy.compile(str(tmp_path / "u.cu"))
    kernel = mod.hello.emulate if backend == "emulate" else mod.hello
    kernel[2, (2, 3)](np.arange(2, dtype=np.float32), 2)
    lines = capfd.readouterr().out.splitlines()
    want = ["hello"] * 12 + ["i=0"] * 12 + ["i=1"] * 12 + ["block one 0 0.0"] * 3 + ["block one 1 1.0"] * 3
    assert sorted(lines) == sorted(want)


ORDER = r"""
#include <cstdio>
__global__ void order(float *a, const float *b, int n) {
  int t = threadIdx.x;
  float acc = 0.0f;
  printf("A %d %d\n", blockIdx.x, t);
  for (int k = 0; k < n; k++) {
    acc += b[k];
    if (k == 1) printf("K %d %d\n", blockIdx.x, t);
  }
  a[blockIdx.x * 8 + t] = acc + t;
  __syncthreads();
  printf("B %d %d %.0f\n", blockIdx.x, t, a[blockIdx.x * 8 + (t + 1) % 8]);
  printf("C %d %d\n", blockIdx.x, t);
}
"""


@pytest.mark.parametrize("backend", ["emulate", "llvm"])
def test_each_thread_prints_in_program_order(tmp_path, capfd, backend):
    # Threads run as loops, split at the barrier: between threads any order, within one the
    # program's (A, K in the loop, B after the barrier, C).
    (tmp_path / "o.cu").write_text(ORDER)
    mod = polypy.compile(str(tmp_path / "o.cu"))
    kernel = mod.order.emulate if backend == "emulate" else mod.order
    kernel[2, 8](np.zeros(16, np.float32), np.ones(4, np.float32), 4)
    per_thread: dict[tuple[str, str], list[str]] = {}
    for line in capfd.readouterr().out.splitlines():
        words = line.split()
        per_thread.setdefault((words[1], words[2]), []).append(words[0] + " ".join(words[3:]))
    assert per_thread == {(str(b), str(t)): ["A", "K", f"B{4 + (t + 1) % 8}", "C"] for b in range(2) for t in range(8)}


LIVE = r"""
#include <cstdio>
__global__ void live(const float *x, float *y) {
  __shared__ float s[8];
  int t = threadIdx.x;
  float v = x[t] * 2.0f;
  s[t] = x[t];
  __syncthreads();
  y[t] = s[7 - t];
  __syncthreads();
  printf("%d %.1f %.1f\n", t, v, s[(t + 1) % 8]);
}
"""


@pytest.mark.parametrize("backend", ["emulate", "llvm"])
def test_print_reads_values_across_barriers(tmp_path, capfd, backend):
    # v lives across two barriers and only the print reads it; the shared load after the second
    # barrier sees the stores before the first.
    (tmp_path / "l.cu").write_text(LIVE)
    mod = polypy.compile(str(tmp_path / "l.cu"))
    kernel = mod.live.emulate if backend == "emulate" else mod.live
    y = np.zeros(8, np.float32)
    kernel[1, 8](np.arange(8, dtype=np.float32), y)
    np.testing.assert_array_equal(y, np.arange(8)[::-1])
    assert sorted(capfd.readouterr().out.splitlines()) == [f"{t} {2.0 * t:.1f} {(t + 1) % 8:.1f}" for t in range(8)]


GRAD = r"""
#include <cstdio>
#include <cassert>
__global__ void sq(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    assert(x[i] > -100.0f);
    float v = x[i] * x[i];
    printf("i=%d v=%.2f\n", i, v);
    y[i] = v;
  }
}
"""


def test_grad_prints_in_the_forward_sweep_only(tmp_path, capfd):
    (tmp_path / "g.cu").write_text(GRAD)
    mod = polypy.compile(str(tmp_path / "g.cu"))
    g = polypy.grad(mod.sq, wrt=["x"])
    x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    y = np.zeros(3, dtype=np.float32)
    dx = np.zeros(3, dtype=np.float32)
    dy = np.ones(3, dtype=np.float32)
    g[1, 4](x, dx, y, dy, 3)
    np.testing.assert_allclose(dx, 2 * x)
    np.testing.assert_allclose(y, x * x)
    assert sorted(capfd.readouterr().out.splitlines()) == ["i=0 v=1.00", "i=1 v=4.00", "i=2 v=9.00"]
    x[1] = -200.0
    with pytest.raises(DeviceAssertError, match="x\\[i\\] > -100.0f"):
        g[1, 4](x, dx, y, dy, 3)


def test_forward_mode_prints_once(tmp_path, capfd):
    (tmp_path / "g.cu").write_text(GRAD)
    mod = polypy.compile(str(tmp_path / "g.cu"))
    f = polypy.grad(mod.sq, wrt=["x"], mode="forward")
    x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    y, dy = np.zeros(3, dtype=np.float32), np.zeros(3, dtype=np.float32)
    f[1, 4](x, np.ones(3, dtype=np.float32), y, dy, 3)
    np.testing.assert_allclose(dy, 2 * x)
    assert sorted(capfd.readouterr().out.splitlines()) == ["i=0 v=1.00", "i=1 v=4.00", "i=2 v=9.00"]


def test_grad_emits_cuda_printf_and_assert(tmp_path):
    from polypy.driver.cli import main
    (tmp_path / "g.cu").write_text(GRAD)
    out = tmp_path / "g_grad.cu"
    assert main(["grad", str(tmp_path / "g.cu"), "--kernel", "sq", "-o", str(out)]) == 0
    grad = out.read_text().split("__global__ void sq_grad", 1)[1]
    assert grad.count('printf("i=%d v=%.2f\\n", ') == 1
    assert grad.count('__assert_fail("x[i] > -100.0f", ') == 1


def test_ndebug_removes_asserts(tmp_path, capfd):
    (tmp_path / "k.cu").write_text(KERNELS)
    mod = polypy.compile(str(tmp_path / "k.cu"), defines={"NDEBUG": None})
    x = np.full(6, 9, dtype=np.int32)
    mod.check[2, 4](x, 6)
    mod.check.emulate[2, 4](x, 6)
    assert capfd.readouterr().err == ""


# %s of a character array built at run time (cdpSimplePrint's indentation): printed up to its first
# 0 byte, with C's width, precision and '-' flag; a row of a 2-D array, a pointer into one.
STRINGS = r"""
#include <cstdio>
__global__ void k(const int *depth) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  char bars[12];
  int i = 0;
  for (; i < depth[t] && i < 10; ++i) bars[i] = i % 2 ? '-' : '|';
  bars[i] = 0;
  char names[2][6];
  names[1][0] = 'a' + t;
  names[1][1] = t % 2 ? 'z' : 0;
  names[1][2] = 0;
  printf("%s[%d]%-4s|%5s|%.2s%%\n", bars, t, names[1], &bars[1], bars);
}
"""


def _strings_expected(depth: list[int]) -> list[str]:
    out = []
    for t, d in enumerate(depth):
        bars = "".join("-" if i % 2 else "|" for i in range(min(d, 10)))
        name = chr(ord("a") + t) + ("z" if t % 2 else "")
        out.append(f"{bars}[{t}]{name:<4}|{bars[1:]:>5}|{bars[:2]}%")
    return sorted(out)


@pytest.mark.parametrize("shape", [(1, 3), (2, 4)])
@pytest.mark.parametrize("backend", ["emulate", "llvm", "c"])
def test_string_of_a_character_array(tmp_path, capfd, backend, shape):
    (tmp_path / "s.cu").write_text(STRINGS)
    grid, block = shape
    depth = [(5 * t + 2) % 13 for t in range(grid * block)]  # 0 to 12: empty strings, cut at 10
    if backend == "c":
        if shutil.which("g++") is None and shutil.which("clang++") is None:
            pytest.skip("no C++ compiler")
        ints = ", ".join(map(str, depth))
        (tmp_path / "m.cu").write_text(STRINGS + f"int main() {{ int h[] = {{{ints}}}; int* d; cudaMalloc(&d, sizeof h); "
                                       f"cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice); k<<<{grid}, {block}>>>(d); "
                                       "cudaDeviceSynchronize(); return 0; }\n")
        result = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(tmp_path / "m.cu")],
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
    else:
        mod = polypy.compile(str(tmp_path / "s.cu"))
        kernel = mod.k.emulate if backend == "emulate" else mod.k
        kernel[grid, block](np.array(depth, dtype=np.int32))
        lines = capfd.readouterr().out.splitlines()
    assert sorted(lines) == _strings_expected(depth)


def test_string_lengths_survive_the_ir_text():
    text = ('kernel k(x: i32*) {\n  print "<%s|%d|%-3s>\\n" strings(2, 1), x[0], x[1], x[2], x[3]\n}\n')
    module = parse_module(text)
    assert print_module(module) == text
    stmt = module.kernels[0].body[0]
    assert stmt.strings == (2, 1) and len(stmt.args) == 4
    assert format_call(stmt.format, [104, 105, 7, 0], stmt.strings) == "<hi|7|   >\n"
    assert format_call(stmt.format, [104, 0, 7, 122], stmt.strings) == "<h|7|z  >\n"


@pytest.mark.parametrize("call, message, col", [
    ('printf("%d\\n", 1.5f)', "printf '%d' needs an integer argument, not f64", 18),
    ('printf("%d\\n", 5L)', "printf '%d' needs an integer of 32 bits (use %l...), not i64", 18),
    ('printf("%f\\n", 5)', "printf '%f' needs a floating-point argument, not i32", 18),
    ('printf("%ld\\n", 5)', "printf '%ld' needs an integer of 64 bits, not i32", 19),
    ('printf("%s\\n", name)', "printf '%s' takes a string literal or a local character array", 18),
    ('char b[4]; b[0] = 0; printf("%s\\n", &b[p[0]])', "polypy cannot tell which elements it points to", 39),
    ('printf(name)', "the format of device printf must be a string literal", 10),
    ('printf("%p\\n", p)', "printf conversion '%p' is not supported", 10),
    ('printf("%.*f\\n", 3, 4.0)', "a '*' precision is not supported", 10),
    ('printf("%*d\\n", 3.0, 4)', "printf '%*d' needs an int width, not f64", 19),
    ('printf("%zd\\n", 4)', "the length modifier 'z' is not supported", 10),
    ('printf("%d %d\\n", 4)', "printf format takes 2 arguments, not 1", 3),
    ('printf("%*d\\n", 4)', "printf format takes 2 arguments, not 1", 3),
    ('int r = printf("x")', "the value of device printf is not supported", 11),
])
def test_refused_printf_calls_are_located(tmp_path, capsys, call, message, col):
    from polypy.driver.cli import main
    src = tmp_path / "bad.cu"
    src.write_text('#include <cstdio>\n__global__ void k(int *p, const char *name) {\n  ' + call + ';\n}\n')
    assert main(["translate", str(src), "-o", str(tmp_path / "bad.cpp")]) == 1
    err = capsys.readouterr().err
    assert f"bad.cu:3:{col}: error: " in err and message in err, err
    assert "Traceback" not in err and not (tmp_path / "bad.cpp").exists()


NESTED = r"""
#include <cstdio>
#include <cassert>
__device__ float inner(const float *x, int i) {
  for (int k = 0; k < 2; k++) {
    assert(x[i] >= 0.0f);
  }
  return x[i] * 2.0f;
}
__device__ float outer(const float *x, int i) { float v = inner(x, i); return v + 1.0f; }
__global__ void k(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = outer(x, i);
    printf("i=%d\n", i);
    y[i] = v;
  }
}
"""


@pytest.mark.parametrize("backend", ["emulate", "llvm"])
def test_assert_in_a_device_function_stops_the_thread(tmp_path, capfd, backend):
    (tmp_path / "d.cu").write_text(NESTED)
    mod = polypy.compile(str(tmp_path / "d.cu"))
    kernel = mod.k.emulate if backend == "emulate" else mod.k
    x = np.array([1.0, -1.0, 3.0], dtype=np.float32)
    y = np.zeros(3, dtype=np.float32)
    with pytest.raises(DeviceAssertError, match="x\\[i\\] >= 0.0f"):
        kernel[1, 4](x, y, 3)
    out, err = capfd.readouterr()
    # The failing thread stops at the assert (once, not once per loop trip): it neither prints nor
    # stores. The emulator stops the launch at the failure (the GPU traps); the others may have run.
    assert err == f"{tmp_path / 'd.cu'}:6: float inner(const float *, int): block: [0,0,0], thread: [1,0,0] " \
                  "Assertion `x[i] >= 0.0f` failed.\n"
    assert "i=1" not in out and y[1] == 0.0
    if backend == "llvm":
        assert sorted(out.splitlines()) == ["i=0", "i=2"]
        np.testing.assert_array_equal(y, [3.0, 0.0, 7.0])
    x[1] = 2.0
    kernel[1, 4](x, y, 3)
    np.testing.assert_array_equal(y, [3.0, 5.0, 7.0])


BARRIER = r"""
#include <cstdio>
#include <cassert>
__global__ void rot(const float *x, float *y) {
  __shared__ float s[8];
  int t = threadIdx.x;
  assert(x[blockIdx.x * 8 + t] >= 0.0f);
  float v = x[blockIdx.x * 8 + t];
  s[t] = v;
  __syncthreads();
  y[blockIdx.x * 8 + t] = s[(t + 1) % 8] + v;
  if (t == 0) printf("block %d done\n", blockIdx.x);
}
"""


@pytest.mark.parametrize("backend", ["emulate", "llvm"])
def test_assert_before_a_barrier(tmp_path, capfd, backend):
    # A failed assert stops its thread; the barrier after it stays where every thread reaches it
    # (the rest of the kernel runs under the thread's flag), so the kernel is not refused.
    (tmp_path / "b.cu").write_text(BARRIER)
    mod = polypy.compile(str(tmp_path / "b.cu"))
    kernel = mod.rot.emulate if backend == "emulate" else mod.rot
    x = np.arange(16, dtype=np.float32)
    y = np.zeros(16, dtype=np.float32)
    kernel[2, 8](x, y)
    np.testing.assert_array_equal(y, x.reshape(2, 8)[:, [1, 2, 3, 4, 5, 6, 7, 0]].ravel() + x)
    assert sorted(capfd.readouterr().out.splitlines()) == ["block 0 done", "block 1 done"]
    x[11] = -1.0
    y[:] = 0.0
    with pytest.raises(DeviceAssertError):
        kernel[2, 8](x, y)
    err = capfd.readouterr().err
    assert err == f"{tmp_path / 'b.cu'}:7: void rot(const float *, float *): block: [1,0,0], thread: [3,0,0] " \
                  "Assertion `x[blockIdx.x * 8 + t] >= 0.0f` failed.\n"
    assert y[11] == 0.0  # the failing thread stored nothing after its assert


def test_ir_text_round_trip():
    text = ('kernel k(x: i32*) {\n  print "a%d %%\\n\\"q\\"", x[0]\n'
            '  assert.fail "x < 1" at "f.cu":3 in "void k(int *)", blockIdx.x, blockIdx.y, blockIdx.z, '
            'threadIdx.x, threadIdx.y, threadIdx.z\n}\n')
    module = parse_module(text)
    assert print_module(module) == text
    stmt = module.kernels[0].body[0]
    assert stmt.format == 'a%d %%\n"q"' and len(stmt.args) == 1


def test_verifier_checks_print_arguments():
    from polypy.errors import InternalError
    from polypy.ir.verifier import verify_module
    bad = parse_module('kernel k(x: i32*) {\n  print "%f %d", x[0], x[1]\n}\n')
    with pytest.raises((InternalError, UserError), match="argument of %f has type i32, expected f64"):
        verify_module(bad)


PROGRAM = r"""
#include <cstdio>
#include <cassert>
__global__ void show(const int *x, float f, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) printf("[%s] t=%03d x=%-4d|%5.2f|%e|%x|%c|%ld%%\n", "id", t, x[t], f * t, (double)x[t], x[t], 'A' + t,
                    (long)t * 100000000000L);
}
__global__ void check(const int *x, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) {
    assert(x[t] < 8);
  }
}
int main() {
  int h[5] = {0, 1, 2, 3, 4};
  int *d;
  cudaMalloc(&d, sizeof h);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  show<<<2, 4>>>(d, 1.5f, 5);
  printf("sync %d\n", (int)cudaDeviceSynchronize());
  check<<<2, 4>>>(d, 5);
  printf("ok %d\n", (int)cudaDeviceSynchronize());
  h[3] = 9;
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  check<<<2, 4>>>(d, 5);
  printf("assert %d\n", (int)cudaDeviceSynchronize());
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: whole programs cannot be compiled")
def test_whole_program_prints_and_asserts(tmp_path):
    src = tmp_path / "p.cu"
    src.write_text(PROGRAM)
    out = tmp_path / "p.cpp"
    import sys
    subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o", str(out)],
                   check=True, cwd=tmp_path)
    build = subprocess.run(["g++", "-O2", "-fopenmp", "-Wall", str(out), "-o", str(tmp_path / "p"), "-lm"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0 and "warning" not in build.stderr, build.stderr
    run = subprocess.run([str(tmp_path / "p")], capture_output=True, text=True, cwd=tmp_path)
    lines = run.stdout.splitlines()
    assert sorted(lines[:5]) == EXPECTED_SHOW
    assert lines[5:] == ["sync 0", "ok 0", "assert 710"]
    assert run.stderr.strip() == \
        f"{src}:12: void check(const int *, int): block: [0,0,0], thread: [3,0,0] Assertion `x[t] < 8` failed."


@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                    reason="no C++ compiler: polypy run cannot build the host program")
def test_emulated_whole_program_prints_and_asserts(tmp_path):
    import sys
    src = tmp_path / "p.cu"
    src.write_text(PROGRAM)
    run = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", "--emulate", str(src)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert sorted(lines[:5]) == EXPECTED_SHOW
    assert lines[5:] == ["sync 0", "ok 0", "assert 710"]  # the failed assert is the launch's cudaErrorAssert
    assert run.stderr.strip() == \
        f"{src}:12: void check(const int *, int): block: [0,0,0], thread: [3,0,0] Assertion `x[t] < 8` failed."


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed: the C kernel file cannot be compiled")
def test_c_kernel_file_sets_its_assert_flag(tmp_path):
    from polypy.driver.cli import main
    (tmp_path / "k.cu").write_text(KERNELS)
    assert main(["translate", str(tmp_path / "k.cu"), "--emit", "c", "-o", str(tmp_path / "k.c")]) == 0
    (tmp_path / "main.c").write_text(
        '#include "k.c"\n'
        "int main(void) {\n"
        "  int x[8] = {0, 1, 2, 3, 4, 5, 6, 7};\n"
        "  show_launch(1, 1, 1, 4, 1, 1, 0, x, 1.5f, 3);\n"
        "  check_launch(2, 1, 1, 4, 1, 1, 0, x, 8);\n"
        '  printf("flag %d\\n", polypy_device_assert_failed);\n'
        "  x[6] = 100;\n"
        "  check_launch(2, 1, 1, 4, 1, 1, 0, x, 8);\n"
        '  printf("flag %d\\n", polypy_device_assert_failed);\n'
        "  return 0;\n"
        "}\n")
    build = subprocess.run(["gcc", "-O2", "-fopenmp", "-Wall", "main.c", "-o", "main", "-lm"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0 and "warning" not in build.stderr, build.stderr
    run = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True, cwd=tmp_path)
    lines = run.stdout.splitlines()
    assert sorted(lines[:3]) == EXPECTED_SHOW[:3] and lines[3:] == ["flag 0", "flag 1"]
    assert run.stderr == f"{tmp_path / 'k.cu'}:12: void check(const int *, int): block: [1,0,0], thread: [2,0,0] " \
                         "Assertion `x[t] < 8` failed.\n"


C_KERNEL = r"""
#include <stdio.h>
#include <assert.h>
__global__ void k(const int *x, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) {
    assert(x[t] >= 0);
    printf("t=%d x=%d\n", t, x[t]);
  }
}
"""


@pytest.mark.parametrize("backend", ["emulate", "llvm"])
def test_c_source_printf_and_assert(tmp_path, capfd, backend):
    # In C, glibc's assert is a statement expression; the bundled header's is a conditional.
    (tmp_path / "k.c").write_text(C_KERNEL)
    mod = polypy.compile(str(tmp_path / "k.c"))
    kernel = mod.k.emulate if backend == "emulate" else mod.k
    x = np.arange(4, dtype=np.int32)
    kernel[1, 4](x, 4)
    assert sorted(capfd.readouterr().out.splitlines()) == [f"t={t} x={t}" for t in range(4)]
    x[2] = -5
    with pytest.raises(DeviceAssertError, match="Assertion `x\\[t\\] >= 0` failed"):
        kernel[1, 4](x, 4)
    out, err = capfd.readouterr()
    assert "t=2 x=-5" not in out
    assert err.endswith("block: [0,0,0], thread: [2,0,0] Assertion `x[t] >= 0` failed.\n")
