"""Races on shared memory between two threads of one block, and the ones inside one warp.

CUDA orders two threads' accesses to shared memory only by a barrier they both reach (or an
atomic, for two atomics). A pair with one write and no barrier between is a data race. polypy
runs the threads of a block one after another between barriers (and regroups them: fission,
vectorization), which is one legal schedule of the block as long as the racing threads are in
*different* warps: warps really do interleave arbitrarily on the GPU.

Inside one warp, code written for GPUs before Volta relies on the 32 lanes stepping together
through each instruction ("implicit warp-synchronous" code, typically a ``volatile __shared__``
scan or the unrolled last warp of a reduction without barriers)::

    if (t >= 1) s[t] += s[t - 1];     // lockstep: every lane reads, then every lane writes
                                      // threads in turn: lane 1 reads what lane 0 just wrote

Run thread after thread, such code gives another answer: ``gpu2cpu.lockstep_warps`` gives a race
inside one warp its lockstep order where it can, ``gpu2cpu.refuse_warp_synchronous`` refuses the
rest; races between warps are warnings for ``--report``.

The question is asked with isl as ``write_conflicts`` asks it for global stores: for each exact
write (or atomic) to a shared array and each exact access of the same array, the pairs of
instances of two different threads of one block touching one element with no barrier instance
of both threads between them, non-empty for *every* launch extent and size of the generic
range (so every refusal is a real race; ``warp_races``). A question isl cannot answer takes the
safe side: ``warp_races`` refuses the kernel, ``may_warp_race_arrays`` counts the arrays as racing
(lowering them in lockstep only costs barriers), a report warns that it could not check. "Same warp" is taken as same ``threadIdx.y``/``.z`` and
same ``threadIdx.x / 32``, exact where ``blockDim.x`` is a multiple of 32 (a warp never spans two
rows), and a symbolic launch must race for every ``blockDim.x`` from 32 on, multiples included.
(With rows of, say, 48 threads two such threads may sit in neighbouring warps: ordering them in
lockstep is one legal schedule too.) Two lanes storing with one statement are not counted: some
lane's value wins in lockstep as well.

Cost: every pair of a write and an access of its array is a question, over symbolic launch
extents (dct8x8's ``CUDAkernel2DCT``, a 3-D block with 34 shared accesses: 850 pairs, 167 s).
``decide`` wants a race at every launch of the generic range, the smallest among them, so each
pair is asked at that launch first (and, for one warp, at the smallest with a warp along x):
with fixed extents isl answers at once, and only a pair racing there is asked symbolically (the
same kernel: about 1 s, the same answers).
"""
from __future__ import annotations

import dataclasses
import functools

import islpy as isl

from polypy.errors import Loc, UserError, format_diagnostic
from polypy.ir import nodes as n
from polypy.ir.queries import read_names
from polypy.ir.visitor import walk_only
from polypy.poly.block_scope import BlockScopes
from polypy.poly.hazards import atomics_commute
from polypy.poly.model import THREAD_IDX, Access, build_model
from polypy.poly.paths import StmtPath, child_blocks, iter_statements, statement_accesses, statement_at
from polypy.poly.write_conflicts import RaceQuestion, Shape, race_launch, thread_values

WARP = 32


@dataclasses.dataclass(frozen=True)
class BlockRace:
    """Threads ``first`` and ``second`` of one block race on ``text`` (an access of the shared
    array ``buffer`` at ``loc``; ``other``: the other access when it is another one)."""

    kernel: str
    buffer: str
    text: str
    loc: Loc | None
    kinds: tuple[str, str]
    first: tuple[tuple[str, int], ...]
    second: tuple[tuple[str, int], ...]
    other: Loc | None
    same_warp: bool

    def message(self) -> str:
        def thread(values: tuple[tuple[str, int], ...]) -> str:
            return "(" + ", ".join(f"{k}={v}" for k, v in values if k.startswith("t")) + ")"
        verbs = {"read": "reads", "write": "writes", "atomic": "updates"}
        return (f"threads {thread(self.first)} and {thread(self.second)} of one "
                f"{'warp' if self.same_warp else 'block'} race on shared '{self.text}' in kernel {self.kernel}: "
                f"one {verbs[self.kinds[0]]} it, the other {verbs[self.kinds[1]]} it, with no __syncthreads() "
                "between them")

    def notes(self) -> tuple[tuple[str, Loc | None], ...]:
        return (("the other access", self.other),) if self.other is not None else ()

    def error(self) -> UserError:
        """The refusal of a race inside one warp (implicit warp-synchronous code)."""
        return UserError(self.message() + ". This is implicit warp-synchronous code (the lanes of a warp stepping "
                         "together, as before Volta), here inside control flow polypy cannot run in that lockstep "
                         "order (a loop whose trips differ between threads, a break out of it): threads run one "
                         "after another would give another answer; order the accesses with a __syncthreads() that "
                         "every thread of the block reaches", self.loc, notes=self.notes())


