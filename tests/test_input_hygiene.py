"""Inputs polypy must take cleanly or refuse cleanly (reliability issue, items 6, 8, 9, 10, 11).

6. ``grad --emit cuda`` gives loops whose trip count is known only at launch a fixed tape
   capacity (a macro): each thread checks it on entry instead of writing past the tape.
   ``--emit cpp`` sizes its tapes at run time, so a long run is simply right there.
8. Every command reads a source file the same way (``polypy.sources``): a byte that is not
   UTF-8 is U+FFFD, for ``grad`` as for ``translate`` and ``polypy.distributed``.
9. A scalar argument that its parameter's C type cannot hold is refused, naming the parameter
   (``polypy.launch.bind_arguments``, which every launch path shares), never wrapped.
10. Arrays of arrays and array references passed to device functions are located refusals.
11. ``--threads`` is one argparse type in every command.

The CLI contract for each: ``file:line:col: error:``, the source line and a caret, exit status 1,
no traceback, no output file.
"""
from __future__ import annotations

import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import polypy
from polypy.driver.cli import main
from test_runtime_trips import PER_THREAD_TRIPS

SQUARE_STEPS = """__global__ void square_steps(double* y, int n, int m)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        for (int k = 0; k < m; k++)
            y[i * 4 + k % 4] = y[i * 4 + k % 4] * y[i * 4 + k % 4];
}
"""

# Trip counts that depend on the thread: two tapes, two capacities.
STRIDED = PER_THREAD_TRIPS


def _cli_error(capsys, argv: list[str], out: pathlib.Path | None, where: str, message: str) -> str:
    """``polypy argv`` fails as a user error: status 1, ``where: error: message`` with the source
    line and a caret, no traceback, no output file."""
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"{where}: error: " in err and message in err, err
    lines = err.splitlines()
    at = next(i for i, line in enumerate(lines) if f"{where}: error: " in line)
    assert len(lines) >= at + 3 and lines[at + 2].strip() == "^", err  # the source line, then the caret
    assert "Traceback" not in err
    assert out is None or not out.exists()
    return err


# ------------------------------------------------------------------ 6. tape capacities


def test_cuda_gradient_checks_its_tape_capacity_on_entry(tmp_path) -> None:
    src = tmp_path / "strided.cu"
    src.write_text(STRIDED)
    out = tmp_path / "strided_grad.cu"
    assert main(["grad", str(src), "--kernel", "strided", "-o", str(out)]) == 0
    text = out.read_text()
    body = text[text.index("__global__ void strided_grad("):]
    # one check per capacity, before the kernel's first statement, the need parenthesized whole
    for macro in ("STRIDED_GRAD_TRIPS_0", "STRIDED_GRAD_TRIPS_1"):
        assert f"#define {macro} 1024" in text
        check = next(line for line in body.splitlines() if line.strip().startswith("if (") and f") > {macro})" in line)
        assert check.strip().startswith("if ((")
        assert f"need {macro} >= (" in body and f"-D{macro}=N" in body
    assert body.count("__assert_fail(") == 2
    assert body.index("#if defined(__CUDA_ARCH__) && !defined(POLYPY_DEVICE_H)") < body.index("__assert_fail(") < \
        body.index("#endif")
    assert "device-side assert" in text  # the comment says how a launch that needs more fails
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed: the emitted check cannot be compiled to PTX here")
    # -DNDEBUG (a release build) keeps the check: it is not assert()
    subprocess.run([nvcc, "-DNDEBUG", "--ptx", str(out), "-o", str(tmp_path / "strided_grad.ptx")], check=True,
                   cwd=tmp_path, capture_output=True)
    ptx = (tmp_path / "strided_grad.ptx").read_text()
    assert "__assertfail" in ptx


def _cpp_harness(directory: pathlib.Path, grad_cpp: pathlib.Path) -> pathlib.Path:
    """A program around ``square_steps_grad_launch``: ``./harness m`` prints d_y."""
    harness = directory / "harness.cpp"
    harness.write_text(f"""#include "{grad_cpp.name}"
#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {{
    int m = atoi(argv[1]), n = 40;
    double* y = (double*)malloc(n * 4 * sizeof(double));
    double* d = (double*)malloc(n * 4 * sizeof(double));
    for (int i = 0; i < n * 4; i++) {{ y[i] = 1.0 - 1e-4 * (i % 7); d[i] = 1.0; }}
    dim3 grid = {{2, 1, 1}}, block = {{32, 1, 1}};
    square_steps_grad_launch(grid, block, 0, y, d, n, m);
    for (int i = 0; i < n * 4; i++) printf("%.17g\\n", d[i]);
    free(y); free(d);
    return 0;
}}
""")
    return harness


