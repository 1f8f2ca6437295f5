"""``cg::inclusive_scan(g, v[, op])`` and ``cg::exclusive_scan(g, v[, op])`` (``<cooperative_groups/scan.h>``).

CUDA's meaning (Programming Guide, "Cooperative Groups", "scan"): the thread of rank ``r`` of
the group gets ``op`` applied over the values of the members of ranks ``0..r`` (inclusive) or
``0..r-1`` (exclusive); ``op`` is ``cg::plus`` when omitted. CUDA does not say in which order
the values are combined; polypy combines them in rank order, the lowest first
(``((v0 op v1) op v2) ...``), one of the orders CUDA allows (the order matters only to float
sums and to an operator that is not associative, which CUDA does not support). The exclusive
scan's result for the member of rank 0: CUDA gives ``0`` with ``cg::plus`` and leaves it
undefined for the other operators; polypy gives the value-initialized result (``0``) for every
operator, one of the values CUDA may give.

How it runs (``v`` the thread's value, ``r`` its rank)::

    tile of N <= 32 threads   for (j = 0; j < N; ++j) { x = tile.shfl(v, in(j) ? j : r);
    coalesced group (N = 32,                            if (in(j)) { s = first ? x : op(s, x); first = 0; } }
    lanes instead of ranks)   in(j): j < r (exclusive), j <= r (inclusive); for a coalesced
                              group j a member's lane, r this thread's lane
    tile of N > 32 threads    scratch[t] = v; block barrier; the same loop reading scratch[t - r + j];
                              block barrier (the barrier rules apply, as to cg::reduce)

A shuffle never reads a lane above the thread's own, so a last tile the block cuts short scans
the threads it has. ``op`` is one of ``cg::plus``, ``cg::less``, ``cg::greater``, ``cg::bit_and``,
``cg::bit_or``, ``cg::bit_xor`` of the value's type, or a lambda (not generic, not ``mutable``:
CUDA does not say how often nor in which order it is called) whose call is inlined where the
values are combined.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import BOOL, I32, U32

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.lower import inlining
from frontend.lower.context import CK
from frontend.lower.groups import (
    MASK, MAX_TILE, WARP, cg_group, cg_linear_tid, cg_tile_mask, class_name, is_cooperative, tile_size,
)
from frontend.values import Closure

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder

SCANS = ("inclusive_scan", "exclusive_scan")
_OPS = {"plus": "add", "less": "min", "greater": "max", "bit_and": "band", "bit_or": "bor", "bit_xor": "bxor"}


def cg_scan(kb: KernelBuilder, name: str, args: list[ci.Cursor], c: ci.Cursor) -> n.Expr:
    if len(args) not in (2, 3):
        raise kb.error(f"cg::{name} takes a group, a value and optionally an operator", c)
    group_c, value_c = args[0], args[1]
    op_c = args[2] if len(args) == 3 else None
    kind = class_name(group_c.type)
    size = tile_size(group_c.type)
    if size is None and kind != "coalesced_group":
        raise kb.error(f"cg::{name} over a {kind}: only thread_block_tile and coalesced_group groups are "
                       "supported", group_c)
    group = cg_group(kb, group_c)
    rt = tm.scalar_type(c.type)
    vt = tm.scalar_type(tm.strip_reference(value_c.type))
    if rt is None or vt is None or rt == BOOL:
        raise kb.error(f"cg::{name} of a value that is not a number is not supported", value_c)
    combine = _operator(kb, name, op_c, value_c, rt)
    loc = kb.loc(c)
    value = kb.temp(rt, convert(kb.scalar(value_c), rt), "scan_in", c)
    inclusive = name == "inclusive_scan"
    result = kb.temp(rt, convert(n.Const(0, I32), rt), "scan", c)  # an exclusive scan's rank 0 keeps 0
    first = kb.temp(BOOL, n.Const(True, BOOL), "scan_first", c)
    j = kb.names.fresh("j")
    jv = n.Var(j, U32)
    x = kb.names.fresh("scan_x")
    xv = n.Var(x, rt)
    tid = cg_linear_tid(kb)
    lane = n.Binary("band", tid, n.Const(WARP - 1, U32))
    cmp = "le" if inclusive else "lt"
    if size is not None and size > WARP:
        scratch = kb.names.fresh("cg_scan")
        kb.buffers[scratch] = n.Buffer(scratch, rt, (n.Const(MAX_TILE, I32),), "shared", loc=loc)
        kb.emit(n.Store(scratch, (tid,), n.Var(value.name, rt), loc=loc))
        kb.emit(n.Barrier(loc=loc))
        rank = n.Binary("band", tid, n.Const(size - 1, U32))
        start = n.Binary("sub", tid, rank)
        taken = n.Binary(cmp, jv, rank)
        fetch: list[n.Stmt] = [n.Decl(x, rt, None, loc=loc)]
        read: list[n.Stmt] = [n.Assign(x, n.Load(scratch, (n.Binary("add", start, jv),), rt, loc=loc), loc=loc)]
        trips = size
    else:
        if size is not None:
            mask, _ = cg_tile_mask(kb, size)
            rank = n.Binary("band", tid, n.Const(size - 1, U32))
            taken = n.Binary(cmp, jv, rank)
            width, trips = size, size
        else:
            mask = group.fields[MASK]  # type: ignore[assignment]
            assert isinstance(mask, n.Expr)
            member = n.Binary("ne", n.Binary("band", n.Binary("shr", mask, jv), n.Const(1, U32)), n.Const(0, U32))
            taken = n.Binary("land", member, n.Binary(cmp, jv, lane))
            rank, width, trips = lane, WARP, WARP
        if size is None and not isinstance(mask, (n.Var, n.Const)):  # a coalesced group's: read once
            mask = n.Var(kb.temp(U32, convert(mask, U32), "scan_lanes", c).name, U32)
        # (a tile's mask stays the expression the tile's shuffles have: a constant one, the full
        # warp, keeps such a scan refused in a loop whose trips differ between threads)
        fetch = [n.Decl(x, rt, None, loc=loc),
                 n.Shuffle(x, "idx", n.Var(value.name, rt), convert(n.Select(taken, jv, rank), I32),
                           n.Const(width, I32), mask, loc=loc)]
        read = []
    rv, fv = n.Var(result.name, rt), n.Var(first.name, BOOL)
    with kb.sub_block() as combined:
        both = combine(rv, xv)
    step = n.If(taken, (*read, n.If(fv, (n.Assign(result.name, xv, loc=loc),),
                                    (*combined, n.Assign(result.name, convert(both, rt), loc=loc)), loc=loc),
                        n.Assign(first.name, n.Const(False, BOOL), loc=loc)), loc=loc)
    kb.emit(n.For(j, U32, n.Const(0, U32), n.Const(trips, U32), n.Const(1, U32), (*fetch, step), loc=loc))
    if size is not None and size > WARP:
        kb.emit(n.Barrier(loc=loc))  # the scratch may be written again by a later scan
    return rv


def _operator(kb: KernelBuilder, name: str, op_c: ci.Cursor | None, value_c: ci.Cursor, rt):
    """``combine(a, b)``: the operator's ``op(a, b)`` as IR (a lambda's body emitted where it is called)."""
    if op_c is None:
        return lambda a, b: n.Binary("add", a, b)
    op_type = tm.strip_reference(op_c.type).get_canonical()
    op_decl = op_type.get_declaration()
    op_name = op_decl.spelling.split("<")[0]
    if is_cooperative(op_decl):
        if op_name not in _OPS:
            raise kb.error(f"cg::{name} with cooperative_groups::{op_name}: only cg::plus, cg::less, cg::greater, "
                           "cg::bit_and, cg::bit_or, cg::bit_xor and lambdas are supported", op_c)
        if op_type.get_num_template_arguments() != 1 or op_type.get_template_argument_type(0).get_canonical() != \
                tm.strip_reference(value_c.type).get_canonical():
            raise kb.error(f"cg::{name} of a '{tm.strip_reference(value_c.type).spelling}' with "
                           f"'{op_type.spelling}': an operator of another type than the value is not supported", op_c)
        if rt.is_float and _OPS[op_name] in ("band", "bor", "bxor"):
            raise kb.error(f"cg::{name} with cg::{op_name} of floating-point values", op_c)
        kb.expr(op_c, discard=True)
        op = _OPS[op_name]
        if op == "min":
            return lambda a, b: n.Select(n.Binary("lt", a, b), a, b)
        if op == "max":
            return lambda a, b: n.Select(n.Binary("lt", a, b), b, a)
        return lambda a, b: n.Binary(op, a, b)
    closure = kb.expr(op_c)
    if not isinstance(closure, Closure):
        raise kb.error(f"cg::{name} with an operator of type '{op_type.spelling}': only cg::plus, cg::less, "
                       "cg::greater, cg::bit_and, cg::bit_or, cg::bit_xor and lambdas are supported", op_c)
    if closure.mutable or closure.owned:
        raise kb.error(f"cg::{name} with a mutable lambda: CUDA does not say how often nor in which order the "
                       "scan calls it", op_c)
    operator = closure.operator
    if operator.kind != CK.CXX_METHOD:
        raise kb.error(f"cg::{name} with a generic lambda is not supported (give its parameters types)", op_c)
    params = list(operator.get_arguments())
    if len(params) != 2:
        raise kb.error(f"cg::{name}: the operator must take two values", op_c)
    kinds = []
    for p in params:
        pt = p.type
        if tm.is_reference(pt) and not tm.strip_reference(pt).is_const_qualified():
            raise kb.error(f"cg::{name} with a lambda whose parameter '{p.spelling}' is a non-const reference: "
                           "CUDA passes it values", p)
        st = tm.scalar_type(tm.strip_reference(pt))
        if st is None:
            raise kb.error(f"cg::{name} with a lambda whose parameter '{p.spelling}' is not a number", p)
        kinds.append((p.spelling or "arg", st))

    def call(a: n.Expr, b: n.Expr) -> n.Expr:
        bound = [kb.temp(st, convert(v, st), pname, op_c) for (pname, st), v in zip(kinds, (a, b))]
        got = inlining.inline(kb, operator, [], op_c, False, captures=closure.captures, this=closure.this,
                              bound=bound)  # type: ignore[arg-type]
        if not isinstance(got, n.Expr):
            raise kb.error(f"cg::{name}: the operator must return a number", op_c)
        return got
    return call
