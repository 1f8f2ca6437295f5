"""The benchmark's reports: JSON result files, plots, progress lines.

Runs the real machinery (``python -m bench``, ``python -m bench.grad``, ``python -m bench.plot``)
at ``--small`` sizes on one or two kernels, everything written under tmp_path (results, the
OpenMP library, polypy's caches). Nothing here looks at how fast anything is: the checks are on
the structure of what is written and on its internal consistency (each ratio is the quotient of
the times the same file records).
"""
from __future__ import annotations

import json
import math
import os
import pathlib
import re
import struct
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNELS = ("saxpy", "reduce_sum")
VARIANTS = ("omp", "numpy", "polypy-llvm")


def _have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _env(tmp: pathlib.Path, *, pythonpath: tuple[pathlib.Path, ...] = ()) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), str(ROOT)])
    env["POLYPY_CACHE_DIR"] = str(tmp / "cache")
    env["POLYPY_BENCH_BUILD_DIR"] = str(tmp / "build")
    env["MPLCONFIGDIR"] = str(tmp / "mpl")
    return env


def _run(tmp: pathlib.Path, module: str, *args: str, pythonpath: tuple[pathlib.Path, ...] = ()
         ) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=tmp, env=_env(tmp, pythonpath=pythonpath),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"python -m {module} failed:\n{done.stdout}\n{done.stderr}"
    return done


