"""Cooperative groups inside one thread block, mapped onto the IR (docs/cooperative_groups.md).

polypy's ``<cooperative_groups.h>`` (``polypy/runtime``) declares the groups with no bodies; a
call is recognized by its declaration (declared in that header, in namespace
``cooperative_groups``), never by its spelling in the program. A group object is a record of
three members, what CUDA keeps at run time: its size, its rank among the groups its parent was
partitioned into, and their number. What each call means (CUDA Programming Guide, "Cooperative
Groups")::

    this_thread_block()          size = blockDim.x*y*z, meta rank 0 of 1
    tiled_partition<N>(p)        size N (1, 2, 4, ..., 1024), meta rank p.thread_rank() / N,
    tiled_partition(p, n)        meta size ceil(p.size() / N)  (a dynamic n: the same with n)
    g.thread_rank()              t = the linear thread index (x fastest); t mod size for a tile
                                 (tile sizes are powers of two dividing their parent's)
    g.sync() / cg::sync(g)       the block and tiles of more than 32 threads: the block barrier
                                 (for a tile a stronger order than its own, one legal schedule
                                 when every thread of the block arrives: the barrier rules,
                                 block-uniform control, apply); a tile of up to 32 threads:
                                 __syncwarp(tile lanes), which gpu2cpu.lower_warp_syncs runs as
                                 the block barrier in block-uniform control and as guarded
                                 phases under a condition that differs between tiles
    tile.shfl*(v, k)             __shfl*_sync(tile lanes, v, k, N)  (N <= 32)
    tile.any/all/ballot(p)       the warp vote over the tile's lanes; ballot shifted so that bit
                                 i is the tile's thread i  (N <= 32)
    tile.shfl(v, r), any, all    N > 32: through shared memory between block barriers (shfl from
                                 the tile's thread r mod N), each warp's vote combined over warps
    cg::reduce(tile, v, op)      log2(N) steps v = op(v, tile.shfl_xor(v, k)), k = N/2 .. 1:
                                 every thread of the tile gets the reduction of the tile's values;
                                 N > 32: each warp's butterfly, then the warps' results through
                                 shared memory between two block barriers
    this_grid()                  the grid: thread_rank() = block rank * block size + t, size(),
                                 block_rank(), num_blocks() (64-bit), block_index(), dim_blocks()
    coalesced_threads()          mask = __activemask(); size popc(mask), rank popc(mask & lanes
                                 below), sync() __syncwarp(mask), shfl(v, r) from the lane of
                                 rank r (shfl_up/down: rank -/+ delta, own value past the ends),
                                 any/all the warp vote over mask, ballot compacted to ranks; cg::reduce: one shuffle
                                 per lane, members combined from the lowest lane up
    binary_partition(p, pred)    coalesced groups of the parent's lanes with the same predicate or
    labeled_partition(p, label)  label (frontend/lower/partitions.py)
    inclusive_scan(g, v[, op])   the values of ranks 0..r (exclusive: 0..r-1) combined in rank
    exclusive_scan(g, v[, op])   order (frontend/lower/scans.py)

``__syncthreads_count/and/or(p)`` are ``block_vote``: each warp's vote combined over the block's
warps, as ``cg::reduce`` over a tile of the whole block.

A grid's ``sync()`` is the grid barrier (``Barrier`` of scope ``grid``). Its ``is_valid()``, multi-grid groups,
and ``shfl_up``/``shfl_down``/``shfl_xor``/``ballot`` of tiles of more than 32 threads are refused
with a located error naming the feature. ``block_tile_memory`` (the scratch CUDA's big tiles use) is accepted and dropped.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import BOOL, I32, U32, U64

from frontend import ctypes_map as tm
from frontend.arith import convert, truth
from frontend.lower.context import CK
from frontend.lower.groups import (
    MASK, MAX_TILE, META_RANK, META_SIZE, SIZE, WARP, cg_aggregate, cg_block_threads, cg_group, cg_linear_tid,
    cg_partition, cg_rank, cg_size, cg_sync_mask, cg_tile_mask, cg_typed, class_name, is_cooperative, is_tile_memory,
    tile_size,
)
from frontend.lower.helpers import strip
from frontend.lower.int_intrinsics import int_intrinsic
from frontend.lower.partitions import dynamic_partition
from frontend.lower.scans import SCANS, cg_scan
from frontend.values import Aggregate, Value

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder

_PARTITIONS = ("binary_partition", "labeled_partition")  # groups of dynamic membership (partitions.py)
_REDUCE_OPS = {"plus": "add", "less": "min", "greater": "max", "bit_and": "band", "bit_or": "bor",
               "bit_xor": "bxor"}
_SHUFFLES = {"shfl": "idx", "shfl_up": "up", "shfl_down": "down", "shfl_xor": "xor"}


def cooperative_call(kb: KernelBuilder, c: ci.Cursor, fn: ci.Cursor, children: list[ci.Cursor],
                     discard: bool) -> Value | None:
    owner = fn.semantic_parent.spelling.split("<")[0] if fn.kind in (CK.CXX_METHOD, CK.CONSTRUCTOR) or \
        (fn.semantic_parent is not None and fn.semantic_parent.kind in (CK.CLASS_DECL, CK.CLASS_TEMPLATE,
                                                                        CK.STRUCT_DECL)) else None
    name = fn.spelling
    if fn.kind == CK.CONSTRUCTOR:
        args = [ch for ch in children if ch.kind.is_expression()]
        if owner in _REDUCE_OPS:
            return Aggregate({}, c.type.spelling)
        if len(args) != 1:
            raise kb.error(f"this constructor of cooperative_groups::{owner} is not supported", c)
        return cg_group(kb, args[0])
    if owner in _REDUCE_OPS and name == "operator()":  # cg::plus<int>()(a, b)
        operands = [ch for ch in children
                    if not (strip(ch).kind == CK.DECL_REF_EXPR and strip(ch).spelling == fn.spelling)]
        rt = tm.scalar_type(fn.result_type)
        if rt is None or len(operands) != 3:
            raise kb.error(f"this use of cooperative_groups::{owner} is not supported", c)
        kb.expr(operands[0], discard=True)
        a, b = (convert(kb.scalar(x), rt) for x in operands[1:])
        return cg_combine(kb, _REDUCE_OPS[owner], a, b, c)
    if owner is not None:  # a member function: the object is the callee's base
        callee = strip(children[0])
        base = next(iter(callee.get_children()), None) if callee.kind == CK.MEMBER_REF_EXPR else None
        if base is None:
            raise kb.error(f"cooperative_groups::{owner}::{name} called without its group", c)
        return cg_typed(kb, fn, cg_member(kb, owner, name, base, children[1:], c, discard))
    args = children[1:]
    if name == "this_thread_block":
        if args and not (len(args) == 1 and is_tile_memory(args[0].type)):
            raise kb.error("this form of cooperative_groups::this_thread_block is not supported", c)
        nthreads = cg_block_threads(kb)
        return cg_aggregate(kb, nthreads, n.Const(0, U32), n.Const(1, U32), c)
    if name == "coalesced_threads":
        return cg_coalesced(kb, c)
    if name == "this_grid":
        return cg_aggregate(kb, n.Const(0, U32), n.Const(0, U32), n.Const(1, U32), c)
    if name == "tiled_partition":
        return cg_partition(kb, args, c)
    if name in _PARTITIONS:
        parent = args[0].type
        return dynamic_partition(kb, name, args, c, mask_field=MASK,  # type: ignore[arg-type]
                                 parent_kind=class_name(parent), tile_size=tile_size(parent))
    if name in ("sync", "thread_rank", "group_size"):
        return cg_typed(kb, fn, cg_member(kb, class_name(args[0].type), {"group_size": "size"}.get(name, name),
                                              args[0], [], c, discard))
    if name == "reduce":
        return cg_reduce(kb, args, c)
    if name in SCANS:
        return cg_scan(kb, name, args, c)
    raise kb.error(f"cooperative_groups::{name} is not supported", c)


# ------------------------------------------------------------------ member functions
def cg_member(kb: KernelBuilder, kind: str, name: str, base: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor,
              discard: bool) -> Value | None:
    group = cg_group(kb, base)
    t = base.type
    loc = kb.loc(c)
    if kind == "grid_group":
        return cg_grid_member(kb, name, c, discard)
    if kind == "coalesced_group":
        return cg_coalesced_member(kb, name, group, args, c, discard)
    if name == "sync":
        if not discard:
            raise kb.error("sync() has no value", c)
        mask = cg_sync_mask(kb, kind, t, group)
        # A tile of a warp or less waits like __syncwarp of its lanes (gpu2cpu.lower_warp_syncs:
        # the block barrier in block-uniform control, guarded phases under a condition);
        # a bigger group waits for the block.
        kb.emit(n.WarpSync(mask, loc=loc) if mask is not None else n.Barrier(loc=loc))
        return None
    if name == "thread_rank":
        return cg_rank(kb, kind, t, group)
    if name in ("size", "num_threads"):
        return cg_size(kb, kind, t, group)
    if name == "meta_group_rank":
        return group.fields[META_RANK]
    if name == "meta_group_size":
        return group.fields[META_SIZE]
    if name in ("group_index", "thread_index", "group_dim", "dim_threads"):
        make = {"group_index": n.BlockIdx, "thread_index": n.ThreadIdx}.get(name, n.BlockDim)
        vals = [make(d) for d in range(3)]
        return Aggregate({".x": vals[0], ".y": vals[1], ".z": vals[2]}, "dim3")
    size = tile_size(t)
    if size is None:
        raise kb.error(f"cooperative_groups::{kind}::{name} is not supported", c)
    if size > WARP and name in ("shfl", "any", "all"):
        return cg_big_tile_member(kb, name, args, size, c)
    if size > WARP and (name in _SHUFFLES or name == "ballot"):
        raise kb.error(f"thread_block_tile<{size}>::{name}: shfl_up, shfl_down, shfl_xor and ballot of a tile "
                       f"of more than {WARP} threads are not supported", c)
    if name in _SHUFFLES:
        value = kb.expr(args[0])
        lane = convert(kb.scalar(args[1]), U32 if name != "shfl" else I32)
        if isinstance(value, Aggregate):
            # A record (`tile.shfl_xor(v, 1)` of a uint4): cooperative groups shuffle any
            # trivially copyable type word by word from one source lane, which is each
            # member shuffled from that lane.
            fields: dict[str, Value] = {}
            for path, member in value.fields.items():
                if not isinstance(member, n.Expr):
                    raise kb.error(f"a shuffle of a record with a member '{path}' that is not a number "
                                   "is not supported", c)
                fields[path] = cg_shuffle(kb, _SHUFFLES[name], member, lane, size, c)
            return Aggregate(fields, value.spelling)
        if not isinstance(value, n.Expr):
            raise kb.error(f"cooperative_groups::{kind}::{name} of this kind of value is not supported", c)
        return cg_shuffle(kb, _SHUFFLES[name], value, lane, size, c)
    if name in ("any", "all", "ballot"):
        return cg_vote(kb, name, truth(kb.scalar(args[0])), size, c)
    raise kb.error(f"cooperative_groups::{kind}::{name} is not supported", c)


def cg_grid_member(kb: KernelBuilder, name: str, c: ci.Cursor, discard: bool) -> Value | None:
    """A grid group's ranks and sizes (64-bit, as CUDA declares them); its ``sync()``, the grid
    barrier (``Barrier`` of scope ``grid``: the kernel then needs a cooperative launch);
    ``is_valid()`` (whether the launch was cooperative) is refused."""
    if name == "sync":
        if not discard:
            raise kb.error("sync() has no value", c)
        kb.emit(n.Barrier("grid", loc=kb.loc(c)))
        return None
    gx, gy, gz = (convert(n.GridDim(d), U64) for d in range(3))
    bx, by, bz = (convert(n.BlockIdx(d), U64) for d in range(3))
    block_rank = n.Binary("add", bx, n.Binary("mul", gx, n.Binary("add", by, n.Binary("mul", gy, bz))))
    num_blocks = n.Binary("mul", n.Binary("mul", gx, gy), gz)
    per_block = convert(cg_block_threads(kb), U64)
    if name == "thread_rank":
        return n.Binary("add", n.Binary("mul", block_rank, per_block), convert(cg_linear_tid(kb), U64))
    if name in ("size", "num_threads"):
        return n.Binary("mul", num_blocks, per_block)
    if name == "block_rank":
        return block_rank
    if name == "num_blocks":
        return num_blocks
    if name in ("block_index", "dim_blocks"):
        make = n.BlockIdx if name == "block_index" else n.GridDim
        vals = [make(d) for d in range(3)]
        return Aggregate({".x": vals[0], ".y": vals[1], ".z": vals[2]}, "dim3")
    raise kb.error(f"cooperative_groups::grid_group::{name} is not supported", c)


def cg_coalesced(kb: KernelBuilder, c: ci.Cursor) -> Aggregate:
    """``coalesced_threads()``: the lanes of the warp that execute the call (``__activemask()``:
    in polypy's warps every lane that takes a branch runs it together, the fullest of the
    convergences CUDA allows); its size is their number."""
    loc = kb.loc(c)
    mask = kb.temp(U32, None, "coalesced", c)
    kb.emit(n.Vote(mask.name, "activemask", n.Const(True, BOOL), n.Const(0xFFFFFFFF, U32), loc=loc))
    m = n.Var(mask.name, U32)
    size = kb.bit_intrinsic("__popc", [m], c)  # type: ignore[attr-defined]
    group = cg_aggregate(kb, convert(size, U32), n.Const(0, U32), n.Const(1, U32), c)
    group.fields[MASK] = m
    return group


def cg_coalesced_member(kb: KernelBuilder, name: str, group: Aggregate, args: list[ci.Cursor], c: ci.Cursor,
                        discard: bool) -> Value | None:
    """A coalesced group's rank (the set lanes of its mask below this one), size, ``sync()``
    (``__syncwarp`` of its mask), ``shfl(v, rank)`` (from the lane of that rank), ``shfl_up``/
    ``shfl_down`` (from the rank ``delta`` below/above; the thread's own value past the group's
    ends), ``any``/``all``, ``ballot`` (bit k: the member of rank k)."""
    loc = kb.loc(c)
    mask = group.fields[MASK]
    assert isinstance(mask, n.Expr)
    lane = n.Binary("band", cg_linear_tid(kb), n.Const(WARP - 1, U32))
    if name == "sync":
        if not discard:
            raise kb.error("sync() has no value", c)
        kb.emit(n.WarpSync(mask, loc=loc))
        return None
    if name == "thread_rank":
        below = n.Binary("band", mask, n.Binary("sub", n.Binary("shl", n.Const(1, U32), lane), n.Const(1, U32)))
        return convert(kb.bit_intrinsic("__popc", [below], c), U32)  # type: ignore[attr-defined]
    if name in ("size", "num_threads"):
        return group.fields[SIZE]
    if name == "meta_group_rank":
        return group.fields[META_RANK]
    if name == "meta_group_size":
        return group.fields[META_SIZE]
    if name in ("shfl", "shfl_up", "shfl_down"):
        value = kb.scalar(args[0])
        arg = convert(kb.scalar(args[1]), U32)
        if name == "shfl":
            return cg_coalesced_shfl(kb, value, arg, mask, c)
        # shfl_up/down: from the rank delta below/above, the thread's own value past the ends
        rank = kb.temp(U32, cg_coalesced_member(kb, "thread_rank", group, [], c, False), "rank", c)
        rv, size = n.Var(rank.name, U32), group.fields[SIZE]
        assert isinstance(size, n.Expr)
        if name == "shfl_up":
            src = n.Select(n.Binary("ge", rv, arg), n.Binary("sub", rv, arg), rv)
        else:
            src = n.Select(n.Binary("lt", arg, n.Binary("sub", size, rv)), n.Binary("add", rv, arg), rv)
        return cg_coalesced_shfl(kb, value, src, mask, c)
    if name == "ballot":
        # bit k of the result is the group's thread of rank k: the lanes' ballot, compacted
        lanes = kb.temp(U32, None, "ballot", c)
        kb.emit(n.Vote(lanes.name, "ballot", truth(kb.scalar(args[0])), mask, loc=loc))
        out, k = kb.temp(U32, n.Const(0, U32), "ballot", c), kb.temp(U32, n.Const(0, U32), "rank", c)
        j = kb.names.fresh("l")
        jv, kv, ov = n.Var(j, U32), n.Var(k.name, U32), n.Var(out.name, U32)
        bit = n.Binary("band", n.Binary("shr", n.Var(lanes.name, U32), jv), n.Const(1, U32))
        member = n.Binary("ne", n.Binary("band", n.Binary("shr", mask, jv), n.Const(1, U32)), n.Const(0, U32))
        body = (n.If(member, (n.Assign(out.name, n.Binary("bor", ov, n.Binary("shl", bit, kv)), loc=loc),
                              n.Assign(k.name, n.Binary("add", kv, n.Const(1, U32)), loc=loc)), loc=loc),)
        kb.emit(n.For(j, U32, n.Const(0, U32), n.Const(WARP, U32), n.Const(1, U32), body, loc=loc))
        return ov
    if name in ("any", "all"):
        dest = kb.temp(I32, None, "vote", c)
        kb.emit(n.Vote(dest.name, name, truth(kb.scalar(args[0])), mask, loc=loc))
        return n.Var(dest.name, I32)
    raise kb.error(f"cooperative_groups::coalesced_group::{name} is not supported", c)


def cg_coalesced_shfl(kb: KernelBuilder, value: n.Expr, rank: n.Expr, mask: n.Expr, c: ci.Cursor) -> n.Expr:
    """``value`` from the member of rank ``rank`` (the mask's set bits counted from lane 0)."""
    loc = kb.loc(c)
    src, seen = kb.temp(U32, n.Const(0, U32), "src_lane", c), kb.temp(U32, n.Const(0, U32), "seen", c)
    want = kb.temp(U32, rank, "src_rank", c)
    j = kb.names.fresh("l")
    jv, sv = n.Var(j, U32), n.Var(seen.name, U32)
    member = n.Binary("ne", n.Binary("band", n.Binary("shr", mask, jv), n.Const(1, U32)), n.Const(0, U32))
    body = (n.If(member, (n.If(n.Binary("eq", sv, n.Var(want.name, U32)), (n.Assign(src.name, jv, loc=loc),),
                               loc=loc),
                          n.Assign(seen.name, n.Binary("add", sv, n.Const(1, U32)), loc=loc)), loc=loc),)
    kb.emit(n.For(j, U32, n.Const(0, U32), n.Const(WARP, U32), n.Const(1, U32), body, loc=loc))
    dest = kb.temp(value.type, None, "shfl", c)
    kb.emit(n.Shuffle(dest.name, "idx", value, convert(n.Var(src.name, U32), I32), n.Const(WARP, I32), mask,
                      loc=loc))
    return n.Var(dest.name, dest.type)


def cg_big_tile_member(kb: KernelBuilder, name: str, args: list[ci.Cursor], size: int, c: ci.Cursor) -> n.Expr:
    """``shfl(v, r)`` and ``any``/``all`` of a tile of more than 32 threads, between block barriers
    (every thread of the block must reach them, as the barrier rules check): ``shfl`` through
    shared memory from the tile's thread ``r mod size``; ``any``/``all`` as each warp's vote
    combined over the tile's warps (``cg_reduce_warps`` with ``|`` / ``&``)."""
    loc = kb.loc(c)
    if name in ("any", "all"):
        pred = truth(kb.scalar(args[0]))
        vote = kb.temp(I32, None, "vote", c)
        kb.emit(n.Vote(vote.name, name, pred, n.Const(0xFFFFFFFF, U32), loc=loc))
        return cg_reduce_warps(kb, "bor" if name == "any" else "band", vote.name, I32, size, c)
    value = kb.scalar(args[0])
    rank = convert(kb.scalar(args[1]), U32)
    tid = cg_linear_tid(kb)
    xchg = kb.names.fresh("cg_exchange")
    kb.buffers[xchg] = n.Buffer(xchg, value.type, (n.Const(MAX_TILE, I32),), "shared", loc=loc)
    kb.emit(n.Store(xchg, (tid,), value, loc=loc))
    kb.emit(n.Barrier(loc=loc))
    first = n.Binary("band", tid, n.Const(~(size - 1) & 0xFFFFFFFF, U32))
    source = n.Binary("add", first, n.Binary("band", rank, n.Const(size - 1, U32)))
    got = kb.temp(value.type, n.Load(xchg, (source,), value.type, loc=loc), "shfl", c)
    kb.emit(n.Barrier(loc=loc))
    return n.Var(got.name, value.type)


def cg_shuffle(kb: KernelBuilder, mode: str, value: n.Expr, lane: n.Expr, size: int, c: ci.Cursor) -> n.Expr:
    mask, _ = cg_tile_mask(kb, size)
    dest = kb.temp(value.type, None, "shfl", c)
    kb.emit(n.Shuffle(dest.name, mode, value, lane, n.Const(size, I32), mask, loc=kb.loc(c)))
    return n.Var(dest.name, dest.type)


def cg_vote(kb: KernelBuilder, mode: str, pred: n.Expr, size: int, c: ci.Cursor) -> n.Expr:
    mask, first = cg_tile_mask(kb, size)
    dt = U32 if mode == "ballot" else I32
    dest = kb.temp(dt, None, "vote", c)
    kb.emit(n.Vote(dest.name, mode, pred, mask, loc=kb.loc(c)))
    result: n.Expr = n.Var(dest.name, dt)
    if mode == "ballot" and size < 32:
        result = n.Binary("shr", result, first)
    return result


# ------------------------------------------------------------------ reduce
def cg_combine(kb: KernelBuilder, op: str, a: n.Expr, b: n.Expr, c: ci.Cursor) -> n.Expr:
    """``op(a, b)`` of cg::plus (a + b), cg::less (a < b ? a : b), cg::greater (a < b ? b : a)
    and the bit operators."""
    loc = kb.loc(c)
    if op == "min":
        return n.Select(n.Binary("lt", a, b, loc=loc), a, b, loc=loc)
    if op == "max":
        return n.Select(n.Binary("lt", a, b, loc=loc), b, a, loc=loc)
    return n.Binary(op, a, b, loc=loc)


def cg_reduce(kb: KernelBuilder, args: list[ci.Cursor], c: ci.Cursor) -> n.Expr:
    group_c, value_c, op_c = args
    size = tile_size(group_c.type)
    coalesced = class_name(group_c.type) == "coalesced_group"
    if size is None and not coalesced:
        raise kb.error(f"cg::reduce over a {class_name(group_c.type)}: only thread_block_tile and "
                       "coalesced_group groups are supported", group_c)
    group = cg_group(kb, group_c)
    op_decl = tm.strip_reference(op_c.type).get_canonical().get_declaration()
    op_name = op_decl.spelling.split("<")[0]
    if not is_cooperative(op_decl) or op_name not in _REDUCE_OPS:
        raise kb.error("cg::reduce: only the operators cg::plus, cg::less, cg::greater, cg::bit_and, "
                       "cg::bit_or and cg::bit_xor are supported", op_c)
    kb.expr(op_c, discard=True)
    rt = tm.scalar_type(c.type)
    if rt is None:
        raise kb.error("cg::reduce of a value that is not a number is not supported", value_c)
    op_type = tm.strip_reference(op_c.type).get_canonical()
    if op_type.get_num_template_arguments() != 1 or \
            op_type.get_template_argument_type(0).get_canonical() != tm.strip_reference(c.type).get_canonical():
        # CUDA computes in the operator's type (reduce returns decltype(op(v, v))).
        raise kb.error(f"cg::reduce of a '{tm.strip_reference(value_c.type).spelling}' with "
                       f"'{op_type.spelling}': an operator of another type than the value is not supported",
                       op_c)
    loc = kb.loc(c)
    acc = kb.temp(rt, convert(kb.scalar(value_c), rt), "reduce", c)
    op = _REDUCE_OPS[op_name]
    if rt.is_float and op in ("band", "bor", "bxor"):
        raise kb.error(f"cg::reduce with cg::{op_name} of floating-point values", op_c)
    if size is None:
        return cg_reduce_coalesced(kb, op, acc.name, rt, group.fields[MASK], c)  # type: ignore[arg-type]
    k = min(size, WARP) // 2
    while k >= 1:
        other = cg_shuffle(kb, "xor", n.Var(acc.name, rt), n.Const(k, U32), min(size, WARP), c)
        kb.emit(n.Assign(acc.name, cg_combine(kb, op, n.Var(acc.name, rt), other, c), loc=loc))
        k //= 2
    if size <= WARP:
        return n.Var(acc.name, rt)
    return cg_reduce_warps(kb, op, acc.name, rt, size, c)


def cg_reduce_coalesced(kb: KernelBuilder, op: str, acc: str, rt, mask: n.Expr, c: ci.Cursor) -> n.Expr:
    """The reduction over the warp lanes in ``mask`` (a coalesced group's, or the run-time mask
    of ``__reduce_*_sync``; ``mask`` is read once per lane, so it must be a variable or a
    constant): every member takes the members' values from the
    lowest lane up, one shuffle per lane of the warp (a lane outside the group reads its own,
    unused), and combines them in that order (all members the same bits)::

        for (l = 0; l < 32; ++l) { x = shfl(mask, v, in(l) ? l : lane);
                                   if (in(l)) { r = started ? op(r, x) : x; started = 1; } }
    """
    loc = kb.loc(c)
    lane = n.Binary("band", cg_linear_tid(kb), n.Const(WARP - 1, U32))
    result = kb.temp(rt, n.Var(acc, rt), "reduce", c)  # replaced by the first member's value
    started = kb.temp(BOOL, n.Const(False, BOOL), "started", c)
    x = kb.temp(rt, None, "shfl", c)
    j = kb.names.fresh("l")
    jv = n.Var(j, U32)
    member = n.Binary("ne", n.Binary("band", n.Binary("shr", mask, jv), n.Const(1, U32)), n.Const(0, U32))
    xv, rv, sv = n.Var(x.name, rt), n.Var(result.name, rt), n.Var(started.name, BOOL)
    body = (
        n.Shuffle(x.name, "idx", n.Var(acc, rt), convert(n.Select(member, jv, lane), I32), n.Const(WARP, I32),
                  mask, loc=loc),
        n.If(member, (n.Assign(result.name, n.Select(sv, cg_combine(kb, op, rv, xv, c), xv), loc=loc),
                      n.Assign(started.name, n.Const(True, BOOL), loc=loc)), loc=loc),
    )
    kb.emit(n.For(j, U32, n.Const(0, U32), n.Const(WARP, U32), n.Const(1, U32), body, loc=loc))
    return rv


def cg_reduce_warps(kb: KernelBuilder, op: str, acc: str, rt, size: int, c: ci.Cursor) -> n.Expr:
    """The reduction of a tile of more than 32 threads, from each warp's (every lane of a warp
    holds it): lane 0 of each warp stores it in shared memory, and after a barrier every
    thread combines its tile's warps in order, first to last (all threads the same bits). The
    barriers are the block's: every thread of the block must reach the reduction, as the
    barrier rules check. A last tile the block cuts short combines the warps it has::

        if (lane == 0) partial[warp] = v;   barrier
        r = partial[w0];  for (j = 1; j < size / 32; ++j) if (w0 + j < warps) r = op(r, partial[w0 + j]);
        barrier                              (partial may be written again by a later reduce)
    """
    loc = kb.loc(c)
    tid = cg_linear_tid(kb)
    partial = kb.names.fresh("cg_partial")
    kb.buffers[partial] = n.Buffer(partial, rt, (n.Const(MAX_TILE // WARP, I32),), "shared", loc=loc)
    warp = n.Binary("shr", tid, n.Const(5, U32))
    lane0 = n.Binary("eq", n.Binary("band", tid, n.Const(WARP - 1, U32)), n.Const(0, U32))
    kb.emit(n.If(lane0, (n.Store(partial, (warp,), n.Var(acc, rt), loc=loc),), loc=loc))
    kb.emit(n.Barrier(loc=loc))
    first = n.Binary("shr", n.Binary("band", tid, n.Const(~(size - 1) & 0xFFFFFFFF, U32)), n.Const(5, U32))
    result = kb.temp(rt, n.Load(partial, (first,), rt, loc=loc), "reduce", c)
    j = kb.names.fresh("warp")
    other = n.Binary("add", first, n.Var(j, U32))
    warps = n.Binary("div", n.Binary("add", cg_block_threads(kb), n.Const(WARP - 1, U32)), n.Const(WARP, U32))
    combine = n.Assign(result.name, cg_combine(kb, op, n.Var(result.name, rt), n.Load(partial, (other,), rt, loc=loc),
                                                   c), loc=loc)
    kb.emit(n.For(j, U32, n.Const(1, U32), n.Const(size // WARP, U32), n.Const(1, U32),
                  (n.If(n.Binary("lt", other, warps), (combine,), loc=loc),), loc=loc))
    kb.emit(n.Barrier(loc=loc))
    return n.Var(result.name, rt)


# ------------------------------------------------------------------ block votes
BLOCK_VOTES = {"__syncthreads_count": "count", "__syncthreads_and": "and", "__syncthreads_or": "or"}


def block_vote(kb: KernelBuilder, name: str, args: list[ci.Cursor], c: ci.Cursor) -> n.Expr:
    """``__syncthreads_count(p)``, ``__syncthreads_and(p)``, ``__syncthreads_or(p)``: a block barrier
    that returns to every thread the number of the block's threads whose ``p`` is nonzero, or
    whether it is for all, for any (CUDA: nonzero for true). Each warp's vote (the ballot's bits
    counted, ``all``, ``any``) combined over the block's warps as a tile of the whole block
    (``cg_reduce_warps``: shared memory between two block barriers, so the barrier rules apply)."""
    mode = BLOCK_VOTES[name]
    loc = kb.loc(c)
    pred = truth(kb.scalar(args[0]))
    vote = {"count": "ballot", "and": "all", "or": "any"}[mode]
    bits = kb.temp(U32 if vote == "ballot" else I32, None, "vote", c)
    kb.emit(n.Vote(bits.name, vote, pred, n.Const(0xFFFFFFFF, U32), loc=loc))
    if mode != "count":
        return cg_reduce_warps(kb, "band" if mode == "and" else "bor", bits.name, I32, MAX_TILE, c)

    let = kb.binder(c)

    count = kb.temp(I32, int_intrinsic("__popc", [n.Var(bits.name, U32)], let, loc), "count", c)
    return cg_reduce_warps(kb, "add", count.name, I32, MAX_TILE, c)
