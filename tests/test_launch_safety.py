"""Launch-time memory safety (``polypy.driver.api``): a launch either is proven in bounds by isl (the fast
code runs), is proven out of bounds (a ``UserError`` before anything runs), or runs a
bounds-checked version of the kernel that stops at the first access outside its array and raises a
``UserError`` naming the kernel, the array, the index and the source line -- never touching memory
outside the arrays.

Every array is a view into a bigger one filled with a sentinel, so that a stray write shows up.
"""
from __future__ import annotations

import functools
import pathlib
import re

import numpy as np
import pytest

from test_llvm_support import isolated_cache

import polypy
from samples.spec import all_samples

pytestmark = pytest.mark.usefixtures("isolated_cache")
assert isolated_cache

SAMPLES = pathlib.Path(__file__).resolve().parents[1] / "samples"
PAD = 64  # sentinel elements on each side of an array


def _padded(values: np.ndarray, sentinel) -> tuple[np.ndarray, np.ndarray]:
    """(the whole buffer, a view of ``values``' size in its middle holding ``values``)."""
    whole = np.full(values.size + 2 * PAD, sentinel, dtype=values.dtype)
    view = whole[PAD:PAD + values.size]
    view[:] = values
    return whole, view


def _untouched(whole: np.ndarray, sentinel) -> None:
    assert (whole[:PAD] == sentinel).all(), "memory before the array was written"
    assert (whole[-PAD:] == sentinel).all(), "memory after the array was written"


@functools.cache
def _sample(name: str) -> polypy.driver.api.CompiledModule:
    return polypy.compile(SAMPLES / f"{name}.cu")


def _compile(tmp_path: pathlib.Path, name: str, source: str) -> tuple[polypy.driver.api.CompiledModule, pathlib.Path]:
    path = tmp_path / f"{name}.cu"
    path.write_text(source)
    return polypy.compile(path), path


def _line(path: pathlib.Path, text: str) -> int:
    """The 1-based line of ``path`` holding ``text`` (exactly once)."""
    lines = [i for i, line in enumerate(path.read_text().splitlines(), start=1) if text in line]
    assert len(lines) == 1, (text, lines)
    return lines[0]


GUARD = """\
__global__ void guard(int* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i * i < n * n)
        out[i] = 1;
}
"""


def test_guard_isl_cannot_use_is_bounds_checked(tmp_path):
    mod, path = _compile(tmp_path, "guard", GUARD)
    whole, out = _padded(np.full(16, -7, np.int32), -7)
    # 512 threads pass the guard; the array has 16 elements. isl cannot use ``i*i < n*n``, so
    # the launch runs the bounds-checked code, which stops at the first write past the end.
    with pytest.raises(polypy.UserError) as info:
        mod.guard[2, 256](out, 512)
    e = info.value
    m = re.search(r"kernel guard wrote index (\d+) of array 'out' of 16 elements", str(e))
    assert m is not None, str(e)
    assert 16 <= int(m.group(1)) < 512
    assert e.loc is not None and (e.loc.line, pathlib.Path(e.loc.file).name) == (_line(path, "out[i] = 1"), path.name)
    _untouched(whole, -7)
    assert set(np.unique(out)) <= {-7, 1}
    assert mod.guard.bounds_checked == (((256, 1, 1), frozenset({"out"})),)


def test_guard_bounds_checked_launch_that_stays_inside_runs_to_the_end(tmp_path):
    mod, _ = _compile(tmp_path, "guard", GUARD)
    whole, out = _padded(np.full(16, -7, np.int32), -7)
    mod.guard[2, 256](out, 16)  # only i < 16 passes the guard: in bounds, but isl cannot tell
    assert (out == 1).all()
    _untouched(whole, -7)
    assert mod.guard.bounds_checked == (((256, 1, 1), frozenset({"out"})),)
    # Where the over-approximated range fits the array, the fast code runs.
    big = np.zeros(512, np.int32)
    mod.guard[2, 128](big, 16)
    assert big.sum() == 16 and (big[:16] == 1).all()
    assert [block for block, _ in mod.guard.bounds_checked] == [(256, 1, 1)]