def _check_png(path: pathlib.Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 100 and height > 100


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    """One small run of two kernels under three variants: (directory, JSON document, process)."""
    tmp = tmp_path_factory.mktemp("bench")
    done = _run(tmp, "bench", "--small", "--kernels", ",".join(KERNELS), "--variants", ",".join(VARIANTS),
                "--threads", "2", "--repeat", "2", "--json", str(tmp / "out.json"))
    return tmp, json.loads((tmp / "out.json").read_text()), done


def test_json_records_machine_sizes_gate_and_times(bench_run):
    from samples.spec import all_samples

    _, doc, _ = bench_run
    assert doc["kind"] == "bench" and doc["size"] == "small" and doc["threads"] == 2
    machine = doc["machine"]
    assert machine["threads"] == 2 and machine["cores"] >= 1 and machine["cpu"]
    assert machine["stream_gbs"] == doc["stream"]["gbs"] == max(doc["stream"]["measurements"]) > 0
    assert len(doc["stream"]["measurements"]) == len(KERNELS) + 1  # before every kernel and after the last
    assert doc["variants"] == list(VARIANTS)
    assert [k["kernel"] for k in doc["kernels"]] == list(KERNELS)
    samples = {s.name: s for s in all_samples()}
    for k in doc["kernels"]:
        largest = max(samples[k["kernel"]].cases, key=lambda c: math.prod(c.grid) * math.prod(c.block))
        assert k["sizes"] == largest.sizes and k["grid"] == list(largest.grid) and k["block"] == list(largest.block)
        assert k["bytes"] > 0
        assert set(k["variants"]) == set(VARIANTS)
        for name, v in k["variants"].items():
            assert v["status"] == "ok" and v["correct"] is True, (k["kernel"], name, v["message"])
            assert 1 <= len(v["runs_s"]) <= 2 and all(t > 0 for t in v["runs_s"])
            assert v["best_s"] == min(v["runs_s"])
            assert v["gb_per_s"] == pytest.approx(k["bytes"] / v["best_s"] / 1e9)


def test_json_ratios_are_quotients_of_the_recorded_times(bench_run):
    _, doc, _ = bench_run
    for k in doc["kernels"]:
        best = {name: v["best_s"] for name, v in k["variants"].items()}
        for name, v in k["variants"].items():
            assert v["ratio_vs_omp"] == pytest.approx(best["omp"] / best[name])
            assert v["ratio_vs_numpy"] == pytest.approx(best["numpy"] / best[name])
        assert k["variants"]["omp"]["ratio_vs_omp"] == pytest.approx(1.0)
    for name in ("numpy", "polypy-llvm"):
        ratios = [k["variants"][name]["ratio_vs_omp"] for k in doc["kernels"]]
        assert doc["geomean_ratio_vs_omp"][name] == pytest.approx(math.prod(ratios) ** (1 / len(ratios)))
    assert set(doc["geomean_ratio_vs_omp"]) == {"numpy", "polypy-llvm"}
    assert set(doc["geomean_ratio_vs_numpy"]) == {"omp", "polypy-llvm"}


def test_progress_lines_on_stderr_tables_on_stdout(bench_run):
    _, _, done = bench_run
    lines = done.stderr.splitlines()
    for i, name in enumerate(KERNELS, start=1):
        line = next((x for x in lines if x.startswith(f"[{i}/{len(KERNELS)}] {name}:")), None)
        assert line is not None, done.stderr
        for variant in VARIANTS:
            assert f"{variant} ... ok" in line
        assert re.search(r"done, 3 of 3 timed \(\d+\.\d s, \d+ s in all\)$", line), line
    assert "[1/" not in done.stdout
    assert "Speed relative to the hand-written OpenMP port" in done.stdout
    assert "Speed relative to the hand-written OpenMP port" not in done.stderr


def test_plot_is_written_next_to_the_json(bench_run):
    pytest.importorskip("matplotlib", reason="matplotlib (the bench extra) is not installed: no plot to check")
    tmp, _, done = bench_run
    _check_png(tmp / "out.png")
    assert f"plot written to {tmp / 'out.png'}" in done.stdout


def test_grad_json_and_a_plot_of_both_files(bench_run):
    tmp, _, _ = bench_run
    done = _run(tmp, "bench.grad", "--small", "--kernels", "saxpy", "--variants", "no-opt", "--repeat", "2",
                "--json", str(tmp / "grad.json"))
    assert re.search(r"^\[1/1\] saxpy \(gradient\): grad \.\.\. ok, no-opt \.\.\. ok,", done.stderr, re.M), done.stderr
    doc = json.loads((tmp / "grad.json").read_text())
    assert doc["kind"] == "grad" and doc["variants"] == ["grad", "no-opt"]
    [k] = doc["kernels"]
    assert k["kernel"] == "saxpy" and k["fwd_s"] > 0 and k["inputs"] > 0
    for name in ("grad", "no-opt"):
        v = k["variants"][name]
        assert v["status"] == "ok"
        assert v["ratio_vs_fwd"] == pytest.approx(v["best_s"] / k["fwd_s"])
        assert doc["geomean_ratio_vs_fwd"][name] == pytest.approx(v["ratio_vs_fwd"])

    pytest.importorskip("matplotlib", reason="matplotlib (the bench extra) is not installed: no plot to check")
    done = _run(tmp, "bench.plot", str(tmp / "out.json"), str(tmp / "grad.json"), "-o", str(tmp / "both.png"),
                "--svg")
    _check_png(tmp / "both.png")
    assert (tmp / "both.svg").read_text().lstrip().startswith("<?xml")


def test_wrong_variant_is_recorded_untimed_and_marked_in_the_plot(tmp_path, monkeypatch):
    """The correctness gate in the JSON: a variant with a wrong answer has correct=false and no
    times, and the plot still draws (marking it)."""
    import bench.build
    from bench.harness import TimingOptions, bench_samples, run_benchmarks
    from bench.omp_ports import make_omp_variant
    from bench.report import to_json

    monkeypatch.setattr(bench.build, "BUILD_DIR", tmp_path / "build")

    def make_broken(sample, case):
        def run(args):
            args["y"][:] = 0.0
        return run

    [saxpy] = bench_samples(["saxpy"])
    report = run_benchmarks([saxpy], {"omp": make_omp_variant, "broken": make_broken}, size="small",
                            options=TimingOptions(repeat=1, warmup=0, budget_s=0.1))
    doc = to_json(report)
    broken = doc["kernels"][0]["variants"]["broken"]
    assert broken["status"] == "wrong" and broken["correct"] is False
    assert "y:" in broken["message"] and "best_s" not in broken
    assert doc["kernels"][0]["variants"]["omp"]["correct"] is True
    assert doc["geomean_ratio_vs_omp"] == {"broken": None}

    from bench import plot

    [panel], _ = plot.panels([doc])  # no numpy variant: no panel against NumPy
    assert panel["marks"] == {"broken": ["WRONG"]}
    pytest.importorskip("matplotlib", reason="matplotlib (the bench extra) is not installed: no plot to check")
    written = plot.draw([doc], tmp_path / "wrong.png")
    _check_png(written[0])


def test_without_matplotlib_the_json_is_still_written(tmp_path):
    """A matplotlib that cannot be imported (shadowed on PYTHONPATH): a clear note, the JSON
    anyway, exit status 0; ``--quiet`` silences the progress lines; bench.plot fails cleanly."""
    fake = tmp_path / "fake"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('matplotlib is hidden by the test')\n")
    done = _run(tmp_path, "bench", "--small", "--kernels", "saxpy", "--variants", "omp", "--repeat", "1",
                "--quiet", "--json", str(tmp_path / "x.json"), pythonpath=(fake,))
    doc = json.loads((tmp_path / "x.json").read_text())
    assert doc["kernels"][0]["variants"]["omp"]["status"] == "ok"
    assert not (tmp_path / "x.png").exists()
    assert "matplotlib is not installed" in done.stderr and "pip install" in done.stderr
    assert "[1/1]" not in done.stderr and "Traceback" not in done.stderr

    failed = subprocess.run([sys.executable, "-m", "bench.plot", str(tmp_path / "x.json")], cwd=tmp_path,
                            env=_env(tmp_path, pythonpath=(fake,)), capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1
    assert failed.stderr.startswith("error: no plot: matplotlib is not installed") and "Traceback" not in failed.stderr
