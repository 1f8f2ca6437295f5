"""``translate --report`` warns about stores that two threads of one launch race on (issue 10 item 5).

The question is answered with isl (``polypy.poly.write_conflicts``): for a whole program with the
launch shape of each launch site where it is a constant, else symbolically. A warning names the
store's location, an example pair of threads and the launch; no sample may get one.
"""
from __future__ import annotations

import pathlib

import pytest

from polypy.driver.cli import main
from polypy.driver.source import load
from polypy.poly.race_report import race_warnings
from polypy.poly.write_conflicts import write_conflicts

ROOT = pathlib.Path(__file__).resolve().parents[1]

MVT = """#include <cstdio>
#include <cuda_runtime.h>
__global__ void mvt(const float* A, const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s = 0.0f;
        for (int j = 0; j < n; ++j)
            s += A[i * n + j] * x[j];
        STORE
    }
}
int main()
{
    const int n = 256;
    float *A, *x, *y;
    cudaMalloc(&A, n * n * sizeof(float));
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    mvt<<<dim3((n + 31) / 32), BLOCK>>>(A, x, y, n);
    printf("done\\n");
    return 0;
}
"""


def _program(tmp_path: pathlib.Path, store: str, block: str = "dim3(32, 8)") -> pathlib.Path:
    src = tmp_path / "mvt.cu"
    src.write_text(MVT.replace("STORE", store).replace("BLOCK", block))
    return src


def _translate_report(src: pathlib.Path, capsys) -> str:
    out = src.with_suffix(".cpp")
    assert main(["translate", str(src), "--report", "-o", str(out)]) == 0
    assert out.exists()  # a warning, not an error: the program is still translated
    return capsys.readouterr().err


def test_mvt_with_an_unused_block_dimension_is_a_race_with_a_location(tmp_path, capsys) -> None:
    src = _program(tmp_path, "y[i] = s;")
    err = _translate_report(src, capsys)
    assert (f"{src}:10:9: warning: threads (tx=0, ty=0, bx=0) and (tx=0, ty=1, bx=0) both write "
            "'y[i]' without an atomic in kernel mvt")  # the source's name, an IR let in err
    assert f"{src}:20:5: note: launched here with block (32, 8, 1)" in err
    assert err.count("warning:") == 1


def test_no_warning_without_report(tmp_path, capsys) -> None:
    src = _program(tmp_path, "y[i] = s;")
    assert main(["translate", str(src), "-o", str(tmp_path / "out.cpp")]) == 0
    assert ": warning:" not in capsys.readouterr().err


@pytest.mark.parametrize("store, block", [
    ("if (threadIdx.y == 0) y[i] = s;", "dim3(32, 8)"),  # one row of threads stores
    ("atomicAdd(&y[i], s);", "dim3(32, 8)"),  # racing atomics are fine
    ("y[i] = s;", "dim3(32)"),  # the shape the kernel was written for
    ("y[i] = s;", "32"),
])
def test_no_warning_for_race_free_launches(tmp_path, capsys, store: str, block: str) -> None:
    err = _translate_report(_program(tmp_path, store, block), capsys)
    assert ": warning:" not in err


def test_a_launch_shape_held_in_a_variable_is_symbolic(tmp_path) -> None:
    # `dim3 block(32, 8)` changed in an `if` before the launch: the shape is not known at compile
    # time, the model stays symbolic (block.y taken as 1 since the kernel never reads it), so
    # nothing is claimed.
    src = tmp_path / "mvt.cu"
    src.write_text(MVT.replace("STORE", "y[i] = s;")
                   .replace("mvt<<<", "dim3 block(32, 8);\n    if (n > 300) block.y = 4;\n    mvt<<<")
                   .replace("BLOCK", "block"))
    module = load(src)
    assert [s.block_shape for s in module.host.launches] == [None]
    assert race_warnings(module) == []


def test_constant_launch_shapes_are_evaluated(tmp_path, capsys) -> None:
    src = tmp_path / "shapes.cu"
    src.write_text("""#define RB 64
__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }
int main() {
  int n = 100; const int T = 32;
  dim3 block(256);
  float* d; cudaMalloc(&d, 4096);
  k<<<n, block>>>(d);
  k<<<(n + 127) / 128, 128>>>(d);
  k<<<dim3(4, 2), dim3(32, 8)>>>(d);
  k<<<dim3(n), dim3(RB)>>>(d);
  k<<<2, T * 2>>>(d);
  k<<<dim3(2, 2, 2), dim3(T, 4, 1), 0>>>(d);
  return 0;
}
""")
    sites = load(src).host.launches
    # n and block are never written after their declarations: their values are known
    # (frontend.launch_shapes).
    assert [(s.grid_shape, s.block_shape) for s in sites] == [
        ((100, 1, 1), (256, 1, 1)), ((1, 1, 1), (128, 1, 1)), ((4, 2, 1), (32, 8, 1)), ((100, 1, 1), (64, 1, 1)),
        ((2, 1, 1), (64, 1, 1)), ((2, 2, 2), (32, 4, 1))]
    # The C++ of the program has a version of k specialized for each constant block shape, at most
    # 4 (the first four; the launch with the fifth runs the generic version).
    out = tmp_path / "shapes.cpp"
    assert main(["translate", str(src), "-o", str(out)]) == 0
    text = out.read_text()
    assert all(f"k_launch_{v}(" in text for v in ("b256x1x1", "b128x1x1", "b32x8x1", "b64x1x1", "generic"))
    assert "k_launch_b32x4x1(" not in text