def block_races(kernel: n.Kernel, *, block: Shape | None = None) -> list[BlockRace]:
    """The races on shared memory of GPU-form ``kernel`` (at most one per write), those inside one
    warp first found where a pair can be both. ``block``: the block shape where it is known."""
    if not any(b.space == "shared" for b in kernel.buffers):
        return []
    model = build_model(kernel, launch=race_launch(kernel, block, None))
    shared = [a for a in model.accesses if a.space == "shared" and a.exact]
    writes = [a for a in shared if a.writes]
    if not writes:
        return []
    # Each pair asked in the part of the model that can run in its block (``block_scope``: a
    # kernel's version of its work), with one question object per part.
    scopes = BlockScopes(model)
    questions: dict[int, tuple[RaceQuestion, isl.Set]] = {}
    out: list[BlockRace] = []
    for whole_a in writes:
        found = None
        # The other access of the same statement first (`s[t] += s[t - 1]`): the pair whose order
        # really differs between lockstep lanes and threads in turn, the clearest to report.
        for whole_b in sorted(shared, key=lambda b: _line(b) != _line(whole_a)):
            a = whole_a
            if whole_b.buffer != a.buffer or (a.kind == "atomic" and whole_b.kind == "atomic") \
                    or atomics_commute(a, whole_b):
                continue
            scope = scopes.scope(a, whole_b)
            if scope is None:  # never in one block
                continue
            if id(scope) not in questions:
                q = RaceQuestion(scope, block, None)
                questions[id(scope)] = (q, _same_warp(q))
            q, warp = questions[id(scope)]
            a, b = scope.access(a.id), scope.access(whole_b.id)
            race = _race(q, a, b, warp)
            if race is None:
                continue
            # Lanes storing with one statement (`s = n` by every thread): some lane's value wins
            # in lockstep too, and the last thread's is one of them. Not warp-synchronous code.
            point = None if b is a and a.kind == "write" else q.decide(race & warp, warp=True)
            same_warp = point is not None
            if point is None:
                point = q.decide(race)
            if point is None:
                continue
            found = BlockRace(kernel.name, a.buffer, a.text or f"{a.buffer}[...]", a.loc, (a.kind, b.kind),
                              thread_values(model, point, "1"), thread_values(model, point, "2"),
                              b.loc if b.loc != a.loc else None, same_warp)
            if same_warp:
                break
        if found is not None:
            out.append(found)
    return out


def may_warp_race_arrays(kernel: n.Kernel) -> frozenset[str]:
    """The shared arrays two threads of one warp *may* race on through one statement where the
    proof of ``warp_races`` fails for an index or a condition the model cannot read (``s[t] =
    s[t ^ 1] + s[t]``; ``v[t] += v[t - off]`` in a ``for (off = 1; off < 32; off <<= 1)``): the
    statement's store and another of its accesses may touch one element, with no barrier certainly
    between them. What lockstep lowering covers beside the proven races; lowering a race-free
    array costs barriers, so two limits keep real code out:

    * one statement only (or one source line: ``v[t] = sum = sum + v[t + k]`` is two in the IR),
      or a load whose value reaches the store through locals of the same block (``float v =
      s[t ^ 1]; s[t] = v + s[t];``, ``_flows_into``): lanes of warp-synchronous code read what
      other lanes store with the same statement or exchange values so, while separate
      statements with indices the model cannot read (a table at a loaded ``unsigned char``,
      ``x + (x >> 4)`` through a reference) are usually apart;
    * not in a loop the model only counts (``s >>= 1``) that holds a barrier: a tree reduction
      synchronizes each trip, and there the model cannot tell ``t < s`` from ``t + s``.
    """
    if not any(b.space == "shared" for b in kernel.buffers):
        return frozenset()
    try:
        model = build_model(kernel)
    except isl.Error:
        # Too hard for isl: every shared array the kernel stores to may race. Lowering an array
        # that does not race only costs barriers (exact); missing one that does runs it wrong.
        return _stored_shared_arrays(kernel)
    synced = [loop for loop in model.loops
              if not loop.exact and any(_inside(b.path, loop.path) for b in model.barriers)]
    shared = [a for a in model.accesses
              if a.space == "shared" and not any(_inside(a.id.path, loop.path) for loop in synced)]
    writes = [a for a in shared if a.writes]
    if not writes:
        return frozenset()
    q = RaceQuestion(model, None, None)
    try:
        warp = _same_warp(q)
    except isl.Error:
        warp = None
    out: set[str] = set()
    for a in writes:
        for b in shared:
            if (b.id.path != a.id.path and _line(b) != _line(a) and not _flows_into(kernel, b, a)) \
                    or a.buffer in out or (a.kind == "atomic" and b.kind == "atomic") or (b is a and a.kind == "write"):
                continue
            try:
                if warp is not None and not _may_race(q, a, b, warp):
                    continue
            except isl.Error:  # too hard for isl: the pair may race (see above)
                pass
            out |= {a.buffer, b.buffer}
    return frozenset(out)


