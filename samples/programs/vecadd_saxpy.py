"""vecadd_saxpy: c = a + b, then y = 2 c + y on the device; sums printed by the host."""
from __future__ import annotations

import numpy as np

from samples.spec import ProgramSample

N = 100000
BLOCK = 256


def expected_stdout() -> str:
    f32 = np.float32
    i = np.arange(N)
    a = (i % 100).astype(f32) * f32(0.01)
    b = ((i * 7) % 13).astype(f32) * f32(0.5)
    y = f32(1.0) - (i % 5).astype(f32) * f32(0.25)
    c = a + b
    y = f32(2.0) * c + y
    mid = N // 2 + 3
    lines = [
        "n = %d, blocks = %d" % (N, -(-N // BLOCK)),
        "sum(c) = %.4f" % c.astype(np.float64).sum(),
        "sum(y) = %.4f" % y.astype(np.float64).sum(),
        "y[0] = %.5f, y[%d] = %.5f, y[%d] = %.5f" % (y[0], mid, y[mid], N - 1, y[N - 1]),
    ]
    return "\n".join(lines) + "\n"


PROGRAM = ProgramSample(
    name="vecadd_saxpy",
    expected_stdout=expected_stdout,
    float_rtol=1e-4,
    description="two dependent kernels (vecadd then saxpy) with cudaMalloc/cudaMemcpy round trips",
)
