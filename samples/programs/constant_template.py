"""constant_template: cubic polynomial with __constant__ coefficients, templated block reduction."""
from __future__ import annotations

import numpy as np

from samples.spec import ProgramSample

N = 50000
COEF = (1.0, 0.5, 0.25, 0.125)


def _inputs() -> np.ndarray:
    """The program's LCG: state = state * 1664525 + 1013904223 (mod 2^32), x = (state >> 8) / 2^24 * 2 - 1."""
    out = np.empty(N, dtype=np.float32)
    state = 12345
    for i in range(N):
        state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
        out[i] = (state >> 8) / 16777216.0 * 2.0 - 1.0  # exact in float32
    return out


def expected_stdout() -> str:
    x = _inputs().astype(np.float64)
    c0, c1, c2, c3 = COEF
    y = ((c3 * x + c2) * x + c1) * x + c0
    total = y.sum()
    lines = [
        "n = %d" % N,
        "total<256> = %.2f" % total,
        "total<128> = %.2f" % total,
        "host sum = %.2f" % total,
        "y[0] = %.6f, y[%d] = %.6f" % (y[0], N - 1, y[N - 1]),
    ]
    return "\n".join(lines) + "\n"


PROGRAM = ProgramSample(
    name="constant_template",
    expected_stdout=expected_stdout,
    float_rtol=1e-4,
    description="__constant__ via cudaMemcpyToSymbol, template<int BLOCK> kernel at two block sizes, "
                "atomicAdd reduction, cudaEvent timing (not printed), error checks",
)
