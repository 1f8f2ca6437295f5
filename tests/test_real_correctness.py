"""Wrong answers and refusals found on real CUDA programs (issue 14), each minimized to a program of
our own: Rodinia's huffman, myocyte and mummergpu.

- huffman's ``pack2`` shifts by ``32 - bit`` with ``bit`` 0, and its encoder masks with
  ``(1 << wrbits) - 1`` where ``wrbits`` can be 32. C leaves a shift by the width undefined; the
  GPU's ``shl``/``shr`` clamp the count to the width (``x << 32`` is 0, a signed ``x >> 32`` the sign
  fill), and the program's self-check passes on a GPU. polypy's LLVM backend took the count modulo
  the width, the C backend printed C's ``<<`` (x86: modulo too), and the emulator stopped: the
  translated huffman printed "FAIL! vectors are NOT matching!". All three now give the GPU's result.
- huffman's scan launches ``prescan<false, ...>(..., 0, ...)``: a null pointer argument the kernel
  never dereferences. ``polypy run --emulate`` refused it ("does not point into memory from
  cudaMalloc"); it is now an empty array (any access is an out-of-bounds error).
- mummergpu writes ``"node ("fNID"): ..."`` with ``fNID`` a string macro: C++11 lexes ``"..."fNID``
  as a user-defined literal and clang rejected it ("invalid suffix on literal"); nvcc warns and
  reads two tokens, and so does polypy now.
- myocyte: the emulator's "data race on global memory d_finavalu[0]" is a real race in the program
  (``kernel_cam`` writes ``d_finavalu[com_offset]``, meant ``d_com``, while block 0 writes
  ``d_finavalu[0..45]``); kept as a test that the emulator reports it.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import polypy
from c_support import need_compiler, run_c
from codegen.c import find_compiler

THREADS = 64

SHIFTS = r"""
__global__ void shifts(const unsigned* src, const unsigned* pos, unsigned* out, int* outs,
                       unsigned long long* out64)
{
    unsigned t = threadIdx.x;
    unsigned bit = pos[t] % 32;          // huffman pack2: the bit position in the output word
    unsigned dw = src[t];
    unsigned wrbits = 32 - bit;          // 1..32
    out[4 * t + 0] = dw << 32 - bit;     // pack2: `tmp = dw << 32-bit`
    out[4 * t + 1] = dw >> wrbits;
    out[4 * t + 2] = (1 << wrbits) - 1;  // the encoder's mask `(1<<wrbits)-1`: all ones at 32
    out[4 * t + 3] = dw >> (int)(bit - 1u);  // a negative count (bit 0): the GPU reads it as unsigned
    outs[2 * t + 0] = (int)dw >> wrbits;    // signed: the sign fill at 32
    outs[2 * t + 1] = (int)dw << wrbits;
    unsigned long long w = ((unsigned long long)dw << 32) | dw;
    out64[2 * t + 0] = w << 2 * wrbits;  // 2..64
    out64[2 * t + 1] = w >> 2 * wrbits;
}
"""


def _gpu_shift(op: str, x: np.ndarray, count: np.ndarray, bits: int) -> np.ndarray:
    """The GPU's shl/shr: the count read as unsigned and clamped to the width (PTX ISA)."""
    c = count.astype(np.int64)
    over = (c < 0) | (c >= bits)
    safe = np.where(over, 0, c).astype(x.dtype)
    shifted = np.left_shift(x, safe) if op == "shl" else np.right_shift(x, safe)
    fill = np.right_shift(x, x.dtype.type(bits - 1)) if op == "shr" and x.dtype.kind == "i" else np.zeros_like(x)
    return np.where(over, fill, shifted).astype(x.dtype)


def _shift_case():
    rng = np.random.default_rng(14)
    src = rng.integers(0, 1 << 32, THREADS, dtype=np.uint64).astype(np.uint32)
    pos = rng.integers(0, 1 << 16, THREADS, dtype=np.uint64).astype(np.uint32)
    pos[::3] &= ~np.uint32(31)  # bit 0 in every third thread: the shifts by the full width
    args = {"src": src, "pos": pos, "out": np.zeros(4 * THREADS, np.uint32), "outs": np.zeros(2 * THREADS, np.int32),
            "out64": np.zeros(2 * THREADS, np.uint64)}
    bit = (pos % 32).astype(np.int64)
    wr = 32 - bit
    w = (src.astype(np.uint64) << np.uint64(32)) | src.astype(np.uint64)
    want = {
        "out": np.stack([_gpu_shift("shl", src, wr, 32), _gpu_shift("shr", src, wr, 32),
                         (_gpu_shift("shl", np.ones(THREADS, np.int32), wr, 32) - np.int32(1)).astype(np.uint32),
                         _gpu_shift("shr", src, bit - 1, 32)], axis=1).reshape(-1),
        "outs": np.stack([_gpu_shift("shr", src.astype(np.int32), wr, 32),
                          _gpu_shift("shl", src.astype(np.int32), wr, 32)], axis=1).reshape(-1),
        "out64": np.stack([_gpu_shift("shl", w, 2 * wr, 64), _gpu_shift("shr", w, 2 * wr, 64)], axis=1).reshape(-1),
    }
    return args, want


