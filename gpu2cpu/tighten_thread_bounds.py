"""tighten_thread_bounds: guards on the thread counter become loop bounds (CPU form -> CPU form).

Requires: a CPU-form kernel (thread counters named ``tx``/``ty``/``tz``, see
``gpu2cpu.thread_affine``). Guarantees: the same results; thread loops whose bodies test the
thread counter run branch-free over the threads that pass the test, and index arithmetic on the
counter is free of wrap-around (so that C and LLVM compilers see unit strides and vectorize).

For each thread loop, innermost first:

1. **Fission** (``gpu2cpu.distribute_thread_loops``): a body made of statements that share no
   per-thread local is cut into one thread loop per independent part when one of them is a
   guard (``if (tx < 3) {...}`` after the main work), so the guard can go to that loop's
   bounds. Not when the order in which threads run matters
   (``gpu2cpu.thread_loops.order_sensitive``).
2. **Index-set splitting**: the first top-level ``if`` whose condition is a conjunction of
   *interval* atoms (affine in the counter, exactly:
   ``(i32)(blockIdx.x * blockDim.x + tx) < n``, ``tx == 0u``, ``tx >= offset``) and
   *uniform* atoms (not depending on the counter, no loads) is decided per range of the counter::

       for threads tx = 0 to bdx {          if (uniform) {
         A                                    for tx = 0 to L   { A; F; B }
         if (uniform && L <= tx < H) T  ==>   for tx = L to H   { A; T; B }
         else F                               for tx = H to bdx { A; F; B }
         B                                  } else { for tx = 0 to bdx { A; F; B } }
       }

   Ranges with nothing to run are dropped (a plain guard gives one loop ``[L, H)``); atoms that
   are neither stay as a residual guard inside. Ranges are clamped, so empty ones are empty.
   A top-level store, assignment or declaration of a select that loads from memory
   (``smem[l] = (g < n) ? in[g] : 0``) is split the same way, as ``if (c) x = a else x = b``,
   with one more version for blocks where every thread takes ``a`` (``if (tx_hi == blockDim.x)``:
   a tile inside the array), whose trip count a specialized block shape makes constant.
   Compilers turn the select into masked loads; the split copies measured faster (matmul_tiled's
   16x16 tiles on one thread: 1.44x -> 1.66x of the OpenMP port through LLVM, 0.66x -> 1.40x
   through C). Loads of the block's own arrays count too (a scan's ``(tid >= offset) ?
   s[tid - offset] : 0``: prefix_scan 0.62x -> 0.76x through C, 0.80x -> 0.92x through LLVM).
2b. **Peeling boundary threads**: where no single split applies (an ``if``/``else if`` chain too
   large to copy once per condition: srad's ``ty == 0 && tx == 0``, ``tx == 15``, ...), every
   comparison in the top-level chains that holds on a constant range of the counter is decided
   at once, one loop per range between consecutive bounds (``[0, 1)``, ``[1, 15)``,
   ``[15, 16)``, ``[16, bdx)``); in the ranges longer than ``SMALL_TRIP_COUNT`` a chain left
   with conditions that do not depend on the counter is unswitched, one loop per branch, so
   that the interior range vectorizes (srad_v2 0.89x -> 1.07x of Rodinia's OpenMP version).
2c. **Unclamping indices** (``clamp_split``): an index clamped by a select on the counter
   (pathfinder's and hotspot's ``prev[W < validXmin ? validXmin : W]``, ``W = tx - 1``; the
   select may be in the declaration of a local the index reads) is a gather in a vector loop.
   On the range of the counter where every such select takes its operand that varies with the
   counter (for ``==``, hotspot3D's ``W = (i == 0) ? c : c - 1``, where it is false, on the
   longer side of its point), the loop reads with that operand alone; the threads before and
   after the range keep the selects. A copy over the loop's own bounds runs where the range is
   all of them (a block inside the array). Rodinia pathfinder's kernel 122 -> 77 ms of
   samples, as fast as the OpenMP port's loop. (A select whose condition is the same for every
   thread is linear already: ``thread_affine.CounterAnalysis`` makes it a counter-free atom.)
3. **Conditions constant over the block** (versioning, ``gpu2cpu.version_thread_loops``): an ``if`` deeper in the body whose condition is
   affine in the counter and in the variables of short constant loops around it (a stencil's
   ``x + dx >= 0 && x + dx < width``, a boundary test ``x == 0 || x == nx - 1``) usually has the
   same value for every thread and iteration of a block. It is computed once
   (``var tx_c: bool = <value at one corner>``), checked at run time to be constant over the
   block (below), and the loop is copied once per value of up to two such flags, each copy with
   the conditions decided::

       for threads tx {                         var tx_c = x0 - 2 >= 0 && x0 + 2 < width
         for dx = -2 to 3 {               ==>   if (tx_c) { for threads tx { for dx { acc += ... } } }
           if (x + dx >= 0 && x + dx < width)   else      { for threads tx { for dx { } } }
             acc += ...

   In kernels that run in coarse blocks (the pass's ``ranges`` option), for blocks of at least
   ``RANGE_MIN_THREADS`` threads along the counter's dimension (a test of ``blockDim`` that
   specialized versions fold), the flags are decided on a
   range ``[tx_in, tx_out)`` of the threads instead (``version_thread_loops.box_range``): each
   comparison varies only on one interval of the counter near the array's border, so a block
   on the border runs its other threads in the copies without conditions and only the threads
   near the border with them (``for tx in [0, tx_in) {with}; copies over [tx_in, tx_out);
   for tx in [tx_out, hi) {with}``). A wide block then keeps its vector loop wherever it lies
   (jacobi2d, conv2d in coarse blocks of 4096 x 8: see ``gpu2cpu.coarsen_blocks.WIDE_RUN``).

4. **Exact index arithmetic**: an index affine in the counter that contains wrapping arithmetic
   on it is rewritten as ``(i64)uniform + (i64)tx * c``
   (``in[(i32)(blockIdx.x * blockDim.x + tx)]`` becomes ``in[(i64)(blockIdx.x * blockDim.x) +
   (i64)tx]``: compilers then see a unit stride); elsewhere ``(i32)(P + tx)`` becomes
   ``(i32)P + (i32)tx``.
5. **Run-time check**: steps 2 to 4 are exact only if the wrapping arithmetic they looked
   through does not wrap for any thread of the block (``thread_affine.Need``), and step 3 only
   where its conditions are constant. What the interval analysis cannot prove becomes one
   block-uniform check; when it fails (launches beyond ``2**31`` threads per dimension, indices
   at the edge of ``u32``, the blocks on the border of a stencil) the original loop runs::

       if ((i64)(blockIdx.x * blockDim.x) + (i64)blockDim.x - 1l <= 2147483647l) { fast } else { original }

   Where step 3's conditions are what failed (a stencil's border blocks), the loop runs with its
   conditions but with step 4's exact indices, under step 4's check alone, before falling back
   to the original: compilers vectorize wrapping ``(i32)(blockIdx.x * blockDim.x + tx)``
   indices with gathers and scatters, and jacobi2d's border blocks (6% of them) took half of
   its time through C (0.48x -> 0.74x of the OpenMP port).

   Conditions of enclosing ``if`` s are known facts: a check already made is not repeated.

A thread loop whose body holds more than ``MAX_TIGHTENED_NODES`` IR nodes (machine-generated
expressions of thousands of terms) is left as it is: the steps copy the body (versions, the
original under the run-time check) and walk it once per condition, which costs more than a
vector loop gains there (a 10,000-term sum: 7 s of CPU, its code twice as long). The size counts
each read of a binding (``let i = ...``) as its value: the analyses look through it.

An ``if`` of the body whose condition is the same in every thread and iteration and that
chooses between a plain update and an atomic one (a gradient's ``if (x_private) d_x[i] += ct
else atomicAdd(...)``) gives one copy of the loop per value (``atomic_choices``,
``version_thread_loops.atomic_flags``): the plain copy has no atomic left and vectorizes.
Counter-uniform ``if`` s that end up alone in a thread loop are hoisted out of it (unswitching),
so a guard on ``ty`` inside the ``tx`` loop reaches the ``ty`` loop's bounds, and run-time
checks move out of the loop nest. A statement of the first thread alone (``if (tx == 0) S``
first in the body) runs before the loop, which then covers every thread (``first_thread``).
``report`` receives one ``LoweringDecision`` per loop changed.

Where the steps live: the walk over the kernel, the run-time check (``guarded``) and the steps
``unswitch``, ``atomic_choices``, ``first_thread``, ``distribute`` and ``version_conditions`` here; index-set
splitting in ``gpu2cpu.split_thread_ranges``, peeling in ``gpu2cpu.peel_thread_ranges``,
unclamping in ``gpu2cpu.unclamp_indices``, exact index arithmetic in ``gpu2cpu.exact_indices``;
their shared state (``Tightening``) in ``gpu2cpu.tighten_state``. ``STEPS`` is the order.
"""
from __future__ import annotations

