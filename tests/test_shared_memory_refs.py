"""The ``SharedMemory<T>`` idiom and functions returning references (issue 36 item 2): a struct
template whose conversion operator or ``T& operator[]`` hands out the dynamic shared memory
(``extern __shared__``) as ``T``, with a specialization for double, and device functions
``T& at(T* a, int i) { return a[i]; }`` used as places (``at(p, i) = v``, ``at(p, i) += v``).
A call of a function returning a reference names the element its one ``return`` names, as in
CUDA. Our own kernels, checked against NumPy through the emulator, the LLVM JIT and the C
backend, several launch shapes; a reference to a local of the callee is refused, located."""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import WAYS, run_way
from polypy.errors import UserError

SHAPES = [(1, 32, 20), (3, 64, 150), (4, 128, 512)]

# The idiom, both ways: a conversion to T* and a T& operator[], a specialization for double.
SHARED_MEMORY = r"""
template <class T> struct SharedMemory {
  __device__ inline operator T *() { extern __shared__ int sm_int[]; return (T *)sm_int; }
  __device__ inline operator const T *() const { extern __shared__ int sm_int[]; return (T *)sm_int; }
  __device__ inline T &operator[](int i) { extern __shared__ int sm_int[]; return ((T *)sm_int)[i]; }
};
template <> struct SharedMemory<double> {
  __device__ inline operator double *() { extern __shared__ double sm_dbl[]; return sm_dbl; }
  __device__ inline operator const double *() const { extern __shared__ double sm_dbl[]; return sm_dbl; }
  __device__ inline double &operator[](int i) { extern __shared__ double sm_dbl[]; return sm_dbl[i]; }
};
"""

# Block sums: through the pointer the conversion gives, and through operator[] as place and value.
REDUCTIONS = SHARED_MEMORY + r"""
template <class T> __global__ void sum_ptr(const T* in, T* out, int n) {
  T *sdata = SharedMemory<T>();
  unsigned tid = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;
  sdata[tid] = (i < n) ? in[i] : (T)0;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}
template <class T> __global__ void sum_index(const T* in, T* out, int n) {
  SharedMemory<T> smem;
  int tid = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;
  smem[tid] = 0;
  for (int j = i; j < n; j += blockDim.x * gridDim.x) smem[tid] += in[j] * (T)2;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tid < s) smem[tid] = smem[tid] + smem[tid + s];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = smem[0] - (T)1;
}
template __global__ void sum_ptr<float>(const float*, float*, int);
template __global__ void sum_ptr<double>(const double*, double*, int);
template __global__ void sum_index<float>(const float*, float*, int);
template __global__ void sum_index<double>(const double*, double*, int);
"""

