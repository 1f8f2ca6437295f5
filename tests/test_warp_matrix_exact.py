"""The fast form of polypy's mma_sync (docs/warp_matrix.md, "Cost") gives the bits of the documented
order: half inputs widened by a multiplication by 2^112 instead of __half2float's case analysis,
each lane's sums kept in scalars. Checked bit for bit, through the emulator, the LLVM JIT and the C
backend: the widening against __half2float on all 65536 halves, and whole products against the
reference order on random inputs of wide range (subnormal halves among them), for every fragment
shape, also under a bounds check around the warp's operations (as the tensor-core samples have)."""
from __future__ import annotations

import numpy as np
import pytest

from polypy.lowp import from_bfloat16, to_bfloat16
from test_warp_matrix import TF32_CONVERT, _launch, _reference, _run, _source, _store, _tf32

WIDEN = r"""
#include <mma.h>
using namespace nvcuda;
__global__ void widen(const half* in, unsigned int* fast, unsigned int* plain, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    fast[i] = __float_as_uint(wmma::__polypy_wmma_wide(in[i]));
    plain[i] = __float_as_uint(__half2float(in[i]));
  }
}
"""


def test_half_widening_gives_half2float_bits_for_every_half(tmp_path) -> None:
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    args = {"in": bits, "fast": np.zeros(65536, np.uint32), "plain": np.zeros(65536, np.uint32), "n": 65536}
    want = bits.view(np.float16).astype(np.float32).view(np.uint32)
    finite = ~np.isnan(bits.view(np.float16))
    for name, got in _run(tmp_path, WIDEN, args, 256, 256, kernel="widen"):
        np.testing.assert_array_equal(got["fast"], got["plain"], err_msg=name)
        # NumPy's conversion agrees on every non-NaN (NaNs: payload and sign kept, checked above)
        np.testing.assert_array_equal(got["fast"][finite], want[finite], err_msg=name)
        assert np.all(np.isnan(got["fast"].view(np.float32)[~finite])), name


def _wide_range_halves(rng, shape) -> np.ndarray:
    """Halves of every binade, subnormals and signed zeros among them (no inf/NaN: sums stay finite)."""
    mant = rng.integers(0, 1024, shape)
    exp = rng.integers(0, 31, shape)
    sign = rng.integers(0, 2, shape)
    return ((sign << 15) | (exp << 10) | mant).astype(np.uint16).view(np.float16)


SHAPES = [  # (input type, shape, A layout, B layout, C layout, block)
    ("half", (16, 16, 16), "row_major", "col_major", "mem_row_major", 64),
    ("half", (32, 8, 16), "row_major", "col_major", "mem_row_major", 32),
    ("half", (8, 32, 16), "col_major", "col_major", "mem_col_major", (32, 2)),
    ("bf16", (32, 8, 16), "col_major", "row_major", "mem_row_major", 64),
    ("bf16", (8, 32, 16), "row_major", "row_major", "mem_col_major", 32),
    ("tf32", (16, 16, 8), "col_major", "row_major", "mem_row_major", 32),
]