import dataclasses

from gpu2cpu.distribute_thread_loops import fission_chunks, fission_parts
from gpu2cpu.exact_indices import exact_indices
from gpu2cpu.peel_thread_ranges import peel_boundary_threads
from gpu2cpu.report import LoweringDecision
from gpu2cpu.split_thread_ranges import find_split, split_ranges
from gpu2cpu.thread_affine import Facts, Need, counter_dim, facts_of_condition, i64, is_check, need_exprs, split_conjuncts
from gpu2cpu.thread_loops import copy_loop, rewrite_cpu_body
from gpu2cpu.tighten_state import Step, Tightening
from gpu2cpu.unclamp_indices import unclamp_indices
from gpu2cpu.version_thread_loops import MAX_UNSWITCHED, atomic_flags, box_range, box_version, flag_copies, version_loop
from polypy.ir import nodes as n
from polypy.ir.jumps import jumps_out
from polypy.ir.printer import format_expr
from polypy.ir.queries import conjunction, expanded_size, let_values, read_names, substitute_lets
from polypy.ir.types import I64, U32
from polypy.ir.visitor import Mutator, rebuild, substitute, walk_only

# In kernels for coarse blocks (the ``ranges`` option), conditions constant over most of a block
# are decided on a range of the threads (``box_range``) in blocks of at least this many threads
# along the counter's dimension; narrower blocks decide them for the whole block or not at all. In a loop of 32 (a
# transpose's tile row) the range's bounds, computed per row, cost more than the few border
# blocks gain (transpose_tiled 0.57x -> 0.48x of the OpenMP port through LLVM); in a loop of
# 1024 (a coarse row of a stencil) a border block runs most of its threads in the vector loop.
RANGE_MIN_THREADS = 256
# Thread loops with bodies larger than this (IR nodes) are left alone (see the module docstring).
MAX_TIGHTENED_NODES = 50_000


