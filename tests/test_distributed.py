"""``polypy.distributed``: one launch's block ranges as tasks on a Dask LocalCluster.

Every distributed launch is compared bitwise with the same launch in this process
(``polypy.compile``): jacobi2d, stencil1d (dynamic shared memory), matmul_tiled, grid3d (split
along z) over their sample shapes, coarse blocks forced, fewer blocks than tasks, inputs read
through loaded indices (spmv), writes under data-dependent conditions (the old contents of
unwritten elements survive), grid-stride loops (strided pieces merged back), atomics on
elements one range alone touches, constant memory set by the caller, workers as threads of this
process. Launches whose ranges cannot run apart are refused with an error naming the array:
overlapping writes, histogram-style atomics on shared bins, one block reading what another
writes, writes isl cannot bound, writes to a __device__ array. The block-range footprints are
checked against the indices counted point by point (jacobi2d) and the strided pieces of a
grid-stride loop, and the bytes a launch ships against its halos.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("distributed", reason="polypy.distributed needs Dask: pip install -e '.[distributed]'")

import polypy  # noqa: E402
import polypy.distributed as pd  # noqa: E402
from polypy.errors import UserError  # noqa: E402
from polypy.poly.block_footprint import BlockRange, split_grid  # noqa: E402
from samples.spec import sample  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _cache_dir(tmp_path_factory):
    # compiled code goes to this module's temporary directory (the workers inherit the variable)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("POLYPY_CACHE_DIR", str(tmp_path_factory.mktemp("polypy-cache")))
        yield


@pytest.fixture(scope="module")
def client(_cache_dir):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1",
                           dashboard_address="127.0.0.1:0")
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


def _copy(args: dict) -> dict:
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}


def _same(name: str, here: polypy.CompiledModule, there: pd.DistributedModule, grid, block, shmem, args: dict,
          *, tasks: int) -> dict:
    """Launch in this process and on the cluster; every array ends bitwise equal. Returns the
    distributed launch's arguments."""
    local = _copy(args)
    here[name][grid, block, shmem](**local)
    remote = _copy(args)
    pd.launch(there[name], grid, block, shmem, tasks=tasks, **remote)
    for key, value in local.items():
        if isinstance(value, np.ndarray):
            assert np.array_equal(value, remote[key], equal_nan=True), f"{name}: {key} differs"
    return remote


@pytest.mark.parametrize("name", ["jacobi2d", "stencil1d", "matmul_tiled", "grid3d"])
def test_samples_match_single_process(client, name):
    s = sample(name)
    here = polypy.compile(s.source, defines=s.defines)
    there = pd.compile(client, s.source, defines=s.defines)
    rng = np.random.default_rng(13)
    for case, tasks in zip(s.cases, (2, 3, 5)):
        args = s.make_args(rng, case, np.float32)
        out = _same(name, here, there, case.grid, case.block, case.shmem, args, tasks=tasks)
        ref = s.reference(args, case)
        for o in s.outputs:  # and the launch did the work (not two untouched arrays)
            np.testing.assert_allclose(out[o], ref[o], rtol=s.rtol, atol=s.atol)


