"""Warp matrix operations (polypy's <mma.h>, nvcuda::wmma; docs/warp_matrix.md): our own GEMM
kernels, one warp per output tile, checked against NumPy through the emulator, the LLVM JIT and the
C backend on several launch shapes, for every input type (half, bfloat16, tf32, double, int8,
uint8), fragment shape and layout. The reference follows the documented order (k ascending,
exact products, float accumulation rounded once per step), so float results agree bit for bit."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import polypy
from c_support import find_compiler, run_c, run_emulated
from polypy.lowp import from_bfloat16, to_bfloat16

KERNEL = r"""
#include <mma.h>
using namespace nvcuda;
// D = alpha * (A * B + C), one warp per TMxTN tile (tiles in order, several warps per block).
__global__ void gemm(const %(TA)s* a, const %(TB)s* b, const %(TC)s* c, %(TC)s* d, int M, int N, int K, %(TC)s alpha) {
  int lin = threadIdx.x + blockDim.x * threadIdx.y;
  int warp = blockIdx.x * (blockDim.x * blockDim.y / 32) + lin / 32;
  int tm = warp / (N / %(TN)d), tn = warp %% (N / %(TN)d);
  if (tm * %(TM)d < M) {
    wmma::fragment<wmma::matrix_a, %(TM)d, %(TN)d, %(TK)d, %(FA)s, wmma::%(LA)s> fa;
    wmma::fragment<wmma::matrix_b, %(TM)d, %(TN)d, %(TK)d, %(FB)s, wmma::%(LB)s> fb;
    wmma::fragment<wmma::accumulator, %(TM)d, %(TN)d, %(TK)d, %(TC)s> acc;
    wmma::load_matrix_sync(acc, c + %(C_TILE)s, %(C_LD)s, wmma::%(LC)s);
    for (int k = 0; k < K; k += %(TK)d) {
      wmma::load_matrix_sync(fa, a + %(A_TILE)s, %(A_LD)s);
      wmma::load_matrix_sync(fb, b + %(B_TILE)s, %(B_LD)s);
      %(CONVERT)s
      wmma::mma_sync(acc, fa, fb, acc);
    }
    for (int i = 0; i < acc.num_elements; ++i) acc.x[i] = alpha * acc.x[i];
    wmma::store_matrix_sync(d + %(C_TILE)s, acc, %(C_LD)s, wmma::%(LC)s);
  }
}
"""

TF32_CONVERT = ("for (int t = 0; t < fa.num_elements; ++t) fa.x[t] = wmma::__float_to_tf32(fa.x[t]);\n"
                "      for (int t = 0; t < fb.num_elements; ++t) fb.x[t] = wmma::__float_to_tf32(fb.x[t]);")


def _source(ta: str, tb: str, tc: str, fa: str, fb: str, shape: tuple[int, int, int], la: str, lb: str, lc: str,
            convert: str = "") -> str:
    tm, tn, tk = shape
    a_tile, a_ld = ("tm * %d * K + k" % tm, "K") if la == "row_major" else ("k * M + tm * %d" % tm, "M")
    b_tile, b_ld = ("k * N + tn * %d" % tn, "N") if lb == "row_major" else ("tn * %d * K + k" % tn, "K")
    c_tile, c_ld = (("tm * %d * N + tn * %d" % (tm, tn), "N") if lc == "mem_row_major"
                    else ("tn * %d * M + tm * %d" % (tn, tm), "M"))
    return KERNEL % dict(TA=ta, TB=tb, TC=tc, FA=fa, FB=fb, TM=tm, TN=tn, TK=tk, LA=la, LB=lb, LC=lc,
                         A_TILE=a_tile, A_LD=a_ld, B_TILE=b_tile, B_LD=b_ld, C_TILE=c_tile, C_LD=c_ld,
                         CONVERT=convert)


def _tf32(x: np.ndarray) -> np.ndarray:
    """__float_to_tf32: 10 fraction bits, to nearest, ties away from zero."""
    u = x.astype(np.float32).view(np.uint32)
    special = (u & 0x7F800000) == 0x7F800000
    r = ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).astype(np.uint32)
    return np.where(special, u, r).view(np.float32)


def _reference(a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha, acc_type) -> np.ndarray:
    """k ascending: acc = acc + a[r, k] * b[k, n], each step rounded to ``acc_type``."""
    acc = c.astype(acc_type)
    for k in range(a.shape[1]):
        acc = (acc + (a[:, k, None].astype(acc_type) * b[None, k, :].astype(acc_type))).astype(acc_type)
    return (acc_type(alpha) * acc).astype(acc_type)


def _store(x: np.ndarray, layout: str) -> np.ndarray:
    return np.ascontiguousarray(x if layout in ("row_major", "mem_row_major") else x.T).reshape(-1)


def _run(tmp_path, source: str, args: dict, grid, block, kernel: str = "gemm") -> list[tuple[str, dict]]:
    path = tmp_path / f"{kernel}.cu"
    path.write_text(source)
    gpu = polypy.load(str(path)).kernel(kernel)
    results = [("emulator", run_emulated(gpu, grid, block, args))]
    llvm = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    getattr(polypy.compile(str(path)), kernel)[grid, block](*llvm.values())
    results.append(("llvm", llvm))
    if find_compiler(False) is not None:
        results.append(("c", run_c(gpu, grid, block, args)))
    return results


def _launch(M: int, N: int, shape, block) -> tuple[int, object]:
    warps_per_block = (block if isinstance(block, int) else block[0] * block[1]) // 32
    warps = (M // shape[0]) * (N // shape[1])
    return -(-warps // warps_per_block), block


CASES = [  # (input type, shape, A layout, B layout, C layout, block)
    ("half", (16, 16, 16), "row_major", "col_major", "mem_row_major", 64),
    ("half", (32, 8, 16), "col_major", "row_major", "mem_col_major", (32, 2)),
    ("half", (8, 32, 16), "row_major", "row_major", "mem_row_major", 32),
    ("bf16", (16, 16, 16), "row_major", "col_major", "mem_row_major", 128),
    ("tf32", (16, 16, 8), "row_major", "col_major", "mem_col_major", 64),
    # 256 threads: each per-thread fragment array's elements 1 KiB apart, padded in C (below)
    ("tf32", (16, 16, 8), "row_major", "col_major", "mem_row_major", 256),
]


@pytest.mark.parametrize("kind, shape, la, lb, lc, block", CASES)
def test_float_accumulators_bit_for_bit(tmp_path, kind, shape, la, lb, lc, block) -> None:
    M, N, K = 2 * shape[0], 3 * shape[1], 2 * shape[2]
    rng = np.random.default_rng(shape[0] * 7 + shape[1])
    a32 = rng.standard_normal((M, K)).astype(np.float32)
    b32 = rng.standard_normal((K, N)).astype(np.float32)
    c = rng.standard_normal((M, N)).astype(np.float32)
    if kind == "half":
        a, b = a32.astype(np.float16), b32.astype(np.float16)
        ta = tb = fa = fb = "half"
        ea, eb = a.astype(np.float32), b.astype(np.float32)
        sa, sb = _store(a, la), _store(b, lb)
    elif kind == "bf16":
        sa_bits, sb_bits = to_bfloat16(a32), to_bfloat16(b32)
        ea, eb = from_bfloat16(sa_bits), from_bfloat16(sb_bits)
        ta = tb = fa = fb = "__nv_bfloat16"
        sa, sb = _store(sa_bits, la), _store(sb_bits, lb)
    else:
        ta = tb = "float"
        fa = fb = "wmma::precision::tf32"
        ea, eb = _tf32(a32), _tf32(b32)
        sa, sb = _store(a32, la), _store(b32, lb)
    source = _source(ta, tb, "float", fa, fb, shape, la, lb, lc, TF32_CONVERT if kind == "tf32" else "")
    args = {"a": sa, "b": sb, "c": _store(c, lc), "d": np.zeros(M * N, np.float32), "M": M, "N": N, "K": K,
            "alpha": 0.5}
    want = _store(_reference(ea, eb, c, 0.5, np.float32), lc)
    close = np.float64(ea) @ np.float64(eb) + c
    np.testing.assert_allclose(want, 0.5 * _store(close, lc), rtol=1e-4, atol=1e-4)  # the reference is a GEMM
    grid, block = _launch(M, N, shape, block)
    for name, got in _run(tmp_path, source, args, grid, block):
        np.testing.assert_array_equal(got["d"], want, err_msg=name)


def test_fragment_arrays_of_a_wide_block_are_padded_in_c(tmp_path) -> None:
    """A block of 256 threads keeps each element of a float fragment in an array of 256 floats,
    [e][tz][ty][tx]: element e of one thread 1 KiB from element e + 1, all of them in 2 of the L1
    cache's 64 sets, which a scalar loop over the threads pays in conflict misses
    (tf32TensorCoreGemm 6x slower). The C declaration pads the thread dimension by a cache line
    (the results: test_float_accumulators_bit_for_bit's 256-thread case)."""
    from polypy.driver.library import emit_kernels
    from polypy.driver.pipelines import to_cpu

    path = tmp_path / "gemm.cu"
    path.write_text(_source("float", "float", "float", "wmma::precision::tf32", "wmma::precision::tf32", (16, 16, 8),
                            "row_major", "col_major", "mem_row_major"))
    cpu = to_cpu(polypy.load(str(path)).kernel("gemm"))
    text = emit_kernels([cpu], block_shapes={"gemm": [(256, 1, 1)]})
    assert "[1][1][272]" in text and "[1][1][256]" not in text


def test_tf32_inputs_are_rounded_even_when_the_program_does_not(tmp_path) -> None:
    shape, M, N, K = (16, 16, 8), 16, 16, 16
    rng = np.random.default_rng(3)
    a32, b32 = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    source = _source("float", "float", "float", "wmma::precision::tf32", "wmma::precision::tf32", shape,
                     "row_major", "row_major", "mem_row_major")
    args = {"a": a32.reshape(-1), "b": b32.reshape(-1), "c": c.reshape(-1), "d": np.zeros(M * N, np.float32),
            "M": M, "N": N, "K": K, "alpha": 1.0}
    want = _reference(_tf32(a32), _tf32(b32), c, 1.0, np.float32).reshape(-1)
    assert not np.array_equal(want, _reference(a32, b32, c, 1.0, np.float32).reshape(-1))
    for name, got in _run(tmp_path, source, args, 1, 32):
        np.testing.assert_array_equal(got["d"], want, err_msg=name)


def test_float_to_tf32_rounds_to_nearest_ties_away() -> None:
    x = np.array([1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, -(1.0 + 2.0 ** -11), 1.0 + 2.0 ** -12, np.inf],
                 np.float32)
    np.testing.assert_array_equal(_tf32(x), np.array([1.0 + 2.0 ** -10, 1.0 + 2.0 ** -9, -(1.0 + 2.0 ** -10), 1.0,
                                                      np.inf], np.float32))


@pytest.mark.parametrize("block", [32, (32, 2)])
def test_half_accumulator_rounds_once_per_element(tmp_path, block) -> None:
    shape, M, N, K = (16, 16, 16), 32, 16, 32
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((M, K)) / 4).astype(np.float16), (rng.standard_normal((K, N)) / 4).astype(np.float16)
    c = rng.standard_normal((M, N)).astype(np.float16)
    source = _source("half", "half", "half", "half", "half", shape, "row_major", "col_major", "mem_row_major")
    args = {"a": a.reshape(-1), "b": np.ascontiguousarray(b.T).reshape(-1), "c": c.reshape(-1),
            "d": np.zeros(M * N, np.float16), "M": M, "N": N, "K": K, "alpha": 1.0}
    # Each mma_sync sums in float from the half accumulator and rounds to half once.
    acc = c.astype(np.float32)
    for k0 in range(0, K, 16):
        for k in range(k0, k0 + 16):
            acc = (acc + a[:, k, None].astype(np.float32) * b[None, k, :].astype(np.float32)).astype(np.float32)
        acc = acc.astype(np.float16).astype(np.float32)
    want = acc.astype(np.float16).reshape(-1)
    grid, block = _launch(M, N, shape, block)
    for name, got in _run(tmp_path, source, args, grid, block):
        np.testing.assert_array_equal(got["d"].view(np.uint16), want.view(np.uint16), err_msg=name)


