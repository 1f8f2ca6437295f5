"""Which thread loops run their iterations as independent vector lanes: the proof behind
``#pragma omp simd`` in the C backend and ``llvm.loop.parallel_accesses`` in the LLVM backend
(``independent_lanes``), and the order-free sums such a loop may reassociate (``summed_in``);
and the thread loops that scatter (``scatter_loop``), which both backends unroll instead."""
from __future__ import annotations

import dataclasses
from typing import Sequence

from polypy.analysis.loop_order import rows_walked
from polypy.ir import nodes as n
from polypy.ir.node_base import kinds_of, mask_of
from polypy.ir.visitor import substitute, walk, walk_only

LOADS = mask_of((n.Load,))

_AFFINE_OPS = frozenset({"add", "sub"})
_WIDE_INTS = frozenset({"i32", "u32", "i64", "u64"})


def vector_loop(kernel: n.Kernel, loop: n.For) -> list[str] | None:
    """What both backends ask of a thread loop of ``kernel``: None when its lanes may depend on
    each other (``independent_lanes``, with the kernel's shared and per-thread buffers), else the
    order-free sums it may reassociate (``summed_in``; often none). Also None where each lane
    walks its own row in a long serial loop inside (``polypy.analysis.loop_order.rows_walked``:
    the order the CPU schedule chose, that loop innermost): vectorized over the threads, GCC's
    ``omp simd`` would gather a row apart per lane at every step of that loop (PolyBench SYRK,
    its row loop a constant 1024 once specialized)."""
    if rows_walked(loop) is not None or _views_of_one_memory(kernel, loop):
        return None
    if loop.ordered:  # an iteration may read what an earlier one wrote, unless proved otherwise
        return [] if disjoint_iterations(kernel, loop) else None
    local = {b.name for b in kernel.buffers if b.space == "local"}
    private = local | {b.name for b in kernel.buffers if b.space == "shared"}
    sums = summed_in(loop, kernel.order_free_sums)
    return sums if independent_lanes(loop, private, sums, local) else None


def _views_of_one_memory(kernel: n.Kernel, loop: n.For) -> bool:
    """Whether ``loop`` stores through one of a parameter's pointers per member type (records of
    mixed member types, unions among them: ``SourceParam``) and accesses the memory through
    another: one lane's bytes through two pointer types. Under ``omp simd`` GCC lets a lane's
    load of a word pass its own store to half of it (a union's 16-bit member, then the word)."""
    accessed = {x.buffer for x in walk_only(loop.body, n.Load, n.Store)}
    stored = {x.buffer for x in walk_only(loop.body, n.Store)}
    for param in kernel.source_params:
        views = {name for path, name in param.members if path == ""}
        if len(views) > 1 and views & stored and len(views & accessed) > 1:
            return True
    return False


def scatter_loop(loop: n.For) -> bool:
    """Whether an innermost thread loop writes memory at an index it reads from memory (a
    histogram's ``local[data[i]] += 1``): no compiler vectorizes it, and each iteration is a short
    chain of dependent memory operations, so a few iterations in flight (unrolled by 4: neither
    compiler unrolls a loop with a run-time trip count by itself here) hide their latency."""
    if any(x.kind == "threads" for x in walk_only(loop.body, n.For)):
        return False
    return any(any(kinds_of(i) & LOADS for i in x.index) for x in walk_only(loop, n.Store, n.AtomicRMW))


def summed_in(loop: n.For, sums: Sequence[str]) -> list[str]:
    """The order-free sums (``Kernel.order_free_sums``) that ``loop`` only adds to: each assigned
    in it as ``s = s + v`` (``v`` without ``s``) and read nowhere else in it. The additions may be
    reassociated (``gpu2cpu.sum_uniform_atomics``): a ``reduction(+:s)`` clause."""
    if not sums:
        return []
    wanted = set(sums)
    adds: dict[str, int] = {}
    for x in walk_only(loop.body, n.Assign):
        if x.name in wanted:
            v = x.value
            if isinstance(v, n.Binary) and v.op == "add" and v.a == n.Var(x.name, v.a.type) \
                    and not any(isinstance(y, n.Var) and y.name == x.name for y in walk(v.b)):
                adds[x.name] = adds.get(x.name, 0) + 1
            else:
                wanted.discard(x.name)
    reads: dict[str, int] = {}
    for x in walk_only(loop.body, n.Var):
        if x.name in adds:
            reads[x.name] = reads.get(x.name, 0) + 1
    return [name for name in sums if name in wanted and name in adds and reads.get(name, 0) == adds[name]]


