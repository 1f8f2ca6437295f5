"""Locals holding a pointer read from a record, seen through by the race warnings.

``float *p = d_bufs[bx].a; p[t] = v;`` is lowered to a local holding the pointer's offset into
the pool (``frontend/lower/held_pointers.py``) and accesses of the pool at it::

    var p_off: i64 = (i64)(d_bufs_u64[bx * 2u] - base) / 4l
    d_bufs_f32_pool[p_off + (i64)t] = v

The name hides the slot the pointer was read from, which ``held_index`` needs to judge the access
(``polypy.poly.held``). ``forward_held_locals`` writes, in the index of each pool access, the
value each such local *certainly* holds there (``pool[(i64)(d_bufs_u64[bx * 2u] - base) / 4l +
(i64)t]``): the same value, for the race warnings only.

Which value a local certainly holds is a forward walk over the structured body, a map ``name ->
value`` at each statement:

* ``Decl``/``Assign`` of a value that reads a held pointer (``held.pointer_read``) and no other
  memory than ``__constant__`` (no call either): the local holds that value, written with the
  values the locals it reads hold just before (``p = p + 1`` after ``p = d.a`` holds ``d.a + 1``);
* any definition of a local (also a loop counter, an atomic's or a warp operation's result)
  forgets what the local held and every value that reads it, which would mean another value now;
* ``if``: what both branches leave (the same value in both: ``p = d.a`` in one branch only, or
  ``d.a`` in one and ``d.b`` in the other, is no value);
* a loop: before its header and throughout, what held before it less every local the loop
  defines (``p++`` in a loop: no value), the same after it (a ``break`` leaves from the body).

The record's pointers cannot change during a launch (``polypy.poly.held``) nor can
``__constant__`` memory, so a value kept reads, at the access, what it read at the definition.
Everywhere else the access stays a may-access, judged by nothing (no warning, and no false one).
"""
from __future__ import annotations

from typing import TypeVar

from polypy.ir import nodes as n
from polypy.ir.queries import definition_counts, read_names, substitute_lets
from polypy.ir.visitor import Mutator, rebuild, walk
from polypy.poly.held import held_pools, pointer_read
from polypy.poly.index_shapes import signed_terms

Values = dict[str, n.Expr]
_Access = TypeVar("_Access", n.Load, n.Store, n.AtomicRMW)

# The expressions a kept value may hold besides its loads (no calls: ``clock()`` is not one value).
_PURE = (n.Const, n.Var, n.GpuIndex, n.Unary, n.Binary, n.Select, n.Cast)


def forward_held_locals(kernel: n.Kernel) -> n.Kernel:
    """``kernel`` with the value each local holding a held pointer's offset certainly holds
    written in the indices of the pool accesses that read it (the same meaning; see above)."""
    if not kernel.held_pointers:
        return kernel
    constant = frozenset(b.name for b in kernel.buffers if b.space == "constant")
    return _Forward(held_pools(kernel), constant).visit(kernel)


class _Forward(Mutator):
    def __init__(self, pools: dict[str, n.HeldPointerSlots], constant: frozenset[str]):
        self.pools = pools
        self.constant = constant
        self.values: Values = {}  # the values known at the statement being visited

    # ---------------------------------------------------------------- accesses
    def visit_Load(self, e: n.Load) -> n.Expr:
        e = self.generic_visit(e)
        return self._at(e)

    def visit_Store(self, s: n.Store) -> n.Stmt:
        return self._at(self.generic_visit(s))

    def visit_AtomicRMW(self, s: n.AtomicRMW) -> n.Stmt:
        return self._at(self.generic_visit(s))

    def _at(self, x: _Access) -> _Access:
        """``x`` (an access) with the values known here written in its index, if of a pool."""
        if x.buffer not in self.pools or not self.values:
            return x
        return rebuild(x, index=tuple(substitute_lets(i, self.values) for i in x.index))

    # ---------------------------------------------------------------- the walk
    def visit_block(self, block: tuple[n.Stmt, ...]) -> tuple[n.Stmt, ...]:
        out = []
        for s in block:
            before = self.values
            out.append(self.visit(s))
            if not isinstance(s, (n.If, n.For, n.While)):
                self.values = self._after(s, before)
        return block if all(a is b for a, b in zip(out, block)) else tuple(out)

    def _after(self, s: n.Stmt, before: Values) -> Values:
        """The values known after the simple statement ``s``, ``before`` known before it."""
        values = _forget(before, set(definition_counts((s,))))
        value = s.init if isinstance(s, n.Decl) else s.value if isinstance(s, n.Assign) else None
        if value is not None:
            value = substitute_lets(value, before)
            if s.name not in read_names(value) and self._kept(value):
                values[s.name] = value
        return values

    def _kept(self, value: n.Expr) -> bool:
        """Whether ``value`` is a held pointer's offset that means one value while it is kept:
        it reads a held pointer, and no memory that can change during the launch."""
        if not any(pointer_read(slots, term) is not None
                   for slots in self.pools.values() for _, term in signed_terms(value, 1)):
            return False
        nodes = list(walk(value))
        reads = {id(r) for x in nodes for slots in self.pools.values()
                 if (r := pointer_read(slots, x)) is not None}
        return all(x.buffer in self.constant or id(x) in reads if isinstance(x, n.Load) else isinstance(x, _PURE)
                   for x in nodes)

    def visit_If(self, s: n.If) -> n.Stmt:
        cond = self.visit(s.cond)
        entry = self.values
        then = self.visit_block(s.then)
        after_then, self.values = self.values, entry
        orelse = self.visit_block(s.orelse)
        self.values = {k: v for k, v in self.values.items() if after_then.get(k) == v}
        return rebuild(s, cond=cond, then=then, orelse=orelse)

    def visit_For(self, s: n.For) -> n.Stmt:
        start = self.visit(s.start)
        head = self.values = _forget(self.values, set(definition_counts((s,))) | {s.var})
        stop, step = self.visit(s.stop), self.visit(s.step)
        body = self.visit_block(s.body)
        self.values = head
        return rebuild(s, start=start, stop=stop, step=step, body=body)

    def visit_While(self, s: n.While) -> n.Stmt:
        head = self.values = _forget(self.values, set(definition_counts((s,))))
        cond = self.visit(s.cond)
        body = self.visit_block(s.body)
        self.values = head
        update = self.visit_block(s.update)
        self.values = head
        return rebuild(s, cond=cond, body=body, update=update)


def _forget(values: Values, names: set[str]) -> Values:
    """``values`` less those of ``names`` and those reading one of them."""
    if not names:
        return dict(values)
    return {k: v for k, v in values.items() if k not in names and not read_names(v) & names}

