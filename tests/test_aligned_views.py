"""Typed views at offsets polypy cannot prove aligned (issue 36 item 1, docs/typed_views.md):
``reinterpret_cast<float4*>(&x[row * n + col])`` with a run-time ``n`` is translated as a view at
any offset, and the address is checked at run time, as the GPU checks it: an offset that is not
a multiple of the view's size stops the launch with "misaligned address" naming the cast's
location (``MisalignedAddressError``; in whole programs the launch's error is
``cudaErrorMisalignedAddress``). A check that is the same for every thread of a block is tested
once per block, before the loops over threads. Our own kernels, checked against NumPy through
the emulator, the LLVM JIT and the C backend, several launch shapes."""
from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

import polypy
from c_support import WAYS, run_way
from polypy.errors import MisalignedAddressError, UserError

# Rows of a matrix with a run-time stride and column offset, read as float4 and int4 and
# written as float4, int4 and float2 (the tensor-core samples' `*((int4*)(p + STRIDE * i) + lane)`).
GLOBAL = r"""
__global__ void rows(const float* x, float* y, const int* a, int* b, float* z, int n, int stride, int off) {
    int row = blockIdx.x, col = threadIdx.x;
    float4 v = reinterpret_cast<const float4*>(&x[row * stride + off])[col];
    v.x += 1.0f;
    v.w *= 2.0f;
    reinterpret_cast<float4*>(&y[row * n])[col] = v;
    int4 q = *((const int4*)(a + stride * row + off) + col);
    *((int4*)(b + n * row) + col) = make_int4(q.w, q.z, q.y, q.x);
    reinterpret_cast<float2*>(z + row * (n / 2))[col] = make_float2(v.y, v.z);
}
"""


