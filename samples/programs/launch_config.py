"""launch_config: kernels launched with block shapes spelled every way (literal, const int,
constexpr, macro, dim3 variables built from macros, ints, members, reassignment) and with shapes
known only at run time (a dim3 changed in an ``if``, doubled in a loop): NumPy reference."""
from __future__ import annotations

import numpy as np

from samples.spec import ProgramSample

N = 66000
W, H = 1024, 64


def expected_stdout() -> str:
    f32 = np.float32
    i = np.arange(N)
    x = (i % 5).astype(f32)
    y = (i % 3).astype(f32)
    lines = []
    for a in (1.0, 2.0, 1.0, 1.0):
        y = f32(a) * x + y
    lines.append("axpy: total = %.1f" % y.astype(np.float64).sum())
    rows = np.repeat(np.arange(H), W).astype(f32)
    out = f32(2.0) * x[:W * H] + rows
    lines.append("scale2d 16x16: total = %.1f" % out.astype(np.float64).sum())
    lines.append("scale2d 8x4: total = %.1f" % out.astype(np.float64).sum())
    for a in (-1.0, 1.0):
        y = f32(a) * x + y
    lines.append("axpy: total = %.1f" % y.astype(np.float64).sum())

    def sums(what: str, block: int) -> str:
        blocks = -(-N // block)
        padded = np.zeros(blocks * block, dtype=np.float64)
        padded[:N] = x
        per_block = padded.reshape(blocks, block).sum(axis=1)
        return "%s: %d blocks of %d, sums[1] = %.1f, total = %.1f" % (what, blocks, block, per_block[1],
                                                                     per_block.sum())

    lines.append(sums("if", 128 if x.astype(np.float64).sum() > 100.0 else 64))
    lines += [sums("loop", b) for b in (32, 64, 128)]
    return "\n".join(lines) + "\n"


PROGRAM = ProgramSample(
    name="launch_config",
    expected_stdout=expected_stdout,
    float_rtol=1e-6,
    description="block shapes from literals, constants, macros and dim3 variables (specialized, coarsened) "
                "and from run-time values (generic)",
)