def tighten_thread_bounds(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None,
                          ranges: bool = False) -> n.Kernel:
    """Guards on thread counters become bounds; see the module docstring. ``ranges``: the
    kernel runs in wide blocks (coarse ones, ``polypy.driver.pipelines.coarsen_for_block``):
    step 3 also decides its conditions on ranges of the threads, for blocks of at least
    ``RANGE_MIN_THREADS`` along x (elsewhere the extra version would only cost compile time)."""
    return rewrite_cpu_body(kernel, lambda k: _Walk(Tightening(k, ranges, STEPS)), what="tighten_thread_bounds",
                            report=report)


class _Walk(Mutator):
    """Each thread loop of the kernel, innermost first, through ``guarded``; ``facts``: what the
    conditions of the enclosing ``if`` s tell (innermost last)."""

    def __init__(self, st: Tightening):
        self.st = st
        self.facts: list[Facts] = [Facts()]

    @property
    def decisions(self) -> list[LoweringDecision]:
        return self.st.decisions

    def visit_Expr(self, e: n.Expr) -> n.Expr:
        return e  # expressions hold no loops

    def visit_If(self, s: n.If) -> n.Stmt:
        self.facts.append(self.facts[-1].with_needs(facts_of_condition(s.cond)))
        try:
            then = self.visit_block(s.then)
        finally:
            self.facts.pop()
        # The `else` of a run-time check made by this pass is the original code: left alone.
        orelse = s.orelse if is_check(s.cond) else self.visit_block(s.orelse)
        return rebuild(s, then=then, orelse=orelse)

    def visit_For(self, s: n.For) -> n.Stmt | tuple[n.Stmt, ...]:
        loop = self.generic_visit(s)  # inner loops first
        if not (s.kind == "threads" and counter_dim(s.var) is not None):
            return loop
        # measured with the bindings written out: the steps' analyses look through them
        if expanded_size(loop.body, let_values(loop.body)) > MAX_TIGHTENED_NODES:
            self.st.note(loop, f"thread loop over {loop.var}: left as it is (its body has over "
                               f"{MAX_TIGHTENED_NODES:,} operations)")
            return loop
        ranges = self.st.ranges
        for x in walk_only(loop, n.For):  # new counters and loops appear as loops are copied
            if isinstance(x, n.For) and x.kind == "threads" and counter_dim(x.var) is not None:
                ranges.counters[x.var] = counter_dim(x.var)  # type: ignore[assignment]
            elif isinstance(x, n.For) and x.kind == "serial" and x.vtype.is_int:
                ranges.loops[x.var] = x
        out = guarded(self.st, loop, self.facts[-1])
        return loop if len(out) == 1 and out[0] is loop else tuple(out)


