"""Expressions as exact affine functions of one thread counter, for the CPU schedule passes.

A thread loop ``for threads tx: u32 = lo to hi`` runs one iteration per thread. To turn a guard
such as ``if ((i32)(blockIdx.x * blockDim.x + tx) < n)`` into loop bounds, or to give every
iteration of a grid-stride loop a closed form, the passes need the guard's operands as

    value(tx) = const + sum(k_i * atom_i) + coef * tx        (mathematical integers)

where the *atoms* are integer expressions that do not depend on the counter and can be
evaluated outside the loop (no loads, only names declared outside it), and ``coef`` is a
constant. ``Linear`` is that form.

Exactness (``docs/ir.md``: C semantics): signed arithmetic does not overflow in a well-defined
kernel (it is undefined in C and CUDA, the assumption ``polypy.poly.affine`` makes too), but
unsigned arithmetic and integer conversions wrap. Wherever a sub-expression that involves the
counter is reduced modulo ``2**bits`` (an unsigned ``+ - *``, a conversion to a narrower or
differently signed type), its affine form is exact only if its value stays in the type's range
for every counter value ``0 <= tx < blockDim``. Each such requirement is a ``Need``
``lo <= expr <= hi`` on a counter-free expression; a need is dropped when an interval analysis
(``Ranges``: CUDA's launch limits, type ranges) proves it, and otherwise becomes a run-time
check that guards the transformed code (the original code runs when it fails). So the common
``(i32)(blockIdx.x * blockDim.x + tx)`` is ``P + tx`` (``P = blockIdx.x * blockDim.x`` as u32)
under the need ``P + blockDim.x - 1 <= 2**31 - 1``.

Thread counters are the loop variables of thread loops: ``tx``, ``ty``, ``tz`` and their fresh
copies ``tx_1``, ... (``serialize_threads`` and these passes name them so); ``counter_dim``
reads the dimension from the name.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

# Ranges and counter_dim live in gpu2cpu.value_ranges; the schedule passes import them from here too.
from gpu2cpu.value_ranges import Ranges, counter_dim, type_range  # noqa: F401
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.depth import MAX_ANALYZED_NODES
from polypy.ir.queries import nodes_reading, substitute_lets, tree_size
from polypy.ir.rewrite import int_add as add
from polypy.ir.rewrite import int_scale as mul
from polypy.ir.types import BOOL, I64, U32, ScalarType
from polypy.ir.visitor import walk, walk_only
from polypy.launch import MAX_BLOCK

# Linear forms whose atoms can exceed this are refused: bounds arithmetic stays far from i64 overflow.
_MAGNITUDE = 1 << 48
# Forms that are only rewritten in place, never subtracted from one another (``index_forms``:
# exact index arithmetic), may hold larger atoms, as long as the whole form (the sum of
# |coefficient| * |atom| over its terms, the counter at its largest) stays within this: one
# product of two 32-bit values, a layer offset ``(i64)(k - 1) * (i64)(nx * ny)`` that
# substitute-inductions made (hotspot3D), with small atoms beside it. Every partial sum computed
# in i64 stays below 2**63.
_INDEX_MAGNITUDE = (1 << 62) + (1 << 48)

# --------------------------------------------------------------------------- linear forms


@dataclasses.dataclass(frozen=True)
class Linear:
    """``const + sum(k * atom for atom, k in terms) + coef * counter`` (exact integers)."""

    const: int = 0
    terms: tuple[tuple[n.Expr, int], ...] = ()
    coef: int = 0

    def plus(self, other: Linear, sign: int = 1) -> Linear:
        terms = dict(self.terms)
        for atom, k in other.terms:
            terms[atom] = terms.get(atom, 0) + sign * k
        return Linear(self.const + sign * other.const, _canonical(terms), self.coef + sign * other.coef)

    def scale(self, k: int) -> Linear:
        return Linear(self.const * k, _canonical({a: c * k for a, c in self.terms}), self.coef * k)

    def base(self) -> Linear:
        """The counter-free part (the value at counter 0)."""
        return Linear(self.const, self.terms, 0)

    @property
    def is_const(self) -> bool:
        return not self.terms and self.coef == 0


def _canonical(terms: Mapping[n.Expr, int]) -> tuple[tuple[n.Expr, int], ...]:
    """Terms in a fixed order (so equal forms compare equal): positive ones first, the launch
    shape last, then by text."""
    def key(t: tuple[n.Expr, int]) -> tuple[bool, bool, str]:
        return t[1] < 0, isinstance(t[0], n.BlockDim), format_expr(t[0])

    return tuple(sorted(((a, k) for a, k in terms.items() if k != 0), key=key))


@dataclasses.dataclass(frozen=True)
class Need:
    """``lo <= value <= hi`` (either side may be None) for a counter-free ``value``."""

    value: Linear
    lo: int | None = None
    hi: int | None = None


class Facts:
    """What is known to hold where a loop runs: needs proved by enclosing ``if`` conditions."""

    def __init__(self, bounds: Mapping[Linear, tuple[int | None, int | None]] | None = None):
        self.bounds: dict[Linear, tuple[int | None, int | None]] = dict(bounds or {})

    def with_needs(self, needs: list) -> Facts:
        """These facts and ``needs`` (other entries, plain run-time checks, are ignored)."""
        out = Facts(self.bounds)
        for need in needs:
            if not isinstance(need, Need):
                continue
            lo, hi = out.bounds.get(need.value, (None, None))
            if need.lo is not None:
                lo = need.lo if lo is None else max(lo, need.lo)
            if need.hi is not None:
                hi = need.hi if hi is None else min(hi, need.hi)
            out.bounds[need.value] = (lo, hi)
        return out

    def implies(self, need: Need) -> bool:
        lo, hi = self.bounds.get(need.value, (None, None))
        if need.lo is not None and (lo is None or lo < need.lo):
            return False
        if need.hi is not None and (hi is None or hi > need.hi):
            return False
        return True


# --------------------------------------------------------------------------- building IR


def i64(e: n.Expr) -> n.Expr:
    """``e`` converted to i64 (exact for every integer type but u64 values above 2**63)."""
    if e.type == I64:
        return e
    if isinstance(e, n.Const):
        return n.Const(int(e.value), I64)
    return n.Cast(I64, e)


def const64(v: int) -> n.Expr:
    return n.Const(v, I64)


def linear_ir(lin: Linear) -> n.Expr:
    """A counter-free linear form as an i64 expression: ``atom1 - atom2 + 3``."""
    assert lin.coef == 0
    out: n.Expr | None = None
    if lin.terms and lin.terms[0][1] < 0 and lin.const > 0:  # 3 - a rather than -a + 3
        out, lin = const64(lin.const), Linear(0, lin.terms)
    for atom, k in lin.terms:
        term = i64(atom)
        if out is None:
            out = mul(term, k) if k > 0 else n.Unary("neg", mul(term, -k)) if k != -1 else n.Unary("neg", term)
        elif k > 0:
            out = add(out, mul(term, k))
        else:
            out = n.Binary("sub", out, mul(term, -k))
    if out is None:
        return const64(lin.const)
    return add(out, const64(lin.const))


def floor_div(e: n.Expr, k: int) -> n.Expr:
    """``floor(e / k)`` for an i64 ``e`` and a constant ``k > 0`` (IR division truncates)."""
    if k == 1:
        return e
    c = const64(k)
    shifted = n.Binary("div", n.Binary("sub", e, const64(k - 1)), c)
    return n.Select(n.Binary("ge", e, const64(0)), n.Binary("div", e, c), shifted)


def merge_needs(needs: list[Need]) -> list[Need]:
    """One need per value, with the tightest bounds, in first-seen order."""
    merged: dict[Linear, tuple[int | None, int | None]] = {}
    for need in needs:
        lo, hi = merged.get(need.value, (None, None))
        if need.lo is not None:
            lo = need.lo if lo is None else max(lo, need.lo)
        if need.hi is not None:
            hi = need.hi if hi is None else min(hi, need.hi)
        merged[need.value] = (lo, hi)
    return [Need(v, lo, hi) for v, (lo, hi) in merged.items()]


def need_exprs(needs: list[Need]) -> list[n.Expr]:
    """The run-time checks for ``needs``: ``value >= lo`` / ``value <= hi`` in i64."""
    out = []
    for need in merge_needs(needs):
        v = linear_ir(need.value)
        if need.lo is not None:
            out.append(n.Binary("ge", v, const64(need.lo)))
        if need.hi is not None:
            out.append(n.Binary("le", v, const64(need.hi)))
    return out


def facts_of_condition(cond: n.Expr) -> list[Need]:
    """The needs a condition built by ``need_exprs`` (possibly inside a larger ``&&``) proves."""
    out: list[Need] = []
    for atom in split_conjuncts(cond):
        if isinstance(atom, n.Binary) and atom.op in ("ge", "le") and isinstance(atom.b, n.Const) \
                and atom.a.type == I64:
            lin = _parse_linear_ir(atom.a)
            if lin is not None:
                v = int(atom.b.value)
                out.append(Need(lin, lo=v) if atom.op == "ge" else Need(lin, hi=v))
    return out


def is_check(cond: n.Expr) -> bool:
    """Whether ``cond`` looks like a run-time check the schedule passes build: ``&&``/``||`` of
    comparisons of i64 expressions with constants (``need_exprs``, constant-condition checks)."""
    if isinstance(cond, n.Binary) and cond.op in ("land", "lor"):
        return is_check(cond.a) and is_check(cond.b)
    return isinstance(cond, n.Binary) and cond.op in ("lt", "le", "gt", "ge") and isinstance(cond.b, n.Const) \
        and cond.a.type == I64


def _parse_linear_ir(e: n.Expr) -> Linear | None:
    """The inverse of ``linear_ir`` (enough of it to read back what it built)."""
    if isinstance(e, n.Const):
        return Linear(int(e.value))
    if isinstance(e, n.Binary) and e.op in ("add", "sub"):
        a, b = _parse_linear_ir(e.a), _parse_linear_ir(e.b)
        if a is None or b is None:
            return None
        return a.plus(b, 1 if e.op == "add" else -1)
    if isinstance(e, n.Binary) and e.op == "mul" and isinstance(e.b, n.Const):
        a = _parse_linear_ir(e.a)
        return None if a is None else a.scale(int(e.b.value))
    if isinstance(e, n.Unary) and e.op == "neg":
        a = _parse_linear_ir(e.x)
        return None if a is None else a.scale(-1)
    atom = e.x if isinstance(e, n.Cast) and e.x.type.bits <= 32 and e.x.type.is_int else e
    return Linear(0, ((atom, 1),))


def split_conjuncts(e: n.Expr, negate: bool = False) -> list[n.Expr]:
    """``e`` as a list of atoms whose conjunction it is (``!`` pushed inwards, De Morgan)."""
    if isinstance(e, n.Unary) and e.op == "not":
        return split_conjuncts(e.x, not negate)
    if isinstance(e, n.Binary) and e.op == ("lor" if negate else "land"):
        return split_conjuncts(e.a, negate) + split_conjuncts(e.b, negate)
    if not negate:
        return [e]
    return [negate_atom(e)]


_FLIP = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}


def negate_atom(e: n.Expr) -> n.Expr:
    """``!e``, as a comparison when that is exact (integer operands; not for NaN-able floats)."""
    if isinstance(e, n.Binary) and e.op in _FLIP and not e.a.type.is_float:
        return n.Binary(_FLIP[e.op], e.a, e.b, loc=e.loc)
    if isinstance(e, n.Unary) and e.op == "not":
        return e.x
    if isinstance(e, n.Const) and e.type == BOOL:
        return n.Const(not e.value, BOOL)
    return n.Unary("not", e, loc=e.loc)


# --------------------------------------------------------------------------- the analysis


@dataclasses.dataclass(frozen=True)
class Interval:
    """``lo <= counter < hi`` (i64 expressions; None: unbounded on that side)."""

    lo: n.Expr | None
    hi: n.Expr | None


def safe_uniform(e: n.Expr, available: Callable[[str], bool]) -> bool:
    """Whether ``e`` may be evaluated once outside the loop: no loads, no division by a variable."""
    for x in walk(e):
        if isinstance(x, n.Load):
            return False
        if isinstance(x, n.Var) and not available(x.name):
            return False
        if isinstance(x, n.Binary) and x.op in ("div", "rem") and not (isinstance(x.b, n.Const) and x.b.value != 0):
            return False
    return True


class CounterAnalysis:
    """Linear forms in the counter of one thread loop.

    ``lets``: definitions of locals declared inside the loop that are written once, before the
    expressions asked about; those that are *stable* (no loads, only the counter, names from
    outside the loop and other stable lets) are looked through. ``available``: whether a name
    may be read outside the loop (declared outside it).

    ``free_atoms``: the linear form will be evaluated where the expression is (an index being
    rewritten), so its counter-free parts may be anything, loads and inner locals included; only
    the needs must be evaluable outside the loop. Otherwise (bounds, checks) every atom must be.
    """

    def __init__(self, counter: str, dim: int, *, lets: Mapping[str, n.Expr],
                 available: Callable[[str], bool], ranges: Ranges, free_atoms: bool = False,
                 separate: frozenset[str] = frozenset(), start: n.Expr | None = None, index_forms: bool = False):
        self.counter = counter
        self.index_forms = index_forms
        self.limit = _INDEX_MAGNITUDE if index_forms else _MAGNITUDE  # of one atom; of the form too where index_forms
        self.dim = dim
        # The loop's first counter value where it is not 0 (the upper part of an index-set
        # split, ``[min(16u, blockDim.x), blockDim.x)``): the smallest value needs are taken at.
        self.start = None if start is None or (isinstance(start, n.Const) and int(start.value) == 0) else start
        self.available = available
        self.ranges = ranges
        self.free_atoms = free_atoms
        self.separate = separate  # names kept as atoms of their own (not inside larger atoms)
        self._variant: set[int] = set()  # while `linear` runs: ids of the nodes reading the counter or `separate`
        self.lets: dict[str, n.Expr] = {}
        for name, d in lets.items():  # in definition order: a stable let only uses earlier ones
            if all(not isinstance(x, (n.Load, n.Call)) for x in walk(d)) and all(
                    x.name == counter or x.name in self.lets or available(x.name)
                    for x in walk(d) if isinstance(x, n.Var)):
                self.lets[name] = d

    # -- questions
    def expand(self, e: n.Expr) -> n.Expr:
        """``e`` with the definitions of the stable ``lets`` substituted (recursively)."""
        return substitute_lets(e, self.lets)

    def mentions_counter(self, e: n.Expr) -> bool:
        return any(isinstance(x, n.Var) and x.name == self.counter for x in walk(self.expand(e)))

    def uniform(self, e: n.Expr) -> n.Expr | None:
        """``e`` (expanded) if it does not depend on the counter and may be hoisted, else None."""
        x = self.expand(e)
        if any(isinstance(v, n.Var) and v.name == self.counter for v in walk(x)):
            return None
        return x if safe_uniform(x, self.available) else None

    def linear(self, e: n.Expr) -> tuple[Linear, list[Need]] | None:
        """``e`` as an exact linear form, and what must hold for it to be exact (None: not affine)."""
        needs: list[Need] = []
        if tree_size(e) > MAX_ANALYZED_NODES:  # checked first: passes ask at every level of a long sum
            return None
        x = self.expand(e)
        if tree_size(x) > MAX_ANALYZED_NODES:
            return None
        self._variant = nodes_reading(x, {self.counter, *self.separate})
        try:
            lin = self._lin(x, needs)
        finally:
            self._variant = set()
        if lin is None or (self.index_forms and self.magnitude(lin) > self.limit):
            return None
        needs = [x for x in needs if not self.proved(x)]
        if self.free_atoms and any(not safe_uniform(a, self.available) for x in needs for a, _ in x.value.terms):
            return None  # a check that could not be made outside the loop
        return lin, needs

    def magnitude(self, lin: Linear) -> int:
        """A bound on ``|lin|`` and on every partial sum of it, for any counter value."""
        total = abs(lin.const) + abs(lin.coef) * (MAX_BLOCK[self.dim] - 1)
        for atom, k in lin.terms:
            lo, hi = self.ranges.of(atom)
            total += abs(k) * max(abs(lo), abs(hi))
        return total

    def proved(self, need: Need) -> bool:
        lo, hi = self.static_range(need.value)
        return (need.lo is None or lo >= need.lo) and (need.hi is None or hi <= need.hi)

    def static_range(self, lin: Linear) -> tuple[int, int]:
        lo = hi = lin.const
        for atom, k in lin.terms:
            a, b = self.ranges.of(atom)
            lo += min(k * a, k * b)
            hi += max(k * a, k * b)
        top = MAX_BLOCK[self.dim] - 1
        lo += min(0, lin.coef * top)
        hi += max(0, lin.coef * top)
        return lo, hi

    # -- conditions
    def interval(self, atom: n.Expr) -> tuple[Interval, list[Need]] | None:
        """The counter values where a comparison ``atom`` holds, as one interval (None: not one)."""
        if not (isinstance(atom, n.Binary) and atom.op in ("lt", "le", "gt", "ge", "eq")):
            return None
        if not (atom.a.type.is_int and atom.a.type == atom.b.type):
            return None
        atom = self._narrowed(atom)
        la, lb = self.linear(atom.a), self.linear(atom.b)
        if la is None or lb is None:
            return None
        d = la[0].plus(lb[0], -1)  # a - b = base + c * t
        needs = la[1] + lb[1]
        if d.coef == 0:
            return None
        base = d.base()
        if atom.op == "eq":  # c*t = -base
            lo = self._solve_lt(-d.coef, base.plus(Linear(1)))  # -c*t < base + 1  (c*t >= -base)
            hi = self._solve_lt(d.coef, base.scale(-1).plus(Linear(1)))  # c*t < -base + 1
            return Interval(lo.lo, hi.hi) if d.coef > 0 else Interval(hi.lo, lo.hi), needs
        if atom.op == "lt":  # c*t < -base
            return self._solve_lt(d.coef, base.scale(-1)), needs
        if atom.op == "le":  # c*t < -base + 1
            return self._solve_lt(d.coef, base.scale(-1).plus(Linear(1))), needs
        if atom.op == "gt":  # -c*t < base
            return self._solve_lt(-d.coef, base), needs
        return self._solve_lt(-d.coef, base.plus(Linear(1))), needs  # ge: -c*t < base + 1

    def _narrowed(self, atom: n.Binary) -> n.Binary:
        """``(i64)i < n`` with ``i`` a 32-bit value and ``n`` a 64-bit argument (srad's
        ``ei < d_Ne``): ``n`` is too large for a linear form, but clamped to
        ``[-2**31 - 1, 2**32]`` it compares the same with every 32-bit value (beyond that range
        it is above or below all of them, and so is the clamp), and its range is small."""
        ty = atom.a.type
        if ty.bits != 64:
            return atom
        sides = [atom.a, atom.b]
        for k in (0, 1):
            value, other = sides[k], sides[1 - k]
            if not (isinstance(value, n.Cast) and value.x.type.is_int and value.x.type.bits <= 32):
                continue
            lo, hi = self.ranges.of(other)
            if max(abs(lo), abs(hi)) <= _MAGNITUDE or self.uniform(other) is None:
                continue
            clamped: n.Expr = n.Call("min", (other, n.Const(1 << 32, ty)), ty)
            if ty.is_signed:
                clamped = n.Call("max", (clamped, n.Const(-(1 << 31) - 1, ty)), ty)
            sides[1 - k] = clamped
            return dataclasses.replace(atom, a=sides[0], b=sides[1])
        return atom

    def _solve_lt(self, c: int, k: Linear) -> Interval:
        """Where ``c * t < k`` (``c != 0``)."""
        if c > 0:  # t <= floor((k - 1) / c)  <=>  t < floor((k - 1) / c) + 1
            if c == 1:
                return Interval(None, linear_ir(k))
            return Interval(None, add(floor_div(linear_ir(k.plus(Linear(-1))), c), const64(1)))
        m = -c  # m*t > -k  <=>  t > floor(-k / m)  <=>  t >= floor(-k / m) + 1
        if m == 1:
            return Interval(linear_ir(k.scale(-1).plus(Linear(1))), None)
        return Interval(add(floor_div(linear_ir(k.scale(-1)), m), const64(1)), None)

    # -- the linear form
    def _atom(self, e: n.Expr) -> Linear | None:
        if isinstance(e, n.Const):
            return Linear(int(e.value))
        if not self.free_atoms and not safe_uniform(e, self.available):
            return None
        while isinstance(e, n.Cast) and e.x.type.is_int:
            lo, hi = self.ranges.of(e.x)
            tlo, thi = type_range(e.to)
            if not (tlo <= lo and hi <= thi):
                break
            e = e.x  # a conversion that keeps the value: `linear_ir` converts atoms to i64 itself
        lo, hi = self.ranges.of(e)
        if max(abs(lo), abs(hi)) > self.limit:
            return None
        return Linear(0, ((e, 1),))

    def _lin(self, e: n.Expr, needs: list[Need]) -> Linear | None:
        ty = e.type
        if not ty.is_int:
            return None
        if isinstance(e, n.Var) and e.name == self.counter:
            return Linear(coef=1)
        if isinstance(e, n.Var) and e.name in self.separate:
            return self._atom(e)
        if id(e) not in self._variant:
            return self._atom(e)
        if isinstance(e, n.Cast):
            if not e.x.type.is_int:
                return None
            x = self._lin(e.x, needs)
            if x is None:
                return None
            self._wrap(x, ty, needs)
            return x
        if isinstance(e, n.Unary) and e.op == "neg":
            x = self._lin(e.x, needs)
            if x is None:
                return None
            out = x.scale(-1)
            if not ty.is_signed:
                self._wrap(out, ty, needs)
            return out
        if isinstance(e, n.Select):
            return self._uniform_select(e, needs)
        if not isinstance(e, n.Binary):
            return None
        if e.op in ("add", "sub"):
            a, b = self._lin(e.a, needs), self._lin(e.b, needs)
            if a is None or b is None:
                return None
            out = a.plus(b, 1 if e.op == "add" else -1)
        elif e.op == "mul":
            a, b = self._lin(e.a, needs), self._lin(e.b, needs)
            if a is None or b is None:
                return None
            if b.is_const:
                out = a.scale(b.const)
            elif a.is_const:
                out = b.scale(a.const)
            else:
                return None
        elif e.op == "shl" and isinstance(e.b, n.Const) and 0 <= int(e.b.value) < min(ty.bits, 31):
            a = self._lin(e.a, needs)
            if a is None:
                return None
            out = a.scale(1 << int(e.b.value))
        else:
            return None
        if max(abs(out.coef), abs(out.const)) > _MAGNITUDE:
            return None
        if not ty.is_signed:
            self._wrap(out, ty, needs)
        return out

    def _uniform_select(self, e: n.Select, needs: list[Need]) -> Linear | None:
        """``c ? a : b`` with ``c`` the same for every thread and ``a``, ``b`` linear with the
        same counter coefficient (hotspot3D's ``N = (j == 0) ? c : c - nx``, ``j`` the row):
        ``b + (c ? a - b : 0)``, the select a counter-free atom. Both operands' needs are kept."""
        if id(e.cond) in self._variant:
            return None
        if not self.free_atoms and not safe_uniform(e.cond, self.available):
            return None
        a, b = self._lin(e.a, needs), self._lin(e.b, needs)
        if a is None or b is None or a.coef != b.coef:
            return None
        offset = a.base().plus(b.base(), -1)
        if not offset.terms and offset.const == 0:
            return b
        return b.plus(Linear(0, ((n.Select(e.cond, linear_ir(offset), const64(0)), 1),)))

    def _wrap(self, lin: Linear, ty: ScalarType, needs: list[Need]) -> None:
        """Record that ``lin`` must stay in ``ty``'s range for every counter value."""
        tlo, thi = type_range(ty)
        base = lin.base()
        # The extreme values over start <= t <= blockDim - 1: at t = start and at t = blockDim - 1.
        top = Linear(-lin.coef, ((n.BlockDim(self.dim), lin.coef),)).plus(base) if lin.coef else base
        first = base.plus(Linear(0, ((self.start, lin.coef),))) if lin.coef and self.start is not None else base
        low, high = (first, top) if lin.coef >= 0 else (top, first)
        needs.append(Need(low, lo=tlo))
        needs.append(Need(high, hi=thi))


def to_u32(e: n.Expr) -> n.Expr:
    """An i64 expression whose value fits u32, as u32 (``min``/``max`` of u32 values stay u32)."""
    if isinstance(e, n.Const):
        return n.Const(int(e.value), U32)
    if isinstance(e, n.Cast) and e.x.type == U32:
        return e.x
    if isinstance(e, n.Call) and e.fn in ("min", "max") and all(_is_u32_valued(a) for a in e.args):
        return n.Call(e.fn, tuple(to_u32(a) for a in e.args), U32)
    return n.Cast(U32, e)


def _is_u32_valued(e: n.Expr) -> bool:
    if isinstance(e, n.Const):
        return 0 <= int(e.value) <= 0xFFFFFFFF
    if isinstance(e, n.Cast) and e.x.type == U32:
        return True
    if isinstance(e, n.Call) and e.fn in ("min", "max"):
        return all(_is_u32_valued(a) for a in e.args)
    return False