def racing_statements(kernel: n.Kernel, arrays: frozenset[str]) -> frozenset[StmtPath] | None:
    """The paths of the statements whose own accesses to ``arrays`` may race with an access of
    another thread of the block (any warp): the two may touch one element (``overlap``, where an
    index the model cannot read touches anything), one writes, and no barrier of both threads
    certainly orders them, at some launch. The others touch those arrays only where every other
    thread's accesses are ordered against theirs by barriers, or are reads alike (``s[t] = 0;
    while (...) s[t] += g[i];`` before a ``__syncthreads()``): the order of the lanes does not
    change what they read or leave. None where isl cannot answer (every statement may race)."""
    try:
        model = build_model(kernel)
        q = RaceQuestion(model, None, None)
        shared = [a for a in model.accesses if a.buffer in arrays]
        out: set[StmtPath] = set()
        for k, a in enumerate(shared):
            for b in shared[k:]:  # the question is symmetric
                if not (a.writes or b.writes) or (a.kind == "atomic" and b.kind == "atomic") \
                        or {a.id.path, b.id.path} <= out:
                    continue
                if _may_race_in_block(q, a, b):
                    out |= {a.id.path, b.id.path}
    except isl.Error:
        return None
    # A statement the model leaves out (or counts fewer accesses of) is not known race-free.
    counted: dict[StmtPath, int] = {}
    for a in shared:
        counted[a.id.path] = counted.get(a.id.path, 0) + 1
    for path, stmt in iter_statements(kernel.body):
        own = sum(1 for r in statement_accesses(stmt) if r.buffer in arrays)
        if own and counted.get(path, 0) != own:
            out.add(path)
    return frozenset(out)


def _may_race_in_block(q: RaceQuestion, a: Access, b: Access) -> bool:
    """Whether two threads of one block may touch one element through ``a`` and ``b`` with no
    barrier certainly between them, at some launch."""
    overlap = q.c.overlap(a, "1", b, "2")
    if overlap is None:
        return False
    base = q.c.domain(a, "1") & q.c.domain(b, "2") & overlap & q.c.same_block("1", "2")
    if base.is_empty():
        return False
    return any(not q.unordered(base & piece, a, b).is_empty() for piece in q.pieces)


def _may_race(q: RaceQuestion, a: Access, b: Access, warp: isl.Set) -> bool:
    """Whether two lanes of one warp may touch one element through ``a`` and ``b`` in one trip,
    with no barrier certainly between them."""
    overlap = q.c.overlap(a, "1", b, "2")
    if overlap is None:
        return False
    base = q.c.domain(a, "1") & q.c.domain(b, "2") & overlap & warp & _same_trips(q, a, b)
    if base.is_empty():
        return False
    return any(not q.unordered(base & piece, a, b).is_empty() for piece in q.pieces)


def _stored_shared_arrays(kernel: n.Kernel) -> frozenset[str]:
    """The shared arrays some statement of ``kernel`` stores to (or updates atomically)."""
    shared = {b.name for b in kernel.buffers if b.space == "shared"}
    return frozenset(s.buffer for s in walk_only(kernel.body, n.Store, n.AtomicRMW) if s.buffer in shared)


def _flows_into(kernel: n.Kernel, read: Access, write: Access) -> bool:
    """Whether the value ``read`` loads reaches ``write``'s store through locals: ``read``'s
    statement defines a local (``float v = s[t ^ 1]``) that ``write``'s statement, later in the
    same block, reads directly or through locals defined in between from it."""
    if read.kind != "read" or len(read.id.path) != len(write.id.path) or not read.id.path \
            or read.id.path[:-1] != write.id.path[:-1] or read.id.path[-1][0] != write.id.path[-1][0]:
        return False  # not two statements of one list (a `then` and an `else` share a parent)
    (field, first), (_, last) = read.id.path[-1], write.id.path[-1]
    if first >= last:
        return False
    parent = read.id.path[:-1]
    block = statement_at(kernel, parent) if parent else None
    stmts = kernel.body if block is None else dict(child_blocks(block))[field]
    tainted: set[str] = set()
    for k in range(first, last + 1):
        s = stmts[k]
        reads = read_names(s)
        if k == last:
            return bool(reads & tainted)
        if isinstance(s, (n.Decl, n.Assign)) and (k == first or reads & tainted):
            tainted.add(s.name)
    return False


