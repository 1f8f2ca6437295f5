"""A run-time alignment check (or a failed ``assert``) inside a loop, a nested ``if`` or an inlined
device function, with a ``__syncthreads()`` after it (docs/typed_views.md, "Where the check runs";
``frontend/lower/traps.py``). On a GPU such a fault aborts the whole launch (the sticky
``cudaErrorMisalignedAddress``), so it is not a thread leaving before a barrier: polypy translates
it as a fault that stops the thread's effects while the barriers stay where every thread reaches
them. Aligned launches are checked against NumPy (emulator, LLVM JIT, C backend; several shapes);
misaligned ones must fail with the cast's location, in the Python API and in whole programs."""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from c_support import WAYS, run_way
import polypy
from c_support import source_file
from polypy.errors import DeviceAssertError, MisalignedAddressError

KERNELS = r"""
__device__ float4 load4(const float* base, int off, int c) {
    return reinterpret_cast<const float4*>(base + off)[c];
}

// Rows at a run-time stride, one per iteration of a grid-stride loop, through shared memory.
__global__ void tiles(const float* x, float* y, int rows, int stride, int off) {
    __shared__ float4 s[64];
    int t = threadIdx.x;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        s[t] = reinterpret_cast<const float4*>(x + r * stride + off)[t];
        __syncthreads();
        float4 v = s[blockDim.x - 1 - t];
        reinterpret_cast<float4*>(y + r * 4 * blockDim.x)[t] = make_float4(v.w, v.z, v.y, v.x);
        __syncthreads();
    }
}

// The same through a device function inlined into the loop.
__global__ void tiles_fn(const float* x, float* y, int rows, int stride, int off) {
    __shared__ float4 s[64];
    int t = threadIdx.x;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        s[t] = load4(x, r * stride + off, t);
        __syncthreads();
        float4 v = s[blockDim.x - 1 - t];
        y[r * blockDim.x + t] = v.w - v.x;
        __syncthreads();
    }
}

// dct8x8's pattern: a thread-dependent offset, the check in a loop under an if, then barriers.
__global__ void halves(const short* src, short* dst, int stride) {
    __shared__ int s[4 * 64];
    int t = threadIdx.x;
    const short* p = src + blockIdx.x * stride + 2 * t;
    if (t < blockDim.x / 2) {
        for (int i = 0; i < 4; i++)
            s[i * 64 + t] = ((const int*)p)[i * (stride / 2)];
    }
    __syncthreads();
    int w = 0;
    for (int k = 0; k < 2; k++) {
        if (t < blockDim.x / 2) {
            w += s[(3 - k) * 64 + t];
            s[(3 - k) * 64 + t] = s[k * 64 + t];
        }
        __syncthreads();
    }
    if (t < blockDim.x / 2) {
        for (int i = 0; i < 4; i++)
            ((int*)(dst + blockIdx.x * 4 * blockDim.x))[i * blockDim.x / 2 + t] = s[i * 64 + t] + (i == 0 ? w : 0);
    }
}

// The tensor-core GEMMs' loop: no bound, a block-uniform break at its top, the check after it.
__global__ void endless(const float* x, float* y, int tiles, int stride) {
    __shared__ float4 s[64];
    int t = threadIdx.x;
    for (unsigned int pos = blockIdx.x;; pos += gridDim.x) {
        const unsigned int tile = pos * 2;
        if (tile >= tiles) break;
        s[t] = *((const float4*)(x + tile * stride) + t);
        __syncthreads();
        y[tile * blockDim.x + t] = s[(t + 1) % blockDim.x].x + s[t].w;
        __syncthreads();
    }
}

// A failed assert inside a loop with barriers.
__global__ void checked(const float* x, float* y, int steps) {
    __shared__ float s[64];
    int t = threadIdx.x;
    float acc = 0.0f;
    for (int k = 0; k < steps; k++) {
        float v = x[(blockIdx.x * steps + k) * blockDim.x + t];
        assert(v >= 0.0f);
        s[t] = v;
        __syncthreads();
        acc += s[(t + 1) % blockDim.x];
        __syncthreads();
    }
    y[blockIdx.x * blockDim.x + t] = acc;
}
"""
SOURCE = "#include <cassert>\n#include <cstdio>\n" + KERNELS


def _where(text: str) -> tuple[int, int]:
    """The line and column (1-based) of ``text`` in SOURCE."""
    before = SOURCE[:SOURCE.index(text)]
    return before.count("\n") + 1, len(before) - before.rfind("\n")


