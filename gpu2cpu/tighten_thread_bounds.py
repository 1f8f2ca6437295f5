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

Counter-uniform ``if`` s that end up alone in a thread loop are hoisted out of it (unswitching),
so a guard on ``ty`` inside the ``tx`` loop reaches the ``ty`` loop's bounds, and run-time
checks move out of the loop nest. A statement of the first thread alone (``if (tx == 0) S``
first in the body) runs before the loop, which then covers every thread (``first_thread``).
``report`` receives one ``LoweringDecision`` per loop changed.
"""
from __future__ import annotations

import dataclasses

from gpu2cpu.distribute_thread_loops import fission_chunks, fission_parts
from gpu2cpu.names import NameSupply
from gpu2cpu.report import LoweringDecision
from gpu2cpu.thread_affine import (
    CounterAnalysis,
    Facts,
    Interval,
    Linear,
    Need,
    Ranges,
    counter_dim,
    facts_of_condition,
    is_check,
    i64,
    linear_ir,
    need_exprs,
    split_conjuncts,
    to_u32,
)
from gpu2cpu.thread_loops import (
    copy_loop,
    definition_writes,
    let_definitions,
    rewrite_cpu_body,
    stem_of,
)
from gpu2cpu.version_thread_loops import MAX_UNSWITCHED, box_range, box_version, version_loop
from polypy.ir import nodes as n
from polypy.ir.depth import MAX_ANALYZED_NODES
from polypy.ir.jumps import jumps_out
from polypy.ir.printer import format_expr
from polypy.ir.queries import conjunction, nodes_reading, tree_size
from polypy.ir.rewrite import fold_max, fold_min
from polypy.ir.types import I64, U32
from polypy.ir.visitor import Mutator, iter_children, rebuild, substitute, walk
from polypy.passes.fold_constants import fold_expr

# In kernels for coarse blocks (the ``ranges`` option), conditions constant over most of a block
# are decided on a range of the threads (``box_range``) in blocks of at least this many threads
# along the counter's dimension; narrower blocks decide them for the whole block or not at all. In a loop of 32 (a
# transpose's tile row) the range's bounds, computed per row, cost more than the few border
# blocks gain (transpose_tiled 0.57x -> 0.48x of the OpenMP port through LLVM); in a loop of
# 1024 (a coarse row of a stencil) a border block runs most of its threads in the vector loop.
RANGE_MIN_THREADS = 256

# Index-set splitting copies the loop body once per range: at most this many splits per loop, and
# no split that would copy more than this many IR nodes (the guarded statements themselves move
# to one range and are not counted: a guard around a large body, itself split by the inner
# loops' steps, is no reason to stop).
MAX_SPLITS = 3
MAX_COPIED_NODES = 600
# Unclamping indices (step 2c) makes four copies of the loop body (all threads unclamped; the
# threads before, in and after the unclamped range): at most this many IR nodes in them (hotspot's
# stencil statement, its block-level bounds written out, is about 370 nodes).
MAX_CLAMP_NODES = 2000
# Peeling boundary threads (step 2b): at most this many ranges of the counter, and versions of
# unswitched chains per range, and this many IR nodes in all the copies.
MAX_PEELED_RANGES = 5
MAX_PEELED_NODES = 4000
# A loop known to run at most this many iterations is not split into several loops (a guard
# still becomes its bounds): there is nothing to vectorize.
SMALL_TRIP_COUNT = 8

def tighten_thread_bounds(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None,
                          ranges: bool = False) -> n.Kernel:
    """Guards on thread counters become bounds; see the module docstring. ``ranges``: the
    kernel runs in wide blocks (coarse ones, ``polypy.driver.pipelines.coarsen_for_block``):
    step 3 also decides its conditions on ranges of the threads, for blocks of at least
    ``RANGE_MIN_THREADS`` along x (elsewhere the extra version would only cost compile time)."""
    return rewrite_cpu_body(kernel, lambda k: _Tighten(k, ranges=ranges), what="tighten_thread_bounds",
                            report=report)


@dataclasses.dataclass
class _Split:
    """A top-level statement of a loop body whose condition decides it per range of the counter."""

    index: int
    intervals: list[Interval]
    uniform: list[n.Expr]
    residual: list[n.Expr]
    needs: list[Need]
    true_body: tuple[n.Stmt, ...]
    false_body: tuple[n.Stmt, ...]
    select: bool = False  # from a select, not an if


class _Tighten(Mutator):
    def __init__(self, kernel: n.Kernel, *, ranges: bool = False):
        self.kernel = kernel
        self.use_ranges = ranges
        self.names = NameSupply(kernel)
        self.ranges = Ranges.of_kernel(kernel.body)
        self.decisions: list[LoweringDecision] = []
        self.facts: list[Facts] = [Facts()]
        self.clamp_edges: set[str] = set()  # counters of loops that run the threads a clamp split left clamped
        # Per loop body (kept alive here, so ids stay unique): the names declared inside and the
        # writes ``let_definitions`` counts; asked once per ``if`` of the body otherwise.
        self._body_facts: dict[int, tuple[tuple[n.Stmt, ...], set[str], dict[str, int]]] = {}

    def note(self, loop: n.Stmt, message: str) -> None:
        self.decisions.append(LoweringDecision(self.kernel.name, loop.loc, message))

    # ------------------------------------------------------------------ walking the kernel
    # ``facts``: what the conditions of the enclosing ``if`` s tell (innermost last).
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
        for x in walk(loop):  # new counters and loops appear as loops are copied
            if isinstance(x, n.For) and x.kind == "threads" and counter_dim(x.var) is not None:
                self.ranges.counters[x.var] = counter_dim(x.var)  # type: ignore[assignment]
            elif isinstance(x, n.For) and x.kind == "serial" and x.vtype.is_int:
                self.ranges.loops[x.var] = x
        out = self.loop(loop, self.facts[-1])
        return loop if len(out) == 1 and out[0] is loop else tuple(out)

    # ------------------------------------------------------------------ one thread loop
    def loop(self, loop: n.For, facts: Facts) -> list[n.Stmt]:
        """The statements replacing ``loop`` (its body already processed)."""
        needs: list[Need | n.Expr] = []
        out = self.transform(loop, facts, needs, depth=0)
        if needs:
            checks = need_exprs([x for x in needs if isinstance(x, Need)])
            checks += [x for x in needs if not isinstance(x, Need)]
            fallback: n.Stmt = copy_loop(loop, self.names)
            self.note(loop, f"thread loop over {loop.var}: run-time check {format_expr(conjunction(checks))} "
                            f"(no wrap-around, conditions constant over the block); the original loop runs otherwise")
            if any(not isinstance(x, Need) for x in needs):
                fallback = self.border_version(loop, facts, fallback)
            out = [n.If(conjunction(checks), tuple(out), (fallback,), loc=loop.loc)]
        return out

    def border_version(self, loop: n.For, facts: Facts, original: n.Stmt) -> n.Stmt:
        """For the blocks where versioned conditions vary (a stencil's border blocks): ``loop``
        with its conditions kept but exact index arithmetic (step 4), under its own no-wrap
        check, ``original`` otherwise. Without it those blocks run the original loop, whose
        wrapping ``(i32)(blockIdx.x * blockDim.x + tx)`` indices compilers vectorize with
        gathers and scatters: a few percent of the blocks took half of jacobi2d's time."""
        needs: list[Need] = []
        copy = copy_loop(loop, self.names)
        exact = self.exact_indices(copy, facts, needs)
        if exact is copy:
            return original
        if not needs:
            return exact
        check = conjunction(need_exprs(needs))
        self.note(loop, f"thread loop over {loop.var}: where the conditions vary over the block, exact index "
                        f"arithmetic under the run-time check {format_expr(check)}")
        return n.If(check, (exact,), (original,), loc=loop.loc)

    def transform(self, loop: n.For, facts: Facts, needs: list[Need], depth: int) -> list[n.Stmt]:
        """``loop`` fissioned, split and rewritten; unproved needs are appended to ``needs``."""
        loop = rebuild(loop, body=tuple(_positive(s) for s in loop.body))
        # An `if` uniform in the counter, alone in the loop: hoist it (unswitching).
        hoisted = self.unswitch(loop, facts, needs, depth)
        if hoisted is not None:
            return hoisted
        first = self.first_thread(loop, facts, needs, depth)
        if first is not None:
            return first
        chunks = fission_chunks(self.kernel, loop) if depth == 0 else []
        if chunks and any(self.find_split(dataclasses.replace(loop, body=c)) is not None
                          or self.hoistable_guard(loop, c) for c in chunks):
            self.note(loop, f"thread loop over {loop.var}: distributed into {len(chunks)} thread loops "
                            f"(loop fission), so that each guard becomes the bounds of its own loop")
            out: list[n.Stmt] = []
            for part in fission_parts(loop, chunks, self.names):
                out.extend(self.transform(part, facts, needs, depth + 1))
            return out
        split = self.find_split(loop) if depth < MAX_SPLITS + 1 else None
        if split is not None:
            return self.apply_split(loop, split, facts, needs, depth)
        peeled = self.peel(loop, facts, needs, depth) if depth < MAX_SPLITS + 1 else None
        if peeled is not None:
            return peeled
        clamped = self.clamp_split(loop, facts, needs, depth) if depth < MAX_SPLITS + 1 else None
        if clamped is not None:
            return clamped
        ranged = None
        if self.use_ranges:
            ranged = box_range(loop, names=self.names, ranges=self.ranges, needs=needs, decls=[], note=self.note)
        if ranged is None:
            return self.block_versions(loop, facts, needs, depth)
        # Wide loops decide on a range, others for the whole block (see RANGE_MIN_THREADS); the
        # test is on the block shape, which a specialized version folds. It is not shaped like a
        # run-time check (u32, not i64), so that the later passes see both branches.
        wide = self.range_versions(loop, facts, needs, depth, *ranged)
        local: list[Need | n.Expr] = []
        narrow = self.block_versions(copy_loop(loop, self.names), facts, local, depth)
        needs.extend(x for x in local if isinstance(x, Need) and x not in needs)
        checks = [x for x in local if not isinstance(x, Need)]
        if checks:
            border = self.exact_indices(copy_loop(loop, self.names), facts, needs)
            narrow = [n.If(conjunction(checks), tuple(narrow), (border,), loc=loop.loc)]
        dim = counter_dim(loop.var)
        is_wide = n.Binary("ge", n.BlockDim(dim, loc=loop.loc),  # type: ignore[arg-type]
                           n.Const(RANGE_MIN_THREADS, U32))
        return [n.If(is_wide, tuple(wide), tuple(narrow), loc=loop.loc)]

    def block_versions(self, loop: n.For, facts: Facts, needs: list[Need | n.Expr], depth: int) -> list[n.Stmt]:
        """Step 3 for the whole block (``box_version``): its checks that the conditions are
        constant over the block are appended to ``needs`` with the no-wrap needs."""
        decls: list[n.Stmt] = []
        boxed = box_version(loop, names=self.names, ranges=self.ranges, needs=needs, decls=decls, note=self.note)
        if boxed is loop:
            return [self.exact_indices(loop, facts, needs)]
        flags = [d.name for d in decls]  # type: ignore[union-attr]
        return decls + self.flag_versions(boxed, flags, facts, needs, depth)

    def flag_versions(self, boxed: n.For, flags: list[str], facts: Facts, needs: list, depth: int) -> list[n.Stmt]:
        """``boxed`` (its conditions replaced by the block-level ``flags``) unswitched, or in one
        copy per value of the flags, or as it is where they are too many; exact indices."""
        hoisted = self.unswitch(boxed, facts, needs, depth)
        if hoisted is not None:
            return hoisted
        if len(flags) <= MAX_UNSWITCHED:
            return version_loop(boxed, flags, names=self.names,
                                finish=lambda copy: self.exact_indices(copy, facts, needs))
        return [self.exact_indices(boxed, facts, needs)]

    def range_versions(self, loop: n.For, facts: Facts, needs: list[Need], depth: int, boxed: n.For,
                       decls: list[n.Stmt], lo: n.Expr, hi: n.Expr) -> list[n.Stmt]:
        """Step 3 on a range (``box_range``). Where the range is the whole loop (a block inside
        the array), ``boxed`` runs over the loop's own bounds, in one copy per value of its
        flags; elsewhere (a block on the border) the threads before ``lo`` and from ``hi`` on
        run ``loop`` with its conditions and those between run the copies of ``boxed``. All
        with exact index arithmetic. The test of the whole range has the shape of a run-time
        check (``is_check``), so that a second run of the pass leaves the split loops alone."""
        flags = [d.name for d in decls[2:]]  # type: ignore[union-attr]
        for d in decls[:2]:
            self.ranges.lets[d.name] = d.init  # type: ignore[union-attr]
        whole = self.flag_versions(boxed, flags, facts, needs, depth)
        before = self.exact_indices(copy_loop(loop, self.names, stop=lo), facts, needs)
        middle = self.flag_versions(copy_loop(boxed, self.names, start=lo, stop=hi), flags, facts, needs, depth)
        after = self.exact_indices(copy_loop(loop, self.names, start=hi), facts, needs)
        zero = n.Const(0, I64)
        is_whole = n.Binary("land", n.Binary("le", n.Binary("sub", i64(lo), i64(loop.start)), zero),
                            n.Binary("le", n.Binary("sub", i64(loop.stop), i64(hi)), zero))
        return decls + [n.If(is_whole, tuple(whole), (before, *middle, after), loc=loop.loc)]

    # ------------------------------------------------------------------ peeling boundary threads
    def peel(self, loop: n.For, facts: Facts, needs: list[Need], depth: int) -> list[n.Stmt] | None:
        """Step 2b: the ``if``/``else if`` chains of a boundary stencil (srad's ``ty == 0 && tx ==
        0``, ``tx == 15``, ...), too large for one split per condition: every comparison in them
        that holds on a constant range of the counter is decided at once, one loop per range
        between consecutive bounds (``[0, 1)``, ``[1, 15)``, ``[15, 16)``, ``[16, bdx)``); a chain
        left with conditions that do not depend on the counter is unswitched in each range."""
        if counter_dim(loop.var) is None or not isinstance(loop.start, n.Const):
            return None
        start = int(loop.start.value)
        if isinstance(loop.stop, n.Const) and int(loop.stop.value) - start <= SMALL_TRIP_COUNT:
            return None  # a short (or empty) range: nothing to vectorize
        atoms: dict[n.Expr, tuple[int | None, int | None]] = {}
        new_needs: list[Need] = []
        for i, s in enumerate(loop.body):
            if not isinstance(s, n.If) or is_check(s.cond):
                continue
            analysis = self.analysis(loop, i)
            for cond in _chain_conditions(s):
                for atom in _comparisons(cond):
                    if atom in atoms or analysis.uniform(atom) is not None:
                        continue
                    found = analysis.interval(atom)
                    if found is None:
                        continue
                    lo, hi = (_const_bound(b) for b in (found[0].lo, found[0].hi))
                    if lo is False or hi is False:
                        continue  # a bound that is not a constant
                    atoms[atom] = (lo, hi)  # type: ignore[assignment]
                    new_needs.extend(found[1])
        points = sorted({b for bounds in atoms.values() for b in bounds if b is not None and b > start})
        if len(points) < 2 or len(points) + 1 > MAX_PEELED_RANGES:
            return None
        edges = [start, *points]
        pieces = []
        for k, a in enumerate(edges):
            b = edges[k + 1] if k + 1 < len(edges) else None
            truth = {atom: _holds(lo, hi, a, b) for atom, (lo, hi) in atoms.items()}
            body = _decide_atoms(loop.body, truth)
            short = b is not None and b - a <= SMALL_TRIP_COUNT  # nothing to vectorize: no versions
            pieces.append((a, b, [(None, body)] if short else self.unswitch_chain(loop, body)))
        if sum(_size(body) for _, _, bodies in pieces for _, body in bodies) > MAX_PEELED_NODES:
            return None
        needs.extend(x for x in new_needs if not facts.implies(x) and x not in needs)
        inner_facts = facts.with_needs(needs)
        out: list[n.Stmt] = []
        first = True
        for a, b, bodies in pieces:
            lo_u = loop.start if a == start else _clamped(a, loop.stop)
            hi_u = loop.stop if b is None else _clamped(b, loop.stop)
            copies: list[tuple[n.Expr | None, list[n.Stmt]]] = []
            for cond, body in bodies:
                part = copy_loop(loop, self.names, start=lo_u, stop=hi_u, body=body, fresh=not first)
                first = False
                copies.append((cond, self.transform(part, inner_facts, needs, depth + 1)))
            out.extend(_chain_of(copies, loop.loc))
        ranges = ", ".join(f"[{a}, {b if b is not None else format_expr(loop.stop)})" for a, b, _ in pieces)
        self.note(loop, f"thread loop over {loop.var}: {len(atoms)} comparison(s) on {loop.var} in if/else chains "
                        f"decided by its range, one loop per range: {ranges}")
        return out

    def unswitch_chain(self, loop: n.For, body: tuple[n.Stmt, ...]) -> list[tuple[n.Expr | None, tuple[n.Stmt, ...]]]:
        """``body`` as ``[(condition, body)]`` versions: the one top-level ``if``/``else if`` chain
        whose conditions do not depend on the counter (nor on anything the loop computes) chosen
        outside the loop, one version per branch; ``[(None, body)]`` when there is none."""
        found: list[tuple[int, list[tuple[n.Expr | None, tuple[n.Stmt, ...]]]]] = []
        for i, s in enumerate(body):
            if not isinstance(s, n.If) or is_check(s.cond):
                continue
            analysis = self.analysis(dataclasses.replace(loop, body=body), i)
            branches: list[tuple[n.Expr | None, tuple[n.Stmt, ...]]] = []
            cur: tuple[n.Stmt, ...] = (s,)
            while len(cur) == 1 and isinstance(cur[0], n.If):
                u = analysis.uniform(cur[0].cond)
                if u is None:
                    break
                branches.append((u, cur[0].then))
                cur = cur[0].orelse
            else:
                branches.append((None, cur))
                found.append((i, branches))
        if len(found) != 1 or len(found[0][1]) > MAX_PEELED_RANGES:
            return [(None, body)]
        i, branches = found[0]
        return [(cond, body[:i] + branch + body[i + 1:]) for cond, branch in branches]

    def first_thread(self, loop: n.For, facts: Facts, needs: list[Need], depth: int) -> list[n.Stmt] | None:
        """``if (tx == start) T`` first in the body: T of that thread before the loop, which then
        runs the rest of the body for every thread (the first iteration does T first anyway).
        Index-set splitting would peel the first thread instead, leaving a loop of 15 threads
        where 16 made one vector."""
        if len(loop.body) < 2 or not isinstance(loop.body[0], n.If) or loop.body[0].orelse:
            return None
        s = loop.body[0]
        if not (isinstance(loop.start, n.Const) and _is_counter_eq(s.cond, loop.var, int(loop.start.value))):
            return None
        if jumps_out(s.then, n.Break, n.Continue):
            return None
        then = tuple(substitute(t, {n.Var(loop.var, loop.vtype): loop.start}) for t in s.then)
        if not (isinstance(loop.stop, n.Const) and loop.stop.value > loop.start.value):
            then = (n.If(n.Binary("lt", loop.start, loop.stop), then, loc=s.loc),)
        self.note(loop, f"thread loop over {loop.var}: the statements of thread {format_expr(loop.start)} "
                        f"alone ({format_expr(s.cond)}) run before the loop")
        return list(then) + self.transform(dataclasses.replace(loop, body=loop.body[1:]), facts, needs, depth)

    def hoistable_guard(self, loop: n.For, chunk: tuple[n.Stmt, ...]) -> bool:
        """A chunk that is one ``if`` with a condition part that does not depend on the counter."""
        if len(chunk) != 1 or not isinstance(chunk[0], n.If) or chunk[0].orelse:
            return False
        analysis = self.analysis(dataclasses.replace(loop, body=chunk), 0)
        return any(analysis.uniform(a) is not None for a in split_conjuncts(chunk[0].cond))

    def unswitch(self, loop: n.For, facts: Facts, needs: list[Need], depth: int) -> list[n.Stmt] | None:
        if len(loop.body) != 1 or not isinstance(loop.body[0], n.If):
            return None
        s = loop.body[0]
        analysis = self.analysis(loop, 0)
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
                    self.note(loop, f"thread loop over {loop.var}: condition {format_expr(cond)} does not depend on "
                                f"{loop.var}: tested once, outside the loop")
            new = dataclasses.replace(loop, body=inner)
            inner_facts = facts.with_needs(facts_of_condition(cond))
            # The loop under the hoisted condition gets its own run-time checks (inside it).
            return [n.If(cond, tuple(self.loop(new, inner_facts)), loc=s.loc)]
        if all(u is not None for u in uniform):
            cond = conjunction(uniform)  # type: ignore[arg-type]
            if not is_check(cond):
                self.note(loop, f"thread loop over {loop.var}: branch on {format_expr(cond)}, which does not depend "
                                f"on {loop.var}, moved outside the loop")
            then_loop = dataclasses.replace(loop, body=s.then)
            else_loop = copy_loop(loop, self.names, body=s.orelse)
            inner_facts = facts.with_needs(facts_of_condition(cond))
            return [n.If(cond, tuple(self.loop(then_loop, inner_facts)), tuple(self.loop(else_loop, facts)),
                         loc=s.loc)]
        return None

    # ------------------------------------------------------------------ analysis helpers
    def analysis(self, loop: n.For, upto: int) -> CounterAnalysis:
        dim = counter_dim(loop.var)
        assert dim is not None
        cached = self._body_facts.get(id(loop.body))
        if cached is None or cached[0] is not loop.body:
            names = {x.name for s in loop.body for x in walk(s) if isinstance(x, n.Decl)}
            names |= {x.var for s in loop.body for x in walk(s) if isinstance(x, n.For)}
            cached = (loop.body, names, definition_writes(loop.body))
            self._body_facts[id(loop.body)] = cached
        inside = cached[1] | {loop.var}
        return CounterAnalysis(loop.var, dim, lets=let_definitions(loop.body, upto, writes=cached[2]),
                               available=lambda name: name not in inside, ranges=self.ranges)

    def find_split(self, loop: n.For) -> _Split | None:
        if counter_dim(loop.var) is None:
            return None
        for i, s in enumerate(loop.body):
            found = None
            if isinstance(s, n.If):
                found = self.classify(loop, i, s.cond, s.then, s.orelse)
            elif (choice := _select_of(s)) is not None and _loads_global(self.kernel, choice):
                # ``smem[l] = (g < n) ? in[g] : 0``: each range stores one operand (a select
                # evaluates only the chosen one, as the branches do), instead of masked loads.
                found = self.classify(loop, i, choice.cond, (_with_value(s, choice.a),), (_with_value(s, choice.b),))
                found = dataclasses.replace(found, select=True) if found is not None else None
            if found is not None:
                return found
        return None

    def classify(self, loop: n.For, i: int, cond: n.Expr, then: tuple[n.Stmt, ...],
                 orelse: tuple[n.Stmt, ...]) -> _Split | None:
        analysis = self.analysis(loop, i)
        intervals: list[Interval] = []
        uniform: list[n.Expr] = []
        residual: list[n.Expr] = []
        needs: list[Need] = []
        for atom in split_conjuncts(cond):
            u = analysis.uniform(atom)
            if u is not None:
                uniform.append(u)
                continue
            found = analysis.interval(atom)
            if found is None:
                residual.append(atom)
                continue
            intervals.append(found[0])
            needs.extend(found[1])
        if not intervals:
            return None  # uniform-only conditions are unswitched when alone in a loop
        if residual and orelse:
            return None
        body = loop.body
        if (orelse or len(body) > 1) and self.ranges.of(
                n.Binary("sub", i64(loop.stop), i64(loop.start)))[1] <= SMALL_TRIP_COUNT:
            return None
        if residual:
            then = (n.If(conjunction(residual), then, loc=body[i].loc),)
        true_body = body[:i] + then + body[i + 1:]
        false_body = body[:i] + orelse + body[i + 1:]
        if false_body and _size(false_body) * 2 + _size(true_body) - _size(then) > MAX_COPIED_NODES:
            return None
        return _Split(i, intervals, uniform, residual, needs, true_body, false_body)

    # ------------------------------------------------------------------ splitting
    def apply_split(self, loop: n.For, split: _Split, facts: Facts, needs: list[Need], depth: int) -> list[n.Stmt]:
        needs.extend(x for x in split.needs if not facts.implies(x) and x not in needs)
        inner_facts = facts.with_needs(needs)
        lows = [iv.lo for iv in split.intervals if iv.lo is not None]
        highs = [iv.hi for iv in split.intervals if iv.hi is not None]
        start64, stop64 = i64(loop.start), i64(loop.stop)
        lo = self.clamp(fold_max(lows, I64), start64, stop64) if lows else start64
        hi_floor = lo if (split.false_body and lows) else start64
        hi = self.clamp(fold_min(highs, I64), hi_floor, stop64) if highs else stop64
        decls: list[n.Stmt] = []
        lo_u = self.named(to_u32(lo), loop, "lo", decls) if lows else loop.start
        hi_u = self.named(to_u32(hi), loop, "hi", decls) if highs else loop.stop
        pieces: list[tuple[n.Expr, n.Expr, tuple[n.Stmt, ...]]] = []
        if lows and split.false_body:
            pieces.append((loop.start, lo_u, split.false_body))
        pieces.append((lo_u, hi_u, split.true_body))
        if highs and split.false_body:
            pieces.append((hi_u, loop.stop, split.false_body))
        out: list[n.Stmt] = list(decls)
        for k, (start, stop, body) in enumerate(pieces):
            part = copy_loop(loop, self.names, start=start, stop=stop, body=body, fresh=k > 0)
            out.extend(self.transform(part, inner_facts, needs, depth + 1))
        if split.select:
            # In most blocks every thread takes the first operand (a tile inside the array): a
            # version over the loop's own bounds, which a specialized block shape makes constant
            # (a 16-wide tile row is then one vector, not two loops with remainders).
            whole = [n.Binary("eq", lo_u, loop.start)] if lows else []
            whole += [n.Binary("eq", hi_u, loop.stop)] if highs else []
            every = copy_loop(loop, self.names, body=split.true_body, fresh=True)
            out = list(decls) + [n.If(conjunction(whole), tuple(self.transform(every, inner_facts, needs, depth + 1)),
                                      tuple(out[len(decls):]), loc=loop.loc)]
        bounds = ", ".join(f"[{format_expr(fold_expr(a))}, {format_expr(fold_expr(b))})" for a, b, _ in pieces)
        if decls:
            bounds += " with " + ", ".join(f"{d.name} = {format_expr(d.init)}" for d in decls)  # type: ignore[union-attr]
        cond = conjunction([a for a in split_conjuncts(_split_cond(loop, split))])
        kind = "guard" if not split.false_body else "condition"
        self.note(loop, f"thread loop over {loop.var}: {kind} {format_expr(cond)} decided by the range of "
                        f"{loop.var}: {bounds}")
        if split.uniform:
            ucond = conjunction(split.uniform)
            orelse: tuple[n.Stmt, ...] = ()
            if split.false_body:
                orelse = (copy_loop(loop, self.names, body=split.false_body),)
            return [n.If(ucond, tuple(out), orelse, loc=loop.loc)]
        return out

    # ------------------------------------------------------------------ clamped indices
    def clamp_split(self, loop: n.For, facts: Facts, needs: list[Need], depth: int) -> list[n.Stmt] | None:
        """Step 2c: an index clamped by a select on the counter (pathfinder's and hotspot's
        ``prev[W < validXmin ? validXmin : W]`` with ``W = tx - 1``) is a gather in a vector
        loop. Where every such select takes its operand that varies with the counter (the
        clamp does nothing: all threads of a block inside the array), the loop runs with that
        operand alone, contiguous; the threads before and after that range run the selects::

            for threads tx = s to e {        for tx = s to L  { ... p[W < m ? m : W] ... }
              ... p[W < m ? m : W] ...  ==>  for tx = L to H  { ... p[W] ... }
            }                                for tx = H to e  { ... p[W < m ? m : W] ... }

        with ``L``/``H`` the ends of the range where ``W >= m``, clamped to ``[s, e]``, and a copy
        of the middle loop over ``[s, e)`` where that range is all of it. The selects taken: those
        in an index of a load or store or in the declaration of a local an index reads, with
        affine operands, a condition that holds on one interval of the counter, and one operand
        that depends on the counter and one that does not; or both depending on it and an ``==``
        condition (``W = (i == 0) ? c : c - 1``), on the longer side of its point."""
        if not (isinstance(loop.step, n.Const) and int(loop.step.value) == 1) or loop.var in self.clamp_edges:
            return None
        analysis = self.analysis(loop, len(loop.body))
        chosen: dict[int, n.Expr] = {}
        lows: list[n.Expr] = []
        highs: list[n.Expr] = []
        found_needs: list[Need] = []
        start64, stop64 = i64(loop.start), i64(loop.stop)
        for sel in _index_selects(loop.body):
            varies = (analysis.mentions_counter(sel.a), analysis.mentions_counter(sel.b))
            eq = isinstance(sel.cond, n.Binary) and sel.cond.op == "eq"
            if id(sel) in chosen or not any(varies) or (eq and varies == (True, False)):
                continue
            want = varies == (True, False)  # the operand that varies; both: the rarer case of ==
            if all(varies) and not eq:
                continue
            if analysis.linear(sel.a) is None or analysis.linear(sel.b) is None:
                continue  # not a clamp of an affine index (a trip count's select: a division in it)
            found = analysis.interval(sel.cond)
            if found is None:
                continue
            iv = found[0]
            if want:  # the condition must hold: on [lo, hi)
                if iv.lo is not None:
                    lows.append(iv.lo)
                if iv.hi is not None:
                    highs.append(iv.hi)
            elif iv.lo is None and iv.hi is not None:  # it must fail: from hi on
                lows.append(iv.hi)
            elif iv.hi is None and iv.lo is not None:  # ... or before lo
                highs.append(iv.lo)
            elif iv.lo is not None and iv.hi is not None:  # ... on the longer side of [lo, hi)
                after = n.Binary("gt", n.Binary("sub", stop64, iv.hi), n.Binary("sub", iv.lo, start64))
                lows.append(n.Select(after, iv.hi, start64))
                highs.append(n.Select(after, stop64, iv.lo))
            else:
                continue
            chosen[id(sel)] = sel.a if want else sel.b
            found_needs.extend(found[1])
        if not chosen or _size(loop.body) * 4 > MAX_CLAMP_NODES:
            return None
        needs.extend(x for x in found_needs if not facts.implies(x) and x not in needs)
        inner_facts = facts.with_needs(needs)
        lo = self.clamp(fold_max(lows, I64), start64, stop64) if lows else start64
        hi = self.clamp(fold_min(highs, I64), lo, stop64) if highs else stop64
        decls: list[n.Stmt] = []
        lo_u = self.named(to_u32(lo), loop, "lo", decls) if lows else loop.start
        hi_u = self.named(to_u32(hi), loop, "hi", decls) if highs else loop.stop

        class Choose(Mutator):
            def visit_Select(self, e: n.Select) -> n.Expr:
                pick = chosen.get(id(e))
                return self.generic_visit(e) if pick is None else self.visit(pick)

        unclamped = Choose().visit_block(loop.body)
        whole = copy_loop(loop, self.names, body=unclamped, fresh=False)
        before = copy_loop(loop, self.names, stop=lo_u) if lows else None
        after = copy_loop(loop, self.names, start=hi_u) if highs else None
        middle = copy_loop(loop, self.names, start=lo_u, stop=hi_u, body=unclamped)
        pieces: list[n.Stmt] = []
        for part in (before, middle, after):
            if part is None:
                continue
            if part is not middle:
                self.clamp_edges.add(part.var)  # its clamps stay: not split again
            pieces.extend(self.transform(part, inner_facts, needs, depth + 1))
        # Every thread unclamped (a block inside the array): one loop over the loop's own bounds.
        # The test has the shape of a run-time check (``is_check``), so that the pass's second
        # run leaves the three loops of the other branch, whose clamps remain, alone.
        zero = n.Const(0, I64)
        is_whole = n.Binary("land", n.Binary("le", n.Binary("sub", i64(lo_u), start64), zero),
                            n.Binary("le", n.Binary("sub", stop64, i64(hi_u)), zero))
        out: list[n.Stmt] = list(decls)
        out.append(n.If(is_whole, tuple(self.transform(whole, inner_facts, needs, depth + 1)), tuple(pieces),
                        loc=loop.loc))
        bounds = ", ".join(f"{d.name} = {format_expr(d.init)}" for d in decls)  # type: ignore[union-attr]
        self.note(loop, f"thread loop over {loop.var}: {len(chosen)} clamped index(es) unclamped on the range "
                        f"[{format_expr(lo_u)}, {format_expr(hi_u)})" + (f" with {bounds}" if bounds else ""))
        return out

    # ------------------------------------------------------------------ conditions constant over the block
    def named(self, bound: n.Expr, loop: n.For, what: str, decls: list[n.Stmt]) -> n.Expr:
        """A computed bound, declared once before the loops that use it (``var tx_hi: u32 = ...``)."""
        if _simple(bound):
            return bound
        name = self.names.fresh(f"{stem_of(loop.var)}_{what}")
        decls.append(n.Decl(name, U32, bound, loc=loop.loc))
        self.ranges.lets[name] = bound
        return n.Var(name, U32)

    def clamp(self, x: n.Expr, lo: n.Expr, hi: n.Expr) -> n.Expr:
        """``min(max(x, lo), hi)`` in i64, leaving out what the value ranges make useless."""
        xr, lr, hr = self.ranges.of(x), self.ranges.of(lo), self.ranges.of(hi)
        if xr[0] < lr[1]:
            x = n.Call("max", (x, lo), I64)
            xr = (max(xr[0], lr[0]), max(xr[1], lr[1]))
        if xr[1] > hr[0]:
            x = n.Call("min", (x, hi), I64)
        return x

    # ------------------------------------------------------------------ exact index arithmetic
    def exact_indices(self, loop: n.For, facts: Facts, needs: list[Need]) -> n.For:
        dim = counter_dim(loop.var)
        if dim is None:
            return loop
        analysis = CounterAnalysis(loop.var, dim, lets=let_definitions(loop.body, len(loop.body)),
                                   available=_outside(loop), ranges=self.ranges, free_atoms=True, index_forms=True,
                                   start=_closed(loop.start, self.ranges.lets))
        rewriter = _ExactIndices(analysis, facts, needs)
        body = rewriter.visit_block(loop.body)
        if body is loop.body:
            return loop
        return dataclasses.replace(loop, body=body)


def _closed(e: n.Expr, lets: dict) -> n.Expr | None:
    """``e`` with the bounds this pass named (``tx_lo``) replaced by their definitions, or None
    if it still reads a variable: a run-time check made of it is hoisted above those names."""
    for _ in range(8):
        if any(isinstance(x, n.Load) for x in walk(e)):
            return None
        names = [x for x in walk(e) if isinstance(x, n.Var)]
        if not names:
            return e
        if not all(v.name in lets for v in names):
            return None
        e = substitute(e, {v: lets[v.name] for v in names})
    return None


def _outside(loop: n.For):
    inside = {x.name for s in loop.body for x in walk(s) if isinstance(x, n.Decl)}
    inside |= {x.var for s in loop.body for x in walk(s) if isinstance(x, n.For)}
    inside.add(loop.var)
    return lambda name: name not in inside


class _ExactIndices(Mutator):
    """Wrapping arithmetic on the counter rebuilt without wrap-around (under the recorded needs).

    * a conversion to a signed type of an unsigned value affine in the counter,
      ``(i32)(blockIdx.x * blockDim.x + tx)``, becomes ``(i32)(blockIdx.x * blockDim.x) + (i32)tx``
      (types unchanged; signed arithmetic, which compilers may assume does not overflow);
    * an index affine in the counter with such arithmetic inside, ``s[tx + k]``,
      ``x[(i32)(blockIdx.x * blockDim.x + tx) * 4 + 1]``, is computed in i64:
      ``x[(i64)(blockIdx.x * blockDim.x) * 4l + 1l + (i64)tx * 4l]`` (a zero-extended counter
      plus a loop-invariant part: C compilers see a unit stride, which they do not through
      ``(int)`` of an unsigned sum).
    """

    ALL_INDICES = True

    def __init__(self, analysis: CounterAnalysis, facts: Facts, needs: list[Need]):
        self.analysis = analysis
        self.facts = facts
        self.needs = needs
        self.rewritten = 0
        self.example = ""

    def exact(self, e: n.Expr) -> tuple[Linear, list[Need]] | None:
        found = self.analysis.linear(e)
        if found is None or found[0].coef == 0:
            return None
        return found

    def record(self, before: n.Expr, after: n.Expr, needs: list[Need]) -> n.Expr:
        for x in needs:
            if not self.facts.implies(x) and x not in self.needs:
                self.needs.append(x)
        self.rewritten += 1
        if not self.example:
            self.example = f"{format_expr(before)} -> {format_expr(after)}"
        return after

    def counter_term(self, ty, coef: int) -> n.Expr:
        t = n.Cast(ty, n.Var(self.analysis.counter, U32))
        return t if coef == 1 else n.Binary("mul", t, n.Const(coef, ty))

    def visit_Cast(self, e: n.Cast) -> n.Expr:
        x = e.x
        if not (e.to.is_int and e.to.is_signed and x.type.is_int and not x.type.is_signed) \
                or tree_size(e) > MAX_ANALYZED_NODES or not _wraps_on(x, self.analysis.counter):
            return self.generic_visit(e)
        found = self.exact(e)  # the value of the conversion: exact needs included
        if found is None:
            return self.generic_visit(e)
        lin, needs = found
        base = lin.base()
        # The counter-free part in the operand's own (modular) type: exact, since its true value
        # (the operand at counter 0) is in range; then converted, also exactly.
        parts = [n.Cast(x.type, a) if a.type != x.type else a for a, _ in base.terms]
        value: n.Expr | None = None
        for (atom, k), part in zip(base.terms, parts):
            term = part if k == 1 else n.Binary("mul", part, n.Const(k, x.type))
            value = term if value is None else n.Binary("add", value, term)
        if base.const or value is None:
            c = n.Const(base.const, x.type)
            value = c if value is None else n.Binary("add", value, c)
        counter = self.counter_term(e.to, lin.coef)
        out = counter if (isinstance(value, n.Const) and value.value == 0) else \
            n.Binary("add", n.Cast(e.to, value), counter)
        return self.record(e, out, needs)

    def index(self, e: n.Expr) -> n.Expr:
        if not (e.type.is_int and (self.ALL_INDICES or not e.type.is_signed)):
            return e
        if not _wraps_on(self.analysis.expand(e), self.analysis.counter):
            return e
        found = self.exact(e)
        if found is None:
            return e
        lin, needs = found
        term = self.counter_term(I64, lin.coef)
        base = lin.base()
        out = term if (not base.terms and base.const == 0) else n.Binary("add", linear_ir(base), term)
        out = self.record(e, out, needs)
        return e if out == e else out  # already in this form (a second run): the node itself

    def visit_Load(self, e: n.Load) -> n.Expr:
        index = tuple(self.index(i) for i in e.index)
        e = rebuild(e, index=index)
        return self.generic_visit(e)

    def visit_Store(self, s: n.Store) -> n.Stmt:
        index = tuple(self.index(i) for i in s.index)
        s = rebuild(s, index=index)
        return self.generic_visit(s)

    def visit_AtomicRMW(self, s: n.AtomicRMW) -> n.Stmt:
        index = tuple(self.index(i) for i in s.index)
        s = rebuild(s, index=index)
        return self.generic_visit(s)

    def visit_For(self, s: n.For) -> n.Stmt:
        if s.kind == "threads":
            return s  # inner thread loops were handled with their own counter
        return self.generic_visit(s)


def _wraps_on(e: n.Expr, counter: str) -> bool:
    """Whether ``e`` has a conversion or unsigned arithmetic above a use of ``counter``."""
    reading = nodes_reading(e, {counter})
    return any(id(x) in reading and (isinstance(x, n.Cast) or (isinstance(x, n.Binary) and x.type.is_int
                                                                and not x.type.is_signed)) for x in walk(e))


def _positive(s: n.Stmt) -> n.Stmt:
    """``if (c) {} else {E}`` as ``if (!c) {E}`` (a guard written as an early exit)."""
    if isinstance(s, n.If) and not s.then and s.orelse:
        return n.If(conjunction(split_conjuncts(s.cond, negate=True)), s.orelse, loc=s.loc)
    return s


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


def _simple(e: n.Expr) -> bool:
    """A bound short enough to write inline: a constant, a name, blockDim, or min/max of those."""
    if isinstance(e, (n.Const, n.Var, n.GpuIndex)):
        return True
    return isinstance(e, n.Call) and e.fn in ("min", "max") and all(isinstance(a, (n.Const, n.Var, n.GpuIndex))
                                                                   for a in e.args)


def _select_of(s: n.Stmt) -> n.Select | None:
    """The select a store, assignment or declaration writes (``x = c ? a : b``), if it is one."""
    value = s.init if isinstance(s, n.Decl) else s.value if isinstance(s, (n.Store, n.Assign)) else None
    return value if isinstance(value, n.Select) else None


def _loads_global(kernel: n.Kernel, choice: n.Select) -> bool:
    """Whether an operand of ``choice`` reads memory: a parameter, or the block's own arrays
    (a scan's ``(tx >= off) ? s[tx - off] : 0``, masked loads otherwise: prefix_scan through C
    6.0 -> 4.6 ms)."""
    return any(isinstance(x, n.Load) for e in (choice.a, choice.b) for x in walk(e))


def _index_selects(stmts: tuple[n.Stmt, ...]) -> list[n.Select]:
    """The selects that compute an index of a load, store or atomic in ``stmts``: inside the
    index, or in the declaration of a local the index reads (hotspot3D's ``W = (x == 0) ? c :
    c - 1``, read as ``tIn[W]``), outside nested thread loops and the originals kept by run-time
    checks."""
    in_index: list[n.Expr] = []
    decls: dict[str, n.Expr] = {}

    def visit(node: n.Node) -> None:
        if isinstance(node, n.For) and node.kind == "threads":
            return
        if isinstance(node, n.If) and is_check(node.cond):
            for s in node.then:
                visit(s)
            return
        if isinstance(node, (n.Load, n.Store, n.AtomicRMW)):
            in_index.extend(node.index)
        if isinstance(node, n.Decl) and node.init is not None:
            decls[node.name] = node.init
        for child in iter_children(node):
            visit(child)

    for s in stmts:
        visit(s)
    sources = list(in_index)
    seen: set[str] = set()
    while sources:  # the declarations the indices read, and those they read
        for x in walk(sources.pop()):
            if isinstance(x, n.Var) and x.name in decls and x.name not in seen:
                seen.add(x.name)
                sources.append(decls[x.name])
    roots = in_index + [decls[name] for name in sorted(seen)]
    return [x for e in roots for x in walk(e) if isinstance(x, n.Select)]


def _with_value(s: n.Stmt, value: n.Expr) -> n.Stmt:
    return dataclasses.replace(s, init=value) if isinstance(s, n.Decl) else dataclasses.replace(s, value=value)


def _split_cond(loop: n.For, split: _Split) -> n.Expr:
    s = loop.body[split.index]
    if isinstance(s, n.If):
        return s.cond
    choice = _select_of(s)
    assert choice is not None
    return choice.cond


def _chain_conditions(s: n.If) -> list[n.Expr]:
    """The conditions of an ``if``/``else if`` chain."""
    out = [s.cond]
    while len(s.orelse) == 1 and isinstance(s.orelse[0], n.If):
        s = s.orelse[0]
        out.append(s.cond)
    return out


def _comparisons(e: n.Expr) -> list[n.Expr]:
    """The comparisons a condition is built of with ``&&``, ``||`` and ``!``."""
    if isinstance(e, n.Binary) and e.op in ("land", "lor"):
        return _comparisons(e.a) + _comparisons(e.b)
    if isinstance(e, n.Unary) and e.op == "not":
        return _comparisons(e.x)
    return [e] if isinstance(e, n.Binary) and e.op in ("lt", "le", "gt", "ge", "eq", "ne") else []


def _const_bound(b: n.Expr | None) -> int | None | bool:
    """An interval bound as an int, None when unbounded, False when not a constant."""
    if b is None:
        return None
    b = fold_expr(b)
    return int(b.value) if isinstance(b, n.Const) and not isinstance(b.value, float) else False


def _holds(lo: int | None, hi: int | None, a: int, b: int | None) -> bool:
    """Whether ``lo <= t < hi`` for every ``t`` in ``[a, b)`` (``b`` None: unbounded); the range
    lies between consecutive bounds, so the atom holds on all of it or on none."""
    return (lo is None or a >= lo) and (hi is None or (b is not None and b <= hi))


def _decide_atoms(stmts: tuple[n.Stmt, ...], truth: dict[n.Expr, bool]) -> tuple[n.Stmt, ...]:
    """``stmts`` with the top-level ``if`` chains' comparisons in ``truth`` replaced by their
    values, and the branches that cannot run dropped."""

    class Replace(Mutator):
        def visit_Binary(self, e: n.Binary) -> n.Expr:
            value = truth.get(e)
            return n.Const(value, e.type) if value is not None else self.generic_visit(e)

    def decide(s: n.If) -> tuple[n.Stmt, ...]:
        cond = fold_expr(Replace().visit(s.cond))
        orelse = s.orelse
        if len(orelse) == 1 and isinstance(orelse[0], n.If) and not is_check(orelse[0].cond):
            orelse = decide(orelse[0])
        if isinstance(cond, n.Const):
            return s.then if cond.value else orelse
        return (rebuild(s, cond=cond, orelse=orelse),)

    out: list[n.Stmt] = []
    for s in stmts:
        out.extend(decide(s) if isinstance(s, n.If) and not is_check(s.cond) else (s,))
    return tuple(out)


def _clamped(bound: int, stop: n.Expr) -> n.Expr:
    """``min(bound, stop)`` in u32 (a range of the counter ends at the loop's own end)."""
    return fold_min([n.Const(bound, U32), stop], U32)


def _chain_of(copies: list[tuple[n.Expr | None, list[n.Stmt]]], loc) -> list[n.Stmt]:
    """``if (c1) {..} else if (c2) {..} else {..}`` of the versions (None: the last, unconditional)."""
    if len(copies) == 1 and copies[0][0] is None:
        return copies[0][1]
    cond, stmts = copies[0]
    if cond is None:
        return stmts
    return [n.If(cond, tuple(stmts), tuple(_chain_of(copies[1:], loc)), loc=loc)]


def _size(stmts: tuple[n.Stmt, ...]) -> int:
    return sum(1 for s in stmts for _ in walk(s))

