"""version_thread_loops: a thread loop whose conditions are constant over the block runs in one
copy per value of those conditions (CPU form -> CPU form).

Requires: a CPU-form kernel (thread counters named ``tx``/``ty``/``tz``, see
``gpu2cpu.thread_affine``). Guarantees: the same results. An ``if`` in a thread loop whose
condition is affine in the counter and in the variables of short constant loops around it (a
stencil's ``x + dx >= 0 && x + dx < width``, a boundary test ``x == 0 || x == nx - 1``) usually
has the same value for every thread and iteration of a block. It is computed once
(``var tx_c: bool = <value at one corner>``), checked at run time to be constant over the block,
and the loop is copied once per value of up to ``MAX_UNSWITCHED`` such flags, each copy with the
conditions decided::

    for threads tx {                         var tx_c = x0 - 2 >= 0 && x0 + 2 < width
      for dx = -2 to 3 {               ==>   if (tx_c) { for threads tx { for dx { acc += ... } } }
        if (x + dx >= 0 && x + dx < width)   else      { for threads tx { for dx { } } }
          acc += ...

The check (and what the affine forms need: no wrap-around, ``thread_affine.Need``) guards the
versions; when it fails (the blocks on the border of a stencil) the original loop runs::

    if (<the conditions are constant over the block>) { tx_c = ...; versions } else { original loop }

``box_range`` decides the same conditions on the range of the counter where none of them
varies instead of over the whole block, for wide blocks (``tighten_thread_bounds``,
``RANGE_MIN_THREADS``): a block on the border of a stencil then runs most of its threads
without the conditions.

``box_version`` and ``version_loop`` do the work for one loop: ``tighten_thread_bounds`` calls
them as step 3 of its loop transformation (where the check joins its own, and each version
gets exact index arithmetic); ``version_thread_loops`` is the pass on its own.
``report`` receives one ``LoweringDecision`` per loop versioned and per run-time check.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from gpu2cpu.names import NameSupply
from gpu2cpu.report import LoweringDecision
from gpu2cpu.thread_affine import (
    CounterAnalysis,
    Linear,
    Need,
    Ranges,
    const64,
    counter_dim,
    i64,
    is_check,
    linear_ir,
    need_exprs,
)
from gpu2cpu.thread_loops import copy_loop, let_definitions, rewrite_cpu_body, stem_of, ThreadLoopStep
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.queries import conjunction, declared_names, written_names
from polypy.ir.rewrite import fold_max, fold_min
from polypy.ir.types import BOOL, I64, U32
from polypy.ir.visitor import Mutator, Visitor, walk, walk_only

# Serial loops of at most this many iterations (constant bounds) count as part of the block's
# "box" when conditions are checked for being constant over the block.
BOX_LOOP_TRIPS = 16
# At most this many such block-level conditions get one copy of the loop per combination of values.
MAX_UNSWITCHED = 2


def version_thread_loops(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """Every thread loop with its block-constant conditions versioned; see the module docstring."""
    return rewrite_cpu_body(kernel, _Version, what="version_thread_loops", report=report)


class _Version(ThreadLoopStep):
    def __init__(self, kernel: n.Kernel):
        super().__init__(kernel)
        self.ranges = Ranges.of_kernel(kernel.body)

    def visit_For(self, s: n.For) -> n.Stmt | tuple[n.Stmt, ...]:
        loop = self.generic_visit(s)  # inner loops first
        if not (loop.kind == "threads" and counter_dim(loop.var) is not None):
            return loop
        needs: list[Need | n.Expr] = []
        decls: list[n.Stmt] = []
        boxed = box_version(loop, names=self.names, ranges=self.ranges, needs=needs, decls=decls, note=self.note)
        if boxed is loop:
            return loop
        if len(decls) <= MAX_UNSWITCHED:
            out = decls + version_loop(boxed, [d.name for d in decls], names=self.names)  # type: ignore[union-attr]
        else:
            out = decls + [boxed]
        checks = need_exprs([x for x in needs if isinstance(x, Need)]) + [x for x in needs if not isinstance(x, Need)]
        if not checks:
            return tuple(out)
        fallback = copy_loop(loop, self.names)
        self.note(loop, f"thread loop over {loop.var}: run-time check {format_expr(conjunction(checks))} "
                        f"(conditions constant over the block); the original loop runs otherwise")
        return n.If(conjunction(checks), tuple(out), (fallback,), loc=loop.loc)


def box_version(loop: n.For, *, names: NameSupply, ranges: Ranges, needs: list, decls: list[n.Stmt],
                note: Callable[[n.Stmt, str], None], corner_at: n.Expr | None = None,
                atoms: list[BoxAtom] | None = None) -> n.For:
    """Conditions in ``loop`` that are affine in the counter and in the variables of constant
    serial loops around them, and that are constant over all of them in most blocks (a
    stencil's bounds checks, a boundary test), are computed once per block: the loop then
    runs with the value at one corner (``var tx_c: bool = ...``) under the run-time check
    that the value is the same everywhere (appended to ``needs``).

    ``corner_at`` (i64) is the counter value the corner is taken at (the loop's start by
    default); ``atoms`` receives each comparison that varies (``box_range``)."""
    dim = counter_dim(loop.var)
    assert dim is not None
    inside = declared_names(loop.body) | {loop.var}
    box = {v: r for v, r in box_vars(loop.body).items()}
    analysis = CounterAnalysis(loop.var, dim, lets=let_definitions(loop.body, len(loop.body)),
                               available=lambda name: name not in inside or name in box, ranges=ranges,
                               separate=frozenset(box))
    lo = i64(loop.start) if corner_at is None else corner_at
    replaced: dict[int, n.Expr] = {}
    checks: list[n.Expr] = []
    new_needs: list[Need] = []
    for x in _ifs(loop.body):
        if is_check(x.cond):
            continue  # a check of this pass, around other loops
        found = box_condition(x.cond, analysis, box, lo, atoms)
        if found is None:
            continue
        corner, atom_checks, atom_needs, varying = found
        if not varying:
            continue
        name = names.fresh(f"{stem_of(loop.var)}_c")
        decls.append(n.Decl(name, BOOL, corner, loc=x.loc))
        replaced[id(x)] = n.Var(name, BOOL)
        checks.extend(atom_checks)
        new_needs.extend(atom_needs)
    if not replaced:
        return loop
    needs.extend(x for x in new_needs if x not in needs)
    needs.extend(checks)
    note(loop, f"thread loop over {loop.var}: {len(replaced)} condition(s) on {loop.var} and short loops "
               f"computed once per block where they do not vary "
               f"({', '.join(d.name for d in decls)})")  # type: ignore[union-attr]

    class Replace(Mutator):
        def visit_If(self, s: n.If) -> n.Stmt:
            new = replaced.get(id(s))
            s2 = self.generic_visit(s)
            return s2 if new is None else dataclasses.replace(s2, cond=new)

    return dataclasses.replace(loop, body=Replace().visit_block(loop.body))


@dataclasses.dataclass(frozen=True)
class BoxAtom:
    """A comparison ``d op 0`` of a versioned condition, ``d = coef * counter + v`` with ``v``
    between ``low`` and ``high`` (counter-free i64 forms) over the box's loop variables."""

    op: str
    coef: int
    low: Linear
    high: Linear


def box_range(loop: n.For, *, names: NameSupply, ranges: Ranges, needs: list, decls: list[n.Stmt],
              note: Callable[[n.Stmt, str], None]) -> tuple[n.For, list[n.Stmt], n.Expr, n.Expr] | None:
    """``box_version`` decided on a range of the counter instead of the whole block.

    A comparison that varies with the counter (``x + dx >= 0``, ``x == nx - 1``) is constant
    over the box except on one interval of the counter near the array's edge (``[A, B)``); on
    each side of it, it is constant. The range ``[lo, hi)`` of the loop's own bounds that
    avoids every such interval (on the longer side of each, chosen at run time) runs with the
    conditions decided at its first thread: it is the whole loop in a block inside the array,
    and most of it in a block on the array's border, so that wide blocks (coarsened ones, a
    row of a stencil) keep their vector loop. The threads outside it run with the conditions.

    Returns (the loop with the conditions replaced by the flags, declarations of ``lo``,
    ``hi`` and the flags, ``lo`` and ``hi`` as u32), or None where a comparison's counter
    coefficient is not +-1 or the loop's step is not 1 (``box_version`` with its whole-block
    check applies there). Needs of the affine forms are appended to ``needs``."""
    if not (isinstance(loop.step, n.Const) and int(loop.step.value) == 1):
        return None
    stem = stem_of(loop.var)
    lo_var, hi_var = n.Var(names.fresh(f"{stem}_in"), U32), n.Var(names.fresh(f"{stem}_out"), U32)
    atoms: list[BoxAtom] = []
    found: list = []
    flags: list[n.Stmt] = []
    boxed = box_version(loop, names=names, ranges=ranges, needs=found, decls=flags, note=note,
                        corner_at=i64(lo_var), atoms=atoms)
    if boxed is loop or any(abs(a.coef) > 1 for a in atoms):
        return None
    start, stop = i64(loop.start), i64(loop.stop)
    firsts: list[n.Expr] = [start]
    lasts: list[n.Expr] = [stop]
    uniform: list[n.Expr] = []
    for atom in atoms:
        if atom.coef == 0:  # the same for every thread: constant over the box, or no range
            uniform.append(_constant_check(atom.op, atom.low, atom.high))
            continue
        a, b = _mixed_interval(atom)
        after = n.Binary("gt", n.Binary("sub", stop, b), n.Binary("sub", a, start))
        firsts.append(n.Select(after, b, start))
        lasts.append(n.Select(after, stop, a))
    first = n.Call("min", (fold_max(firsts, I64), stop), I64)
    last = n.Call("max", (fold_min(lasts, I64), i64(lo_var)), I64)
    if uniform:
        last = n.Select(conjunction(uniform), last, i64(lo_var))
    needs.extend(x for x in found if isinstance(x, Need) and x not in needs)
    decls.append(n.Decl(lo_var.name, U32, n.Cast(U32, first), loc=loop.loc))
    decls.append(n.Decl(hi_var.name, U32, n.Cast(U32, last), loc=loop.loc))
    decls.extend(flags)
    note(loop, f"thread loop over {loop.var}: the conditions are decided on [{lo_var.name}, {hi_var.name}), "
               f"the threads outside it run with them")
    return boxed, decls, lo_var, hi_var


def _mixed_interval(atom: BoxAtom) -> tuple[n.Expr, n.Expr]:
    """``[A, B)``: the counter values where ``atom`` is not constant over the box (i64)."""
    low, high, op = atom.low, atom.high, atom.op
    if op in ("le", "gt"):  # d <= 0 is d - 1 < 0
        low, high, op = low.plus(Linear(-1)), high.plus(Linear(-1)), "lt"
    if op in ("lt", "ge"):
        if atom.coef > 0:  # t + v < 0 everywhere below -high, nowhere from -low on
            a, b = high.scale(-1), low.scale(-1)
        else:  # v - t < 0 everywhere from high + 1 on, nowhere up to low
            a, b = low.plus(Linear(1)), high.plus(Linear(1))
    elif atom.coef > 0:  # t + v == 0 nowhere below -high or from 1 - low on
        a, b = high.scale(-1), Linear(1).plus(low, -1)
    else:  # v - t == 0 nowhere below low or from high + 1 on
        a, b = low, high.plus(Linear(1))
    return linear_ir(a), linear_ir(b)


def version_loop(loop: n.For, flags: list[str], *, names: NameSupply,
                 finish: Callable[[n.For], n.For] = lambda loop: loop) -> list[n.Stmt]:
    """One copy of ``loop`` per value of the block-level booleans ``flags``, each with the
    conditions decided (``if (tx_c) {loop, tx_c true} else {loop, tx_c false}``); ``finish``
    makes each copy's final form."""
    if not flags:
        return [finish(loop)]
    flag, rest = flags[0], flags[1:]
    copies = []
    for value in (True, False):
        body = _decide(loop.body, flag, value)
        copy = copy_loop(loop, names, body=body, fresh=not value)
        copies.append(tuple(version_loop(copy, rest, names=names, finish=finish)))
    return [n.If(n.Var(flag, BOOL), copies[0], copies[1], loc=loop.loc)]


def box_vars(body: tuple[n.Stmt, ...]) -> dict[str, tuple[int, int]]:
    """Variables of serial loops with constant, short ranges in ``body`` (not their bodies' writes)."""
    out: dict[str, tuple[int, int]] = {}
    for s in body:
        for x in walk_only(s, n.For):
            if isinstance(x, n.For) and x.kind == "serial" and x.vtype.is_int \
                    and all(isinstance(e, n.Const) for e in (x.start, x.stop, x.step)) and int(x.step.value) > 0:
                a, b, step = int(x.start.value), int(x.stop.value) - 1, int(x.step.value)
                if a <= b and (b - a) // step < BOX_LOOP_TRIPS and x.var not in written_names(x.body):
                    out[x.var] = (a, b)
    return out


def box_condition(cond: n.Expr, analysis: CounterAnalysis, box: dict[str, tuple[int, int]], lo: n.Expr,
                  atoms: list[BoxAtom] | None = None):
    """(value at the corner, checks that it is the same everywhere, needs, whether it varies
    at all) for a condition built of ``&&``, ``||``, ``!`` and affine comparisons; ``atoms``
    receives the comparisons that vary."""
    checks: list[n.Expr] = []
    needs: list[Need] = []
    varying = False

    def corner_of(e: n.Expr) -> n.Expr | None:
        nonlocal varying
        if isinstance(e, n.Unary) and e.op == "not":
            inner = corner_of(e.x)
            return None if inner is None else n.Unary("not", inner)
        if isinstance(e, n.Binary) and e.op in ("land", "lor"):
            a, b = corner_of(e.a), corner_of(e.b)
            return None if a is None or b is None else n.Binary(e.op, a, b)
        u = analysis.uniform(e)
        if u is not None and not any(isinstance(v, n.Var) and v.name in box for v in walk(u)):
            return u  # the same in every thread and iteration already
        if not (isinstance(e, n.Binary) and e.op in _BOX_OPS and e.a.type.is_int and e.a.type == e.b.type):
            return None
        la, lb = analysis.linear(e.a), analysis.linear(e.b)
        if la is None or lb is None:
            return None
        d = la[0].plus(lb[0], -1)
        if any(_box_atom(a, box) for x in la[1] + lb[1] for a, _ in x.value.terms):
            return None  # a check that would need a loop variable
        needs.extend(la[1] + lb[1])
        fixed = Linear(d.const, tuple((a, k) for a, k in d.terms if not _box_atom(a, box)))
        low, high, corner = fixed, fixed, fixed
        for a, k in d.terms:
            if _box_atom(a, box):
                m, mm = box[a.name]  # type: ignore[union-attr]
                low = low.plus(Linear(min(k * m, k * mm)))
                high = high.plus(Linear(max(k * m, k * mm)))
                corner = corner.plus(Linear(k * m))
        over_box = BoxAtom(e.op, d.coef, low, high)
        if d.coef:  # over every thread of the block (the check sits outside the loop's bounds)
            last = Linear(-d.coef, ((n.BlockDim(analysis.dim), d.coef),))
            low, high = (low, high.plus(last)) if d.coef > 0 else (low.plus(last), high)
            corner = corner.plus(_lin_of(lo).scale(d.coef))
        if d.coef == 0 and len(d.terms) == len(fixed.terms):
            return None  # nothing varies: not a guard of this loop
        varying = True
        if atoms is not None:
            atoms.append(over_box)
        checks.append(_constant_check(e.op, low, high))
        return n.Binary(e.op, linear_ir(corner), const64(0))

    corner = corner_of(cond)
    if corner is None:
        return None
    return corner, checks, needs, varying


_BOX_OPS = ("lt", "le", "gt", "ge", "eq", "ne")


def _box_atom(a: n.Expr, box: dict[str, tuple[int, int]]) -> bool:
    return isinstance(a, n.Var) and a.name in box


def _lin_of(e: n.Expr) -> Linear:
    """An i64 bound as a linear form (a constant, or one atom)."""
    if isinstance(e, n.Const):
        return Linear(int(e.value))
    atom = e.x if isinstance(e, n.Cast) and e.x.type.is_int and e.x.type.bits <= 32 else e
    return Linear(0, ((atom, 1),))


def _constant_check(op: str, low: Linear, high: Linear) -> n.Expr:
    """``d op 0`` has the same value for every d in [low, high] (both i64 linear forms)."""
    lo, hi = linear_ir(low), linear_ir(high)
    zero = const64(0)

    def cmp(o: str, a: n.Expr) -> n.Expr:
        return n.Binary(o, a, zero)

    if op in ("lt", "ge"):  # d < 0 everywhere, or nowhere
        return n.Binary("lor", cmp("lt", hi), cmp("ge", lo))
    if op in ("le", "gt"):
        return n.Binary("lor", cmp("le", hi), cmp("gt", lo))
    # eq / ne: zero outside [low, high], or the whole range is {0}
    return n.Binary("lor", n.Binary("lor", cmp("gt", lo), cmp("lt", hi)), n.Binary("land", cmp("ge", lo), cmp("le", hi)))


def _decide(stmts: tuple[n.Stmt, ...], flag: str, value: bool) -> tuple[n.Stmt, ...]:
    """``stmts`` with ``if (flag)`` resolved to the branch that ``flag == value`` takes."""

    class Decide(Mutator):
        def visit_If(self, s: n.If):
            s = self.generic_visit(s)
            if s.cond == n.Var(flag, BOOL):
                return s.then if value else s.orelse
            return s

    return Decide().visit_block(stmts)


def _ifs(stmts: tuple[n.Stmt, ...]) -> list[n.If]:
    """The ifs in ``stmts`` (outer first), outside nested thread loops, ``while`` updates and the
    originals kept by run-time checks."""
    finder = _FindIfs()
    finder.visit_block(stmts)
    return finder.found


class _FindIfs(Visitor):
    def __init__(self) -> None:
        self.found: list[n.If] = []

    def visit_Expr(self, e: n.Expr) -> None:
        pass

    def visit_If(self, s: n.If) -> None:
        self.found.append(s)
        self.visit_block(s.then)
        if not is_check(s.cond):
            self.visit_block(s.orelse)

    def visit_For(self, s: n.For) -> None:
        if s.kind != "threads":
            self.visit_block(s.body)

    def visit_While(self, s: n.While) -> None:
        self.visit_block(s.body)


def atomic_flags(loop: n.For, uniform: Callable[[n.Expr], n.Expr | None], names: NameSupply,
                 limit: int = MAX_UNSWITCHED) -> tuple[n.For, list[n.Decl], list[str]]:
    """Block-level booleans worth one copy of ``loop`` each: the conditions of the ``if`` s of
    its body (statements of the body itself, not of inner blocks) one of whose branches holds an
    atomic update (a gradient's ``if (x_private) plain += else atomicAdd``,
    ``autodiff.accumulation``) and that depend neither on the counter (``uniform``: the
    condition as it may be evaluated before the loop, or None) nor on anything the loop writes.
    The copy where such a flag selects the plain branch has no atomic, and its lanes can then be
    proved independent (``codegen.lanes``): a vector loop. The value is the same in every thread
    and iteration, so deciding it once before the loop changes nothing.

    Returns ``loop`` with each such condition replaced by its flag, the flags' declarations
    (``var f: bool = <condition>``, to go before the loop; none for a condition that is a flag
    already) and the flags' names, at most ``limit``."""
    written = written_names(loop.body)
    flags: dict[n.Expr, n.Var] = {}
    decls: list[n.Decl] = []
    for s in loop.body:
        if not isinstance(s, n.If) or len(flags) >= limit or s.cond in flags \
                or not any(walk_only(s.then + s.orelse, n.AtomicRMW)):
            continue
        u = uniform(s.cond)
        if u is None or not u.type.is_bool or any(isinstance(x, n.Var) and x.name in written for x in walk(u)):
            continue
        if isinstance(s.cond, n.Var) and u == s.cond:
            flags[s.cond] = s.cond
            continue
        flag = n.Decl(names.fresh(f"{stem_of(loop.var)}_atomic"), BOOL, u, loc=s.loc)
        flags[s.cond] = n.Var(flag.name, BOOL)
        decls.append(flag)
    replaced = {c: v for c, v in flags.items() if c != v}
    if replaced:
        body = tuple(dataclasses.replace(s, cond=replaced[s.cond]) if isinstance(s, n.If) and s.cond in replaced
                     else s for s in loop.body)
        loop = dataclasses.replace(loop, body=body)
    return loop, decls, [v.name for v in flags.values()]


def flag_copies(loop: n.For, flags: list[str], *, names: NameSupply,
                finish: Callable[[n.For], list[n.Stmt]]) -> list[n.Stmt]:
    """``version_loop`` where each copy's final form is a list of statements (``finish``)."""
    if not flags:
        return finish(loop)
    flag, rest = flags[0], flags[1:]
    copies = []
    for value in (True, False):
        copy = copy_loop(loop, names, body=_decide(loop.body, flag, value), fresh=not value)
        copies.append(tuple(flag_copies(copy, rest, names=names, finish=finish)))
    return [n.If(n.Var(flag, BOOL), copies[0], copies[1], loc=loop.loc)]
