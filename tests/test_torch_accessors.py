"""PyTorch's packed tensor accessors in kernels (``frontend/lower/accessors.py``), without ATen.

The kernels here include only PyTorch's header-only accessor header (as ``polypy_torch_host.h``
reads it for an extension: ``__host__ __device__``), so they parse in a second; they are compiled
by ``polypy.compile`` and run on NumPy arrays, each accessor given as what the launcher of an
extension takes from it (``x.data()``, ``x.size(d)``, ``x.stride(d)``: the IR parameters ``x``,
``x_size0``, ..., ``x_stride0``, ...). tests/test_torch_extensions.py builds an extension with
accessor kernels through PyTorch itself.
"""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import polypy
from polypy.errors import UserError
from polypy.ir.parser import parse_kernel
from polypy.ir.printer import print_kernel
from polypy.sources import SystemIncludeDir

_TORCH = importlib.util.find_spec("torch")
if _TORCH is None or _TORCH.origin is None:
    pytest.skip("PyTorch's headers are needed: pip install -e '.[torch]'", allow_module_level=True)
TORCH_INCLUDE = pathlib.Path(_TORCH.origin).parent / "include"
if not (TORCH_INCLUDE / "torch" / "headeronly" / "core" / "TensorAccessor.h").is_file():
    pytest.skip("this PyTorch has no torch/headeronly/core/TensorAccessor.h", allow_module_level=True)

PRELUDE = r"""
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>
#include <torch/headeronly/macros/Macros.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>
#pragma clang force_cuda_host_device begin
#include <torch/headeronly/core/TensorAccessor.h>
#pragma clang force_cuda_host_device end
template <typename T>
struct Restrict {
  typedef T* __restrict__ PtrType;
};
template <typename T, size_t N>
using Acc32 = torch::headeronly::HeaderOnlyGenericPackedTensorAccessor<T, N, Restrict, int32_t>;
template <typename T, size_t N>
using Acc64 = torch::headeronly::HeaderOnlyGenericPackedTensorAccessor<T, N, torch::headeronly::DefaultPtrTraits, int64_t>;
"""

KERNELS = PRELUDE + r"""
// 2-D, 32-bit indices, RestrictPtrTraits: read through one accessor, read and written through another.
__global__ void add_transposed(const Acc32<float, 2> x, Acc32<float, 2> out) {
  const int r = blockIdx.x, c = threadIdx.x;
  if (r < out.size(0) && c < out.size(1)) out[r][c] += x[c][r];
}

__device__ double row_sum(const torch::headeronly::HeaderOnlyTensorAccessor<double, 1> row) {
  double s = 0;
  for (int64_t k = 0; k < row.size(0); ++k) s += row[k];
  return s;
}

// 3-D, 64-bit indices, DefaultPtrTraits: rows kept in locals, one passed to a device function,
// a stride chosen at run time, and data() with the strides (the thread's own element).
__global__ void planes(Acc64<double, 3> x, Acc64<double, 2> sums, Acc64<int64_t, 1> strides) {
  auto plane = x[blockIdx.y];
  auto row = plane[blockIdx.x];
  if (threadIdx.x == 0) sums[blockIdx.y][blockIdx.x] = row_sum(row);
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x < 3) strides[threadIdx.x] = x.stride(threadIdx.x);
  __syncthreads();
  for (int64_t k = threadIdx.x; k < row.size(0); k += blockDim.x)
    row[k] = 2 * row[k] + x.data()[blockIdx.y * x.stride(0) + blockIdx.x * x.stride(1) + k * x.stride(2)];
}
"""


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    path = tmp_path_factory.mktemp("accessors") / "accessors.cu"
    path.write_text(KERNELS)
    return polypy.compile(path, include_dirs=(SystemIncludeDir(str(TORCH_INCLUDE)),))


