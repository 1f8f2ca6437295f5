"""jam_thread_loops: a few rows of threads at once, their serial loops run as one (register tiling).

Requires: a verified CPU-form kernel specialized for one block shape (``specialize_block_shape``:
thread loops with constant bounds). Guarantees: the same results, bit for bit.

A GEMM-like kernel (one thread per element of ``C``, ``acc += As[ty][k] * Bs[k][tx]`` in a loop
over ``k``) lowers to a loop over the rows of threads around the vector loop over ``tx``; each
row's ``k`` loop is one chain of dependent additions, and loads ``Bs[k][tx]`` again for every
row. Jamming ``J`` rows (``J`` threads ``ty, ty + 1, ...`` for each ``tx``) runs their ``k`` loops as
one, with ``J`` independent accumulators and one load of ``Bs[k][tx]`` for all of them::

    for threads ty = 0u to 16u {               for threads ty = 0u to 16u step 4u {
      for threads tx = 0u to 16u {               for threads tx = 0u to 16u {
        var acc = a[0u][ty][tx]          =>        var acc = a[0u][ty][tx]; var acc_1 = a[0u][ty + 1u][tx]; ...
        for k = 0 to 16 {                          for k = 0 to 16 {
          acc = acc + As[ty][k] * Bs[k][tx]          acc = acc + As[ty][k] * Bs[k][tx]
        }                                            acc_1 = acc_1 + As[ty + 1u][k] * Bs[k][tx]  ...
        a[0u][ty][tx] = acc                        }
                                                   a[0u][ty][tx] = acc; a[0u][ty + 1u][tx] = acc_1; ...

(matmul_tiled's block through C: 9.5 -> 8.5 ms; ``J = 4`` measured best of 2, 4, 8 and 16.)

Exact: every thread runs its own statements in its own order, with its own accumulator, so each
sum is computed as before; only statements of *different* threads of one barrier interval are
interleaved (the copies of each statement of the loop over ``tx``, and the copies of the jammed
loops' bodies, one after another). CUDA threads between two barriers may run in any interleaving
unless they race, which is undefined, or use atomics: so the body may use no atomics, warp
operations, barriers, jumps or ``while`` loops, assigns only locals it declares, and each store
to block-private memory (shared, per-thread: where ``lower_block_atomics`` turned atomics into a
load and a store) has an index component that moves with the jammed counter (``a[0u][ty][tx]``),
so the copies never touch one element of it. Neither loop may be ``ordered``.

Applied to a thread loop (constant bounds, at least ``J`` iterations, a multiple of ``J``: else 2)
whose body is one thread loop holding no other thread loop and at least one serial loop whose
bounds do not vary with the jammed counter and whose body loads something at an index that does
not either (the reuse: ``Bs[k][tx]``), within ``MAX_JAM_NODES`` IR nodes.
"""
from __future__ import annotations

from polypy.ir import nodes as n
from polypy.ir.names import NameSupply
from polypy.ir.queries import conjunction, declared_names, written_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.types import U32
from polypy.ir.visitor import Mutator, rebuild, substitute, walk, walk_block
from polypy.passes.fold_constants import fold_constants

JAM = 4
MAX_JAM_NODES = 4000

_REFUSED = (n.While, n.AtomicRMW, n.Shuffle, n.Vote, n.Barrier, n.Break, n.Continue, n.Return)


def jam_thread_loops(kernel: n.Kernel) -> n.Kernel:
    """``kernel`` with the jammable thread loops jammed (see the module docstring)."""
    private = {b.name for b in kernel.buffers if b.space in ("shared", "local")}
    jam = _Jam(NameSupply.for_kernel(kernel), private)
    body = jam.visit_block(kernel.body)
    return fold_constants(rebuild(kernel, body=body)) if jam.changed else kernel


