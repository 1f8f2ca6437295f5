"""Which loop of a thread-loop nest runs innermost and which is vectorized: the cost model of
``gpu2cpu.sink_thread_loops`` (the order) and of ``codegen.lanes`` (no vector loop over threads
that each walk their own row in a long loop inside it).

A thread loop over ``tx`` holding a serial loop (a reduction over ``k``, a row walk) can run in
two orders, both exact (the threads of one barrier interval may interleave in any order that
keeps each thread's own statements in order, ``gpu2cpu.thread_loops``)::

    tx innermost (sunk)                     k innermost (kept)
    for k {                                 for threads tx {
      for threads tx {                        for k {
        acc_x[tx] += a[i*m + k] * a[j*m + k]      acc += a[i*m + k] * a[j*m + k]
      }                                       }
    }                                       }

The first vectorizes the loop over ``tx``; it pays where the accesses are the same for every
thread or move by one element from thread to thread (``Bs[k][tx]``, ``c[i*n + j]``). Where a
thread walks its *own row* (``a[j*m + k]``, ``j`` the thread's index), consecutive threads read
elements a whole row apart: each vector lane is a separate cache line, a gather, and each
thread's row is read one element per step of ``k`` -- PolyBench SYRK at its default size took
11.0 s so, where its serial loop takes 4.1 s. The second order reads each row contiguously, the
way the serial code does; the reduction stays a scalar chain in the thread's own ``k`` order
(floating-point sums are never reassociated).

The model (``choose_order``), for a serial loop with no loop inside it: count the accesses
(loads and stores) that are *strided* when the loop over ``tx`` steps -- not the same element
nor a near one (``coef * tx`` with ``|coef| > NEAR`` = 4 or not a constant) -- and those that
are strided when the serial loop's counter steps. ``k`` stays innermost only where strictly fewer
accesses are strided walking ``k`` than walking ``tx``; on a tie the loop over ``tx`` goes
innermost (it vectorizes). Strides are exact integer derivatives of the index expressions,
locals defined once looked through (``j = blockIdx.x * blockDim.x + tx``); anything else that
moves (a loaded index, a product of two moving values, a division) counts as strided.

Measured on PolyBench/GPU's older tree at its own sizes: see ``docs/architecture.md``
("Loop order").
"""
from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.visitor import iter_children, walk, walk_block, walk_only

_INTS = frozenset({"i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"})


def stride(e: n.Expr, var: str, lets: Mapping[str, n.Expr], variant: Collection[str]) -> int | None:
    """How much ``e`` changes when ``var`` grows by one, or None when that is not a constant.

    ``lets``: locals with one definition, looked through; ``variant``: other locals that may
    change with ``var`` (their change is unknown: None). Other names do not change (0)."""
    if isinstance(e, n.Var):
        if e.name == var:
            return 1
        if e.name in lets:
            return stride(lets[e.name], var, lets, variant)
        return None if e.name in variant else 0
    if isinstance(e, n.Const):
        return 0
    if isinstance(e, n.Cast):
        inner = stride(e.x, var, lets, variant)
        if inner == 0:
            return 0
        # An integer widening or a same-width cast keeps the step (indices do not wrap in a
        # race-free kernel's accesses); anything else (float, narrowing) is not a constant step.
        return inner if e.to.name in _INTS and e.x.type.name in _INTS else None
    if isinstance(e, n.Binary):
        a = stride(e.a, var, lets, variant)
        b = stride(e.b, var, lets, variant)
        if a == 0 and b == 0:
            return 0
        if e.op in ("add", "sub") and a is not None and b is not None:
            return a + b if e.op == "add" else a - b
        if e.op == "mul":
            if a == 0 and b is not None:
                k = _int_const(e.a)
                return None if k is None else k * b
            if b == 0 and a is not None:
                k = _int_const(e.b)
                return None if k is None else k * a
        if e.op == "shl" and b == 0 and a is not None:
            k = _int_const(e.b)
            return None if k is None or not 0 <= k < 32 else a << k
        return None
    children = [c for c in iter_children(e) if isinstance(c, n.Expr)]
    return 0 if all(stride(c, var, lets, variant) == 0 for c in children) else None


# A step of at most this many elements counts as contiguous: the fields of a small struct
# (``float4``'s x, y, z, w at a stride of 4) share cache lines, and GCC loads them as groups.
NEAR = 4


def contiguous(index: tuple[n.Expr, ...], var: str, lets: Mapping[str, n.Expr], variant: Collection[str]) -> bool:
    """Whether an access at ``index`` touches the same element or a near one (either way) when
    ``var`` steps: every index but the last unchanged, the last changing by at most ``NEAR``."""
    steps = [stride(i, var, lets, variant) for i in index]
    return all(s == 0 for s in steps[:-1]) and steps[-1] is not None and abs(steps[-1]) <= NEAR


