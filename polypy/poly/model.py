"""The polyhedral model of a GPU-form kernel: instances, schedule, accesses, barriers.

Instance space
--------------
Every statement instance is a point of one named space shared by the whole kernel::

    [blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z,
     <block values>..., <one dimension per loop>...]

with parameters ``blockDim.*``/``gridDim.*`` (unless a launch shape is given), the integer
scalar parameters of the kernel, the uniform non-affine expressions (see ``affine``) and one
trip count per top-level loop whose iteration count is unknown. A statement's domain fixes the
dimensions of loops that do not enclose it to 0, so all domains live in the same space.

Loops: a ``for`` with quasi-affine start/stop and a constant positive step has the loop
variable itself as dimension (*exact*). Every other loop (``while``, non-affine ``for``) gets
an abstract iteration counter ``iter(...)`` >= 0; inside it the loop variable (and every
variable assigned in the kernel) is unknown. A top-level abstract loop is bounded by a
parameter ``trips(...)``: its trip count is one unknown per block (a loop containing a
barrier runs the same number of times in every thread of a block, since CUDA requires every
barrier to be reached by all threads of the block).

Schedule
--------
Each instance has a time vector ``(pos0, inner0, pos1, inner1, ..., sub)``: ``pos`` is the
1-based position of the statement (or of its ancestor) in its block, ``inner`` the branch of
an ``if`` (1 then, 2 else) or the loop dimension, padded with zeros; ``sub`` is 0 for the
reads of a statement and 1 for its write. Control statements evaluate their header at
``(pos, 0)`` / ``(pos, k, 0)``. Within one thread, instances execute in lexicographic order
of their time vectors. Because barriers are reached by all threads of a block, two threads'
instances are ordered iff a barrier instance executed by both lies between their times.

Soundness
---------
Domains and accessed elements are over-approximations: an unknown condition keeps both
branches, an unknown index (per dimension) accesses anything (within the declared bounds of
a fixed-size array, since out-of-bounds accesses are undefined behaviour), an unknown loop
runs any number of times, a ``break``/``continue``/``return`` under an unknown condition
keeps the instances after it. ``Access.domain_exact`` / ``index_exact`` say where nothing was
approximated; ``Barrier.exact`` says the barrier's domain is exact, which is required before
the barrier is relied upon to order anything. One relaxation: in a loop left by ``break``
(necessarily block-uniform when the loop contains barriers), a barrier instance is still
certain for any *later instance in the same loop instance* (``Barrier.cut``).

Assumptions (listed per kernel in ``Model.assumptions``): the kernel is valid CUDA — every
barrier is reached by all non-exited threads of the block, no signed overflow, no
out-of-bounds access; launch dimensions the kernel never reads are 1; launch shapes within
CUDA's limits; with a symbolic launch, ``blockIdx * blockDim`` stays below ``2**31``. Exited
threads do not block barriers and their earlier accesses are ordered before later barrier
instances (as on the hardware).
"""
from __future__ import annotations

from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n
from polypy.poly.builder import build
from polypy.poly.instances import Access, Barrier, BlockValue, Delinearized, Loop, Model
from polypy.poly.paths import child_blocks
from polypy.poly.space import (
    BLOCK_DIM, BLOCK_IDX, CTX, DIMS, GRID_DIM, INDEX_LIMIT, MAX_BLOCK_DIM, MAX_GRID_DIM, THREAD_IDX, Launch,
)

# One module per job: ``space`` (names of the instance space, CUDA's limits, ``Launch``),
# ``instances`` (what a model holds), ``builder`` (how it is built); the model's users import
# these names from here.
__all__ = [
    "BLOCK_DIM", "BLOCK_IDX", "CTX", "DIMS", "GRID_DIM", "INDEX_LIMIT", "MAX_BLOCK_DIM", "MAX_GRID_DIM", "THREAD_IDX",
    "Access", "Barrier", "BlockValue", "Delinearized", "Launch", "Loop", "Model", "build_model",
]

# Loops nested deeper than this are not modeled: every loop is a dimension of the instance space
# and every statement's domain fixes the dimensions of the loops around it, so a domain holds
# about depth x loops numbers (1,000 nested loops: 16 GB in ``polypy grad``). Deeper, ``build_model``
# refuses with a located ``TooDeepForModel`` (a ``UserError``), which the gradient's proofs take
# as "no proof" (plain atomics, exact), the race warnings as "not checked", and other users report.
MAX_MODELED_LOOP_DEPTH = 100


class TooDeepForModel(UserError):
    """Loops nested deeper than ``MAX_MODELED_LOOP_DEPTH``: no model is built."""


def _too_deep_loop(body: tuple[n.Stmt, ...]) -> tuple[n.Stmt, int] | None:
    """The first loop nested deeper than ``MAX_MODELED_LOOP_DEPTH``, and the nest's depth."""
    first: n.Stmt | None = None
    deepest = 0
    stack: list[tuple[n.Stmt, int]] = [(s, 0) for s in reversed(body)]
    while stack:
        s, depth = stack.pop()
        if isinstance(s, (n.For, n.While)):
            depth += 1
            deepest = max(deepest, depth)
            if depth > MAX_MODELED_LOOP_DEPTH and first is None:
                first = s
        for name in reversed(s.BLOCKS):
            stack.extend((x, depth) for x in reversed(getattr(s, name)))
    return (first, deepest) if first is not None else None


_MODEL_CACHE: dict[tuple[int, Launch | None, bool], tuple[n.Kernel, Model]] = {}
_MODEL_CACHE_SIZE = 32


def build_model(kernel: n.Kernel, *, launch: Launch | None = None, constants: bool = False) -> Model:
    """The polyhedral model of a GPU-form ``kernel`` (symbolic launch unless ``launch`` is given).

    ``constants`` (the race warnings only: they decide nothing, and judge races that certainly
    happen): loads of ``__constant__`` memory at a uniform index are uniform values (no kernel
    can store there, so a launch reads one value), and a ``for`` of a grid-uniform step that is
    not a constant nor reads the launch's shape (``c += d_common.rows``, not a grid stride) runs
    its first trips only, exactly: an
    under-approximation whose accesses are exact, where the default model over-approximates and
    leaves them inexact. Heartwall's loop bounds and pointers read from ``__constant__`` records
    make its accesses exact so. Other users keep the default model, as they were proven with.

    Models are cached per kernel object (kernels are immutable).
    """
    if kernel.stage != "gpu":
        raise InternalError(f"the polyhedral model needs a GPU-form kernel, {kernel.name!r} is {kernel.stage}")
    key = (id(kernel), launch, constants)
    hit = _MODEL_CACHE.get(key)
    if hit is not None and hit[0] is kernel:
        return hit[1]
    deep = _too_deep_loop(kernel.body)
    if deep is not None:
        loop, depth = deep
        raise TooDeepForModel(f"loops nested too deeply for the polyhedral model ({depth:,} levels; it models up to "
                              f"{MAX_MODELED_LOOP_DEPTH:,})", loop.loc or kernel.loc)
    model = build(kernel, launch, constants=constants)
    if len(_MODEL_CACHE) >= _MODEL_CACHE_SIZE:
        _MODEL_CACHE.pop(next(iter(_MODEL_CACHE)))
    _MODEL_CACHE[key] = (kernel, model)
    return model