def test_histogram_with_10_bins_stops_at_bin_200():
    mod = _sample("histogram")
    path = SAMPLES / "histogram.cu"
    data = np.array([1, 2, 3, 200, 4] * 100, np.uint8)
    whole, bins = _padded(np.zeros(10, np.uint32), 99)
    with pytest.raises(polypy.UserError) as info:
        mod.histogram[4, 128](data, bins, data.size)
    e = info.value
    assert "kernel histogram wrote index 200 of array 'bins' of 10 elements" in str(e)
    assert e.loc is not None and e.loc.line == _line(path, "atomicAdd(&bins[b], local[b])")
    _untouched(whole, 99)
    # The same launch with values below 10 is right (the checked code runs, nothing faults).
    data = np.array([1, 2, 3, 9, 4, 4] * 100, np.uint8)
    bins[:] = 0
    mod.histogram[4, 128](data, bins, data.size)
    np.testing.assert_array_equal(bins, np.bincount(data, minlength=10))
    _untouched(whole, 99)


SCATTER = """\
__global__ void scatter(const int* idx, const float* val, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[idx[i]] = val[i];
}

__global__ void gather(const int* idx, const float* val, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = val[idx[i]];
}
"""


@pytest.mark.parametrize("bad", [37, -3, 1 << 30])
def test_scatter_through_data_dependent_indices(tmp_path, bad):
    mod, path = _compile(tmp_path, "scatter", SCATTER)
    n = 200
    idx = np.arange(n, dtype=np.int32) % 32
    idx[150] = bad
    val = np.arange(n, dtype=np.float32)
    whole, out = _padded(np.zeros(32, np.float32), -1.5)
    with pytest.raises(polypy.UserError) as info:
        mod.scatter[4, 64](idx, val, out, n)
    e = info.value
    assert f"kernel scatter wrote index {bad} of array 'out' of 32 elements" in str(e)
    assert e.loc is not None and e.loc.line == _line(path, "out[idx[i]] = val[i]")
    _untouched(whole, -1.5)


def test_gather_through_data_dependent_indices(tmp_path):
    mod, path = _compile(tmp_path, "scatter", SCATTER)
    n = 100
    idx = np.arange(n, dtype=np.int32)[::-1].copy()
    idx[7] = 100
    whole_val, val = _padded(np.arange(n, dtype=np.float32), 5.0)
    out = np.zeros(n, np.float32)
    with pytest.raises(polypy.UserError) as info:
        mod.gather[2, 64](idx, val, out, n)
    assert "kernel gather read index 100 of array 'val' of 100 elements" in str(info.value)
    assert info.value.loc is not None and info.value.loc.line == _line(path, "out[i] = val[idx[i]]")
    # In bounds, the checked gather is right.
    idx[7] = 92
    mod.gather[2, 64](idx, val, out, n)
    np.testing.assert_array_equal(out, np.arange(n, dtype=np.float32)[idx])
    _untouched(whole_val, 5.0)


@pytest.mark.parametrize("shmem", [0, 100, (128 + 6) * 4 - 4])
def test_stencil1d_without_enough_dynamic_shared_memory_is_refused(shmem):
    mod = _sample("stencil1d")
    n = 1000
    x = np.ones(n, np.float32)
    w = np.ones(7, np.float32)
    whole, out = _padded(np.full(n, 3.0, np.float32), 3.0)
    with pytest.raises(polypy.UserError) as info:
        mod.stencil1d[8, 128, shmem](x, w, out, n)
    e = info.value
    assert f"kernel stencil1d uses {(128 + 6) * 4} bytes of dynamic shared memory" in str(e)
    assert str(e).endswith(f"launched with {shmem}")
    assert "'smem'" in str(e)
    assert e.loc is not None and e.loc.file.endswith("stencil1d.cu")
    assert (whole == 3.0).all()  # refused before the launch: nothing ran
    mod.stencil1d[8, 128, (128 + 6) * 4](x, w, out, n)  # exactly enough
    assert out[3:-3].tolist() == [7.0] * (n - 6) and out[0] == 4.0
    _untouched(whole, 3.0)


SHARED = """\
__global__ void dyn(const int* idx, int* out)
{
    extern __shared__ int buf[];
    buf[idx[threadIdx.x]] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = buf[threadIdx.x % 4];
}

__global__ void fixed(const int* idx, int* out)
{
    __shared__ int s[64];
    s[threadIdx.x % 64] = 0;
    __syncthreads();
    s[idx[threadIdx.x]] = 1;
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x % 64];
}

__global__ void per_block(const int* idx, int* out)
{
    __shared__ int t[64];
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    t[threadIdx.x % 64] = 0;
    __syncthreads();
    t[idx[g]] = 1;
    __syncthreads();
    out[g] = t[threadIdx.x % 64];
}
"""


