"""Bit reinterpretation of scalars, CUDA's way: ``__float_as_int`` and relatives, and pointer
punning of a local variable (``*(int*)&f``), are one IR ``bitcast`` (the bits, never the value).

Each is checked bit for bit against NumPy's ``view`` on special values (NaN payloads, signaling
NaNs, -0.0, infinities, denormals, INT_MIN) through the emulator, the LLVM JIT and the C backend;
the CUDA printer prints the intrinsics back; ``polypy grad`` refuses, where written, to
differentiate through the bits of an active value (``autodiff.activity``).
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import copy_args, run_c, run_emulated
from codegen.cuda import print_cuda_kernel
from polypy.driver.cli import main
from polypy.errors import InternalError, UserError
from polypy.ir import parse_kernel, print_kernel
from polypy.ir import nodes as n
from polypy.ir.types import F32, I32, U32
from polypy.ir.verifier import verify_kernel
from polypy.passes.fold_constants import fold_expr

CASTS = r"""
__global__ void casts(const float* x, int* xi, unsigned* xu, const int* yi, float* yf, const unsigned* yu,
                      float* uf, const double* d, long long* dl, const long long* l, double* ld,
                      int* hi, int* lo, double* back, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    xi[i] = __float_as_int(x[i]);
    xu[i] = __float_as_uint(x[i]);
    yf[i] = __int_as_float(yi[i]);
    uf[i] = __uint_as_float(yu[i]);
    dl[i] = __double_as_longlong(d[i]);
    ld[i] = __longlong_as_double(l[i]);
    hi[i] = __double2hiint(d[i]);
    lo[i] = __double2loint(d[i]);
    back[i] = __hiloint2double(hi[i], lo[i]);
  }
}
"""

N = 10


def _bits32(*words: int) -> np.ndarray:
    return np.array(words, np.uint32)


def _special_inputs() -> dict:
    # float bits: quiet NaN, NaN with payload, signaling NaN, negative NaN, -0.0, +-inf, smallest
    # denormal, largest denormal, a normal number.
    x = _bits32(0x7FC00000, 0x7FC12345, 0x7F800001, 0xFFC00001, 0x80000000, 0x7F800000, 0xFF800000,
                0x00000001, 0x807FFFFF, 0x3F800000).view(np.float32)
    yi = _bits32(0x80000000, 0x7F800001, 0xFFC00001, 0x00000001, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000001,
                 0x007FFFFF, 0x7FC00000, 0).view(np.int32)
    d = np.array([0x7FF8000000000000, 0x7FF0000000000001, 0xFFF8000000000123, 0x8000000000000000,
                  0x7FF0000000000000, 0xFFF0000000000000, 1, 0x800FFFFFFFFFFFFF, 0x3FF0000000000000,
                  0xC000000000000000], np.uint64).view(np.float64)
    l = np.array([-(1 << 63), 0x7FF0000000000001, -1, 1, 0, (1 << 63) - 1, 0x7FF8000000000000,
                  -0x0008000000000000, 42, -42], np.int64)
    return {"x": x, "xi": np.zeros(N, np.int32), "xu": np.zeros(N, np.uint32), "yi": yi,
            "yf": np.zeros(N, np.float32), "yu": yi.view(np.uint32)[::-1].copy(), "uf": np.zeros(N, np.float32),
            "d": d, "dl": np.zeros(N, np.int64), "l": l, "ld": np.zeros(N, np.float64),
            "hi": np.zeros(N, np.int32), "lo": np.zeros(N, np.int32), "back": np.zeros(N, np.float64), "n": N}


def _check_casts(out: dict, args: dict) -> None:
    same = np.testing.assert_array_equal
    same(out["xi"], args["x"].view(np.int32))
    same(out["xu"], args["x"].view(np.uint32))
    same(out["yf"].view(np.int32), args["yi"])  # NaN payloads and signaling NaNs kept
    same(out["uf"].view(np.uint32), args["yu"])
    same(out["dl"], args["d"].view(np.int64))
    same(out["ld"].view(np.int64), args["l"])
    same(out["hi"], (args["d"].view(np.int64) >> 32).astype(np.int32))
    same(out["lo"], args["d"].view(np.uint64).astype(np.uint32).view(np.int32))
    same(out["back"].view(np.int64), args["d"].view(np.int64))


@pytest.fixture(scope="module")
def casts_source(tmp_path_factory):
    path = tmp_path_factory.mktemp("bits") / "casts.cu"
    path.write_text(CASTS)
    return path


@pytest.mark.parametrize("way", ["emulator", "llvm", "c"])
def test_intrinsics_are_exact_on_special_values(casts_source, way: str) -> None:
    args = _special_inputs()
    kernel = polypy.load(str(casts_source)).kernel("casts")
    if way == "emulator":
        out = run_emulated(kernel, 2, 8, args)
    elif way == "c":
        out = run_c(kernel, 2, 8, args)
    else:
        out = copy_args(args)
        polypy.compile(str(casts_source)).casts[2, 8](*out.values())
    _check_casts(out, args)


def test_cuda_printer_prints_the_intrinsics_back(casts_source, tmp_path) -> None:
    """The CUDA text of the kernel reads back as the same IR, and computes the same bits."""
    kernel = polypy.load(str(casts_source)).kernel("casts")
    text = print_cuda_kernel(kernel)
    for name in ("__float_as_int(", "__float_as_uint(", "__int_as_float(", "__uint_as_float(",
                 "__double_as_longlong(", "__longlong_as_double("):
        assert name in text, name
    again = tmp_path / "again.cu"
    again.write_text(text)
    back = polypy.load(str(again)).kernel("casts")
    assert print_kernel(back) == print_kernel(kernel)
    args = _special_inputs()
    _check_casts(run_emulated(back, 2, 8, args), args)


def test_unsigned_64_bit_casts_print_through_long_long() -> None:
    k = parse_kernel("kernel k(d: f64*, u: u64*) {\n  u[0] = bitcast<u64>(d[0])\n  d[1] = bitcast<f64>(u[1])\n}")
    text = print_cuda_kernel(k)
    assert "(unsigned long long)__double_as_longlong(d[0])" in text
    assert "__longlong_as_double((long long)u[1])" in text


def test_ir_text_round_trip_and_verifier() -> None:
    text = "kernel k(x: f32*, y: i32*) {\n  y[0] = bitcast<i32>(x[0]) >> 1\n  x[1] = -bitcast<f32>(y[1])\n}\n"
    k = parse_kernel(text)
    verify_kernel(k)
    assert print_kernel(k) == text
    with pytest.raises(InternalError, match="bitcast from i32 to f64"):
        verify_kernel(parse_kernel(text.replace("bitcast<f32>", "bitcast<f64>").replace("x[1] =", "var z: f64 =")))


def test_constant_folding_is_exact_and_leaves_nans_alone() -> None:
    fold = lambda x, to: fold_expr(n.Call("bitcast", (x,), to))  # noqa: E731
    assert fold(n.Const(-0.0, F32), I32) == n.Const(-(1 << 31), I32)
    assert fold(n.Const(float("inf"), F32), U32) == n.Const(0x7F800000, U32)
    folded = fold(n.Const(1, I32), F32)
    assert isinstance(folded, n.Const) and np.float32(folded.value).view(np.int32) == 1  # smallest denormal
    # A NaN's payload would not survive as a float literal: left to run time.
    assert isinstance(fold(n.Const(0x7F800001, I32), F32), n.Call)
    # There and back is the identity, bit for bit.
    x = n.Var("x", F32)
    assert fold(n.Call("bitcast", (x,), I32), F32) == x


FAST_INVERSE_SQRT = r"""
__global__ void rsqrt_bits(float* out, const float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    int b = *(int*)&v;
    b = 0x5f3759df - (b >> 1);
    float y = *(float*)&b;
    out[i] = y * (1.5f - 0.5f * v * y * y);
  }
}
"""


def _fast_inverse_sqrt(x: np.ndarray) -> np.ndarray:
    y = (np.int32(0x5F3759DF) - (x.view(np.int32) >> 1)).astype(np.int32).view(np.float32)
    half = np.float32(0.5) * x
    return y * (np.float32(1.5) - half * y * y)


@pytest.mark.parametrize("way", ["emulator", "llvm", "c"])
def test_fast_inverse_square_root(tmp_path, way: str) -> None:
    src = tmp_path / "fisr.cu"
    src.write_text(FAST_INVERSE_SQRT)
    x = np.concatenate([np.geomspace(1e-30, 1e30, 200), [1.0, 4.0, 0.25, 2.0]]).astype(np.float32)
    args = {"out": np.zeros(x.size, np.float32), "x": x, "n": x.size}
    kernel = polypy.load(str(src)).kernel("rsqrt_bits")
    if way == "emulator":
        out = run_emulated(kernel, 2, 128, args)["out"]
    elif way == "c":
        out = run_c(kernel, 2, 128, args)["out"]
    else:
        out = args["out"].copy()
        polypy.compile(str(src)).rsqrt_bits[2, 128](out, x, x.size)
    # The bit trick is exact integer arithmetic; the Newton step is plain float arithmetic.
    np.testing.assert_array_equal(out, _fast_inverse_sqrt(x))
    np.testing.assert_allclose(out, 1 / np.sqrt(x.astype(np.float64)), rtol=2e-3)


PUNS = {
    "deref_cast": ("float v = x[i]; int b = *(int*)&v; out[i] = __int_as_float(b ^ 0x80000000);",
                   lambda x: -x),
    "through_void": ("float v = x[i]; void* p = &v; out[i] = __uint_as_float(*(unsigned*)p);", lambda x: x),
    "reinterpret": ("float v = x[i]; out[i] = __int_as_float(reinterpret_cast<const int*>(&v)[0] & 0x7fffffff);",
                    np.abs),
    "write": ("float v = 0; *(int*)&v = __float_as_int(x[i]) | 1; (*(int*)&v)++; out[i] = v;",
              lambda x: ((x.view(np.int32) | 1) + 1).view(np.float32)),
    "pointer_local": ("float v = x[i]; unsigned* p = (unsigned*)&v; *p ^= 0x80000000u; out[i] = *(float*)p;",
                      lambda x: -x),
    "double": ("double d = x[i]; long long b = *(long long*)&d; b ^= 1LL << 63; out[i] = (float)*(double*)&b;",
               lambda x: -x),
}


@pytest.mark.parametrize("case", sorted(PUNS))
def test_pointer_punning_of_a_local_is_a_bit_cast(tmp_path, case: str) -> None:
    body, ref = PUNS[case]
    src = tmp_path / "pun.cu"
    src.write_text("__global__ void k(float* out, const float* x, int n) {\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   f"  if (i < n) {{ {body} }}\n}}\n")
    x = np.array([1.0, -2.5, -0.0, 0.0, 1e-40, np.inf, 3.0, -7.25], np.float32)
    args = {"out": np.zeros(8, np.float32), "x": x, "n": 8}
    kernel = polypy.load(str(src)).kernel("k")
    want = ref(x).view(np.int32)
    np.testing.assert_array_equal(run_emulated(kernel, 1, 8, args)["out"].view(np.int32), want)
    np.testing.assert_array_equal(run_c(kernel, 1, 8, args)["out"].view(np.int32), want)
    jit = args["out"].copy()
    polypy.compile(str(src)).k[1, 8](jit, x, 8)
    np.testing.assert_array_equal(jit.view(np.int32), want)


def test_bits_as_an_index_do_not_trouble_the_polyhedral_model(tmp_path) -> None:
    """An index computed from bits is opaque (non-affine) to isl: the kernel still translates."""
    src = tmp_path / "hist.cu"
    src.write_text("__global__ void hist(const float* x, int* counts, int n) {\n"
                   "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "  if (i < n) atomicAdd(&counts[(__float_as_int(x[i]) >> 23) & 255], 1);\n}\n")
    x = np.geomspace(1e-3, 1e3, 500).astype(np.float32)
    want = np.bincount((x.view(np.int32) >> 23) & 255, minlength=256).astype(np.int32)
    counts = np.zeros(256, np.int32)
    polypy.compile(str(src)).hist[4, 128](x, counts, x.size)
    np.testing.assert_array_equal(counts, want)
    from polypy.poly import build_model
    build_model(polypy.load(str(src)).kernel("hist"))


GRAD = r"""
__global__ void absbits(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __int_as_float(__float_as_int(x[i]) & 0x7fffffff);
}
__global__ void signs(const float* x, float* y, const int* k, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    int b = __float_as_int(x[i]);
    y[i] = x[i] * __int_as_float(k[i]) + (b < 0 ? 1.0f : 2.0f) * x[i];
  }
}
"""


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_grad_through_the_bits_of_an_active_value_is_a_located_error(tmp_path, capsys, mode: str) -> None:
    """``__int_as_float(__float_as_int(x) & 0x7fffffff)`` is fabs in disguise, but the integer ``&``
    has no derivative rule: refused where the bits become a float again (Enzyme's conservative
    answer), never a silent zero."""
    src = tmp_path / "grad.cu"
    src.write_text(GRAD)
    assert main(["grad", str(src), "--kernel", "absbits", "--mode", mode, "-o", str(tmp_path / "g.cu")]) == 1
    err = capsys.readouterr().err
    assert f"{src}:4:21: error: cannot differentiate the bit cast '__int_as_float'" in err
    assert not (tmp_path / "g.cu").exists()
    with pytest.raises(UserError) as caught:
        polypy.grad(polypy.compile(str(src)).absbits, mode=mode)
    assert caught.value.loc is not None and (caught.value.loc.line, caught.value.loc.col) == (4, 21)


def test_grad_with_inactive_bits(tmp_path) -> None:
    """Bits of an active value used only in a comparison, and a float made of an integer input's
    bits, are inactive: the gradient is the ordinary one."""
    src = tmp_path / "grad.cu"
    src.write_text(GRAD)
    grad = polypy.grad(polypy.compile(str(src)).signs, wrt=["x"])
    x = np.array([1.5, -2.0, 0.5, -0.25], np.float32)
    kbits = np.array([2.0, -1.0, 0.5, 3.0], np.float32).view(np.int32)
    seed = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    dx = np.zeros(4, np.float32)
    grad[1, 4](x, dx, np.zeros(4, np.float32), seed.copy(), kbits, 4)
    want = seed * (kbits.view(np.float32) + np.where(x < 0, 1.0, 2.0).astype(np.float32))
    np.testing.assert_allclose(dx, want, rtol=1e-6)
