"""Warp shuffles, transposed: the reverse of ``dest = shfl.<mode>(value, arg, width)``.

Forward, each lane reads ``value`` from a source lane (``polypy.emulator.warps`` spells out the
rules); in reverse each lane must receive the sum of the cotangents of the lanes that read it.
``down`` and ``up`` are each other's transpose and ``xor`` its own, except at segment edges and
where a lane did not take part, so the transpose is built from the definition: a lane is read
by at most its mirror lane and itself, and the mirror's cotangent is fetched with an ``idx``
shuffle, only when the mirror executed the shuffle (``__activemask``). ``idx`` (gathers and
broadcasts: many readers per lane) becomes a loop over the 32 lanes of the warp.
"""
from __future__ import annotations

from autodiff import build as b
from autodiff.names import Names
from autodiff.shadows import linear_tid
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import BOOL, I32, U32


def transpose_shuffle(mode: str, ct: n.Expr, lane_arg: n.Expr, width: n.Expr, mask: n.Expr, names: Names,
                      loc) -> tuple[list[n.Stmt], n.Expr]:
    """Statements computing, in each lane, the sum of ``ct`` over the lanes that read it.

    Forward ``dest = shfl.<mode>(value, arg, width)`` reads ``value`` of a source lane; the
    transpose sends each lane's cotangent back to its source. For ``up``/``down``/``xor`` a lane
    is read by at most one other lane (its mirror) and possibly by itself (when its own source
    falls outside its segment); the mirror's contribution is fetched with an ``idx`` shuffle,
    only from lanes that executed the shuffle (``__activemask``). For ``idx`` (any permutation or
    broadcast) every lane gathers, over the 32 lanes of the warp, the cotangents of those whose
    source it is.
    """
    ty = ct.type
    out: list[n.Stmt] = []

    def decl(base: str, value: n.Expr) -> n.Var:
        name = names.fresh(base)
        out.append(n.Decl(name, value.type, value, loc=loc))
        return n.Var(name, value.type)

    cv = decl("shfl_ct", ct) if not isinstance(ct, n.Var) else ct
    lane = decl("lane", n.Binary("band", linear_tid(), b.const(31, U32)))
    w = decl("width", b.cast(U32, width))
    seg = decl("seg", n.Binary("band", lane, n.Unary("bnot", n.Binary("sub", w, b.const(1, U32)))))
    am = names.fresh("active")
    out.append(n.Decl(am, U32))
    out.append(n.Vote(am, "activemask", n.Const(True, BOOL), b.const(0xFFFFFFFF, U32), loc=loc))
    active = n.Var(am, U32)

    def lane_active(x: n.Expr) -> n.Expr:
        return b.cmp("ne", n.Binary("band", n.Binary("shr", active, x), b.const(1, U32)), b.const(0, U32))

    arg = decl("delta", b.cast(U32, lane_arg))
    if mode in ("down", "up", "xor"):
        if mode == "down":
            own = b.cmp("ge", n.Binary("add", n.Binary("sub", lane, seg), arg), w)
            mirror = n.Binary("sub", lane, arg)
            valid = b.cmp("ge", n.Binary("sub", lane, seg), arg)
        elif mode == "up":
            own = b.cmp("lt", n.Binary("sub", lane, seg), arg)
            mirror = n.Binary("add", lane, arg)
            valid = b.cmp("lt", n.Binary("add", n.Binary("sub", lane, seg), arg), w)
        else:
            own = b.cmp("ge", n.Binary("bxor", lane, arg), n.Binary("add", seg, w))
            mirror = n.Binary("bxor", lane, arg)
            mirror_seg = n.Binary("band", mirror, n.Unary("bnot", n.Binary("sub", w, b.const(1, U32))))
            valid = b.cmp("lt", lane, n.Binary("add", mirror_seg, w))
        mv = decl("mirror", mirror)
        ok = decl("mirror_ok", b.land(b.land(valid, b.cmp("lt", mv, b.const(32, U32))), lane_active(mv)))
        src = decl("src", b.select(ok, mv, lane))
        got = names.fresh("shfl_back")
        out.append(n.Decl(got, ty))
        out.append(n.Shuffle(got, "idx", cv, src, b.const(32, I32), mask, loc=loc))
        total = b.add(b.select(ok, n.Var(got, ty), b.zero(ty)), b.select(own, cv, b.zero(ty)))
        return out, decl("shfl_adj", total)
    if mode != "idx":
        raise UserError(f"no transpose for shuffle mode {mode!r}", loc)
    # idx: lane j read seg_j + (arg_j mod w_j); gather from every active lane.
    my_src = decl("my_src", n.Binary("add", seg, n.Binary("band", arg, n.Binary("sub", w, b.const(1, U32)))))
    acc = decl("shfl_acc", b.zero(ty))
    j = names.fresh("j")
    jv = n.Var(j, U32)
    cj, sj = names.fresh("ct_j"), names.fresh("src_j")
    inner = (
        n.Decl(cj, ty), n.Decl(sj, U32),
        n.Shuffle(cj, "idx", cv, jv, b.const(32, I32), mask, loc=loc),
        n.Shuffle(sj, "idx", my_src, jv, b.const(32, I32), mask, loc=loc),
        n.If(b.cmp("eq", n.Var(sj, U32), lane), (n.Assign(acc.name, b.add(acc, n.Var(cj, ty))),)),
    )
    out.append(n.For(j, U32, b.const(0, U32), b.const(32, U32), b.const(1, U32),
                     (n.If(lane_active(jv), inner),), loc=loc))
    return out, acc
