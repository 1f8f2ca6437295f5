"""coarsen_blocks: consecutive blocks along x run as one *coarse block*, for the CPU.

On a CPU one block is the unit of contiguous work: its thread loop over ``tx`` is what the
compiler vectorizes, and everything around it (bounds, guards, the launcher's bookkeeping) is
paid once per block. CUDA code often uses small blocks (32 x 8, 16 x 16, 128), good for a GPU
and bad for a CPU. Coarsening by ``C`` runs ``C`` consecutive blocks along x as one coarse block
of ``C * bx`` threads along x, so that the global index ``blockIdx.x * blockDim.x + threadIdx.x``
runs over ``C * bx`` consecutive values in ONE thread loop::

    for blockIdx.x in 0 .. gx:                  for blockIdx.x in 0, C, 2C, .. < gx:      (launcher)
      for ty:                                     if (gx - blockIdx.x >= C):                (full)
        for tx in 0 .. bx:                          for ty:
          i = blockIdx.x * bx + tx      ==>          for tx in 0 .. C * bx:
          ...                                            i = blockIdx.x * bx + tx
                                                         ...
                                                  else:                                   (partial)
                                                    for ty:
                                                      for tx in 0 .. (gx - blockIdx.x) * bx:
                                                        ...

Three steps, wired by ``polypy.driver.coarsen.coarsen_for_block`` (after ``specialize_block_shape``,
since the factor depends on the block shape):

* ``coarsen_blocks`` (GPU form -> GPU form): the kernel as one block of ``(C * bx, by, bz)``
  threads doing the work of ``C`` blocks. Thread ``t`` of the coarse block is thread ``t % bx``
  of sub-block ``t / bx``, whose ``blockIdx.x`` is ``blockIdx.x + t / bx``: ``threadIdx.x`` and
  ``blockIdx.x`` are replaced by those, except in the global index ``blockIdx.x * blockDim.x +
  threadIdx.x`` (``blockDim.x`` or the constant ``bx``), which is ``blockIdx.x * bx + t`` exactly
  (``(b + t / bx) * bx + t % bx == b * bx + t``, also in wrap-around ``u32`` arithmetic).
  ``blockDim`` becomes the original shape's constants; ``gridDim`` keeps the original grid.
  Shared arrays get a leading dimension of ``C``, indexed by the sub-block ``t / bx``. The
  result goes through the ordinary GPU -> CPU lowering and schedule (``to_cpu``), which turns
  the guards on the global index into bounds of the one long thread loop.
* ``to_cpu`` and ``specialize_block_shape`` with the coarse shape ``(C * bx, by, bz)``.
* ``join_partial_blocks`` (CPU form): the coarse block function above for full coarse blocks and,
  for the last coarse block of a row where fewer than ``C`` blocks are left, the same lowered
  coarse kernel with ``blockDim.x`` counting the blocks left
  (``polypy.passes.specialize.specialize_partial_coarse``) -- so blocks beyond the grid never
  run, the full ones carry no guard for them, and a grid narrower than ``C`` blocks still runs
  one loop over each whole row. The result has
  ``Kernel.coarsen == (C, 1, 1)``: the launchers run it for ``blockIdx.x = 0, C, 2C, ...``.

Legality. Blocks of a CUDA grid are independent: no order between them is guaranteed and no
block may wait for another, so any order of whole blocks is valid. Merging the thread loops of
``C`` blocks interleaves their threads; that is valid wherever each block's threads may be
interleaved anyway, i.e. between barriers, as long as the blocks share nothing that is private
to a block: shared memory is private again once sliced per sub-block, per-thread values are per
thread anyway, atomics on global memory stay atomics (their order was never fixed). A barrier of
the coarse block waits for the threads of all ``C`` sub-blocks: valid when every sub-block
reaches the same barriers, which holds when no control around a barrier depends on
``blockIdx.x``, i.e. when the coarse kernel still has its barriers under block-uniform control
(``polypy.analysis.uniformity.check_barriers``; refused otherwise). Warp operations exchange
values between 32 consecutive linear thread ids of the *original* block: kept exact only when
the coarse block's warps are the original warps (``by == bz == 1`` and ``bx % 32 == 0``).
Refused: ``extern __shared__`` memory (sized by the launch, one slice per sub-block would need
the launch's byte count in the IR).

When it pays (``plan_coarsening``). Coarsening helps when the merged loop is one contiguous run:
when ``threadIdx.x`` and ``blockIdx.x`` appear only in the global index (the "elementwise"
kernels). Other uses become ``t % bx`` and ``blockIdx.x + t / bx``, which are still exact but
cost a division per thread and break the vectorizer's view of strides: such kernels are
coarsened only when asked (``factor=``). The factor makes the run along x at least
``MIN_RUN`` threads (``WIDE_RUN`` without shared memory) and the coarse block at least
``MIN_THREADS`` threads, within ``MAX_RUN`` along x. Whether a launch has enough coarse blocks
to keep every worker busy is decided at launch (``polypy.coarsening.coarsening_pays``).
"""
from __future__ import annotations