def independent_lanes(loop: n.For, private: frozenset[str] | set[str], sums: Sequence[str] = (),
                      local: frozenset[str] | set[str] = frozenset()) -> bool:
    """Whether ``#pragma omp simd`` is exact on the thread loop ``loop``: no iteration reads what
    another one writes, so running several in lockstep changes nothing.

    Distinct CUDA threads never touch one element between two barriers unless one of them only
    reads it or they use atomics (anything else is a data race, undefined in CUDA), so what is
    left to prove is that the plain updates ``lower_block_atomics`` made of block atomics, and
    writes to values declared outside the loop, do not collide: ``loop`` is innermost (inside it
    at most serial loops with constant bounds), assigns only locals it declares, each store's
    index moves with the counter at a constant nonzero stride in one of its indices, whose other
    terms neither the lanes nor loops inside them vary (``a[row * n + tx]``, ``s[ty][tx]``,
    ``s[ty + j][tx]`` in a loop over ``j``; never ``s[0]``, ``h[bin]`` or ``s[tx * k]``; in memory
    outside the block, the counters of those loops may vary it too: ``out[(base + j) * cols +
    tx]``), and a block-private buffer (``private``: shared and per-thread memory, where
    atomics became plain updates) it stores to it accesses at that one index only, so no two
    iterations touch the same element of what the loop writes. A per-thread array (``local``)
    that the loop accesses only at its lane's copy (the counter as the last index) is exempt from
    both rules: a gradient's tape ``tape[k][tz][ty][tx]`` written in a tap loop over ``k``.
    """
    if loop.ordered or _divides_counter(loop, private):
        return False
    body = _straight_body(loop, sums)
    if body is None:
        return False
    # Per-thread arrays (``local``) accessed only at the lane's own copy, the loop's counter as
    # the last index (``tape[k][tz][ty][tx]``, ``v_x[tx]``): lanes never share an element, what
    # ever the other indices (a tap loop's ``k``) are.
    counter = n.Var(loop.var, loop.vtype)
    accesses = [x for x in walk_only(loop.body, n.Load, n.Store) if x.buffer in local]
    own = {x.buffer for x in accesses} - {x.buffer for x in accesses if not x.index or x.index[-1] != counter}
    # Counters of the serial loops inside: a store to memory outside the block (no lowered
    # atomics there) may move with them too (``out[(base + j) * cols + tx]`` in a loop over ``j``):
    # lanes in lockstep then write different rows at one step, and an element two lanes write at
    # different steps is an element two CUDA threads write between two barriers, a data race.
    inner = {x.var for x in walk_only(loop.body, n.For)}
    for x in walk_only(loop.body, n.Store):
        # One index moves with the counter and with nothing else the lanes or the loops inside
        # them vary (``s[ty + j][tx]`` in a tap loop over ``j``): lanes never share an element.
        if isinstance(x, n.Store) and x.buffer not in own and \
                not _moves_alone(x.index, loop, body, inner if x.buffer not in private else set()):
            return False
    # Two atomics on one shared array at different offsets (s[tx], s[tx + 1]) are legal CUDA: a
    # block-private buffer the loop stores to (where lowered atomics live) is accessed at one
    # index only, so each iteration touches its own element.
    indices, stored = _indices(loop)
    return all(len(indices[b]) == 1 for b in stored if b in private and b not in own)


