"""The C/C++ backend: rendering, exact C semantics of every IR operation (checked against the
emulator), math functions by precision, atomics, bounds checks, and ``polypy translate``."""
from __future__ import annotations

import math
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import polypy

from c_support import assert_same_as_emulator, copy_args, gpu_kernel, need_compiler, run_c, run_emulated
from codegen.c import emit_kernel, find_compiler
from polypy.driver.library import emit_kernels
from codegen.c.kernel import Options
from codegen.c.render import MATH, literal
from polypy.driver.cli import main
from polypy.driver.pipelines import to_cpu
from polypy.errors import InternalError
from polypy.ir import F32, F64, I8, I32, I64, U8, U32, U64, nodes as n
from polypy.ir.mathfns import MATH_FUNCTIONS

ROOT = pathlib.Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"


# --------------------------------------------------------------------------- rendering


@pytest.mark.parametrize("const, text", [
    (n.Const(5, I32), "5"), (n.Const(-7, I32), "-7"), (n.Const(-(1 << 31), I32), "(-2147483647 - 1)"),
    (n.Const(5, U32), "5u"), (n.Const(-1, I64), "-1LL"), (n.Const(-(1 << 63), I64), "(-9223372036854775807LL - 1LL)"),
    (n.Const(2**64 - 1, U64), "18446744073709551615ULL"), (n.Const(200, U8), "200"), (n.Const(-3, I8), "-3"),
    (n.Const(0.1, F32), "0.1f"), (n.Const(1e-10, F64), "1e-10"), (n.Const(float("nan"), F32), "NAN"),
    (n.Const(float("-inf"), F64), "-(double)INFINITY"), (n.Const(True, n.BOOL), "true"),
])
def test_literals(const: n.Const, text: str) -> None:
    assert literal(const)[0] == text


def _c_of(body: str, params: str = "x: u32*, n: i32") -> str:
    kernel = to_cpu(gpu_kernel(f"kernel k({params}) {{\n{body}\n}}"), optimize=False)
    return emit_kernel(kernel, Options()).text


def test_expressions_are_parenthesized_like_c() -> None:
    text = _c_of("x[threadIdx.x] = (threadIdx.x & 3u) == 0u ? (threadIdx.x + 1u) << 2u : threadIdx.x ^ 5u | 1u")
    assert "(tx & 3u) == 0u ? (tx + 1u) << 2u : (tx ^ 5u) | 1u" in text
    text = _c_of("if (n > 0 && (n < 5 || n == 7)) {\n  x[0] = (u32)(-n)\n}")
    assert "if (n > 0 && (n < 5 || n == 7)) {" in text and "x[0] = (unsigned int)-n;" in text


def test_narrow_arithmetic_is_cast_back_and_done_unsigned() -> None:
    text = _c_of("a[0] = a[0] * a[1]", params="a: u16*")
    assert "(unsigned short)((unsigned int)a[0] * a[1])" in text


def test_every_math_function_has_a_c_spelling() -> None:
    for name in MATH_FUNCTIONS:
        assert name in MATH or name in ("min", "max", "abs", "bitcast"), name


def test_source_names_and_lines_are_kept() -> None:
    text = _c_of("var total: u32 = x[threadIdx.x] * 2u\nx[threadIdx.x] = total")
    assert "unsigned int total = x[tx] * 2u;" in text
    assert "// <ir>:2 (threads)" in text and "static void k_block(" in text
    assert "POLYPY_EXPORT void k_launch(unsigned int grid_x" in text


def test_names_that_clash_with_c_are_renamed() -> None:
    text = _c_of("var sqrtf: f32 = sqrt((f32)threadIdx.x)\nx[threadIdx.x] = (u32)sqrtf")
    assert "float sqrtf_ = sqrtf((float)tx);" in text


def test_cpu_form_is_required() -> None:
    with pytest.raises(InternalError, match="CPU-form"):
        emit_kernel(gpu_kernel("kernel k(x: f32*) {\n  x[0] = 1.0f\n}"), Options())