@pytest.mark.parametrize("kind, shape, la, lb, lc, block", SHAPES)
def test_products_of_wide_range_inputs_bit_for_bit(tmp_path, kind, shape, la, lb, lc, block) -> None:
    M, N, K = 2 * shape[0], 2 * shape[1], 3 * shape[2]
    rng = np.random.default_rng(sum(shape) + len(kind))
    c = (rng.standard_normal((M, N)) * 2.0 ** rng.integers(-20, 20, (M, N))).astype(np.float32)
    if kind == "half":
        # a wide-range A against a moderate B: products from subnormal to large, rounding at every step
        a, b = _wide_range_halves(rng, (M, K)), (rng.standard_normal((K, N)) * 8).astype(np.float16)
        ta = tb = fa = fb = "half"
        ea, eb, sa, sb = a.astype(np.float32), b.astype(np.float32), _store(a, la), _store(b, lb)
    elif kind == "bf16":
        a32 = (rng.standard_normal((M, K)) * 2.0 ** rng.integers(-60, 60, (M, K))).astype(np.float32)
        b32 = rng.standard_normal((K, N)).astype(np.float32)
        abits, bbits = to_bfloat16(a32), to_bfloat16(b32)
        ta = tb = fa = fb = "__nv_bfloat16"
        ea, eb, sa, sb = from_bfloat16(abits), from_bfloat16(bbits), _store(abits, la), _store(bbits, lb)
    else:
        a32 = (rng.standard_normal((M, K)) * 2.0 ** rng.integers(-30, 30, (M, K))).astype(np.float32)
        b32 = rng.standard_normal((K, N)).astype(np.float32)
        ta = tb = "float"
        fa = fb = "wmma::precision::tf32"
        ea, eb, sa, sb = _tf32(a32), _tf32(b32), _store(a32, la), _store(b32, lb)
    source = _source(ta, tb, "float", fa, fb, shape, la, lb, lc, TF32_CONVERT if kind == "tf32" else "")
    args = {"a": sa, "b": sb, "c": _store(c, lc), "d": np.zeros(M * N, np.float32), "M": M, "N": N, "K": K,
            "alpha": 1.0}
    want = _store(_reference(ea, eb, c, 1.0, np.float32), lc)
    grid, block = _launch(M, N, shape, block)
    for name, got in _run(tmp_path, source, args, grid, block):
        np.testing.assert_array_equal(got["d"].view(np.uint32), want.view(np.uint32), err_msg=name)


# The tensor-core samples' simple kernel: each warp's loads and products under a bounds check that
# some warps fail (a per-thread flag in the CPU form), the loop over k outside it.
GUARDED = r"""
#include <mma.h>
using namespace nvcuda;
__global__ void guarded(const half* a, const half* b, const float* c, float* d, int m, int n, int k) {
  int wm = (blockIdx.x * blockDim.x + threadIdx.x) / 32, wn = blockIdx.y * blockDim.y + threadIdx.y;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int i = 0; i < k; i += 16) {
    if (wm * 16 < m && wn * 16 < n) {
      wmma::load_matrix_sync(fa, a + wm * 16 * k + i, k);
      wmma::load_matrix_sync(fb, b + wn * 16 * k + i, k);
      wmma::mma_sync(acc, fa, fb, acc);
    }
  }
  if (wm * 16 < m && wn * 16 < n) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> cf;
    wmma::load_matrix_sync(cf, c + wm * 16 * n + wn * 16, n, wmma::mem_row_major);
    for (int t = 0; t < cf.num_elements; ++t) cf.x[t] = 2.0f * acc.x[t] + cf.x[t];
    wmma::store_matrix_sync(d + wm * 16 * n + wn * 16, cf, n, wmma::mem_row_major);
  }
}
"""


def test_guarded_warps_bit_for_bit(tmp_path) -> None:
    M, N, K = 48, 32, 48  # 3 x 2 tiles; a (64, 2) block has 2 x 2 warps, so some fail the check
    rng = np.random.default_rng(7)
    a, b = _wide_range_halves(rng, (M, K)), (rng.standard_normal((K, N)) * 4).astype(np.float16)
    c = rng.standard_normal((M, N)).astype(np.float32)
    args = {"a": a.reshape(-1), "b": np.ascontiguousarray(b.T).reshape(-1), "c": c.reshape(-1),
            "d": np.full(M * N, -7.0, np.float32), "m": M, "n": N, "k": K}
    prod = _reference(a.astype(np.float32), b.astype(np.float32), np.zeros((M, N), np.float32), 1.0, np.float32)
    want = (np.float32(2) * prod + c).astype(np.float32).reshape(-1)
    for name, got in _run(tmp_path, GUARDED, args, (2, 1), (64, 2), kernel="guarded"):
        np.testing.assert_array_equal(got["d"].view(np.uint32), want.view(np.uint32), err_msg=name)