def _inside(path, loop_path) -> bool:
    return len(path) > len(loop_path) and path[:len(loop_path)] == loop_path


def _same_trips(q: RaceQuestion, a: Access, b: Access) -> isl.Set:
    """Pairs in the same trip of every loop around both accesses whose trips the model only
    counts: lanes in lockstep are in one trip (their race there is the one to find)."""
    out = q.c.universe
    for loop in q.model.loops:
        if not loop.exact and _inside(a.id.path, loop.path) and _inside(b.id.path, loop.path):
            out &= q.c.dim(loop.dim, "1").eq_set(q.c.dim(loop.dim, "2"))
    return out


def _line(a: Access) -> int | None:
    return a.loc.line if a.loc is not None else None


def _race(q: RaceQuestion, a: Access, b: Access, warp: isl.Set) -> isl.Set | None:
    """Instance pairs of two threads of one block touching one element, unordered by barriers
    (None: none that ``decide`` could take for a race of every launch).

    Asked at the smallest launch of the generic range first, and at the smallest with a warp
    along x for pairs of one warp: ``decide`` wants a race at those too, and at fixed launch
    extents isl answers at once what takes it long over symbolic ones (the 32 shared accesses
    of a 3-D block: minutes)."""
    small = q.same_block_race(a, b, at_witness=False)  # None: no pair touches one element there
    if small is None or small[1].is_empty():
        in_warp = q.same_block_race(a, b, at_witness=True)
        if in_warp is None or (in_warp[1] & warp).is_empty():
            return None
    found = q.same_block_race(a, b)
    return None if found is None or found[1].is_empty() else found[1]


def _same_warp(q: RaceQuestion) -> isl.Set:
    """Pairs of threads of one warp where ``blockDim.x`` is a multiple of 32: same ``threadIdx.y/z``,
    same ``threadIdx.x / 32``."""
    c = q.c
    out = c.universe
    for d in q.model.thread_dims:
        x, y = c.dim(THREAD_IDX[d], "1"), c.dim(THREAD_IDX[d], "2")
        if d == 0:
            w = isl.Val(WARP)
            out &= x.scale_down_val(w).floor().eq_set(y.scale_down_val(w).floor())
        else:
            out &= x.eq_set(y)
    return out


def warp_races(kernel: n.Kernel, *, block: Shape | None = None) -> list[BlockRace]:
    """The races of ``block_races`` inside one warp. Cached: ``lockstep-warps`` and
    ``refuse-warp-synchronous`` ask it of the same kernel when the first leaves it as it is.

    Where the question is too hard for isl, a ``UserError`` at the kernel: whether its threads
    may run one after another (no race inside a warp) or need the lockstep order of implicit
    warp-synchronous code is then unknown, and guessing could give another answer."""
    return list(_warp_races(kernel, block))


@functools.lru_cache(maxsize=16)
def _warp_races(kernel: n.Kernel, block: Shape | None) -> tuple[BlockRace, ...]:
    try:
        races = [r for r in block_races(kernel, block=block) if r.same_warp]
    except isl.Error as exc:
        raise UserError(f"cannot check kernel {kernel.name} for races on shared memory inside one warp: the "
                        f"question is too hard for the polyhedral analysis (isl: {_first_line(exc)}); polypy "
                        "cannot tell whether the kernel relies on the lanes of a warp stepping together (implicit "
                        "warp-synchronous code), and running its threads one after another could give another "
                        "answer. Simplify the shared-memory indices or order the accesses with __syncthreads()",
                        kernel.loc) from None
    return tuple(sorted(races, key=lambda r: r.other is not None and r.loc is not None
                        and r.other.line != r.loc.line))


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def shared_race_warnings(kernel: n.Kernel, *, block: Shape | None = None) -> list[str]:
    """``FILE:LINE:COL: warning: ...`` for races on shared memory (between warps, one legal schedule
    is what runs, and a GPU's result may differ from run to run; inside one warp, a translation
    refuses them). Where the question is too hard for isl, a warning that says so."""
    try:
        races = block_races(kernel, block=block)
    except isl.Error as exc:
        return [format_diagnostic("warning", f"races on shared memory not checked in kernel {kernel.name}: the "
                                  f"question is too hard for the polyhedral analysis (isl: {_first_line(exc)})",
                                  kernel.loc)]
    return [format_diagnostic("warning", r.message(), r.loc, notes=r.notes()) for r in races]
