"""specialize_block_shape: a kernel compiled for one block shape, ``blockDim`` made constants.

Requires: a verified kernel (CPU form, usually: the pass is a plain substitution and works on the
GPU form too). Guarantees: for launches whose block shape is ``block`` the result computes exactly
what ``kernel`` computes; for any other block shape it is wrong, so callers key what they build
from it by the shape (``polypy.driver.api`` per launch shape, ``codegen.c`` per specialized launcher).

Every ``BlockDim(d)`` becomes the constant ``block[d]`` (``u32``), in statements and in buffer
shapes, then the kernel is folded, so that the code generators see

* thread loops with constant trip counts (full unrolling, vectorization without remainder loops
  where the count is a multiple of the vector width);
* per-thread buffers ``local v: f32[blockDim.z][blockDim.y][blockDim.x]`` of constant size
  (stack memory, or registers once unrolled);
* index arithmetic such as ``blockIdx.x * 256u + tx`` with constant strides;
* block-level values derived from the shape (``s = blockDim.x / 2u``) as constants.

A thread loop of one iteration (``blockDim.y == 1``, ``blockDim.z == 1``) is replaced by its
body with the counter set to ``0u``, so a 1-D block reads as one loop::

    for threads tz = 0u to 1u {                  for threads tx = 0u to 256u {
      for threads ty = 0u to 1u {          =>      acc[0u][0u][tx] = ...
        for threads tx = 0u to 256u {            }
          acc[tz][ty][tx] = ...

A block-level loop (one that encloses thread loops) whose counter takes a few values known now
is unrolled, each copy with its counter a constant: the tree reductions of shared memory, whose
stride starts at ``blockDim.x / 2``, become a fixed sequence of thread loops of constant trip
counts, and the divisions by the stride (``ty % (2 * stride)``) become masks::

    var s: u32 = 128u                             for threads tx_1 = 0u to 128u { ... sdata[tx_1 + 128u] }
    while (s > 0u) {                       =>     for threads tx_1_1 = 0u to 64u { ... sdata[tx_1_1 + 64u] }
      for threads tx_1 = 0u to min(s, 256u) ...   ...   (8 copies; names declared inside are renamed)
    } update { s = s >> 1 }

Only loops of at most ``MAX_UNROLL_TRIPS`` iterations whose copies stay under
``MAX_UNROLL_NODES`` IR nodes are unrolled (compile time), and only where the counter is written
by nothing but the loop itself and no ``break``/``continue`` leaves the loop.

The copies' guards on the counter then select every ``m``-th thread. A thread loop whose body
is one ``if`` (no ``else``) is put inside the parts of its condition that do not depend on its
counter (a guard on ``ty`` in the loop over ``tx``), and a thread loop whose body is one ``if``
with a conjunct ``(i32)ty % m == r`` (or ``ty & (m - 1) == r``, ``m`` a power of two; ``ty`` may have a
constant added, ``((i32)ty + 1) % m == 0``, where the sum is not negative and does not wrap over the
loop) runs only over those threads, ``m`` apart, without it (conjuncts that do not depend on the counter, load
nothing and cannot trap are tested outside the loop, the others stay)::

    for threads ty = 0u to 16u {                 for threads ty = 0u to 16u step 4u {
      for threads tx = 0u to 16u {         =>      for threads tx = 0u to 16u {
        if ((i32)ty % 4 == 0) { s[ty][tx] += s[ty + 2][tx] }      s[ty][tx] += s[ty + 2][tx]

Exact: the iterations skipped are those whose guard is false, the others run in the same order
(backprop's tree over 16 rows: 30 of the 64 row passes ran, the rest tested and skipped).

Last, with the rows' loops now of constant length, rows of threads whose serial loops share loads
run four at a time, those loops as one (``polypy.passes.jam_threads``).
"""
from __future__ import annotations

import dataclasses
import functools