@pytest.mark.parametrize("block", [32, 64])
def test_double_m8n8k4(tmp_path, block) -> None:
    shape, M, N, K = (8, 8, 4), 16, 24, 12
    rng = np.random.default_rng(block)
    a, b, c = rng.standard_normal((M, K)), rng.standard_normal((K, N)), rng.standard_normal((M, N))
    source = _source("double", "double", "double", "double", "double", shape, "row_major", "col_major",
                     "mem_row_major")
    args = {"a": a.reshape(-1), "b": np.ascontiguousarray(b.T).reshape(-1), "c": c.reshape(-1),
            "d": np.zeros(M * N), "M": M, "N": N, "K": K, "alpha": 2.0}
    grid, block = _launch(M, N, shape, block)
    for name, got in _run(tmp_path, source, args, grid, block):
        np.testing.assert_allclose(got["d"], (2.0 * (a @ b + c)).reshape(-1), rtol=1e-13, atol=1e-13, err_msg=name)


@pytest.mark.parametrize("ctype, np_type, shape", [("signed char", np.int8, (16, 16, 16)),
                                                   ("unsigned char", np.uint8, (32, 8, 16))])
def test_integer_inputs_accumulate_in_int(tmp_path, ctype, np_type, shape) -> None:
    M, N, K = 2 * shape[0], 2 * shape[1], 2 * shape[2]
    rng = np.random.default_rng(11)
    lo, hi = (-128, 128) if np_type == np.int8 else (0, 256)
    a, b = rng.integers(lo, hi, (M, K)).astype(np_type), rng.integers(lo, hi, (K, N)).astype(np_type)
    c = rng.integers(-1000, 1000, (M, N)).astype(np.int32)
    source = _source(ctype, ctype, "int", ctype, ctype, shape, "row_major", "col_major", "mem_row_major")
    args = {"a": a.reshape(-1), "b": np.ascontiguousarray(b.T).reshape(-1), "c": c.reshape(-1),
            "d": np.zeros(M * N, np.int32), "M": M, "N": N, "K": K, "alpha": 3}
    want = (3 * (a.astype(np.int64) @ b.astype(np.int64) + c)).astype(np.int32).reshape(-1)
    for name, got in _run(tmp_path, source, args, *_launch(M, N, shape, 64)):
        np.testing.assert_array_equal(got["d"], want, err_msg=name)


