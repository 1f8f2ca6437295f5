"""jam_thread_loops: a few rows of threads at once, their serial loops run as one (register tiling).

Requires: a verified CPU-form kernel, specialized for one block shape in practice
(``specialize_block_shape`` runs it last). Guarantees: the same results, bit for bit.

A GEMM-like kernel (one thread per element of ``C``, ``acc += As[ty][k] * Bs[k][tx]`` in a loop
over ``k``) lowers to a loop over the rows of threads around the vector loop over ``tx``; each
row's ``k`` loop is one chain of dependent additions, and loads ``Bs[k][tx]`` again for every
row. Jamming ``J`` rows (the threads ``ty, ty + 1, ...`` for each ``tx``) runs their ``k`` loops as
one, with ``J`` independent accumulators and one load of ``Bs[k][tx]`` for all of them::

    for threads ty = 0u to 16u {               for threads ty = 0u to 16u step 4u {
      for threads tx = 0u to 16u {               for threads tx = 0u to 16u {
        var acc = a[0u][ty][tx]          =>        var acc = a[0u][ty][tx]; var acc_1 = a[0u][ty + 1u][tx]; ...
        for k = 0 to 16 {                          for k = 0 to 16 {
          acc = acc + As[ty][k] * Bs[k][tx]          acc = acc + As[ty][k] * Bs[k][tx]
        }                                            acc_1 = acc_1 + As[ty + 1u][k] * Bs[k][tx]  ...
        a[0u][ty][tx] = acc                        }
                                                   a[0u][ty][tx] = acc; a[0u][ty + 1u][tx] = acc_1; ...

Loops and ``if``s whose bounds and conditions are the same for every row (no row counter, no
load; locals declared once stand for their values) are shared by the rows, their bodies merged
statement by statement; everything else is copied per row, the copies one after another. So the
PolyBench shape, where the loop over ``tx`` went inside the loop over ``k`` (``c[i][j] += alpha *
a[i][k] * b[k][j]``, ``gpu2cpu.sink_thread_loops``), becomes one loop over ``tx`` per ``k`` doing
four rows: four chains through ``c`` in flight instead of one, one load of ``b[k][j]``.

The threads of a row are jammed the same way where each walks its own row in a serial loop
(``polypy.analysis.loop_order.rows_walked``: that loop innermost, the loop over ``tx`` no vector
loop; PolyBench ATAX's ``tmp[i] += A[i][j] * x[j]``, GESUMMV, ADI's sweeps): four threads' row
loops run as one, four chains of additions in flight instead of one (no reuse needed), each
thread's sum still in its own order. A loop over rows whose threads were jammed as rows is not
entered again. Not where the row loop stores into rows a multiple of 4 KiB apart
(``loop_order.rows_alias``: PolyBench ADI's forward sweep over rows of 1024 floats): each load of
one row would wait on the store just made to another, which shares its low 12 address bits;
jammed, that sweep ran 1.3x slower than one row at a time (a C loop of the same shape, CPU time).

Exact: every thread runs its own statements in its own order, so each value is computed as
before; only statements of *different* threads of one barrier interval are interleaved. CUDA
threads between two barriers may run in any interleaving unless they race, which is undefined,
or use atomics: so the rows' work may use no atomics, warp operations, barriers, jumps or
``while`` loops, assigns only locals it declares, and each store to block-private memory (shared,
per-thread: where ``lower_block_atomics`` turned atomics into a load and a store) has an index
component that moves with the row counter (``a[0u][ty][tx]``), so the rows never touch one
element of it. Neither loop may be ``ordered``.

Applied to a loop over rows of threads with a constant start and step, holding loops over the
threads of a row (never to those: they are the vector loops) and no deeper nests, where a shared
serial loop loads something at an index the rows share (the reuse: ``Bs[k][tx]``, ``b[k][j]``),
within ``MAX_JAM_NODES`` IR nodes. A serial loop around loops over the threads of a row keeps the
rows' values in memory (``c[i][j]``), four rows of them at each step: it is shared only where
those loops run at most ``JAM_RUN`` threads, known now or tested before the rows (``if (min(nj -
bx * 32, (gx - bx) * 32) <= 256u)``: the jammed rows, else the rows as they were). PolyBench 2MM
in coarse blocks, rows of 2048 threads jammed, ran 4x slower: four rows of ``C`` 8 KiB apart and
a row of ``B`` no longer fit the L1 cache, and they share its sets. With a constant count of rows, ``J = 4`` where it divides it,
else 2; with a count known at run time (``ty < ty_hi``, a partial block; the loop from 0 by 1),
groups of four rows jammed, the rows left after them as they were. A row's work versioned on a
condition of the row (a no-wrap check of its indices, lud's internal kernel) is jammed where the
condition holds for all rows of the group, and runs row by row where it does not.

matmul_tiled's block through C: 9.5 -> 8.5 ms (``J = 4`` measured best of 2, 4, 8 and 16); the
bench's gemm (64 columns, PolyBench's shape) 5.2 -> 3.6 ms; PolyBench GEMM (old tree, 512^2)
10.1 -> 3.5 ms of kernel time.

Why ``_Jam.merge`` and ``_Jam.shared_loops`` walk blocks themselves: ``merge`` walks the copies
of one body (one per row) in lockstep, a statement of each at a time, which a Mutator over one
tree cannot; ``shared_loops`` enters only the statements ``shares`` accepts, and returns them
outer first. The rewriting of each thread loop is a Mutator (``_Jam``).
"""
from __future__ import annotations