from polypy.ir import nodes as n
from polypy.ir.types import U32
from polypy.ir.names import NameSupply
from polypy.ir.jumps import jumps_out
from polypy.ir.queries import conjunction, conjuncts, declared_names, written_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.visitor import Mutator, rebuild, substitute, walk
from polypy.passes.eliminate_dead_code import eliminate_dead_code
from polypy.launch import check_block_shape
from polypy.passes.fold_constants import fold_constants, fold_expr
from polypy.passes.jam_threads import jam_thread_loops
from polypy.passes.pipeline import Pass, run_pipeline
from polypy.stack import on_big_stack

BlockShape = tuple[int, int, int]

MAX_UNROLL_TRIPS = 16
MAX_UNROLL_NODES = 8000


class _UnitThreadLoops(Mutator):
    """Thread loops ``0u to 1u step 1u`` -> their body with the counter replaced by ``0u``."""

    def visit_For(self, s: n.For) -> n.Stmt | tuple[n.Stmt, ...]:
        s = self.generic_visit(s)
        if (s.kind == "threads" and _is_u32(s.start, 0) and _is_u32(s.stop, 1) and _is_u32(s.step, 1)
                and not jumps_out(s.body, n.Break, n.Continue)):
            zero = {n.Var(s.var, s.vtype): n.Const(0, U32)}
            return tuple(substitute(inner, zero) for inner in s.body)
        return s


def _is_u32(e: n.Expr, value: int) -> bool:
    return isinstance(e, n.Const) and e.ctype == U32 and e.value == value


class _FoldIntegerMinMax(Mutator):
    """``min``/``max`` of integer constants (what a known block shape leaves in loop bounds:
    ``min(128u, 256u)``) folded; ``fold_constants`` does not evaluate calls."""

    def visit_Call(self, e: n.Call) -> n.Expr:
        e = self.generic_visit(e)
        if (e.fn in ("min", "max") and e.rtype.is_int and len(e.args) == 2
                and all(isinstance(a, n.Const) for a in e.args)):
            pick = min if e.fn == "min" else max
            return n.Const(pick(int(e.args[0].value), int(e.args[1].value)), e.rtype, loc=e.loc)
        return e


def _propagate_constants(kernel: n.Kernel) -> n.Kernel:
    """Locals declared with a constant and never written again, replaced by the constant
    (``var tx_hi: u32 = 256u`` once the shape is known; the declarations die)."""
    written = written_names(kernel.body)
    consts: dict[n.Expr, n.Expr] = {}
    for s in kernel.body:
        for x in walk(s):
            if isinstance(x, n.Decl) and isinstance(x.init, n.Const) and x.name not in written:
                consts[n.Var(x.name, x.vtype)] = x.init
    return substitute(kernel, consts) if consts else kernel


class _UnrollBlockLoops(Mutator):
    """Unrolls block-level loops whose counter takes few, known values (see the module docstring)."""

    def __init__(self, names: NameSupply):
        self.names = names  # copies of declarations get fresh names
        self.in_threads = 0

    def visit_For(self, s: n.For) -> n.Stmt | tuple[n.Stmt, ...]:
        if s.kind == "threads":
            self.in_threads += 1
            try:
                return self.generic_visit(s)
            finally:
                self.in_threads -= 1
        s = self.generic_visit(s)
        if self.in_threads or not _encloses_threads(s.body):
            return s
        values = _counted_values(s)
        if values is None or jumps_out(s.body, n.Break, n.Continue) or s.var in written_names(s.body):
            return s
        return self.copies(s.body, s.var, s.vtype, values) or s

    def visit_block(self, items):  # type: ignore[override]
        items = super().visit_block(items)
        if self.in_threads or not any(isinstance(x, n.While) for x in items):
            return items
        out: list = []
        changed = False
        for s in items:
            unrolled = self.unroll_while(s, out) if isinstance(s, n.While) else None
            if unrolled is None:
                out.append(s)
            else:
                out.extend(unrolled)
                changed = True
        return tuple(out) if changed else items

    def unroll_while(self, s: n.While, before: list) -> tuple[n.Stmt, ...] | None:
        """``var v = c; while (cond(v)) { body } update { v = f(v) }`` with v known before it."""
        if not _encloses_threads(s.body) or len(s.update) != 1 or not isinstance(s.update[0], n.Assign):
            return None
        var = s.update[0].name
        start = _known_value(var, before)
        if start is None or var in written_names(s.body) or jumps_out(s.body, n.Break, n.Continue):
            return None
        counter = n.Var(var, start.ctype)
        values: list[n.Const] = []
        current = start
        while True:
            cond = fold_expr(substitute(s.cond, {counter: current}))
            if not isinstance(cond, n.Const):
                return None
            if not cond.value:
                break
            values.append(current)
            if len(values) > MAX_UNROLL_TRIPS:
                return None
            current = fold_expr(substitute(s.update[0].value, {counter: current}))
            if not isinstance(current, n.Const):
                return None
        body = self.copies(s.body, var, start.ctype, values)
        if body is None:
            return None
        return body + (n.Assign(var, current, loc=s.loc),)  # the counter's value after the loop

    def copies(self, body: tuple[n.Stmt, ...], var: str, vtype, values: list[n.Const]) -> tuple[n.Stmt, ...] | None:
        size = sum(1 for s in body for _ in walk(s))
        if len(values) > MAX_UNROLL_TRIPS or size * len(values) > MAX_UNROLL_NODES:
            return None
        declared = sorted(declared_names(body))
        out: list[n.Stmt] = []
        for k, value in enumerate(values):
            fixed = {n.Var(var, vtype): n.Const(value.value, vtype)}
            copy = tuple(substitute(s, fixed) for s in body)
            if k > 0:  # names stay unique in the kernel
                copy = rename_locals(copy, {name: self.names.fresh(name) for name in declared})
            out.extend(copy)
        return tuple(out)


