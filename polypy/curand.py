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
two tables of 32 matrices each: ``A^(4^k)`` (offsets) and ``A^(2^67 * 4^k)`` (subsequences),
k = 0..31 (64-bit counts). A matrix is 160 rows of 5 words: row ``i`` is the image of the state
whose only set bit is bit ``i % 32`` of word ``i // 32``; the image of a state is the xor of the
rows of its set bits.

``python -m polypy.curand`` writes ``polypy/runtime/curand_jump_tables.h``; a test checks
the committed header against this module.
"""
from __future__ import annotations

import functools
import pathlib

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
HEADER = pathlib.Path(__file__).resolve().parent / "runtime" / "curand_jump_tables.h"


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


def step_matrix() -> np.ndarray:
    """``A`` as a 160x160 bit matrix, row ``i`` the image of unit state ``i`` (row-vector form)."""
    rows = []
    for i in range(BITS):
        unit = [0] * WORDS
        unit[i // 32] = 1 << (i % 32)
        rows.append(_bits(xorwow_step(unit)))
    return np.array(rows, dtype=np.uint8)


def _mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return ((a.astype(np.int64) @ b.astype(np.int64)) & 1).astype(np.uint8)


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
            out.append(tuple(w for row in m for w in _words(row)))
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


def header_text() -> str:
    offsets, sequences = jump_tables()

    def array(name: str, tables) -> str:
        lines = [f"static __device__ const unsigned int {name}[{MATRICES}][{WORDS * BITS}] = {{"]
        for m in tables:
            lines.append("{")
            for start in range(0, len(m), 10):
                lines.append(",".join(f"0x{w:08x}u" for w in m[start:start + 10]) + ",")
            lines.append("},")
        lines.append("};")
        return "\n".join(lines)

    return ("/* polypy's jump matrices of XORWOW (cuRAND's default generator), generated by\n"
            " * `python -m polypy.curand` from the algorithm: polypy_xorwow_offset_jump[k] is A^(4^k),\n"
            " * polypy_xorwow_sequence_jump[k] is A^(2^67 * 4^k), A the step of the 160 xorshift bits.\n"
            " * Row i (5 words) is the image of the state with only bit i set. Do not edit. */\n"
            "#ifndef POLYPY_CURAND_JUMP_TABLES_H\n#define POLYPY_CURAND_JUMP_TABLES_H\n"
            + array("polypy_xorwow_offset_jump", offsets) + "\n"
            + array("polypy_xorwow_sequence_jump", sequences) + "\n#endif\n")


if __name__ == "__main__":
    HEADER.write_text(header_text(), encoding="utf-8")
