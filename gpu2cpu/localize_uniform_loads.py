"""localize_uniform_loads: the elements every thread of a loop reads from a read-only array,
read once before the loop.

Requires: a CPU-form kernel. Guarantees: same results (for kernels that are race-free under
CUDA's rules); loads that every iteration of a thread loop makes at the same addresses read a
copy made before the loop instead.

A filter's taps, read by every thread at indices that depend only on the thread's own
constant-trip loops (``w[k + 3]`` under ``for k in [-3, 4)``), are loaded again in every vector
iteration of the loop over threads: the compiler may not keep them in registers, since the
thread's store to ``out`` may alias ``w``. Here, per loop over threads (innermost, not
``ordered``)::

    for tx in [lo, hi):                    if (lo < hi) {
      acc = 0                                for q in [0, 7): w_tab[q] = w[q]
      for k in [-3, 4):            ==>       for tx in [lo, hi):
        acc = acc + w[k + 3] * s[..]           acc = 0
      out[...] = acc                           for k in [-3, 4): acc = acc + w_tab[k + 3] * s[..]
                                               out[...] = acc
                                           }

``w_tab`` is an array of the block function's own frame (``Buffer.frame``: never a parameter's
storage), of at most ``MAX_TABLE`` elements; a load at an index that does not change in the
loop at all (``coef[k]`` with ``k`` uniform) becomes a local scalar instead. The copy reads exactly the elements the loop would: a load
qualifies when

* its array is a pointer parameter the kernel never writes;
* every iteration makes it, with all the index values listed: it is not under an ``if``, a
  ``?:``, the right operand of ``&&``/``||``, or a loop other than counted ones with constant
  bounds that run at least once, and the loop over threads contains no ``break``, ``continue``
  or ``return``; its index is built from constants and those loops' counters (every
  combination evaluated: at most ``MAX_COMBINATIONS``), or from values the loop does not change;
* no store that may alias the array (``polypy.poly.alias``) comes before it in an iteration:
  its top-level statement in the loop comes before the first that stores (or is that very
  statement, a plain store whose operands make the load). A load equal to it elsewhere in the
  loop (the same index of the same counters) reads the copy too, under the same condition.

Another thread's store to memory a thread of the same loop reads is a data race in CUDA (no
barrier lies between two iterations of a loop over threads), so the copy made before the loop
is a value the original may read; a thread's own earlier store is excluded above.
"""
from __future__ import annotations

import dataclasses
import itertools
import math

from polypy.ir import nodes as n
from polypy.ir.queries import buffers_written, declared_names, written_names
from polypy.ir.types import PointerType
from polypy.ir.printer import format_expr
from polypy.ir.rewrite import rename_locals
from polypy.ir.visitor import Mutator, has_kind, iter_children, walk, walk_only
from polypy.passes.fold_constants import fold_expr
from polypy.poly.alias import alias_kind

from gpu2cpu.report import LoweringDecision
from gpu2cpu.thread_loops import ThreadLoopStep, rewrite_cpu_body

MAX_COMBINATIONS = 1024  # index values evaluated per load (the product of its loops' trip counts)
# Elements of one copy (from the smallest index to the largest): few enough that the compiler keeps
# them in vector registers across the loop. Measured: stencil1d's 7 taps 0.82-0.88 -> 0.84-1.53 of
# the OpenMP port (six bench runs); conv2d's 25 taps 0.95 -> 0.80-0.93, the broadcast taps spilled.
MAX_TABLE = 16

_JUMPS = (n.Break, n.Continue, n.Return)
_INDEX_OPS = ("add", "sub", "mul")


