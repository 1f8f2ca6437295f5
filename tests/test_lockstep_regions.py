"""lockstep-warps lowers only the statements that may race (issue: Harris's reduction #5/#6).

The classic reduction (Mark Harris, "Optimizing Parallel Reduction"; NVIDIA's old reduction
sample) sums a grid-stride ``while`` into ``sdata[tid]``, then reduces with barriers, and ends
with the unrolled last warp and no barrier (implicit warp-synchronous code). Only that last
warp races; the grid-stride loop touches each thread's own element, separated from every racing
access by a ``__syncthreads()``. It used to be lowered in lockstep too, and its trip count
differing between threads made the kernel refused. Now only statements whose accesses may race
with another thread's get the lockstep order (``polypy.poly.block_races.racing_statements``),
and a kernel whose racing accesses really are inside a loop of divergent trips stays refused.
Our own code (the algorithm is the published one), checked against NumPy sums through the
emulator (the lowered GPU form, with its race check), the C backend and the LLVM backend.
"""
from __future__ import annotations

import numpy as np
import pytest

import polypy
from c_support import run_c, run_emulated
from gpu2cpu.lockstep_warps import lockstep_warps

WARP_REDUCE = r"""
__device__ void warpReduce(volatile T* sdata, unsigned int tid) {
  sdata[tid] += sdata[tid + 32]; sdata[tid] += sdata[tid + 16]; sdata[tid] += sdata[tid + 8];
  sdata[tid] += sdata[tid + 4]; sdata[tid] += sdata[tid + 2]; sdata[tid] += sdata[tid + 1];
}
"""

REDUCE5 = WARP_REDUCE + r"""
__global__ void reduce5(const T* g_idata, T* g_odata, unsigned int n) {
  __shared__ T sdata[256];
  unsigned int tid = threadIdx.x;
  unsigned int i = blockIdx.x * (256 * 2) + tid;
  unsigned int gridSize = 256 * 2 * gridDim.x;
  sdata[tid] = 0;
  while (i < n) { sdata[tid] += g_idata[i] + ((i + 256) < n ? g_idata[i + 256] : 0); i += gridSize; }
  __syncthreads();
  if (tid < 128) sdata[tid] += sdata[tid + 128]; __syncthreads();
  if (tid < 64) sdata[tid] += sdata[tid + 64]; __syncthreads();
  if (tid < 32) warpReduce(sdata, tid);
  if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}
"""

REDUCE6 = r"""
template <unsigned int blockSize>
__device__ void warpReduce6(volatile T* sdata, unsigned int tid) {
  if (blockSize >= 64) sdata[tid] += sdata[tid + 32];
  if (blockSize >= 32) sdata[tid] += sdata[tid + 16];
  if (blockSize >= 16) sdata[tid] += sdata[tid + 8];
  if (blockSize >= 8) sdata[tid] += sdata[tid + 4];
  if (blockSize >= 4) sdata[tid] += sdata[tid + 2];
  if (blockSize >= 2) sdata[tid] += sdata[tid + 1];
}
template <unsigned int blockSize>
__global__ void reduce6(const T* g_idata, T* g_odata, unsigned int n) {
  __shared__ T sdata[blockSize];
  unsigned int tid = threadIdx.x;
  unsigned int i = blockIdx.x * (blockSize * 2) + tid;
  unsigned int gridSize = blockSize * 2 * gridDim.x;
  sdata[tid] = 0;
  while (i < n) {
    sdata[tid] += g_idata[i];
    if (i + blockSize < n) sdata[tid] += g_idata[i + blockSize];
    i += gridSize;
  }
  __syncthreads();
  if (blockSize >= 512) { if (tid < 256) { sdata[tid] += sdata[tid + 256]; } __syncthreads(); }
  if (blockSize >= 256) { if (tid < 128) { sdata[tid] += sdata[tid + 128]; } __syncthreads(); }
  if (blockSize >= 128) { if (tid < 64) { sdata[tid] += sdata[tid + 64]; } __syncthreads(); }
  if (tid < 32) warpReduce6<blockSize>(sdata, tid);
  if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}
template __global__ void reduce6<256>(const T*, T*, unsigned int);
template __global__ void reduce6<128>(const T*, T*, unsigned int);
"""

