"""Cooperative groups inside one thread block, mapped onto the IR (docs/cooperative_groups.md).

polypy's ``<cooperative_groups.h>`` (``polypy/runtime``) declares the groups with no bodies; a
call is recognized by its declaration (declared in that header, in namespace
``cooperative_groups``), never by its spelling in the program. A group object is a record of
three members, what CUDA keeps at run time: its size, its rank among the groups its parent was
partitioned into, and their number. What each call means (CUDA Programming Guide, "Cooperative
Groups")::

    this_thread_block()          size = blockDim.x*y*z, meta rank 0 of 1
    tiled_partition<N>(p)        size N (1, 2, 4, ..., 32), meta rank p.thread_rank() / N,
    tiled_partition(p, n)        meta size ceil(p.size() / N)  (a dynamic n: the same with n)
    g.thread_rank()              t = the linear thread index (x fastest); t mod size for a tile
                                 (tile sizes are powers of two dividing their parent's)
    g.sync() / cg::sync(g)       the block barrier: for the block, CUDA's own meaning; for a tile,
                                 a stronger order than the tile's (every thread of the block
                                 waits), which is one legal schedule when, as CUDA requires, all
                                 of the tile arrives; the barrier rules (block-uniform control)
                                 then apply to it
    tile.shfl*(v, k)             __shfl*_sync(tile lanes, v, k, N)
    tile.any/all/ballot(p)       the warp vote over the tile's lanes; ballot shifted so that bit
                                 i is the tile's thread i
    cg::reduce(tile, v, op)      log2(N) steps v = op(v, tile.shfl_xor(v, k)), k = N/2 .. 1:
                                 every thread of the tile gets the reduction of the tile's values

Grid groups (``this_grid``, grid sync), multi-grid groups and ``coalesced_threads()`` are
refused with a located error naming the feature.
"""
from __future__ import annotations

import functools
import pathlib

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import I32, U32

from frontend import ctypes_map as tm
from frontend.arith import convert, truth
from frontend.clang_setup import RUNTIME_DIR, evaluate
from frontend.lower.context import CK
from frontend.lower.helpers import _strip
from frontend.values import Aggregate, Value

CG_HEADER = (RUNTIME_DIR / "cooperative_groups.h").resolve()
_SIZE, _META_RANK, _META_SIZE = ".__polypy_size", ".__polypy_meta_group_rank", ".__polypy_meta_group_size"
_REFUSED = {
    "this_grid": "grid groups (cooperative_groups::this_grid, a grid-wide barrier) are not supported",
    "grid_group": "grid groups (cooperative_groups::grid_group, a grid-wide barrier) are not supported",
    "coalesced_threads": "coalesced groups (cooperative_groups::coalesced_threads, a group of dynamic "
                         "membership) are not supported",
    "coalesced_group": "coalesced groups (cooperative_groups::coalesced_group, a group of dynamic "
                       "membership) are not supported",
    "labeled_partition": "cooperative_groups::labeled_partition (groups of dynamic membership) is not supported",
    "binary_partition": "cooperative_groups::binary_partition (groups of dynamic membership) is not supported",
    "memcpy_async": "asynchronous copies (cooperative_groups::memcpy_async) are not supported",
    "wait": "asynchronous copies (cooperative_groups::wait) are not supported",
    "wait_prior": "asynchronous copies (cooperative_groups::wait_prior) are not supported",
    "block_tile_memory": "tiles of more than 32 threads (cooperative_groups::block_tile_memory) are not supported",
}
_REDUCE_OPS = {"plus": "add", "less": "min", "greater": "max", "bit_and": "band", "bit_or": "bor",
               "bit_xor": "bxor"}
_SHUFFLES = {"shfl": "idx", "shfl_up": "up", "shfl_down": "down", "shfl_xor": "xor"}


def is_cooperative(decl: ci.Cursor | None) -> bool:
    """Whether ``decl`` is declared by polypy's ``<cooperative_groups.h>``."""
    if decl is None or decl.location.file is None:
        return False
    return _is_cg_header(decl.location.file.name)


@functools.lru_cache(maxsize=256)
def _is_cg_header(path: str) -> bool:  # a cache: every call of every kernel asks
    return pathlib.Path(path).resolve() == CG_HEADER


def _class_name(t: ci.Type) -> str:
    """``thread_block_tile`` for ``cooperative_groups::thread_block_tile<32, void>``."""
    decl = tm.strip_reference(t).get_canonical().get_declaration()
    return decl.spelling.split("<")[0]


