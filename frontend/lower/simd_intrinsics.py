"""CUDA's SIMD-in-word intrinsics (``__vadd4``, ``__vabsdiffu2``...), written with the IR's shifts,
masks and selects, one lane at a time.

An ``unsigned int`` holds two 16-bit lanes (the ``...2`` forms) or four 8-bit lanes (``...4``),
lane ``k`` in bits ``[w k, w (k + 1))``. Each intrinsic computes every lane from the same lane of
its operands (the CUDA Math API's "SIMD intrinsics", as the PTX ``vadd4``... instructions define
them), and every one is exact, so every backend and the emulator compute it alike:

- ``__vadd``/``__vsub``: the lanes added or subtracted modulo 2^w; ``__vaddss``/``__vsubss``
  as signed lanes saturated to [-2^(w-1), 2^(w-1) - 1], ``__vaddus``/``__vsubus`` as unsigned ones
  saturated to [0, 2^w - 1];
- ``__vabsdiffs``/``__vabsdiffu``: |a - b| of signed / unsigned lanes (modulo 2^w);
  ``__vabs``/``__vabsss``: |a| of signed lanes (modulo 2^w / saturated); ``__vneg``/``__vnegss``:
  -a (modulo 2^w / saturated);
- ``__vavgu``: (a + b + 1) >> 1 and ``__vhaddu``: (a + b) >> 1 of unsigned lanes;
- ``__vmaxs``/``__vmaxu``/``__vmins``/``__vminu``: the larger / smaller lane;
- ``__vcmpXX``: all ones where the comparison holds, else 0; ``__vsetXX``: 1 or 0 (``eq``, ``ne``,
  and signed ``ges gts les lts`` / unsigned ``geu gtu leu ltu``);
- ``__vsads``/``__vsadu``: the sum over the lanes of |a - b| (signed / unsigned lanes), a number.

Each lane is computed in ``i32`` (operands at most 16 bits wide: no overflow) and masked back.
"""
from __future__ import annotations

from typing import Callable

from polypy.errors import Loc
from polypy.ir import nodes as n
from polypy.ir.types import I32, U32

from frontend.arith import convert

_BINARY = ("add", "sub", "addss", "subss", "addus", "subus", "absdiffs", "absdiffu", "avgu", "haddu",
           "maxs", "maxu", "mins", "minu", "sads", "sadu")
_UNARY = ("abs", "absss", "neg", "negss")
_COMPARE = ("eq", "ne", "ges", "geu", "gts", "gtu", "les", "leu", "lts", "ltu")
_SIGNED = frozenset(("addss", "subss", "absdiffs", "maxs", "mins", "sads") + _UNARY)

_NAMES: dict[str, tuple[str, int]] = {}
for _lanes in (2, 4):
    for _op in _BINARY + _UNARY:
        _NAMES[f"__v{_op}{_lanes}"] = (_op, _lanes)
    for _op in _COMPARE:
        _NAMES[f"__vcmp{_op}{_lanes}"] = ("cmp" + _op, _lanes)
        _NAMES[f"__vset{_op}{_lanes}"] = ("set" + _op, _lanes)

# name -> number of operands
SIMD_INTRINSICS: dict[str, int] = {name: 1 if op in _UNARY else 2 for name, (op, _) in _NAMES.items()}

Let = Callable[[n.Expr, str], n.Expr]


def simd_intrinsic(name: str, args: list[n.Expr], let: Let, loc: Loc | None) -> n.Expr:
    """The IR of ``name(args...)`` (``name`` in ``SIMD_INTRINSICS``); ``let(e, base)`` binds ``e``
    to a fresh variable and returns it."""
    op, lanes = _NAMES[name]
    width = 32 // lanes
    mask = (1 << width) - 1
    half = 1 << (width - 1)

    def b(o: str, x: n.Expr, y: n.Expr | int) -> n.Expr:
        return n.Binary(o, x, y if isinstance(y, n.Expr) else n.Const(y, x.type), loc=loc)

    def sel(c: n.Expr, x: n.Expr | int, y: n.Expr | int) -> n.Expr:
        x = x if isinstance(x, n.Expr) else n.Const(x, I32)
        y = y if isinstance(y, n.Expr) else n.Const(y, I32)
        return n.Select(c, x, y, loc=loc)

    def clamp(v: n.Expr, lo: int, hi: int) -> n.Expr:
        v = let(v, "vl")
        return sel(b("lt", v, lo), lo, sel(b("gt", v, hi), hi, v))

    def lane(word: n.Expr, k: int, signed: bool) -> n.Expr:
        bits = convert(b("band", b("shr", word, width * k), mask), I32)
        return b("sub", b("bxor", bits, half), half) if signed else bits  # sign-extended from w bits

    words = [let(convert(a, U32), "vw") for a in args]
    total: n.Expr | None = None
    for k in range(lanes):
        signed = op in _SIGNED or (op.startswith(("cmp", "set")) and op[3:] in ("ges", "gts", "les", "lts"))
        x = let(lane(words[0], k, signed), "va")
        y = let(lane(words[1], k, signed), "vb") if len(words) > 1 else None
        v = _lane_value(op, x, y, width, b, sel, clamp)
        if op in ("sads", "sadu"):
            total = v if total is None else b("add", total, v)
            continue
        placed = b("shl", b("band", convert(v, U32), mask), width * k)
        total = placed if total is None else b("bor", total, placed)
    assert total is not None
    return convert(total, U32)


def _lane_value(op: str, x: n.Expr, y: n.Expr | None, width: int, b, sel, clamp) -> n.Expr:
    """One lane's result (before masking) from lanes ``x`` and ``y`` (``i32``)."""
    lo, hi, top = -(1 << (width - 1)), (1 << (width - 1)) - 1, (1 << width) - 1
    if op == "abs":
        return sel(b("lt", x, 0), b("sub", n.Const(0, I32), x), x)
    if op == "absss":
        return clamp(sel(b("lt", x, 0), b("sub", n.Const(0, I32), x), x), lo, hi)
    if op == "neg":
        return b("sub", n.Const(0, I32), x)
    if op == "negss":
        return clamp(b("sub", n.Const(0, I32), x), lo, hi)
    assert y is not None
    if op == "add":
        return b("add", x, y)
    if op == "sub":
        return b("sub", x, y)
    if op == "addss":
        return clamp(b("add", x, y), lo, hi)
    if op == "subss":
        return clamp(b("sub", x, y), lo, hi)
    if op == "addus":
        return clamp(b("add", x, y), 0, top)
    if op == "subus":
        return clamp(b("sub", x, y), 0, top)
    if op in ("absdiffs", "absdiffu", "sads", "sadu"):
        return sel(b("gt", x, y), b("sub", x, y), b("sub", y, x))
    if op == "avgu":
        return b("shr", b("add", b("add", x, y), 1), 1)
    if op == "haddu":
        return b("shr", b("add", x, y), 1)
    if op in ("maxs", "maxu"):
        return sel(b("gt", x, y), x, y)
    if op in ("mins", "minu"):
        return sel(b("lt", x, y), x, y)
    relation = {"eq": "eq", "ne": "ne", "ge": "ge", "gt": "gt", "le": "le", "lt": "lt"}[op[3:5]]
    return sel(b(relation, x, y), top if op.startswith("cmp") else 1, 0)