@pytest.fixture(scope="module")
def shifts_module(tmp_path_factory):
    source = tmp_path_factory.mktemp("shifts") / "shifts.cu"
    source.write_text(SHIFTS)
    return polypy.compile(source, threads=2)


def _check(got: dict, want: dict, what: str) -> None:
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value, err_msg=f"{what}: {name}")


def test_model_of_the_gpu_shift_is_c_where_c_defines_it():
    """The oracle itself: in range it is NumPy's (C's) shift; at the width it clamps."""
    x = np.array([0x80000001, 5], np.uint32)
    assert _gpu_shift("shl", x, np.array([1, 31]), 32).tolist() == [2, 0x80000000]
    assert _gpu_shift("shl", x, np.array([32, 33]), 32).tolist() == [0, 0]
    assert _gpu_shift("shr", x.astype(np.int32), np.array([32, -1]), 32).tolist() == [-1, 0]


def test_shifts_by_the_width_give_the_gpu_result_compiled(shifts_module):
    args, want = _shift_case()
    shifts_module.shifts[1, THREADS](**args)
    _check(args, want, "LLVM")


def test_shifts_by_the_width_give_the_gpu_result_emulated(shifts_module):
    args, want = _shift_case()
    shifts_module.shifts.emulate[1, THREADS](**args)
    _check(args, want, "emulator")


def test_shifts_by_the_width_give_the_gpu_result_in_c(shifts_module):
    args, want = _shift_case()
    _check(run_c(shifts_module.shifts.gpu, 1, THREADS, args, cpp=True), want, "C++")


PACK = r"""
// Minimized from huffman's pack2: thread t appends its bits[t] bits (left-aligned in src[t*W..],
// zero after them) to a bit stream at bit pos[t] (the exclusive prefix sum of bits).
__global__ void pack(const unsigned* src, const unsigned* bits, const unsigned* pos, unsigned* dst, unsigned W)
{
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned word = pos[t] / 32, bit = pos[t] % 32;
    for (unsigned i = 0; i < (bits[t] + 31) / 32; i++) {
        unsigned w = src[t * W + i];
        atomicOr(&dst[word + i], w >> bit);
        atomicOr(&dst[word + i + 1], w << 32 - bit);  // bit 0: a shift by 32, 0 on the GPU
    }
}
"""
WORDS = 3


def _pack_case():
    rng = np.random.default_rng(41)
    bits = rng.integers(1, 32 * WORDS + 1, THREADS)
    bits[::4] = 32 * rng.integers(1, WORDS + 1, len(bits[::4]))  # whole words: the next thread's bit is 0
    pos = np.concatenate([[0], np.cumsum(bits)[:-1]])
    streams = ["".join(rng.choice(["0", "1"], b)) for b in bits]
    src = np.zeros(THREADS * WORDS, np.uint32)
    for t, s in enumerate(streams):
        padded = s.ljust(32 * WORDS, "0")
        src[t * WORDS:(t + 1) * WORDS] = [int(padded[32 * k:32 * k + 32], 2) for k in range(WORDS)]
    total = "".join(streams)
    size = len(total) // 32 + 2
    total = total.ljust(32 * size, "0")
    want = np.array([int(total[32 * k:32 * k + 32], 2) for k in range(size)], np.uint32)
    args = {"src": src, "bits": bits.astype(np.uint32), "pos": pos.astype(np.uint32),
            "dst": np.zeros(size, np.uint32), "W": np.uint32(WORDS)}
    return args, {"dst": want}


@pytest.fixture(scope="module")
def pack_module(tmp_path_factory):
    source = tmp_path_factory.mktemp("pack") / "pack.cu"
    source.write_text(PACK)
    return polypy.compile(source, threads=2)


