"""``__syncwarp`` (issue 36, item 6): shared- and global-memory warp code ordered by it runs
exactly (``gpu2cpu.lower_warp_syncs``: block barriers between guarded phases) through the
emulator, the LLVM JIT and the C backend, checked against NumPy; what cannot be run exactly is
refused at the ``__syncwarp``.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import copy_args, run_c, run_emulated
from codegen.cuda import print_cuda_kernel
from polypy.driver.source import parse
from polypy.errors import UserError
from polypy.ir import parse_kernel, print_kernel
from polypy.ir import nodes as n
from polypy.ir.verifier import verify_kernel
from polypy.ir.visitor import walk

WARP_CODE = r"""
__global__ void reduce(const float* x, float* out) {
  __shared__ float s[128];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 128 + t];
  __syncthreads();
  if (t < 64) s[t] += s[t + 64];
  __syncthreads();
  if (t < 32) {
    float v = s[t] + s[t + 32];
    s[t] = v;
    __syncwarp();
    for (int k = 16; k > 0; k >>= 1) {
      v += s[t + k];
      __syncwarp(0xffffffff);
      s[t] = v;
      __syncwarp();
    }
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

__global__ void exchange(const int* x, int* y, int* g, int* z) {
  __shared__ int s[96];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  s[t] = x[i] * 3;
  g[i] = x[i] + 1;
  __syncwarp();
  y[i] = s[t ^ 1] - s[(t & ~31) | ((t + 5) & 31)];
  z[i] = g[blockIdx.x * blockDim.x + (t ^ 7)];
}
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("syncwarp") / "warp.cu"
    path.write_text(WARP_CODE)
    return path


def _run(source, way: str, name: str, grid: int, block: int, args: dict) -> dict:
    if way == "llvm":
        out = copy_args(args)
        getattr(polypy.compile(str(source)), name)[grid, block](*out.values())
        return out
    kernel = polypy.load(str(source)).kernel(name)
    return (run_emulated if way == "emulator" else run_c)(kernel, grid, block, args)


@pytest.mark.parametrize("way", ["emulator", "llvm", "c"])
def test_last_warp_reduction_ordered_by_syncwarp(source, way: str) -> None:
    blocks = 5
    x = (np.arange(blocks * 128) * 37 % 101).astype(np.float32) / 8
    out = _run(source, way, "reduce", blocks, 128, {"x": x, "out": np.zeros(blocks, np.float32)})
    # Sums of eighths below 2^24 / 8: exact in float, in any order.
    np.testing.assert_array_equal(out["out"], x.reshape(blocks, 128).sum(1, dtype=np.float64).astype(np.float32))


@pytest.mark.parametrize("way", ["emulator", "llvm", "c"])
def test_lanes_exchange_through_shared_and_global_memory(source, way: str) -> None:
    blocks, block = 3, 96
    x = np.random.default_rng(3).integers(-1000, 1000, blocks * block).astype(np.int32)
    args = {"x": x, "y": np.zeros_like(x), "g": np.zeros_like(x), "z": np.zeros_like(x)}
    out = _run(source, way, "exchange", blocks, block, args)
    t = np.arange(blocks * block) % block
    base = np.arange(blocks * block) - t
    s = x * 3
    np.testing.assert_array_equal(out["y"], s[base + (t ^ 1)] - s[base + ((t & ~31) | ((t + 5) & 31))])
    np.testing.assert_array_equal(out["z"], x[base + (t ^ 7)] + 1)


def test_syncwarp_in_ir_text_and_cuda(source) -> None:
    module = parse(str(source))
    kernel = module.kernel("reduce")
    syncs = [x for s in kernel.body for x in walk(s) if isinstance(x, n.WarpSync)]
    assert len(syncs) == 3
    text = print_kernel(kernel)
    assert text.count("syncwarp(0xffffffff)") == 3 or text.count("syncwarp(") == 3
    again = parse_kernel(text)
    verify_kernel(again)
    assert print_kernel(again) == text
    assert print_cuda_kernel(kernel).count("__syncwarp(") == 3
    # After polypy.load no __syncwarp is left: block barriers between guarded phases.
    loaded = polypy.load(str(source)).kernel("reduce")
    assert not any(isinstance(x, n.WarpSync) for s in loaded.body for x in walk(s))


REFUSED = [
    ("both-branches",
     "__global__ void k(int* x) {\n  __shared__ int s[64];\n  int t = threadIdx.x;\n  s[t] = t;\n"
     "  if (t % 2) { __syncwarp(); x[t] = s[t ^ 1]; }\n  else { __syncwarp(); x[t] = -s[t ^ 1]; }\n}\n",
     "under other conditions than the kernel's first __syncwarp", (6, 10)),
    ("thread-dependent-trips",
     "__global__ void k(int* x) {\n  __shared__ int s[64];\n  int t = threadIdx.x;\n  s[t] = 0;\n"
     "  for (int j = 0; j < t % 4; j++) {\n    s[t] += j;\n    __syncwarp();\n    if (s[t] > 9) break;\n"
     "    x[t] += s[t ^ 1];\n  }\n}\n",
     "__syncwarp in control flow polypy cannot run with block barriers", (7, 5)),
]


@pytest.mark.parametrize("name,src,message,where", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_at_the_syncwarp(tmp_path, name: str, src: str, message: str, where: tuple[int, int]) -> None:
    path = tmp_path / f"{name}.cu"
    path.write_text(src)
    with pytest.raises(UserError) as info:
        polypy.load(str(path))
    assert message in info.value.message, info.value.render()
    assert info.value.loc is not None and (info.value.loc.line, info.value.loc.col) == where, info.value.render()