# The loop forms people write: a grid-stride `for` into the thread's element, a tree loop with
# barriers, then a `#pragma unroll` loop over the last warp through a volatile pointer; blockDim.x (a power of two from 64 on) is the launch's.
LOOPS = r"""
__global__ void reduce_loops(const T* in, T* out, int n) {
  extern __shared__ T sdata[];
  unsigned int tid = threadIdx.x;
  sdata[tid] = 0;
  for (int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x) sdata[tid] += in[i];
  __syncthreads();
  for (unsigned int s = blockDim.x / 2; s > 32; s >>= 1) {
    if (tid < s) sdata[tid] += sdata[tid + s];
    __syncthreads();
  }
  if (tid < 32) {
    volatile T* v = sdata;
#pragma unroll
    for (int s = 32; s > 0; s >>= 1) v[tid] += v[tid + s];
  }
  if (tid == 0) out[blockIdx.x] = sdata[0];
}
"""

# The racing accesses themselves inside the grid-stride loop (trips differ between threads): no
# lockstep order polypy can run, still refused.
DIVERGENT = r"""
__global__ void divergent(const int* g_idata, int* g_odata, unsigned int n) {
  __shared__ int sdata[64];
  unsigned int tid = threadIdx.x;
  unsigned int i = blockIdx.x * 64 + tid;
  sdata[tid] = 0;
  sdata[tid + 32] = 0;
  __syncthreads();
  while (i < n) {
    if (tid < 32) sdata[tid] += g_idata[i] + sdata[tid + 16];
    i += 64 * gridDim.x;
  }
  __syncthreads();
  if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}
"""

# The grid-stride loop's store and the last warp's reads with no barrier between: the loop's
# statement itself may race with another lane (thread 16's s[16], thread 0's s[tid + 16]).
UNSYNCED = r"""
__global__ void unsynced(const int* g, int* out, unsigned int n) {
  __shared__ int s[64];
  unsigned int tid = threadIdx.x;
  s[tid] = 0;
  for (unsigned int i = blockIdx.x * 64 + tid; i < n; i += 64 * gridDim.x) s[tid] += g[i];
  if (tid < 32) { s[tid] += s[tid + 32]; s[tid] += s[tid + 16]; }
  if (tid == 0) out[blockIdx.x] = s[0];
}
"""

CASES = [(1, 1), (1, 255), (1, 512), (2, 1000), (3, 4097)]  # (blocks, n): odd n, n under one block


def _source(tmp_path, name: str, text: str, ctype: str):
    path = tmp_path / f"{name}.cu"
    path.write_text(f"typedef {ctype} T;\n" + text)
    return path


def _input(n: int, ctype: str) -> np.ndarray:
    rng = np.random.default_rng(n)
    if ctype == "int":
        return rng.integers(-1000, 1000, n).astype(np.int32)
    return rng.integers(-64, 64, n).astype(np.float32) / 8  # sums of these are exact in float


