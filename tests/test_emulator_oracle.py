"""The emulator as the oracle is neither stricter nor looser than CUDA.

* A grid with no blocks is a launch that does nothing (the emulator, the Python API's compiled
  and emulated launches; whole programs are in test_run_programs.py).
* Reading shared memory no thread of the block has stored to is undefined on a GPU, so the
  emulator reports it, naming the array, the element, the thread and the source line.
"""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

import polypy
from polypy import UserError, emulate
from polypy.ir import parse_kernel

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _kernel(tmp_path: pathlib.Path, source: str, name: str):
    path = tmp_path / f"{name}.cu"
    path.write_text(source)
    return polypy.load(path).kernel(name), path


@pytest.fixture(scope="module")
def saxpy_module():
    return polypy.compile(ROOT / "samples" / "saxpy.cu")


def _saxpy_args():
    return 10, 2.0, np.arange(10, dtype=np.float32), np.ones(10, dtype=np.float32)


@pytest.mark.parametrize("grid", [0, (0,), (4, 0), (1, 1, 0), (0, 3, 2)])
def test_an_empty_grid_is_a_no_op_in_the_emulator(saxpy_module, grid) -> None:
    n, a, x, y = _saxpy_args()
    emulate(saxpy_module.saxpy.gpu, grid, 256, {"n": n, "a": a, "x": x, "y": y})
    assert np.array_equal(y, np.ones(10, dtype=np.float32))


def test_an_empty_grid_still_checks_the_arguments_and_the_block(saxpy_module) -> None:
    n, a, x, y = _saxpy_args()
    kernel = saxpy_module.saxpy.gpu
    with pytest.raises(UserError, match="dtype float32"):
        emulate(kernel, 0, 256, {"n": n, "a": a, "x": x, "y": y.astype(np.float64)})
    with pytest.raises(UserError, match="dtype float32"):
        saxpy_module.saxpy[0, 256](n, a, x, y.astype(np.float64))
    with pytest.raises(UserError, match=r"block.x = 0 is outside"):
        emulate(kernel, 0, 0, {"n": n, "a": a, "x": x, "y": y})
    with pytest.raises(UserError, match=r"grid.x = -1 is outside CUDA's range \[0, "):
        emulate(kernel, -1, 32, {"n": n, "a": a, "x": x, "y": y})


@pytest.mark.parametrize("grid", [0, (3, 0)])
def test_an_empty_grid_is_a_no_op_in_the_python_api(saxpy_module, grid) -> None:
    n, a, x, y = _saxpy_args()
    saxpy_module.saxpy[grid, 256](n, a, x, y)
    saxpy_module.saxpy.emulate[grid, 256](n, a, x, y)
    assert np.array_equal(y, np.ones(10, dtype=np.float32))
    saxpy_module.saxpy[1, 256](n, a, x, y)  # and the kernel still runs afterwards
    assert np.array_equal(y, 2.0 * np.arange(10, dtype=np.float32) + 1.0)


SHIFT = """__global__ void shift(const float* x, float* y) {
  __shared__ float s[65];
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = s[threadIdx.x + 1];
}
"""


def test_a_read_of_unwritten_shared_memory_is_reported(tmp_path) -> None:
    kernel, path = _kernel(tmp_path, SHIFT, "shift")
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, dtype=np.float32)
    with pytest.raises(UserError) as err:
        emulate(kernel, 1, 64, [x, y])
    assert err.value.loc is not None and (err.value.loc.file, err.value.loc.line) == (str(path), 5)
    assert err.value.message == ("load from uninitialized shared memory s[64]: no thread of the block has stored "
                                 "to it (shared buffer s[65]), in thread (63, 0, 0) of block (0, 0, 0)")
    assert "y[threadIdx.x] = s[threadIdx.x + 1];" in err.value.render()


def test_each_block_starts_with_unwritten_shared_memory(tmp_path) -> None:
    # Block 0 fills s; block 1 would read what block 0 left behind on a GPU (or garbage).
    kernel, _ = _kernel(tmp_path, """__global__ void first_fills(float* y) {
  __shared__ float s[32];
  if (blockIdx.x == 0) s[threadIdx.x] = 1.0f;
  __syncthreads();
  y[blockIdx.x * 32 + threadIdx.x] = s[threadIdx.x];
}
""", "first_fills")
    y = np.zeros(64, dtype=np.float32)
    with pytest.raises(UserError, match=r"uninitialized shared memory s\[0\].* in thread \(0, 0, 0\) of block \(1, 0, 0\)"):
        emulate(kernel, 2, 32, [y])
    emulate(kernel, 1, 32, [y])
    assert (y[:32] == 1.0).all()


def test_atomics_on_unwritten_shared_memory_are_reported(tmp_path) -> None:
    source = """__global__ void histogram(const int* v, int* bins) {
  __shared__ int h[4];
#ifdef CLEAR
  if (threadIdx.x < 4) h[threadIdx.x] = 0;
  __syncthreads();
#endif
  atomicAdd(&h[v[threadIdx.x] % 4], 1);
  __syncthreads();
  if (threadIdx.x < 4) bins[threadIdx.x] = h[threadIdx.x];
}
"""
    path = tmp_path / "histogram.cu"
    path.write_text(source)
    v = np.arange(32, dtype=np.int32)
    bins = np.zeros(4, dtype=np.int32)
    with pytest.raises(UserError, match=r"atomic.add on uninitialized shared memory h\[0\]") as err:
        emulate(polypy.load(path).kernel("histogram"), 1, 32, [v, bins])
    assert err.value.loc is not None and err.value.loc.line == 7
    emulate(polypy.load(path, defines={"CLEAR": "1"}).kernel("histogram"), 1, 32, [v, bins])
    assert bins.tolist() == [8, 8, 8, 8]


def test_extern_shared_memory_counts_the_bytes_stored() -> None:
    # The extern arrays view the same bytes (IR text: CUDA source may only declare one element
    # type); an f64 element is written when both f32 elements over its bytes are.
    kernel = parse_kernel("""kernel views(out: f64*, count: i32) {
  extern shared f: f32[]
  extern shared d: f64[]
  if ((i32)threadIdx.x < count) {
    f[threadIdx.x] = 1.0f
  }
  barrier
  if (threadIdx.x < 4u) {
    out[threadIdx.x] = d[threadIdx.x]
  }
}
""")
    out = np.zeros(4, dtype=np.float64)
    emulate(kernel, 1, 8, [out, 8], shmem=32)
    assert (out == np.array([1.0, 1.0], dtype=np.float32).view(np.float64)[0]).all()
    with pytest.raises(UserError, match=r"load from uninitialized shared memory d\[3\].*thread \(3, 0, 0\)"):
        emulate(kernel, 1, 8, [out, 7], shmem=32)
