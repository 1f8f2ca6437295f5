"""cuRAND's device API on the Python side: the state records as NumPy dtypes, and the jump
matrices of the XORWOW generator, computed from the algorithm.

States in device memory (``curandState* states`` parameters) are passed through the Python API
as structured arrays of the C layout: ``np.zeros(n, polypy.curand.XORWOW_STATE)`` or
``PHILOX_STATE`` (48 and 64 bytes, as ``sizeof`` says in CUDA).

XORWOW (Marsaglia 2003) keeps five 32-bit words ``v[0..4]`` and a Weyl counter ``d``. One step
shifts the words down and makes a new ``v[4]`` from ``v[0]`` and ``v[4]`` with shifts and xors: a
linear map ``A`` over GF(2) of the 160 bits. Jumping ``n`` steps ahead is the matrix power
``A^n``; the counter simply advances by ``362437 * n`` (mod 2^32).

``curand_init(seed, subsequence, offset, &s)`` jumps ``subsequence * 2^67 + offset`` steps. Our
``curand_kernel.h`` does that in O(log n) matrix-vector products, one base-4 digit at a time, with
64 matrices (``polypy_xorwow_matrices``): ``A^(4^k)`` (offsets), then ``A^(2^67 * 4^k)``
(subsequences), k = 0..31 (64-bit counts). A matrix is 160 rows of 5 words: row ``i`` is the image of the state
whose only set bit is bit ``i % 32`` of word ``i // 32``; the image of a state is the xor of the
rows of its set bits.

The table is not carried as text. ``polypy/runtime/curand_jump_tables.h`` declares it
(uninitialized) and, for the C++ of a translated program, computes it before ``main`` by the same
squarings; for the IR (the LLVM backend of the Python API, the emulator, kernel libraries) the
frontend gives the declared array the words of ``matrix_words()`` as its initializer, which the
backends copy into the array's storage when the module is loaded. A test checks that both agree
and that the matrices are powers of the one-step map.
"""
from __future__ import annotations

import functools

import numpy as np

WORDS = 5
BITS = 32 * WORDS
MATRICES = 32          # base-4 digits of a 64-bit count
SEQUENCE_SHIFT = 67    # a subsequence is 2^67 steps
XORWOW_STATE = np.dtype([("d", np.uint32), ("v", np.uint32, (5,)), ("boxmuller_flag", np.int32),
                         ("boxmuller_flag_double", np.int32), ("boxmuller_extra", np.float32),
                         ("boxmuller_extra_double", np.float64)], align=True)
PHILOX_STATE = np.dtype([("ctr", np.uint32, (4,)), ("output", np.uint32, (4,)), ("key", np.uint32, (2,)),
                         ("STATE", np.uint32), ("boxmuller_flag", np.int32), ("boxmuller_flag_double", np.int32),
                         ("boxmuller_extra", np.float32), ("boxmuller_extra_double", np.float64)], align=True)
TABLE = "polypy_xorwow_matrices"  # the array curand_jump_tables.h declares


def xorwow_step(v: list[int]) -> list[int]:
    """One step of the xorshift part of XORWOW on the five words (the counter left out)."""
    t = v[0] ^ (v[0] >> 2)
    new = (v[4] ^ ((v[4] << 4) & 0xFFFFFFFF)) ^ (t ^ ((t << 1) & 0xFFFFFFFF))
    return [v[1], v[2], v[3], v[4], new & 0xFFFFFFFF]


def _bits(words: list[int]) -> np.ndarray:
    return np.array([(words[i // 32] >> (i % 32)) & 1 for i in range(BITS)], dtype=np.uint8)


def _words(bits: np.ndarray) -> list[int]:
    out = [0] * WORDS
    for i in np.flatnonzero(bits):
        out[i // 32] |= 1 << (i % 32)
    return out


def _row_words(m: np.ndarray) -> np.ndarray:
    """The 800 words of a bit matrix, row by row (bit ``i % 32`` of word ``i // 32`` of a row)."""
    weights = np.uint64(1) << np.arange(32, dtype=np.uint64)
    return (m.reshape(BITS, WORDS, 32).astype(np.uint64) * weights).sum(axis=2).reshape(-1)


def step_matrix() -> np.ndarray:
    """``A`` as a 160x160 bit matrix, row ``i`` the image of unit state ``i`` (row-vector form)."""
    rows = []
    for i in range(BITS):
        unit = [0] * WORDS
        unit[i // 32] = 1 << (i % 32)
        rows.append(_bits(xorwow_step(unit)))
    return np.array(rows, dtype=np.uint8)


def _mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a b`` over GF(2): row ``i`` is the xor of the rows of ``b`` that row ``i`` of ``a`` selects."""
    rows = np.where(a.astype(bool)[:, :, None], _row_words(b).reshape(BITS, WORDS)[None, :, :], np.uint64(0))
    words = np.bitwise_xor.reduce(rows, axis=1)
    return ((words[:, :, None] >> np.arange(32, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8).reshape(BITS, BITS)


def _square_times(m: np.ndarray, times: int) -> np.ndarray:
    for _ in range(times):
        m = _mul(m, m)
    return m


@functools.lru_cache(maxsize=None)
def jump_tables() -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]:
    """(offset matrices ``A^(4^k)``, subsequence matrices ``A^(2^67 * 4^k)``), k = 0..31, each
    as its 800 words (row by row)."""
    def table(first: np.ndarray) -> tuple[tuple[int, ...], ...]:
        out, m = [], first
        for _ in range(MATRICES):
            out.append(tuple(int(w) for w in _row_words(m)))
            m = _square_times(m, 2)
        return tuple(out)

    a = step_matrix()
    return table(a), table(_square_times(a, SEQUENCE_SHIFT))


def jump(v: list[int], matrix: tuple[int, ...]) -> list[int]:
    """The image of state ``v`` under one table matrix (what the header's loop computes)."""
    out = [0] * WORDS
    for i in range(BITS):
        if (v[i // 32] >> (i % 32)) & 1:
            row = matrix[WORDS * i: WORDS * (i + 1)]
            out = [o ^ r for o, r in zip(out, row)]
    return out


@functools.lru_cache(maxsize=None)
def matrix_words() -> tuple[int, ...]:
    """The 64 x 800 words of ``polypy_xorwow_matrices``, flat: the offset matrices, then the
    subsequence matrices."""
    offsets, sequences = jump_tables()
    return tuple(w for m in offsets + sequences for w in m)