def test_launcher_signatures() -> None:
    kernel = gpu_kernel("""kernel k(p_a: f32, p_n: i32, x: f32* restrict) {
      source p: "struct P" (.a = p_a, .n = p_n)
      x[threadIdx.x] = p_a
    }""")
    cpu = to_cpu(kernel)
    library = emit_kernel(cpu, Options(cpp=True)).prototype
    assert library == ("POLYPY_EXPORT void k_launch(dim3 grid, dim3 block, size_t shmem_bytes, float p_a, int p_n, "
                       "float* POLYPY_RESTRICT x);")
    program = emit_kernel(cpu, Options(cpp=True, program=True))
    assert program.prototype == ("static inline void k_launch(dim3 grid, dim3 block, size_t shmem_bytes, struct P p, "
                                 "float* POLYPY_RESTRICT x);")
    assert "k_block(blockIdx, blockDim, gridDim, shmem_bytes, p.a, p.n, x);" in program.text


def test_threads_option_sets_the_openmp_thread_count() -> None:
    cpu = to_cpu(gpu_kernel("kernel k(x: f32*) {\n  x[threadIdx.x] = 1.0f\n}"))
    assert "#pragma omp parallel num_threads(3)\n" in emit_kernels([cpu], threads=3)
    # A grid of one block runs on the calling thread: no team is woken for it; nor for a small
    # grid of a kernel without loops of its own.
    code = emit_kernels([cpu])
    assert "#pragma omp parallel\n" in code
    alone = re.search(r"const bool polypy_alone = \(unsigned long long\)gridDim.x \* gridDim.y \* gridDim.z <= 1ull \|\| "
                      r"\(unsigned long long\)gridDim.x \* gridDim.y \* gridDim.z \* blockDim.x \* blockDim.y \* blockDim.z "
                      r"\* (\d+)ull < POLYPY_RT_SMALL_GRID_WORK \|\| POLYPY_WORKERS\(\) <= 1;", code)
    assert alone is not None and int(alone.group(1)) >= 1
    assert "    if (polypy_alone) {" in code


# Counts the parallel regions a program starts: GOMP_parallel (what GCC makes of `omp parallel`)
# defined in the program itself, ahead of libgomp's, which it then calls.
_COUNT_REGIONS = r"""
#include <dlfcn.h>
#include <stdio.h>
static int regions;
void GOMP_parallel(void (*fn)(void*), void* data, unsigned threads, unsigned flags) {
  void (*real)(void (*)(void*), void*, unsigned, unsigned) =
      (void (*)(void (*)(void*), void*, unsigned, unsigned))dlsym(RTLD_NEXT, "GOMP_parallel");
  regions++;
  real(fn, data, threads, flags);
}
int main(void) {
  static float x[64 * 256];
  for (int i = 0; i < 64 * 256; i++) x[i] = (float)i;
  for (int launch = 0; launch < 3; launch++) k_launch(64, 1, 1, 256, 1, 1, 0, x, 64 * 256);
  printf("%d %g %g\n", regions, x[1], x[64 * 256 - 1]);
  return 0;
}
"""


def test_a_team_of_one_thread_is_not_woken(tmp_path: pathlib.Path) -> None:
    """With one OpenMP thread (OMP_NUM_THREADS=1, torch.set_num_threads(1)) a launch makes no
    parallel region (libgomp would make a team of one for it, a quarter of a microsecond each
    launch); with two, each launch of a grid too large to run alone makes one."""
    import os
    import shutil

    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not on this machine (the count replaces libgomp's GOMP_parallel)")
    cpu = to_cpu(gpu_kernel("kernel k(x: f32*, n: i32) {\n  var i: u32 = blockIdx.x * blockDim.x + threadIdx.x\n"
                            "  x[i] = x[i] * 2.0f\n}"))
    source = tmp_path / "regions.c"
    source.write_text(emit_kernels([cpu]) + _COUNT_REGIONS)
    exe = tmp_path / "regions"
    subprocess.run([gcc, "-O2", "-fopenmp", "-DPOLYPY_RT_SMALL_GRID_WORK=1", str(source), "-o", str(exe), "-ldl", "-lm"],
                   check=True, capture_output=True, text=True)
    counts = {}
    for threads in ("1", "2"):
        done = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=60,
                              env={**os.environ, "OMP_NUM_THREADS": threads})
        regions, first, last = done.stdout.split()
        assert float(first) == 8.0 and float(last) == 8.0 * (64 * 256 - 1)
        counts[threads] = int(regions)
    assert counts == {"1": 0, "2": 3}


