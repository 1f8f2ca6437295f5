"""jacobi_solver: 200 Jacobi sweeps of Laplace's equation, device pointers swapped by the host."""
from __future__ import annotations

import numpy as np

from samples.spec import ProgramSample

NX, NY, ITERS = 100, 70, 200


def expected_stdout() -> str:
    f32 = np.float32
    u = np.zeros((NY, NX), dtype=f32)  # row y, column x
    u[NY - 1, :] = 1.0                 # top edge held at 1
    for _ in range(ITERS):
        nxt = u.copy()
        nxt[1:-1, 1:-1] = f32(0.25) * (u[1:-1, :-2] + u[1:-1, 2:] + u[:-2, 1:-1] + u[2:, 1:-1])
        u = nxt
    lines = [
        "jacobi %dx%d, %d iterations" % (NX, NY, ITERS),
        "sum = %.4f" % u.astype(np.float64).sum(),
        "center = %.6e" % u[NY // 2, NX // 2],
        "below top = %.6f" % u[NY - 2, NX // 2],
    ]
    return "\n".join(lines) + "\n"


PROGRAM = ProgramSample(
    name="jacobi_solver",
    expected_stdout=expected_stdout,
    float_rtol=1e-4,
    description="iterative Jacobi solver: cudaMemset, host loop of launches with std::swap of device pointers",
)