def _global_args(grid: int, block: int, stride: int, off: int) -> dict:
    rng = np.random.default_rng(grid * 100 + block + stride)
    n = 4 * block
    size = grid * stride + off + n
    return {"x": rng.standard_normal(size).astype(np.float32),
            "y": np.zeros(grid * n, np.float32),
            "a": rng.integers(-1000, 1000, size).astype(np.int32),
            "b": np.zeros(grid * n, np.int32),
            "z": np.zeros(grid * n // 2 + 2 * block, np.float32),
            "n": np.int32(n), "stride": np.int32(stride), "off": np.int32(off)}


def _global_reference(args: dict, grid: int, block: int) -> dict:
    n, stride, off = int(args["n"]), int(args["stride"]), int(args["off"])
    y = np.zeros_like(args["y"])
    b = np.zeros_like(args["b"])
    z = np.zeros_like(args["z"])
    for r in range(grid):
        v = args["x"][r * stride + off:r * stride + off + n].reshape(block, 4).copy()
        v[:, 0] += np.float32(1)
        v[:, 3] *= np.float32(2)
        y[r * n:(r + 1) * n] = v.reshape(-1)
        q = args["a"][r * stride + off:r * stride + off + n].reshape(block, 4)
        b[r * n:(r + 1) * n] = q[:, ::-1].reshape(-1)
        z[r * (n // 2):r * (n // 2) + 2 * block] = v[:, 1:3].reshape(-1)
    return {"y": y, "b": b, "z": z}


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block,stride,off", [(3, 4, 20, 4), (5, 8, 36, 0), (2, 16, 68, 8)])
def test_global_rows_at_run_time_offsets(tmp_path, way, grid, block, stride, off) -> None:
    args = _global_args(grid, block, stride, off)
    got = run_way(GLOBAL, "rows", (grid, 1, 1), (block, 1, 1), args, way)
    want = _global_reference(args, grid, block)
    for name in ("y", "b", "z"):
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize("way", ["emulator", "llvm"])
@pytest.mark.parametrize("stride,off,line,col", [(20, 1, 4, 16), (18, 0, 4, 16), (20, 8, 7, 5)])
def test_misaligned_launch_stops_with_the_location(tmp_path, capfd, way, stride, off, line, col) -> None:
    # stride 18: row 0 is aligned, row 1 is not; n = 4 * block + 2 (line 7) misaligns the first store's row 1.
    args = _global_args(3, 4, stride, off)
    if line == 7:
        args["n"] = np.int32(18)
        args.update(y=np.zeros(80, np.float32), b=np.zeros(80, np.int32), z=np.zeros(80, np.float32))
    with pytest.raises(MisalignedAddressError) as info:
        run_way(GLOBAL, "rows", (3, 1, 1), (4, 1, 1), args, way)
    err = info.value
    assert err.loc is not None and (err.loc.line, err.loc.col) == (line, col)
    assert "misaligned address (cudaErrorMisalignedAddress)" in str(err)
    assert "multiple of 16" in str(err)
    stderr = capfd.readouterr().err
    assert f"rows.cu:{line}:{col}:" in stderr and "misaligned address" in stderr


def test_the_error_renders_with_the_source_line(tmp_path) -> None:
    args = _global_args(2, 4, 20, 2)
    with pytest.raises(UserError) as info:
        run_way(GLOBAL, "rows", (2, 1, 1), (4, 1, 1), args, "emulator")
    text = info.value.render()
    assert "rows.cu:4:16: error: misaligned address" in text
    assert "reinterpret_cast<const float4*>(&x[row * stride + off])[col]" in text and "^" in text


# Shared memory: a static array and the rows of the dynamic one (2-D extern shared), viewed as
# float2/float4 at offsets given at launch; local memory viewed as float4 at a run-time offset.
SHARED = r"""
#define C 12
__global__ void shared_views(const float* in, float* out, int k, int off) {
    __shared__ float s[72];
    extern __shared__ float rows[][C];
    int t = threadIdx.x;
    s[t] = in[blockIdx.x * 64 + t];
    if (t < 8) s[64 + t] = -in[blockIdx.x * 64 + t];
    for (int c = 0; c < C; c++)
        rows[t][c] = in[blockIdx.x * 64 + (t + c) % 64] * 2.0f;
    __syncthreads();
    float2 p = reinterpret_cast<float2*>(&s[k])[t / 2];
    float4 q = *(float4*)&rows[t][off];
    float loc[8];
    for (int j = 0; j < 8; j++)
        loc[j] = (float)(j * 10 + t);
    float4 w = *reinterpret_cast<float4*>(&loc[k % 8]);
    out[blockIdx.x * 64 + t] = (t % 2 ? p.y : p.x) + q.x + q.w + w.x + w.z;
}
"""


def _shared_reference(inp: np.ndarray, grid: int, k: int, off: int) -> np.ndarray:
    out = np.zeros(grid * 64, np.float32)
    for b in range(grid):
        s = np.concatenate([inp[b * 64:(b + 1) * 64], -inp[b * 64:b * 64 + 8]])
        rows = np.array([[s[(t + c) % 64] * np.float32(2) for c in range(12)] for t in range(64)], np.float32)
        for t in range(64):
            p = s[k + 2 * (t // 2) + t % 2]
            loc = np.array([j * 10 + t for j in range(8)], np.float32)
            w = loc[k % 8:k % 8 + 4]
            out[b * 64 + t] = np.float32(np.float32(np.float32(np.float32(p + rows[t][off]) + rows[t][off + 3])
                                                    + w[0]) + w[2])
    return out


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,k,off", [(1, 0, 0), (2, 4, 8), (3, 8, 4)])
def test_shared_and_local_views_at_run_time_offsets(tmp_path, way, grid, k, off) -> None:
    rng = np.random.default_rng(grid + k)
    inp = rng.standard_normal(grid * 64).astype(np.float32)
    args = {"in": inp, "out": np.zeros(grid * 64, np.float32), "k": np.int32(k), "off": np.int32(off)}
    if (k % 8) % 4:
        pytest.fail("the local view needs k % 8 a multiple of 4")
    got = run_way(SHARED, "shared_views", (grid, 1, 1), (64, 1, 1), args, way, shmem=64 * 12 * 4)
    np.testing.assert_array_equal(got["out"], _shared_reference(inp, grid, k, off))


@pytest.mark.parametrize("way", ["emulator", "llvm"])
@pytest.mark.parametrize("k,off,line", [(1, 0, 12), (0, 2, 13), (2, 0, 17)])
def test_misaligned_shared_and_local_views(tmp_path, way, k, off, line) -> None:
    args = {"in": np.ones(64, np.float32), "out": np.zeros(64, np.float32), "k": np.int32(k),
            "off": np.int32(off)}
    with pytest.raises(MisalignedAddressError) as info:
        run_way(SHARED, "shared_views", (1, 1, 1), (64, 1, 1), args, way, shmem=64 * 12 * 4)
    assert info.value.loc is not None and info.value.loc.line == line


def _block_function(c_source: str, kernel: str) -> str:
    start = c_source.index(f"static void {kernel}_block(")
    return c_source[start:c_source.index("\n}\n", start)]


def test_a_uniform_check_is_made_once_per_block_before_the_thread_loops(tmp_path) -> None:
    src = tmp_path / "rows.cu"
    src.write_text(GLOBAL)
    out = tmp_path / "rows.c"
    from polypy.driver.cli import main
    assert main(["translate", str(src), "--emit", "c", "-o", str(out)]) == 0
    body = _block_function(out.read_text(), "rows")
    lines = body.splitlines()
    # every row offset (x's and a's at `row * stride + off`, y's and b's at `row * n`, z's at
    # `row * (n / 2)`) depends on blockIdx and parameters only: one test per block, at the block
    # function's top level, outside every loop over threads
    top = [line for line in lines if line.startswith("    if (") or line.startswith("    } else")]
    assert top == ["    if ((((int)blockIdx.x * stride + off) & 3) != 0 || (((int)blockIdx.x * n) & 3) != 0 || "
                   "((stride * (int)blockIdx.x + off) & 3) != 0 || ((n * (int)blockIdx.x) & 3) != 0 || "
                   "(((int)blockIdx.x * (n / 2)) & 1) != 0) {",
                   "    } else {"]
    # the path an aligned launch takes has no check left
    fast = body[body.index("\n    } else {"):]
    assert "!= 0" not in fast and "cudaErrorMisalignedAddress" not in fast and "polypy_device_assert" not in fast


def test_the_checked_path_is_the_kernel_as_written() -> None:
    from c_support import gpu_kernel
    from polypy.passes.hoist_faults import hoist_faults
    from polypy.ir import print_kernel
    kernel = gpu_kernel(
        "kernel k(x: f64*, n: i32) {\n"
        "  x[threadIdx.x] = 1.0\n"
        "  if ((n & 3) != 0) {\n"
        "    fault.misaligned \"float4 * view\" at \"k.cu\":3:7 in \"void k(float *, int)\", blockIdx.x, blockIdx.y, "
        "blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z\n"
        "  } else {\n"
        "    x[threadIdx.x + 1u] = 2.0\n"
        "  }\n"
        "}\n")
    assert print_kernel(hoist_faults(kernel)) == (
        "kernel k(x: f64*, n: i32) {\n"
        "  if ((n & 3) != 0) {\n"
        "    x[threadIdx.x] = 1.0\n"
        "    if ((n & 3) != 0) {\n"
        "      fault.misaligned \"float4 * view\" at \"k.cu\":3:7 in \"void k(float *, int)\", blockIdx.x, blockIdx.y, "
        "blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z\n"
        "    } else {\n"
        "      x[threadIdx.x + 1u] = 2.0\n"
        "    }\n"
        "  } else {\n"
        "    x[threadIdx.x] = 1.0\n"
        "    x[threadIdx.x + 1u] = 2.0\n"
        "  }\n"
        "}\n")


def test_a_thread_dependent_check_stays_with_the_access(tmp_path) -> None:
    src = tmp_path / "shared_views.cu"
    src.write_text(SHARED)
    out = tmp_path / "shared_views.c"
    from polypy.driver.cli import main
    assert main(["translate", str(src), "--emit", "c", "-o", str(out)]) == 0
    body = _block_function(out.read_text(), "shared_views")
    # `&s[k]` and `&loc[k % 8]` are block-uniform: tested once, before the thread loops; the
    # path of an aligned launch checks only `&rows[t][off]` (element t * 12 + off), in the loop
    # over threads, at each access
    assert "    if ((k & 1) != 0 || ((k % 8) & 3) != 0) {" in body.splitlines()
    fast = body[body.rindex("\n    } else {"):]
    assert "(k & 1)" not in fast and "(k % 8)" not in fast
    check = fast.index(" * 12 + off) & 3) != 0")
    assert fast.index("for (unsigned int tx") < check


def test_a_view_whose_alignment_is_not_its_size_is_still_refused(tmp_path) -> None:
    src = tmp_path / "k.cu"
    src.write_text("__global__ void k(float* x, float* y, int off) {\n"
                   "  float3 v = *(float3*)&x[off];\n  y[0] = v.x;\n}\n")
    with pytest.raises(UserError) as info:
        polypy.load(str(src))
    assert "cannot tell that the offset is a multiple of 12 bytes" in str(info.value)
    assert (info.value.loc.line, info.value.loc.col) == (2, 15)


PROGRAM = r"""
#include <cstdio>
__global__ void copy4(const float* x, float* y, int stride) {
    float4 v = reinterpret_cast<const float4*>(&x[blockIdx.x * stride])[threadIdx.x];
    reinterpret_cast<float4*>(y)[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
int main() {
    float h[64], o[32];
    for (int i = 0; i < 64; i++) h[i] = (float)i;
    float *x, *y;
    cudaMalloc(&x, sizeof h);
    cudaMalloc(&y, sizeof o);
    cudaMemcpy(x, h, sizeof h, cudaMemcpyHostToDevice);
    copy4<<<4, 2>>>(x, y, 12);
    printf("launch %d sync %d\n", (int)cudaGetLastError(), (int)cudaDeviceSynchronize());
    cudaMemcpy(o, y, sizeof o, cudaMemcpyDeviceToHost);
    printf("%g %g %g\n", o[0], o[8], o[31]);
    copy4<<<4, 2>>>(x, y, 10);
    cudaError_t e = cudaDeviceSynchronize();
    printf("sync %d %s %s\n", (int)e, cudaGetErrorName(e), cudaGetErrorString(e));
    printf("last %d\n", (int)cudaGetLastError());
    return 0;
}
"""

EXPECTED = ["launch 0 sync 0", "0 12 43", "sync 716 cudaErrorMisalignedAddress misaligned address", "last 716"]


def _check_stderr(stderr: str, src) -> None:
    # stride 10: block 1 starts at byte 40, not a multiple of 16 (block 0 and 2 are aligned)
    lines = stderr.strip().splitlines()
    assert lines and all(line.startswith(f"{src}:4:16: void copy4(const float *, float *, int): block: [")
                         and "misaligned address: const float4 * view at a byte offset that is not a multiple "
                             "of 16" in line for line in lines), stderr
    assert any("block: [1,0,0], thread: [0,0,0]" in line for line in lines), stderr
    assert not any("block: [0,0,0]" in line or "block: [2,0,0]" in line for line in lines), stderr


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: whole programs cannot be compiled")
def test_whole_program_reports_cuda_error_misaligned_address(tmp_path) -> None:
    src = tmp_path / "p.cu"
    src.write_text(PROGRAM)
    out = tmp_path / "p.cpp"
    subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o", str(out)],
                   check=True, cwd=tmp_path)
    build = subprocess.run(["g++", "-O2", "-fopenmp", "-Wall", str(out), "-o", str(tmp_path / "p"), "-lm"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0 and "warning" not in build.stderr, build.stderr
    run = subprocess.run([str(tmp_path / "p")], capture_output=True, text=True, cwd=tmp_path)
    assert run.stdout.splitlines() == EXPECTED
    _check_stderr(run.stderr, src)


@pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                    reason="no C++ compiler: polypy run cannot build the host program")
def test_emulated_whole_program_reports_cuda_error_misaligned_address(tmp_path) -> None:
    src = tmp_path / "p.cu"
    src.write_text(PROGRAM)
    run = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", "--emulate", str(src)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == EXPECTED
    _check_stderr(run.stderr, src)


def test_ir_text_round_trip_of_a_fault() -> None:
    from polypy.ir import parse_kernel, print_kernel
    text = ("kernel k(x: f32*, off: i32) {\n"
            "  if ((off & 3) != 0) {\n"
            "    fault.misaligned \"float4 * view\" at \"k.cu\":3:7 in \"void k(float *, int)\", blockIdx.x, "
            "blockIdx.y, blockIdx.z, 0u, 0u, 0u\n"
            "  }\n"
            "}\n")
    kernel = parse_kernel(text)
    fault = kernel.body[0].then[0]
    assert (fault.fault, fault.line, fault.col, fault.text) == ("misaligned", 3, 7, "float4 * view")
    assert print_kernel(kernel) == text


def test_an_argument_off_the_views_alignment_is_refused_at_launch(tmp_path) -> None:
    # offsets are checked from the argument's start: an argument that itself starts off 16 bytes
    # (a sliced array) is refused, located at the cast, rather than run with another meaning
    src = tmp_path / "rows.cu"
    src.write_text(GLOBAL)
    mod = polypy.compile(str(src))
    args = _global_args(2, 4, 20, 4)
    storage = np.zeros(args["x"].size + 1, np.float32)
    shifted = storage[1:]
    shifted[:] = args["x"]
    assert shifted.ctypes.data % 16
    args["x"] = shifted
    with pytest.raises(UserError) as info:
        mod.rows[(2, 1, 1), (4, 1, 1)](*args.values())
    assert "argument 'x' of kernel 'rows' is at an address that is not a multiple of 16 bytes" in str(info.value)
    assert (info.value.loc.line, info.value.loc.col) == (4, 16)
    # the same data in an array at a multiple of 16 bytes runs
    room = np.zeros(shifted.size + 4, np.float32)
    start = (-room.ctypes.data % 16) // 4
    args["x"] = room[start:start + shifted.size]
    args["x"][:] = shifted
    assert args["x"].ctypes.data % 16 == 0
    mod.rows[(2, 1, 1), (4, 1, 1)](*args.values())
    np.testing.assert_array_equal(args["y"], _global_reference(args, 2, 4)["y"])


GRAD = r"""
__global__ void k(const float* x, float* y, int stride) {
    float4 v = reinterpret_cast<const float4*>(&x[blockIdx.x * stride])[threadIdx.x];
    y[blockIdx.x * blockDim.x + threadIdx.x] = v.x * v.y + v.w;
}
"""


def test_the_gradient_of_a_checked_view(tmp_path) -> None:
    src = tmp_path / "g.cu"
    src.write_text(GRAD)
    g = polypy.grad(polypy.compile(str(src)).k, wrt=["x", "y"])
    rows, block, stride = 3, 4, 20
    rng = np.random.default_rng(3)
    x = rng.random(rows * stride + 16).astype(np.float32)
    dx = np.zeros_like(x)
    dy = rng.random(rows * block).astype(np.float32)
    want = np.zeros_like(x)
    for b in range(rows):
        for t in range(block):
            at, seed = b * stride + 4 * t, dy[b * block + t]
            want[at] += seed * x[at + 1]
            want[at + 1] += seed * x[at]
            want[at + 3] += seed
    g[rows, block](x, dx, np.zeros(rows * block, np.float32), dy.copy(), np.int32(stride))
    np.testing.assert_allclose(dx, want, rtol=1e-6)
    with pytest.raises(MisalignedAddressError) as info:
        g[rows, block](x, dx, np.zeros(rows * block, np.float32), dy.copy(), np.int32(18))
    assert (info.value.loc.line, info.value.loc.col) == (3, 16)


def test_cuda_output_of_a_checked_view_is_refused(tmp_path) -> None:
    # on a GPU the access itself faults; written back as an assert it would fail with another error
    from polypy.driver.cli import main
    src = tmp_path / "g.cu"
    src.write_text(GRAD)
    out = tmp_path / "g_grad.cu"
    assert main(["grad", str(src), "--kernel", "k", "--wrt", "x,y", "--emit", "cuda", "-o", str(out)]) == 1
    assert not out.exists()


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed: the C kernel file cannot be compiled")
def test_c_kernel_file_sets_its_flag_to_2(tmp_path) -> None:
    from polypy.driver.cli import main
    kernel = PROGRAM[PROGRAM.index("__global__"):PROGRAM.index("int main")]
    (tmp_path / "k.cu").write_text(kernel)
    assert main(["translate", str(tmp_path / "k.cu"), "--emit", "c", "-o", str(tmp_path / "k.c")]) == 0
    (tmp_path / "main.c").write_text(
        '#include "k.c"\n'
        "int main(void) {\n"
        "  float x[64], y[32];\n"
        "  for (int i = 0; i < 64; i++) x[i] = (float)i;\n"
        "  copy4_launch(4, 1, 1, 2, 1, 1, 0, x, y, 12);\n"
        '  printf("flag %d y %g %g\\n", polypy_device_assert_failed, y[8], y[31]);\n'
        "  copy4_launch(4, 1, 1, 2, 1, 1, 0, x, y, 10);\n"
        '  printf("flag %d\\n", polypy_device_assert_failed);\n'
        "  return 0;\n"
        "}\n")
    build = subprocess.run(["gcc", "-O2", "-fopenmp", "-Wall", "main.c", "-o", "main", "-lm"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0 and "warning" not in build.stderr, build.stderr
    run = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True, cwd=tmp_path)
    assert run.stdout.splitlines() == ["flag 0 y 12 43", "flag 2"]
    assert "k.cu:2:16: void copy4(const float *, float *, int): block: [1,0,0]" in run.stderr


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: whole programs cannot be compiled")
@pytest.mark.parametrize("emulate", [False, True])
def test_whole_program_refuses_an_argument_off_the_views_alignment(tmp_path, emulate) -> None:
    # `x + 1`: the argument itself starts 4 bytes past a 16-byte boundary
    src = tmp_path / "p.cu"
    src.write_text(PROGRAM.replace("copy4<<<4, 2>>>(x, y, 10);", "copy4<<<4, 2>>>(x + 1, y, 12);"))
    if emulate:
        run = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", "--emulate", str(src)],
                             capture_output=True, text=True, cwd=tmp_path)
    else:
        out = tmp_path / "p.cpp"
        subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(src), "-o", str(out)],
                       check=True, cwd=tmp_path)
        build = subprocess.run(["g++", "-O2", "-fopenmp", "-Wall", str(out), "-o", str(tmp_path / "p"), "-lm"],
                               capture_output=True, text=True, cwd=tmp_path)
        assert build.returncode == 0 and "warning" not in build.stderr, build.stderr
        run = subprocess.run([str(tmp_path / "p")], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 1
    assert run.stdout.splitlines() == EXPECTED[:2]
    assert run.stderr.startswith(f"{src}:4:16: error: argument 'x' of kernel 'copy4' is at an address that is not a "
                                 "multiple of 16 bytes"), run.stderr
    assert "^" in run.stderr