# --------------------------------------------------------------------------- C semantics vs the emulator

_INT_OPS = ("add", "sub", "mul", "div", "rem", "band", "bor", "bxor", "lt", "le", "gt", "ge", "eq", "ne")
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/", "rem": "%", "band": "&", "bor": "|", "bxor": "^",
           "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _operator_kernel(t: str, ops: tuple[str, ...], shifts: bool) -> str:
    lines = ["  var i: u32 = blockIdx.x * blockDim.x + threadIdx.x", f"  var a: {t} = x[i]", f"  var b: {t} = y[i]"]
    slot = 0
    for op in ops:
        expr = f"a {_SYMBOL[op]} b"
        if op in ("lt", "le", "gt", "ge", "eq", "ne"):
            expr = f"({t})({expr})"
        lines.append(f"  out[i * 32u + {slot}u] = {expr}")
        slot += 1
    if shifts:
        for k in (0, 1, 3, 7):
            lines.append(f"  out[i * 32u + {slot}u] = a << {k}u")
            lines.append(f"  out[i * 32u + {slot + 1}u] = a >> {k}u")
            slot += 2
    lines.append(f"  out[i * 32u + {slot}u] = -a")
    lines.append(f"  out[i * 32u + {slot + 1}u] = ~a" if not t.startswith("f") else f"  out[i * 32u + {slot + 1}u] = a")
    lines.append(f"  out[i * 32u + {slot + 2}u] = (({t})(a > b)) + ({t})(f64)a")
    return f"kernel ops_{t}(x: const {t}*, y: const {t}*, out: {t}*) {{\n" + "\n".join(lines) + "\n}"


@pytest.mark.parametrize("t", ["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64"])
def test_operators_match_the_emulator(t: str) -> None:
    """Every arithmetic, bitwise, comparison and conversion operator of each type, bit for bit
    (signed values kept small: signed overflow is undefined in C and CUDA alike)."""
    is_float = t.startswith("f")
    ops = tuple(op for op in _INT_OPS if not (is_float and op in ("rem", "band", "bor", "bxor")))
    kernel = gpu_kernel(_operator_kernel(t, ops, shifts=not is_float))
    dtype = np.dtype({"i8": "int8", "u8": "uint8", "i16": "int16", "u16": "uint16", "i32": "int32",
                      "u32": "uint32", "i64": "int64", "u64": "uint64", "f32": "float32", "f64": "float64"}[t])
    rng = np.random.default_rng(5)
    count = 64
    if is_float:
        x = rng.standard_normal(count).astype(dtype) * 10
        y = rng.standard_normal(count).astype(dtype) * 10
    elif dtype.kind == "u":
        info = np.iinfo(dtype)
        x = rng.integers(0, info.max, count, dtype=dtype, endpoint=True)
        y = rng.integers(1, info.max, count, dtype=dtype, endpoint=True)
    else:
        limit = 100 if dtype.itemsize <= 2 else 40000
        x = rng.integers(-limit, limit, count).astype(dtype)
        y = rng.integers(1, limit, count).astype(dtype) * rng.choice(np.array([-1, 1], dtype=dtype), count)
    args = {"x": x, "y": y, "out": np.zeros(count * 32, dtype)}
    assert_same_as_emulator(kernel, 2, 32, args)


_DOMAIN = {  # argument ranges where each function is defined (and not wildly ill-conditioned)
    "log": (0.1, 10), "log2": (0.1, 10), "log10": (0.1, 10), "log1p": (-0.5, 10), "sqrt": (0, 10), "rsqrt": (0.1, 10),
    "asin": (-0.99, 0.99), "acos": (-0.99, 0.99), "acosh": (1.1, 10), "atanh": (-0.9, 0.9), "exp": (-5, 5),
    "exp2": (-5, 5), "exp10": (-3, 3), "expm1": (-5, 5), "sinh": (-4, 4), "cosh": (-4, 4), "pow": (0.1, 4),
}