# ---------------------------------------------------------------------- one thread loop
def guarded(st: Tightening, loop: n.For, facts: Facts) -> list[n.Stmt]:
    """The statements replacing ``loop`` (its body already processed): the steps' result under
    one run-time check of what they could not prove, the original loop otherwise."""
    needs: list[Need | n.Expr] = []
    out = st.transform(loop, facts, needs, depth=0)
    if needs:
        checks = need_exprs([x for x in needs if isinstance(x, Need)])
        checks += [x for x in needs if not isinstance(x, Need)]
        fallback: n.Stmt = copy_loop(loop, st.names)
        st.note(loop, f"thread loop over {loop.var}: run-time check {format_expr(conjunction(checks))} "
                      f"(no wrap-around, conditions constant over the block); the original loop runs otherwise")
        if any(not isinstance(x, Need) for x in needs):
            fallback = border_version(st, loop, facts, fallback)
        out = [n.If(conjunction(checks), tuple(out), (fallback,), loc=loop.loc)]
    return out


def border_version(st: Tightening, loop: n.For, facts: Facts, original: n.Stmt) -> n.Stmt:
    """For the blocks where versioned conditions vary (a stencil's border blocks): ``loop``
    with its conditions kept but exact index arithmetic (step 4), under its own no-wrap
    check, ``original`` otherwise. Without it those blocks run the original loop, whose
    wrapping ``(i32)(blockIdx.x * blockDim.x + tx)`` indices compilers vectorize with
    gathers and scatters: a few percent of the blocks took half of jacobi2d's time."""
    needs: list[Need] = []
    copy = copy_loop(loop, st.names)
    exact = exact_indices(copy, facts, needs, ranges=st.ranges)
    if exact is copy:
        return original
    if not needs:
        return exact
    check = conjunction(need_exprs(needs))
    st.note(loop, f"thread loop over {loop.var}: where the conditions vary over the block, exact index "
                  f"arithmetic under the run-time check {format_expr(check)}")
    return n.If(check, (exact,), (original,), loc=loop.loc)