def _encloses_threads(stmts: tuple[n.Stmt, ...]) -> bool:
    return any(isinstance(x, n.For) and x.kind == "threads" for s in stmts for x in walk(s))


def _counted_values(s: n.For) -> list[n.Const] | None:
    """The counter's values of ``for v = c0 to c1 step c2`` with integer constants, or None."""
    if not (isinstance(s.start, n.Const) and isinstance(s.stop, n.Const) and isinstance(s.step, n.Const)
            and s.vtype.is_int and s.step.value > 0):
        return None
    trips = max(0, -(-(int(s.stop.value) - int(s.start.value)) // int(s.step.value)))
    if trips > MAX_UNROLL_TRIPS:
        return None
    return [n.Const(int(s.start.value) + k * int(s.step.value), s.vtype) for k in range(trips)]


def _known_value(var: str, before: list) -> n.Const | None:
    """The constant ``var`` holds after the statements ``before`` (a ``var``/assignment of a
    constant in this list, written by nothing after it), or None."""
    for s in reversed(before):
        if isinstance(s, (n.Decl, n.Assign)) and s.name == var:
            value = s.init if isinstance(s, n.Decl) else s.value
            return value if isinstance(value, n.Const) else None
        if var in written_names(s):
            return None
    return None


@on_big_stack
def specialize_block_shape(kernel: n.Kernel, *, block: BlockShape) -> n.Kernel:
    """``kernel`` for launches with block shape ``block`` only (see the module docstring)."""
    block = check_block_shape(block)
    mapping: dict[n.Expr, n.Expr] = {n.BlockDim(d): n.Const(block[d], U32) for d in range(3)}
    return _specialized(fold_constants(substitute(kernel, mapping)))  # buffer extents included


def specialize_for_block(kernel: n.Kernel, block: BlockShape) -> n.Kernel:
    """``specialize_block_shape`` run as the pass ``specialize-block-shape`` through
    ``run_pipeline`` (verified, timed, printed by ``--dump-after``): what every caller that
    builds a version for one block shape uses."""
    step = Pass("specialize-block-shape", functools.partial(specialize_block_shape, block=check_block_shape(block)))
    return run_pipeline(kernel, (step,))


def specialize_partial_coarse(kernel: n.Kernel, *, block: BlockShape, factor: int) -> n.Kernel:
    """A coarse kernel (CPU form of ``gpu2cpu.coarsen_blocks``: ``factor`` blocks of shape
    ``block`` along x as one) for the last coarse block of a row of the grid, where fewer than
    ``factor`` blocks are left: ``blockDim.x`` is ``(gridDim.x - blockIdx.x) * block[0]``, and
    ``blockDim.y``, ``blockDim.z`` and the buffers' extents are those of the full coarse block.

    Requires: run only where ``gridDim.x - blockIdx.x < factor`` (``join_partial_blocks``); the
    coarse kernel does the work of its first ``blockDim.x / block[0]`` blocks for any such
    ``blockDim.x`` (its sub-blocks are independent, and its shared arrays have a slice per
    sub-block). Guarantees: the work of the blocks from ``blockIdx.x`` to the end of the row."""
    full = check_block_shape((factor * block[0], block[1], block[2]))
    const: dict[n.Expr, n.Expr] = {n.BlockDim(d): n.Const(full[d], U32) for d in range(3)}
    left = n.Binary("sub", n.GridDim(0), n.BlockIdx(0))
    dynamic = dict(const)
    dynamic[n.BlockDim(0)] = n.Binary("mul", left, n.Const(block[0], U32))
    kernel = dataclasses.replace(kernel, buffers=tuple(substitute(b, const) for b in kernel.buffers),
                                 body=tuple(substitute(s, dynamic) for s in kernel.body))
    return _specialized(fold_constants(kernel))


# ---- the clean-up of a kernel whose block shape was substituted: registered steps ------------------
def unit_thread_loops(kernel: n.Kernel) -> n.Kernel:
    """Thread loops of one iteration replaced by their body (counter ``0u``)."""
    return _UnitThreadLoops().visit(kernel)


def unroll_block_loops(kernel: n.Kernel) -> n.Kernel:
    """Block-level loops whose counter takes few, known values, unrolled."""
    return rebuild(kernel, body=_UnrollBlockLoops(NameSupply.for_kernel(kernel)).visit_block(kernel.body))


def propagate_block_constants(kernel: n.Kernel) -> n.Kernel:
    """``min``/``max`` of constants folded, locals that only ever hold a constant replaced by it."""
    return fold_constants(_propagate_constants(fold_constants(_FoldIntegerMinMax().visit(fold_constants(kernel)))))


def stride_guarded_threads(kernel: n.Kernel) -> n.Kernel:
    """Guards on a thread counter's residue become the thread loop's step."""
    return _StrideGuardedThreads().visit(kernel)


# In order; each is registered under its name in ``polypy.driver.pipelines`` (``--dump-after``).
SPECIALIZE_CLEANUP: tuple[Pass, ...] = (
    Pass("unit-thread-loops", unit_thread_loops),
    Pass("fold-constants", fold_constants),
    Pass("unroll-block-loops", unroll_block_loops),
    Pass("propagate-block-constants", propagate_block_constants),
    Pass("stride-guarded-threads", stride_guarded_threads),
    Pass("eliminate-dead-code", eliminate_dead_code),
    Pass("jam-threads", jam_thread_loops),
)


def _specialized(kernel: n.Kernel) -> n.Kernel:
    """The clean-up of a kernel whose block shape was substituted (see the module docstring)."""
    return run_pipeline(kernel, SPECIALIZE_CLEANUP)


class _StrideGuardedThreads(Mutator):
    """Guards on a thread counter's residue become the loop's step (see the module docstring)."""

    def visit_For(self, s: n.For) -> n.Stmt | tuple[n.Stmt, ...]:
        s = self.generic_visit(s)
        if s.kind != "threads" or len(s.body) != 1 or not isinstance(s.body[0], n.If) or s.body[0].orelse:
            return s
        guard = s.body[0]
        counter = n.Var(s.var, s.vtype)
        atoms = conjuncts(guard.cond)
        # Conjuncts that do not depend on the counter, load nothing and cannot trap: tested once,
        # outside the loop (evaluating them for a loop without iterations changes nothing).
        outside = [a for a in atoms if _pure_without(a, counter)]
        inside = [a for a in atoms if not any(a is b for b in outside)]
        strided = _strided(s, counter, inside, guard) if inside else rebuild(s, body=guard.then)
        if not outside:
            return s if strided is None else strided
        if strided is None:
            strided = rebuild(s, body=(n.If(conjunction(inside), guard.then, loc=guard.loc),))
        return n.If(conjunction(outside), (strided,), loc=guard.loc)


def _strided(s: n.For, counter: n.Var, atoms: list[n.Expr], guard: n.If) -> n.For | None:
    """The thread loop ``s`` whose body is ``if (atoms...) guard.then``, over the threads of the
    first residue conjunct only; None where no conjunct is one."""
    if not (_is_u32(s.step, 1) and isinstance(s.start, n.Const) and isinstance(s.stop, n.Const)):
        return None
    for k, atom in enumerate(atoms):
        residue = _residue(atom, counter)
        if residue is None:
            continue
        m, r, k_off = residue
        lo, hi = int(s.start.value), int(s.stop.value)
        # ``(c + k) % m == r`` is ``c % m == (r - k) mod m`` where ``c + k`` is the exact sum for
        # every counter value of the loop: no wrap in its type, and not negative (C's ``%`` of a
        # negative number is not above 0, and an unsigned sum below 0 wraps).
        if k_off and not (lo + k_off >= 0 and hi - 1 + k_off < 2 ** 31):
            continue
        r = (r - k_off) % m
        start = lo + (r - lo) % m
        rest = atoms[:k] + atoms[k + 1:]
        body = guard.then if not rest else (n.If(conjunction(rest), guard.then, loc=guard.loc),)
        return rebuild(s, start=n.Const(min(start, int(s.stop.value)), U32), step=n.Const(m, U32), body=body)
    return None


def _pure_without(e: n.Expr, counter: n.Var) -> bool:
    """``e`` does not read ``counter`` or memory, calls nothing and divides only by nonzero
    constants."""
    for x in walk(e):
        if x == counter or isinstance(x, (n.Load, n.Call)):
            return False
        if isinstance(x, n.Binary) and x.op in ("div", "rem") and not (isinstance(x.b, n.Const) and x.b.value != 0):
            return False
    return True


def _residue(atom: n.Expr, counter: n.Var) -> tuple[int, int, int] | None:
    """``(m, r, k)`` for ``(c + k) % m == r`` or ``(c + k) & (m - 1) == r`` (``m`` a power of two;
    ``k`` an integer constant, 0 where there is no addition) with ``c`` the counter or a cast of
    it to an integer type (exact: the counter is below 1024), or None. The caller checks that
    ``c + k`` neither wraps nor goes below 0 over its loop."""
    if not (isinstance(atom, n.Binary) and atom.op == "eq" and isinstance(atom.b, n.Const)
            and isinstance(atom.a, n.Binary) and isinstance(atom.a.b, n.Const) and atom.a.op in ("rem", "band")):
        return None
    x, k = _counter_plus_constant(atom.a.a, counter)
    if x != counter:
        return None
    m, r = int(atom.a.b.value), int(atom.b.value)
    if atom.a.op == "band":
        if m < 0 or m & (m + 1):
            return None
        m += 1
    return (m, r, k) if m > 0 and 0 <= r < m else None


def _counter_plus_constant(x: n.Expr, counter: n.Var) -> tuple[n.Expr, int]:
    """``(counter, k)`` for ``c + k`` / ``c - k`` / ``k + c`` (``c`` the counter or an integer
    cast of it, ``k`` an integer constant, the addition in an integer type of at least 32 bits,
    or a cast of such a sum to one), else ``(x, 0)``."""
    def strip(e: n.Expr) -> n.Expr:
        if isinstance(e, n.Cast) and e.to.is_int and e.to.bits >= 16 and e.x == counter:
            return e.x
        return e

    if isinstance(x, n.Cast) and x.to.is_int and x.to.bits >= 32 and isinstance(x.x, n.Binary):
        x = x.x
    x = strip(x)
    if (isinstance(x, n.Binary) and x.op in ("add", "sub") and x.type.is_int and x.type.bits >= 32):
        a, b = strip(x.a), strip(x.b)
        if a == counter and isinstance(b, n.Const) and isinstance(b.value, int):
            return counter, int(b.value) if x.op == "add" else -int(b.value)
        if x.op == "add" and b == counter and isinstance(a, n.Const) and isinstance(a.value, int):
            return counter, int(a.value)
    return x, 0
