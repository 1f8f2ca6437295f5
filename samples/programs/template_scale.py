"""template_scale: alpha * (x - tile mean) from a template <int BLOCK, typename T> kernel,
instantiated by the host as <128, float> and <64, double>."""
from __future__ import annotations

import numpy as np

from samples.spec import ProgramSample


def _centered(x: np.ndarray, block: int, alpha: float) -> np.ndarray:
    out = np.empty_like(x)
    for start in range(0, x.size, block):
        tile = x[start:start + block]
        out[start:start + block] = alpha * (tile - tile.mean())
    return out


def _line(label: str, out: np.ndarray) -> str:
    return "%s: n = %d, sum of squares = %.5f, out[1] = %.6f, out[n-1] = %.6f" % (
        label, out.size, float(np.sum(out * out)), out[1], out[-1])


def expected_stdout() -> str:
    i = np.arange(1000)
    xf = ((i * 37) % 101).astype(np.float32) * np.float32(0.03)
    j = np.arange(333)
    xd = np.sin(0.1 * j) + 0.001 * j
    lines = [
        _line("float<128>", _centered(xf.astype(np.float64), 128, 0.5)),
        _line("double<64>", _centered(xd, 64, 2.0)),
    ]
    return "\n".join(lines) + "\n"


PROGRAM = ProgramSample(
    name="template_scale",
    expected_stdout=expected_stdout,
    float_rtol=1e-4,
    description="template <int BLOCK, typename T> kernel instantiated by two host launches "
                "(<128, float> and <64, double>)",
)