@dataclasses.dataclass(frozen=True)
class OrderChoice:
    """The order chosen for a thread loop over ``counter`` and the serial loop over ``loop_var``
    inside it, with the accesses strided in each direction (as source-like text)."""

    counter: str
    loop_var: str
    accesses: int
    strided_threads: tuple[str, ...]  # strided when the loop over the threads steps
    strided_loop: tuple[str, ...]  # strided when the serial loop steps

    @property
    def threads_inner(self) -> bool:
        return not len(self.strided_loop) < len(self.strided_threads)

    def reason(self) -> str:
        def side(walked: str, strided: tuple[str, ...]) -> str:
            if not strided:
                return f"walking {walked} none of them is strided"
            distinct = list(dict.fromkeys(strided))
            shown = ", ".join(distinct[:3]) + (", ..." if len(distinct) > 3 else "")
            return f"walking {walked} {len(strided)} strided ({shown})"

        return (f"of {self.accesses} accesses per iteration, {side(repr(self.loop_var), self.strided_loop)}, "
                f"{side(self.counter, self.strided_threads)}")


def choose_order(loop: n.For, counter: str, *, thread_lets: Mapping[str, n.Expr],
                 thread_variant: Collection[str]) -> OrderChoice | None:
    """The order for the serial loop ``loop`` inside the loop over the threads ``counter``, or
    None where the model does not apply (a loop with loops inside it, or without accesses).

    ``thread_lets``: the locals of the thread loop's body with one definition (looked through);
    ``thread_variant``: the other locals declared in the thread loop (they may differ from thread
    to thread)."""
    if any(isinstance(x, (n.For, n.While)) for x in walk_block(loop.body)):
        return None
    accesses = [x for x in walk_only(loop.body, n.Load, n.Store, n.AtomicRMW)]
    if not accesses:
        return None
    written = {x.name for x in walk_only(loop.body, n.Decl, n.Assign)} | \
        {x.dest for x in walk_only(loop.body, n.AtomicRMW) if x.dest is not None}
    inner_lets = _once_defined(loop.body)
    loop_lets = {**{k: v for k, v in thread_lets.items() if k not in written}, **inner_lets}
    loop_variant = written - set(inner_lets)
    thread_lets_all = {**thread_lets, **inner_lets}
    strided_threads: list[str] = []
    strided_loop: list[str] = []
    for x in accesses:
        text = _show(x)
        # The serial loop's counter is the same in every thread at each step of the loop.
        if not contiguous(x.index, counter, thread_lets_all, (set(thread_variant) | loop_variant) - {loop.var}):
            strided_threads.append(text)
        if not contiguous(x.index, loop.var, loop_lets, loop_variant):
            strided_loop.append(text)
    return OrderChoice(counter, loop.var, len(accesses), tuple(strided_threads), tuple(strided_loop))


# Serial loops of at most this many iterations (a constant) inside a loop over the threads are
# unrolled by the compilers, the loop over the threads vectorized around them
# (``gpu2cpu.sink_thread_loops.SHORT_LOOP``).
SHORT_TRIP = 16


def rows_walked(loop: n.For) -> OrderChoice | None:
    """For an innermost loop over the threads (CPU form), the order choice of a serial loop inside it that is
    better run innermost, each thread walking its own row (``choose_order``), or None where there
    is none: such a loop over the threads is not the one to vectorize (vectorized, each lane of
    every step of the row loop would read another row: a gather). Short loops of constant trip
    count (``SHORT_TRIP``) do not count: compilers unroll them."""
    if any(x.kind == "threads" for x in walk_only(loop.body, n.For)):
        return None  # a loop over rows of threads: the loops over the threads inside decide
    lets = _once_defined(loop.body)
    declared = {x.name for x in walk_only(loop.body, n.Decl)} | \
        {x.var for x in walk_only(loop.body, n.For)}
    # The counters of serial loops whose headers read nothing declared in the loop over the
    # threads are the same in every thread at each step.
    for x in walk_only(loop.body, n.For):
        if isinstance(x, n.For) and x.kind == "serial" and not any(
                isinstance(v, n.Var) and v.name in declared for e in (x.start, x.stop, x.step) for v in walk(e)):
            declared.discard(x.var)
    for x in walk_only(loop.body, n.For):
        if not isinstance(x, n.For) or x.kind != "serial" or _short(x):
            continue
        choice = choose_order(x, loop.var, thread_lets=lets, thread_variant=declared - set(lets) - {x.var})
        if choice is not None and not choice.threads_inner:
            return choice
    return None


def _short(loop: n.For) -> bool:
    a, b, c = (_int_const(e) for e in (loop.start, loop.stop, loop.step))
    return a is not None and b is not None and c is not None and c > 0 and (b - a + c - 1) // c <= SHORT_TRIP