# Arrays of fragments, a fragment copied, and one passed by reference to a device function.
FRAGMENT_VALUES = r"""#include <mma.h>
using namespace nvcuda;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> Acc;
__device__ void scale(Acc& f, float s) { for (int i = 0; i < f.num_elements; ++i) f.x[i] *= s; }
__global__ void arr(const half* a, const half* b, float* d) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa[2];
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  Acc c[2][2];
  for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], a + i * 256, 16);
  wmma::load_matrix_sync(fb, b, 16);
  for (int i = 0; i < 2; ++i) for (int j = 0; j < 2; ++j) {
    wmma::fill_fragment(c[i][j], (float)(i + 2 * j));
    wmma::mma_sync(c[i][j], fa[i], fb, c[i][j]);
  }
  Acc t = c[1][0];
  scale(t, 2.0f);
  c[0][1] = t;
  for (int i = 0; i < 2; ++i) for (int j = 0; j < 2; ++j)
    wmma::store_matrix_sync(d + (blockIdx.x * blockDim.x + threadIdx.x) / 32 * 1024 + (i * 2 + j) * 256,
                            c[i][j], 16, wmma::mem_row_major);
}
"""


@pytest.mark.parametrize("grid, block", [(1, 32), (2, 64)])
def test_fragment_arrays_copies_and_references(tmp_path, grid, block) -> None:
    warps = grid * block // 32
    rng = np.random.default_rng(block)
    a = rng.standard_normal((2, 16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 16)).astype(np.float16)
    args = {"a": a.reshape(-1), "b": np.ascontiguousarray(b.T).reshape(-1), "d": np.zeros(warps * 1024, np.float32)}
    p = [_reference(a[i].astype(np.float32), b.astype(np.float32), np.full((16, 16), c, np.float32), 1.0,
                    np.float32) for i, c in ((0, 0.0), (1, 1.0), (1, 1.0), (1, 3.0))]
    want = np.tile(np.stack([p[0], np.float32(2) * p[1], p[2], p[3]]).reshape(-1), warps)
    for name, got in _run(tmp_path, FRAGMENT_VALUES, args, grid, block, kernel="arr"):
        np.testing.assert_array_equal(got["d"], want, err_msg=name)