def test_dynamic_shared_index_isl_cannot_bound_is_checked(tmp_path):
    mod, path = _compile(tmp_path, "shared", SHARED)
    idx = np.arange(32, dtype=np.int32) % 4
    idx[20] = 9
    whole, out = _padded(np.zeros(32, np.int32), -9)
    with pytest.raises(polypy.UserError) as info:
        mod.dyn[1, 32, 16](idx, out)  # 16 bytes: 4 ints
    e = info.value
    assert "kernel dyn wrote index 9 of dynamic shared array 'buf' of 4 elements" in str(e)
    assert "launched with 16 bytes of dynamic shared memory" in str(e)
    assert e.loc is not None and e.loc.line == _line(path, "buf[idx[threadIdx.x]] = threadIdx.x")
    _untouched(whole, -9)
    mod.dyn[1, 32, 40](idx, out)  # 10 ints: enough
    assert set(out[:4]) <= set(range(32))
    _untouched(whole, -9)


def test_static_shared_index_isl_cannot_bound_is_checked(tmp_path):
    mod, path = _compile(tmp_path, "shared", SHARED)
    idx = np.arange(128, dtype=np.int32) % 64
    idx[77] = 100
    whole, out = _padded(np.zeros(128, np.int32), -9)
    with pytest.raises(polypy.UserError) as info:
        mod.fixed[2, 128](idx, out)
    e = info.value
    assert "kernel fixed wrote index 100 of shared array 's' of 64 elements" in str(e)
    assert e.loc is not None and e.loc.line == _line(path, "s[idx[threadIdx.x]] = 1")
    _untouched(whole, -9)
    idx[77] = 13
    mod.fixed[2, 128](idx, out)
    assert (out == 1).all()
    _untouched(whole, -9)


def test_reduce_sum_with_512_threads_and_256_shared_elements_is_refused():
    mod = _sample("reduce_sum")
    x = np.ones(5000, np.float32)
    out = np.zeros(1, np.float32)
    with pytest.raises(polypy.UserError) as info:
        mod.reduce_sum[10, 512](x, out, 5000)
    e = info.value
    assert "kernel reduce_sum writes index 511 of shared array 'sdata' of 256 elements" in str(e)
    assert e.loc is not None and e.loc.line == _line(SAMPLES / "reduce_sum.cu", "sdata[tid] = (i < n)")
    assert out[0] == 0.0  # refused before the launch
    mod.reduce_sum[20, 256](x, out, 5000)
    assert out[0] == 5000.0


def test_cli_style_error_names_file_line_and_column(tmp_path):
    mod, path = _compile(tmp_path, "scatter", SCATTER)
    idx = np.full(8, 8, np.int32)
    with pytest.raises(polypy.UserError) as info:
        mod.scatter[1, 8](idx, np.zeros(8, np.float32), np.zeros(8, np.float32), 8)
    line = _line(path, "out[idx[i]] = val[i]")
    assert str(info.value).startswith(f"{path}:{line}:")


# Samples whose own launches isl proves in bounds: they must run the fast code only.
PROVEN = ("saxpy", "stencil1d", "histogram", "matmul_tiled", "jacobi2d", "conv2d", "blackscholes")


@pytest.mark.parametrize("name", PROVEN)
def test_sample_launches_proven_in_bounds_run_the_fast_code(name):
    s = next(s for s in all_samples() if s.name == name)
    mod = polypy.compile(s.source, defines=dict(s.defines))
    kernel = mod[s.kernel]
    for case in s.cases:
        args = s.make_args(np.random.default_rng(1), case, np.float32)
        kernel[case.grid, case.block, case.shmem](**args)
        expected = s.reference(s.make_args(np.random.default_rng(1), case, np.float32), case)
        for out in s.outputs:
            np.testing.assert_allclose(np.asarray(args[out], np.float64), np.asarray(expected[out], np.float64),
                                       rtol=s.rtol, atol=s.atol)
    assert kernel.bounds_checked == ()
    assert set(kernel.specializations) == {tuple(c.block) + (1,) * (3 - len(c.block)) for c in s.cases}


def test_footprint_of_shared_arrays_and_narrow_data_dependent_indices():
    from polypy.poly.footprint import footprint

    gpu = _sample("histogram").histogram.gpu
    fps = footprint(gpu, 4, 128, {"n": 1000}, shared=True)
    local = fps["local"]
    assert local.space == "shared" and fps["bins"].space == "global"
    # local[data[i]] with unsigned char data: isl cannot bound it, its type can (not exactly).
    line = _line(SAMPLES / "histogram.cu", "atomicAdd(&local[data[i]], 1u)")
    (atomic,) = [a for a in local.accesses if a.kind == "atomic"]
    assert atomic.loc.line == line
    assert (atomic.range.lo, atomic.range.hi, atomic.range.exact) == (0, 255, False)
    # The clearing loop touches [0, 255] for certain, so the whole range is exact.
    t = local.touched
    assert (t.lo, t.hi, t.exact) == (0, 255, True)
    # Without shared=True only pointer parameters are described.
    assert set(footprint(gpu, 4, 128, {"n": 1000})) == {"data", "bins"}


