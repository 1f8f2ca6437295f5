"""Cooperative groups as values (``cooperative``): which declarations are polypy's
``<cooperative_groups.h>``, a group's record (its size, its rank among the groups its parent
was partitioned into, and their number), a thread's rank in it and the lanes of a tile."""
from __future__ import annotations

import functools
import pathlib
from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import U32

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.clang_setup import RUNTIME_DIR, evaluate
from frontend.values import Aggregate, Value

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder

CG_HEADER = (RUNTIME_DIR / "cooperative_groups.h").resolve()
SIZE, META_RANK, META_SIZE = ".__polypy_size", ".__polypy_meta_group_rank", ".__polypy_meta_group_size"
MASK = ".__polypy_mask"  # a coalesced group's lanes of the warp
MAX_TILE = 1024  # CUDA's largest block
WARP = 32


def is_cooperative(decl: ci.Cursor | None) -> bool:
    """Whether ``decl`` is declared by polypy's ``<cooperative_groups.h>``."""
    if decl is None or decl.location.file is None:
        return False
    return _is_cg_header(decl.location.file.name)


@functools.lru_cache(maxsize=256)
def _is_cg_header(path: str) -> bool:  # a cache: every call of every kernel asks
    return pathlib.Path(path).resolve() == CG_HEADER


def class_name(t: ci.Type) -> str:
    """``thread_block_tile`` for ``cooperative_groups::thread_block_tile<32, void>``."""
    decl = tm.strip_reference(t).get_canonical().get_declaration()
    return decl.spelling.split("<")[0]


def tile_size(t: ci.Type) -> int | None:
    c = tm.strip_reference(t).get_canonical()
    if class_name(c) != "thread_block_tile" or c.get_num_template_arguments() < 1:
        return None
    decl = c.get_declaration()
    return int(decl.get_template_argument_value(0))


def is_tile_memory(t: ci.Type) -> bool:
    """Whether ``t`` is polypy's ``cooperative_groups::block_tile_memory<N>`` (scratch space CUDA's
    tiles of more than 32 threads use; polypy's need none of it: a declaration of it is dropped)."""
    c = tm.strip_reference(t).get_canonical()
    return class_name(c) == "block_tile_memory" and is_cooperative(c.get_declaration())


def cg_typed(kb: KernelBuilder, fn: ci.Cursor, v: Value | None) -> Value | None:
    """``v`` in the result type the header declares (``unsigned long long`` for a thread_group's rank)."""
    st = tm.scalar_type(fn.result_type)
    return convert(v, st) if isinstance(v, n.Expr) and st is not None else v


def cg_group(kb: KernelBuilder, a: ci.Cursor) -> Aggregate:
    kind = class_name(a.type)
    v = kb.expr(a)
    fields = {SIZE, META_RANK, META_SIZE} | ({MASK} if kind == "coalesced_group" else set())
    if not isinstance(v, Aggregate) or set(v.fields) != fields:
        raise kb.error("expected a cooperative group", a)
    return v


def cg_aggregate(kb: KernelBuilder, size: n.Expr, meta_rank: n.Expr, meta_size: n.Expr, c: ci.Cursor) -> Aggregate:
    return Aggregate({SIZE: size, META_RANK: meta_rank, META_SIZE: meta_size}, c.type.spelling)


def cg_block_threads(kb: KernelBuilder) -> n.Expr:
    bx, by, bz = (n.BlockDim(d) for d in range(3))
    return n.Binary("mul", n.Binary("mul", bx, by), bz)


def cg_linear_tid(kb: KernelBuilder) -> n.Expr:
    tx, ty, tz = (n.ThreadIdx(d) for d in range(3))
    bx, by = n.BlockDim(0), n.BlockDim(1)
    return n.Binary("add", tx, n.Binary("mul", bx, n.Binary("add", ty, n.Binary("mul", by, tz))))