@pytest.mark.parametrize("real", ["f32", "f64"])
def test_math_functions_match_the_emulator(real: str) -> None:
    """Each math function in its own precision (``expf`` for f32...), within a few ulps of the
    correctly rounded result the emulator computes."""
    lines = ["  var i: u32 = threadIdx.x"]
    slot = 0
    names = sorted(MATH_FUNCTIONS)
    for name in names:
        fn = MATH_FUNCTIONS[name]
        if fn.domain != "float":
            continue
        lo, hi = _DOMAIN.get(name, (-3, 3))
        arg = f"x[i] * ({hi - lo:.1f}{'f' if real == 'f32' else ''}) + ({lo:.1f}{'f' if real == 'f32' else ''})"
        args = ", ".join([arg] + ["y[i] + 0.5" + ("f" if real == "f32" else "")] * (fn.arity - 1))
        value = f"{name}({args})"
        if fn.returns_bool:
            value = f"({real})({value})"
        lines.append(f"  out[i * 64u + {slot}u] = {value}")
        slot += 1
    kernel = gpu_kernel(f"kernel math(x: const {real}*, y: const {real}*, out: {real}*) {{\n" + "\n".join(lines) + "\n}")
    dtype = np.float32 if real == "f32" else np.float64
    rng = np.random.default_rng(9)
    args = {"x": rng.uniform(0, 1, 64).astype(dtype), "y": rng.uniform(0, 1, 64).astype(dtype),
            "out": np.zeros(64 * 64, dtype)}
    tol = dict(rtol=2e-6, atol=1e-6) if real == "f32" else dict(rtol=1e-13, atol=1e-14)
    assert_same_as_emulator(kernel, 1, 64, args, **tol)


@pytest.mark.parametrize("t", ["i32", "u32", "i64", "u64", "f32", "f64"])
def test_global_atomics_match_the_emulator(t: str) -> None:
    """Order-independent atomics on global memory from all blocks at once (real CPU atomics)."""
    is_float = t.startswith("f")
    ops = ["add", "min", "max"] + ([] if is_float else ["and", "or", "xor"])
    body = ["  var i: u32 = blockIdx.x * blockDim.x + threadIdx.x", f"  var v: {t} = x[i]"]
    for k, op in enumerate(ops):
        body.append(f"  atomic.{op} acc[{k}u + i % 2u * 8u], v")
    if not is_float:
        body.append(f"  var old: {t}\n  old = atomic.add acc[16], ({t})1\n  out[i] = old")
        body.append("  atomic.inc cnt[i % 3u], 4294967295u" if t == "u32" else "")
    kernel = gpu_kernel(f"kernel at(x: const {t}*, acc: {t}*, out: {t}*, cnt: u32*) {{\n" + "\n".join(body) + "\n}")
    dtype = np.dtype({"i32": "int32", "u32": "uint32", "i64": "int64", "u64": "uint64", "f32": "float32",
                      "f64": "float64"}[t])
    rng = np.random.default_rng(3)
    threads = 8 * 128
    x = (rng.integers(-50, 50, threads) if dtype.kind in "if" else rng.integers(0, 1 << 20, threads)).astype(dtype)
    args = {"x": x, "acc": np.zeros(24, dtype), "out": np.zeros(threads, dtype), "cnt": np.zeros(3, np.uint32)}
    args["acc"][[1, 9]] = 10**6  # min
    got = run_c(kernel, 8, 128, args)
    want = run_emulated(kernel, 8, 128, args)
    np.testing.assert_array_equal(got["acc"], want["acc"])  # integer-valued floats: exact in any order
    np.testing.assert_array_equal(got["cnt"], want["cnt"])
    if not is_float:
        assert sorted(got["out"].tolist()) == list(range(threads))  # each thread saw a distinct old value


def test_shared_memory_atomics_are_plain_updates_with_cuda_results() -> None:
    kernel = gpu_kernel("""kernel sh(x: const u32*, out: u32*) {
      shared h: u32[8]
      shared m: u32[4]
      if (threadIdx.x < 8u) {
        h[threadIdx.x] = 0u
      }
      if (threadIdx.x < 4u) {
        m[threadIdx.x] = 1000u
      }
      barrier
      var v: u32 = x[blockIdx.x * blockDim.x + threadIdx.x]
      var old: u32
      old = atomic.inc h[v % 8u], 5u
      atomic.dec m[0], 3u
      atomic.min m[1], v
      atomic.xor m[2], v
      var c: u32
      c = atomic.cas m[3], 1000u, v
      barrier
      if (threadIdx.x < 8u) {
        out[blockIdx.x * 12u + threadIdx.x] = h[threadIdx.x]
      }
      if (threadIdx.x < 4u) {
        out[blockIdx.x * 12u + 8u + threadIdx.x] = m[threadIdx.x]
      }
    }""")
    rng = np.random.default_rng(2)
    args = {"x": rng.integers(0, 1000, 3 * 64).astype(np.uint32), "out": np.zeros(36, np.uint32)}
    assert_same_as_emulator(kernel, 3, 64, args)  # thread order: the emulator's lane order