# ---------------------------------------------------------------------- the steps
def unswitch(st: Tightening, loop: n.For, facts: Facts, needs: list[Need], depth: int) -> list[n.Stmt] | None:
    """An ``if`` uniform in the counter, alone in the loop: hoisted (each branch's loop gets
    its own run-time checks, inside it). Lets first (the thread's named coordinates) do not
    count: the hoisted condition is written with their values, each branch's loop keeps them."""
    lead = _leading_lets(loop.body)
    if len(loop.body) != lead + 1 or not isinstance(loop.body[lead], n.If):
        return None
    s, lets = loop.body[lead], loop.body[:lead]
    analysis = st.analysis(loop, 0)
    atoms = split_conjuncts(s.cond)
    uniform = [analysis.uniform(a) for a in atoms]
    if not s.orelse:
        hoist = [u for u in uniform if u is not None]
        if not hoist:
            return None
        rest = [a for a, u in zip(atoms, uniform) if u is None]
        inner = s.then if not rest else (n.If(conjunction(rest), s.then, loc=s.loc),)
        cond = conjunction(hoist)
        if not is_check(cond):
            st.note(loop, f"thread loop over {loop.var}: condition {format_expr(cond)} does not depend on "
                          f"{loop.var}: tested once, outside the loop")
        new = dataclasses.replace(loop, body=lets + inner)
        inner_facts = facts.with_needs(facts_of_condition(cond))
        return [n.If(cond, tuple(guarded(st, new, inner_facts)), loc=s.loc)]
    if all(u is not None for u in uniform):
        cond = conjunction(uniform)  # type: ignore[arg-type]
        if not is_check(cond):
            st.note(loop, f"thread loop over {loop.var}: branch on {format_expr(cond)}, which does not depend "
                          f"on {loop.var}, moved outside the loop")
        then_loop = dataclasses.replace(loop, body=lets + s.then)
        else_loop = copy_loop(loop, st.names, body=lets + s.orelse)
        inner_facts = facts.with_needs(facts_of_condition(cond))
        return [n.If(cond, tuple(guarded(st, then_loop, inner_facts)), tuple(guarded(st, else_loop, facts)),
                     loc=s.loc)]
    return None


def atomic_choices(st: Tightening, loop: n.For, facts: Facts, needs: list[Need], depth: int) -> list[n.Stmt] | None:
    """An ``if`` of the body on a condition the same in every thread that chooses between a
    plain update and an atomic one (``version_thread_loops.atomic_flags``): one copy of the loop
    per value, each going on through the steps; the plain copy has no atomic left and
    vectorizes (a gradient's ``if (x_private) d_x[i] += ct else atomicAdd(...)``)."""
    boxed, decls, flags = atomic_flags(loop, st.analysis(loop, 0).uniform, st.names)
    if not flags:
        return None
    shown = ", ".join(format_expr(d.init) for d in decls if d.init is not None) or ", ".join(flags)
    st.note(loop, f"thread loop over {loop.var}: one copy per value of {shown} (the same in every thread; "
                  f"the copy that takes the plain branch has no atomic)")
    return list(decls) + flag_copies(boxed, flags, names=st.names,
                                     finish=lambda copy: st.transform(copy, facts, needs, depth + 1))


def first_thread(st: Tightening, loop: n.For, facts: Facts, needs: list[Need], depth: int) -> list[n.Stmt] | None:
    """``if (tx == start) T`` first in the body: T of that thread before the loop, which then
    runs the rest of the body for every thread (the first iteration does T first anyway).
    Index-set splitting would peel the first thread instead, leaving a loop of 15 threads
    where 16 made one vector."""
    lead = _leading_lets(loop.body)  # lets first (names of values) are kept in the loop when the statement does not read them
    if len(loop.body) - lead < 2 or not isinstance(loop.body[lead], n.If) or loop.body[lead].orelse:
        return None
    s = loop.body[lead]
    lets = {x.name: x for x in loop.body[:lead]}  # the values of those S reads written out in it
    values = {name: x.init for name, x in lets.items()}  # type: ignore[union-attr]
    read = {name: substitute_lets(n.Var(name, lets[name].vtype), values)  # type: ignore[union-attr]
            for name in read_names(s) & lets.keys()}
    if read:
        s = substitute(s, {n.Var(name, lets[name].vtype): e for name, e in read.items()})  # type: ignore[union-attr]
    if not (isinstance(loop.start, n.Const) and _is_counter_eq(s.cond, loop.var, int(loop.start.value))):
        return None
    if jumps_out(s.then, n.Break, n.Continue):
        return None
    then = tuple(substitute(t, {n.Var(loop.var, loop.vtype): loop.start}) for t in s.then)
    if not (isinstance(loop.stop, n.Const) and loop.stop.value > loop.start.value):
        then = (n.If(n.Binary("lt", loop.start, loop.stop), then, loc=s.loc),)
    st.note(loop, f"thread loop over {loop.var}: the statements of thread {format_expr(loop.start)} "
                  f"alone ({format_expr(s.cond)}) run before the loop")
    rest = loop.body[:lead] + loop.body[lead + 1:]
    return list(then) + st.transform(dataclasses.replace(loop, body=rest), facts, needs, depth)


