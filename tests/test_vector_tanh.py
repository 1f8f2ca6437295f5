"""f32 ``tanh`` written out so that loops calling it vectorize (``polypy.ir.mathfns``, ``TANHF_*``;
the C prelude's ``polypy_tanhf``, the LLVM backend's inline sequence): accurate on arguments spread
over every float with the special values right, the same bits through C and LLVM, an LSTM cell's
elementwise kernel (``exp``, ``tanh``, ``log``) within CUDA's documented ulps of NumPy through C,
LLVM and the emulator, and its thread loop vectorized by GCC."""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from c_support import run_c, run_emulated
from codegen.c.templates import prelude
from polypy.driver.source import load

TANHS = r"""
__global__ void tanhs(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = tanhf(x[i]);
}
"""

# tanhf is 1 (in float) from 9.0109 on; the clamp is at 10; subnormals come back unchanged.
EDGES = (0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 9.01, 9.0111, 9.99, 10.0, 10.5, -10.5, 1e-45, -1e-45,
         1.1754942e-38, -3e-39, 1e-20, 2.4e-4, -2.4e-4, 0.17, 0.35, 0.3466, 0.55, 3.4e38, -3.4e38)


def _inputs() -> np.ndarray:
    """Bit patterns spread over every sign, exponent and NaN (one in 16411), a dense sweep of the
    range where the result is not +-1 or the argument itself, small arguments on a log scale, and
    the edges."""
    spread = np.arange(0, 1 << 32, 16411, dtype=np.uint64).astype(np.uint32).view(np.float32)
    dense = np.linspace(-10.0, 10.0, 1 << 18, dtype=np.float32)
    small = np.geomspace(1e-12, 1.0, 1 << 16).astype(np.float32)
    return np.concatenate([spread, dense, small, -small, np.array(EDGES, np.float32)])


def _ulps(x: np.ndarray, y: np.ndarray, reference) -> np.ndarray:
    """|y - f(x)| in ulps of the exact value's binade (f in extended precision), where the
    correctly rounded result is finite and nonzero."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
        exact = reference(x.astype(np.longdouble))
        rounded = exact.astype(y.dtype)
        keep = np.isfinite(rounded) & (rounded != 0)
        e = np.floor(np.log2(np.abs(exact[keep])))
        ulp = np.exp2(np.maximum(e, -126) - 23)
        return np.abs(y[keep].astype(np.longdouble) - exact[keep]) / ulp


def _run(x: np.ndarray, backend: str) -> np.ndarray:
    args = {"x": x, "y": np.zeros_like(x), "n": x.size}
    grid, block = (x.size + 255) // 256, 256
    if backend == "c":
        return run_c(load(None, text=TANHS).kernel("tanhs"), grid, block, args)["y"]
    import polypy

    polypy.compile(None, text=TANHS).tanhs[grid, block](**args)
    return args["y"]


@pytest.mark.parametrize("backend", ["c", "llvm"])
def test_tanhf_is_accurate_with_the_special_values_right(backend):
    """Within half an ulp and a little (evaluated in double; all 2^32 arguments were checked by
    ``python -m bench.math_exhaustive tanhf``: at most 0.5000, each the float nearest glibc's double
    tanh); CUDA documents 2 ulp, glibc's tanhf is off by up to 2.19. +-inf gives +-1, -0 stays -0,
    subnormals come back unchanged, NaN gives a NaN."""
    x = _inputs()
    y = _run(x, backend)
    assert _ulps(x, y, np.tanh).max() < 0.50001
    tail = y[x.size - len(EDGES):]

    def edge(i: int) -> np.float32:
        return tail[i]

    assert edge(2) == 1.0 and edge(3) == -1.0 and np.isnan(edge(4)) and np.isnan(edge(5))
    assert edge(0) == 0.0 and not np.signbit(edge(0)) and edge(1) == 0.0 and np.signbit(edge(1))
    assert edge(6) < 1.0 and edge(7) == 1.0 and edge(10) == 1.0 and edge(11) == -1.0
    assert edge(-2) == 1.0 and edge(-1) == -1.0
    for i in (12, 13, 14, 15, 16):  # subnormals, the smallest normal, 1e-20: tanh(x) rounds to x
        assert edge(i) == np.float32(EDGES[i])
    assert np.all(np.isnan(y[np.isnan(x)]))
    assert np.array_equal(np.signbit(y[~np.isnan(x)]), np.signbit(x[~np.isnan(x)]))
    with np.errstate(invalid="ignore"):
        rounded = np.tanh(x.astype(np.longdouble)).astype(np.float32)
    same = (y == rounded) | (np.isnan(y) & np.isnan(rounded))
    assert same.mean() > 0.99999  # correctly rounded but for near-halfway cases


def test_tanhf_gives_the_same_bits_through_c_and_llvm():
    x = _inputs()
    c, llvm = _run(x, "c"), _run(x, "llvm")
    nan = np.isnan(c)
    assert np.array_equal(nan, np.isnan(llvm))
    np.testing.assert_array_equal(c[~nan], llvm[~nan])
    assert np.array_equal(np.signbit(c[~nan]), np.signbit(llvm[~nan]))


def test_the_c_backend_writes_tanhf_as_the_prelude_function():
    from codegen.c import emit_kernels
    from polypy.driver.pipelines import to_cpu

    text = emit_kernels([to_cpu(load(None, text=TANHS).kernel("tanhs"))])
    assert "= polypy_tanhf(x[" in text and "= tanhf(x[" not in text


# The classic LLTM's forward kernel (github.com/pytorch/extension-cpp, cuda/lltm_cuda_kernel.cu)
# written again from its formulas, on plain pointers, plus a log: what the cell computes per element.
CELL = r"""
__device__ __forceinline__ float sigmoid(float z) { return 1.0 / (1.0 + exp(-z)); }
__device__ __forceinline__ float elu(float z) { return fmaxf(0.0, z) + fminf(0.0, exp(z) - 1.0); }

