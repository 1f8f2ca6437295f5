"""power_iteration: dominant eigenvalue by 30 power iterations, the norm read back each iteration."""
from __future__ import annotations

import numpy as np

from samples.spec import ProgramSample

N, ITERS = 300, 30


def expected_stdout() -> str:
    idx = np.arange(N)
    A = 1.0 / (1.0 + np.abs(idx[:, None] - idx[None, :])) + 2.0 * np.eye(N)
    v = np.ones(N)
    lines = []
    lam = 0.0
    for it in range(ITERS):
        w = A @ v
        norm = np.sqrt(w @ w)
        lam = norm
        v = w / norm
        if it in (0, 9):
            lines.append("iteration %d: |Av| = %.4f" % (it + 1, norm))
    lines.append("lambda = %.4f" % lam)
    lines.append("sum(v) = %.4f, v[0] = %.6e, v[%d] = %.6e" % (v.sum(), v[0], N // 2, v[N // 2]))
    return "\n".join(lines) + "\n"


PROGRAM = ProgramSample(
    name="power_iteration",
    expected_stdout=expected_stdout,
    float_rtol=1e-4,
    description="power iteration: per-iteration cudaMemset, device-to-host read of a norm feeding "
                "the next launch, struct argument by value",
)