def _divides_counter(loop: n.For, private: frozenset[str] | set[str]) -> bool:
    """Whether an index into a block-private array divides the counter (``sh[tx / 64u][tx % 64u]``,
    the sub-blocks of a coarse block): GCC 12 at -O3 vectorized two such ``omp simd`` loops
    reading a shared array that a plain loop between them wrote with the first vector of lanes
    reading the values from before that loop (a random kernel in partial coarse blocks of 2 x 64,
    ``tests/test_codegen_c_fuzz.py``); without the pragma it vectorizes them exactly itself."""
    values: dict[n.Expr, n.Expr] | None = None
    for x in walk_only(loop.body, n.Load, n.Store):
        if x.buffer in private:
            for i in x.index:
                for y in walk(i):
                    if not (isinstance(y, n.Binary) and y.op in ("div", "rem") and _mentions(y.a, loop.var)):
                        continue
                    if values is None:
                        values = _declared_values(loop)
                    # A numerator in which the counter cancels (a gradient's tape index ``(i - tx)
                    # / D`` of a block-stride loop, ``i = b + tx``) divides no counter.
                    if _coefficient(_expand(y.a, values), loop.var) != 0:
                        return True
    return False


def _declared_values(loop: n.For) -> dict[n.Expr, n.Expr]:
    """The initial values of the locals ``loop``'s body declares once and never assigns."""
    assigned = {x.name for x in walk_only(loop.body, n.Assign)}
    return {n.Var(x.name, x.vtype): x.init for x in walk_only(loop.body, n.Decl)
            if x.init is not None and x.name not in assigned}


def _coefficient(e: n.Expr, var: str) -> int | None:
    """``c`` where the integer ``e`` is ``c * var + rest``, ``rest`` not mentioning ``var`` (sums,
    differences, products by constants; casts between integer types of at least 32 bits, exact on
    a thread counter, which is below 1024, and widening ones on anything); None otherwise."""
    if not _mentions(e, var):
        return 0
    if isinstance(e, n.Var):
        return 1
    if isinstance(e, n.Cast):
        if not (e.to.name in _WIDE_INTS and e.x.type.name in _WIDE_INTS):
            return None
        widening = e.to.bits > e.x.type.bits and (e.to.is_signed or not e.x.type.is_signed)
        if widening or e.x == n.Var(var, e.x.type) or e.to == e.x.type:
            return _coefficient(e.x, var)
        return None
    if isinstance(e, n.Binary) and e.op in _AFFINE_OPS:
        a, b = _coefficient(e.a, var), _coefficient(e.b, var)
        if a is None or b is None:
            return None
        return a + b if e.op == "add" else a - b
    if isinstance(e, n.Binary) and e.op == "mul":
        if isinstance(e.b, n.Const) and e.b.type.is_int:
            a = _coefficient(e.a, var)
            return None if a is None else a * int(e.b.value)
        if isinstance(e.a, n.Const) and e.a.type.is_int:
            b = _coefficient(e.b, var)
            return None if b is None else b * int(e.a.value)
    return None


def disjoint_iterations(kernel: n.Kernel, loop: n.For) -> bool:
    """Whether the iterations of a thread loop run in order (``For.ordered``) touch disjoint
    memory anyway, so that they may run as vector lanes: the loop is innermost (inside it at most
    serial loops with constant bounds), assigns only locals it declares, and each buffer it
    stores to it accesses at one index only, one of whose components moves with the counter at a
    constant nonzero stride and with nothing else that varies in the loop (``w[ty][tx]``); a
    pointer it stores through is the only one it accesses (two pointers may alias).

    The race-freedom ``independent_lanes`` relies on does not hold here: the loop runs two
    barrier intervals, and a thread's part of the second may read what another wrote in the first
    (``gpu2cpu.fuse_thread_loops``). That is exactly what the single index rules out: the order
    mattered only for a statement that left the loop (thread 0's ``if (tx == 0) s[ty] = ...``,
    run before it by ``tighten_thread_bounds``)."""
    if _divides_counter(loop, {b.name for b in kernel.buffers}):
        return False
    body = _straight_body(loop)
    if body is None:
        return False
    indices, stored = _indices(loop)
    for b in stored:
        if len(indices[b]) != 1 or not _moves_alone(next(iter(indices[b])), loop, body, set()):
            return False
    # Arrays of the block (shared, per-thread) are never views of one another; pointers may be.
    pointers = {p.name for p in kernel.params if isinstance(p.ptype, n.PointerType)} & set(indices)
    return not (stored & pointers) or len(pointers) == 1


@dataclasses.dataclass(frozen=True)
class _Body:
    """The locals of a thread loop's body: ``declared`` (with the counters of loops inside) and
    ``values``, the initial values of those declared once and never assigned (``c = base + tx``),
    which stand for them in indices."""

    declared: frozenset[str]
    values: dict[n.Expr, n.Expr]