__global__ void cell(const float* gates, const float* old_cell, float* new_h, float* new_cell,
                     float* input_gate, float* candidate, float* ex, float* th, float* lg, int state)
{
    const int n = blockIdx.y;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < state) {
        const int i = n * state + c;
        const float g = gates[(n * 3 + 2) * state + c];
        input_gate[i] = sigmoid(gates[n * 3 * state + c]);
        const float o = sigmoid(gates[(n * 3 + 1) * state + c]);
        candidate[i] = elu(g);
        new_cell[i] = old_cell[i] + candidate[i] * input_gate[i];
        new_h[i] = tanh(new_cell[i]) * o;
        ex[i] = expf(g);
        th[i] = tanhf(g);
        lg[i] = logf(fabsf(g));
    }
}
"""

# CUDA's documented maximum errors (CUDA C++ Programming Guide, Mathematical Functions appendix).
CUDA_ULPS = {"ex": (np.exp, 2), "th": (np.tanh, 2), "lg": (lambda v: np.log(np.abs(v)), 1)}


def _cell_args(batch: int, state: int) -> dict:
    rng = np.random.default_rng(40)
    gates = (rng.standard_normal((batch, 3, state)) * 3).astype(np.float32)
    gates[0, 2, :6] = (0.0, -0.0, 20.0, -20.0, 1e-30, -88.0)
    old = rng.standard_normal((batch, state)).astype(np.float32)
    outs = {name: np.zeros((batch, state), np.float32)
            for name in ("new_h", "new_cell", "input_gate", "candidate", "ex", "th", "lg")}
    return {"gates": gates, "old_cell": old, **outs, "state": state}


def _cell_reference(args: dict) -> dict:
    """The cell in float64 with NumPy."""
    g = args["gates"].astype(np.float64)
    sigmoid = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    i, o, cand = sigmoid(g[:, 0]), sigmoid(g[:, 1]), np.maximum(0.0, g[:, 2]) + np.minimum(0.0, np.exp(g[:, 2]) - 1.0)
    new_cell = args["old_cell"] + cand * i
    return {"input_gate": i, "candidate": cand, "new_cell": new_cell, "new_h": np.tanh(new_cell) * o}


@pytest.mark.parametrize("way", ["c", "llvm", "emulator"])
def test_the_lltm_cell_matches_numpy_within_cudas_ulps(way):
    """exp, tanh and log of the gates within 2, 2 and 1 ulp of the exact values (CUDA's bounds);
    the cell's outputs (sigmoid and elu through exp in double, tanh of the new cell) close to a
    float64 NumPy cell."""
    import polypy

    batch, state = 4, 300
    args = _cell_args(batch, state)
    grid, block = ((state + 127) // 128, batch), 128
    if way == "c":
        out = run_c(load(None, text=CELL).kernel("cell"), grid, block, args)
    elif way == "emulator":
        out = run_emulated(load(None, text=CELL).kernel("cell"), grid, block, args)
    else:
        out = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
        polypy.compile(None, text=CELL).cell[grid, block](**out)
    g = args["gates"][:, 2]
    for name, (fn, bound) in CUDA_ULPS.items():
        assert _ulps(g.ravel(), out[name].ravel(), fn).max() <= bound, name
    assert out["ex"][0, 0] == 1.0 and out["th"][0, 1] == 0.0 and np.signbit(out["th"][0, 1])
    assert out["th"][0, 2] == 1.0 and out["th"][0, 3] == -1.0 and out["lg"][0, 0] == -np.inf
    for name, want in _cell_reference(args).items():
        np.testing.assert_allclose(out[name], want, rtol=3e-7, atol=3e-7, err_msg=name)


@pytest.mark.parametrize("flags", [("-mavx2", "-mfma"), ("-march=x86-64-v4",)], ids=["avx2", "avx512"])
def test_the_lltm_cells_thread_loop_vectorizes(tmp_path, flags):
    """What ``polypy_tanhf`` is for: GCC vectorizes the thread loop of the cell's translated kernel
    (calls of logf aside: that loop has them, so the cell's own outputs are checked without),
    with no -ffast-math; with libm's tanhf in it the loop stays scalar."""
    from codegen.c import emit_kernels
    from polypy.driver.pipelines import to_cpu

    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not on this machine (-fopt-info-vec is GCC's)")
    no_log = CELL.replace("lg[i] = logf(fabsf(g));", "")
    text = emit_kernels([to_cpu(load(None, text=no_log).kernel("cell"))])
    assert "polypy_tanhf(" in text and "tanhf(" not in text.replace("polypy_tanhf(", "")

    def vectorized(source: str) -> bool:
        path = tmp_path / "cell.c"
        path.write_text(source)
        done = subprocess.run([gcc, "-std=gnu99", "-O3", *flags, "-fopenmp", "-fno-math-errno", "-ffp-contract=off",
                               "-fopt-info-vec-optimized", "-c", str(path), "-o", str(tmp_path / "cell.o")],
                              capture_output=True, text=True, check=True)
        lines = source.splitlines()
        # GCC names a line of the loop's body: the lines of the fast thread loop, header to brace.
        start = next(i for i, line in enumerate(lines) if re.match(r"\s*for \(unsigned int tx = 0u; tx < tx_hi;", line))
        indent = len(lines[start]) - len(lines[start].lstrip())
        end = next(i for i in range(start + 1, len(lines)) if lines[i] == " " * indent + "}")
        done_lines = {int(m.group(1)) for m in re.finditer(r":(\d+):\d+: optimized: loop vectorized", done.stderr)}
        return any(start < line <= end + 1 for line in done_lines)

    assert vectorized(text)
    assert not vectorized(text.replace("polypy_tanhf(new_cell", "tanhf(new_cell"))


@pytest.mark.parametrize("flags", [("-mavx2", "-mfma"), ("-march=x86-64-v4",)], ids=["avx2", "avx512"])
def test_a_loop_calling_the_prelude_tanhf_vectorizes(tmp_path, flags):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not on this machine (-fopt-info-vec is GCC's)")
    loops = {name: f"  for (int i = 0; i < n; i++) b[i] = {name}(a[i]);" for name in ("polypy_tanhf", "tanhf")}
    text = prelude()
    for name, loop in loops.items():
        text += f"\nvoid f_{name}(const float* restrict a, float* restrict b, int n)\n{{\n{loop}\n}}\n"
    source = tmp_path / "loops.c"
    source.write_text(text)
    lines = text.splitlines()
    done = subprocess.run([gcc, "-std=c99", "-O3", *flags, "-fno-math-errno", "-ffp-contract=off",
                           "-fopt-info-vec-optimized", "-c", str(source), "-o", str(tmp_path / "loops.o")],
                          capture_output=True, text=True, check=True)
    vectorized = {int(line.split(":")[1]) for line in done.stderr.splitlines() if "loop vectorized" in line}
    for name, loop in loops.items():
        assert ((lines.index(loop) + 1) in vectorized) == name.startswith("polypy_"), name


def test_llvm_vectorizes_the_loop_over_tanhf():
    """The LLVM backend's inline sequence: no call of tanhf left, the thread loop computes it on
    vectors of doubles."""
    from codegen.llvm import emit_llvm_ir
    from polypy.driver.pipelines import lower_and_emit

    optimized = emit_llvm_ir(lower_and_emit(load(None, text=TANHS), "cpu"), optimize=True)
    assert "@tanhf" not in optimized
    assert re.search(r"fdiv <\d+ x double>", optimized)
    assert re.search(r"@llvm\.rint\.v\d+f64", optimized)


def test_the_prelude_functions_are_inlined_into_a_kernel_that_calls_them_often(tmp_path):
    """GCC's heuristics leave a function called many times out of line (a scalar call: the loop
    around it cannot vectorize), as it did in the translation of PyTorch's LLTM extension: the
    prelude's written-out functions are always inlined. A kernel with 72 calls: none left."""
    from codegen.c import emit_kernels
    from polypy.driver.pipelines import to_cpu

    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not on this machine")
    body = "\n".join(f"        y[{i} * n + i] = tanhf(x[i] + {i}.0f) * expf(x[i] - {i}.0f) + (float)exp((double)x[i] * {i});"
                     for i in range(24))
    many = ("__global__ void many(const float* x, float* y, int n)\n{\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) {\n" + body + "\n    }\n}\n")
    text = emit_kernels([to_cpu(load(None, text=many).kernel("many"))])
    assert text.count("polypy_tanhf(x[") >= 24
    source = tmp_path / "many.c"
    source.write_text(text)
    done = subprocess.run([gcc, "-std=gnu99", "-O3", "-march=x86-64-v3", "-fopenmp", "-fno-math-errno", "-ffp-contract=off",
                           "-S", str(source), "-o", "-"], capture_output=True, text=True, check=True)
    calls = re.findall(r"call\s+\S*(polypy_\w+)", done.stdout)
    assert not [c for c in calls if c in ("polypy_tanhf", "polypy_expf", "polypy_exp")], calls