# --------------------------------------------------------------------------- bounds checks


def _run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


def test_bounds_checks_abort_with_the_access_and_location() -> None:
    """A kernel library built with check_bounds stops at the first out-of-bounds index."""
    need_compiler()
    result = _run_python("""
        import numpy as np, sys
        sys.path.insert(0, "tests")
        from c_support import gpu_kernel
        from polypy.driver.library import build_library
        from polypy.driver.pipelines import to_cpu
        k = gpu_kernel('''kernel saxpy(n: i32, a: f32, x: const f32*, y: f32*) {
          var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          if (i < n) {
            y[i] = a * x[i] + y[i]
          }
        }''')
        lib = build_library([to_cpu(k)], check_bounds=True)
        x = np.ones(100, np.float32)
        lib.launch("saxpy", 1, 128, {"n": 100, "a": 2.0, "x": x, "y": np.ones(100, np.float32)})
        print("in bounds ok", flush=True)
        lib.launch("saxpy", 1, 128, {"n": 120, "a": 2.0, "x": x, "y": np.ones(120, np.float32)})
        print("not reached")
    """)
    assert "in bounds ok" in result.stdout and "not reached" not in result.stdout
    assert result.returncode != 0
    assert "<ir>:4:16: error: out-of-bounds access x[100] (valid indices 0..99)" in result.stderr