def cg_rank(kb: KernelBuilder, kind: str, t: ci.Type, group: Aggregate) -> n.Expr:
    """The thread's rank in the group: the linear thread index in the block, modulo a tile's size."""
    tid = cg_linear_tid(kb)
    if kind == "thread_block":
        return tid
    size = tile_size(t)
    if size is not None:
        return n.Binary("band", tid, n.Const(size - 1, U32))
    return n.Binary("rem", tid, group.fields[SIZE])  # type: ignore[arg-type]


def cg_size(kb: KernelBuilder, kind: str, t: ci.Type, group: Aggregate) -> n.Expr:
    if kind == "thread_block":
        return cg_block_threads(kb)
    size = tile_size(t)
    return n.Const(size, U32) if size is not None else group.fields[SIZE]  # type: ignore[return-value]


def cg_sync_mask(kb: KernelBuilder, kind: str, t: ci.Type, group: Aggregate) -> n.Expr | None:
    """The warp lanes a group's ``sync()`` waits for when it is a tile of at most 32 threads,
    None when it is bigger (it then waits for the block). A ``thread_group`` (the block or a
    tile) gets its mask from its size at run time, the full warp when bigger than a warp:
    ``lower_warp_syncs`` makes that the block barrier in block-uniform control, and block
    barriers between guarded phases under a condition, which is exact for a group of whole
    warps whose threads all arrive (as CUDA requires)."""
    if kind == "thread_block":
        return None
    size = tile_size(t)
    if size is not None:
        return cg_tile_mask(kb, size)[0] if size <= 32 else None
    gsize = group.fields[SIZE]
    assert isinstance(gsize, n.Expr)
    gsize = convert(gsize, U32)
    lane = n.Binary("band", cg_linear_tid(kb), n.Const(31, U32))
    first = n.Binary("band", lane, n.Unary("bnot", n.Binary("sub", gsize, n.Const(1, U32))))
    low = n.Binary("sub", n.Binary("shl", n.Const(1, U32), n.Binary("band", gsize, n.Const(31, U32))),
                   n.Const(1, U32))
    return n.Select(n.Binary("lt", gsize, n.Const(32, U32)), n.Binary("shl", low, first),
                    n.Const(0xFFFFFFFF, U32))


def cg_partition(kb: KernelBuilder, args: list[ci.Cursor], c: ci.Cursor) -> Aggregate:
    parent_c = args[0]
    static = tile_size(c.type)
    if static is not None:
        if static < 1 or static > MAX_TILE or static & (static - 1):
            raise kb.error(f"tiled_partition<{static}>: the size of a tile must be a power of two from 1 to "
                           f"{MAX_TILE}", c)
        size: n.Expr = n.Const(static, U32)
    else:
        if len(args) != 2:
            raise kb.error("tiled_partition takes a group and a tile size", c)
        k = evaluate(args[1])
        if not isinstance(k, int) or k < 1 or k > 32 or k & (k - 1):
            raise kb.error("tiled_partition(group, n): n must be a constant power of two from 1 to 32 "
                           "(other tile sizes are not supported)", args[1])
        size = n.Const(k, U32)
    parent = cg_group(kb, parent_c)
    kind = class_name(parent_c.type)
    if kind in ("grid_group", "coalesced_group"):
        raise kb.error(f"tiled_partition of a {kind} is not supported", c)
    rank = cg_rank(kb, kind, parent_c.type, parent)
    psize = cg_size(kb, kind, parent_c.type, parent)
    meta_size = n.Binary("div", n.Binary("add", psize, n.Binary("sub", size, n.Const(1, U32))), size)
    return cg_aggregate(kb, size, n.Binary("div", rank, size), meta_size, c)


def cg_tile_mask(kb: KernelBuilder, size: int) -> tuple[n.Expr, n.Expr]:
    """The tile's lanes as a warp mask, and its first lane in the warp."""
    lane = n.Binary("band", cg_linear_tid(kb), n.Const(31, U32))
    first = n.Binary("band", lane, n.Const(~(size - 1) & 0xFFFFFFFF, U32))
    if size == 32:
        return n.Const(0xFFFFFFFF, U32), first
    return n.Binary("shl", n.Const((1 << size) - 1, U32), first), first
