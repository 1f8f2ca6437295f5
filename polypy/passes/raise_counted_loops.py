"""raise_counted_loops: ``while`` loops that count from a start to a fixed bound become ``For`` loops.

Requires: unique local names (the frontend's). Guarantees: the same results.

The frontend builds a ``For`` only from ``for (int i = a; i < b; i += s)`` with the counter
declared in the header. C code often declares the counter earlier (Rodinia's cfd: ``int j, nb;
... for (j = 0; j < NNB; j++)``), which the frontend lowers to an assignment and a ``While``.
Every later stage knows more about a ``For``: isl models it as an affine loop, the scheduler sees
its constant trip count (a short loop stays inside the thread loop, unrolled by the compiler,
instead of being interchanged with it through per-thread buffers), the gradient sizes its tape
from the bounds::

    j = 0                                for j_1: i32 = 0 to 4 step 1 {
    while (j < 4) {                        ... j_1 ...
      ... j ...                   ==>    }
    } update { j = j + 1 }               j = 4            (the counter's value after the loop;
                                                           dead and removed when nothing reads it)

Raised when, as the frontend's own test for ``For`` (``frontend.lower.loops``) asks:

* the condition is ``v < b``, ``v <= b``, ``b > v`` or ``b >= v`` (``<=`` not on unsigned
  counters) with ``b`` of the counter's type; the update is the single ``v = v + s``;
  ``while (v < b) { ...; v = v + s }`` (lavaMD's block-stride loops) counts too when no
  ``continue`` skips that last statement;
* ``b`` and ``s`` read no memory and no local that the loop writes, ``v`` is written by nothing
  in the body, and no ``break`` leaves the loop (``continue`` goes to the update in both forms);
* the loop starts from the value assigned to ``v`` right before it (that assignment goes), or
  else from ``v``'s value on entry (``for v_1 = v to b``);
* where ``v`` is read after the loop, its final value is computed again from the start and the
  bound (which then must read no memory and nothing the loop writes), for a constant step.
"""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.jumps import jumps_out
from polypy.ir.names import NameSupply
from polypy.ir.queries import has_load, read_counts, read_names, written_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.visitor import Mutator, has_kind, walk_only

_FLIPPED = {"gt": "lt", "ge": "le"}


def raise_counted_loops(kernel: n.Kernel, *, fixed: frozenset[str] = frozenset()) -> n.Kernel:
    """Counted ``While`` loops as ``For`` loops; see the module docstring. ``fixed``: arrays whose
    loads a bound or step may read (``__constant__`` arrays: one value per launch); the race
    warnings ask for them (``polypy.poly.race_report``), the pipeline does not."""
    if not has_kind(kernel, n.While):
        return kernel
    return _Raise(kernel, fixed).visit(kernel)


def _reads_memory(e: n.Expr, fixed: frozenset[str]) -> bool:
    return any(x.buffer not in fixed for x in walk_only(e, n.Load)) if fixed else has_load(e)