def _straight_body(loop: n.For, sums: Sequence[str] = ()) -> _Body | None:
    """The locals of ``loop``'s body, or None where the body cannot run as vector lanes: it
    loops while, uses atomics, warp operations or barriers, jumps, holds a thread loop or a
    serial loop without constant bounds, or assigns a local it does not declare (other than the
    reductions ``sums``)."""
    declared = frozenset(x.name if isinstance(x, n.Decl) else x.var for x in walk_only(loop.body, n.Decl, n.For))
    assigned = {x.name for x in walk_only(loop.body, n.Assign)}
    for x in walk_only(loop.body, n.Stmt):
        if isinstance(x, (n.While, n.AtomicRMW, n.Shuffle, n.Vote, n.Barrier, n.Break, n.Continue, n.Return, n.Print, n.Launch,
                          n.AssertFail)) or \
                (isinstance(x, n.For) and (x.kind == "threads" or not _constant_trip(x))):
            return None
        if isinstance(x, n.Assign) and x.name not in declared and x.name not in sums:
            return None
    values = {n.Var(x.name, x.vtype): x.init for x in walk_only(loop.body, n.Decl)
              if x.init is not None and x.name not in assigned}
    return _Body(declared, values)


def _indices(loop: n.For) -> tuple[dict[str, set[tuple[n.Expr, ...]]], set[str]]:
    """The indices at which ``loop``'s body accesses each buffer, and the buffers it stores to."""
    indices: dict[str, set[tuple[n.Expr, ...]]] = {}
    for x in walk_only(loop.body, n.Load, n.Store):
        indices.setdefault(x.buffer, set()).add(x.index)
    return indices, {x.buffer for x in walk_only(loop.body, n.Store)}


def _moves_alone(index: tuple[n.Expr, ...], loop: n.For, body: _Body, free: set[str]) -> bool:
    """Whether a component of ``index`` (its locals replaced by their values) moves with
    ``loop``'s counter at a constant nonzero stride and with nothing else the loop varies: no
    load, no call, no local it declares other than those in ``free``."""
    return any(affine_in(i, loop.var) and not any(
        isinstance(y, (n.Load, n.Call)) or (isinstance(y, n.Var) and y.name in body.declared - free)
        for y in walk(i))
        for i in (_expand(i, body.values) for i in index))


def affine_in(e: n.Expr, var: str) -> bool:
    """``e`` is ``c * var + rest`` with ``c`` a nonzero constant and ``var`` not in ``rest``
    (sums, differences, products by constants and widening casts)."""
    if isinstance(e, n.Var):
        return e.name == var
    if isinstance(e, n.Cast):
        return e.to.name in _WIDE_INTS and e.x.type.name in _WIDE_INTS and affine_in(e.x, var)
    if isinstance(e, n.Binary):
        a_has, b_has = _mentions(e.a, var), _mentions(e.b, var)
        if e.op in _AFFINE_OPS:
            if a_has and b_has:
                return False
            return affine_in(e.a, var) if a_has else (b_has and affine_in(e.b, var))
        if e.op == "mul":
            if a_has and _nonzero_int(e.b):
                return affine_in(e.a, var)
            if b_has and _nonzero_int(e.a):
                return affine_in(e.b, var)
    return False


def _constant_trip(loop: n.For) -> bool:
    """A serial loop with constant bounds (``for dy = -2 to 3``): the compiler unrolls it and
    vectorizes the thread loop around it."""
    return all(isinstance(e, n.Const) for e in (loop.start, loop.stop, loop.step))


def _expand(e: n.Expr, values: dict[n.Expr, n.Expr], depth: int = 4) -> n.Expr:
    """``e`` with the locals of ``values`` replaced by their values (a few levels deep)."""
    for _ in range(depth):
        if not any(isinstance(x, n.Var) and x in values for x in walk(e)):
            break
        e = substitute(e, values)
    return e


def _nonzero_int(e: n.Expr) -> bool:
    return isinstance(e, n.Const) and e.type.name in _WIDE_INTS and e.value != 0


def _mentions(e: n.Expr, var: str) -> bool:
    return any(isinstance(x, n.Var) and x.name == var for x in walk(e))