def _kernel(tmp_path: pathlib.Path, body: str, params: str = "const float* x, float* y, int n"):
    src = tmp_path / "k.cu"
    src.write_text(f"__global__ void k({params})\n{{\n{body}\n}}\n")
    return load(src).kernels[0]


def test_symbolic_races_every_launch_has(tmp_path) -> None:
    # Every thread of a block stores to the block's element.
    k = _kernel(tmp_path, "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[blockIdx.x] = x[i];")
    [c] = write_conflicts(k)
    assert c.loc.line == 4 and c.buffer == "y"
    assert dict(c.first)["bx"] == dict(c.second)["bx"] and dict(c.first)["tx"] != dict(c.second)["tx"]
    # Every block stores to the same elements.
    k = _kernel(tmp_path, "    y[threadIdx.x] = x[threadIdx.x];")
    [c] = write_conflicts(k)
    assert dict(c.first)["tx"] == dict(c.second)["tx"] and {dict(c.first)["bx"], dict(c.second)["bx"]} == {0, 1}
    # A __device__ array is global memory too.
    src = tmp_path / "d.cu"
    src.write_text("__device__ float last[4];\n__global__ void k(const float* x) {\n"
                   "    last[threadIdx.x % 4] = x[threadIdx.x];\n}\n")
    [c] = write_conflicts(load(src).kernels[0])
    assert c.buffer == "last" and c.loc.line == 3
    # Two stores of neighbouring threads: reported once, with the other store.
    k = _kernel(tmp_path, "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) {\n"
                          "        y[2 * i] = 1.0f;\n        y[2 * i + 2] = 2.0f;\n    }")
    [c] = write_conflicts(k)
    assert (c.loc.line, c.other.line) == (5, 6)
    # Two threads per element.
    k = _kernel(tmp_path, "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i / 2] = x[i];")
    assert len(write_conflicts(k)) == 1


def test_no_symbolic_warning_where_there_is_no_race(tmp_path) -> None:
    cases = [
        # one element per thread
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = 2.0f * x[i];",
        # a second store to another thread's element, ordered by a barrier
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    y[i] = x[i];\n    __syncthreads();\n"
        "    if (threadIdx.x == 0) y[i + 1] = 0.0f;",
        # one thread per block stores the block's element
        "    if (threadIdx.x == 0) y[blockIdx.x] = x[blockIdx.x];",
        # data-dependent index: the model cannot decide, so nothing is said
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[(int)x[i]] = 1.0f;",
        # a grid-stride loop
        "    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = x[i];",
    ]
    for body in cases:
        assert write_conflicts(_kernel(tmp_path, body)) == [], body


def test_known_shapes_decide_what_a_symbolic_launch_cannot(tmp_path) -> None:
    # Written for blocks of 16 threads: races only when blockDim.x > 16.
    body = "    int col = blockIdx.x * 16 + threadIdx.x;\n    if (col < n) y[col] = x[col];"
    k = _kernel(tmp_path, body)
    assert write_conflicts(k) == []
    assert write_conflicts(k, block=(16, 1, 1)) == []
    [c] = write_conflicts(k, block=(32, 1, 1))
    assert dict(c.first)["bx"] != dict(c.second)["bx"]
    # Every block writes the same elements: no race in a grid of one block.
    k = _kernel(tmp_path, "    y[threadIdx.x] = x[threadIdx.x];")
    assert write_conflicts(k, grid=(1, 1, 1)) == []
    assert len(write_conflicts(k, grid=(3, 1, 1))) == 1
    assert write_conflicts(k, grid=(1, 1, 1), block=(64, 1, 1)) == []


SAMPLES = sorted((ROOT / "samples").glob("*.cu")) + sorted((ROOT / "samples" / "programs").glob("*.cu")) \
    + sorted((ROOT / "tests" / "programs").glob("*.cu"))


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_no_sample_gets_a_race_warning(path: pathlib.Path) -> None:
    assert race_warnings(load(path)) == []