def localize_uniform_loads(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """Copy what every thread of a loop reads from read-only arrays before the loop (see the module
    docstring)."""
    return rewrite_cpu_body(kernel, _Localizer, what="localize_uniform_loads", report=report)


@dataclasses.dataclass(frozen=True)
class _Use:
    """A qualifying load in the loop body: ``loops`` are the counted loops around it (innermost last),
    ``top`` the position of its top-level statement."""

    load: n.Load
    loops: tuple[n.For, ...]
    top: int


class _Localizer(ThreadLoopStep):
    def __init__(self, kernel: n.Kernel):
        super().__init__(kernel)
        self.written = buffers_written(kernel.body)
        self.tables: list[n.Buffer] = []

    def kernel_fields(self) -> dict:
        return {"buffers": self.kernel.buffers + tuple(self.tables)}

    def visit_For(self, s: n.For):
        s = self.generic_visit(s)
        if s.kind != "threads" or s.ordered:
            return s
        if has_kind(s.body, _JUMPS) or any(x.kind == "threads" for x in walk_only(s.body, n.For)):
            return s
        return self.localize(s)

    def readonly(self, buffer: str) -> bool:
        p = self.kernel.param(buffer)
        return p is not None and isinstance(p.ptype, PointerType) and buffer not in self.written

    def localize(self, loop: n.For) -> n.Stmt | tuple[n.Stmt, ...]:
        uses = [u for u in _unconditional_loads(loop.body) if self.readonly(u.load.buffer)]
        changed = written_names(loop.body) | declared_names(loop.body) | {loop.var}
        copies: list[n.Stmt] = []
        replaced: list[tuple[int, dict[n.Load, n.Expr]]] = []  # (statements reading the copy, loads -> copy)
        notes: list[str] = []
        for buffer in sorted({u.load.buffer for u in uses}):
            cut = self.readable_prefix(loop.body, buffer)
            mine = [u for u in uses if u.load.buffer == buffer and u.top < cut]
            replace: dict[n.Load, n.Expr] = {}
            made, what = self.localize_buffer(buffer, mine, changed, replace) if mine else ([], [])
            if made:
                copies += made
                replaced.append((cut, replace))
                notes += what
        if not copies:
            return loop
        self.note(loop, f"loop over {loop.var}: {', '.join(notes)} read once before the loop, not by every thread")
        body: list[n.Stmt] = []
        for k, stmt in enumerate(loop.body):
            # A load equal to a localized one (same index, same counters) reads the copy too, but
            # only where no store that may alias the array has come first.
            here = {load: copy for cut, replace in replaced if k < cut for load, copy in replace.items()}
            body += _ReplaceLoads(here).visit_block((stmt,)) if here else [stmt]
        moved = dataclasses.replace(loop, body=tuple(body))
        runs = fold_expr(n.Binary("lt", loop.start, loop.stop, loc=loop.loc))
        if isinstance(runs, n.Const) and runs.value:
            return (*copies, moved)
        return n.If(runs, (*copies, moved), loc=loop.loc)

    def readable_prefix(self, body: tuple[n.Stmt, ...], buffer: str) -> int:
        """How many of the loop body's top-level statements read ``buffer`` before any store that may
        alias it: those before the first statement that stores, and that one too when it is a plain
        store (its operands are read before it writes)."""
        for k, stmt in enumerate(body):
            if any(isinstance(x, (n.Store, n.AtomicRMW)) and alias_kind(self.kernel, x.buffer, buffer) is not None
                   for x in walk(stmt)):
                return k + 1 if isinstance(stmt, n.Store) else k
        return len(body)

    def localize_buffer(self, buffer: str, uses: list[_Use], changed: set[str],
                        replace: dict[n.Load, n.Expr]) -> tuple[list[n.Stmt], list[str]]:
        """The copies of ``buffer``'s elements that ``uses`` read, filling ``replace``, and what they
        read for the report (``w[5]``, ``w[0..6] (into w_tab)``)."""
        ty = self.kernel.elem_type(buffer)
        scalars: dict[n.Expr, str] = {}
        tabled: dict[n.Load, list[int]] = {}
        for u in uses:
            (index,) = u.load.index
            if _invariant(index, changed):
                if index not in scalars:
                    scalars[index] = self.names.fresh(f"{buffer}_u")
                replace[u.load] = n.Var(scalars[index], ty, loc=u.load.loc)
                continue
            values = _index_values(index, u.loops)
            if values is not None:
                tabled[u.load] = values
        out: list[n.Stmt] = [n.Decl(name, ty, n.Load(buffer, (index,), ty, loc=index.loc), loc=index.loc)
                             for index, name in scalars.items()]
        what = [f"{buffer}[{format_expr(index)}]" for index in scalars]
        if not tabled:
            return out, what
        elements = sorted({v for vs in tabled.values() for v in vs})
        lo, hi = elements[0], elements[-1]
        if hi - lo + 1 > MAX_TABLE:
            return out, what
        table = self.names.fresh(f"{buffer}_tab")
        first = next(iter(tabled))
        ity = first.index[0].type
        loc = first.loc
        self.tables.append(n.Buffer(table, ty, (n.Const(hi - lo + 1, ity),), "shared", frame=True))
        for load in tabled:
            at = fold_expr(n.Binary("sub", load.index[0], n.Const(lo, load.index[0].type), loc=loc))
            replace[load] = n.Load(table, (at,), ty, loc=load.loc)
        if len(elements) == hi - lo + 1:  # every element from lo to hi: one loop
            q = self.names.fresh("q")
            at = fold_expr(n.Binary("sub", n.Var(q, ity), n.Const(lo, ity)))
            copy = n.Store(table, (at,), n.Load(buffer, (n.Var(q, ity),), ty, loc=loc), loc=loc)
            out.append(n.For(q, ity, n.Const(lo, ity), n.Const(hi + 1, ity), n.Const(1, ity), (copy,), loc=loc))
            what.append(f"{buffer}[{lo}..{hi}] (into {table})")
        else:
            out += [n.Store(table, (n.Const(v - lo, ity),), n.Load(buffer, (n.Const(v, ity),), ty, loc=loc), loc=loc)
                    for v in elements]
            what.append(f"{len(elements)} elements of {buffer} (into {table})")
        return out, what


def _constant_trips(loop: n.For) -> range | None:
    """The counter's values of a counted loop with constant bounds that runs at least once."""
    bounds = (loop.start, loop.stop, loop.step)
    if not all(isinstance(b, n.Const) and b.type.is_int for b in bounds):
        return None
    values = range(int(loop.start.value), int(loop.stop.value), int(loop.step.value))  # type: ignore[union-attr]
    return values if loop.step.value > 0 and len(values) > 0 else None  # type: ignore[union-attr, operator]


def _unconditional_loads(body: tuple[n.Stmt, ...]) -> list[_Use]:
    """The loads every iteration of a loop with body ``body`` makes, with their counted loops."""
    out: list[_Use] = []

    def expr(e: n.Expr, loops: tuple[n.For, ...], top: int) -> None:
        if isinstance(e, n.Select):
            expr(e.cond, loops, top)
            return
        if isinstance(e, n.Binary) and e.op in ("land", "lor"):
            expr(e.a, loops, top)
            return
        if isinstance(e, n.Load):
            out.append(_Use(e, loops, top))
        for child in iter_children(e):
            expr(child, loops, top)  # type: ignore[arg-type]

    # A recursion, not a Visitor: each use is recorded with the loops around it and the position
    # of its top-level statement, both passed down.
    def block(stmts: tuple[n.Stmt, ...], loops: tuple[n.For, ...], top: int | None) -> None:
        for k, s in enumerate(stmts):
            at = k if top is None else top
            if isinstance(s, n.If):
                expr(s.cond, loops, at)
            elif isinstance(s, n.For):
                for e in (s.start, s.stop, s.step):
                    expr(e, loops, at)
                if _constant_trips(s) is not None:
                    block(s.body, loops + (s,), at)
            elif isinstance(s, n.While):
                continue
            else:
                for child in iter_children(s):
                    if isinstance(child, n.Expr):
                        expr(child, loops, at)

    block(body, (), None)
    return out


def _invariant(index: n.Expr, changed: set[str]) -> bool:
    """Built from values the loop does not change (no loads, no thread index)."""
    return not has_kind(index, n.Load, n.GpuIndex) and not any(x.name in changed for x in walk_only(index, n.Var))


def _index_values(index: n.Expr, loops: tuple[n.For, ...]) -> list[int] | None:
    """Every value ``index`` takes over its counted loops, or None when it uses anything else."""
    counters = {loop.var: loop for loop in loops}
    used: list[n.For] = []
    for x in walk(index):
        if isinstance(x, n.Var):
            if x.name not in counters:
                return None
            if counters[x.name] not in used:
                used.append(counters[x.name])
        elif isinstance(x, n.Binary):
            if x.op not in _INDEX_OPS:
                return None
        elif not isinstance(x, (n.Const, n.Cast)) or not x.type.is_int:
            return None
    trips = [_constant_trips(loop) or range(0) for loop in used]  # counted loops: never empty
    if math.prod(len(t) for t in trips) > MAX_COMBINATIONS:
        return None
    values = []
    for combination in itertools.product(*trips):
        bound = {n.Var(loop.var, loop.vtype): n.Const(v, loop.vtype) for loop, v in zip(used, combination)}
        value = fold_expr(rename_locals(index, {}, values=bound))
        if not isinstance(value, n.Const):
            return None
        values.append(int(value.value))
    return values


class _ReplaceLoads(Mutator):
    def __init__(self, replace: dict[n.Load, n.Expr]):
        self.replace = replace

    def visit_Load(self, e: n.Load) -> n.Expr:
        found = self.replace.get(e)
        return found if found is not None else self.generic_visit(e)
