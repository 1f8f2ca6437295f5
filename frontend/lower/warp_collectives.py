"""Volta's warp collectives, written with the IR's warp shuffles and votes.

* ``__reduce_{add,min,max,and,or,xor}_sync(mask, v)``: every lane gets the reduction of ``v``
  over the warp: five butterfly steps ``v = op(v, shfl_xor(v, 16 .. 1))``. Exact: on integers
  these operations are associative and commutative (``add`` modulo 2^32), so the order of the
  tree changes nothing; ``min``/``max`` compare as the value's type (signed for ``int``).
* ``__match_any_sync(mask, v)``: the lanes whose ``v`` has the same bits as this lane's (floats
  compare as bits, as the PTX ``match`` instruction does): 32 ``shfl_idx`` reads, one per lane.
* ``__match_all_sync(mask, v, &pred)``: ``mask`` when every lane's ``v`` has lane 0's bits (and
  ``pred`` = 1), else 0 (and ``pred`` = 0): one ``shfl_idx`` and one ``__all_sync``.

The butterfly is for the full warp (``mask`` a constant 0xffffffff: all 32 lanes take part,
as CUDA then requires, and the shuffles check that they do). A reduction with another mask (a
partial constant, or one computed at run time such as ``0xffffffff >> n``) takes the mask's
lanes' values one ``shfl_idx`` per lane of the warp, reading only the lanes the mask names, so
a lane named in the mask that does not execute the call is a fault in the emulator as for
``__shfl_sync``; every lane that executes it gets the reduction over the mask's lanes (CUDA
leaves the call undefined on a lane outside its mask). The match functions keep the full warp
only; another mask is refused at the call. The shuffles and votes inherit the backends' and the
emulator's exact warp semantics.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.mathfns import is_bit_cast
from polypy.ir.types import I32, I64, U32, ScalarType

from frontend import ctypes_map as tm
from frontend.arith import convert, truth
from frontend.clang_setup import evaluate
from frontend.lower.cooperative import cg_reduce_coalesced

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder

FULL_MASK = 0xFFFFFFFF
REDUCTIONS = {"__reduce_add_sync": "add", "__reduce_min_sync": "min", "__reduce_max_sync": "max",
              "__reduce_and_sync": "band", "__reduce_or_sync": "bor", "__reduce_xor_sync": "bxor"}
WARP_COLLECTIVES = frozenset(REDUCTIONS) | {"__match_any_sync", "__match_all_sync"}


def warp_collective(b: KernelBuilder, name: str, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor) -> n.Expr:
    loc = b.loc(c)
    mask = evaluate(args[0])
    full_warp = mask is not None and not isinstance(mask, float) and (mask & FULL_MASK) == FULL_MASK
    if not full_warp and name not in REDUCTIONS:
        raise b.error(f"{name} is supported with the full-warp mask 0xffffffff only (a constant): another mask "
                      "leaves lanes out, which polypy does not translate", args[0])
    params = list(fn.get_arguments())
    vtype = tm.scalar_type(params[1].type)
    if vtype is None:
        raise b.error(f"unsupported use of '{name}'", c)
    lanes = None if full_warp else b.temp(U32, convert(b.scalar(args[0]), U32), "mask", args[0])
    value = convert(b.scalar(args[1]), vtype)
    full = n.Const(FULL_MASK, U32, loc=loc)

    def shuffle(mode: str, v: n.Expr, lane: int) -> n.Expr:
        dest = b.temp(v.type, None, "shfl", c)
        b.emit(n.Shuffle(dest.name, mode, v, n.Const(lane, I32), n.Const(32, I32), full, loc=loc))
        return n.Var(dest.name, v.type, loc=loc)

    let = b.binder(c)

    if name in REDUCTIONS:
        op = REDUCTIONS[name]
        acc = let(value, "red")
        if lanes is not None:  # the lanes of a run-time or partial mask, one shuffle per lane of the warp
            return cg_reduce_coalesced(b, op, acc.name, vtype, n.Var(lanes.name, U32, loc=loc), c)
        for step in (16, 8, 4, 2, 1):
            other = shuffle("xor", acc, step)
            if op == "min":
                combined: n.Expr = n.Select(n.Binary("lt", other, acc, loc=loc), other, acc, loc=loc)
            elif op == "max":
                combined = n.Select(n.Binary("lt", acc, other, loc=loc), other, acc, loc=loc)
            else:
                combined = n.Binary(op, acc, other, loc=loc)
            acc = let(combined, "red")
        return acc
    bits = let(_bits(value), "match")
    if name == "__match_any_sync":
        found: n.Expr = n.Const(0, U32, loc=loc)
        for lane in range(32):
            same = n.Binary("eq", shuffle("idx", bits, lane), bits, loc=loc)
            bit = n.Select(same, n.Const(1 << lane, U32), n.Const(0, U32), loc=loc)
            found = let(n.Binary("bor", found, bit, loc=loc), "match")
        return found
    first = shuffle("idx", bits, 0)
    dest = b.temp(I32, None, "vote", c)
    b.emit(n.Vote(dest.name, "all", n.Binary("eq", first, bits, loc=loc), full, loc=loc))
    all_same = truth(n.Var(dest.name, I32, loc=loc))
    pred_lv = b.deref(b.expr(args[2]), c)
    b.assign(pred_lv, convert(all_same, I32), c)
    return n.Select(all_same, full, n.Const(0, U32), loc=loc)


def _bits(value: n.Expr) -> n.Expr:
    """An integer with ``value``'s bits (itself for integers)."""
    t: ScalarType = value.type
    if not t.is_float:
        return value
    target = I32 if t.bits == 32 else I64
    assert is_bit_cast(t, target)
    return n.Call("bitcast", (value,), target, loc=value.loc)