def test_whole_program_bounds_checks(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    source = tmp_path / "oob.cu"
    source.write_text(textwrap.dedent("""\
        #include <cstdio>
        __global__ void shift(const int* in, int* out, int n)
        {
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            if (i < n) out[i] = in[i + 1];
        }
        int main()
        {
            int *a, *b;
            cudaMalloc(&a, 64 * sizeof(int));
            cudaMalloc(&b, 64 * sizeof(int));
            cudaMemset(a, 0, 64 * sizeof(int));
            shift<<<1, 64>>>(a, b, 64);
            printf("done\\n");
            return 0;
        }
        """))
    out = tmp_path / "oob.cpp"
    assert main(["translate", str(source), "--check-bounds", "-o", str(out)]) == 0
    exe = tmp_path / "oob"
    build = subprocess.run([find_compiler(cpp=True), "-O2", "-fopenmp", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "done" not in run.stdout
    assert f"{source}:5:25: error: out-of-bounds access in[64] (valid indices 0..63)" in run.stderr


# --------------------------------------------------------------------------- polypy translate


def test_translate_kernels_to_c_and_cpp(tmp_path: pathlib.Path) -> None:
    need_compiler()
    need_compiler(cpp=True)
    for emit, compiler in (("c", find_compiler(False)), ("cpp", find_compiler(True))):
        out = tmp_path / f"reduce.{emit}"
        assert main(["translate", str(SAMPLES / "reduce_sum.cu"), "--emit", emit, "-o", str(out)]) == 0
        text = out.read_text()
        assert "reduce_sum_launch(" in text and "#pragma omp for collapse(3) schedule(static)" in text
        result = subprocess.run([compiler, "-O2", "-fopenmp", "-Wall", "-c", str(out), "-o", str(tmp_path / "x.o")],
                                capture_output=True, text=True)
        assert result.returncode == 0 and "warning" not in result.stderr, result.stderr


def test_translate_report(tmp_path: pathlib.Path, capsys) -> None:
    assert main(["translate", str(SAMPLES / "matmul_tiled.cu"), "--report", "-o", str(tmp_path / "matmul.cpp")]) == 0
    err = capsys.readouterr().err
    assert "matmul_tiled.cu:28:9: barrier kept: RAW hazard on Bs" in err
    assert "matmul_tiled: 4 thread loop(s) over the threads of a block" in err
    assert "'acc' is live across thread loops: kept in per-thread buffer acc_buf" in err


def test_translate_errors_leave_no_output(tmp_path: pathlib.Path, capsys) -> None:
    out = tmp_path / "out.cpp"
    with pytest.raises(SystemExit) as stopped:  # a usage error (tests/test_input_hygiene.py), status 1 as every error
        main(["translate", str(SAMPLES / "saxpy.cu"), "--threads", "-2", "-o", str(out)])
    assert stopped.value.code == 1
    assert "argument --threads: must be a positive number" in capsys.readouterr().err and not out.exists()
    program = ROOT / "samples" / "programs" / "vecadd_saxpy.cu"
    assert main(["translate", str(program), "--emit", "c", "-o", str(out)]) == 1
    assert "use --emit cpp" in capsys.readouterr().err and not out.exists()
    bad = tmp_path / "divergent_shuffle.cu"
    bad.write_text(textwrap.dedent("""\
        __global__ void k(float* x, int n)
        {
            float v = x[threadIdx.x];
            for (int i = threadIdx.x; i < n; i += 7)
                v += __shfl_down_sync(0xffffffffu, v, 1);
            x[threadIdx.x] = v;
        }
        """))
    assert main(["translate", str(bad), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:4:5: error: warp operation inside a loop whose trip count depends on the thread" in err
    assert not out.exists() and not list(tmp_path.glob(".polypy-*"))


def test_translate_one_kernel_of_a_program(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "one.c"
    program = ROOT / "samples" / "programs" / "power_iteration.cu"
    assert main(["translate", str(program), "--kernel", "scale", "--emit", "c", "-o", str(out)]) == 0
    text = out.read_text()
    assert "scale_launch(" in text and "matvec_norm2" not in text and "int main" not in text
    assert "float p_factor, int p_n" in text  # a kernel library takes the struct member by member


def test_library_globals_are_visible_to_python() -> None:
    need_compiler()
    import polypy
    from polypy.driver.library import build_library

    module = polypy.load(SAMPLES / "constant_coeffs.cu")
    lib = build_library([to_cpu(k) for k in module.kernels], module.globals)
    taps = lib.global_array("taps")
    assert taps.dtype == np.float32 and math.isclose(float(taps.sum()), 1.0, rel_tol=1e-6)
    taps[:] = 0.0
    taps[0] = 2.0
    x = np.arange(10, dtype=np.float32)
    y = np.zeros(10, np.float32)
    lib.launch("constant_coeffs", 1, 32, {"x": x, "y": y, "n": 10})
    np.testing.assert_array_equal(y, 2 * x)


CONVERSIONS = r"""
__global__ void cvt(const float* x, const double* d, signed char* a, unsigned char* b, short* c, unsigned short* e,
                    int* f, unsigned* g, long long* h, unsigned long long* k, int* fd, unsigned long long* kd, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    a[i] = (signed char)v; b[i] = (unsigned char)v; c[i] = (short)v; e[i] = (unsigned short)v;
    f[i] = (int)v; g[i] = (unsigned)v; h[i] = (long long)v; k[i] = (unsigned long long)v;
    fd[i] = (int)d[i]; kd[i] = (unsigned long long)d[i];
  }
}
__global__ void cvt_serial(const float* x, const double* d, int* f, unsigned char* b, long long* h, int n, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    for (int j = 0; j < m; ++j) {  // a serial loop in the thread loop: the scalar form
      f[i * m + j] = (int)x[(i + j) % n];
      b[i * m + j] = (unsigned char)d[(i + j) % n];
      h[i * m + j] = (long long)d[(i + j) % n];
    }
  }
}
"""


def test_float_to_integer_conversions_saturate_as_the_gpu_does(tmp_path: pathlib.Path) -> None:
    # NaN -> 0 and out-of-range values -> the nearest bound (PTX's cvt.rzi), as the emulator and
    # the LLVM backend compute them; the C backend gave x86's 0x80000000 (NaN, 3e9 -> INT_MIN).
    need_compiler()
    path = tmp_path / "cvt.cu"
    path.write_text(CONVERSIONS)
    kernel = polypy.load(str(path)).kernel("cvt")
    x = np.array([np.nan, 3e9, -3e9, -5.5, 4.5e9, np.inf, -np.inf, 1e20, 300.7, -200.2, 70000.0, -0.5, 2.0 ** 31,
                  -2.0 ** 31, 1.8e19, 126.9], np.float32)
    d = np.array([np.nan, 3e9, -3e9, -5.5, 4.5e9, np.inf, -np.inf, 1e20, 2.0 ** 31 - 0.5, -2.0 ** 31 - 0.5, 7e4, -0.5,
                  2.0 ** 64, -1.0, 1.8e19, 2.0 ** 63], np.float64)
    n = x.size
    types = {"a": np.int8, "b": np.uint8, "c": np.int16, "e": np.uint16, "f": np.int32, "g": np.uint32, "h": np.int64,
             "k": np.uint64, "fd": np.int32, "kd": np.uint64}
    args = {"x": x, "d": d, **{name: np.zeros(n, t) for name, t in types.items()}, "n": np.int32(n)}

    def saturated(values: np.ndarray, t) -> np.ndarray:
        info = np.iinfo(t)
        out = [0 if math.isnan(v) else info.min if v <= info.min else info.max if v >= info.max + 1 else int(v)
               for v in values.astype(np.float64)]
        return np.array(out, t)

    got_c = run_c(kernel, 2, 8, args)
    got_emu = run_emulated(kernel, 2, 8, args)
    got_llvm = copy_args(args)
    polypy.compile(str(path)).cvt[2, 8](*got_llvm.values())
    for name, t in types.items():
        want = saturated(d if name in ("fd", "kd") else x, t)
        for got in (got_c, got_emu, got_llvm):
            np.testing.assert_array_equal(got[name], want, err_msg=name)
    # The scalar form (outside `omp simd` loops) computes the same values as the vector form.
    m = 2
    serial = polypy.load(str(path)).kernel("cvt_serial")
    args = {"x": x, "d": d, "f": np.zeros(n * m, np.int32), "b": np.zeros(n * m, np.uint8),
            "h": np.zeros(n * m, np.int64), "n": np.int32(n), "m": np.int32(m)}
    got_c, got_emu = run_c(serial, 2, 8, args), run_emulated(serial, 2, 8, args)
    at = (np.arange(n)[:, None] + np.arange(m)[None, :]).reshape(-1) % n
    for name, src, t in (("f", x, np.int32), ("b", d, np.uint8), ("h", d, np.int64)):
        for got in (got_c, got_emu):
            np.testing.assert_array_equal(got[name], saturated(src[at], t), err_msg=name)
    out = tmp_path / "cvt.c"
    assert main(["translate", str(path), "-o", str(out)]) == 0
    text = out.read_text()
    assert "polypy_cvtv_i8_f32(" in text and "polypy_cvt_i32_f32(" in text and "polypy_cvt_u8_f64(" in text


def test_fast_division_flushes_where_cuda_documents_it(tmp_path: pathlib.Path) -> None:
    # __fdividef(x, y) is x / y within CUDA's 2 ulp, but for 2^126 < |y| < 2^128 CUDA documents a
    # zero (NaN for an infinite x); polypy divided exactly there.
    need_compiler()
    path = tmp_path / "fdiv.cu"
    path.write_text("__global__ void k(const float* x, const float* y, float* o, int n) {\n"
                    "  int i = threadIdx.x;\n  if (i < n) o[i] = __fdividef(x[i], y[i]);\n}\n")
    x = np.array([1.0, -3.0, np.inf, 2.0, 1.0, 6.0, 5.0, -1.0], np.float32)
    y = np.array([3.0, 1.5 * 2.0 ** 126, 2.0 ** 127, -(2.0 ** 127), 2.0 ** 126, -2.0, 1e-30, 3.0e38], np.float32)
    args = {"x": x, "y": y, "o": np.zeros(8, np.float32), "n": np.int32(8)}
    kernel = polypy.load(str(path)).kernel("k")
    llvm = copy_args(args)
    polypy.compile(str(path)).k[1, 8](*llvm.values())
    huge = (np.abs(y) > 2.0 ** 126) & (np.abs(y) < 2.0 ** 128)
    with np.errstate(all="ignore"):
        want = np.where(huge, x * np.copysign(np.float32(0), y), x / y)
    for got in (run_c(kernel, 1, 8, args), run_emulated(kernel, 1, 8, args), llvm):
        np.testing.assert_array_equal(got["o"], want)
        np.testing.assert_array_equal(np.signbit(got["o"]), np.signbit(want))
