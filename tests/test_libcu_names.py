"""What NVIDIA's dmmaTensorCoreGemm needed past its int4 copies (docs/cuda_samples.md): polypy's
``cuda::pipeline`` and ``cuda::aligned_size_t`` named in a kernel of a file that also includes
libcu++'s ``<cuda/std/type_traits>`` (whose headers open the namespace ``cuda`` first: naming the
namespace is not using CCCL), and a constructor called with braces on a template whose argument is
an expression (``cuda::aligned_size_t<alignof(double2)>{n}``: clang lists ``alignof(double2)``
among the call's children). Our own kernel against NumPy through the emulator, the LLVM JIT and
the C backend; a CCCL declaration named in device code stays a located refusal.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from polypy.cccl import include_dir
from polypy.errors import UserError
from test_typed_views import WAYS, _run

HEADERS = ("#include <cooperative_groups.h>\n#include <cooperative_groups/memcpy_async.h>\n#include <cuda/barrier>\n"
           "#include <cuda/pipeline>\n#include <cuda/std/type_traits>\nnamespace cg = cooperative_groups;\n")

KERNEL = HEADERS + r"""
template <typename T> struct Twice { T v; __device__ explicit Twice(T x) { v = 2 * x; } };

__global__ void staged_pairs(const double2* src, double* out) {
  __shared__ double2 tile[64];
  cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
  const auto one = cuda::aligned_size_t<alignof(double2)>(sizeof(double2));
  int t = threadIdx.x;
  pipe.producer_acquire();
  cuda::memcpy_async(&tile[t], &src[blockIdx.x * blockDim.x + t], one, pipe);
  pipe.producer_commit();
  cuda::pipeline_consumer_wait_prior<0>(pipe);
  __syncthreads();
  double2 mine = tile[blockDim.x - 1 - t];
  pipe.consumer_release();
  __syncthreads();
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> tile32 = cg::tiled_partition<32>(block);
  int w = t / 32;
  cg::memcpy_async(tile32, tile + 32 * w, src + blockIdx.x * blockDim.x + 32 * w,
                   cuda::aligned_size_t<alignof(double2)>{tile32.size() * sizeof(double2)});
  cg::wait(tile32);
  Twice<int> k = Twice<int>{t};
  out[2 * (blockIdx.x * blockDim.x + t)] = mine.x + tile[32 * w + (t + 1) % 32].y;
  out[2 * (blockIdx.x * blockDim.x + t) + 1] = (double)k.v;
}
"""


def _need_cccl() -> None:
    if include_dir() is None:
        pytest.skip("NVIDIA's CCCL headers (pip package nvidia-cuda-cccl) are not installed: <cuda/std/...> absent")


@pytest.mark.parametrize("shape", [(1, 32), (3, 64)])
@pytest.mark.parametrize("way", WAYS)
def test_pipeline_and_brace_constructed_sizes_next_to_libcu(tmp_path, way: str, shape) -> None:
    _need_cccl()
    grid, block = shape
    rng = np.random.default_rng(19)
    n = grid * block
    src = rng.standard_normal(2 * n)
    got = _run(tmp_path, KERNEL, "staged_pairs", grid, block, {"src": src, "out": np.zeros(2 * n)}, way)
    pairs = src.reshape(grid, block, 2)
    want = np.zeros((grid, block, 2))
    for t in range(block):
        w = t // 32
        want[:, t, 0] = pairs[:, block - 1 - t, 0] + pairs[:, 32 * w + (t + 1) % 32, 1]
        want[:, t, 1] = 2 * t
    np.testing.assert_array_equal(got["out"], want.reshape(-1))


def test_a_cccl_declaration_in_device_code_stays_refused(tmp_path) -> None:
    _need_cccl()
    path = tmp_path / "min.cu"
    path.write_text(HEADERS + "__global__ void k(int* x) {\n  x[0] = cuda::std::min(x[1], x[2]);\n}\n")
    with pytest.raises(UserError) as info:
        polypy.load(str(path))
    assert "'min' (CCCL's cuda/std/" in info.value.message, info.value.message
    assert info.value.loc is not None and (info.value.loc.line, info.value.loc.col) == (8, 10), info.value.render()


def test_a_cccl_declaration_stays_refused_when_the_file_is_loaded_again(tmp_path) -> None:
    """The second load of a file parses it through a precompiled preamble, whose unit lists no
    inclusions: the refusal must not depend on them (it once did, and the second load accepted
    ``cuda::std::min`` in a kernel)."""
    _need_cccl()
    path = tmp_path / "again.cu"
    path.write_text(HEADERS + "__global__ void k(int* x) {\n  x[0] = cuda::std::min(x[1], x[2]);\n}\n")
    for _ in range(2):
        with pytest.raises(UserError) as info:
            polypy.load(str(path))
        assert "'min' (CCCL's cuda/std/" in info.value.message, info.value.message