def test_cpp_gradient_sizes_its_tapes_at_run_time(tmp_path) -> None:
    """--emit cpp does not share the CUDA capacity: its launcher allocates the tapes from the
    arguments, so a run four times longer than the CUDA default is right and stays in bounds."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler: the emitted C++ cannot be compiled here")
    src = tmp_path / "square.cu"
    src.write_text(SQUARE_STEPS)
    out = tmp_path / "square_grad.cpp"
    assert main(["grad", str(src), "--kernel", "square_steps", "--emit", "cpp", "-o", str(out)]) == 0
    assert "TRIPS" not in out.read_text()
    exe = tmp_path / "harness"
    subprocess.run([cxx, "-O1", "-fopenmp", str(_cpp_harness(tmp_path, out)), "-o", str(exe), "-lm"], check=True,
                   cwd=tmp_path, capture_output=True)
    m = 4 * 1024 + 3
    run = subprocess.run([str(exe), str(m)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    got = np.array([float(v) for v in run.stdout.split()])
    mod = polypy.compile(src)
    g = polypy.grad(mod.square_steps)
    y = 1.0 - 1e-4 * (np.arange(160) % 7)
    d_y = np.ones(160)
    g[2, 32](y, d_y, np.int32(40), np.int32(m))
    np.testing.assert_allclose(got, d_y, rtol=1e-12)


def test_translated_cuda_gradient_catches_an_overrun_with_check_bounds(tmp_path) -> None:
    """What the emitted comment promises for `polypy translate` of the CUDA gradient: with
    --check-bounds a launch beyond the capacity stops with a located message; -D raises it."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler: the translated program cannot be compiled here")
    src = tmp_path / "square.cu"
    src.write_text(SQUARE_STEPS)
    assert main(["grad", str(src), "--kernel", "square_steps", "-o", str(tmp_path / "square_grad.cu")]) == 0
    prog = tmp_path / "prog.cu"
    prog.write_text("""#include <cstdio>
#include <cstdlib>
#include "square_grad.cu"
int main(int argc, char** argv) {
    int m = atoi(argv[1]), n = 64;
    double *y, *d;
    cudaMallocManaged(&y, n * 4 * sizeof(double));
    cudaMallocManaged(&d, n * 4 * sizeof(double));
    for (int i = 0; i < n * 4; i++) { y[i] = 1.0; d[i] = 1.0; }
    square_steps_grad<<<2, 32>>>(y, d, n, m);
    cudaDeviceSynchronize();
    printf("%g\\n", d[0]);
    return 0;
}
""")
    exe = tmp_path / "prog"
    assert main(["translate", str(prog), "--check-bounds", "-o", str(tmp_path / "prog.cpp")]) == 0
    subprocess.run([cxx, "-O1", "-fopenmp", str(tmp_path / "prog.cpp"), "-o", str(exe), "-lm"], check=True,
                   cwd=tmp_path, capture_output=True)
    assert subprocess.run([str(exe), "1024"], capture_output=True, timeout=60).returncode == 0
    run = subprocess.run([str(exe), "1500"], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and "out-of-bounds access y_tape[1024]" in run.stderr, run.stderr


# ------------------------------------------------------------------ 8. one way to read sources

LATIN1 = b"// r\xe9sum\xe9: a Latin-1 comment\n" + SQUARE_STEPS.encode()


def test_every_command_reads_a_latin1_source(tmp_path, capsys) -> None:
    src = tmp_path / "latin1.cu"
    src.write_bytes(LATIN1)
    for emit in ("cuda", "cpp", "ir"):
        out = tmp_path / f"grad.{emit}"
        assert main(["grad", str(src), "--kernel", "square_steps", "--emit", emit, "-o", str(out)]) == 0, \
            capsys.readouterr().err
        assert "square_steps_grad" in out.read_text(encoding="utf-8")
    # the CUDA gradient reproduces the file as the frontend read it (as translate's output does)
    assert "// r\ufffdsum\ufffd: a Latin-1 comment" in (tmp_path / "grad.cuda").read_text(encoding="utf-8")
    assert main(["translate", str(src), "-o", str(tmp_path / "t.cpp")]) == 0
    # and a diagnostic shows the line of such a file
    bad = tmp_path / "bad.cu"
    bad.write_bytes(b"// caf\xe9\n__global__ void k(float* y)\n{\n    y[0] = nothing_here;\n}\n")
    _cli_error(capsys, ["grad", str(bad), "--kernel", "k", "-o", str(tmp_path / "g.cu")], tmp_path / "g.cu",
               f"{bad}:4:12", "undeclared identifier 'nothing_here'")


def test_distributed_compile_reads_a_latin1_source(tmp_path) -> None:
    import polypy.distributed as pd

    src = tmp_path / "latin1.cu"
    src.write_bytes(LATIN1)
    mod = pd.compile(object(), src, tasks=1)  # no cluster needed to compile (the client is used at launch)
    assert mod.kernels == ("square_steps",)
    assert "\ufffd" in mod.source.text


# ------------------------------------------------------------------ 9. scalars that do not fit

SCALARS = """__global__ void scale(float* y, int n, unsigned int u, long long w, float a)
{
    int i = threadIdx.x;
    if (i < n)
        y[i] = a * (float)u + (float)w;
}
"""


@pytest.fixture(scope="module")
def scalars_module(tmp_path_factory):
    src = tmp_path_factory.mktemp("scalars") / "scale.cu"
    src.write_text(SCALARS)
    return polypy.compile(src)


def _id(v: object) -> str:
    return repr(v) if len(repr(v)) <= 24 else "huge"


@pytest.mark.parametrize("index,value,param,ctype", [
    (1, 2 ** 32 + 500, "n", "int"),
    (1, -(2 ** 31) - 1, "n", "int"),
    (1, np.int64(2 ** 31), "n", "int"),
    (1, np.uint32(2 ** 31), "n", "int"),
    (1, 1e20, "n", "int"),
    (2, -1, "u", "unsigned int"),
    (2, np.int32(-1), "u", "unsigned int"),
    (2, 2 ** 32, "u", "unsigned int"),
    (3, 2 ** 63, "w", "long long"),
    (4, 10 ** 400, "a", "float"),
], ids=_id)
def test_a_scalar_its_type_cannot_hold_is_refused(scalars_module, index, value, param, ctype) -> None:
    y = np.zeros(4, np.float32)
    args = [y, 4, 3, 5, 2.0]
    args[index] = value
    with pytest.raises(polypy.UserError, match=f"argument '{param}' of kernel 'scale'.* does not fit in {ctype}"):
        scalars_module.scale[1, 4](*args)
    assert not y.any()  # nothing ran


def test_scalars_that_fit_still_convert(scalars_module) -> None:
    y = np.zeros(4, np.float32)
    scalars_module.scale[1, 4](y, 4.0, np.uint8(3), -(2 ** 63), 2.0)
    np.testing.assert_array_equal(y, np.float32(6.0) + np.float32(-(2 ** 63)))
    scalars_module.scale[1, 4](y, 2 ** 31 - 1, 2 ** 32 - 1, 2 ** 63 - 1, np.float64(0.5))
    with pytest.raises(polypy.UserError, match="argument 'n' .* must be an integer, got 2.5"):
        scalars_module.scale[1, 4](y, 2.5, 3, 5, 2.0)


def test_distributed_launch_refuses_a_scalar_that_does_not_fit(tmp_path) -> None:
    import polypy.distributed as pd

    src = tmp_path / "scale.cu"
    src.write_text(SCALARS)
    mod = pd.compile(object(), src, tasks=1)  # refused while binding, before the client is used
    with pytest.raises(polypy.UserError, match="argument 'n' of kernel 'scale'.* does not fit in int"):
        mod.scale[1, 4](np.zeros(4, np.float32), 2 ** 32 + 500, 3, 5, 2.0)


def test_torch_launch_refuses_a_scalar_that_does_not_fit(scalars_module) -> None:
    torch = pytest.importorskip("torch", reason="polypy.torch needs PyTorch: pip install -e '.[torch]'")
    import polypy.torch as pt

    y = torch.zeros(4, dtype=torch.float32)
    with pytest.raises(polypy.UserError, match="argument 'n' of kernel 'scale'.* does not fit in int"):
        pt.launch(scalars_module.scale)[1, 4](y, 2 ** 32 + 500, 3, 5, 2.0)
    with pytest.raises(polypy.UserError, match="argument 'u' of kernel 'scale'.* does not fit in unsigned int"):
        pt.launch(scalars_module.scale)[1, 4](y, 4, torch.tensor(-1), 5, 2.0)
    f = pt.function(scalars_module.scale, inputs=["n", "u", "w", "a"], outputs={"y": lambda w: (4,)},
                    grid=1, block=4)
    with pytest.raises(polypy.UserError, match="argument 'n' of kernel 'scale'.* does not fit in int"):
        f(2 ** 32 + 500, 3, 5, 2.0)


# ------------------------------------------------------------------ 10. arrays of arrays to device functions


def test_an_array_of_arrays_passed_to_a_device_function_is_a_located_error(tmp_path, capsys) -> None:
    src = tmp_path / "local2d.cu"
    src.write_text("""__device__ float trace(float a[4][4])
{
    float s = 0;
    for (int i = 0; i < 4; i++)
        s += a[i][i];
    return s;
}
__global__ void k(float* y)
{
    float m[4][4];
    for (int i = 0; i < 16; i++)
        m[i / 4][i % 4] = y[i];
    y[threadIdx.x] = trace(m);
}
""")
    out = tmp_path / "out.cpp"
    for command in (["translate"], ["grad", "--kernel", "k"]):
        _cli_error(capsys, command[:1] + [str(src)] + command[1:] + ["-o", str(out)], out, f"{src}:13:28",
                   "'m' used here is an array of arrays (dimensions [4][4])")


ROW_REFERENCE = """__device__ void twice(float (&row)[32])
{
    row[threadIdx.x] *= 2.0f;
}
__device__ float total(const float (&v)[4]) { return v[0] + v[1] + v[2] + v[3]; }
__global__ void k(float* y)
{
    __shared__ float tile[32][32];
    int tx = threadIdx.x, ty = threadIdx.y;
    tile[ty][tx] = y[ty * 32 + tx];
    __syncthreads();
    twice(tile[ty]);
    __syncthreads();
    float loc[4];
    for (int j = 0; j < 4; ++j) loc[j] = tile[ty][tx] + j;
    y[ty * 32 + tx] = tile[ty][tx] + total(loc);
}
"""


def test_rows_and_local_arrays_passed_to_array_references() -> None:
    """A row of a shared 2-D array and a local array bound to ``T (&a)[N]`` parameters: the callee
    indexes the argument's elements (the C backend and the emulator against NumPy)."""
    from c_support import assert_same_as_emulator
    from polypy.driver.source import load

    y = np.random.default_rng(0).standard_normal(32 * 32).astype(np.float32)
    got = assert_same_as_emulator(load(None, text=ROW_REFERENCE).kernel("k"), 1, (32, 32), {"y": y},
                                  rtol=1e-6, atol=1e-6)
    doubled = 2 * y
    np.testing.assert_allclose(got["y"], doubled + 4 * doubled + 6, rtol=1e-6, atol=1e-5)


def test_a_reference_to_a_2d_array_is_a_located_error(tmp_path, capsys) -> None:
    src = tmp_path / "matref.cu"
    src.write_text("""__device__ float corner(float (&m)[4][4])
{
    return m[0][0];
}
__global__ void k(float* y)
{
    float m[4][4];
    for (int i = 0; i < 16; ++i) m[i / 4][i % 4] = y[i];
    y[threadIdx.x] = corner(m);
}
""")
    out = tmp_path / "out.cpp"
    _cli_error(capsys, ["translate", str(src), "-o", str(out)], out, f"{src}:9:29",
               "parameter 'm' of 'corner' is a reference to an array ('float (&)[4][4]')")


# ------------------------------------------------------------------ 11. --threads


@pytest.mark.parametrize("command", ["translate", "run"])
@pytest.mark.parametrize("value", ["-3", "-1", "many"])
def test_threads_is_checked_alike_in_every_command(tmp_path, capsys, command, value) -> None:
    src = tmp_path / "square.cu"
    src.write_text(SQUARE_STEPS)
    out = tmp_path / "out.cpp"
    argv = [command, str(src), f"--threads={value}"] + (["-o", str(out)] if command == "translate" else [])
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 1  # a usage error, status 1 like every polypy error
    err = capsys.readouterr().err
    expected = "must be a positive number of threads" if value != "many" else "expected a number of threads"
    assert f"polypy {command}: error: argument --threads: {expected}" in err and "Traceback" not in err
    assert not out.exists()


def test_threads_is_one_argparse_type() -> None:
    from polypy.driver.cli import build_parser, thread_count

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    types = {name: [a.type for a in p._actions if a.dest == "threads"] for name, p in sub.choices.items()}
    assert types == {"translate": [thread_count], "grad": [], "run": [thread_count]}
    assert thread_count("0") == 0 and thread_count("8") == 8
