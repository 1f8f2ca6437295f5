"""Memory fences and the last-block pattern (issue 36, item 5).

``__threadfence_block`` / ``__threadfence`` / ``__threadfence_system`` are one IR statement,
``Fence(scope)``: a sequentially consistent fence in both CPU backends (and, in a kernel with
one, every atomic is followed by one), nothing in the emulator's lockstep execution, whose race
detector orders blocks through fences and atomics (``polypy.emulator.fences``).

The classic reduction (each block writes its partial, fences, takes a ticket with atomicInc;
the block with the last ticket adds the partials and resets the counter) gives the exact sum on
every launch shape, twice in a row on one module, through the emulator, the LLVM JIT and the C
backend; the emulator still reports the race when the fence is missing or misplaced.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import copy_args, need_compiler
from polypy.driver.library import build_library
from codegen.cuda import print_cuda_kernel
from polypy.driver.pipelines import to_cpu
from polypy.emulator import emulate
from polypy.errors import UserError
from polypy.ir import parse_kernel, print_kernel
from polypy.ir.verifier import verify_kernel

LAST_BLOCK = r"""
__device__ unsigned int count = 0;
__global__ void sum(const int* x, int* partial, int* result, int n) {
  __shared__ int s[256];
  __shared__ bool amLast;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = s[0];
    FENCE_BEFORE
    unsigned int ticket = atomicInc(&count, gridDim.x);
    FENCE_AFTER
    amLast = (ticket == gridDim.x - 1);
  }
  __syncthreads();
  if (amLast && threadIdx.x == 0) {
    int t = 0;
    for (int b = 0; b < gridDim.x; b++) t += partial[b];
    result[0] = t;
    count = 0;
  }
}
"""

SHAPES = [(1, 32), (7, 64), (40, 128), (3, 256), (301, 32)]


def _source(tmp_path, before: str = "__threadfence();", after: str = "", name: str = "last.cu"):
    path = tmp_path / name
    path.write_text(LAST_BLOCK.replace("FENCE_BEFORE", before).replace("FENCE_AFTER", after))
    return path


def _args(grid: int, block: int) -> dict:
    n = grid * block - 5
    x = (np.arange(n, dtype=np.int64) * 7919 % 201 - 100).astype(np.int32)
    return {"x": x, "partial": np.zeros(grid, np.int32), "result": np.zeros(1, np.int32), "n": n}


@pytest.mark.parametrize("grid,block", SHAPES)
@pytest.mark.parametrize("way", ["emulator", "llvm", "c"])
def test_last_block_reduction_is_exact(tmp_path, way: str, grid: int, block: int) -> None:
    path = _source(tmp_path)
    if way == "llvm":
        kernel = polypy.compile(str(path)).sum

        def launch(out):
            kernel[grid, block](*out.values())
    elif way == "c":
        need_compiler()
        module = polypy.load(str(path))
        lib = build_library([to_cpu(module.kernel("sum"))], module.globals)

        def launch(out):
            lib.launch("sum", grid, block, out)
    else:
        module = polypy.load(str(path))
        counter = {"count": np.zeros(1, np.uint32)}  # one device global across both launches

        def launch(out):
            emulate(module.kernel("sum"), grid, block, out, globals=counter)
    for round_ in range(2):  # the last block resets the counter: the second launch is right too
        args = _args(grid, block)
        args["x"] = args["x"] + np.int32(round_)
        out = copy_args(args)
        launch(out)
        assert int(out["result"][0]) == int(args["x"].astype(np.int64).sum()), (way, round_)


@pytest.mark.parametrize("before,after", [("", ""), ("", "__threadfence();"), ("__threadfence_block();", "")],
                         ids=["no-fence", "fence-after-ticket", "block-fence"])
def test_emulator_reports_the_race_without_a_fence_before_the_ticket(tmp_path, before: str, after: str) -> None:
    path = _source(tmp_path, before, after)
    kernel = polypy.load(str(path)).kernel("sum")
    with pytest.raises(UserError, match=r"data race on global memory partial\[0\].*different blocks"):
        emulate(kernel, 4, 32, _args(4, 32))


def test_a_fence_covers_only_the_fencing_threads_writes(tmp_path) -> None:
    """Thread 1 writes the partial, thread 0 fences and takes the ticket, with no barrier between:
    CUDA orders nothing of thread 1's, and the emulator says so."""
    path = tmp_path / "other.cu"
    path.write_text(LAST_BLOCK.replace("FENCE_BEFORE", "__threadfence();").replace("FENCE_AFTER", "")
                    .replace("  if (threadIdx.x == 0) {\n    partial[blockIdx.x] = s[0];",
                             "  if (threadIdx.x == 1) partial[blockIdx.x] = s[0];\n  if (threadIdx.x == 0) {"))
    kernel = polypy.load(str(path)).kernel("sum")
    with pytest.raises(UserError, match=r"data race on global memory partial\[0\]"):
        emulate(kernel, 4, 32, _args(4, 32))
    # With a barrier between the write and the fence, thread 0's fence covers it.
    path.write_text(path.read_text().replace("  if (threadIdx.x == 0) {\n    __threadfence();",
                                             "  __syncthreads();\n  if (threadIdx.x == 0) {\n    __threadfence();"))
    args = _args(4, 32)
    out = copy_args(args)
    emulate(polypy.load(str(path)).kernel("sum"), 4, 32, out)
    assert int(out["result"][0]) == int(args["x"].sum())


def test_fence_scopes_in_ir_text_cuda_and_c(tmp_path) -> None:
    path = tmp_path / "scopes.cu"
    path.write_text("__global__ void k(int* x) {\n  x[threadIdx.x] = 1;\n  __threadfence_block();\n"
                    "  __threadfence();\n  __threadfence_system();\n  atomicAdd(x, 1);\n}\n")
    kernel = polypy.load(str(path)).kernel("k")
    text = print_kernel(kernel)
    assert [line.strip() for line in text.splitlines() if "fence" in line] == \
        ["fence.block", "fence.device", "fence.system"]
    again = parse_kernel(text)
    verify_kernel(again)
    assert print_kernel(again) == text
    cuda = print_cuda_kernel(kernel)
    assert cuda.index("__threadfence_block();") < cuda.index("__threadfence();") < cuda.index("__threadfence_system();")
    from polypy.driver.library import emit_kernels

    c_text = emit_kernels([to_cpu(kernel)])
    # Three fences, and one after the atomic (the prelude's atomics are relaxed).
    assert c_text.count("__atomic_thread_fence(__ATOMIC_SEQ_CST)") == 4


def test_grad_refuses_fences_with_their_location(tmp_path, capsys) -> None:
    path = tmp_path / "g.cu"
    path.write_text("__global__ void k(float* x, float* y) {\n  y[threadIdx.x] = x[threadIdx.x] * 2;\n"
                    "  __threadfence();\n}\n")
    from polypy.driver.cli import main

    out = tmp_path / "g_grad.cu"
    assert main(["grad", str(path), "--kernel", "k", "-o", str(out)]) == 1
    assert not out.exists()
    err = capsys.readouterr().err
    assert f"{path}:3:3: error: " in err and "Fence" in err and "Traceback" not in err