def barrier_order(loop: n.For, thread_loops: list[n.For]) -> OrderChoice | None:
    """What the model would choose for a serial loop that holds loops over the threads (a
    barrier in it kept them inside: ``serialize_threads`` moves control flow holding a barrier
    outside the thread loops): the accesses of ``thread_loops`` (over tx, inside ``loop``),
    walked by their counters and by ``loop``'s. None without accesses. The interchange this
    would ask for is not legal -- each thread's step ``k`` must end before any thread's next
    one starts, and ``eliminate_barriers`` could not prove the barrier needless with isl."""
    # The counters of the loops over the threads are one thread's own, fixed while it steps.
    written = {x.name for x in walk_only(loop.body, n.Decl, n.Assign)} | \
        {x.var for x in walk_only(loop.body, n.For) if x.kind != "threads"}
    lets = _once_defined(loop.body)
    variant = written - set(lets)
    strided_threads: list[str] = []
    strided_loop: list[str] = []
    count = 0
    counter = "tx"
    if any(isinstance(x, (n.For, n.While)) for t in thread_loops for x in walk_block(t.body)):
        return None  # the steps of a loop inside (a tile's) would decide, not these
    for t in thread_loops:
        inside = {x.name for x in walk_only(t.body, n.Decl)}
        for x in walk_block(t.body):
            if not isinstance(x, (n.Load, n.Store, n.AtomicRMW)):
                continue
            count += 1
            text = _show(x)
            if not contiguous(x.index, t.var, lets, (inside | variant) - set(lets) - {t.var}):
                strided_threads.append(text)
            if not contiguous(x.index, loop.var, lets, variant):
                strided_loop.append(text)
    if not count:
        return None
    return OrderChoice(counter, loop.var, count, tuple(strided_threads), tuple(strided_loop))


# Loads and stores whose addresses differ by a multiple of this many bytes look alike to the
# CPU's check of a load against the stores before it (the low 12 address bits): the load waits.
ALIAS_BYTES = 4096


def rows_alias(stmts: tuple[n.Stmt, ...], counter: str, step: int, group: int,
               itemsizes: Mapping[str, int]) -> str | None:
    """Whether threads ``counter, counter + step, ...`` (``group`` of them) walking their own rows
    together (``jam-threads``) would store, inside a serial loop of ``stmts``, at addresses a
    multiple of ``ALIAS_BYTES`` apart: a store of one thread's row and the next load of another's
    at the same column then look alike to the CPU, and each load waits for the store (measured:
    ADI's forward sweep, rows of 1024 floats, four rows in turn 1.3x slower than one row at a
    time; rows of 1040 floats 3.4x faster). The store (as text) where they would, else None.
    ``itemsizes``: the element size of each pointer parameter (others are not counted)."""
    lets = _once_defined(stmts)
    declared = {x.name for x in walk_only(stmts, n.Decl)} | {x.var for x in walk_only(stmts, n.For)}
    # serial counters whose bounds read nothing of the thread's own: the same in every thread
    for x in walk_only(stmts, n.For):
        if isinstance(x, n.For) and x.kind == "serial" and not any(
                isinstance(v, n.Var) and v.name in declared | {counter} for e in (x.start, x.stop, x.step)
                for v in walk(e)):
            declared.discard(x.var)
    variant = declared - set(lets) - {counter}
    for loop in walk_only(stmts, n.For):
        if not isinstance(loop, n.For) or loop.kind != "serial":
            continue
        for x in walk_only(loop.body, n.Store):
            if not isinstance(x, n.Store) or x.buffer not in itemsizes or len(x.index) != 1:
                continue
            d = stride(x.index[0], counter, lets, variant)
            if d is None or d == 0:
                continue
            apart = abs(d) * step * itemsizes[x.buffer]
            if any(apart * u % ALIAS_BYTES == 0 for u in range(1, group)):
                return _show(x)
    return None


def _once_defined(body: tuple[n.Stmt, ...]) -> dict[str, n.Expr]:
    """Locals declared in ``body`` (under ifs too: names are unique in a kernel) with an initial
    value and never assigned."""
    assigned = {x.name for x in walk_only(body, n.Assign)}
    return {x.name: x.init for x in walk_only(body, n.Decl)
            if x.init is not None and x.name not in assigned}


def _show(x: n.Load | n.Store | n.AtomicRMW) -> str:
    if isinstance(x, n.Load):
        return format_expr(x)
    return x.buffer + "".join(f"[{format_expr(i)}]" for i in x.index)


def _int_const(e: n.Expr) -> int | None:
    return int(e.value) if isinstance(e, n.Const) and e.type.name in _INTS else None