def distribute(st: Tightening, loop: n.For, facts: Facts, needs: list[Need], depth: int) -> list[n.Stmt] | None:
    """Step 1, fission (outermost call only): one thread loop per independent part of the body
    when one of the parts is a guard that can become bounds."""
    chunks = fission_chunks(st.kernel, loop) if depth == 0 else []
    if not (chunks and any(find_split(st, dataclasses.replace(loop, body=c)) is not None
                           or _hoistable_guard(st, loop, c) for c in chunks)):
        return None
    st.note(loop, f"thread loop over {loop.var}: distributed into {len(chunks)} thread loops "
                  f"(loop fission), so that each guard becomes the bounds of its own loop")
    out: list[n.Stmt] = []
    for part in fission_parts(loop, chunks, st.names):
        out.extend(st.transform(part, facts, needs, depth + 1))
    return out


def version_conditions(st: Tightening, loop: n.For, facts: Facts, needs: list[Need], depth: int) -> list[n.Stmt]:
    """Steps 3 and 4, always applicable: conditions constant over the block (or, for wide
    blocks of kernels in coarse blocks, over a range of its threads) decided once, and exact
    index arithmetic."""
    ranged = None
    if st.use_ranges:
        ranged = box_range(loop, names=st.names, ranges=st.ranges, needs=needs, decls=[], note=st.note)
    if ranged is None:
        return _block_versions(st, loop, facts, needs, depth)
    # Wide loops decide on a range, others for the whole block (see RANGE_MIN_THREADS); the
    # test is on the block shape, which a specialized version folds. It is not shaped like a
    # run-time check (u32, not i64), so that the later passes see both branches.
    wide = _range_versions(st, loop, facts, needs, depth, *ranged)
    local: list[Need | n.Expr] = []
    narrow = _block_versions(st, copy_loop(loop, st.names), facts, local, depth)
    needs.extend(x for x in local if isinstance(x, Need) and x not in needs)
    checks = [x for x in local if not isinstance(x, Need)]
    if checks:
        border = exact_indices(copy_loop(loop, st.names), facts, needs, ranges=st.ranges)
        narrow = [n.If(conjunction(checks), tuple(narrow), (border,), loc=loop.loc)]
    dim = counter_dim(loop.var)
    is_wide = n.Binary("ge", n.BlockDim(dim, loc=loop.loc),  # type: ignore[arg-type]
                       n.Const(RANGE_MIN_THREADS, U32))
    return [n.If(is_wide, tuple(wide), tuple(narrow), loc=loop.loc)]


# The steps, tried in this order on each thread loop (and on each part a step cuts it into):
# the first that applies gives the loop's replacement; ``version-conditions`` always applies.
STEPS: tuple[tuple[str, Step], ...] = (
    ("unswitch", unswitch),
    ("atomic-choices", atomic_choices),  # gpu2cpu.version_thread_loops
    ("first-thread", first_thread),
    ("distribute", distribute),  # gpu2cpu.distribute_thread_loops
    ("split-ranges", split_ranges),  # gpu2cpu.split_thread_ranges
    ("peel-boundary-threads", peel_boundary_threads),  # gpu2cpu.peel_thread_ranges
    ("unclamp-indices", unclamp_indices),  # gpu2cpu.unclamp_indices
    ("version-conditions", version_conditions),  # gpu2cpu.version_thread_loops, gpu2cpu.exact_indices
)


# ---------------------------------------------------------------------- helpers of the steps
def _block_versions(st: Tightening, loop: n.For, facts: Facts, needs: list[Need | n.Expr],
                    depth: int) -> list[n.Stmt]:
    """Step 3 for the whole block (``box_version``): its checks that the conditions are
    constant over the block are appended to ``needs`` with the no-wrap needs."""
    decls: list[n.Stmt] = []
    boxed = box_version(loop, names=st.names, ranges=st.ranges, needs=needs, decls=decls, note=st.note)
    if boxed is loop:
        return [exact_indices(loop, facts, needs, ranges=st.ranges)]  # type: ignore[arg-type]
    flags = [d.name for d in decls]  # type: ignore[union-attr]
    return decls + _flag_versions(st, boxed, flags, facts, needs, depth)