from polypy.analysis.loop_order import rows_alias, rows_walked
from polypy.ir import nodes as n
from polypy.ir.names import NameSupply
from polypy.ir.queries import conjunction, declared_names, written_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.types import U32, PointerType
from polypy.ir.visitor import Mutator, rebuild, substitute, walk, walk_block
from polypy.passes.fold_constants import fold_constants

JAM = 4
MAX_JAM_NODES = 4000
# The longest loop over the threads of a row inside a serial loop the rows share.
JAM_RUN = 256

_REFUSED = (n.While, n.AtomicRMW, n.Fence, n.Print, n.Launch, n.AssertFail, n.Shuffle, n.Vote, n.Barrier, n.Break, n.Continue, n.Return)


def jam_thread_loops(kernel: n.Kernel) -> n.Kernel:
    """``kernel`` with the jammable thread loops jammed (see the module docstring)."""
    private = {b.name for b in kernel.buffers if b.space in ("shared", "local")}
    itemsizes = {p.name: p.ptype.elem.itemsize for p in kernel.params if isinstance(p.ptype, PointerType)}
    jam = _Jam(NameSupply.for_kernel(kernel), private, itemsizes)
    body = jam.visit_block(kernel.body)
    return fold_constants(rebuild(kernel, body=body)) if jam.changed else kernel


