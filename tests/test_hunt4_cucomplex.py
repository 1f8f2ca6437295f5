"""``<cuComplex.h>`` in whole programs (issue 36: programs as people write them; the header was
not found before, a located error). polypy/runtime/cuComplex.h gives cuFloatComplex/cuDoubleComplex
and their functions as __host__ __device__ inline functions. The program
(tests/programs/runtime/cucomplex.cu) computes sums, differences, conjugates, products, quotients
(large operands included: the quotient scales both by 1 / (|Re y| + |Im y|)), fused multiply-adds
and absolute values (0 included) in kernels, prints them, and checks them against the same
functions on the host. The printed values are checked here against NumPy, operation by operation
in float32 / float64, compiled and on the emulator."""
from __future__ import annotations

import math
import pathlib
import shutil
import subprocess
import sys

import numpy as np
from c_support import need_compiler

PROGRAM = pathlib.Path(__file__).parent / "programs" / "runtime" / "cucomplex.cu"
N = 6


def _div(a, b, one):
    inv = one / (abs(b[0]) + abs(b[1]))
    ar, ai, br, bi = a[0] * inv, a[1] * inv, b[0] * inv, b[1] * inv
    inv_den = one / (br * br + bi * bi)
    return ((ar * br + ai * bi) * inv_den, (ai * br - ar * bi) * inv_den)


def _abs(z, one, sqrt, largest):
    re, im = abs(z[0]), abs(z[1])
    big, small = (re, im) if re > im else (im, re)
    if big == 0 or big > largest or small > largest:
        return big + small
    ratio = small / big
    return big * sqrt(one + ratio * ratio)


def _mul(a, b):
    return (a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0])


def _fma(x, y, d):
    re = x[0] * y[0] + d[0]
    im = x[0] * y[1] + d[1]
    return (-(x[1] * y[1]) + re, x[1] * y[0] + im)


def _expected() -> str:
    f = np.float32
    fr = [f(1.0), f(3.0), f(0.0), f(-2.5), f(1.0e30), f(7.0)]
    fi = [f(2.0), f(4.0), f(0.0), f(0.75), f(-3.0e30), f(-1.0e-3)]
    lines = []
    a = [(fr[i], fi[i]) for i in range(N)]
    b = [(fi[(i + 1) % N] + f(0.5), fr[(i + 2) % N] - f(1.0)) for i in range(N)]
    with np.errstate(all="ignore"):
        for i in range(N):
            x, y = a[i], b[i]
            vals = [(x[0] + y[0], x[1] + y[1]), (x[0] - y[0], x[1] + y[1]), _mul(x, y), _div(x, y, f(1)),
                    _fma(x, y, (y[0], x[1]))]
            parts = [f"{float(v):.9g}" for pair in vals for v in pair]
            mag = _abs(x, f(1), np.sqrt, f(3.402823466e38))
            lines.append(f"f {i} " + " ".join(parts) + f" {float(mag):.9g}")
        for i in range(N):
            x = (float(a[i][0]), float(a[i][1]))
            y = (float(b[i][0]), 0.1 * i - 0.2)
            vals = [_mul(x, (y[0], -y[1])), _div(x, y, 1.0),
                    _fma(x, y, ((x[0] + y[0]) - y[0], (x[1] + y[1]) - 0.0))]
            parts = [f"{v:.17g}" for pair in vals for v in pair]
            lines.append(f"d {i} " + " ".join(parts) + f" {_abs(x, 1.0, math.sqrt, 1.79769313486231570e+308):.17g}")
    lines.append("PASS")
    return "\n".join(lines) + "\n"


def _run(tmp_path: pathlib.Path, *flags: str) -> None:
    cu = tmp_path / PROGRAM.name
    shutil.copy(PROGRAM, cu)
    done = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(cu), *flags],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == _expected()


def test_cucomplex_header_emulated(tmp_path: pathlib.Path) -> None:
    _run(tmp_path, "--emulate")


def test_cucomplex_header_compiled(tmp_path: pathlib.Path) -> None:
    need_compiler(cpp=True)
    _run(tmp_path)
