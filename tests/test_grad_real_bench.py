"""bench/grad_real.py's machinery on kernels of our own written into tmp_path (the real suites,
PolyBench/GPU and Rodinia, are not needed): a stencil with a type switch checked against finite
differences in float64 and timed in both types (and as one kernel, ``--compare-one-kernel``), a kernel whose integer array needs contents, a
gradient that is wrong on purpose (a rule replaced by a wrong one) reported WRONG, and the
table's geomean line."""
from __future__ import annotations

import pytest

from bench import grad_real
from bench.grad_real_kernels import RealKernel, all_kernels

STENCIL = r"""
#ifndef DATA_TYPE
#define DATA_TYPE float
#endif
#define W 64
__global__ void blur(int ni, int nj, const DATA_TYPE* A, DATA_TYPE* B)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i > 0 && j > 0 && i < ni - 1 && j < nj - 1)
        B[i * W + j] = 0.5f * A[(i - 1) * W + j] + A[i * W + (j + 1)] * A[i * W + (j - 1)];
}
"""

GATHER = r"""
__global__ void gather(int n, const int* idx, const float* x, float* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = sqrtf(x[idx[i]]) * x[i];
}
"""


def _kernels(root):
    (root / "s").mkdir()
    (root / "s" / "blur.cu").write_text(STENCIL)
    (root / "s" / "gather.cu").write_text(GATHER)
    blur = RealKernel("polybench", "BLUR", "s/blur.cu", "blur", lambda s: {}, lambda s: {"ni": s, "nj": s},
                      lambda s: ((-(-s // 32), -(-s // 8), 1), (32, 8, 1)), 64, 12, real="DATA_TYPE")
    gather = RealKernel("rodinia", "gather", "s/gather.cu", "gather", lambda s: {}, lambda s: {"n": s},
                        lambda s: ((-(-s // 64), 1, 1), (64, 1, 1)), 1024, 50,
                        arrays=lambda s: {"idx": s, "x": s, "y": s},
                        fill={"idx": lambda rng, s, count: rng.integers(0, s, count)})
    return blur, gather


def test_rows_check_and_time_our_own_kernels(tmp_path) -> None:
    blur, gather = _kernels(tmp_path)
    rows = [grad_real.bench_one(k, tmp_path, repeat=2, check=True, report=True, one_kernel=k is blur)
            for k in (blur, gather)]
    assert rows[0]["check"] == "ok" and rows[0]["check_detail"].startswith("float64"), rows[0]
    assert rows[1]["check"] == "ok" and rows[1]["check_detail"].startswith("float32"), rows[1]
    assert isinstance(rows[0]["float32"], float) and isinstance(rows[0]["float64"], float)
    assert isinstance(rows[1]["float32"], float) and "float64" not in rows[1]
    # the stencil input's adjoint in tap launches (polypy.driver.gathered), also timed as one kernel
    assert any("adjoint of A" in line and ": gather (" in line for line in rows[0]["report"]), rows[0]["report"]
    assert isinstance(rows[0]["float32_one"], float) and isinstance(rows[0]["float64_one"], float)
    assert "float32_one" not in rows[1]
    table = grad_real.format_table(rows)
    assert "BLUR/blur" in table and "gather/gather" in table and "geomean float32: " in table
    assert "(one kernel " in table and "geomean float32_one: " in table


def test_a_wrong_gradient_is_reported_wrong(tmp_path, monkeypatch) -> None:
    blur, _ = _kernels(tmp_path)
    real = grad_real.Setup.run_gradient

    def off_by_a_bit(self, full):
        real(self, full)
        full["d_A"][self.size * 64 // 2] += 1e-3  # one element of the gradient wrong
    monkeypatch.setattr(grad_real.Setup, "run_gradient", off_by_a_bit)
    ok, detail = grad_real.finite_difference_check(blur, tmp_path)
    assert not ok, detail


def test_refusals_and_missing_checkouts_are_rows_not_crashes(tmp_path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "bad.cu").write_text("__global__ void bad(float* x) { x[0] = __undefined_thing(x[1]); }\n")
    bad = RealKernel("rodinia", "bad", "s/bad.cu", "bad", lambda s: {}, lambda s: {}, lambda s: ((1, 1, 1), (1, 1, 1)),
                     1, 1)
    row = grad_real.bench_one(bad, tmp_path, repeat=1, check=True, report=False)
    assert "refused" in row or "error" in row
    # the suites' rows name files inside a checkout; none of them exists here: nothing is run
    assert grad_real.main(["--polybench", str(tmp_path), "--rodinia", str(tmp_path), "--no-check",
                           "--json", str(tmp_path / "out.json")]) == 0
    assert len(all_kernels()) >= 60


@pytest.mark.parametrize("values,expected", [([2.0, 8.0], 4.0), ([], None)])
def test_geomean(values, expected) -> None:
    got = grad_real.geomean(values)
    assert got == expected if expected is None else abs(got - expected) < 1e-12