class _Jam(Mutator):
    def __init__(self, names: NameSupply, private: set[str], itemsizes: dict[str, int]):
        self.names = names
        self.private = private
        self.itemsizes = itemsizes
        self.changed = False

    def visit_For(self, s: n.For) -> n.Stmt | tuple[n.Stmt, ...]:
        if s.kind != "threads":
            return self.generic_visit(s)
        jammed = self.jam(s)
        if jammed is None:
            return self.generic_visit(s)
        self.changed = True
        return jammed

    def jam(self, outer: n.For) -> n.Stmt | tuple[n.Stmt, ...] | None:
        if outer.ordered or not (isinstance(outer.start, n.Const) and isinstance(outer.step, n.Const)):
            return None
        start, step = int(outer.start.value), int(outer.step.value)
        if step <= 0:
            return None
        dynamic = not isinstance(outer.stop, n.Const)
        if dynamic:
            # Rows counted at run time (``ty < ty_hi``, a partial block): whole groups of rows
            # jammed, the rows left after them as they were.
            if start != 0 or step != 1 or any(isinstance(x, n.Load) for x in walk(outer.stop)):
                return None
            factor = JAM
        else:
            trips = len(range(start, int(outer.stop.value), step))
            factor = next((f for f in (JAM, 2) if trips >= f and trips % f == 0), None)
            if factor is None:
                return None
        counter = n.Var(outer.var, outer.vtype)
        # A loop over the threads of a row whose threads each walk their own row in a serial loop
        # (``polypy.analysis.loop_order.rows_walked``: no vector loop): its threads jammed in
        # turn, their row loops run as one, ``JAM`` sums in flight instead of one.
        lanes = not any(_is_thread_loop(x) for x in walk_block(outer.body)) and rows_walked(outer) is not None
        only = outer.body[0] if len(outer.body) == 1 else None
        if isinstance(only, n.If) and _mentions(only.cond, counter):
            # The rows' work versioned on a condition of the row (a no-wrap check of its
            # indices): the rows jammed where the condition holds for all of them, else each row
            # as it was.
            if any(isinstance(x, n.Load) for x in walk(only.cond)):
                return None
            jammed = self.jammed(only.then, counter, step, factor, lanes=lanes)
            if jammed is None:
                return None
            then, checks = jammed
            rows = self.copies((only,), counter, step, factor, keep=set(), first=1)
            every = conjunction([substitute(only.cond, {counter: _shifted(counter, u * step)}) for u in range(factor)])
            body: tuple[n.Stmt, ...] = (n.If(every, then, tuple(x for r in rows for x in r), loc=only.loc),)
        else:
            jammed = self.jammed(outer.body, counter, step, factor, lanes=lanes)
            if jammed is None:
                return None
            body, checks = jammed
        if not dynamic:
            out: tuple[n.Stmt, ...] = (rebuild(outer, step=n.Const(step * factor, U32), body=body),)
        else:
            whole = n.Binary("mul", n.Binary("div", outer.stop, n.Const(factor, U32)), n.Const(factor, U32))
            (rest,) = self.copies((outer,), counter, step, 1, keep=set(), first=1)[0]
            out = (rebuild(outer, stop=whole, step=n.Const(factor, U32), body=body), rebuild(rest, start=whole))
        if not checks:
            return out
        # Rows whose loops over the threads are short only at run time (a partial coarse block):
        # the jammed rows where they are, the rows as they were where they are not.
        (plain,) = self.copies((outer,), counter, step, 1, keep=set(), first=1)[0]
        return n.If(conjunction(checks), out, (plain,), loc=outer.loc)

    def jammed(self, stmts: tuple[n.Stmt, ...], counter: n.Var, step: int,
               factor: int, *, lanes: bool = False) -> tuple[tuple[n.Stmt, ...], list[n.Expr]] | None:
        """``stmts`` (the work of the row ``counter``) for ``factor`` rows, ``counter``,
        ``counter + step``, ...: loops and ``if``s that are the same for every row are shared,
        everything else copied per row; with the run-time conditions that sharing assumed (short
        loops over a row's threads). None where that is not exact or does not pay (see the
        module docstring). ``lanes``: the rows are single threads walking their own rows (no
        loops over threads inside; a shared serial loop pays without reuse: the sums' chains)."""
        if any(isinstance(x, _REFUSED) for x in walk_block(stmts)):
            return None
        # Rows of threads around the loops over the threads within a row (the vector loops, never
        # jammed themselves), and no deeper nests.
        if not lanes and not any(isinstance(x, n.For) and x.kind == "threads" for x in walk_block(stmts)):
            return None
        if any(isinstance(x, n.For) and x.kind == "threads" and
               any(isinstance(y, n.For) and y.kind == "threads" for y in walk_block(x.body))
               for x in walk_block(stmts)):
            return None
        declared = declared_names(stmts)
        if written_names(stmts) - declared or sum(1 for _ in walk_block(stmts)) * factor > MAX_JAM_NODES:
            return None
        rows = _Rows(counter, stmts)
        for x in walk_block(stmts):
            if isinstance(x, n.Store) and x.buffer in self.private and not any(rows.moves(i) for i in x.index):
                return None
        shared = rows.shared_loops(stmts)
        if not any(x.kind == "serial" and (lanes or rows.reuses(x)) for x in shared):
            return None
        # Threads walking rows a multiple of 4 KiB apart, storing as they go: jammed, each load
        # would wait on another row's store (``loop_order.rows_alias``); one row at a time.
        if lanes and rows_alias(stmts, counter.name, step, factor, self.itemsizes) is not None:
            return None
        copies = self.copies(stmts, counter, step, factor, keep={x.var for x in shared})
        return rows.merge(copies), rows.checks(shared)

    def copies(self, stmts: tuple[n.Stmt, ...], counter: n.Var, step: int, factor: int,
               keep: set[str], first: int = 0) -> list[tuple[n.Stmt, ...]]:
        """``stmts`` for the rows ``counter + u * step``, ``u < factor``; the locals they declare
        renamed in all copies but the first (in all of them with ``first=1``: the statements stay
        in the kernel too), except ``keep`` (the shared loops' counters)."""
        declared = declared_names(stmts) - keep
        out = []
        for u in range(factor):
            copy = tuple(substitute(x, {counter: _shifted(counter, u * step)}) for x in stmts)
            if u + first:
                copy = rename_locals(copy, {name: self.names.fresh(name) for name in sorted(declared)})
            out.append(copy)
        return out