import dataclasses
import math

from polypy.analysis.grid_sync import has_grid_sync
from polypy.analysis.uniformity import check_barriers
from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n
from polypy.ir.queries import declared_names
from polypy.ir.rewrite import rename_buffers, rename_locals
from polypy.ir.types import U32
from polypy.ir.visitor import Mutator, walk

from gpu2cpu.names import NameSupply
from gpu2cpu.thread_loops import stem_of

BlockShape = tuple[int, int, int]

# The model (measured with bench/, jacobi2d and conv2d with 32 x 8 blocks, saxpy with 256):
# a coarse block's contiguous run along x is at least MIN_RUN threads and it has at least
# MIN_THREADS threads in all, but its run is at most MAX_RUN. A kernel without shared memory
# gets runs of at least WIDE_RUN: a block of a 2-D grid then covers a long stretch of each of
# its rows, which the hardware prefetchers follow (8 rows of 128 were ten short streams per
# block: jacobi2d 4096^2 0.75x -> 0.85x of the OpenMP port through C, conv2d 0.68x -> 0.98x;
# runs of 1024 -> 4096, whole rows of a 4096-wide grid: jacobi2d 3.05-3.2 -> 2.72-2.80 ms,
# conv2d 7.0-7.2 -> 6.7-7.0 ms, against 2.6-2.7 and 6.7-6.8 ms for the OpenMP ports).
# The blocks on the border of a stencil keep their vector loop on the range of threads away
# from the border (``version_thread_loops.box_range``), which made wide blocks pay. Kernels
# with shared memory keep short runs: each sub-block gets its own slice of the block's arrays,
# and 32 slices of a 32 x 33 tile no longer fit the L1 cache (transpose_tiled 0.80x -> 0.65x).
# So do kernels with atomics (gradients scattering adjoints into their neighbours': the
# gradient of jacobi2d at 1400^2 took 3.9 ms in wide blocks, 2.8 ms in runs of 128). And a
# kernel whose lowered coarse block keeps per-thread values in memory (``local`` buffers, one
# element per thread) gets runs of at most SCRATCH_RUN (``polypy.driver.coarsen``): 4096 x 8
# threads would make each such buffer 128 KiB, past the L1 and L2 caches' share of a block.
MIN_RUN = 128
WIDE_RUN = 4096
MIN_THREADS = 1024
MAX_RUN = 4096
SCRATCH_RUN = 1024
# A warp: 32 consecutive linear thread ids of a block (``docs/ir.md``).
WARP = 32


@dataclasses.dataclass(frozen=True)
class Coarsening:
    """What ``plan_coarsening`` decided for one kernel and block shape: ``factor`` blocks along
    x per coarse block (1: launches run the blocks as they are), and why."""

    kernel: str
    block: BlockShape
    factor: int
    why: str
    loc: object = None

    def format(self) -> str:
        where = str(self.loc) if self.loc is not None else self.kernel
        shape = "x".join(str(d) for d in self.block)
        what = f"coarsened by {self.factor} along x" if self.factor > 1 else "not coarsened"
        return f"{where}: {self.kernel}: blocks of {shape} {what}: {self.why}"


# --------------------------------------------------------------------------- the rewrite


