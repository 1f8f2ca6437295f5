"""bench/grad_real.py's machinery on kernels of our own written into tmp_path (the real suites,
PolyBench/GPU and Rodinia, are not needed): a stencil with a type switch checked against finite
differences in float64 and timed in both types (and as one kernel, ``--compare-one-kernel``), a kernel whose integer array needs contents, a
gradient that is wrong on purpose (a rule replaced by a wrong one) reported WRONG, the
table's geomean line and summary (target, worst kernels), timing by CPU time, a program with a
double-precision version of its own timed in both types, and the rows the table lists."""
from __future__ import annotations

import dataclasses
import time

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


def test_summary_names_the_worst_kernels_and_the_target() -> None:
    rows = [{"kernel": "A/a", "float32": 2.0, "float64": 9.5}, {"kernel": "B/b", "float32": 12.0},
            {"kernel": "C/c", "float32": 1.5, "float64": 2.5, "check": "WRONG"}, {"kernel": "D/d", "refused": "no"}]
    lines = grad_real.summary(rows, worst=3)
    assert lines[0].startswith("geomean float32: ") and "1 above 8x" in lines[0] and lines[0].endswith(": not met)")
    assert "none above 8x: not met" in lines[1]  # float64: 9.5 is above 8x
    assert lines[2] == "worst 3: B/b 32 12.0x, A/a 64 9.5x, C/c 64 2.5x"
    assert lines[3] == "not timed (1): D/d" and lines[4] == "WRONG gradients (1): C/c"
    met = grad_real.summary([{"kernel": "A/a", "float32": 2.0}, {"kernel": "B/b", "float32": 4.0}], worst=0)
    assert met == ["geomean float32: 2.83x over 2 kernels, 0 above 8x, max 4.0x "
                   "(target: geomean <= 3x, none above 8x: met)"]


def test_interleaved_timing_by_a_given_clock() -> None:
    from bench.timing import time_interleaved
    ticks = iter(range(0, 1000, 5))  # each reading 5 units after the last: every run takes 5

    def clock() -> float:
        return float(next(ticks))
    got = time_interleaved({"a": (lambda args: None, {}), "b": (lambda args: None, {})}, repeat=3, warmup=1,
                           budget_s=100.0, clock=clock)
    assert got["a"].runs == (5.0, 5.0, 5.0) and got["b"].runs == (5.0, 5.0, 5.0)


SAXPY = r"""
__global__ void saxpy(int n, REAL a, const REAL* x, REAL* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] * x[i] + y[i];
}
"""


def test_a_program_with_a_double_precision_version_is_timed_in_both_types(tmp_path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "f.cu").write_text("#define REAL float\n" + SAXPY)
    (tmp_path / "s" / "d.cu").write_text("#define REAL double\n" + SAXPY)
    k = RealKernel("rodinia", "saxpy", "s/f.cu", "saxpy", lambda s: {}, lambda s: {"n": s},
                   lambda s: ((-(-s // 64), 1, 1), (64, 1, 1)), 256, 100, source64="s/d.cu")
    assert k.dtypes == ("float32", "float64") and k.source_for("float64") == "s/d.cu"
    row = grad_real.bench_one(k, tmp_path, repeat=1, check=True, report=True, clock=time.process_time, threads=1)
    # the check runs on the double-precision source (float64's tolerance), the report comes from its build
    assert row["check"] == "ok" and row["check_detail"].startswith("float64"), row
    assert any("adjoint of x" in line for line in row["report"]), row["report"]
    assert isinstance(row["float32"], float) and isinstance(row["float64"], float)
    only = dataclasses.replace(k, source="s/d.cu", source64=None, double_only=True)
    assert only.dtypes == ("float64",)


def test_the_table_lists_every_differentiated_program() -> None:
    names = {k.name for k in all_kernels()}
    for name in ("srad_v1/srad", "srad_v1/reduce", "kmeans/invert_mapping", "particlefilter/likelihood_kernel",
                 "cfd/cuda_initialize_variables"):
        assert name in names, name
    by_name = {k.name: k for k in all_kernels()}
    assert by_name["cfd/cuda_compute_flux"].dtypes == ("float32", "float64")
    assert by_name["particlefilter/sum_kernel"].dtypes == ("float64",)
    assert by_name["nn/euclid"].dtypes == ("float32",) and by_name["GEMM/gemm_kernel"].dtypes == ("float32", "float64")