TILES_CAST = _where("reinterpret_cast<const float4*>(x + r")
LOAD4_CAST = _where("reinterpret_cast<const float4*>(base")
HALVES_LINE = _where("((const int*)p)")[0]


def _tiles_args(rows: int, block: int, stride: int, off: int) -> dict:
    rng = np.random.default_rng(rows * 100 + block + stride + off)
    return {"x": rng.standard_normal(rows * stride + off + 4 * block).astype(np.float32),
            "y": np.zeros(rows * 4 * block, np.float32),
            "rows": np.int32(rows), "stride": np.int32(stride), "off": np.int32(off)}


def _rows(args: dict, rows: int, block: int) -> np.ndarray:
    stride, off = int(args["stride"]), int(args["off"])
    return np.stack([args["x"][r * stride + off:r * stride + off + 4 * block].reshape(block, 4) for r in range(rows)])


SHAPES = [(1, 7, 8, 40, 4), (3, 7, 8, 36, 0), (2, 5, 16, 68, 8), (4, 9, 32, 132, 0)]


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,rows,block,stride,off", SHAPES)
def test_a_check_in_a_loop_with_barriers(way, grid, rows, block, stride, off) -> None:
    args = _tiles_args(rows, block, stride, off)
    got = run_way(SOURCE, "tiles", (grid, 1, 1), (block, 1, 1), args, way, name="traps.cu")
    want = _rows(args, rows, block)[:, ::-1, ::-1].reshape(-1)
    np.testing.assert_array_equal(got["y"], want)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,rows,block,stride,off", SHAPES[:3])
def test_a_check_in_a_device_function_inlined_into_the_loop(way, grid, rows, block, stride, off) -> None:
    args = _tiles_args(rows, block, stride, off)
    got = run_way(SOURCE, "tiles_fn", (grid, 1, 1), (block, 1, 1), args, way, name="traps.cu")
    v = _rows(args, rows, block)[:, ::-1, :]
    want = np.zeros_like(args["y"])
    want[:rows * block] = (v[:, :, 3] - v[:, :, 0]).reshape(-1)
    np.testing.assert_array_equal(got["y"], want)


@pytest.mark.parametrize("way", ["emulator", "llvm"])
@pytest.mark.parametrize("kernel,where", [("tiles", TILES_CAST), ("tiles_fn", LOAD4_CAST)])
def test_a_misaligned_row_in_a_later_iteration_stops_the_launch(capfd, way, kernel, where) -> None:
    line, col = where
    # stride 38: row 0 is aligned, row 1 starts at byte 152 (not a multiple of 16)
    args = _tiles_args(7, 8, 38, 0)
    with pytest.raises(MisalignedAddressError) as info:
        run_way(SOURCE, kernel, (3, 1, 1), (8, 1, 1), args, way, name="traps.cu")
    err = info.value
    assert err.loc is not None and (err.loc.line, err.loc.col) == (line, col)
    assert "misaligned address (cudaErrorMisalignedAddress)" in str(err) and "multiple of 16" in str(err)
    lines = capfd.readouterr().err.strip().splitlines()
    assert lines and all(f"traps.cu:{line}:{col}:" in x and "misaligned address" in x for x in lines)
    # a faulting thread reports once: it does nothing more in later iterations (block 0's row 0
    # is aligned and its row 3 is not; the emulator stops the launch after the first faulting block)
    assert len(set(lines)) == len(lines) <= 3 * 8, lines
    assert not any("block: [0,0,0]" in x for x in lines) or way != "emulator"


def _halves_args(grid: int, block: int, stride: int) -> dict:
    rng = np.random.default_rng(grid * 10 + block + stride)
    return {"src": rng.integers(-3000, 3000, (grid + 4) * stride + 2 * block).astype(np.int16),
            "dst": np.zeros(grid * 4 * block, np.int16), "stride": np.int32(stride)}


