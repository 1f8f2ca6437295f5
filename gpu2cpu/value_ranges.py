"""Sound value ranges of integer expressions in the CPU schedule passes (``Ranges``).

An interval for each block-uniform integer expression and thread counter, from CUDA's launch
limits (``polypy.launch``), the ranges of types, the bounds of serial loops whose increments
cannot wrap, and locals written once by their declaration. ``gpu2cpu.thread_affine`` uses it
to drop the run-time checks it can prove; the thread counters are named ``tx``/``ty``/``tz``
(``counter_dim``).
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from polypy.ir import nodes as n
from polypy.ir.types import ScalarType
from polypy.ir.visitor import walk_only
from polypy.launch import MAX_BLOCK, MAX_GRID  # CUDA's launch limits (the launchers refuse anything larger)

_COUNTER = re.compile(r"^t([xyz])(_\d+)?$")


def counter_dim(name: str) -> int | None:
    """The dimension (0 = x) of a thread counter named ``tx``/``ty``/``tz`` (``_N`` suffixed)."""
    m = _COUNTER.match(name)
    return "xyz".index(m.group(1)) if m else None


def type_range(ty: ScalarType) -> tuple[int, int]:
    if ty.is_bool:
        return 0, 1
    if ty.is_signed:
        return -(1 << (ty.bits - 1)), (1 << (ty.bits - 1)) - 1
    return 0, (1 << ty.bits) - 1



class Ranges:
    """Sound intervals for integer expressions (block-uniform ones, and thread counters).

    ``loops``: serial ``for`` loops by variable; a loop variable lies in ``[start, stop)`` when
    its increments cannot wrap (signed types, or unsigned ones that stay in range).
    """

    def __init__(self, counters: Mapping[str, int] | None = None, loops: Mapping[str, n.For] | None = None,
                 lets: Mapping[str, n.Expr] | None = None):
        self.counters = dict(counters or {})
        self.loops = dict(loops or {})
        self.lets = dict(lets or {})  # locals written once, by their declaration
        self._busy: set[str] = set()

    @staticmethod
    def of_kernel(body: tuple[n.Stmt, ...]) -> Ranges:
        counters: dict[str, int] = {}
        loops: dict[str, n.For] = {}
        decls: dict[str, n.Expr | None] = {}
        assigned: set[str] = set()
        for s in body:
            for x in walk_only(s, n.Stmt):
                if isinstance(x, n.For):
                    dim = counter_dim(x.var) if x.kind == "threads" else None
                    if dim is not None:
                        counters[x.var] = dim
                    elif x.kind == "serial" and x.vtype.is_int:
                        loops[x.var] = x
                elif isinstance(x, n.Decl):
                    decls[x.name] = x.init
                elif isinstance(x, n.Assign):
                    assigned.add(x.name)
                elif isinstance(x, n.AtomicRMW) and x.dest is not None:
                    assigned.add(x.dest)
        lets = {k: v for k, v in decls.items() if v is not None and k not in assigned and v.type.is_int}
        return Ranges(counters, loops, lets)

    def _loop_var(self, name: str) -> tuple[int, int] | None:
        let = self.lets.get(name)
        if let is not None and name not in self._busy:
            self._busy.add(name)
            try:
                return self.of(let)
            finally:
                self._busy.discard(name)
        loop = self.loops.get(name)
        if loop is None or name in self._busy:
            return None
        self._busy.add(name)
        try:
            start, stop, step = self.of(loop.start), self.of(loop.stop), self.of(loop.step)
        finally:
            self._busy.discard(name)
        if step[0] < 1:
            return None
        tlo, thi = type_range(loop.vtype)
        if not loop.vtype.is_signed and stop[1] - 1 + step[1] > thi:
            return None
        return start[0], max(start[0], stop[1] - 1)

    def of(self, e: n.Expr) -> tuple[int, int]:
        ty = e.type
        full = type_range(ty) if (ty.is_int or ty.is_bool) else (-(1 << 63), (1 << 63) - 1)
        r = self._of(e)
        if r is None:
            return full
        return max(r[0], full[0]), min(r[1], full[1])

    def _fit(self, lo: int, hi: int, ty: ScalarType) -> tuple[int, int] | None:
        tlo, thi = type_range(ty)
        if tlo <= lo and hi <= thi:
            return lo, hi
        if ty.is_signed:  # signed overflow is undefined: a valid kernel stays in range
            return max(lo, tlo), min(hi, thi)
        return None  # unsigned: may wrap anywhere

    def _of(self, e: n.Expr) -> tuple[int, int] | None:
        ty = e.type
        if isinstance(e, n.Const):
            v = int(e.value) if not isinstance(e.value, float) else None
            return None if v is None else (v, v)
        if isinstance(e, n.BlockDim):
            return 1, MAX_BLOCK[e.dim]
        if isinstance(e, n.GridDim):
            return 1, MAX_GRID[e.dim]
        if isinstance(e, n.BlockIdx):
            return 0, MAX_GRID[e.dim] - 1
        if isinstance(e, n.Var):
            dim = self.counters.get(e.name)
            if dim is not None:
                return 0, MAX_BLOCK[dim] - 1
            return self._loop_var(e.name)
        if not (ty.is_int or ty.is_bool):
            return None
        if isinstance(e, n.Cast):
            if not (e.x.type.is_int or e.x.type.is_bool):
                return None
            lo, hi = self.of(e.x)
            tlo, thi = type_range(ty)
            return (lo, hi) if tlo <= lo and hi <= thi else None
        if isinstance(e, n.Unary) and e.op == "neg":
            lo, hi = self.of(e.x)
            return self._fit(-hi, -lo, ty)
        if isinstance(e, n.Binary):
            return self._binary(e)
        if isinstance(e, n.Select):
            a, b = self.of(e.a), self.of(e.b)
            return min(a[0], b[0]), max(a[1], b[1])
        if isinstance(e, n.Call) and e.fn in ("min", "max") and len(e.args) == 2:
            a, b = self.of(e.args[0]), self.of(e.args[1])
            f = min if e.fn == "min" else max
            return f(a[0], b[0]), f(a[1], b[1])
        return None

    def _binary(self, e: n.Binary) -> tuple[int, int] | None:
        ty = e.type
        if ty.is_bool:
            return 0, 1
        a, b = self.of(e.a), self.of(e.b)
        if e.op == "add":
            return self._fit(a[0] + b[0], a[1] + b[1], ty)
        if e.op == "sub":
            return self._fit(a[0] - b[1], a[1] - b[0], ty)
        if e.op == "mul":
            products = [x * y for x in a for y in b]
            return self._fit(min(products), max(products), ty)
        if e.op == "shl" and b[0] == b[1] and 0 <= b[0] < ty.bits:
            return self._fit(a[0] << b[0], a[1] << b[0], ty)
        if e.op == "shr" and b[0] == b[1] and 0 <= b[0] < ty.bits:
            return a[0] >> b[0], a[1] >> b[0]
        if e.op == "div" and b[0] > 0:
            # Truncating division by a positive divisor grows with the dividend and moves toward
            # zero as the divisor grows: the extremes are at the corners (a trip count
            # ``(n + blockDim.x - 1) / blockDim.x``).
            quotients = [_tdiv(x, y) for x in a for y in b]
            return min(quotients), max(quotients)
        if e.op == "rem" and b[0] == b[1] and b[0] > 0:
            c = b[0]
            return (0, min(a[1], c - 1)) if a[0] >= 0 else (-(c - 1), c - 1)
        if e.op == "band" and b[0] == b[1] and b[0] >= 0:
            return 0, b[0] if a[0] < 0 else min(a[1], b[0])
        return None


def _tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q
