"""The vector forms of the GPU's float -> integer conversion (the prelude's ``polypy_cvtv_*``).

In ``omp simd`` loops the C backend writes ``polypy_cvtv_T_F`` for a float -> integer conversion
it cannot prove exact: a branch-free form GCC vectorizes (masked moves and conversions), which
must give PTX's ``cvt.rzi`` values bit for bit: truncation toward zero, NaN -> 0, the type's
bound out of range. These tests run every vector form (8 integer types x 2 float types) in a
vectorized loop over the edges of each type's range and random bit patterns, against NumPy, next
to the scalar form; and a kernel whose thread loop is vectorized through C, the emulator and LLVM.
(tests/test_exact_conversions.py has the scalar forms and the conversions proven exact.)"""
from __future__ import annotations

import math
import pathlib
import re
import subprocess

import numpy as np

import polypy
from c_support import copy_args, need_compiler, run_c, run_emulated
from codegen.c import find_compiler
from codegen.c.templates import prelude
from polypy.driver.cli import main

INTS = {"i8": ("signed char", np.int8), "u8": ("unsigned char", np.uint8), "i16": ("short", np.int16),
        "u16": ("unsigned short", np.uint16), "i32": ("int", np.int32), "u32": ("unsigned int", np.uint32),
        "i64": ("long long", np.int64), "u64": ("unsigned long long", np.uint64)}
FLOATS = {"f32": ("float", np.float32, np.uint32), "f64": ("double", np.float64, np.uint64)}


def _gpu(values: np.ndarray, t) -> np.ndarray:
    """PTX's cvt.rzi: truncation, NaN -> 0, the bound out of range (exact in Python's integers)."""
    info = np.iinfo(t)
    out = []
    with np.errstate(invalid="ignore"):  # signalling NaNs among the random patterns
        wide = values.astype(np.float64)
    for v in wide:
        if math.isnan(v):
            out.append(0)
        elif v <= info.min:
            out.append(info.min)
        elif v >= info.max + 1:
            out.append(info.max)
        else:
            out.append(int(v))
    return np.array(out, t)


def _inputs(ftype) -> np.ndarray:
    """Every type's bounds and their neighbours (one ulp and one half either side, the nearest float
    below the type's largest value + 1), specials, and random bit patterns (half of them with
    exponents in the integer types' ranges)."""
    edges = [0.0, -0.0, 0.5, -0.5, 0.9999, -0.9999, 1.0, -1.0, 1.5, -1.5, 1e-40, -1e-40, 1e30, -1e30,
             math.inf, -math.inf, math.nan, -math.nan]
    for _, t in INTS.values():
        info = np.iinfo(t)
        for b in (float(info.min), float(info.max) + 1.0):
            for d in (-1.0, -0.5, 0.0, 0.5, 1.0):
                edges.append(b + d)
            edges += [float(np.nextafter(ftype(b), ftype(-math.inf))), float(np.nextafter(ftype(b), ftype(math.inf)))]
        edges.append(float(info.max))
    x = np.array(edges, ftype)
    rng = np.random.default_rng(37)
    width = np.dtype(ftype).itemsize * 8
    bits_type = np.uint32 if width == 32 else np.uint64
    raw = rng.integers(0, 2 ** width, 3000, dtype=np.uint64 if width == 64 else np.int64).astype(bits_type)
    mant = 23 if width == 32 else 52
    bias = 127 if width == 32 else 1023
    expo = rng.integers(bias - 2, bias + 66, 3000).astype(bits_type)
    near = (raw & bits_type((1 << (width - 1)) | ((1 << mant) - 1))) | (expo << bits_type(mant))
    return np.concatenate([x, raw.view(ftype), near.view(ftype)])