class _Raise(Mutator):
    def __init__(self, kernel: n.Kernel, fixed: frozenset[str] = frozenset()):
        self.fixed = fixed
        self.names = NameSupply.for_kernel(kernel)
        self.reads = read_counts(kernel.body)  # of the input kernel: reads outside a loop are its own

    def visit_block(self, items):  # type: ignore[override]
        items = super().visit_block(items)
        if not any(isinstance(s, n.While) for s in items):
            return items
        out: list = []
        changed = False
        for s in items:
            raised = self.raise_loop(out[-1] if out else None, s) if isinstance(s, n.While) else None
            if raised is None:
                out.append(s)
                continue
            used_init, loop_and_after = raised
            if used_init:
                init = out.pop()  # the start value is the For's start now
                if isinstance(init, n.Decl):
                    out.append(n.Decl(init.name, init.vtype, loc=init.loc))
            out.extend(loop_and_after)
            changed = True
        return tuple(out) if changed else items

    def raise_loop(self, before: n.Stmt | None, loop: n.While) -> tuple[bool, tuple[n.Stmt, ...]] | None:
        """(whether ``before`` is the start value's assignment, now the For's start; the For and
        the counter's final value), or None where ``loop`` does not count."""
        body, update = loop.body, loop.update
        if not update and body and isinstance(body[-1], n.Assign) and not jumps_out(body, n.Continue):
            body, update = body[:-1], body[-1:]  # while (c) { ...; v = v + s }
        if len(update) != 1 or not isinstance(update[0], n.Assign):
            return None
        var = update[0].name
        step = _step(update[0].value, var)
        bounds = _bound(loop.cond, var)
        if bounds is None or step is None:
            return None
        vtype, op, stop = bounds
        if not vtype.is_int or step.type != vtype or (op == "le" and not vtype.is_signed):
            return None
        written = written_names(body) | {var}
        if var in written_names(body) or jumps_out(body, n.Break):
            return None
        if any(_reads_memory(e, self.fixed) or read_names(e) & written for e in (stop, step)):
            return None
        # The start: the value assigned right before the loop, else the counter's value on entry
        # (not written in the loop: ``v`` after the loop still holds it).
        init = before if isinstance(before, (n.Assign, n.Decl)) and before.name == var else None
        start = (init.value if isinstance(init, n.Assign) else init.init) if init is not None else None
        if start is None or start.type != vtype:
            init, start = None, n.Var(var, vtype)
        if op == "le":
            stop = n.Binary("add", stop, n.Const(1, vtype))
        counter = self.names.fresh(var)
        raised = n.For(counter, vtype, start, stop, step, rename_locals(body, {var: counter}), loc=loop.loc)
        own_reads = read_counts((init, loop) if init is not None else loop)[var]
        if self.reads[var] <= own_reads:
            return init is not None, (raised,)  # nothing reads the counter after the loop (nor before it)
        after = _final_value(start, stop, step, written)
        if after is None:
            return None
        self.reads.update(read_counts(after))  # reads the enclosing loops' counters
        return init is not None, (raised, n.Assign(var, after, loc=loop.loc))


def _bound(cond: n.Expr, var: str):
    """(counter type, "lt" | "le", bound) of ``var < b``, ``var <= b``, ``b > var``, ``b >= var``."""
    if not isinstance(cond, n.Binary) or cond.op not in ("lt", "le", "gt", "ge"):
        return None
    a, b, op = cond.a, cond.b, cond.op
    if op in _FLIPPED:
        a, b, op = b, a, _FLIPPED[op]
    if not (isinstance(a, n.Var) and a.name == var) or read_names(b) & {var} or b.type != a.type:
        return None
    return a.type, op, b


def _step(value: n.Expr, var: str) -> n.Expr | None:
    """``s`` of ``var + s`` or ``s + var`` (``s`` not reading ``var``)."""
    if not (isinstance(value, n.Binary) and value.op == "add"):
        return None
    for mine, other in ((value.a, value.b), (value.b, value.a)):
        if isinstance(mine, n.Var) and mine.name == var and var not in read_names(other):
            return other
    return None


def _final_value(start: n.Expr, stop: n.Expr, step: n.Expr, written: set[str]) -> n.Expr | None:
    """The counter after ``for (v = start; v < stop; v += step)``: ``start`` when the loop does
    not run, else the first ``start + k * step >= stop``; None when it cannot be said here."""
    if not isinstance(step, n.Const) or step.value <= 0:
        return None
    if any(has_load(e) or read_names(e) & written for e in (start, stop)):
        return None
    t = start.type
    runs = n.Binary("lt", start, stop)
    if step.value == 1:
        last = stop
    else:  # start + ((stop - start - 1) / step + 1) * step
        trips = n.Binary("add", n.Binary("div", n.Binary("sub", n.Binary("sub", stop, start), n.Const(1, t)), step),
                         n.Const(1, t))
        last = n.Binary("add", start, n.Binary("mul", trips, step))
    return n.Select(runs, last, start)
