"""``polypy grad`` on the command line: outputs, options, report, and errors (no partial files)."""
from __future__ import annotations

import importlib.util

import pytest

from polypy.driver.cli import main
from samples.spec import sample

SAXPY = str(sample("saxpy").source)


def test_default_output_is_cuda_with_the_original_and_the_gradient(tmp_path) -> None:
    out = tmp_path / "g.cu"
    assert main(["grad", SAXPY, "--kernel", "saxpy", "-D", "REAL=double", "-o", str(out)]) == 0
    text = out.read_text()
    assert "#define REAL double" in text
    assert "__global__ void saxpy(int n, REAL a" in text  # the original source, verbatim
    assert "__global__ void saxpy_grad(int n, double a, double* d_a, const double* x, double* d_x, double* y, " \
           "double* d_y)" in text


def test_forward_mode_wrt_const_and_ir(tmp_path, capsys) -> None:
    out = tmp_path / "f.cu"
    assert main(["grad", SAXPY, "--kernel", "saxpy", "--mode", "forward", "--wrt", "x", "-o", str(out)]) == 0
    assert "__global__ void saxpy_fwd(int n, float a, const float* x, float* d_x, float* y, float* d_y)" \
        in out.read_text()
    assert main(["grad", SAXPY, "--kernel", "saxpy", "--const", "a,y", "--emit", "ir"]) == 0
    text = capsys.readouterr().out
    assert "kernel saxpy_grad(n: i32, a: f32, x: const f32*, d_x: f32*, y: f32*) {" in text


def test_report_goes_to_stderr(tmp_path, capsys) -> None:
    assert main(["grad", SAXPY, "--kernel", "saxpy", "--report", "-o", str(tmp_path / "g.cu")]) == 0
    err = capsys.readouterr().err
    assert "saxpy.cu:12:20: adjoint of x[" in err and ": plain (isl:" in err
    assert "scalar parameter a: block-reduction" in err


def test_stencil_report_shows_block_windows_and_no_windows_switches_them_off(tmp_path, capsys) -> None:
    stencil = str(sample("stencil1d").source)
    assert main(["grad", stencil, "--kernel", "stencil1d", "--report", "--emit", "ir"]) == 0
    captured = capsys.readouterr()
    assert ": window (isl: a block reads a window of" in captured.err
    assert "win_" in captured.out
    assert main(["grad", stencil, "--kernel", "stencil1d", "--report", "--no-windows", "--emit", "ir"]) == 0
    captured = capsys.readouterr()
    assert ": window" not in captured.err and ": atomic" in captured.err
    assert "win_" not in captured.out


def test_cpp_output_goes_through_the_c_backend(tmp_path, capsys) -> None:
    out = tmp_path / "g.cpp"
    code = main(["grad", SAXPY, "--kernel", "saxpy", "--emit", "cpp", "-o", str(out)])
    if importlib.util.find_spec("codegen.c") is None:
        assert code == 1 and "codegen.c" in capsys.readouterr().err and not out.exists()
    else:
        assert code == 0 and "saxpy_grad" in out.read_text()


def test_unknown_kernel_is_an_error_without_output(tmp_path, capsys) -> None:
    out = tmp_path / "g.cu"
    assert main(["grad", SAXPY, "--kernel", "nope", "-o", str(out)]) == 1
    assert "no kernel named 'nope'" in capsys.readouterr().err
    assert not out.exists()


def test_refusal_points_at_the_source_line(tmp_path, capsys) -> None:
    src = tmp_path / "m.cu"
    src.write_text("""__global__ void peak(const float* x, float* best, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicExch(best, x[i] * x[i]);
}
""")
    out = tmp_path / "g.cu"
    assert main(["grad", str(src), "--kernel", "peak", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{src}:5:" in err and "no derivative rule for atomic.exch" in err
    assert "atomicExch(best, x[i] * x[i]);" in err and "^" in err
    assert not out.exists()


@pytest.mark.parametrize("flag", [["--wrt", "n"], ["--const", "zz"]])
def test_bad_parameter_names(flag, capsys) -> None:
    assert main(["grad", SAXPY, "--kernel", "saxpy", *flag]) == 1
    assert "error:" in capsys.readouterr().err


def test_scratch_outputs_leave_out_their_stores(tmp_path, capsys) -> None:
    softmax = str(sample("softmax_rows").source)
    assert main(["grad", softmax, "--kernel", "softmax_rows", "--scratch-outputs", "y", "--report", "--emit", "ir"]) == 0
    captured = capsys.readouterr()
    assert "softmax_rows.cu:12:17: value y: scratch (output: its stores are left out" in captured.err
    assert "d_y is only read when" in captured.err
    grad = captured.out[captured.out.index("kernel softmax_rows_grad("):]
    assert "\n    y[" not in grad and "  y[" not in grad
    assert main(["grad", softmax, "--kernel", "softmax_rows", "--emit", "ir"]) == 0
    full = capsys.readouterr().out
    assert "  y[" in full[full.index("kernel softmax_rows_grad("):]


@pytest.mark.parametrize("flags,message", [
    (["--scratch-outputs", "x"], "'x' is not an output (a non-const pointer parameter) of kernel 'softmax_rows'"),
    (["--scratch-outputs", "cols"], "'cols' is not an output"),
    (["--scratch-outputs", "y", "--mode", "forward"], "--scratch-outputs is for reverse mode"),
])
def test_scratch_outputs_must_be_outputs_in_reverse_mode(tmp_path, capsys, flags, message) -> None:
    out = tmp_path / "g.cu"
    softmax = str(sample("softmax_rows").source)
    assert main(["grad", softmax, "--kernel", "softmax_rows", "-o", str(out)] + flags) == 1
    err = capsys.readouterr().err
    assert "softmax_rows.cu:1:1: error: " in err and message in err and not out.exists()
