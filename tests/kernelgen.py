"""Random well-formed CUDA kernels from a seed, for differential testing (this module holds no tests).

``generate(seed)`` returns a ``RandomKernel``: the CUDA source text of one ``__global__`` kernel
named ``rk<seed>``, the launch shapes to run it with and a function making its arguments.
Every kernel is free of undefined behaviour and of races by construction, so any two correct
implementations (the emulator, the LLVM JIT, the emitted C++, the emitted CUDA read back) agree
bit for bit on every output:

* integer expressions carry the C type and the value range of what they compute (C's integer
  promotions and usual arithmetic conversions are followed); a signed operation whose result
  could overflow is not generated (unsigned arithmetic wraps, so it is free), divisors are
  nonzero, shift counts are below the promoted width, no negative value is shifted left;
* every index is in range by construction (inputs are indexed by the global thread id, which
  is below the number of launched threads; shared arrays hold as many elements as the largest
  block; histogram slots are reduced modulo their size);
* float expressions use only correctly rounded operations (``+ - * /``, ``sqrtf``, ``fabsf``,
  ``fminf``/``fmaxf``, ``floorf``...), a float becomes an int only after clamping, and float
  atomics add small multiples of 1/4 whose sums are exact in any order;
* ``__syncthreads()`` is reached in block-uniform control flow only; each segment's values are
  written to a slot of its own (``out[k * total + g]``), atomics only add / max / min (order
  independent), and no atomic's return value is used.

Kernels are made of segments (integer expressions, nested loops with ``min``/``max``/``?:``
bounds, divergent guards, shared memory across barriers, barriers in uniform loops and
branches, tree reductions, a 2-D shared tile, global and shared atomics, an early return, tables
spelled as string literals, long sums in deep parentheses, a float's bits read and written as
integers).
"""
from __future__ import annotations

import dataclasses
import math
import random
from typing import Callable

import numpy as np