@pytest.mark.parametrize("bad_block,bad", [(0, 69), (2, 64), (1, -1)])
def test_coarse_blocks_check_shared_arrays_slice_by_slice(tmp_path, bad_block, bad):
    # Coarsened by 2, blocks 0-1 run as one coarse block whose shared array has one 64-element
    # slice per block: index 69 of block 0 is inside the coarse array, but outside block 0's
    # array, and must fault as in the fine kernel. Block 2 (of 3) runs alone, in the fine copy.
    path = tmp_path / "shared.cu"
    path.write_text(SHARED)
    mod = polypy.compile(path, coarsen=2)
    idx = np.tile(np.arange(64, dtype=np.int32), 3)
    idx[bad_block * 64 + 10] = bad
    whole, out = _padded(np.zeros(192, np.int32), -9)
    with pytest.raises(polypy.UserError) as info:
        mod.per_block[3, 64](idx, out)
    e = info.value
    assert f"kernel per_block wrote index {bad} of shared array 't' of 64 elements" in str(e)
    assert e.loc is not None and e.loc.line == _line(path, "t[idx[g]] = 1")
    assert mod.per_block.coarsened[(64, 1, 1)] == 2
    _untouched(whole, -9)
    idx[bad_block * 64 + 10] = 10
    mod.per_block[3, 64](idx, out)
    assert (out == 1).all()
    _untouched(whole, -9)


def test_coarse_blocks_check_pointer_arguments(tmp_path):
    path = tmp_path / "scatter.cu"
    path.write_text(SCATTER)
    mod = polypy.compile(path, coarsen=4)
    n = 1000
    idx = np.arange(n, dtype=np.int32)
    idx[999] = 1000
    whole, out = _padded(np.zeros(n, np.float32), -1.5)
    with pytest.raises(polypy.UserError) as info:
        mod.scatter[8, 128](idx, np.ones(n, np.float32), out, n)
    assert "kernel scatter wrote index 1000 of array 'out' of 1000 elements" in str(info.value)
    assert mod.scatter.coarsened[(128, 1, 1)] == 4
    _untouched(whole, -1.5)


def test_module_without_gpu_form_runs_bounds_checked_code():
    from test_llvm_support import cpu_form, gpu_kernel

    from polypy.driver.api import CompiledModule
    from polypy.ir import nodes as n

    k = cpu_form(gpu_kernel("""
        kernel scatter(n: i32, idx: const i32*, out: f32*) {
          var i: i32 = (i32)(blockIdx.x * blockDim.x + threadIdx.x)
          if (i < n) {
            out[idx[i]] = 1.0f
          }
        }
    """))
    mod = CompiledModule.from_ir(None, n.Module((k,)))
    whole, out = _padded(np.zeros(8, np.float32), 2.5)
    idx = np.arange(8, dtype=np.int32)
    mod.scatter[1, 8](8, idx, out)
    assert (out == 1.0).all()
    idx[3] = -100
    with pytest.raises(polypy.UserError, match=r"kernel scatter wrote index -100 of array 'out' of 8 elements"):
        mod.scatter[1, 8](8, idx, out)
    _untouched(whole, 2.5)
    assert mod.scatter.bounds_checked == (((8, 1, 1), frozenset({"idx", "out"})),)


def test_faults_in_many_blocks_on_several_threads(tmp_path):
    # Every block faults; workers race for the fault record, the first one wins, nobody writes
    # outside the array, and the launch stops early (later chunks are not started).
    path = tmp_path / "scatter.cu"
    path.write_text(SCATTER)
    mod = polypy.compile(path, threads=4, coarsen=False)
    n = 64 * 256
    idx = np.arange(n, dtype=np.int32) % 100
    whole, out = _padded(np.zeros(90, np.float32), -1.5)
    for _ in range(3):  # the first launches may run on one thread, to measure the blocks
        with pytest.raises(polypy.UserError) as info:
            mod.scatter[64, 256](idx, np.ones(n, np.float32), out, n)
        m = re.search(r"wrote index (\d+) of array 'out' of 90 elements, in block \((\d+), 0, 0\)", str(info.value))
        assert m is not None and 90 <= int(m.group(1)) < 100 and 0 <= int(m.group(2)) < 64
        _untouched(whole, -1.5)