def _halves_reference(args: dict, grid: int, block: int) -> np.ndarray:
    stride = int(args["stride"])
    h = block // 2
    words = args["src"].view(np.uint8)
    dst = np.zeros_like(args["dst"]).view(np.int32)
    for b in range(grid):
        s = np.zeros((4, h), np.int32)
        for i in range(4):
            start = 2 * (b * stride + i * (stride // 2) * 2)
            s[i] = words[start:start + 4 * h].view(np.int32)
        w = np.zeros(h, np.int64)
        for k in range(2):
            w += s[3 - k]
            s[3 - k] = s[k].copy()
        s[0] = (s[0] + w).astype(np.int32)
        out = dst[b * 2 * block:(b + 1) * 2 * block]
        for i in range(4):
            out[i * h:(i + 1) * h] = s[i]
    return dst.view(np.int16)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block,stride", [(2, 8, 20), (3, 16, 36), (1, 32, 64)])
def test_a_thread_dependent_check_in_a_loop_under_an_if(way, grid, block, stride) -> None:
    args = _halves_args(grid, block, stride)
    got = run_way(SOURCE, "halves", (grid, 1, 1), (block, 1, 1), args, way, name="traps.cu")
    np.testing.assert_array_equal(got["dst"], _halves_reference(args, grid, block))


@pytest.mark.parametrize("way", ["emulator", "llvm"])
def test_a_misaligned_word_under_an_if_stops_the_launch(way) -> None:
    args = _halves_args(2, 8, 21)  # an odd stride: block 1's rows start at odd shorts
    with pytest.raises(MisalignedAddressError) as info:
        run_way(SOURCE, "halves", (2, 1, 1), (8, 1, 1), args, way, name="traps.cu")
    assert info.value.loc is not None and info.value.loc.line == HALVES_LINE


@pytest.mark.parametrize("way", WAYS)
def test_an_assert_in_a_loop_with_barriers(way) -> None:
    rng = np.random.default_rng(3)
    x = rng.random(2 * 3 * 16).astype(np.float32)
    args = {"x": x, "y": np.zeros(2 * 16, np.float32), "steps": np.int32(3)}
    got = run_way(SOURCE, "checked", (2, 1, 1), (16, 1, 1), args, way, name="traps.cu")
    xs = x.reshape(2, 3, 16)
    want = np.zeros((2, 16), np.float32)
    for k in range(3):
        want += np.roll(xs[:, k, :], -1, axis=1)
    np.testing.assert_array_equal(got["y"], want.reshape(-1))


@pytest.mark.parametrize("way", ["emulator", "llvm"])
def test_a_failed_assert_in_a_loop_with_barriers_stops_the_launch(way) -> None:
    x = np.ones(2 * 3 * 16, np.float32)
    x[1 * 48 + 2 * 16 + 5] = -1.0  # block 1, step 2, thread 5
    args = {"x": x, "y": np.zeros(2 * 16, np.float32), "steps": np.int32(3)}
    with pytest.raises(DeviceAssertError) as info:
        run_way(SOURCE, "checked", (2, 1, 1), (16, 1, 1), args, way, name="traps.cu")
    assert not isinstance(info.value, MisalignedAddressError)
    assert "v >= 0.0f" in str(info.value)


PROGRAM = SOURCE + r"""
int main() {
    const int rows = 6, block = 8;
    float hx[6 * 38 + 32], hy[6 * 32];
    for (int i = 0; i < 6 * 38 + 32; i++) hx[i] = (float)i;
    float *x, *y;
    cudaMalloc(&x, sizeof hx);
    cudaMalloc(&y, sizeof hy);
    cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice);
    tiles<<<2, block>>>(x, y, rows, 36, 4);
    printf("launch %d sync %d\n", (int)cudaGetLastError(), (int)cudaDeviceSynchronize());
    cudaMemcpy(hy, y, sizeof hy, cudaMemcpyDeviceToHost);
    printf("%g %g %g\n", hy[0], hy[3], hy[5 * 32 + 31]);
    tiles<<<2, block>>>(x, y, rows, 38, 0);
    cudaError_t e = cudaDeviceSynchronize();
    printf("sync %d %s\n", (int)e, cudaGetErrorName(e));
    printf("last %d\n", (int)cudaGetLastError());
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: whole programs cannot be compiled")
@pytest.mark.parametrize("emulate", [False, True])
def test_whole_program_reports_the_misaligned_address_inside_the_loop(tmp_path, emulate) -> None:
    src = tmp_path / "p.cu"
    src.write_text(PROGRAM)
    if emulate:
        run = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", "--emulate", str(src)],
                             capture_output=True, text=True, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
    else:
        out = tmp_path / "p.cpp"
        subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o", str(out)],
                       check=True, cwd=tmp_path)
        build = subprocess.run(["g++", "-O2", "-fopenmp", "-Wall", str(out), "-o", str(tmp_path / "p"), "-lm"],
                               capture_output=True, text=True, cwd=tmp_path)
        assert build.returncode == 0 and "warning" not in build.stderr, build.stderr
        run = subprocess.run([str(tmp_path / "p")], capture_output=True, text=True, cwd=tmp_path)
    # row r holds x[36 r + 4 ..] reversed: y[0] = x[4 + 31], y[3] = x[4 + 28], y[5 * 32 + 31] = x[5 * 36 + 4]
    assert run.stdout.splitlines() == ["launch 0 sync 0", "35 32 184",
                                       "sync 716 cudaErrorMisalignedAddress", "last 716"]
    lines = run.stderr.strip().splitlines()
    assert lines and all(f"{src}:{TILES_CAST[0]}:{TILES_CAST[1]}: void tiles(" in x and "misaligned address" in x for x in lines), run.stderr


def _endless(grid: int, block: int, tiles: int, stride: int) -> tuple[dict, np.ndarray]:
    rng = np.random.default_rng(grid + block + tiles + stride)
    args = {"x": rng.standard_normal(tiles * stride + 4 * block).astype(np.float32),
            "y": np.zeros(tiles * block, np.float32), "tiles": np.int32(tiles), "stride": np.int32(stride)}
    want = np.zeros_like(args["y"])
    for tile in range(0, tiles, 2):
        row = args["x"][tile * stride:tile * stride + 4 * block].reshape(block, 4)
        want[tile * block:(tile + 1) * block] = np.roll(row[:, 0], -1) + row[:, 3]
    return args, want


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block,tiles,stride", [(1, 8, 5, 36), (3, 16, 12, 64), (2, 32, 7, 132)])
def test_a_check_after_the_uniform_break_of_an_endless_loop(way, grid, block, tiles, stride) -> None:
    args, want = _endless(grid, block, tiles, stride)
    got = run_way(SOURCE, "endless", (grid, 1, 1), (block, 1, 1), args, way, name="traps.cu")
    np.testing.assert_array_equal(got["y"], want)


@pytest.mark.parametrize("way", ["emulator", "llvm"])
def test_a_misaligned_tile_of_an_endless_loop_stops_the_launch(way) -> None:
    args, _ = _endless(2, 8, 6, 37)  # tile 2 starts at float 74: byte 296, not a multiple of 16
    with pytest.raises(MisalignedAddressError) as info:
        run_way(SOURCE, "endless", (2, 1, 1), (8, 1, 1), args, way, name="traps.cu")
    assert info.value.loc is not None and info.value.loc.line == _where("*((const float4*)(x + tile")[0]


GRAD = r"""
__global__ void scaled(const float* x, float* y, int stride) {
    __shared__ float4 s[64];
    int t = threadIdx.x;
    for (int k = 0; k < 3; k++) {
        s[t] = reinterpret_cast<const float4*>(x + (blockIdx.x * 3 + k) * stride)[t];
        __syncthreads();
        float4 v = s[blockDim.x - 1 - t];
        y[(blockIdx.x * 3 + k) * blockDim.x + t] = v.x * v.y + 2.0f * v.w;
        __syncthreads();
    }
}
"""


def test_the_gradient_of_a_check_in_a_loop_with_barriers() -> None:
    mod = polypy.compile(source_file(GRAD, "grad_traps.cu"))
    g = polypy.grad(mod.scaled, wrt=["x", "y"])
    grid, block, stride = 2, 8, 36
    rng = np.random.default_rng(1)
    x = rng.standard_normal(6 * stride + 32).astype(np.float32)
    dy = rng.standard_normal(6 * block).astype(np.float32)
    dx = np.zeros_like(x)
    g[grid, block](x, dx, np.zeros(6 * block, np.float32), dy.copy(), np.int32(stride))
    want = np.zeros_like(x)
    for row in range(6):
        for t in range(block):
            src = row * stride + 4 * (block - 1 - t)
            d = dy[row * block + t]
            want[src] += d * x[src + 1]
            want[src + 1] += d * x[src]
            want[src + 3] += 2 * d
    np.testing.assert_allclose(dx, want, rtol=1e-5, atol=1e-6)


def test_a_gradient_taped_in_a_grid_stride_loop_sizes_its_tape_at_launch(tmp_path) -> None:
    # the grid-stride loop's step (gridDim.x) is at least 1 at every launch, so its trip count is
    # known when the launcher sizes the tape (autodiff.loops' launch_positive): emitted, not refused
    # (before: "cannot differentiate kernel 'tiles'")
    src = tmp_path / "traps.cu"
    src.write_text(SOURCE)
    out = tmp_path / "g.cpp"
    run = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "grad", str(src), "--kernel", "tiles",
                          "--wrt", "x,y", "--emit", "cpp", "-o", str(out)], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    trips = "((long long)rows + (long long)(int)gridDim.x - 1LL) / (long long)(int)gridDim.x"
    assert f"bool* assert_failed_tape = (bool*)polypy_alloc_apart(sizeof(bool) * (size_t)((int)({trips} > 0LL" \
        in out.read_text()