# -- C integer types: spelling, width, signedness ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class IntType:
    c: str
    bits: int
    signed: bool

    @property
    def lo(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def hi(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    @property
    def rank(self) -> int:
        return self.bits


SCHAR = IntType("signed char", 8, True)
UCHAR = IntType("unsigned char", 8, False)
SHORT = IntType("short", 16, True)
USHORT = IntType("unsigned short", 16, False)
INT = IntType("int", 32, True)
UINT = IntType("unsigned", 32, False)
LL = IntType("long long", 64, True)
ULL = IntType("unsigned long long", 64, False)
INT_TYPES = (SCHAR, UCHAR, SHORT, USHORT, INT, UINT, LL, ULL)
WIDE = (INT, UINT, LL, ULL)  # the types CUDA's min/max are declared for
_UNSIGNED_OF = {32: UINT, 64: ULL}


def promote(t: IntType) -> IntType:
    return INT if t.bits < 32 else t


def common(a: IntType, b: IntType) -> IntType:
    """C's usual arithmetic conversions of two integer types."""
    a, b = promote(a), promote(b)
    if a == b:
        return a
    if a.signed == b.signed:
        return a if a.rank > b.rank else b
    s, u = (a, b) if a.signed else (b, a)
    if u.rank >= s.rank:
        return u
    return s  # a wider signed type holds every value of the unsigned one (long long vs unsigned)


@dataclasses.dataclass(frozen=True)
class IExpr:
    """An integer expression: its text (fully parenthesized), its type and its value range."""
    text: str
    t: IntType
    lo: int
    hi: int


def convert(e: IExpr, t: IntType) -> tuple[int, int]:
    """The range of ``e`` converted to ``t`` (modular where it does not fit)."""
    if t.lo <= e.lo and e.hi <= t.hi:
        return e.lo, e.hi
    return t.lo, t.hi


def _fits(t: IntType, lo: int, hi: int) -> bool:
    return t.lo <= lo and hi <= t.hi


@dataclasses.dataclass(frozen=True)
class FExpr:
    """A float expression and a bound on its magnitude (every value is finite)."""
    text: str
    bound: float


# -- launch shapes ----------------------------------------------------------------------------

# (grid, block); 1-D and 2-D, partial blocks come from n < total.  MAX_* bound every index range.
SHAPES: tuple[tuple[tuple[int, int], tuple[int, int]], ...] = (
    ((3, 1), (32, 1)), ((2, 1), (64, 1)), ((4, 1), (24, 1)), ((1, 1), (128, 1)), ((5, 1), (7, 1)),
    ((2, 2), (8, 4)), ((3, 1), (16, 2)), ((2, 3), (5, 3)), ((1, 2), (32, 8)), ((2, 1), (4, 8)),
)
MAX_BX = max(b[0] for _, b in SHAPES)
MAX_BY = max(b[1] for _, b in SHAPES)
MAX_GX = max(g[0] for g, _ in SHAPES)
MAX_GY = max(g[1] for g, _ in SHAPES)
MAX_THREADS = max(b[0] * b[1] for _, b in SHAPES)
MAX_TOTAL = max(g[0] * g[1] * b[0] * b[1] for g, b in SHAPES)
HIST = 64  # int / unsigned / float histogram slots

PARAMS = ("int n, int m, unsigned s, const int* __restrict__ ai, const unsigned* __restrict__ au, "
          "const signed char* __restrict__ ac, const unsigned short* __restrict__ ah, "
          "const long long* __restrict__ al, const float* __restrict__ af, unsigned long long* out, "
          "float* outf, int* hist, unsigned* histu, float* histf")


@dataclasses.dataclass(frozen=True)
class RandomKernel:
    seed: int
    name: str
    source: str
    segments: int
    shapes: tuple[tuple[tuple[int, int], tuple[int, int]], ...]

    def arguments(self, grid: tuple[int, int], block: tuple[int, int]) -> dict[str, object]:
        """The arguments of one launch (fresh arrays; the same for the same seed and shape)."""
        total = grid[0] * grid[1] * block[0] * block[1]
        rng = np.random.default_rng([self.seed, grid[0], grid[1], block[0], block[1]])
        nt = block[0] * block[1]
        return {
            "n": int(total - rng.integers(0, nt)),  # the last block is partial for the guards
            "m": int(rng.integers(-20, 21)),
            "s": int(rng.integers(0, 1 << 32)),
            "ai": rng.integers(-1000, 1001, total).astype(np.int32),
            "au": rng.integers(0, 1 << 32, total, dtype=np.uint64).astype(np.uint32),
            "ac": rng.integers(-128, 128, total).astype(np.int8),
            "ah": rng.integers(0, 1 << 16, total).astype(np.uint16),
            "al": rng.integers(-10**6, 10**6 + 1, total).astype(np.int64),
            "af": (rng.integers(-64, 65, total) / 8).astype(np.float32),
            "out": np.zeros(2 * self.segments * total, np.uint64),
            "outf": np.zeros(2 * self.segments * total, np.float32),
            "hist": np.zeros(HIST, np.int32),
            "histu": np.zeros(HIST, np.uint32),
            "histf": np.zeros(HIST, np.float32),
        }


# -- the generator ------------------------------------------------------------------------------


class _Gen:
    def __init__(self, rng: random.Random):
        self.r = rng
        self.count = 0
        # Integer leaves usable anywhere in the kernel (name, type, range).
        self.base: list[IExpr] = [
            IExpr("tx", INT, 0, MAX_BX - 1), IExpr("ty", INT, 0, MAX_BY - 1),
            IExpr("threadIdx.x", UINT, 0, MAX_BX - 1), IExpr("blockIdx.x", UINT, 0, MAX_GX - 1),
            IExpr("by", INT, 0, MAX_GY - 1), IExpr("tid", UINT, 0, MAX_THREADS - 1),
            IExpr("g", INT, 0, MAX_TOTAL - 1), IExpr("n", INT, 1, MAX_TOTAL), IExpr("m", INT, -20, 20),
            IExpr("s", UINT, 0, UINT.hi), IExpr("ai[g]", INT, -1000, 1000), IExpr("au[g]", UINT, 0, UINT.hi),
            IExpr("ac[g]", SCHAR, SCHAR.lo, SCHAR.hi), IExpr("ah[g]", USHORT, 0, USHORT.hi),
            IExpr("al[g]", LL, -10**6, 10**6), IExpr("nt", UINT, 1, MAX_THREADS),
        ]
        self.locals: list[IExpr] = []  # declared in the current segment
        self.flocals: list[FExpr] = []
        self.shared: list[str] = []  # declarations at the top of the kernel
        self.functions: list[tuple[str, IntType, int, int]] = []  # __device__ (name, type, range)
        self.stage_arrays: list[tuple[str, IntType]] = []  # shared arrays segments may reuse
        self.definitions: list[str] = []
        self.prefix = ""  # of file-scope names: unique per seed, so that kernels can share a module

    def device_function(self) -> None:
        """``__device__ T fnK(T1 a, T2 b) { return e; }``: e over any values of a and b."""
        t, ta, tb = self.r.choice(INT_TYPES), self.r.choice(INT_TYPES), self.r.choice(INT_TYPES)
        base, self.base = self.base, [IExpr("a", ta, ta.lo, ta.hi), IExpr("b", tb, tb.lo, tb.hi)]
        e = None
        while e is None:  # something to compute, not only a parameter
            e = self._compound(0)
        self.base = base
        name = self.fresh("fn")
        lo, hi = convert(e, t)
        self.definitions += [f"__device__ {t.c} {name}({ta.c} a, {tb.c} b)", "{", f"    return {e.text};", "}", ""]
        self.functions.append((name, t, lo, hi))

    def fresh(self, base: str) -> str:
        self.count += 1
        return f"{base}{self.count}"

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    # -- integer expressions
    def const(self) -> IExpr:
        t = self.r.choice(INT_TYPES)
        v = self.r.randint(max(t.lo, -300), min(t.hi, 300)) if self.chance(0.8) else self.r.randint(t.lo, t.hi)
        if t == INT:
            return IExpr(str(v) if v >= 0 else f"({v})", t, v, v)
        if t == UINT:
            return IExpr(f"{v}u", t, v, v)
        if t == LL:
            return IExpr(f"{v}ll" if v >= 0 else f"({v}ll)", t, v, v)
        if t == ULL:
            return IExpr(f"{v}ull", t, v, v)
        return IExpr(f"(({t.c}){v})", t, v, v)

    def leaf(self) -> IExpr:
        if self.chance(0.2):
            return self.const()
        return self.r.choice(self.base + self.locals * 2)

    def iexpr(self, depth: int = 0) -> IExpr:
        if depth >= 3 or self.chance(0.3 + 0.15 * depth):
            return self.leaf()
        for _ in range(8):  # an operation that could overflow a signed type is drawn again
            e = self._compound(depth)
            if e is not None:
                return e
        return self.leaf()

    def _compound(self, depth: int) -> IExpr | None:
        kind = self.r.choice(["arith", "arith", "arith", "bit", "shift", "div", "cmp", "select", "minmax",
                              "cast", "cast", "unary", "logic", "call"])
        a = self.iexpr(depth + 1)
        if kind == "call":
            if not self.functions:
                return None
            name, t, lo, hi = self.r.choice(self.functions)
            return IExpr(f"{name}({a.text}, {self.iexpr(depth + 1).text})", t, lo, hi)
        if kind == "arith":
            return self.arith(self.r.choice("+-*"), a, self.iexpr(depth + 1))
        if kind == "bit":
            return self.bitwise(self.r.choice("&|^"), a, self.iexpr(depth + 1))
        if kind == "shift":
            return self.shift(a, depth)
        if kind == "div":
            return self.divide(a, depth)
        if kind == "cmp":
            b = self.iexpr(depth + 1)
            return IExpr(f"({a.text} {self.r.choice(['<', '<=', '>', '>=', '==', '!='])} {b.text})", INT, 0, 1)
        if kind == "logic":
            b = self.iexpr(depth + 1)
            if self.chance(0.3):
                return IExpr(f"(!{a.text})", INT, 0, 1)
            return IExpr(f"({a.text} {self.r.choice(['&&', '||'])} {b.text})", INT, 0, 1)
        if kind == "select":
            return self.select(self.cond(depth + 1), a, self.iexpr(depth + 1))
        if kind == "minmax":
            return self.minmax(self.r.choice(["min", "max"]), a, self.iexpr(depth + 1), self.r.choice(WIDE))
        if kind == "cast":
            return self.cast(a, self.r.choice(INT_TYPES))
        return self.unary(a)

    def arith(self, op: str, a: IExpr, b: IExpr) -> IExpr | None:
        t = common(a.t, b.t)
        (alo, ahi), (blo, bhi) = convert(a, t), convert(b, t)
        if op == "+":
            lo, hi = alo + blo, ahi + bhi
        elif op == "-":
            lo, hi = alo - bhi, ahi - blo
        else:
            corners = (alo * blo, alo * bhi, ahi * blo, ahi * bhi)
            lo, hi = min(corners), max(corners)
        if not _fits(t, lo, hi):
            if t.signed:
                return None  # signed overflow is undefined
            lo, hi = t.lo, t.hi
        return IExpr(f"({a.text} {op} {b.text})", t, lo, hi)

    def bitwise(self, op: str, a: IExpr, b: IExpr) -> IExpr:
        t = common(a.t, b.t)
        (alo, ahi), (blo, bhi) = convert(a, t), convert(b, t)
        if alo >= 0 and blo >= 0:
            if op == "&":
                lo, hi = 0, min(ahi, bhi)
            else:
                lo, hi = 0, (1 << max(ahi, bhi).bit_length()) - 1
        else:
            lo, hi = t.lo, t.hi
        return IExpr(f"({a.text} {op} {b.text})", t, lo, hi)

    def shift(self, a: IExpr, depth: int) -> IExpr | None:
        t = promote(a.t)
        lo, hi = convert(a, t)
        if self.chance(0.5):
            c = self.r.randint(0, t.bits - 1)
            amount, cmin, cmax = f"{c}", c, c
        else:  # a variable count, masked below the width
            k = self.iexpr(depth + 1)
            amount, cmin, cmax = f"({k.text} & {t.bits - 1})", 0, t.bits - 1
        if self.chance(0.5):  # right shift: arithmetic for negative values on every target we have
            return IExpr(f"({a.text} >> {amount})", t, min(lo, 0) if cmin == 0 else min(lo >> cmin, 0),
                         max(hi, 0) if cmin == 0 else max(hi >> cmin, 0))
        if lo < 0:
            if t.signed:
                return None  # shifting a negative value left is undefined
        nlo, nhi = lo << cmin, hi << cmax
        if not _fits(t, nlo, nhi):
            if t.signed:
                return None
            nlo, nhi = t.lo, t.hi
        return IExpr(f"({a.text} << {amount})", t, min(nlo, lo), nhi)

    def divide(self, a: IExpr, depth: int) -> IExpr:
        op = self.r.choice("/%")
        if self.chance(0.6):  # a constant divisor, of any type
            v = self.r.randint(1, 9)
            d = self.r.choice([IExpr(str(v), INT, v, v), IExpr(f"{v}u", UINT, v, v), IExpr(f"{v}ll", LL, v, v),
                               IExpr(f"((short){v})", SHORT, v, v), IExpr(f"{v}ull", ULL, v, v)])
        elif self.chance(0.5):  # a nonzero divisor computed at run time
            d = IExpr(f"(({self.iexpr(depth + 1).text} & 7u) + 1u)", UINT, 1, 8)
        else:
            d = IExpr(f"({self.cast(self.iexpr(depth + 1), UINT).text} | 1u)", UINT, 1, UINT.hi)
        t = common(a.t, d.t)
        (alo, ahi), (_, dhi) = convert(a, t), convert(d, t)  # d stays positive in t
        big = max(abs(alo), abs(ahi))
        if op == "/":
            lo, hi = (-big if alo < 0 else 0), (big if ahi > 0 else 0)
        else:
            lo, hi = max(-(dhi - 1), -big) if alo < 0 else 0, min(dhi - 1, big) if ahi > 0 else 0
        return IExpr(f"({a.text} {op} {d.text})", t, lo, hi)

    def select(self, c: str, a: IExpr, b: IExpr) -> IExpr:
        t = common(a.t, b.t)
        (alo, ahi), (blo, bhi) = convert(a, t), convert(b, t)
        return IExpr(f"({c} ? {a.text} : {b.text})", t, min(alo, blo), max(ahi, bhi))

    def minmax(self, fn: str, a: IExpr, b: IExpr, t: IntType) -> IExpr:
        (alo, ahi), (blo, bhi) = convert(a, t), convert(b, t)
        f = min if fn == "min" else max
        return IExpr(f"{fn}(({t.c})({a.text}), ({t.c})({b.text}))", t, f(alo, blo), f(ahi, bhi))

    def cast(self, a: IExpr, t: IntType) -> IExpr:
        lo, hi = convert(a, t)
        return IExpr(f"(({t.c})({a.text}))", t, lo, hi)

    def unary(self, a: IExpr) -> IExpr | None:
        t = promote(a.t)
        lo, hi = convert(a, t)
        if self.chance(0.5):
            return IExpr(f"(~{a.text})", t, -hi - 1, -lo - 1) if t.signed else IExpr(f"(~{a.text})", t, t.lo, t.hi)
        if t.signed:
            if -hi < t.lo:
                return None
            return IExpr(f"(-{a.text})", t, -hi, -lo)
        return IExpr(f"(-{a.text})", t, (0 if lo == hi == 0 else t.lo), (0 if lo == hi == 0 else t.hi))

    def cond(self, depth: int = 1) -> str:
        a, b = self.iexpr(depth), self.iexpr(depth)
        return f"({a.text} {self.r.choice(['<', '<=', '>', '>=', '==', '!='])} {b.text})"

    def small(self, lo: int, hi: int, depth: int = 1) -> IExpr:
        """An int expression in [lo, hi] (clamped with min/max where its range is wider)."""
        e = self.iexpr(depth)
        if lo <= e.lo and e.hi <= hi:
            return e if e.t == INT else self.cast(e, INT)
        e = self.minmax("max", self.minmax("min", e, IExpr(str(hi), INT, hi, hi), LL),
                        IExpr(f"({lo})" if lo < 0 else str(lo), INT, lo, lo), LL)
        return self.cast(e, INT)

    # -- float expressions (only correctly rounded operations: bit-exact everywhere)
    def fexpr(self, depth: int = 0) -> FExpr:
        leaves = [FExpr("af[g]", 8.0), FExpr("0.5f", 0.5), FExpr("3.0f", 3.0), FExpr("(-1.25f)", 1.25)] + self.flocals
        if depth >= 3 or self.chance(0.3 + 0.15 * depth):
            if self.chance(0.2):
                e = self.small(-1000, 1000, 2)
                return FExpr(f"((float){e.text})", 1000.0)
            if self.chance(0.1):
                e = self.iexpr(2)
                return FExpr(f"((float){e.text})", float(max(abs(e.lo), abs(e.hi))) * 1.01 + 1)
            return self.r.choice(leaves)
        kind = self.r.choice(["+", "-", "*", "/", "fmin", "fmax", "sqrt", "abs", "floor", "select", "neg", "double"])
        a, b = self.fexpr(depth + 1), self.fexpr(depth + 1)
        if kind == "double":  # a detour through double precision, rounded back once
            return FExpr(f"((float)((double){a.text} * 0.1 + (double){b.text}))", a.bound * 0.1 + b.bound + 1)
        if kind in "+-":
            return FExpr(f"({a.text} {kind} {b.text})", a.bound + b.bound)
        if kind == "*":
            if a.bound * b.bound > 1e30:
                return a
            return FExpr(f"({a.text} * {b.text})", a.bound * b.bound)
        if kind == "/":
            d = self.r.choice(["2.0f", "0.25f", "-4.0f", "3.0f"])
            return FExpr(f"({a.text} / {d})", a.bound * 4)
        if kind in ("fmin", "fmax"):
            return FExpr(f"{kind}f({a.text}, {b.text})", max(a.bound, b.bound))
        if kind == "sqrt":
            return FExpr(f"sqrtf(fabsf({a.text}))", math.sqrt(a.bound) + 1)
        if kind == "abs":
            return FExpr(f"fabsf({a.text})", a.bound)
        if kind == "floor":
            return FExpr(f"{self.r.choice(['floorf', 'ceilf', 'truncf'])}({a.text})", a.bound + 1)
        if kind == "neg":
            return FExpr(f"(-{a.text})", a.bound)
        cmp = self.r.choice(["<", "<=", ">", "=="])
        return FExpr(f"(({a.text} {cmp} {b.text}) ? {a.text} : {b.text})", max(a.bound, b.bound))

    def f2i(self, f: FExpr) -> IExpr:
        return IExpr(f"((int)fminf(fmaxf({f.text}, -1000.0f), 1000.0f))", INT, -1000, 1000)

    # -- statements; each segment writes out[k * total + g] / outf[k * total + g]
    def declare(self, lines: list[str], indent: str = "") -> None:
        t = self.r.choice(INT_TYPES)
        e = self.iexpr(1)
        name = self.fresh("v")
        lo, hi = convert(e, t)
        lines.append(f"{indent}{t.c} {name} = {e.text};")
        self.locals.append(IExpr(name, t, lo, hi))

    def store(self, slot: str, indent: str = "", guard: bool = True) -> list[str]:
        e = self.iexpr()
        body = [f"out[{slot}] = (unsigned long long)({e.text});"]
        if self.flocals and self.chance(0.7):
            body.append(f"outf[{slot}] = {self.flocals[-1].text} {self.r.choice('+-')} {self.fexpr(1).text};")
        elif self.chance(0.5):
            body.append(f"outf[{slot}] = {self.fexpr().text};")
        if not guard:
            return [indent + x for x in body]
        return [f"{indent}if (g < n) {{"] + [f"{indent}  {x}" for x in body] + [f"{indent}}}"]

    def compound(self, lines: list[str]) -> None:
        """``v op= e`` (or ``++v``) on a local: computed in the promoted type, converted back."""
        # not an element of a local array: another name of the same element would keep an old range
        names = [v for v in self.locals if "[" not in v.text]
        if not names:
            return
        v = self.r.choice(names)
        if self.chance(0.25):
            op = self.r.choice(["++", "--"])
            e = self.arith(op[0], v, IExpr("1", INT, 1, 1))
            text = f"{op}{v.text};"
        else:
            op = self.r.choice(["+", "-", "*", "&", "|", "^", "<<", ">>", "/", "%"])
            if op in ("<<", ">>", "/", "%"):
                e = self.shift(v, 1) if op in ("<<", ">>") else self.divide(v, 1)
                if e is None:
                    return
                op, rhs = e.text[len(v.text) + 2:-1].split(" ", 1)  # "(v op rhs)"
            else:
                x = self.iexpr(1)
                e = self.arith(op, v, x) if op in "+-*" else self.bitwise(op, v, x)
                rhs = x.text
            text = f"{v.text} {op}= {rhs};"
        if e is None:
            return
        lo, hi = convert(e, v.t)
        lines.append(text)
        self.locals[self.locals.index(v)] = IExpr(v.text, v.t, lo, hi)

    def seg_expr(self, slot: str) -> list[str]:
        lines: list[str] = []
        for _ in range(self.r.randint(0, 3)):
            self.declare(lines)
        for _ in range(self.r.randint(0, 3) if self.locals else 0):
            self.compound(lines)
        if self.chance(0.5):
            name = self.fresh("f")
            f = self.fexpr()
            lines.append(f"float {name} = {f.text};")
            self.flocals.append(FExpr(name, f.bound))
        return lines + self.store(slot)

    def loop_bounds(self, outer: list[IExpr]) -> tuple[IExpr, IExpr, str]:
        lo = self.small(-2, 3)
        if outer and self.chance(0.6):
            v = self.r.choice(outer)
            lo = self.minmax(self.r.choice(["min", "max"]), lo, v, INT)
        if self.chance(0.4):
            lo = self.select(self.cond(2), lo, self.small(-2, 2, 2))
        hi = self.small(-1, 5)
        if outer and self.chance(0.5):
            v = self.r.choice(outer)
            hi = self.minmax("min", IExpr(f"({v.text} + 3)", INT, v.lo + 3, v.hi + 3), hi, INT)
        if self.chance(0.3):
            hi = self.select(self.cond(2), hi, self.small(0, 5, 2))
        return lo, hi, self.r.choice(["<", "<=", "<"])

    def seg_loops(self, slot: str) -> list[str]:
        acc, facc = self.fresh("acc"), self.fresh("facc")
        lines = [f"unsigned {acc} = {self.cast(self.iexpr(1), UINT).text};", f"float {facc} = 0.0f;"]
        nt_ = self.r.choice([UCHAR, SCHAR, USHORT, SHORT, UINT, ULL])
        nacc = self.fresh("nacc")
        lines.append(f"{nt_.c} {nacc} = {self.iexpr(1).text};")
        depth = self.r.randint(1, 3)
        outer: list[IExpr] = []
        indent = ""
        closers: list[str] = []
        for _ in range(depth):
            i = self.fresh("i")
            lo, hi, cmp = self.loop_bounds(outer)
            step = self.r.choice([1, 1, 1, 2, 3])
            closers.append("")
            if self.chance(0.2):  # a while loop
                lines += [f"{indent}int {i} = {lo.text};", f"{indent}while ({i} {cmp} {hi.text}) {{"]
                closers[-1] = f"{i} += {step};"
            elif self.chance(0.25):  # counting down
                lines.append(f"{indent}for (int {i} = {hi.text}; {i} {'>=' if cmp == '<' else '>'} {lo.text}; "
                             f"{i} -= {step}) {{")
            else:
                lines.append(f"{indent}for (int {i} = {lo.text}; {i} {cmp} {hi.text}; "
                             f"{i} += {step}) {{" if step > 1 else
                             f"{indent}for (int {i} = {lo.text}; {i} {cmp} {hi.text}; ++{i}) {{")
            v = IExpr(i, INT, min(lo.lo, hi.lo) - 3, max(lo.hi, hi.hi) + 3)
            outer.append(v)
            self.locals.append(v)
            indent += "  "
        x = self.iexpr(1)
        read = f"ai[(unsigned)(g + {outer[-1].text}) % (unsigned)total]"
        upd = [f"{acc} = {acc} * 3u + (unsigned)({x.text});",
               f"{acc} ^= (unsigned){read};",
               f"{facc} = {facc} * 0.5f + af[(unsigned)(g * 3 + {outer[0].text}) % (unsigned)total];"]
        if self.chance(0.3):  # leave the innermost loop early (continue only in for loops: it skips a
            # while loop's increment)
            jump = "continue" if not closers[-1] and self.chance(0.5) else "break"
            lines.append(f"{indent}if ({self.cond(2)[1:-1]}) {{")
            lines += [f"{indent}  {jump};", f"{indent}}}"]
        # narrow types are promoted to int: a small operand keeps that from overflowing
        upd.append(f"{nacc} {self.r.choice(['+', '-', '*', '^', '|'])}= {self.small(-100, 100, 2).text};")
        if self.chance(0.5):
            lines += [f"{indent}if ({self.cond(2)[1:-1]}) {{", f"{indent}  {upd[0]}", f"{indent}}} else {{",
                      f"{indent}  {self.r.choice(upd[1:])}", f"{indent}}}"]
        else:
            lines += [indent + u for u in self.r.sample(upd, self.r.randint(1, 4))]
        for closer in reversed(closers):
            if closer:
                lines.append(f"{indent}{closer}")
            indent = indent[:-2]
            lines.append(f"{indent}}}")
        self.locals.append(IExpr(nacc, nt_, nt_.lo, nt_.hi))
        self.locals = [v for v in self.locals if v not in outer]
        self.locals.append(IExpr(acc, UINT, 0, UINT.hi))
        return lines + ["if (g < n) {", f"  outf[{slot}] = {facc};", "}"] + self.store(slot)

    def seg_local_array(self, slot: str) -> list[str]:
        """A per-thread array with a partial initializer, updated at computed indices in a loop."""
        t = self.r.choice([INT, UINT, UCHAR, SHORT, ULL])
        arr, j = self.fresh("loc"), self.fresh("j")
        size = self.r.randint(2, 6)
        # brace initializers may not narrow: the values fit the element type
        init = ", ".join(str(self.r.randint(0, min(300, t.hi))) for _ in range(self.r.randint(0, size)))
        lines = [f"{t.c} {arr}[{size}] = {{{init}}};" if init else f"{t.c} {arr}[{size}] = {{}};"]
        loop_var = IExpr(j, INT, 0, 7)
        lines.append(f"for (int {j} = 0; {j} < {self.small(0, 7).text}; ++{j}) {{")
        self.locals.append(loop_var)
        ops = ["+", "-"] if t == INT else ["+", "-", "*", "^", "|"]
        for _ in range(self.r.randint(1, 2)):
            index = self.cast(self.iexpr(2), UINT).text
            lines.append(f"  {arr}[{index} % {size}u] {self.r.choice(ops)}= {self.small(-100, 100, 2).text};")
        lines.append("}")
        self.locals.remove(loop_var)
        lo, hi = (-1100, 1100) if t == INT else (t.lo, t.hi)
        for k in range(size):
            self.locals.append(IExpr(f"{arr}[{k}]", t, lo, hi))
        if self.chance(0.5):
            self.locals.append(IExpr(f"{arr}[{self.cast(self.iexpr(2), UINT).text} % {size}u]", t, lo, hi))
        return lines + self.store(slot)

    def seg_long(self, slot: str) -> list[str]:
        """A long expression, as generated code writes them: a sum of 40 to 400 terms (unsigned,
        so it wraps) and a float sum of small exact terms, in parentheses nested 20 to 120 deep."""
        name, fname = self.fresh("long"), self.fresh("flong")
        terms = [f"(unsigned)({self.leaf().text})" if self.chance(0.7) else f"{self.r.randint(0, 1000)}u"
                 for _ in range(self.r.randint(40, 400))]
        lines = [f"unsigned {name} = {' + '.join(terms)};"]
        depth = self.r.randint(20, 120)
        nested = "af[g]"
        for k in range(depth):  # af[g] is a multiple of 1/8 below 8: every partial sum is exact
            nested = f"({nested} {self.r.choice('+-')} {self.r.randint(0, 8)}.0f)"
        lines.append(f"float {fname} = {nested};")
        self.locals.append(IExpr(name, UINT, 0, UINT.hi))
        self.flocals.append(FExpr(fname, 8.0 + 8.0 * depth))
        return lines + self.store(slot)

    def seg_bits(self, slot: str) -> list[str]:
        """A float's bits as an integer and back, exactly (CUDA's ``__float_as_int`` family and
        pointer punning of a local): integers of the whole range, floats kept finite and small by
        clearing the top two bits of the pattern (exponents up to 0x7f: below 2)."""
        lines: list[str] = []
        f = self.fexpr(1)
        pv, pb, back, pw = self.fresh("pv"), self.fresh("pb"), self.fresh("fb"), self.fresh("pw")
        lines.append(f"float {pv} = {f.text};")
        if self.chance(0.5):
            lines.append(f"int {pb} = *(int*)&{pv};")
            self.locals.append(IExpr(pb, INT, INT.lo, INT.hi))
        else:
            lines.append(f"unsigned {pb} = __float_as_uint({pv});")
            self.locals.append(IExpr(pb, UINT, 0, UINT.hi))
        bits = f"((unsigned)({self.iexpr(2).text}) & 0x3fffffffu)"
        if self.chance(0.5):
            lines.append(f"float {back} = __int_as_float((int){bits});")
        else:
            lines += [f"float {back};", f"*(unsigned*)&{back} = {bits};"]
        self.flocals.append(FExpr(back, 2.0))
        if self.chance(0.5):
            lines.append(f"long long {pw} = __double_as_longlong((double){pv});")
            self.locals.append(IExpr(pw, LL, LL.lo, LL.hi))
        return lines + self.store(slot)

    def seg_table(self, slot: str) -> list[str]:
        """Tables spelled as string literals: a local ``const char t[] = "..."`` (hex escapes,
        pieces concatenated), a ``__constant__`` one at file scope, rows of a 2-D array that the
        literals leave partly empty (zeros)."""
        lines: list[str] = []
        for kind in self.r.sample(["local", "constant", "rows"], self.r.randint(1, 3)):
            t = self.r.choice([SCHAR, UCHAR])
            spelled = "char" if t == SCHAR else "unsigned char"
            name = self.prefix + self.fresh("tab") if kind == "constant" else self.fresh("tab")
            index = self.cast(self.iexpr(2), UINT).text
            if kind == "rows":
                rows, cols = self.r.randint(1, 3), self.r.randint(2, 6)
                texts = ["".join(self.r.choice(_TABLE_CHARS) for _ in range(self.r.randint(0, cols - 1)))
                         for _ in range(self.r.randint(1, rows))]
                literals = ", ".join(f'"{x}"' for x in texts)
                lines.append(f"const {spelled} {name}[{rows}][{cols}] = {{{literals}}};")
                ref, lo, hi = f"{name}[{index} % {rows}u][{self.cast(self.iexpr(2), UINT).text} % {cols}u]", 0, 126
            else:
                data = [self.r.choice([self.r.randint(1, 255), ord(self.r.choice(_TABLE_CHARS))])
                        for _ in range(self.r.randint(1, 12))]
                decl = f"{spelled} {name}[] = {_literal(data, escapes=True)};"
                if kind == "constant":
                    self.definitions += [f"__constant__ {decl}", ""]
                else:
                    lines.append(f"const {decl}")
                values = [b - 256 if t.signed and b > 127 else b for b in data] + [0]
                ref, lo, hi = f"{name}[{index} % {len(data) + 1}u]", min(values), max(values)
            self.locals.append(IExpr(ref, t, lo, hi))
        return lines + self.store(slot)

    def seg_guard(self, slot: str) -> list[str]:
        c1 = self.r.choice([f"tx < {self.r.randint(0, 40)}", f"tid % {self.r.randint(2, 5)}u == 1u",
                            f"threadIdx.y == {self.r.randint(0, 3)}u", self.cond(1)[1:-1], self.affine_cond(),
                            self.affine_cond()])
        lines = [f"if ({c1}) {{"] + self.store(slot, "  ")
        if self.chance(0.6):
            c2 = self.affine_cond() if self.chance(0.5) else self.cond(1)[1:-1]
            lines += [f"}} else if ({c2}) {{"] + self.store(slot, "  ", guard=False)
        if self.chance(0.6):
            lines += ["} else {"]
            self.declare(lines, "  ")
            lines += self.store(slot, "  ")
        return lines + ["}"]

    def shared_array(self, t: str, size: int) -> str:
        name = self.fresh("sh")
        self.shared.append(f"__shared__ {t} {name}[{size}];")
        return name

    def affine_cond(self) -> str:
        """A condition affine in the thread and block indices and the parameters (what isl reads
        exactly: tighten-thread-bounds turns such guards into thread-loop bounds)."""
        terms = [f"{self.r.choice([1, 1, 2, 3, -1])} * {self.r.choice(['tx', 'ty', '(int)tid', 'by', '(int)blockIdx.x'])}"
                 for _ in range(self.r.randint(1, 2))]
        rhs = self.r.choice([str(self.r.randint(-3, 40)), "m", f"m + {self.r.randint(0, 20)}", "n - g",
                             f"(int)nt - {self.r.randint(1, 5)}", f"{self.r.randint(1, 3)} * by + 2"])
        c = f"{' + '.join(terms)} {self.r.choice(['<', '<=', '>', '>=', '==', '!='])} {rhs}"
        if self.chance(0.3):
            c = f"({c}) {self.r.choice(['&&', '||'])} ({self.affine_cond()})"
        return c

    def stage_array(self, t: IntType, lines: list[str]) -> str:
        """A shared array of type ``t``: one used by an earlier segment (after a barrier, so
        that its last readers are done) or a new one."""
        old = [name for name, tt in self.stage_arrays if tt == t]
        if old and self.chance(0.6):
            lines.append("__syncthreads();")
            return self.r.choice(old)
        name = self.shared_array(t.c, MAX_THREADS)
        self.stage_arrays.append((name, t))
        return name

    def seg_stage(self, slot: str) -> list[str]:
        t = self.r.choice([INT, UINT, LL, SHORT, UCHAR])
        lines: list[str] = []
        sh = self.stage_array(t, lines)
        e = self.iexpr(1)
        lo, hi = convert(e, t)
        lines.append(f"{sh}[tid] = ({t.c})({e.text});")
        if self.chance(0.3):  # a thread reads back its own element: no barrier needed, forwardable
            own = self.fresh("v")
            lines.append(f"{t.c} {own} = {sh}[tid];")
            self.locals.append(IExpr(own, t, lo, hi))
        lines.append("__syncthreads();")
        if self.chance(0.15):
            lines.append("__syncthreads();")  # redundant
        c = self.r.randint(1, MAX_THREADS)
        src = self.r.choice([f"(tid + {c}u) % nt", "nt - 1u - tid", f"(tid * {self.r.choice([3, 5, 7])}u) % nt",
                             "(tid ^ 1u) < nt ? (tid ^ 1u) : tid", "tid",
                             f"(unsigned)({self.iexpr(2).text}) % nt"])
        v = self.fresh("v")
        lines.append(f"{t.c} {v} = {sh}[{src}];")
        self.locals.append(IExpr(v, t, lo, hi))
        if self.chance(0.5):
            name = self.fresh("fs")
            fsh = self.shared_array("float", MAX_THREADS)
            f = self.fexpr(1)
            lines += [f"{fsh}[tid] = {f.text};", "__syncthreads();",
                      f"float {name} = {fsh}[(tid + {self.r.randint(1, 9)}u) % nt] + {fsh}[0];"]
            self.flocals.append(FExpr(name, 2 * f.bound))
        return lines + self.store(slot)

    def seg_uniform_loop(self, slot: str) -> list[str]:
        sh = self.shared_array("unsigned", MAX_THREADS)
        v, r = self.fresh("w"), self.fresh("r")
        bound = self.r.choice(["(m & 3) + 1", "(int)(blockIdx.x % 3u) + 1", "min(max(m, 0), 2) + 1", "2",
                               "by + 1"])
        lines = [f"unsigned {v} = {self.cast(self.iexpr(1), UINT).text};",
                 f"for (int {r} = 0; {r} < {bound}; ++{r}) {{", f"  {sh}[tid] = {v};", "  __syncthreads();",
                 f"  {v} = {v} + {sh}[(tid + (unsigned){r} + 1u) % nt] * (unsigned)({r} + 1);", "  __syncthreads();",
                 "}"]
        if self.chance(0.5):  # a barrier under a block-uniform branch
            cond = self.r.choice(["blockIdx.x % 2u == 0u", "m > 0", "by == 0", "s % 3u != 1u"])
            lines += [f"if ({cond}) {{", f"  {sh}[nt - 1u - tid] = {v} ^ 5u;", "  __syncthreads();",
                      f"  {v} += {sh}[tid];", "  __syncthreads();", "}"]
        self.locals.append(IExpr(v, UINT, 0, UINT.hi))
        return lines + self.store(slot)

    def seg_reduce(self, slot: str) -> list[str]:
        t = self.r.choice([UINT, INT])
        sh = self.shared_array(t.c, MAX_THREADS)
        st = self.fresh("st")
        val = self.cast(self.iexpr(1), UINT) if t == UINT else self.small(-1000, 1000)
        op = self.r.choice(["+", "max", "^"]) if t == UINT else self.r.choice(["+", "max", "min"])
        combine = f"{op}({sh}[tid], {sh}[tid + {st}])" if op in ("max", "min") else f"{sh}[tid] {op} {sh}[tid + {st}]"
        res = self.fresh("red")
        lines = [f"{sh}[tid] = {val.text};", "__syncthreads();",
                 f"for (unsigned {st} = {MAX_THREADS // 2}u; {st} > 0u; {st} >>= 1) {{",
                 f"  if (tid < {st} && tid + {st} < nt) {{", f"    {sh}[tid] = {combine};", "  }",
                 "  __syncthreads();", "}", f"{t.c} {res} = {sh}[0];", "__syncthreads();"]
        self.locals.append(IExpr(res, t, t.lo if t == UINT else -1000 * MAX_THREADS, t.hi if t == UINT else
                                 1000 * MAX_THREADS))
        return lines + self.store(slot)

    def seg_tile(self, slot: str) -> list[str]:
        name = self.fresh("tile")
        self.shared.append(f"__shared__ float {name}[{MAX_BY}][{MAX_BX + 1}];")
        f, value = self.fresh("ft"), self.fexpr(1)
        lines = [f"{name}[ty][tx] = {value.text};", "__syncthreads();",
                 f"float {f} = {name}[(ty + 1) % (int)blockDim.y][(int)blockDim.x - 1 - tx];", "__syncthreads();"]
        self.flocals.append(FExpr(f, value.bound))
        return lines + self.store(slot)

    def seg_atomics(self, slot: str) -> list[str]:
        shi = self.shared_array("int", 16)
        shu = self.shared_array("unsigned", 8)
        z = self.fresh("z")
        lines = [
            f"atomicAdd(&hist[{self.cast(self.iexpr(1), UINT).text} % 16u], {self.small(-1000, 1000).text});",
            f"atomicMax(&hist[16u + (unsigned)g % 8u], {self.small(-100000, 100000).text});",
            f"atomicMin(&hist[24u + tid % 8u], {self.small(-100000, 100000).text});",
            f"atomicAdd(&histu[{self.cast(self.iexpr(1), UINT).text} % 32u], {self.cast(self.iexpr(1), UINT).text});",
            f"atomicMax(&histu[32u + tid % 16u], {self.cast(self.iexpr(1), UINT).text});",
            f"atomicAdd(&histf[{self.cast(self.iexpr(1), UINT).text} % 64u], "
            f"(float)({self.small(-64, 64).text}) * 0.25f);",
            # blocks may have fewer than 16 threads: a block-stride loop clears the arrays
            f"for (unsigned {z} = tid; {z} < 16u; {z} += nt) {{", f"  {shi}[{z}] = 0;", "}",
            f"for (unsigned {z} = tid; {z} < 8u; {z} += nt) {{", f"  {shu}[{z}] = 0u;", "}",
            "__syncthreads();",
            f"atomicAdd(&{shi}[{self.cast(self.iexpr(1), UINT).text} % 8u], {self.small(-1000, 1000).text});",
            f"atomicMax(&{shi}[8u + tid % 8u], {self.small(-1000, 1000).text});",
            f"if ({self.cond(1)}) {{",
            f"  atomicAdd(&{shu}[tid % 8u], {self.cast(self.iexpr(1), UINT).text});", "}",
            "__syncthreads();",
            f"for (unsigned {z} = tid; {z} < 16u; {z} += nt) {{", f"  atomicAdd(&hist[32u + {z}], {shi}[{z}]);", "}",
            "if (tid < 8u) {", f"  atomicAdd(&histu[48u + tid], {shu}[tid]);", "}",
        ]
        return lines + self.store(slot)

    def seg_blockstride(self, slot: str) -> list[str]:
        """A shared array filled by a block-stride loop (element i by thread i % nt), read after a
        barrier at a computed index; then a grid-stride loop over the segment's two slots."""
        t = self.r.choice([INT, UINT, USHORT])
        lines: list[str] = []
        sh = self.stage_array(t, lines)
        i, j, v = self.fresh("i"), self.fresh("j"), self.fresh("v")
        iv = IExpr(i, UINT, 0, MAX_THREADS - 1)
        self.locals.append(iv)
        e = self.iexpr(1)
        self.locals.remove(iv)
        lo, hi = convert(e, t)
        lines += [f"for (unsigned {i} = tid; {i} < {MAX_THREADS}u; {i} += nt) {{", f"  {sh}[{i}] = ({t.c})({e.text});",
                  "}", "__syncthreads();",
                  f"{t.c} {v} = {sh}[(tid * {self.r.choice([1, 3, 7, 11])}u + (unsigned)({self.iexpr(2).text})) % "
                  f"{MAX_THREADS}u];"]
        self.locals.append(IExpr(v, t, lo, hi))
        base = slot.split(" * total")[0]
        jv = IExpr(j, INT, 0, 2 * MAX_TOTAL)
        self.locals.append(jv)
        value = self.iexpr(1)
        self.locals.remove(jv)
        end = self.r.choice(["2 * total", "2 * total - (m & 7)", "n + total", "total + (int)(s % 5u)"])
        lines += [f"for (int {j} = g; {j} < {end}; {j} += total) {{",
                  f"  out[{base} * total + {j}] = (unsigned long long)({value.text});", "}"]
        return lines

    def seg_return(self, slot: str) -> list[str]:
        return [f"if ({self.cond(1)[1:-1]}) {{", "  return;", "}"] + self.store(slot)


_TABLE_CHARS = [c for c in map(chr, range(32, 127)) if c not in '"\\?']


def _literal(data: list[int], escapes: bool) -> str:
    """C string literal pieces spelling ``data`` (bytes 1..255); bytes outside printable ASCII
    as hex escapes, each ending its piece (``"ab" "\\xe9" "c"``: hex escapes are greedy)."""
    pieces, current = [], ""
    for b in data:
        if escapes and not 32 <= b < 127:
            pieces += [current] if current else []
            pieces.append(f"\\x{b:02x}")
            current = ""
        else:
            current += chr(b)
    pieces += [current] if current or not pieces else []
    return " ".join(f'"{p}"' for p in pieces)


SEGMENTS: dict[str, Callable] = {
    "expr": _Gen.seg_expr, "loops": _Gen.seg_loops, "guard": _Gen.seg_guard, "stage": _Gen.seg_stage,
    "uniform_loop": _Gen.seg_uniform_loop, "reduce": _Gen.seg_reduce, "tile": _Gen.seg_tile,
    "atomics": _Gen.seg_atomics, "local_array": _Gen.seg_local_array, "blockstride": _Gen.seg_blockstride,
    "table": _Gen.seg_table, "long": _Gen.seg_long, "bits": _Gen.seg_bits,
}
_WEIGHTS = {"expr": 3, "loops": 3, "guard": 2, "stage": 2, "uniform_loop": 1, "reduce": 1, "tile": 1, "atomics": 2,
            "local_array": 1, "blockstride": 1, "table": 1, "long": 1, "bits": 1}


def generate(seed: int, *, shapes: int = 3) -> RandomKernel:
    """The kernel of ``seed`` and ``shapes`` launch shapes for it (one 1-D and one 2-D at least)."""
    r = random.Random(seed)
    gen = _Gen(r)
    gen.prefix = f"rk{seed}_"
    for _ in range(r.choice([0, 0, 1, 2])):
        gen.device_function()
    kinds = r.choices(list(_WEIGHTS), weights=list(_WEIGHTS.values()), k=r.randint(1, 4))
    if r.random() < 0.15:
        kinds.append("return")  # an early return, after the last barrier
    body: list[str] = []
    for k, kind in enumerate(kinds):
        slot = f"{2 * k} * total + g"  # segment k owns out[2k * total, (2k + 2) * total)
        body.append(f"// segment {k}: {kind}")
        before = list(gen.locals)
        body += (SEGMENTS[kind] if kind != "return" else _Gen.seg_return)(gen, slot)
        if kind == "guard":  # its locals are declared inside a branch; the others stay in scope
            gen.locals = [v for v in gen.locals if v.text in {b.text for b in before}]
    name = f"rk{seed}"
    head = [
        "int tx = threadIdx.x;",
        "int ty = threadIdx.y;",
        "int by = blockIdx.y;",
        "unsigned nt = blockDim.x * blockDim.y;",
        "unsigned tid = threadIdx.y * blockDim.x + threadIdx.x;",
        "int g = (int)((blockIdx.y * gridDim.x + blockIdx.x) * nt + tid);",
        "int total = (int)(gridDim.x * gridDim.y * nt);",
    ]
    source = "\n".join(
        [f"// random kernel, seed {seed}"] + gen.definitions + [f"__global__ void {name}({PARAMS})", "{"]
        + ["    " + x for x in gen.shared + head + body] + ["}", ""])
    one_d = [s for s in SHAPES if s[0][1] == 1 and s[1][1] == 1]
    two_d = [s for s in SHAPES if s not in one_d]
    chosen = [r.choice(one_d), r.choice(two_d)]
    rest = [s for s in SHAPES if s not in chosen]
    chosen += r.sample(rest, max(0, shapes - 2))
    return RandomKernel(seed, name, source, len(kinds), tuple(chosen[:shapes]))