PROGRAM = r"""#include <cstdio>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;
// Each lane writes its part of a 16x16 tile to shared memory; the warp loads it as matrix_a
// (after __syncwarp), multiplies by the identity, stores.
__global__ void tile(const float* src, float* dst) {
  __shared__ half s[32 * 16 * 16];
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  half* t = s + warp * 256;
  for (int i = 0; i < 8; ++i) t[(lane * 8 + i + 37) % 256] = __float2half(src[blockIdx.x * 1024 + warp * 256 + (lane * 8 + i + 37) % 256]);
  __syncwarp();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> id;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(a, t, 16);
  for (int i = 0; i < id.num_elements; ++i) id.x[i] = __float2half(0.0f);
  wmma::fill_fragment(acc, 1.0f);
  half* e = s + 32 * 256 - 256 * (1 + warp);
  __syncthreads();
  for (int i = lane; i < 256; i += 32) e[i] = __float2half(i / 16 == i % 16 ? 1.0f : 0.0f);
  __syncwarp();
  wmma::load_matrix_sync(id, e, 16);
  wmma::mma_sync(acc, a, id, acc);
  wmma::store_matrix_sync(dst + blockIdx.x * 1024 + warp * 256, acc, 16, wmma::mem_row_major);
}
int main() {
  static float h[2048], out[2048];
  for (int i = 0; i < 2048; ++i) h[i] = (float)((i * 7) % 13) - 6.0f;
  float *ds, *dd;
  cudaMalloc(&ds, sizeof h); cudaMalloc(&dd, sizeof out);
  cudaMemcpy(ds, h, sizeof h, cudaMemcpyHostToDevice);
  tile<<<2, 128>>>(ds, dd);
  cudaMemcpy(out, dd, sizeof out, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < 2048; ++i) if (out[i] != h[i] + 1.0f) ++bad;
  printf("bad=%d out[7]=%g\n", bad, out[7]);
  return bad != 0;
}
"""


def test_a_whole_program_with_fragments_runs_translated_and_emulated(tmp_path) -> None:
    """Each lane writes part of a tile to shared memory, the warp loads it as matrix_a and multiplies it
    by the identity (a matrix_b it loads too) onto an accumulator of ones; the host checks every element."""
    if find_compiler(True) is None:
        pytest.skip("no C++ compiler (c++/g++/clang++) on this machine")
    src = tmp_path / "prog.cu"
    src.write_text(PROGRAM)
    for extra in ((), ("--emulate",)):
        result = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(src), *extra],
                                capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout == "bad=0 out[7]=5\n", extra