# Each warning must be a race the emulator sees too, for sizes in the generic range (n = 1024).
EMULATED = [
    ("    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = x[i];", (32, 8, 1), (2, 1, 1), True),
    ("    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n && threadIdx.y == 0) y[i] = x[i];",
     (32, 8, 1), (2, 1, 1), False),
    ("    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = x[i];", (64, 1, 1), (2, 2, 1), True),
    ("    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i / 2] = x[i];", (64, 1, 1), (2, 1, 1), True),
    ("    int col = blockIdx.x * 16 + threadIdx.x;\n    if (col < n) y[col] = x[col];", (32, 1, 1), (2, 1, 1), True),
    ("    int col = blockIdx.x * 16 + threadIdx.x;\n    if (col < n) y[col] = x[col];", (16, 1, 1), (4, 1, 1), False),
    ("    y[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f;\n    __syncthreads();\n"
     "    if (threadIdx.x == 0) y[blockIdx.x * blockDim.x + 1] = 2.0f;", (32, 1, 1), (2, 1, 1), False),
    ("    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) atomicAdd(&y[i % 7], x[i]);", (32, 1, 1), (2, 1, 1),
     False),
]


@pytest.mark.parametrize("body, block, grid, racy", EMULATED)
def test_warnings_agree_with_the_emulator(tmp_path, body: str, block, grid, racy: bool) -> None:
    import numpy as np

    from polypy.emulator import emulate
    from polypy.errors import UserError

    kernel = _kernel(tmp_path, body)
    conflicts = write_conflicts(kernel, block=block, grid=grid)
    assert bool(conflicts) == racy
    args = {"x": np.arange(1024, dtype=np.float32), "y": np.zeros(1024, dtype=np.float32), "n": np.int32(1024)}
    try:
        emulate(kernel, grid, block, args)
        emulated_race = False
    except UserError as exc:
        assert "race" in str(exc), exc
        emulated_race = True
    assert emulated_race == racy


# ---------------------------------------------------------------- reads of what another block writes
BLOCKS = """__global__ void next(float* y, const float* x, float* z) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = 2.0f * x[i];
  if (threadIdx.x == 0 && blockIdx.x + 1 < gridDim.x) z[blockIdx.x] = y[i + blockDim.x];
}
__global__ void own(float* y, const float* x, float* z) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = 2.0f * x[i];
  __syncthreads();
  if (threadIdx.x == 0) z[blockIdx.x] = y[i + blockDim.x - 1];
}
"""


def test_a_read_of_what_another_block_writes_is_a_race_with_a_location(tmp_path, capsys) -> None:
    """Block b reads the first element block b + 1 writes: blocks are not ordered, so the value
    depends on the schedule (Rodinia particlefilter's normalize kernel reads so). ``translate
    --report``, ``grad`` and ``grad --report`` warn at the read, with the store as a note; a
    block reading only its own slice after a barrier gets no warning."""
    src = tmp_path / "blocks.cu"
    src.write_text(BLOCKS)
    want = [f"{src}:4:71: warning: thread (tx=0, bx=0) reads 'y[(u32)i + blockDim.x]' that thread (tx=0, bx=1) of another block writes in the same launch of kernel next: blocks "
            "are not ordered, so the value read depends on the schedule", f"{src}:3:3: note: the store"]

    def diagnostics(err: str) -> list[str]:
        return [line for line in err.splitlines() if ": warning: " in line or ": note: " in line]

    assert diagnostics(_translate_report(src, capsys)) == want
    for extra in ([], ["--report"]):
        assert main(["grad", str(src), "--kernel", "next", "-o", str(tmp_path / "g.cu")] + extra) == 0
        assert diagnostics(capsys.readouterr().err) == want
    assert main(["grad", str(src), "--kernel", "own", "-o", str(tmp_path / "own.cu")]) == 0
    assert diagnostics(capsys.readouterr().err) == []


@pytest.mark.parametrize("grid", [2, 3])
def test_a_read_of_another_blocks_store_agrees_with_the_emulator(tmp_path, grid) -> None:
    """The race the warning names is one the emulator sees too; the block reading its own slice
    runs clean in the emulator."""
    import numpy as np

    from polypy.emulator import emulate
    from polypy.errors import UserError

    src = tmp_path / "blocks.cu"
    src.write_text(BLOCKS)
    module = load(src)
    args = {"y": np.zeros(32 * grid, np.float32), "x": np.ones(32 * grid, np.float32), "z": np.zeros(grid, np.float32)}
    with pytest.raises(UserError, match="race"):
        emulate(module.kernel("next"), grid, 32, {k: v.copy() for k, v in args.items()})
    emulate(module.kernel("own"), grid, 32, args)
    np.testing.assert_array_equal(args["z"], np.full(grid, 2.0, np.float32))