def _flag_versions(st: Tightening, boxed: n.For, flags: list[str], facts: Facts, needs: list,
                   depth: int) -> list[n.Stmt]:
    """``boxed`` (its conditions replaced by the block-level ``flags``) unswitched, or in one
    copy per value of the flags, or as it is where they are too many; exact indices."""
    hoisted = unswitch(st, boxed, facts, needs, depth)
    if hoisted is not None:
        return hoisted
    if len(flags) <= MAX_UNSWITCHED:
        return version_loop(boxed, flags, names=st.names,
                            finish=lambda copy: exact_indices(copy, facts, needs, ranges=st.ranges))
    return [exact_indices(boxed, facts, needs, ranges=st.ranges)]


def _range_versions(st: Tightening, loop: n.For, facts: Facts, needs: list[Need], depth: int, boxed: n.For,
                    decls: list[n.Stmt], lo: n.Expr, hi: n.Expr) -> list[n.Stmt]:
    """Step 3 on a range (``box_range``). Where the range is the whole loop (a block inside
    the array), ``boxed`` runs over the loop's own bounds, in one copy per value of its
    flags; elsewhere (a block on the border) the threads before ``lo`` and from ``hi`` on
    run ``loop`` with its conditions and those between run the copies of ``boxed``. All
    with exact index arithmetic. The test of the whole range has the shape of a run-time
    check (``is_check``), so that a second run of the pass leaves the split loops alone."""
    flags = [d.name for d in decls[2:]]  # type: ignore[union-attr]
    for d in decls[:2]:
        st.ranges.lets[d.name] = d.init  # type: ignore[union-attr]
    whole = _flag_versions(st, boxed, flags, facts, needs, depth)
    before = exact_indices(copy_loop(loop, st.names, stop=lo), facts, needs, ranges=st.ranges)
    middle = _flag_versions(st, copy_loop(boxed, st.names, start=lo, stop=hi), flags, facts, needs, depth)
    after = exact_indices(copy_loop(loop, st.names, start=hi), facts, needs, ranges=st.ranges)
    zero = n.Const(0, I64)
    is_whole = n.Binary("land", n.Binary("le", n.Binary("sub", i64(lo), i64(loop.start)), zero),
                        n.Binary("le", n.Binary("sub", i64(loop.stop), i64(hi)), zero))
    return decls + [n.If(is_whole, tuple(whole), (before, *middle, after), loc=loop.loc)]


def _leading_lets(body: tuple[n.Stmt, ...]) -> int:
    """How many lets (``Decl.let``) ``body`` starts with."""
    lead = 0
    while lead < len(body) and isinstance(body[lead], n.Decl) and body[lead].let:  # type: ignore[union-attr]
        lead += 1
    return lead


def _hoistable_guard(st: Tightening, loop: n.For, chunk: tuple[n.Stmt, ...]) -> bool:
    """A chunk that is one ``if`` (after lets) with a condition part that does not depend on the counter."""
    lead = _leading_lets(chunk)
    if len(chunk) != lead + 1 or not isinstance(chunk[lead], n.If) or chunk[lead].orelse:  # type: ignore[union-attr]
        return False
    analysis = st.analysis(dataclasses.replace(loop, body=chunk), 0)
    return any(analysis.uniform(a) is not None for a in split_conjuncts(chunk[lead].cond))  # type: ignore[union-attr]


def _is_counter_eq(cond: n.Expr, var: str, value: int) -> bool:
    """Whether ``cond`` is ``counter == value`` (the counter possibly cast to an integer type)."""
    if not (isinstance(cond, n.Binary) and cond.op == "eq"):
        return False
    for x, c in ((cond.a, cond.b), (cond.b, cond.a)):
        if isinstance(x, n.Cast) and x.to.is_int:
            x = x.x
        if isinstance(x, n.Var) and x.name == var and isinstance(c, n.Const) and c.value == value:
            return True
    return False