class _Coarsen(Mutator):
    """Thread ``t`` of the coarse block is thread ``t % bx`` of sub-block ``t / bx``."""

    def __init__(self, kernel: n.Kernel, block: BlockShape, factor: int):
        self.block = block
        self.bx = n.Const(block[0], U32)
        self.factor = factor
        self.shared = {b.name for b in kernel.buffers if b.space == "shared"}
        self.residual: list[n.Expr] = []  # uses of threadIdx.x / blockIdx.x outside the global index

    def is_block_base(self, e: n.Expr) -> bool:
        """``blockIdx.x * blockDim.x`` (either order; ``blockDim.x`` or the constant ``bx``)."""
        if not (isinstance(e, n.Binary) and e.op == "mul"):
            return False
        extent = (n.BlockDim(0), self.bx)
        return (e.a == n.BlockIdx(0) and e.b in extent) or (e.b == n.BlockIdx(0) and e.a in extent)

    def visit_Binary(self, e: n.Binary) -> n.Expr:
        if e.op == "add":
            if e.b == n.ThreadIdx(0) and self.is_block_base(e.a):
                return n.Binary("add", self.base(e.a), e.b, loc=e.loc)
            if e.a == n.ThreadIdx(0) and self.is_block_base(e.b):
                return n.Binary("add", e.a, self.base(e.b), loc=e.loc)
        return self.generic_visit(e)

    def base(self, e: n.Binary) -> n.Expr:
        return n.Binary("mul", n.BlockIdx(0, loc=e.loc), self.bx, loc=e.loc)

    def sub_block(self, loc) -> n.Expr:
        return n.Binary("div", n.ThreadIdx(0, loc=loc), self.bx, loc=loc)

    def visit_ThreadIdx(self, e: n.ThreadIdx) -> n.Expr:
        if e.dim != 0:
            return e
        self.residual.append(e)
        return n.Binary("rem", e, self.bx, loc=e.loc)

    def visit_BlockIdx(self, e: n.BlockIdx) -> n.Expr:
        if e.dim != 0:
            return e
        self.residual.append(e)
        return n.Binary("add", e, self.sub_block(e.loc), loc=e.loc)

    def visit_BlockDim(self, e: n.BlockDim) -> n.Expr:
        return n.Const(self.block[e.dim], U32, loc=e.loc)

    def sliced(self, s, buffer: str):
        s = self.generic_visit(s)
        if buffer not in self.shared:
            return s
        return dataclasses.replace(s, index=(self.sub_block(s.loc),) + s.index)

    def visit_Load(self, e: n.Load) -> n.Expr:
        return self.sliced(e, e.buffer)

    def visit_Store(self, s: n.Store) -> n.Stmt:
        return self.sliced(s, s.buffer)

    def visit_AtomicRMW(self, s: n.AtomicRMW) -> n.Stmt:
        return self.sliced(s, s.buffer)


def _rewrite(kernel: n.Kernel, block: BlockShape, factor: int) -> tuple[n.Kernel, list[n.Expr]]:
    c = _Coarsen(kernel, block, factor)
    body = c.visit_block(kernel.body)
    buffers = []
    for b in kernel.buffers:
        if b.space == "shared" and b.shape is not None:
            extent_type = b.shape[0].type if b.shape else U32
            b = dataclasses.replace(b, shape=(n.Const(factor, extent_type, loc=b.loc),) + b.shape)
        buffers.append(b)
    return dataclasses.replace(kernel, body=body, buffers=tuple(buffers)), c.residual


def _refusal(kernel: n.Kernel, coarse: n.Kernel, block: BlockShape) -> str | None:
    """Why ``coarse`` (from ``_rewrite``) would not compute what ``kernel`` does, or None."""
    if has_grid_sync(kernel):
        return "grid.sync(): a cooperative launch runs every block at once, one per core"
    if any(b.space == "shared" and b.shape is None for b in kernel.buffers):
        return "extern __shared__ memory is sized by the launch"
    warps = any(isinstance(x, (n.Shuffle, n.Vote)) for s in kernel.body for x in walk(s))
    if warps and not (block[1] == block[2] == 1 and block[0] % WARP == 0):
        return (f"warp operations need the original warps: blocks of a multiple of {WARP} threads along x "
                f"and one along y and z")
    if any(isinstance(x, n.Barrier) for s in coarse.body for x in walk(s)):
        try:
            check_barriers(coarse)
        except UserError:
            return "a barrier is under control that depends on blockIdx.x: sub-blocks would reach different barriers"
    return None


def _check(kernel: n.Kernel, block: BlockShape, factor: int) -> None:
    if kernel.stage != "gpu":
        raise InternalError("coarsen_blocks expects a GPU-form kernel", kernel.loc)
    if len(block) != 3 or min(block) < 1 or factor < 1:
        raise InternalError(f"coarsen_blocks: bad block shape {block!r} or factor {factor!r}", kernel.loc)


def coarsen_blocks(kernel: n.Kernel, *, block: BlockShape, factor: int) -> n.Kernel:
    """``kernel`` (GPU form) as blocks of ``(factor * bx, by, bz)`` threads, each doing the work of
    ``factor`` consecutive blocks along x from its ``blockIdx.x`` on (see the module docstring).

    Requires: ``plan_coarsening(kernel, block=block, factor=factor).factor == factor`` (legal),
    launches with block shape ``block``. Guarantees: launched with block shape ``(factor * bx, by,
    bz)`` for ``blockIdx.x`` a multiple of ``factor`` with ``blockIdx.x + factor <= gridDim.x``,
    ``gridDim`` the original grid, the result does exactly the work of those ``factor`` blocks.
    """
    _check(kernel, block, factor)
    return _rewrite(kernel, block, factor)[0]


