"""CUDA's integer intrinsics, written with the IR's shifts, masks, multiplications and selects.

Each one is exact on every input (the CUDA Math API's integer intrinsics, the PTX instructions
they stand for), so every backend and the emulator compute it without a function of their own:

- ``__popc(ll)``, ``__clz(ll)``, ``__ffs(ll)``: set bits, leading zeros, 1 + the lowest set bit (0 for 0);
- ``__brev(ll)``: the bits in reverse order;
- ``__byte_perm(x, y, s)``: byte ``k`` of the result is byte ``(s >> 4k) & 7`` of the eight bytes
  ``y:x`` (bytes 0-3 from ``x``, 4-7 from ``y``); the other bits of ``s`` are ignored;
- ``__funnelshift_l(lo, hi, s)``: the high 32 bits of ``hi:lo`` shifted left by ``s & 31``;
  ``__funnelshift_lc``: by ``min(s, 32)`` (the "clamp" form); ``__funnelshift_r(_rc)``: the low
  32 bits of ``hi:lo`` shifted right by ``s & 31`` (``min(s, 32)``);
- ``__mulhi``, ``__umulhi``, ``__mul64hi``, ``__umul64hi``: the high half of the full product;
- ``__mul24``, ``__umul24``: the low 32 bits of the product of the low 24 bits of each operand
  (sign-extended for ``__mul24``);
- ``__sad(x, y, z)``, ``__usad``: ``|x - y| + z`` (the difference exact, the sum modulo 2^32);
- ``__hadd``, ``__uhadd``: ``(x + y) >> 1`` and ``__rhadd``, ``__urhadd``: ``(x + y + 1) >> 1``,
  the sum taken without overflow (signed: rounded toward minus infinity by the shift);
- ``__dp4a(a, b, c)``: ``c`` plus the products of the four byte pairs of ``a`` and ``b`` (signed
  bytes for the ``int`` overload, unsigned for the ``unsigned int`` one, ``__dp4a_u`` here),
  modulo 2^32 (summed in ``u32``: two's complement wraps exactly, with no signed overflow in C).

Every shift amount here is a constant below the operand's width or masked into it, so no
backend meets C's undefined shifts.
"""
from __future__ import annotations

from typing import Callable

from polypy.errors import Loc
from polypy.ir import nodes as n
from polypy.ir.types import I32, I64, U32, U64, ScalarType

from frontend.arith import convert

# name -> (parameter types, result type), as CUDA declares them.
INT_INTRINSICS: dict[str, tuple[tuple[ScalarType, ...], ScalarType]] = {
    "__popc": ((U32,), I32), "__popcll": ((U64,), I32),
    "__clz": ((I32,), I32), "__clzll": ((I64,), I32),
    "__ffs": ((I32,), I32), "__ffsll": ((I64,), I32),
    "__brev": ((U32,), U32), "__brevll": ((U64,), U64),
    "__byte_perm": ((U32, U32, U32), U32),
    "__funnelshift_l": ((U32, U32, U32), U32), "__funnelshift_lc": ((U32, U32, U32), U32),
    "__funnelshift_r": ((U32, U32, U32), U32), "__funnelshift_rc": ((U32, U32, U32), U32),
    "__mul24": ((I32, I32), I32), "__umul24": ((U32, U32), U32),
    "__mulhi": ((I32, I32), I32), "__umulhi": ((U32, U32), U32),
    "__mul64hi": ((I64, I64), I64), "__umul64hi": ((U64, U64), U64),
    "__sad": ((I32, I32, U32), U32), "__usad": ((U32, U32, U32), U32),
    "__hadd": ((I32, I32), I32), "__rhadd": ((I32, I32), I32),
    "__uhadd": ((U32, U32), U32), "__urhadd": ((U32, U32), U32),
    "__dp4a": ((I32, I32, I32), I32), "__dp4a_u": ((U32, U32, U32), U32),
}

Let = Callable[[n.Expr, str], n.Expr]