def test_coarse_blocks(client):
    """Coarse blocks (4 blocks along x as one): ranges along x are cut at coarse-block
    boundaries, and the workers run the coarse code over coarse-block ids."""
    from polypy.distributed import block_range_code

    s = sample("constant_coeffs")
    here = polypy.compile(s.source)
    there = pd.compile(client, s.source, coarsen=4)
    n, b = 3000, 64
    case = type(s.cases[0])(grid=(-(-n // b),), block=(b,), sizes={"n": n})
    args = s.make_args(np.random.default_rng(5), case, np.float32)
    _same("constant_coeffs", here, there, case.grid, case.block, case.shmem, args, tasks=7)
    plan = there.constant_coeffs.plan((47, 1, 1), (b, 1, 1), {"n": n}, 7)
    assert all(r.lo % 4 == 0 for r in plan.ranges) and plan.ranges[-1].hi == 47
    k = there.constant_coeffs.local
    code, ids = block_range_code(k, (47, 1, 1), (b, 1, 1), BlockRange(0, 8, 20))
    assert code.abi.coarsen == (4, 1, 1) and ids == (2, 5)
    code, ids = block_range_code(k, (47, 1, 1), (b, 1, 1), BlockRange(0, 44, 47))  # the partial coarse block
    assert code.abi.coarsen == (4, 1, 1) and ids == (11, 12)
    code, ids = block_range_code(k, (47, 1, 1), (b, 1, 1), BlockRange(0, 9, 20))  # not aligned: single blocks
    assert code.abi.coarsen == (1, 1, 1) and ids == (9, 20)


def test_more_tasks_than_blocks(client):
    s = sample("stencil1d")
    here = polypy.compile(s.source)
    there = pd.compile(client, s.source)
    b = 64
    # 3 blocks, 8 tasks: three ranges of one block each
    assert split_grid((3, 1, 1), 8) == tuple(BlockRange(0, i, i + 1) for i in range(3))
    small = type(s.cases[0])(grid=(3,), block=(b,), sizes={"n": 150}, shmem=(b + 6) * 8)
    args = s.make_args(np.random.default_rng(5), small, np.float32)
    _same("stencil1d", here, there, small.grid, small.block, small.shmem, args, tasks=8)
    assert len(there.stencil1d.last_task_seconds) == 3
    # shipped: in[0..66], in[61..130], in[125..149] (halos) and w three times; out is written
    # everywhere, so only sent back: 150 floats
    assert there.stencil1d.last_transfer == ((67 + 70 + 25 + 3 * 7) * 4, 150 * 4)


def test_grid_is_split_along_its_slowest_dimension():
    assert split_grid((4, 7, 1), 3) == (BlockRange(1, 0, 2), BlockRange(1, 2, 4), BlockRange(1, 4, 7))
    assert split_grid((4, 7, 2), 3) == (BlockRange(2, 0, 1), BlockRange(2, 1, 2))
    assert split_grid((1, 1, 1), 4) == (BlockRange(0, 0, 1),)
    assert split_grid((10, 1, 1), 3, align_x=4) == (BlockRange(0, 0, 4), BlockRange(0, 4, 8), BlockRange(0, 8, 10))
    assert split_grid((4, 3, 1), 3, align_x=4) == tuple(BlockRange(1, i, i + 1) for i in range(3))
    with pytest.raises(UserError, match="tasks"):
        split_grid((4, 1, 1), 0)


def test_strided_writes_are_merged_as_pieces(tmp_path):
    """A grid-stride loop: each range's exact write set is many strided intervals; they are
    the pieces merged back (their hulls overlap, the sets do not)."""
    from polypy.poly.block_footprint import plan_block_ranges

    mod = polypy.compile(tmp_path / "strided.cu", text=CONDITIONAL)
    plan = plan_block_ranges(mod.twice_strided.gpu, (4, 1, 1), (32, 1, 1), {"n": 1000}, 2)
    first, second = (f["y"] for f in plan.footprints)
    assert first.covered and second.covered
    assert first.pieces == tuple((k * 128, k * 128 + 63) for k in range(8))
    assert second.pieces == tuple((k * 128 + 64, min(k * 128 + 127, 999)) for k in range(8))
    assert (first.read, second.read) == (None, None) and first.write.overlaps(second.write)


BLOCK_IDS = r"""
__global__ void block_ids(int* out)
{
    if (threadIdx.x == 0 && threadIdx.y == 0)
        out[blockIdx.y * gridDim.x + blockIdx.x] = 1000 * gridDim.y + 100 * gridDim.x + 10 * blockIdx.y + blockIdx.x;
}
"""


def test_jit_runs_a_range_of_block_ids(tmp_path):
    """``JitKernel.run(..., blocks=(first, last))`` runs the blocks with those linear ids (x
    fastest) and nothing else, with ``blockIdx``/``gridDim`` of the whole grid."""
    mod = polypy.compile(tmp_path / "ids.cu", text=BLOCK_IDS)
    code = mod.block_ids.for_block((2, 2, 1))
    out = np.full(12, -1, dtype=np.int32)
    code.run((4, 3, 1), (2, 2, 1), 0, {"out": out}, {}, threads=2, blocks=(5, 10))
    expect = np.array([1000 * 3 + 100 * 4 + 10 * (i // 4) + i % 4 for i in range(12)], dtype=np.int32)
    assert np.array_equal(out[5:10], expect[5:10])
    assert (out[:5] == -1).all() and (out[10:] == -1).all()
    code.run((4, 3, 1), (2, 2, 1), 0, {"out": out}, {}, blocks=(0, 5))
    code.run((4, 3, 1), (2, 2, 1), 0, {"out": out}, {}, blocks=(10, 99))  # clipped to the grid
    assert np.array_equal(out, expect)


def test_inputs_through_loaded_indices(client):
    s = sample("spmv_csr")  # x[col[j]]: isl cannot bound the read, the whole of x is shipped
    here = polypy.compile(s.source)
    there = pd.compile(client, s.source)
    case = s.cases[0]
    args = s.make_args(np.random.default_rng(3), case, np.float32)
    _same("spmv_csr", here, there, case.grid, case.block, case.shmem, args, tasks=3)


CONDITIONAL = r"""
__global__ void keep_positive(const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] > 0.0f)
        out[i] = x[i];
}

__global__ void twice_strided(const float* x, float* y, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = 2.0f * x[i];
}

__global__ void gather(const int* idx, const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = x[idx[i]];
}

__global__ void block_sums(const int* x, int* sums, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(&sums[blockIdx.x], x[i]);
}
"""


def test_partial_writes_and_private_atomics(client, tmp_path):
    path = tmp_path / "cond.cu"
    here = polypy.compile(path, text=CONDITIONAL)
    there = pd.compile(client, path, text=CONDITIONAL)
    rng = np.random.default_rng(7)
    n = 1000
    x = rng.uniform(-1, 1, n).astype(np.float32)
    old = rng.uniform(5, 6, n).astype(np.float32)  # kept where x <= 0: shipped in, sent back unchanged
    out = _same("keep_positive", here, there, 8, 128, 0, {"x": x, "out": old, "n": np.int32(n)}, tasks=3)
    assert np.array_equal(out["out"], np.where(x > 0, x, old))
    with pytest.raises(UserError, match=r"argument 'x' of kernel 'keep_positive' is too small"):
        there.keep_positive[8, 128](x[:500], old, np.int32(n))
    # a grid-stride loop: each range writes 8 strided pieces of 64 elements, merged piece by piece
    out = _same("twice_strided", here, there, 4, 32, 0, {"x": x, "y": old, "n": np.int32(n)}, tasks=2)
    assert np.array_equal(out["y"], 2 * x)
    assert there.twice_strided.last_transfer == (2 * 1000 * 4 - 64 * 4 - 40 * 4, 1000 * 4)
    # x[idx[i]]: isl cannot prove it in bounds, so the workers run the bounds-checked code
    idx = rng.integers(0, n, n).astype(np.int32)
    out = _same("gather", here, there, 8, 128, 0, {"idx": idx, "x": x, "out": old, "n": np.int32(n)}, tasks=3)
    assert np.array_equal(out["out"], x[idx])
    idx[700] = 10 ** 6
    kept = old.copy()
    with pytest.raises(UserError, match=r"read index 1000000 of array 'x' of 1000 elements") as err:
        pd.launch(there.gather, 8, 128, 0, idx, x, kept, np.int32(n), tasks=3)
    assert err.value.loc is not None and np.array_equal(kept, old)  # a failed launch merges nothing
    xi = rng.integers(-100, 100, n).astype(np.int32)
    sums = rng.integers(0, 10, 8).astype(np.int32)  # each block's bin is its own: atomics allowed
    out = _same("block_sums", here, there, 8, 128, 0, {"x": xi, "sums": sums, "n": np.int32(n)}, tasks=4)
    padded = np.concatenate([xi, np.zeros(24, np.int32)])
    assert np.array_equal(out["sums"], sums + padded.reshape(8, 128).sum(axis=1))


def test_constant_memory_set_by_the_caller(client):
    s = sample("constant_coeffs")
    here = polypy.compile(s.source)
    there = pd.compile(client, s.source)
    taps = np.arange(1, 9, dtype=np.float32) / 10
    here.globals["taps"][:] = taps
    there.globals["taps"][:] = taps
    case = s.cases[0]
    args = s.make_args(np.random.default_rng(1), case, np.float32)
    out = _same("constant_coeffs", here, there, case.grid, case.block, case.shmem, args, tasks=3)
    x = args["x"].astype(np.float64)
    expect = sum(taps[k] * np.concatenate([np.zeros(k), x[:x.size - k]]) for k in range(8))
    np.testing.assert_allclose(out["y"], expect, rtol=1e-5, atol=1e-5)


REFUSED = r"""
__global__ void last_wins(const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[0] = x[i];
}

__global__ void shift_left(float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i + 1 < n)
        x[i] = x[i + 1];
}

__device__ int hits[1];

__global__ void count_positive(const float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] > 0.0f)
        atomicAdd(&hits[0], 1);
}

__global__ void scatter(const int* idx, const float* x, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[idx[i]] = x[i];
}
"""


def test_ranges_that_share_memory_are_refused(client, tmp_path):
    path = tmp_path / "refused.cu"
    there = pd.compile(client, path, text=REFUSED)
    n = 512
    x = np.ones(n, np.float32)
    out = np.zeros(n, np.float32)
    with pytest.raises(UserError, match=r"writes of 'out' .* may overlap") as err:
        there.last_wins[4, 128](x, out, np.int32(n))
    assert err.value.loc is not None and err.value.loc.line == 2
    with pytest.raises(UserError, match=r"read indices .* of 'x'"):
        there.shift_left[4, 128](x, np.int32(n))
    with pytest.raises(UserError, match=r"cannot bound the indices of 'out'"):
        there.scatter[4, 128](np.arange(n, dtype=np.int32), x, out, np.int32(n))
    with pytest.raises(UserError, match=r"writes the module's __device__ array 'hits'"):
        there.count_positive[4, 128](x, np.int32(n))
    assert not out.any() and (x == 1).all()  # nothing ran, nothing merged
    # one task: nothing to overlap with
    pd.launch(there.last_wins, 4, 128, 0, x, out, np.int32(n), tasks=1)
    assert out[0] == 1


def test_histogram_atomics_on_shared_bins_are_refused(client):
    s = sample("histogram")
    there = pd.compile(client, s.source)
    case = s.cases[0]
    args = s.make_args(np.random.default_rng(2), case, np.float32)
    with pytest.raises(UserError, match=r"atomic updates of 'bins'"):
        pd.launch(there.histogram, case.grid, case.block, case.shmem, tasks=2, **args)
    # the same launch as one task is fine
    here = polypy.compile(s.source)
    _same("histogram", here, there, case.grid, case.block, case.shmem, args, tasks=1)


def test_range_footprints_are_the_indices_the_blocks_touch():
    """jacobi2d, per range of block rows: the intervals are exactly the smallest and largest
    index the range's threads read and write (counted here point by point), and the written
    interval is written everywhere."""
    from polypy.poly.block_footprint import plan_block_ranges

    s = sample("jacobi2d")
    mod = polypy.compile(s.source)
    nx, ny, bx, by = 50, 37, 16, 8
    plan = plan_block_ranges(mod.jacobi2d.gpu, (4, 5, 1), (bx, by, 1), {"nx": nx, "ny": ny}, 3)
    assert [(r.dim, r.lo, r.hi) for r in plan.ranges] == [(1, 0, 1), (1, 1, 3), (1, 3, 5)]
    for r, f in zip(plan.ranges, plan.footprints):
        written, read = set(), set()
        for y in range(r.lo * by, min(r.hi * by, ny)):
            for x in range(nx):
                c = y * nx + x
                written.add(c)
                if x in (0, nx - 1) or y in (0, ny - 1):
                    read.add(c)
                else:
                    read |= {c - 1, c + 1, c - nx, c + nx}
        assert (f["out"].write.lo, f["out"].write.hi) == (min(written), max(written))
        assert f["out"].covered and len(written) == max(written) - min(written) + 1
        assert (f["in"].read.lo, f["in"].read.hi) == (min(read), max(read))
        assert f["out"].read is None and f["in"].write is None and not f["out"].atomic


def test_threads_in_one_process():
    """Workers as threads of this process: the slices are this process's own memory (no
    serialization), tasks share one compiled module per process."""
    from distributed import Client, LocalCluster

    s = sample("jacobi2d")
    here = polypy.compile(s.source)
    with LocalCluster(n_workers=2, processes=False, threads_per_worker=1, protocol="tcp://", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as c:
        there = pd.compile(c, s.source)
        case = s.cases[1]
        args = s.make_args(np.random.default_rng(4), case, np.float32)
        _same("jacobi2d", here, there, case.grid, case.block, case.shmem, args, tasks=4)


def test_the_readme_example_runs_as_written(tmp_path):
    """README's Dask example, taken from the README and run as a script (its own LocalCluster,
    whose worker processes import the script: the ``__main__`` guard), in a temporary directory
    holding the sample it names; it checks its own result against NumPy."""
    import os
    import pathlib
    import re
    import shutil
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    block = re.search(r"^## Dask$.*?^```python\n(.*?)^```$", readme, re.S | re.M)
    assert block is not None, "README has no Dask example"
    script = tmp_path / "example.py"
    script.write_text(block.group(1))
    (tmp_path / "samples").mkdir()
    shutil.copy(root / "samples" / "matmul_tiled.cu", tmp_path / "samples")
    env = dict(os.environ, TMPDIR=str(tmp_path), POLYPY_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