def _harness(n: int) -> str:
    """A C file of the prelude and, for each (T, F), an `omp simd` loop of polypy_cvtv_T_F and a
    plain loop of the scalar polypy_cvt_T_F, reading the inputs and writing the results raw."""
    lines = [prelude(), "#include <stdio.h>", f"#define N {n}"]
    calls = []
    for fn, (fc, _, _) in FLOATS.items():
        lines.append(f"static {fc} x_{fn}[N];")
        for tn, (tc, _) in INTS.items():
            name = f"{tn}_{fn}"
            lines.append(f"static {tc} v_{name}[N], s_{name}[N];")
            lines.append(f"static __attribute__((noinline)) void vec_{name}(void) {{\n#pragma omp simd\n"
                         f"  for (int i = 0; i < N; i++) v_{name}[i] = polypy_cvtv_{name}(x_{fn}[i]); }}")
            lines.append(f"static __attribute__((noinline)) void scalar_{name}(void) {{\n"
                         f"  for (int i = 0; i < N; i++) s_{name}[i] = polypy_cvt_{name}(x_{fn}[i]); }}")
            calls.append(f"vec_{name}(); scalar_{name}(); fwrite(v_{name}, sizeof v_{name}, 1, stdout); "
                         f"fwrite(s_{name}, sizeof s_{name}, 1, stdout);")
    reads = [f"if (fread(x_{fn}, sizeof x_{fn}, 1, stdin) != 1) return 1;" for fn in FLOATS]
    lines.append("int main(void) {\n  " + "\n  ".join(reads + calls) + "\n  return 0;\n}")
    return "\n".join(lines)