def _accessor(name: str, a: np.ndarray) -> dict:
    """The kernel arguments an accessor of ``a`` stands for (its base array, sizes, strides)."""
    base = a
    while isinstance(base.base, np.ndarray):
        base = base.base
    out = {name: base.reshape(-1)}
    for d, (size, stride) in enumerate(zip(a.shape, a.strides)):
        out[f"{name}_size{d}"] = size
        out[f"{name}_stride{d}"] = stride // a.itemsize
    assert a.__array_interface__["data"][0] == base.__array_interface__["data"][0]  # views from element 0
    return out


def test_two_dimensional_accessors_read_and_write(mod):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    out = rng.standard_normal((5, 6)).astype(np.float32)
    want = out + x.T
    mod.add_transposed[5, 8](**_accessor("x", x), **_accessor("out", out))
    np.testing.assert_array_equal(out, want)
    # A transposed view: the accessor's strides, not the memory order, say where [r][c] is.
    xt = np.ascontiguousarray(rng.standard_normal((5, 6)).astype(np.float32)).T
    out2 = np.zeros((5, 6), np.float32)
    mod.add_transposed[5, 8](**_accessor("x", xt), **_accessor("out", out2))
    np.testing.assert_array_equal(out2, xt.T)


def test_accessor_indexing_is_the_flat_address_of_the_strides(mod):
    text = print_kernel(mod.add_transposed.gpu)
    # x[c][r] is element c * x_stride0 + r * x_stride1 of x; out is read and written likewise
    assert "x_stride0" in text and "x_stride1" in text and "out_stride1" in text, text
    assert "out_size0" in text and "out_size1" in text, text
    assert 'source x: "const Acc32<float, 2>" (.data() = x, .size(0) = x_size0' in text, text
    # the textual IR reads back, the accessor's member paths included
    assert parse_kernel(text).source_params == mod.add_transposed.gpu.source_params


def test_three_dimensional_accessor_rows_device_function_and_run_time_strides(mod):
    rng = np.random.default_rng(1)
    base = rng.standard_normal((4, 3, 7))
    x = base.transpose(1, 0, 2)  # shape (3, 4, 7), strides (7, 21, 1) elements
    before = x.copy()
    sums = np.zeros((3, 4))
    strides = np.zeros(3, np.int64)
    mod.planes[(4, 3), 32](**_accessor("x", x), **_accessor("sums", sums), **_accessor("strides", strides))
    np.testing.assert_allclose(sums, before.sum(axis=2), rtol=1e-12)
    np.testing.assert_array_equal(strides, [7, 21, 1])
    np.testing.assert_allclose(x, 3 * before, rtol=1e-15)


REFUSALS = [
    ("__global__ void k(Acc32<float, 1> x, Acc32<float, 1> y) { x = y; x[0] = 1; }",
     "assigning a tensor accessor is not supported in device code"),
    ("__global__ void k(Acc32<float, 2> x) { x[0][0] = x.size(2); }",
     "size(2) of an accessor of 2 dimensions"),
    ("__global__ void k(Acc64<float, 2> x) { auto r = x[0]; r[0] = r.sizes()[0]; }",
     "'sizes' of a tensor accessor is not supported in device code"),
    ("__global__ void k(torch::headeronly::HeaderOnlyTensorAccessor<float, 1> x) { x[0] = 1; }",
     "a TensorAccessor holds pointers to host memory"),
    ("__global__ void k(Acc32<float, 2> x) { x[0] = x[1]; }",
     "assigning a tensor accessor is not supported in device code"),
]


@pytest.mark.parametrize("body, message", REFUSALS)
def test_unsupported_uses_of_accessors_are_refused_with_a_location(tmp_path, body, message):
    path = tmp_path / "bad.cu"
    path.write_text(PRELUDE + body + "\n")
    with pytest.raises(UserError) as info:
        polypy.compile(path, include_dirs=(SystemIncludeDir(str(TORCH_INCLUDE)),))
    text = info.value.render()
    assert message in text, text
    assert f"{path}:{PRELUDE.count(chr(10)) + 1}:" in text, text