def _tile_size(t: ci.Type) -> int | None:
    c = tm.strip_reference(t).get_canonical()
    if _class_name(c) != "thread_block_tile" or c.get_num_template_arguments() < 1:
        return None
    decl = c.get_declaration()
    return int(decl.get_template_argument_value(0))


def refused_group(t: ci.Type) -> str | None:
    """The refusal of a group type polypy's header declares only to refuse it, or None."""
    return _REFUSED.get(_class_name(t))


class CooperativeLowering:
    """Part of ``KernelBuilder`` (see ``frontend.lower``)."""

    def cooperative_call(self, c: ci.Cursor, fn: ci.Cursor, children: list[ci.Cursor], discard: bool) -> Value | None:
        owner = fn.semantic_parent.spelling.split("<")[0] if fn.kind in (CK.CXX_METHOD, CK.CONSTRUCTOR) or \
            (fn.semantic_parent is not None and fn.semantic_parent.kind in (CK.CLASS_DECL, CK.CLASS_TEMPLATE,
                                                                            CK.STRUCT_DECL)) else None
        name = fn.spelling
        for what in (owner, name):
            if what in _REFUSED:
                raise self.error(_REFUSED[what], c)
        if fn.kind == CK.CONSTRUCTOR:
            args = [ch for ch in children if ch.kind.is_expression()]
            if owner in _REDUCE_OPS:
                return Aggregate({}, c.type.spelling)
            if len(args) != 1:
                raise self.error(f"this constructor of cooperative_groups::{owner} is not supported", c)
            return self.cg_group(args[0])
        if owner in _REDUCE_OPS and name == "operator()":  # cg::plus<int>()(a, b)
            operands = [ch for ch in children
                        if not (_strip(ch).kind == CK.DECL_REF_EXPR and _strip(ch).spelling == fn.spelling)]
            rt = tm.scalar_type(fn.result_type)
            if rt is None or len(operands) != 3:
                raise self.error(f"this use of cooperative_groups::{owner} is not supported", c)
            self.expr(operands[0], discard=True)
            a, b = (convert(self.scalar(x), rt) for x in operands[1:])
            return self.cg_combine(_REDUCE_OPS[owner], a, b, c)
        if owner is not None:  # a member function: the object is the callee's base
            callee = _strip(children[0])
            base = next(iter(callee.get_children()), None) if callee.kind == CK.MEMBER_REF_EXPR else None
            if base is None:
                raise self.error(f"cooperative_groups::{owner}::{name} called without its group", c)
            return self.cg_typed(fn, self.cg_member(owner, name, base, children[1:], c, discard))
        args = children[1:]
        if name == "this_thread_block":
            if args:
                raise self.error(_REFUSED["block_tile_memory"], c)
            nthreads = self.cg_block_threads()
            return self.cg_aggregate(nthreads, n.Const(0, U32), n.Const(1, U32), c)
        if name == "tiled_partition":
            return self.cg_partition(args, c)
        if name in ("sync", "thread_rank", "group_size"):
            return self.cg_typed(fn, self.cg_member(_class_name(args[0].type), {"group_size": "size"}.get(name, name),
                                                    args[0], [], c, discard))
        if name == "reduce":
            return self.cg_reduce(args, c)
        raise self.error(f"cooperative_groups::{name} is not supported", c)

    def cg_typed(self, fn: ci.Cursor, v: Value | None) -> Value | None:
        """``v`` in the result type the header declares (``unsigned long long`` for a thread_group's rank)."""
        st = tm.scalar_type(fn.result_type)
        return convert(v, st) if isinstance(v, n.Expr) and st is not None else v

    # ------------------------------------------------------------------ groups
    def cg_group(self, a: ci.Cursor) -> Aggregate:
        kind = _class_name(a.type)
        if kind in _REFUSED:
            raise self.error(_REFUSED[kind], a)
        v = self.expr(a)
        if not isinstance(v, Aggregate) or set(v.fields) != {_SIZE, _META_RANK, _META_SIZE}:
            raise self.error("expected a cooperative group", a)
        return v

    def cg_aggregate(self, size: n.Expr, meta_rank: n.Expr, meta_size: n.Expr, c: ci.Cursor) -> Aggregate:
        return Aggregate({_SIZE: size, _META_RANK: meta_rank, _META_SIZE: meta_size}, c.type.spelling)

    def cg_block_threads(self) -> n.Expr:
        bx, by, bz = (n.BlockDim(d) for d in range(3))
        return n.Binary("mul", n.Binary("mul", bx, by), bz)

    def cg_linear_tid(self) -> n.Expr:
        tx, ty, tz = (n.ThreadIdx(d) for d in range(3))
        bx, by = n.BlockDim(0), n.BlockDim(1)
        return n.Binary("add", tx, n.Binary("mul", bx, n.Binary("add", ty, n.Binary("mul", by, tz))))

    def cg_rank(self, kind: str, t: ci.Type, group: Aggregate) -> n.Expr:
        """The thread's rank in the group: the linear thread index in the block, modulo a tile's size."""
        tid = self.cg_linear_tid()
        if kind == "thread_block":
            return tid
        size = _tile_size(t)
        if size is not None:
            return n.Binary("band", tid, n.Const(size - 1, U32))
        return n.Binary("rem", tid, group.fields[_SIZE])  # type: ignore[arg-type]

    def cg_size(self, kind: str, t: ci.Type, group: Aggregate) -> n.Expr:
        if kind == "thread_block":
            return self.cg_block_threads()
        size = _tile_size(t)
        return n.Const(size, U32) if size is not None else group.fields[_SIZE]  # type: ignore[return-value]

    def cg_partition(self, args: list[ci.Cursor], c: ci.Cursor) -> Aggregate:
        parent_c = args[0]
        static = _tile_size(c.type)
        if static is not None:
            if static < 1 or static > 32 or static & (static - 1):
                raise self.error(f"tiled_partition<{static}>: tiles of more than 32 threads or of a size that is not "
                                 "a power of two are not supported", c)
            size: n.Expr = n.Const(static, U32)
        else:
            if len(args) != 2:
                raise self.error("tiled_partition takes a group and a tile size", c)
            k = evaluate(args[1])
            if not isinstance(k, int) or k < 1 or k > 32 or k & (k - 1):
                raise self.error("tiled_partition(group, n): n must be a constant power of two from 1 to 32 "
                                 "(other tile sizes are not supported)", args[1])
            size = n.Const(k, U32)
        parent = self.cg_group(parent_c)
        kind = _class_name(parent_c.type)
        rank = self.cg_rank(kind, parent_c.type, parent)
        psize = self.cg_size(kind, parent_c.type, parent)
        meta_size = n.Binary("div", n.Binary("add", psize, n.Binary("sub", size, n.Const(1, U32))), size)
        return self.cg_aggregate(size, n.Binary("div", rank, size), meta_size, c)

    # ------------------------------------------------------------------ member functions
    def cg_member(self, kind: str, name: str, base: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor,
                  discard: bool) -> Value | None:
        if kind in _REFUSED:
            raise self.error(_REFUSED[kind], c)
        group = self.cg_group(base)
        t = base.type
        loc = self.loc(c)
        if name == "sync":
            if not discard:
                raise self.error("sync() has no value", c)
            self.emit(n.Barrier(loc=loc))
            return None
        if name == "thread_rank":
            return self.cg_rank(kind, t, group)
        if name in ("size", "num_threads"):
            return self.cg_size(kind, t, group)
        if name == "meta_group_rank":
            return group.fields[_META_RANK]
        if name == "meta_group_size":
            return group.fields[_META_SIZE]
        if name in ("group_index", "thread_index", "group_dim", "dim_threads"):
            make = {"group_index": n.BlockIdx, "thread_index": n.ThreadIdx}.get(name, n.BlockDim)
            vals = [make(d) for d in range(3)]
            return Aggregate({".x": vals[0], ".y": vals[1], ".z": vals[2]}, "dim3")
        size = _tile_size(t)
        if size is None:
            raise self.error(f"cooperative_groups::{kind}::{name} is not supported", c)
        if name in _SHUFFLES:
            value = self.expr(args[0])
            lane = convert(self.scalar(args[1]), U32 if name != "shfl" else I32)
            if isinstance(value, Aggregate):
                # A record (`tile.shfl_xor(v, 1)` of a uint4): cooperative groups shuffle any
                # trivially copyable type word by word from one source lane, which is each
                # member shuffled from that lane.
                fields: dict[str, Value] = {}
                for path, member in value.fields.items():
                    if not isinstance(member, n.Expr):
                        raise self.error(f"a shuffle of a record with a member '{path}' that is not a number "
                                         "is not supported", c)
                    fields[path] = self.cg_shuffle(_SHUFFLES[name], member, lane, size, c)
                return Aggregate(fields, value.spelling)
            if not isinstance(value, n.Expr):
                raise self.error(f"cooperative_groups::{kind}::{name} of this kind of value is not supported", c)
            return self.cg_shuffle(_SHUFFLES[name], value, lane, size, c)
        if name in ("any", "all", "ballot"):
            return self.cg_vote(name, truth(self.scalar(args[0])), size, c)
        raise self.error(f"cooperative_groups::{kind}::{name} is not supported", c)

    def cg_tile_mask(self, size: int) -> tuple[n.Expr, n.Expr]:
        """The tile's lanes as a warp mask, and its first lane in the warp."""
        lane = n.Binary("band", self.cg_linear_tid(), n.Const(31, U32))
        first = n.Binary("band", lane, n.Const(~(size - 1) & 0xFFFFFFFF, U32))
        if size == 32:
            return n.Const(0xFFFFFFFF, U32), first
        return n.Binary("shl", n.Const((1 << size) - 1, U32), first), first

    def cg_shuffle(self, mode: str, value: n.Expr, lane: n.Expr, size: int, c: ci.Cursor) -> n.Expr:
        mask, _ = self.cg_tile_mask(size)
        dest = self.temp(value.type, None, "shfl", c)
        self.emit(n.Shuffle(dest.name, mode, value, lane, n.Const(size, I32), mask, loc=self.loc(c)))
        return n.Var(dest.name, dest.type)

    def cg_vote(self, mode: str, pred: n.Expr, size: int, c: ci.Cursor) -> n.Expr:
        mask, first = self.cg_tile_mask(size)
        dt = U32 if mode == "ballot" else I32
        dest = self.temp(dt, None, "vote", c)
        self.emit(n.Vote(dest.name, mode, pred, mask, loc=self.loc(c)))
        result: n.Expr = n.Var(dest.name, dt)
        if mode == "ballot" and size < 32:
            result = n.Binary("shr", result, first)
        return result

    # ------------------------------------------------------------------ reduce
    def cg_combine(self, op: str, a: n.Expr, b: n.Expr, c: ci.Cursor) -> n.Expr:
        """``op(a, b)`` of cg::plus (a + b), cg::less (a < b ? a : b), cg::greater (a < b ? b : a)
        and the bit operators."""
        loc = self.loc(c)
        if op == "min":
            return n.Select(n.Binary("lt", a, b, loc=loc), a, b, loc=loc)
        if op == "max":
            return n.Select(n.Binary("lt", a, b, loc=loc), b, a, loc=loc)
        return n.Binary(op, a, b, loc=loc)

    def cg_reduce(self, args: list[ci.Cursor], c: ci.Cursor) -> n.Expr:
        group_c, value_c, op_c = args
        size = _tile_size(group_c.type)
        if size is None:
            raise self.error(f"cg::reduce over a {_class_name(group_c.type)}: only thread_block_tile groups "
                             "are supported", group_c)
        self.cg_group(group_c)
        op_decl = tm.strip_reference(op_c.type).get_canonical().get_declaration()
        op_name = op_decl.spelling.split("<")[0]
        if not is_cooperative(op_decl) or op_name not in _REDUCE_OPS:
            raise self.error("cg::reduce: only the operators cg::plus, cg::less, cg::greater, cg::bit_and, "
                             "cg::bit_or and cg::bit_xor are supported", op_c)
        self.expr(op_c, discard=True)
        rt = tm.scalar_type(c.type)
        if rt is None:
            raise self.error("cg::reduce of a value that is not a number is not supported", value_c)
        op_type = tm.strip_reference(op_c.type).get_canonical()
        if op_type.get_num_template_arguments() != 1 or \
                op_type.get_template_argument_type(0).get_canonical() != tm.strip_reference(c.type).get_canonical():
            # CUDA computes in the operator's type (reduce returns decltype(op(v, v))).
            raise self.error(f"cg::reduce of a '{tm.strip_reference(value_c.type).spelling}' with "
                             f"'{op_type.spelling}': an operator of another type than the value is not supported",
                             op_c)
        loc = self.loc(c)
        acc = self.temp(rt, convert(self.scalar(value_c), rt), "reduce", c)
        op = _REDUCE_OPS[op_name]
        if rt.is_float and op in ("band", "bor", "bxor"):
            raise self.error(f"cg::reduce with cg::{op_name} of floating-point values", op_c)
        k = size // 2
        while k >= 1:
            other = self.cg_shuffle("xor", n.Var(acc.name, rt), n.Const(k, U32), size, c)
            self.emit(n.Assign(acc.name, self.cg_combine(op, n.Var(acc.name, rt), other, c), loc=loc))
            k //= 2
        return n.Var(acc.name, rt)