def int_intrinsic(name: str, args: list[n.Expr], let: Let, loc: Loc | None) -> n.Expr:
    """The IR of ``name(args...)`` (``name`` in ``INT_INTRINSICS``); ``let(e, base)`` binds ``e``
    to a fresh variable (so that a value used several times is computed once) and returns it."""
    params, result = INT_INTRINSICS[name]
    values = [convert(a, t) for a, t in zip(args, params)]

    def b(op: str, x: n.Expr, y: n.Expr | int) -> n.Expr:
        return n.Binary(op, x, y if isinstance(y, n.Expr) else n.Const(y, x.type), loc=loc)

    def popcount(x: n.Expr) -> n.Expr:
        # Bits summed in pairs, nibbles, bytes; the multiplication adds the bytes up.
        wide = x.type.bits == 64
        ones = 0x5555555555555555 if wide else 0x55555555
        twos = 0x3333333333333333 if wide else 0x33333333
        nibbles = 0x0F0F0F0F0F0F0F0F if wide else 0x0F0F0F0F
        bytes_ = 0x0101010101010101 if wide else 0x01010101
        x = let(b("sub", x, b("band", b("shr", x, 1), ones)), "popc")
        x = let(b("add", b("band", x, twos), b("band", b("shr", x, 2), twos)), "popc")
        x = b("band", b("add", x, b("shr", x, 4)), nibbles)
        return convert(b("shr", b("mul", x, bytes_), 56 if wide else 24), I32)

    def high_product(x: n.Expr, y: n.Expr) -> n.Expr:
        """The high 64 bits of the 128-bit product of two u64, from 32-bit halves (each partial
        product fits in 64 bits; the middle sum is below 3 * 2^32)."""
        x, y = let(x, "mx"), let(y, "my")
        xl, xh = let(b("band", x, 0xFFFFFFFF), "mxl"), let(b("shr", x, 32), "mxh")
        yl, yh = let(b("band", y, 0xFFFFFFFF), "myl"), let(b("shr", y, 32), "myh")
        hl, lh = let(b("mul", xh, yl), "mhl"), let(b("mul", xl, yh), "mlh")
        middle = b("add", b("add", b("shr", b("mul", xl, yl), 32), b("band", hl, 0xFFFFFFFF)),
                   b("band", lh, 0xFFFFFFFF))
        return b("add", b("add", b("add", b("mul", xh, yh), b("shr", hl, 32)), b("shr", lh, 32)),
                 b("shr", middle, 32))

    if name in ("__mul24", "__umul24"):
        if name == "__umul24":
            x, y = (b("band", v, 0xFFFFFF) for v in values)
            return b("mul", x, y)
        x, y = (b("shr", convert(b("shl", convert(v, U32), 8), I32), 8) for v in values)
        return convert(b("mul", convert(x, U32), convert(y, U32)), I32)
    if name in ("__mulhi", "__umulhi"):
        wide = I64 if name == "__mulhi" else U64
        x, y = (convert(v, wide) for v in values)
        return convert(b("shr", b("mul", x, y), 32), result)
    if name == "__umul64hi":
        return high_product(values[0], values[1])
    if name == "__mul64hi":
        # Signed from unsigned: hi_s(x, y) = hi_u(x, y) - (x < 0 ? y : 0) - (y < 0 ? x : 0) mod 2^64.
        x, y = let(values[0], "mx"), let(values[1], "my")
        hi = high_product(convert(x, U64), convert(y, U64))
        zero = n.Const(0, U64)
        fix_x = n.Select(b("lt", x, 0), convert(y, U64), zero, loc=loc)
        fix_y = n.Select(b("lt", y, 0), convert(x, U64), zero, loc=loc)
        return convert(b("sub", b("sub", hi, fix_x), fix_y), I64)
    if name in ("__sad", "__usad"):
        x, y = let(values[0], "sx"), let(values[1], "sy")
        ux, uy = convert(x, U32), convert(y, U32)
        diff = n.Select(b("gt", x, y), b("sub", ux, uy), b("sub", uy, ux), loc=loc)
        return b("add", diff, values[2])
    if name in ("__dp4a", "__dp4a_u"):
        x, y = let(convert(values[0], U32), "dpa"), let(convert(values[1], U32), "dpb")
        total = convert(values[2], U32)
        for k in range(4):
            if name == "__dp4a":  # byte k sign-extended: to the top, then an arithmetic shift down
                xk, yk = (convert(b("shr", convert(b("shl", v, 24 - 8 * k), I32), 24), U32) for v in (x, y))
            else:
                xk, yk = (b("band", b("shr", v, 8 * k), 0xFF) for v in (x, y))
            total = b("add", total, b("mul", xk, yk))
        return convert(total, result)
    if name in ("__hadd", "__rhadd", "__uhadd", "__urhadd"):
        wide = I64 if name in ("__hadd", "__rhadd") else U64
        total = b("add", convert(values[0], wide), convert(values[1], wide))
        if name in ("__rhadd", "__urhadd"):
            total = b("add", total, 1)
        return convert(b("shr", total, 1), result)
    if name in ("__funnelshift_l", "__funnelshift_lc", "__funnelshift_r", "__funnelshift_rc"):
        lo, hi, s = values
        both = let(b("bor", b("shl", convert(hi, U64), 32), convert(lo, U64)), "funnel")
        if name.endswith("c"):
            s = n.Select(b("gt", s, 32), n.Const(32, U32), s, loc=loc)
        else:
            s = b("band", s, 31)
        amount = convert(s, U64)
        if name.startswith("__funnelshift_l"):
            return convert(b("shr", b("shl", both, amount), 32), U32)
        return convert(b("shr", both, amount), U32)
    if name == "__byte_perm":
        x, y, s = values
        both = let(b("bor", b("shl", convert(y, U64), 32), convert(x, U64)), "bytes")
        s = let(s, "sel")
        out: n.Expr | None = None
        for k in range(4):
            pick = b("shl", convert(b("band", b("shr", s, 4 * k), 7), U64), 3)  # 8 * selector
            byte = b("band", b("shr", both, pick), 0xFF)
            byte = convert(byte, U32) if k == 0 else b("shl", convert(byte, U32), 8 * k)
            out = byte if out is None else b("bor", out, byte)
        return out  # type: ignore[return-value]
    unsigned = U64 if name.endswith("ll") else U32
    x = let(convert(values[0], unsigned), "bits")
    if name in ("__popc", "__popcll"):
        return popcount(x)
    if name in ("__brev", "__brevll"):
        # Swap neighbouring bits, pairs, nibbles, bytes, half-words (and words).
        masks = ((1, 0x5555555555555555), (2, 0x3333333333333333), (4, 0x0F0F0F0F0F0F0F0F),
                 (8, 0x00FF00FF00FF00FF), (16, 0x0000FFFF0000FFFF), (32, 0x00000000FFFFFFFF))
        for shift, mask in masks[:6 if unsigned.bits == 64 else 5]:
            mask &= (1 << unsigned.bits) - 1
            x = let(b("bor", b("band", b("shr", x, shift), mask), b("shl", b("band", x, mask), shift)), "brev")
        return x
    if name in ("__clz", "__clzll"):
        # Every bit below the highest set one set too; the zeros left are the leading zeros.
        for shift in (1, 2, 4, 8, 16, 32)[:6 if unsigned.bits == 64 else 5]:
            x = let(b("bor", x, b("shr", x, shift)), "bits")
        return b("sub", n.Const(unsigned.bits, I32), popcount(x))
    # __ffs: 1 + the index of the lowest set bit (x ^ (x - 1) sets it and every bit below), 0 for 0.
    return n.Select(b("eq", x, 0), n.Const(0, I32), popcount(b("bxor", x, b("sub", x, 1))), loc=loc)
