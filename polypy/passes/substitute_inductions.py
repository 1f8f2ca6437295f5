"""substitute_inductions: locals a loop steps by a fixed amount become functions of its counter.

Requires: unique local names (the frontend's). Guarantees: the same results.

Rodinia's hotspot3D walks a column of its grid with ``c += xy; W += xy; ...`` in a loop over the
layers. Carried from one iteration to the next, each such local is a value every thread keeps
across the loop: once the threads are loops (the thread loop inside the layer loop, where it
vectorizes), a per-thread buffer stored and reloaded in every iteration, and every access through
it a gather. Written as a function of the counter and of its value on entry, the local is an
affine expression of the thread index again, which the thread loop recomputes instead of
storing (``sink-thread-loops``: values defined once by a cheap expression) and isl can see::

    var c                                 var c = ...           (declared where first assigned)
    c = ...                               for k = 1 to nz - 1 step 1 {
    for k = 1 to nz - 1 step 1 {            var c_1 = (i32)((i64)c + ((i64)k - 1) * (i64)xy)
      tOut[c] = ... tIn[c + xy] ...   ==>   tOut[c_1] = ... tIn[c_1 + xy] ...
      c = c + xy                            var c_2 = c_1 + xy                (as the source adds)
      ... c ...                             ... c_2 ...
    }                                     }
    ... c ...                             var c_3 = (i32)((i64)c + max((i64)(nz - 1) - 1, 0) * (i64)xy)
                                          ... c_3 ...

``c`` keeps its value on entry, the value after the loop is a new local: so where ``c`` is
declared in the loop's own statement list and not written after the loop. Otherwise (declared
further out, or written again later) its value on entry is copied before the loop and the value
after the loop assigned to it.

Exact: the j-th iteration's value is ``c_0 + j * d`` computed in 64 bits and converted to 32, the
value j additions in 32 bits give (wrapped, where they wrap): ``|j| < 2^32`` and ``|d| <= 2^31``
keep ``c_0 + j * d`` inside the 64-bit range. A ``u32`` local is computed in ``u64``, where all of
it is modulo 2^64. The value after the loop is computed again the same way (dead, and removed,
where nothing reads it).

A local ``v`` is substituted in a serial ``For`` with step 1 and a 32-bit counter when:

* ``v`` is an ``i32`` or ``u32`` local written in the loop only by one statement of the body
  itself (not nested in an ``if`` or a loop): ``v = v + d``, ``v = d + v`` or ``v = v - d``;
* ``d`` reads no memory, and no local the loop writes or declares (nor the counter);
* the loop's start and stop read no memory and no local the loop writes or declares (the closed
  form and the value after the loop compute them again);
* no ``break``, ``continue`` or ``return`` leaves the body (each iteration reaches the update).
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.jumps import jumps_out
from polypy.ir.names import NameSupply
from polypy.ir.queries import declared_names, definition_counts, has_load, read_names, written_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.types import I32, I64, U32, U64, ScalarType
from polypy.ir.visitor import Mutator, walk_only

_WIDE: dict[ScalarType, ScalarType] = {I32: I64, U32: U64}


def substitute_inductions(kernel: n.Kernel) -> n.Kernel:
    """Loop-carried locals stepped by a fixed amount as closed forms; see the module docstring."""
    if not any(x.kind == "serial" for x in walk_only(kernel, n.For)):
        return kernel
    return _Substitute(kernel).visit(kernel)


class _Substitute(Mutator):
    def __init__(self, kernel: n.Kernel):
        self.names = NameSupply.for_kernel(kernel)

    def visit_block(self, block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        block = super().visit_block(block)  # inner loops first
        original = block
        out: list[n.Stmt] = []
        for p in range(len(block)):
            s = block[p]  # later statements may have been renamed (below)
            if not isinstance(s, n.For):
                out.append(s)
                continue
            rest = block[p + 1:]
            # Locals declared in this block before the loop and not written after it: nothing
            # outside the block reads them, so reads after the loop can take a new local for the
            # value after it, and the local itself keeps its value on entry (no copy needed).
            scoped = {d.name for d in out if isinstance(d, n.Decl)} - written_names(rest) - declared_names(rest)
            loop, entries, finals = self.substitute(s, scoped)
            out.extend(entries)
            out.append(loop)
            renames: dict[str, str] = {}
            for v, vt, value in finals:
                if v in scoped:
                    _declare_at_assignment(out, v)
                    renames[v] = self.names.fresh(v)
                    out.append(n.Decl(renames[v], vt, value, loc=s.loc))
                else:
                    out.append(n.Assign(v, value, loc=s.loc))
            if renames:
                block = block[:p + 1] + rename_locals(rest, renames)
        unchanged = len(out) == len(original) and all(a is b for a, b in zip(out, original))
        return original if unchanged else tuple(out)

    def substitute(self, loop: n.For, scoped: set[str]) -> tuple[n.For, list[n.Stmt], list[tuple[str, ScalarType, n.Expr]]]:
        """``loop`` with its inductions substituted; the declarations of their values on entry
        (before the loop) and (local, type, value after the loop) for each."""
        if loop.kind != "serial" or loop.vtype not in _WIDE or not _is_one(loop.step) or jumps_out(loop.body):
            return loop, [], []
        changed = written_names(loop.body) | declared_names(loop.body) | {loop.var}
        if not all(_invariant(e, changed) for e in (loop.start, loop.stop)):
            return loop, [], []
        updates = [(i, s, _step(s, changed)) for i, s in enumerate(loop.body)]
        updates = [(i, s, d) for i, s, d in updates if d is not None and definition_counts(loop.body)[s.name] == 1]
        entries: list[n.Stmt] = []
        finals: list[tuple[str, ScalarType, n.Expr]] = []
        body = loop.body
        for moved, (at, update, (op, d)) in enumerate(updates):
            i = at + moved  # each round declares one more local at the top of the body
            v = update.name
            vt = update.value.type
            wide = _WIDE[vt]
            entry = v
            if v not in scoped:  # assigned again after the loop: its value on entry is copied
                entry = self.names.fresh(v)
                entries.append(n.Decl(entry, vt, n.Var(v, vt, loc=update.loc), loc=loop.loc))
            at_top = self.names.fresh(v)
            stepped = self.names.fresh(v)
            # Iterations counted in i64 (a 32-bit counter's differences fit), then widened.
            j = _cast(wide, n.Binary("sub", _cast(I64, n.Var(loop.var, loop.vtype)), _cast(I64, loop.start)))
            top = n.Decl(at_top, vt, _closed(entry, vt, op, d, j), loc=update.loc)
            step = n.Decl(stepped, vt, n.Binary(op, n.Var(at_top, vt), d, loc=update.value.loc), loc=update.loc)
            body = (top,) + rename_locals(body[:i], {v: at_top}) + (step,) + rename_locals(body[i + 1:], {v: stepped})
            trips = n.Binary("sub", _cast(I64, loop.stop), _cast(I64, loop.start))
            none = n.Const(0, I64)
            trips = _cast(wide, n.Select(n.Binary("gt", trips, none), trips, none))
            finals.append((v, vt, _closed(entry, vt, op, d, trips)))
        if not updates:
            return loop, [], []
        return dataclasses.replace(loop, body=body), entries, finals


def _closed(entry: str, vt: ScalarType, op: str, d: n.Expr, j: n.Expr) -> n.Expr:
    """``(vt)((wide)entry op j * (wide)d)``."""
    wide = _WIDE[vt]
    moved = n.Binary("mul", j, _cast(wide, d))
    return _cast(vt, n.Binary(op, _cast(wide, n.Var(entry, vt)), moved))


def _cast(t: ScalarType, e: n.Expr) -> n.Expr:
    return e if e.type == t else n.Cast(t, e)


def _step(s: n.Stmt, changed: set[str]) -> tuple[str, n.Expr] | None:
    """(``add`` or ``sub``, d) where ``s`` is ``v = v + d``, ``v = d + v`` or ``v = v - d`` on a
    32-bit integer local with ``d`` invariant in the loop."""
    if not isinstance(s, n.Assign) or not isinstance(s.value, n.Binary) or s.value.type not in _WIDE:
        return None
    e = s.value
    mine = lambda x: isinstance(x, n.Var) and x.name == s.name  # noqa: E731
    if e.op == "add" and mine(e.a) and _invariant(e.b, changed):
        return "add", e.b
    if e.op == "add" and mine(e.b) and _invariant(e.a, changed):
        return "add", e.a
    if e.op == "sub" and mine(e.a) and _invariant(e.b, changed):
        return "sub", e.b
    return None


def _invariant(e: n.Expr, changed: set[str]) -> bool:
    return not has_load(e) and not (read_names(e) & changed)


def _is_one(e: n.Expr) -> bool:
    return isinstance(e, n.Const) and e.value == 1


def _declare_at_assignment(out: list[n.Stmt], v: str) -> None:
    """``var v; ...; v = e`` in ``out`` (its only two writes, ``v`` not read in between) as
    ``...; var v = e``: written once by its declaration, the value on entry of a substituted
    local is one the thread loops recompute rather than store (``serialize-threads``)."""
    decl = next((i for i, s in enumerate(out) if isinstance(s, n.Decl) and s.name == v), None)
    if decl is None or out[decl].init is not None or definition_counts(out)[v] != 2:
        return
    at = next((i for i in range(decl + 1, len(out)) if isinstance(out[i], n.Assign) and out[i].name == v), None)
    if at is None or v in read_names(out[decl + 1:at + 1]):
        return
    assign = out[at]
    out[at] = n.Decl(v, out[decl].vtype, assign.value, loc=assign.loc)
    del out[decl]