# Device functions returning references into global and shared memory, used as places and values.
AT = r"""
__device__ float& at(float* a, int i) { return a[i]; }
__device__ float& first(float* a) { return *a; }
__device__ const float& larger(const float& a, const float& b) { return a < b ? b : a; }
struct Pair { float lo, hi; __device__ float& top() { return hi; } };
__global__ void places(float* p, const float* q, int n) {
  __shared__ float tile[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  at(tile, threadIdx.x) = i < n ? q[i] : 0.0f;
  at(tile, threadIdx.x) *= 2.0f;
  __syncthreads();
  if (i < n) {
    at(p, i) = q[i];
    at(p, i) += 2.0f * q[i];
    first(p + i) *= 3.0f;
    float r = at(p, i) + at(tile, (threadIdx.x + 1) % blockDim.x);
    Pair pr; pr.lo = 1.0f; pr.hi = 2.0f;
    pr.top() += r;
    pr.lo += pr.top();
    p[i] = larger(pr.lo, pr.hi) + first(p + i);
  }
}
"""


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("grid,block,n", SHAPES)
def test_block_sum_through_the_conversion(tmp_path, way: str, dtype, grid: int, block: int, n: int) -> None:
    x = np.random.default_rng(n).standard_normal(n).astype(dtype)
    args = {"in": x, "out": np.zeros(grid, dtype), "n": n}
    name = "sum_ptr_" + ("float" if dtype == np.float32 else "double")
    got = run_way(REDUCTIONS, name, grid, block, args, way, block * x.itemsize, name="k.cu")
    padded = np.zeros(grid * block, np.float64)
    padded[:min(n, grid * block)] = x[:grid * block]
    want = padded.reshape(grid, block).sum(axis=1)
    np.testing.assert_allclose(got["out"], want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("grid,block,n", SHAPES)
def test_block_sum_through_operator_index(tmp_path, way: str, dtype, grid: int, block: int, n: int) -> None:
    x = np.random.default_rng(n + 1).standard_normal(n).astype(dtype)
    args = {"in": x, "out": np.zeros(grid, dtype), "n": n}
    name = "sum_index_" + ("float" if dtype == np.float32 else "double")
    got = run_way(REDUCTIONS, name, grid, block, args, way, block * x.itemsize, name="k.cu")
    # thread t of block b sums in[j] for j = b * block + t + k * grid * block
    owner = (np.arange(n) % (grid * block)) // block
    want = np.array([2 * x[owner == b].astype(np.float64).sum() - 1 for b in range(grid)])
    np.testing.assert_allclose(got["out"], want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("grid,block,n", SHAPES)
def test_functions_returning_references(tmp_path, way: str, grid: int, block: int, n: int) -> None:
    q = np.random.default_rng(n + 2).standard_normal(n).astype(np.float32)
    args = {"p": np.full(n, 7.0, np.float32), "q": q, "n": n}
    got = run_way(AT, "places", grid, block, args, way, 0, name="k.cu")
    total = grid * block
    qq = np.zeros(total, np.float32)
    qq[:min(n, total)] = q[:total]
    tile = (2.0 * qq).reshape(grid, block)
    nxt = np.roll(tile, -1, axis=1).reshape(-1)
    want = np.full(n, 7.0, np.float32)
    for i in range(min(n, total)):
        v = np.float32(9.0) * q[i]  # (q + 2q) * 3
        r = v + nxt[i]
        lo, hi = np.float32(1.0), np.float32(2.0)
        hi += r
        lo += hi
        want[i] = max(lo, hi) + v
    np.testing.assert_allclose(got["p"], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("source,line,col,name", [
    ("__device__ float& bad(float x) { float y[2]; y[0] = x; return y[0]; }\n"
     "__global__ void k(float* p) { p[threadIdx.x] = bad(1.0f); }\n", 1, 63, "y"),
    ("__device__ float& bad(float x) { return x; }\n"
     "__global__ void k(float* p) { bad(p[0]) = 2.0f; }\n", 1, 41, "x"),
    ("struct S { float v; };\n"
     "__device__ float& bad(float x) { S s; s.v = x; return s.v; }\n"
     "__global__ void k(float* p) { bad(p[0]) += 2.0f; }\n", 2, 57, "s"),
])
def test_reference_to_a_local_of_the_callee_is_refused(tmp_path, source: str, line: int, col: int, name: str) -> None:
    src = tmp_path / "bad.cu"
    src.write_text(source)
    with pytest.raises(UserError) as e:
        polypy.load(str(src))
    text = str(e.value)
    assert f"bad.cu:{line}:{col}: error: 'bad' returns a reference to '{name}'" in text


def test_a_reference_chosen_by_several_returns_is_the_place_taken(tmp_path) -> None:
    # Which element is meant depends on the path taken: a choice among the places the returns
    # name (frontend/lower/place_choice.py; more in tests/test_cxx_device3.py).
    src = tmp_path / "two.cu"
    src.write_text("__device__ float& get(float* a, int k) { if (k) return a[1]; return a[0]; }\n"
                   "__global__ void k(float* p) { get(p + 2 * threadIdx.x, threadIdx.x & 1) = 2.0f + threadIdx.x; }\n")
    args = {"p": np.zeros(16, np.float32)}
    polypy.emulate(polypy.load(str(src)).kernel("k"), (1,), (8,), args)
    t = np.arange(8)
    expected = np.zeros(16, np.float32)
    expected[2 * t + (t & 1)] = 2.0 + t
    np.testing.assert_array_equal(args["p"], expected)