def test_huffman_pack_compiled(pack_module):
    args, want = _pack_case()
    pack_module.pack[2, THREADS // 2](**args)
    _check(args, want, "LLVM")


def test_huffman_pack_emulated(pack_module):
    args, want = _pack_case()
    pack_module.pack.emulate[2, THREADS // 2](**args)
    _check(args, want, "emulator")


def test_huffman_pack_in_c(pack_module):
    args, want = _pack_case()
    _check(run_c(pack_module.pack.gpu, 2, THREADS // 2, args, cpp=True), want, "C++")


def _cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd)


NULL_ARGUMENT = r"""#include <cstdio>
#include <cuda_runtime.h>
template <bool storeSum>
__global__ void twice(unsigned* out, const unsigned* in, unsigned* sums)
{
    out[threadIdx.x] = 2 * in[threadIdx.x];
    if (storeSum && threadIdx.x == 0)
        sums[blockIdx.x] = out[0];
}
int main()
{
    unsigned h[32], *in, *out, *sums;
    for (int i = 0; i < 32; i++) h[i] = i + 1;
    cudaMalloc(&in, sizeof h);
    cudaMalloc(&out, sizeof h);
    cudaMalloc(&sums, sizeof(unsigned));
    cudaMemcpy(in, h, sizeof h, cudaMemcpyHostToDevice);
    twice<false><<<1, 32>>>(out, in, 0);    // huffman's prescan<false, ...>(..., 0, ...)
    cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
    printf("%u %u\n", h[0], h[31]);
    twice<true><<<1, 32>>>(out, out, SUMS);
    cudaMemcpy(h, sums, sizeof(unsigned), cudaMemcpyDeviceToHost);
    printf("%u\n", h[0]);
    return 0;
}
"""


def test_emulated_program_takes_a_null_pointer_the_kernel_does_not_use(tmp_path):
    need_compiler(cpp=True)
    source = tmp_path / "null.cu"
    source.write_text(NULL_ARGUMENT.replace("SUMS", "sums"))
    emulated = _cli("run", "--emulate", str(source), cwd=tmp_path)
    assert emulated.returncode == 0, emulated.stderr
    assert emulated.stdout.split() == ["2", "64", "4"]


def test_emulated_program_reports_an_access_through_a_null_pointer(tmp_path):
    need_compiler(cpp=True)
    source = tmp_path / "null.cu"
    source.write_text(NULL_ARGUMENT.replace("SUMS", "0"))
    emulated = _cli("run", "--emulate", str(source), cwd=tmp_path)
    assert emulated.returncode != 0
    assert "sums" in emulated.stderr and "out of bounds" in emulated.stderr.replace("-", " "), emulated.stderr
    assert f"{source}:8" in emulated.stderr


STRING_MACRO = r"""#include <cstdio>
#define fNID "%d,%d"
__global__ void fill(int* x) { x[threadIdx.x] = threadIdx.x; }
int main()
{
    int h[4], *d;
    cudaMalloc(&d, sizeof h);
    fill<<<1, 4>>>(d);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    printf("In node ("fNID"): done\n", h[1], h[3]);
    return 0;
}
"""


def test_string_literal_followed_by_a_string_macro_is_two_tokens_as_in_nvcc(tmp_path):
    """mummergpu_kernel.cu:755: ``"In node ("fNID"): ..."``; clang said "invalid suffix on literal"."""
    need_compiler(cpp=True)
    source = tmp_path / "strmacro.cu"
    source.write_text(STRING_MACRO)
    out = tmp_path / "strmacro.cpp"
    translated = _cli("translate", str(source), "-o", str(out))
    assert translated.returncode == 0, translated.stderr
    exe = tmp_path / "strmacro"
    build = subprocess.run([find_compiler(cpp=True), "-O1", "-fopenmp", "-w", str(out), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert run.stdout == "In node (1,3): done\n"


MYOCYTE_RACE = r"""
__device__ void ecc(double* finavalu, int offset) {
    for (int i = 0; i < 46; i++) finavalu[offset + i] = i;
}
__device__ void cam(double* finavalu, int valu_offset, int com_offset) {
    for (int i = 0; i < 15; i++) finavalu[valu_offset + i] = -i;
    finavalu[com_offset] = 1e-3;  // Rodinia writes d_finavalu[com_offset]; meant d_com[com_offset]
}
__global__ void kernel(double* finavalu, double* com) {
    if (blockIdx.x == 0) {
        if (threadIdx.x == 0) ecc(finavalu, 0);
    } else if (blockIdx.x == 1) {
        if (threadIdx.x == 0) { cam(finavalu, 46, 0); cam(finavalu, 61, 1); cam(finavalu, 76, 2); }
    }
}
"""


def test_myocytes_race_between_blocks_is_reported_by_the_emulator(tmp_path):
    source = tmp_path / "myocyte.cu"
    source.write_text(MYOCYTE_RACE)
    m = polypy.compile(source, threads=2)
    finavalu, com = np.zeros(91), np.zeros(3)
    with pytest.raises(polypy.UserError) as info:
        m.kernel.emulate[2, 32](finavalu, com)
    text = info.value.render()
    assert "data race on global memory finavalu[0]" in text and "block (1, 0, 0)" in text
    assert "block (0, 0, 0)" in text