def _check(path, kernel_name: str, ctype: str, block: int, per_block: int, cases, shmem_per_elem=0) -> None:
    kernel = polypy.load(str(path)).kernel(kernel_name)
    module = polypy.compile(str(path))
    lowered = lockstep_warps(kernel)
    assert lowered is not kernel  # the last warp is lowered
    dtype = np.int32 if ctype == "int" else np.float32
    for blocks, n in cases:
        data = _input(n, ctype)
        shmem = shmem_per_elem * block
        args = {kernel.params[0].name: data, kernel.params[1].name: np.zeros(blocks, dtype), "n": n}
        # The emulator (its race check on) runs the lowered GPU form: a race the lowering left
        # unordered would be an error there.
        emulated = run_emulated(lowered, (blocks,), (block,), args, shmem=shmem)[kernel.params[1].name]
        out = run_c(kernel, (blocks,), (block,), args, shmem=shmem)[kernel.params[1].name]
        np.testing.assert_array_equal(emulated, out, err_msg=f"emulator {kernel_name} {blocks} {n}")
        # Block b sums elements at b * per_block + k * blocks * per_block + [0, per_block).
        want = [sum(int(x) if ctype == "int" else float(x)
                    for start in range(b * per_block, n, blocks * per_block)
                    for x in data[start:start + per_block]) for b in range(blocks)]
        np.testing.assert_array_equal(out, np.array(want, dtype), err_msg=f"{kernel_name} {blocks} {n}")
        assert out.sum(dtype=np.float64) == data.sum(dtype=np.float64)
        llvm = np.zeros(blocks, dtype)
        getattr(module, kernel_name)[(blocks,), (block,), shmem](data, llvm, n) if shmem else \
            getattr(module, kernel_name)[(blocks,), (block,)](data, llvm, n)
        np.testing.assert_array_equal(llvm, out, err_msg=f"LLVM {kernel_name} {blocks} {n}")


@pytest.mark.parametrize("ctype", ["int", "float"])
def test_reduce5_with_grid_stride_while_runs_its_last_warp_in_lockstep(tmp_path, ctype) -> None:
    path = _source(tmp_path, "red5", REDUCE5, ctype)
    _check(path, "reduce5", ctype, 256, 512, CASES)


@pytest.mark.parametrize("ctype", ["int", "float"])
def test_reduce6_template_forms(tmp_path, ctype) -> None:
    path = _source(tmp_path, "red6", REDUCE6, ctype)
    _check(path, "reduce6_256", ctype, 256, 512, CASES[:3] + CASES[4:])
    _check(path, "reduce6_128", ctype, 128, 256, [(2, 300), (3, 1001)])


@pytest.mark.parametrize("ctype", ["int", "float"])
def test_tree_loop_and_unrolled_warp_loop(tmp_path, ctype) -> None:
    path = _source(tmp_path, "loops", LOOPS, ctype)
    elem = 4
    for block, cases in ((128, [(1, 100), (2, 777)]), (64, [(3, 1000)])):
        _check(path, "reduce_loops", ctype, block, block, cases, shmem_per_elem=elem)


@pytest.mark.parametrize("text,line", [(DIVERGENT, 11), (UNSYNCED, 8)], ids=["divergent", "unsynced"])
def test_racing_accesses_in_divergent_loop_stay_refused(tmp_path, capsys, text, line) -> None:
    from polypy.driver.cli import main
    from polypy.errors import UserError

    path = _source(tmp_path, "divergent", text, "int")
    with pytest.raises(UserError) as err:
        polypy.compile(str(path))
    assert err.value.loc.line == line and "of one warp race on shared" in err.value.message
    out = tmp_path / "out.cpp"
    assert main(["translate", str(path), "-o", str(out)]) == 1
    text = capsys.readouterr().err
    assert f"{path}:{line}:" in text and "error:" in text and "lockstep" in text and "Traceback" not in text
    assert not out.exists()


def test_only_the_last_warp_may_race(tmp_path) -> None:
    """``racing_statements`` of reduce5: the six statements of the unrolled last warp (source
    lines 4 and 5 after the typedef), not the grid-stride loop's, the tree steps' nor thread 0's
    read of ``sdata[0]``."""
    from polypy.poly.block_races import racing_statements
    from polypy.poly.paths import iter_statements, statement_accesses

    kernel = polypy.load(str(_source(tmp_path, "red5", REDUCE5, "int"))).kernel("reduce5")
    paths = racing_statements(kernel, frozenset({"sdata"}))
    touching = {path for path, s in iter_statements(kernel.body)
                if any(r.buffer == "sdata" for r in statement_accesses(s))}
    assert paths is not None and paths <= touching and len(touching) > 6
    assert sorted(s.loc.line for path, s in iter_statements(kernel.body) if path in paths) == [4] * 3 + [5] * 3