class _Rows:
    """What is the same for every row of a jammed group: expressions that do not depend on the
    row's counter or on what the rows compute (locals declared once and never assigned stand for
    their values), and the loops and ``if``s they control."""

    def __init__(self, counter: n.Var, stmts: tuple[n.Stmt, ...]):
        self.counter = counter
        assigned = written_names(stmts)
        self.values: dict[n.Expr, n.Expr] = {n.Var(x.name, x.vtype): x.init for x in walk_block(stmts)
                                             if isinstance(x, n.Decl) and x.init is not None and x.name not in assigned}
        self.varying = {counter} | {n.Var(x.name, x.vtype) for x in walk_block(stmts) if isinstance(x, n.Decl)}

    def same(self, e: n.Expr, depth: int = 8) -> bool:
        """``e`` has one value in every row: no load, no counter, no local of the rows whose value
        (followed ``depth`` deep) is not one (calls are pure math functions)."""
        for x in walk(e):
            if isinstance(x, n.Load):
                return False
            if isinstance(x, n.Var) and x in self.varying:
                if x not in self.values or depth == 0 or not self.same(self.values[x], depth - 1):
                    return False
        return True

    def shares(self, x: n.Stmt) -> bool:
        """One statement for all rows: a loop with the same bounds, an ``if`` with the same
        condition (their bodies then merged in turn)."""
        if isinstance(x, n.For):
            if x.ordered or not all(self.same(e) for e in (x.start, x.stop, x.step)):
                return False
            # A serial loop around loops over the threads of a row (``for k { for tx {
            # c[i][tx] += ... } }``) keeps each row's values in memory from one iteration to the
            # next: shared by four rows only where those loops are short (PolyBench 2MM's rows
            # of 2048 in coarse blocks: four rows and a row of b no longer fit the L1 cache, and
            # rows 8 KiB apart share its sets; the program ran 4x slower).
            return x.kind == "threads" or all(
                self.short(y) is not False for y in walk_block(x.body) if isinstance(y, n.For) and y.kind == "threads")
        return isinstance(x, n.If) and self.same(x.cond)

    def short(self, loop: n.For) -> bool | n.Expr:
        """Whether the loop over the threads of a row runs at most ``JAM_RUN`` iterations: True
        where known now (a constant bound), the condition to test at run time where its bound is
        an expression of values from outside the rows, else False."""
        bound = self.most(loop.stop)
        if bound is not None and bound <= JAM_RUN:
            return True
        if isinstance(loop.stop, n.Const):
            return False
        stop = self.outside(loop.stop)
        if stop is None or not isinstance(loop.start, n.Const) or loop.vtype != U32:
            return False
        return n.Binary("le", stop, n.Const(JAM_RUN + int(loop.start.value), U32))

    def checks(self, shared: list[n.For]) -> list[n.Expr]:
        """The run-time conditions sharing the serial loops ``shared`` assumed (``short``), each
        once."""
        out: list[n.Expr] = []
        for x in shared:
            if x.kind == "threads":
                continue
            for y in walk_block(x.body):
                if isinstance(y, n.For) and y.kind == "threads":
                    check = self.short(y)
                    if isinstance(check, n.Expr) and check not in out:
                        out.append(check)
        return out

    def outside(self, e: n.Expr, depth: int = 8) -> n.Expr | None:
        """``e`` with the rows' locals replaced by their values, where that leaves no counter,
        no other local of the rows and no load: a value computable before the rows."""
        if any(isinstance(x, n.Load) for x in walk(e)):
            return None
        for x in walk(e):
            if isinstance(x, n.Var) and x in self.varying:
                if x not in self.values or depth == 0:
                    return None
                value = self.outside(self.values[x], depth - 1)
                if value is None:
                    return None
                e = substitute(e, {x: value})
        return e

    def most(self, e: n.Expr, depth: int = 8) -> int | None:
        """A constant upper bound of the integer ``e`` (constants, ``min`` with one, locals
        through their values), or None."""
        while isinstance(e, n.Cast) and e.x.type.is_int:
            e = e.x
        if isinstance(e, n.Const):
            return int(e.value)
        if isinstance(e, n.Var) and e in self.values and depth:
            return self.most(self.values[e], depth - 1)
        if isinstance(e, n.Call) and e.fn == "min":
            bounds = [b for b in (self.most(a, depth) for a in e.args) if b is not None]
            return min(bounds) if bounds else None
        return None

    def shared_loops(self, stmts: tuple[n.Stmt, ...]) -> list[n.For]:
        out: list[n.For] = []
        for x in stmts:
            if self.shares(x):
                if isinstance(x, n.For):
                    out.append(x)
                    out.extend(self.shared_loops(x.body))
                else:
                    out.extend(self.shared_loops(x.then) + self.shared_loops(x.orelse))
        return out

    def merge(self, copies: list[tuple[n.Stmt, ...]]) -> tuple[n.Stmt, ...]:
        """The rows' copies interleaved statement by statement, shared statements once (decided
        on the first copy, the row ``counter`` itself, whose names are the original ones)."""
        out: list[n.Stmt] = []
        for i, first in enumerate(copies[0]):
            if not self.shares(first):
                out.extend(copy[i] for copy in copies)
            elif isinstance(first, n.For):
                out.append(rebuild(first, body=self.merge([copy[i].body for copy in copies])))
            else:
                out.append(rebuild(first, then=self.merge([copy[i].then for copy in copies]),
                                   orelse=self.merge([copy[i].orelse for copy in copies])))
        return tuple(out)

    def moves(self, e: n.Expr) -> bool:
        """``e`` is the counter times a nonzero constant plus terms that are the same in every
        row: distinct rows, distinct values."""
        while isinstance(e, n.Cast) and e.type.is_int and e.x.type.is_int and e.type.bits >= e.x.type.bits:
            e = e.x
        if e == self.counter:
            return True
        if isinstance(e, n.Var) and e in self.values:
            return self.moves(self.values[e])
        if isinstance(e, n.Binary) and e.op in ("add", "sub"):
            if self.moves(e.a):
                return self.same(e.b)
            return e.op == "add" and self.moves(e.b) and self.same(e.a)
        if isinstance(e, n.Binary) and e.op == "mul":
            return any(isinstance(b, n.Const) and int(b.value) != 0 and self.moves(a)
                       for a, b in ((e.a, e.b), (e.b, e.a)))
        return False

    def reuses(self, loop: n.For) -> bool:
        """The loop's body loads something at an index the rows share (``Bs[k][tx]``)."""
        return any(isinstance(x, n.Load) and all(self.same(i) for i in x.index) for x in walk_block(loop.body))


def _is_thread_loop(x: n.Node) -> bool:
    return isinstance(x, n.For) and x.kind == "threads"


def _shifted(counter: n.Var, by: int) -> n.Expr:
    return n.Binary("add", counter, n.Const(by, U32)) if by else counter


def _mentions(e: n.Expr, var: n.Var) -> bool:
    return any(x == var for x in walk(e))


