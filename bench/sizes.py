"""``BENCH_SIZES``: the launch each sample is benchmarked at, and what one launch moves and computes.

Sizes are chosen so that one run of the hand-written OpenMP port takes roughly 5-50 ms on a
2-core machine, with the arrays of memory-bound kernels well beyond the last-level cache (so the
bandwidth figures are DRAM figures, comparable with the STREAM triad). ``--quick`` uses the
``quick`` launch, about an eighth of the work, for a fast smoke run.

Bytes are the compulsory traffic of one launch, counted the way STREAM counts: every array
element the kernel must read is read once, every element it writes is written once, nothing for
write-allocate or for re-reads the caches absorb. A kernel that updates an array in place
(saxpy's y) therefore pays no write-allocate while the triad does, and can come out above 100%
of the triad. Flops are counted for compute-bound kernels only (one per add or multiply, 20 per
n-body interaction as is customary).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from samples.spec import Case

F32 = 4  # bytes per float / int32
Args = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class BenchSpec:
    full: Case
    quick: Case
    bytes: Callable[[Args, Case], int]
    flops: Callable[[Args, Case], int] | None = None
    memory_bound: bool = True  # report bandwidth as a fraction of STREAM

    def case(self, *, quick: bool) -> Case:
        return self.quick if quick else self.full


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _vector(n: int, block: int, **extra: int) -> Case:
    """One thread per element of an n-vector."""
    return Case(grid=(_cdiv(n, block),), block=(block,), sizes={"n": n, **extra})


def _matmul(m: int, n: int, k: int) -> Case:
    return Case(grid=(_cdiv(n, 16), _cdiv(m, 16)), block=(16, 16), sizes={"M": m, "N": n, "K": k})


def _transpose(rows: int, cols: int) -> Case:
    return Case(grid=(_cdiv(cols, 32), _cdiv(rows, 32)), block=(32, 8), sizes={"rows": rows, "cols": cols})


def _stencil(n: int, block: int) -> Case:
    return Case(grid=(_cdiv(n, block),), block=(block,), sizes={"n": n}, shmem=(block + 2 * 3) * F32)


def _grid2d(nx: int, ny: int, bx: int, by: int, xname: str, yname: str) -> Case:
    return Case(grid=(_cdiv(nx, bx), _cdiv(ny, by)), block=(bx, by), sizes={yname: ny, xname: nx})


def _rows(rows: int, cols: int, block: int) -> Case:
    """One block per row."""
    return Case(grid=(rows,), block=(block,), sizes={"rows": rows, "cols": cols})


def _backprop(n_in: int, hid: int) -> Case:
    return Case(grid=(hid // 16, n_in // 16), block=(16, 16), sizes={"n_in": n_in, "hid": hid})


def _spmv(nrows: int, block: int) -> Case:
    return Case(grid=(_cdiv(nrows, block),), block=(block,), sizes={"nrows": nrows, "ncols": nrows, "mean_nnz": 16})


def _size(a: Args, name: str) -> int:
    return int(a[name].size)


def _gemm(ni: int) -> Case:
    # the sample's storage is 64 columns wide (samples/gemm.py NJ = NK = 64): tall problems
    return Case(grid=(2, _cdiv(ni, 8)), block=(32, 8), sizes={"ni": ni, "nj": 64, "nk": 64})


BENCH_SIZES: dict[str, BenchSpec] = {
    # PolyBench-style gemm, 64 wide and tall: 2 * ni * 64 * 64 flops on (2 ni + 64) * 64 floats.
    "gemm": BenchSpec(_gemm(1 << 15), _gemm(1 << 12),
                      bytes=lambda a, c: F32 * (_size(a, "a") + _size(a, "b") + 2 * _size(a, "c")),
                      flops=lambda a, c: 2 * int(a["ni"]) * int(a["nj"]) * int(a["nk"]),
                      memory_bound=False),
    # 16 Mi elements: read x and y, write y.
    "saxpy": BenchSpec(_vector(1 << 24, 256), _vector(1 << 21, 256),
                       bytes=lambda a, c: 3 * F32 * _size(a, "x")),
    # 1008^3 (63 x 63 tiles): 2 GFLOP on 12 MB; compute-bound. Not 1024: power-of-two rows alias
    # in the caches, which would measure the cache's associativity rather than the code.
    "matmul_tiled": BenchSpec(_matmul(1008, 1008, 1008), _matmul(384, 384, 384),
                              bytes=lambda a, c: F32 * (_size(a, "A") + _size(a, "B") + _size(a, "C")),
                              flops=lambda a, c: 2 * int(a["M"]) * int(a["N"]) * int(a["K"]),
                              memory_bound=False),
    # 32 Mi elements read once.
    "reduce_sum": BenchSpec(_vector(1 << 25, 256), _vector(1 << 22, 256),
                            bytes=lambda a, c: F32 * _size(a, "in")),
    # 4000 x 4000 (64 MB each way); not a power of two, so tile rows do not alias in the caches.
    "transpose_tiled": BenchSpec(_transpose(4000, 4000), _transpose(1400, 1400),
                                 bytes=lambda a, c: 2 * F32 * _size(a, "in")),
    # 16 Mi elements: read in, write out (the halo re-reads hit the cache).
    "stencil1d": BenchSpec(_stencil(1 << 24, 256), _stencil(1 << 21, 256),
                           bytes=lambda a, c: 2 * F32 * _size(a, "in")),
    # 4096 x 4096 grid: read in, write out.
    "jacobi2d": BenchSpec(_grid2d(4096, 4096, 32, 8, "nx", "ny"), _grid2d(1400, 1400, 32, 8, "nx", "ny"),
                          bytes=lambda a, c: 2 * F32 * _size(a, "in")),
    # 4096 rows of 2048: read x, write y (a row stays in cache between the passes).
    "softmax_rows": BenchSpec(_rows(4096, 2048, 256), _rows(512, 2048, 256),
                              bytes=lambda a, c: 2 * F32 * _size(a, "x")),
    # 32 Mi bytes; grid-stride loop over 256 blocks of 256 threads; compute-bound on a CPU.
    "histogram": BenchSpec(Case(grid=(256,), block=(256,), sizes={"n": 1 << 25}),
                           Case(grid=(256,), block=(256,), sizes={"n": 1 << 22}),
                           bytes=lambda a, c: _size(a, "data") + 2 * F32 * _size(a, "bins"),
                           memory_bound=False),
    # Rodinia's shape (16 hidden units); n_in = 16 * 65535, the largest grid.y CUDA allows.
    # Read input and weights, write the partial sums.
    "backprop_layerforward": BenchSpec(_backprop(16 * 65535, 16), _backprop(16 * 8192, 16),
                                       bytes=lambda a, c: F32 * (_size(a, "input") + _size(a, "weights")
                                                                 + _size(a, "partial_sums"))),
    # 8192 bodies: 67 M interactions; compute-bound.
    "nbody_step": BenchSpec(_vector(8192, 256), _vector(2048, 256),
                            bytes=lambda a, c: 4 * F32 * 4 * int(a["n"]),
                            flops=lambda a, c: 20 * int(a["n"]) ** 2,
                            memory_bound=False),
    # 16 Mi elements in 512-element segments: read in, write out and the segment sums.
    "prefix_scan": BenchSpec(_vector(1 << 24, 512), _vector(1 << 21, 512),
                             bytes=lambda a, c: F32 * (2 * _size(a, "in") + _size(a, "block_sums"))),
    # 256 Ki x 256 Ki, about 22 nonzeros per row: read vals, col_idx, row_ptr, x once, write y.
    "spmv_csr": BenchSpec(_spmv(1 << 18, 256), _spmv(1 << 15, 256),
                          bytes=lambda a, c: F32 * (2 * _size(a, "vals") + _size(a, "row_ptr") + _size(a, "x")
                                                    + _size(a, "y"))),
    # 4096 x 4096 image, 5 x 5 mask: 25 multiply-adds per pixel; compute-bound.
    "conv2d": BenchSpec(_grid2d(4096, 4096, 32, 8, "width", "height"), _grid2d(1400, 1400, 32, 8, "width", "height"),
                        bytes=lambda a, c: 2 * F32 * _size(a, "img"),
                        flops=lambda a, c: 2 * 25 * _size(a, "img"),
                        memory_bound=False),
    # 4096 rows of 4096: read x, write y (gamma and beta are small).
    "layernorm": BenchSpec(_rows(4096, 4096, 256), _rows(512, 4096, 256),
                           bytes=lambda a, c: F32 * (2 * _size(a, "x") + 2 * _size(a, "gamma"))),
    # 512 Ki options: log, exp, sqrt and four erfc each; compute-bound.
    "blackscholes": BenchSpec(_vector(1 << 19, 256), _vector(1 << 16, 256),
                              bytes=lambda a, c: 5 * F32 * _size(a, "S"),
                              memory_bound=False),
}