def plan_coarsening(kernel: n.Kernel, *, block: BlockShape, factor: int | None = None,
                    max_run: int = MAX_RUN) -> Coarsening:
    """Whether (and by how much) to coarsen launches of ``kernel`` (GPU form) with block shape
    ``block``: ``factor`` forces that factor where it is legal; None lets the model choose, with
    runs along x of at most ``max_run`` threads (``SCRATCH_RUN`` for kernels with per-thread
    buffers)."""
    _check(kernel, block, 1 if factor is None else factor)

    def decision(f: int, why: str) -> Coarsening:
        return Coarsening(kernel.name, block, f, why, kernel.loc)

    if factor == 1:
        return decision(1, "factor 1 asked for")
    trial = factor if factor is not None else 2
    coarse, residual = _rewrite(kernel, block, trial)
    refusal = _refusal(kernel, coarse, block)
    if refusal is not None:
        return decision(1, refusal)
    if factor is not None:
        return decision(factor, "factor asked for")
    if residual:
        what = "threadIdx.x" if isinstance(residual[0], n.ThreadIdx) else "blockIdx.x"
        where = f" at {residual[0].loc}" if residual[0].loc is not None else ""
        return decision(1, f"{what} is used outside blockIdx.x * blockDim.x + threadIdx.x{where}: the blocks' "
                           f"thread loops would not merge into one contiguous run")
    threads = block[0] * block[1] * block[2]
    atomics = any(isinstance(x, n.AtomicRMW) for s in kernel.body for x in walk(s))
    run = MIN_RUN if atomics or any(b.space == "shared" for b in kernel.buffers) else min(WIDE_RUN, max_run)
    chosen = min(max(math.ceil(run / block[0]), math.ceil(MIN_THREADS / threads)), max_run // block[0])
    if chosen < 2:
        return decision(1, f"blocks of {threads} threads with runs of {block[0]} along x are large enough")
    why = f"one thread loop over {chosen * block[0]} consecutive global indices along x"
    if max_run < MAX_RUN:
        why += f" (at most {max_run}: the coarse block keeps per-thread values in memory)"
    return decision(chosen, why)


# --------------------------------------------------------------------------- the partial block


def join_partial_blocks(coarse: n.Kernel, partial: n.Kernel, *, factor: int) -> n.Kernel:
    """The block function of coarse blocks of ``factor`` blocks along x (``Kernel.coarsen``).

    Requires: ``coarse`` and ``partial`` CPU form with the same parameters; ``coarse`` does the
    work of the ``factor`` blocks from ``blockIdx.x`` on (``coarsen_blocks``, lowered and
    specialized), ``partial`` the work of the blocks from ``blockIdx.x`` to the end of the row
    where fewer are left (the same coarse kernel with ``blockDim.x`` counting them,
    ``polypy.passes.specialize.specialize_partial_coarse``). Guarantees: run for ``blockIdx.x =
    0, factor, 2 * factor, ...`` the result does the work of every block of the grid, once:
    ``coarse`` where all ``factor`` blocks exist, else ``partial`` -- so blocks beyond the grid
    never run, and a grid narrower than ``factor`` still runs one loop over its whole rows.
    """
    if coarse.stage != "cpu" or partial.stage != "cpu" or coarse.params != partial.params:
        raise InternalError("join_partial_blocks expects two CPU-form versions of one kernel", coarse.loc)
    if coarse.coarsen != (1, 1, 1) or partial.coarsen != (1, 1, 1) or factor < 2:
        raise InternalError("join_partial_blocks: already coarsened, or a factor below 2", coarse.loc)
    names = NameSupply(coarse)
    for b in partial.buffers:
        names.reserve(b.name)
    # The partial body sits next to the full one: its locals get fresh names, and so do its
    # block-private buffers, except those the full one has as they are (the two never run in
    # the same block: they share the scratch memory, and the sliced shared arrays keep one name).
    mapping = {name: names.fresh(stem_of(name)) for name in sorted(declared_names(partial.body))}
    same = {b.name for b in coarse.buffers} & {b.name for b in partial.buffers if b in coarse.buffers}
    scratch = [b for b in partial.buffers if b.name not in same]
    buffer_names = {b.name: names.fresh(b.name) for b in scratch}
    body = rename_buffers(rename_locals(partial.body, mapping), buffer_names)
    buffers = coarse.buffers + tuple(dataclasses.replace(b, name=buffer_names[b.name]) for b in scratch)

    loc = coarse.loc
    left = n.Binary("sub", n.GridDim(0, loc=loc), n.BlockIdx(0, loc=loc), loc=loc)  # >= 1: blockIdx.x < gridDim.x
    full = n.Binary("ge", left, n.Const(factor, U32), loc=loc)
    joined = n.If(full, coarse.body, body, loc=loc)
    return dataclasses.replace(coarse, buffers=buffers, body=(joined,), coarsen=(factor, 1, 1))
