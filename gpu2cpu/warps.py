"""Warp operations in serialized thread loops: 32-lane semantics by linear thread id.

A warp is 32 consecutive linear thread ids of a block (``tid / 32``); the last warp of a block
whose size is no multiple of 32 has fewer lanes. After ``serialize_threads`` splits the block at a
warp operation, every thread has stored its operand in an exchange buffer (indexed by linear
thread id) in the thread loop before; here are the statements that start the thread loop after.

Shuffle source lanes, with lanes grouped in segments of ``width`` (CUDA Programming Guide, "Warp
Shuffle Functions"; the same rules as ``polypy.emulator.warps``)::

    idx   src = segment start + (srcLane mod width)
    up    src = lane - delta,    own lane if that leaves the segment downwards
    down  src = lane + delta,    own lane if that leaves the segment upwards
    xor   src = lane ^ laneMask, own lane if that lands in a later segment

A source beyond the block (undefined in CUDA) reads the thread's own slot, so no access leaves
the buffer. Votes read the predicates of the lanes of the thread's warp that execute the vote:
all lanes below ``blockDim`` when every thread runs it, the lanes whose mask bit is set inside a
predicated branch.
"""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.types import BOOL, I32, U32

from gpu2cpu.names import NameSupply

WARP_SIZE = 32


def _u32(e: n.Expr) -> n.Expr:
    return e if e.type == U32 else n.Cast(U32, e)


def _c(value: int) -> n.Const:
    return n.Const(value, U32)


def _b(op: str, a: n.Expr, b: n.Expr) -> n.Binary:
    return n.Binary(op, a, b)


def shuffle_statements(s: n.Shuffle, buf: str, lin: n.Expr, nthreads: n.Expr,
                       names: NameSupply) -> list[n.Stmt]:
    """``dest = buf[source of this thread]`` with the lane arithmetic as named temporaries."""
    loc = s.loc
    lane = names.fresh("lane")
    seg = names.fresh("seg")
    src = names.fresh("src")
    lane_v, seg_v = n.Var(lane, U32), n.Var(seg, U32)
    width = _u32(s.width)
    arg = _u32(s.lane)
    width_m1 = _b("sub", width, _c(1))
    stmts: list[n.Stmt] = [
        n.Decl(lane, U32, _b("band", lin, _c(WARP_SIZE - 1)), loc=loc),
        n.Decl(seg, U32, _b("band", lane_v, n.Unary("bnot", width_m1)), loc=loc),
    ]
    if s.mode == "idx":
        source: n.Expr = _b("add", seg_v, _b("band", arg, width_m1))
    elif s.mode == "up":
        source = n.Select(_b("gt", arg, _b("sub", lane_v, seg_v)), lane_v, _b("sub", lane_v, arg))
    elif s.mode == "down":
        room = _b("sub", _b("add", seg_v, width), lane_v)  # lanes from this one to the segment end
        source = n.Select(_b("ge", arg, room), lane_v, _b("add", lane_v, arg))
    elif s.mode == "xor":
        x = _b("bxor", lane_v, arg)
        source = n.Select(_b("ge", x, _b("add", seg_v, width)), lane_v, x)
    else:
        raise ValueError(f"unknown shuffle mode {s.mode!r}")
    src_v = n.Var(src, U32)
    stmts.append(n.Decl(src, U32, _b("add", _b("sub", lin, lane_v), source), loc=loc))
    index = n.Select(_b("lt", src_v, nthreads), src_v, lin)
    stmts.append(n.Assign(s.dest, n.Load(buf, (index,), s.value.type), loc=loc))
    return stmts


def vote_statements(s: n.Vote, buf: str, mask: str | None, lin: n.Expr, nthreads: n.Expr,
                    names: NameSupply) -> list[n.Stmt]:
    """``dest = ballot/any/all/activemask`` over the active lanes of this thread's warp."""
    loc = s.loc
    base, bits, active, lane = (names.fresh(b) for b in ("warp_base", "vote_bits", "vote_active", "l"))
    base_v, bits_v, active_v, lane_v = (n.Var(x, U32) for x in (base, bits, active, lane))
    other = _b("add", base_v, lane_v)
    bit = _b("shl", _c(1), lane_v)
    count = n.If(n.Load(buf, (other,), BOOL), (n.Assign(bits, _b("bor", bits_v, bit)),))
    take: tuple[n.Stmt, ...] = (n.Assign(active, _b("bor", active_v, bit)), count)
    if mask is not None:
        take = (n.If(n.Load(mask, (other,), BOOL), take),)
    scan = n.For(lane, U32, _c(0), _c(WARP_SIZE), _c(1), (n.If(_b("lt", other, nthreads), take),), loc=loc)
    m = _u32(s.mask)
    if s.mode == "ballot":
        value: n.Expr = _b("band", bits_v, m)
    elif s.mode == "activemask":
        value = active_v
    elif s.mode == "any":
        value = n.Cast(I32, _b("ne", _b("band", bits_v, m), _c(0)))
    elif s.mode == "all":
        value = n.Cast(I32, _b("eq", _b("band", _b("band", active_v, m), n.Unary("bnot", bits_v)), _c(0)))
    else:
        raise ValueError(f"unknown vote mode {s.mode!r}")
    return [
        n.Decl(base, U32, _b("band", lin, _c(~(WARP_SIZE - 1) & 0xFFFFFFFF)), loc=loc),
        n.Decl(bits, U32, _c(0), loc=loc),
        n.Decl(active, U32, _c(0), loc=loc),
        scan,
        n.Assign(s.dest, value, loc=loc),
    ]

