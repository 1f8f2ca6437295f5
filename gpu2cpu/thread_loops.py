"""Helpers shared by the CPU schedule passes (``tighten_thread_bounds``, ``sink_thread_loops``,
``fuse_thread_loops``): questions about thread loops and safe ways to copy and split them.

Why reordering the iterations of a thread loop is allowed at all: the iterations of one
thread-loop nest are the threads of one block between two barriers of a race-free kernel, so no
two of them touch one element with a write — except atomics, which commute when they are the
same commutative operation and nobody reads the old value (``order_sensitive`` finds the
others: floating-point atomics, whose rounding depends on the order, and atomics whose result
is used). Any interleaving that keeps each thread's own statements in order is therefore
equivalent to running the threads one after the other.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from gpu2cpu.names import NameSupply
from gpu2cpu.report import LoweringDecision
from gpu2cpu.thread_affine import counter_dim, is_check
from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.queries import declared_names, definition_writes, let_values
from polypy.ir.rewrite import rename_locals
from polypy.ir.types import U32
from polypy.ir.visitor import Mutator, rebuild, walk, walk_only

_COMMUTING = {"add": "add", "sub": "add", "min": "min", "max": "max", "and": "and", "or": "or", "xor": "xor"}

# What serialize-threads and sink-thread-loops recompute in each thread loop rather than keep in a
# per-thread buffer: definitions of at most RECOMPUTE_LIMIT nodes that vary with the thread (an
# invariant subexpression counting as one: the compiler computes it once, outside the thread loop;
# sink-thread-loops also counts a repeated subexpression once), calling no math function but
# these cheap ones.
RECOMPUTE_LIMIT = 16
CHEAP_CALLS = frozenset({"min", "max", "abs", "fabs", "fmin", "fmax"})


def rewrite_cpu_body(kernel: n.Kernel, make: Callable[[n.Kernel], Mutator], *, what: str,
                     report: list | None = None) -> n.Kernel:
    """Run the Mutator ``make(kernel)`` (one with a ``decisions`` list) over a CPU-form kernel's
    body; its decisions go to ``report``. The kernel itself comes back when nothing changed (the step passes' frame).
    A mutator with a ``kernel_fields()`` method also sets those fields of the new kernel (buffers it added, notes)."""
    if kernel.stage != "cpu":
        raise InternalError(f"{what} expects a CPU-form kernel", kernel.loc)
    m = make(kernel)
    body = m.visit_block(kernel.body)
    if report is not None:
        report.extend(m.decisions)  # type: ignore[attr-defined]
    if body is kernel.body:
        return kernel
    fields = m.kernel_fields() if hasattr(m, "kernel_fields") else {}
    return dataclasses.replace(kernel, body=body, **fields)


class ThreadLoopStep(Mutator):
    """The frame of the CPU schedule's step passes (versioning, fission, grid-stride
    normalization): fresh names, the decisions for ``--report``, and run-time checks' fallbacks
    left alone -- the ``else`` of an ``if`` made by ``is_check`` is the original code.
    Subclasses rewrite thread loops in ``visit_For``."""

    def __init__(self, kernel: n.Kernel):
        self.kernel = kernel
        self.names = NameSupply(kernel)
        self.decisions: list[LoweringDecision] = []

    def note(self, loop: n.Stmt, message: str) -> None:
        self.decisions.append(LoweringDecision(self.kernel.name, loop.loc, message))

    def visit_If(self, s: n.If) -> n.Stmt:
        if not is_check(s.cond):
            return self.generic_visit(s)
        return rebuild(s, then=self.visit_block(s.then))


def is_thread_loop(s: n.Stmt) -> bool:
    return isinstance(s, n.For) and s.kind == "threads"


def thread_counters(node: n.Node | Iterable[n.Node]) -> dict[str, int]:
    """The counter of every thread loop under ``node``, with its dimension."""
    nodes = [node] if isinstance(node, n.Node) else list(node)
    out: dict[str, int] = {}
    for root in nodes:
        for x in walk(root):
            if isinstance(x, n.For) and x.kind == "threads":
                dim = counter_dim(x.var)
                if dim is not None:
                    out[x.var] = dim
    return out


def order_sensitive(kernel: n.Kernel, stmts: Iterable[n.Stmt], *, rounding: bool = True) -> bool:
    """Whether the atomics in ``stmts`` give different results when threads run in another order.

    True for an atomic whose old value is used, a floating-point atomic (rounding; with
    ``rounding=False`` a float add is not: CUDA orders no atomics, so a sum rounded in another
    order is one the GPU could give too), and atomics of different operation families on one
    buffer (``add`` then ``max`` do not commute).
    """
    families: dict[str, str] = {}
    for s in stmts:
        for x in walk_only(s, n.AtomicRMW):
            family = _COMMUTING.get(x.op)
            if x.dest is not None or family is None or \
                    (kernel.elem_type(x.buffer).is_float and (rounding or x.op != "add")):
                return True
            if families.setdefault(x.buffer, family) != family:
                return True
    return False


def names_in(s: n.Stmt) -> set[str]:
    """Every local name ``s`` reads, writes or declares."""
    out: set[str] = set()
    for x in walk(s):
        if isinstance(x, n.Var) or isinstance(x, (n.Decl, n.Assign)):
            out.add(x.name)
        elif isinstance(x, n.For):
            out.add(x.var)
        elif isinstance(x, (n.AtomicRMW,)) and x.dest is not None:
            out.add(x.dest)
    return out


def independent_chunks(body: tuple[n.Stmt, ...]) -> list[tuple[n.Stmt, ...]]:
    """``body`` cut into consecutive chunks that share no local declared in ``body``.

    Each chunk can then be its own thread loop (loop fission): no value flows between chunks
    through a per-thread local, and memory written by one thread is read back by the same thread
    in a later loop, after all threads ran the earlier one. A top-level ``let`` (a name for a
    value, ``Decl.let``) joins no chunks: each chunk that reads it gets its own copy, in place
    (what the let reads joins the chunks as a read of it would).
    """
    local = declared_names(body)
    lets = {s.name: i for i, s in enumerate(body) if isinstance(s, n.Decl) and s.let}
    reads: dict[str, set[str]] = {}  # a let's name -> the other locals it reads, lets looked through
    for name, i in lets.items():
        found: set[str] = set()
        for x in names_in(body[i]) - {name}:
            found |= reads.get(x, {x})
        reads[name] = found
    owner: dict[str, int] = {}
    parent = list(range(len(body)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    work = [i for i, s in enumerate(body) if not (isinstance(s, n.Decl) and s.let)]
    if not work:
        return [body]
    for i in work:
        used: set[str] = set()
        for name in names_in(body[i]):
            used |= reads.get(name, {name})
        for name in used & local:
            j = owner.setdefault(name, i)
            parent[find(i)] = find(j)
    last: dict[int, int] = {}
    for i in work:
        last[find(i)] = i
    chunks: list[tuple[n.Stmt, ...]] = []
    start, end = 0, -1
    for i in work:
        end = max(end, last[find(i)])
        if i == end:
            members = [k for k in work if start <= k <= i]
            needed: set[str] = set()
            for k in members:
                needed |= names_in(body[k]) & lets.keys()
            todo = list(needed)
            while todo:  # and the lets those read
                more = names_in(body[lets[todo.pop()]]) & lets.keys() - needed
                needed |= more
                todo += more
            keep = set(members) | {lets[name] for name in needed}
            chunks.append(tuple(body[k] for k in sorted(keep)))
            start = i + 1
    return chunks


def let_definitions(body: tuple[n.Stmt, ...], upto: int, *, writes: dict[str, int] | None = None) -> dict[str, n.Expr]:
    """Locals of ``body[:upto]`` (top level) with one definition and no other write anywhere in
    ``body``: ``var x = e`` or ``var x`` followed by one top-level ``x = e``; then the lets
    (``Decl.let``) anywhere in ``body``, whose names mean their values wherever they are in scope.
    ``writes``: ``definition_writes(body)``, where the caller has it already."""
    if writes is None:
        writes = definition_writes(body)
    declared_top = {s.name for s in body[:upto] if isinstance(s, n.Decl)}
    out: dict[str, n.Expr] = {}
    for s in body[:upto]:
        if isinstance(s, n.Decl) and s.init is not None and writes.get(s.name) == 1:
            out[s.name] = s.init
        elif isinstance(s, n.Assign) and s.name in declared_top and writes.get(s.name) == 1 and s.name not in out:
            out[s.name] = s.value
    for name, value in let_values(body).items():
        out.setdefault(name, value)
    return out


def freshen(stmts: tuple[n.Stmt, ...], names: NameSupply, extra: Iterable[str] = ()) -> tuple[n.Stmt, ...]:
    """A copy of ``stmts`` with every local it declares (and ``extra``) renamed to a fresh name,
    so that the copy can sit next to the original (names are unique in a kernel)."""
    mapping = {name: names.fresh(stem_of(name)) for name in sorted(declared_names(stmts) | set(extra))}
    return rename_locals(stmts, mapping)


def stem_of(name: str) -> str:
    """``acc_3`` -> ``acc``: fresh copies are numbered from the source name."""
    base, _, suffix = name.rpartition("_")
    return base if base and suffix.isdigit() else name


def thread_loop(var: str, start: n.Expr, stop: n.Expr, body: tuple[n.Stmt, ...], loc) -> n.For:
    return n.For(var, U32, start, stop, n.Const(1, U32), body, kind="threads", loc=loc)


def copy_loop(loop: n.For, names: NameSupply, *, start: n.Expr | None = None, stop: n.Expr | None = None,
              body: tuple[n.Stmt, ...] | None = None, fresh: bool = True) -> n.For:
    """``loop`` with other bounds/body; with ``fresh``, its counter and locals renamed."""
    body = loop.body if body is None else body
    var = loop.var
    if fresh:
        new_var = names.fresh(stem_of(var))
        body = rename_locals(body, {var: new_var})
        body = freshen(body, names)
        var = new_var
    copy = thread_loop(var, loop.start if start is None else start, loop.stop if stop is None else stop, body,
                       loop.loc)
    return dataclasses.replace(copy, ordered=True) if loop.ordered else copy