class _Jam(Mutator):
    def __init__(self, names: NameSupply, private: set[str]):
        self.names = names
        self.private = private
        self.changed = False

    def visit_For(self, s: n.For) -> n.Stmt | tuple[n.Stmt, ...]:
        if s.kind != "threads":
            return self.generic_visit(s)
        jammed = self.jam(s)
        if jammed is None:
            return self.generic_visit(s)
        self.changed = True
        return jammed

    def jam(self, outer: n.For) -> n.For | None:
        if outer.ordered or len(outer.body) != 1 or not _constant(outer):
            return None
        start, stop, step = (int(e.value) for e in (outer.start, outer.stop, outer.step))
        trips = len(range(start, stop, step))
        factor = next((f for f in (JAM, 2) if trips >= f and trips % f == 0), None)
        if factor is None:
            return None
        counter = n.Var(outer.var, outer.vtype)
        only = outer.body[0]
        if isinstance(only, n.For):
            inner = self.jammed(only, counter, step, factor)
            return None if inner is None else rebuild(outer, step=n.Const(step * factor, U32), body=(inner,))
        # One row's loop versioned on a condition of the row (a no-wrap check of its indices):
        # the rows jammed where the condition holds for all of them, else each row as it was.
        if not (isinstance(only, n.If) and len(only.then) == 1 and isinstance(only.then[0], n.For)) or \
                any(isinstance(x, (n.Load, n.Call)) for x in walk(only.cond)):
            return None
        inner = self.jammed(only.then[0], counter, step, factor)
        if inner is None:
            return None
        rows = self.copies((only,), counter, step, factor, keep=set(), first=1)
        every = conjunction([substitute(only.cond, {counter: _shifted(counter, u * step)}) for u in range(factor)])
        version = n.If(every, (inner,), tuple(x for copy in rows for x in copy), loc=only.loc)
        return rebuild(outer, step=n.Const(step * factor, U32), body=(version,))

    def jammed(self, inner: n.For, counter: n.Var, step: int, factor: int) -> n.For | None:
        """The thread loop ``inner`` doing the work of ``factor`` rows of threads (``counter``,
        ``counter + step``, ...), its serial loops jammed; None where that is not exact or does
        not pay (see the module docstring)."""
        if inner.kind != "threads" or inner.ordered or \
                any(_mentions(e, counter) for e in (inner.start, inner.stop, inner.step)):
            return None
        body = inner.body
        declared = declared_names(body)
        if any(isinstance(x, _REFUSED) or (isinstance(x, n.For) and x.kind == "threads")
               for x in walk_block(body)):
            return None
        if written_names(body) - declared or sum(1 for _ in walk_block(body)) * factor > MAX_JAM_NODES:
            return None
        values = {n.Var(x.name, x.vtype): x.init for x in walk_block(body)
                  if isinstance(x, n.Decl) and x.init is not None and x.name not in written_names(body)}
        varying = {counter} | {n.Var(x.name, x.vtype) for x in walk_block(body) if isinstance(x, n.Decl)}
        for x in walk_block(body):
            if isinstance(x, n.Store) and x.buffer in self.private and \
                    not any(_moves(i, counter, values, varying) for i in x.index):
                return None
        loops = [i for i, x in enumerate(body) if isinstance(x, n.For) and x.kind == "serial"
                 and not any(_mentions(e, v) for e in (x.start, x.stop, x.step) for v in varying)]
        if not any(_reuses(body[i], values, varying) for i in loops):
            return None
        copies = self.copies(body, counter, step, factor, keep={body[i].var for i in loops})
        out: list[n.Stmt] = []
        for i, first in enumerate(body):
            if i in loops:
                out.append(rebuild(first, body=tuple(x for copy in copies for x in copy[i].body)))
            else:
                out.extend(copy[i] for copy in copies)
        return rebuild(inner, body=tuple(out))

    def copies(self, stmts: tuple[n.Stmt, ...], counter: n.Var, step: int, factor: int,
               keep: set[str], first: int = 0) -> list[tuple[n.Stmt, ...]]:
        """``stmts`` for the rows ``counter + u * step``, ``u < factor``; the locals they declare
        renamed in all copies but the first (in all of them with ``first=1``: the statements stay
        in the kernel too), except ``keep`` (the jammed loops' counters)."""
        declared = declared_names(stmts) - keep
        out = []
        for u in range(factor):
            copy = tuple(substitute(x, {counter: _shifted(counter, u * step)}) for x in stmts)
            if u + first:
                copy = rename_locals(copy, {name: self.names.fresh(name) for name in sorted(declared)})
            out.append(copy)
        return out


def _shifted(counter: n.Var, by: int) -> n.Expr:
    return n.Binary("add", counter, n.Const(by, U32)) if by else counter


def _constant(loop: n.For) -> bool:
    return all(isinstance(e, n.Const) for e in (loop.start, loop.stop, loop.step)) and int(loop.step.value) > 0


def _mentions(e: n.Expr, var: n.Var) -> bool:
    return any(x == var for x in walk(e))


def _moves(e: n.Expr, counter: n.Var, values: dict[n.Expr, n.Expr], varying: set[n.Var]) -> bool:
    """``e`` is ``counter`` times a nonzero constant plus terms that are the same in every copy
    (locals of the body stand for their values; no loads): distinct copies, distinct values."""
    while isinstance(e, n.Cast) and e.type.is_int and e.x.type.is_int and e.type.bits >= e.x.type.bits:
        e = e.x
    if e == counter:
        return True
    if isinstance(e, n.Var) and e in values:
        return _moves(values[e], counter, values, varying)
    if isinstance(e, n.Binary) and e.op in ("add", "sub"):
        if _moves(e.a, counter, values, varying):
            return _same(e.b, values, varying)
        return e.op == "add" and _moves(e.b, counter, values, varying) and _same(e.a, values, varying)
    if isinstance(e, n.Binary) and e.op == "mul":
        for a, b in ((e.a, e.b), (e.b, e.a)):
            if isinstance(b, n.Const) and int(b.value) != 0 and _moves(a, counter, values, varying):
                return True
    return False


def _same(e: n.Expr, values: dict[n.Expr, n.Expr], varying: set[n.Var], depth: int = 8) -> bool:
    """``e`` has one value in every copy: no load, no counter, no local of the body whose value
    (followed ``depth`` deep) is not one."""
    for x in walk(e):
        if isinstance(x, (n.Load, n.Call)):
            return False
        if isinstance(x, n.Var) and x in varying:
            if x not in values or depth == 0 or not _same(values[x], values, varying, depth - 1):
                return False
    return True


def _reuses(loop: n.For, values: dict[n.Expr, n.Expr], varying: set[n.Var]) -> bool:
    """The loop's body loads something at an index the copies share (``Bs[k][tx]``)."""
    return any(isinstance(x, n.Load) and all(_same(i, values, varying) for i in x.index)
               for x in walk_block(loop.body))