def test_vector_forms_give_the_gpu_values_at_the_edges(tmp_path: pathlib.Path) -> None:
    need_compiler()
    inputs = {fn: _inputs(ft) for fn, (_, ft, _) in FLOATS.items()}
    n = min(len(v) for v in inputs.values())
    src = tmp_path / "cvt.c"
    src.write_text(_harness(n))
    exe = tmp_path / "cvt"
    # The backend's flags (codegen/c/build.py): the loops vectorize with the machine's widest vectors.
    compiler = find_compiler(False)
    built = subprocess.run([compiler, "-O3", "-march=native", "-fopenmp-simd", "-ffp-contract=off",
                            "-fopt-info-vec-optimized", str(src), "-o", str(exe), "-lm"],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    data = b"".join(inputs[fn][:n].tobytes() for fn in FLOATS)
    ran = subprocess.run([str(exe)], input=data, capture_output=True, timeout=300)
    assert ran.returncode == 0
    out, at = ran.stdout, 0
    for fn in FLOATS:
        x = inputs[fn][:n]
        for tn, (_, t) in INTS.items():
            size = n * np.dtype(t).itemsize
            vec = np.frombuffer(out[at:at + size], t)
            scalar = np.frombuffer(out[at + size:at + 2 * size], t)
            at += 2 * size
            want = _gpu(x, t)
            bad = np.nonzero(vec != want)[0]
            assert bad.size == 0, f"polypy_cvtv_{tn}_{fn}({x[bad[0]]!r}) = {vec[bad[0]]}, GPU: {want[bad[0]]}"
            np.testing.assert_array_equal(scalar, want, err_msg=f"polypy_cvt_{tn}_{fn}")
    assert at == len(out)
    # GCC says which loops it vectorized (clang ignores the option): every vector form's loop, the
    # point of the forms.
    vectorized = set(re.findall(r"cvt\.c:(\d+):\d+: optimized: loop vectorized", built.stderr))
    if vectorized:
        text = src.read_text().splitlines()
        simd_loops = {str(i + 2) for i, line in enumerate(text) if line == "#pragma omp simd"}
        assert len(simd_loops) == 16 and simd_loops <= vectorized, sorted(simd_loops - vectorized)


KERNEL = r"""
__global__ void conv(const float* x, const double* d, int* a, unsigned int* b, long long* c, unsigned char* e,
                     int* f, unsigned long long* g, short* h, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    a[i] = (int)x[i]; b[i] = (unsigned int)x[i]; c[i] = (long long)d[i]; e[i] = (unsigned char)x[i];
    f[i] = (int)d[i]; g[i] = (unsigned long long)d[i]; h[i] = (short)d[i];
  }
}
"""

_KERNEL_OUT = {"a": ("x", np.int32), "b": ("x", np.uint32), "c": ("d", np.int64), "e": ("x", np.uint8),
               "f": ("d", np.int32), "g": ("d", np.uint64), "h": ("d", np.int16)}


def test_a_vectorized_thread_loop_converts_as_the_gpu(tmp_path: pathlib.Path) -> None:
    need_compiler()
    path = tmp_path / "conv.cu"
    path.write_text(KERNEL)
    x, d = _inputs(np.float32), _inputs(np.float64)
    n = 1024  # the edges and the start of the random patterns
    x, d = x[:n], d[:n]
    args = {"x": x, "d": d, **{k: np.zeros(n, t) for k, (_, t) in _KERNEL_OUT.items()}, "n": np.int32(n)}
    kernel = polypy.load(str(path)).kernel("conv")
    llvm = copy_args(args)
    polypy.compile(str(path)).conv[n // 128, 128](*llvm.values())
    src = {"x": x, "d": d}
    for way, got in (("c", run_c(kernel, n // 128, 128, args)), ("emulator", run_emulated(kernel, n // 128, 128, args)),
                     ("llvm", llvm)):
        for name, (operand, t) in _KERNEL_OUT.items():
            np.testing.assert_array_equal(got[name], _gpu(src[operand], t), err_msg=f"{way}: {name}")


def test_the_thread_loop_calls_the_vector_forms(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "conv.cu"
    path.write_text(KERNEL)
    out = tmp_path / "conv.c"
    assert main(["translate", str(path), "-o", str(out)]) == 0
    text = out.read_text()
    for name in ("i32_f32", "u32_f32", "i64_f64", "u8_f32", "i32_f64", "u64_f64", "i16_f64"):
        assert re.search(rf"= polypy_cvtv_{name}\(", text), name
    # The forms test NaN and too-large operands with one comparison (no `x == x` NaN test).
    forms = text[text.index("#define POLYPY_CVTV_CLAMP"):text.index("POLYPY_CVTS(float, f32)")]
    assert "x == x" not in forms and forms.count("x < (F)(UPPER) ? x : (F)0;") == 2


def test_llvm_vectorizes_the_saturating_conversions(tmp_path: pathlib.Path) -> None:
    # The LLVM backend writes the conversion as selects around an fptosi/fptoui of an operand in
    # range (codegen.llvm.expressions.saturating): LLVM's vectorizer makes vector conversions of
    # them. llvm.fptosi.sat, which it used before, is converted one lane at a time on x86.
    from codegen.llvm import emit_llvm_ir
    from codegen.llvm.target import optimized_ir
    from polypy.driver.pipelines import lower_and_emit
    path = tmp_path / "conv.cu"
    path.write_text(KERNEL)
    text = optimized_ir(emit_llvm_ir(lower_and_emit(polypy.load(str(path)), "cpu"), optimize=False))
    assert ".sat." not in text
    vector = set(re.findall(r"(fpto[su]i) <\d+ x (float|double)> %[\w.]+ to <\d+ x (i\d+)>", text))
    assert {("fptosi", "float", "i32"), ("fptoui", "float", "i32"), ("fptosi", "double", "i64"),
            ("fptoui", "float", "i8"), ("fptosi", "double", "i32"), ("fptoui", "double", "i64"),
            ("fptosi", "double", "i16")} <= vector, vector


ROWS = r"""
__global__ void rows(const double* d, long long* o, unsigned char* p, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = 0; k < m; ++k) {  // each thread walks its own row: the loop stays inside, scalar
    o[i * m + k] = (long long)(d[i * m + k] * 2.0);
    p[i * m + k] = (unsigned char)d[i * m + k];
  }
}
"""


def test_llvm_keeps_the_intrinsic_in_scalar_loops(tmp_path: pathlib.Path) -> None:
    # A serial loop inside the thread loop is not vectorized: there llvm.fptosi.sat's own x86 code
    # (clamp, convert, one NaN test) is the shorter chain, and the backend keeps it; the values are
    # the GPU's either way.
    from codegen.llvm import emit_llvm_ir
    from polypy.driver.pipelines import lower_and_emit
    path = tmp_path / "rows.cu"
    path.write_text(ROWS)
    text = emit_llvm_ir(lower_and_emit(polypy.load(str(path)), "cpu"), optimize=False)
    worker = text[text.index('define i32 @"rows_worker"'):]
    assert "llvm.fptosi.sat.i64.f64" in worker and "llvm.fptoui.sat.i8.f64" in worker
    d = _inputs(np.float64)[:512]
    m = 16
    args = {"d": d, "o": np.zeros(d.size, np.int64), "p": np.zeros(d.size, np.uint8), "m": np.int32(m)}
    llvm = copy_args(args)
    polypy.compile(str(path)).rows[d.size // m // 8, 8](*llvm.values())
    emulated = run_emulated(polypy.load(str(path)).kernel("rows"), d.size // m // 8, 8, args)
    with np.errstate(all="ignore"):
        want_o = _gpu(d * 2.0, np.int64)
    for way, got in (("llvm", llvm), ("emulator", emulated)):
        np.testing.assert_array_equal(got["o"], want_o, err_msg=way)
        np.testing.assert_array_equal(got["p"], _gpu(d, np.uint8), err_msg=way)
