"""Write-write races on global memory: two threads of one launch that store to the same element.

CUDA allows such a program (one of the stores wins), but the result depends on the schedule;
the CPU translation silently picks one legal answer. ``write_conflicts`` proves with isl, for
each plain (non-atomic) store to global memory, whether two distinct threads of one launch
can write the same element with no barrier ordering them::

    copies 1 and 2 of the instance space
    { (i1, i2) : i1 in dom(store A), i2 in dom(store B), elem_A(i1) = elem_B(i2),
                 (same block, other thread, no barrier instance of both threads between them)
              or (other block) }

and gives an example pair from isl's sample point.

Launch shapes. With a known block shape the model is built for it (``polypy.poly.model.Launch``),
so a dimension the kernel never reads counts too: with ``block (32, 8)`` a kernel that reads only
``threadIdx.x`` runs every store twice per ``threadIdx.y``, a race. An unknown grid is taken as
2 blocks along each dimension the kernel reads (a race among blocks 0 and 1 happens in every
larger grid, as long as the kernel does not read ``gridDim``). With an unknown block shape the
model is symbolic (dimensions the kernel never reads are 1) and the race must happen for *every*
extent of the launch dimensions from 2 up to CUDA's limit.

Sizes. The race must also happen for *every* value from 1024 to 2**20 of each integer scalar
parameter (``n``): a launch shape and sizes that do not fit each other are the caller's mistake,
not a race in the kernel (``partial_sums[by * hid + bx * 16 + tx]``, written for ``grid = hid /
16``, races for a larger grid), while ``y[blockIdx.x] = v`` by every thread, or ``y[i / 2]``, is
reported.

No false warnings: only exact accesses are judged (a store whose domain or index depends on
data is never reported, the model over-approximates those; a pointer held in a ``__constant__``
record is judged by the slot it is read from, ``polypy.poly.held``), and two different blocks are
compared only where the model knows their block values exactly (blocks 0 and 1 along one
dimension), so every warning is a real race.
"""
from __future__ import annotations

import dataclasses

import islpy as isl

from polypy.errors import Loc
from polypy.ir import nodes as n
from polypy.ir.types import ScalarType
from polypy.ir.visitor import walk
from polypy.poly.affine import int_range
from polypy.poly.model import (
    BLOCK_DIM, BLOCK_IDX, GRID_DIM, MAX_BLOCK_DIM, MAX_GRID_DIM, THREAD_IDX, Access, Launch, Model, build_model,
)
from polypy.poly.held import race_accesses
from polypy.poly.race_form import race_form
from polypy.poly.relations import Copies

Shape = tuple[int, int, int]

# The values of integer scalar parameters (sizes) a race must happen for, all of them.
SCALAR_RANGE = (1 << 10, 1 << 20)


@dataclasses.dataclass(frozen=True)
class WriteConflict:
    """Two threads of one launch of ``kernel`` may both store to one element of ``buffer``.

    ``first``/``second``: an example pair, as ``(("tx", 0), ("ty", 1), ("bx", 0))``;
    ``other``: the location of the second store when it is another statement.
    """

    kernel: str
    buffer: str
    text: str
    loc: Loc | None
    first: tuple[tuple[str, int], ...]
    second: tuple[tuple[str, int], ...]
    other: Loc | None = None

    def message(self) -> str:
        def thread(values: tuple[tuple[str, int], ...]) -> str:
            return "(" + ", ".join(f"{k}={v}" for k, v in values) + ")"
        return (f"threads {thread(self.first)} and {thread(self.second)} both write '{self.text}' without an "
                f"atomic in kernel {self.kernel}")


def write_conflicts(kernel: n.Kernel, *, block: Shape | None = None, grid: Shape | None = None) -> list[WriteConflict]:
    """The plain global stores of GPU-form ``kernel`` that two threads of one launch can race on.

    ``block``/``grid``: the launch shape where it is known (see the module docstring for what
    an unknown one means). At most one conflict per store, in source order.
    """
    return conflicts_in(race_question(kernel, block, grid))


def race_question(kernel: n.Kernel, block: Shape | None, grid: Shape | None) -> RaceQuestion:
    """The race questions of ``kernel`` at the launch shape where it is known. Loads of
    ``__constant__`` memory are one value per launch: uniform values of the model where their
    index is (``build_model(constants=True)``), and bounds or steps of counted ``while`` loops,
    which become ``For`` loops for the question (``race_form``: heartwall's ``while (ei <
    d_common.in_elem) { ...; ei += NUMBER_THREADS; }``)."""
    kernel = race_form(kernel)
    return RaceQuestion(build_model(kernel, launch=race_launch(kernel, block, grid), constants=True), block, grid)


def conflicts_in(q: RaceQuestion) -> list[WriteConflict]:
    """``write_conflicts`` of ``q``'s model."""
    model = q.model
    # Global memory: pointer parameters and the module's __device__ arrays (and the pointers
    # held in __constant__ records, by the slot they are read from: ``polypy.poly.held``).
    writes = [a for a in race_accesses(model.accesses) if a.writes]
    stores = [a for a in writes if a.kind == "write"]
    out: list[WriteConflict] = []
    reported: set[tuple] = set()  # (store, other store): each pair of statements once
    for a in stores:
        for b in writes:
            if b.buffer != a.buffer or (b.id, a.id) in reported:
                continue
            found = q.conflict(a, b)
            if found is not None:
                out.append(found)
                reported.add((a.id, b.id))
                break
    return out


def race_launch(kernel: n.Kernel, block: Shape | None, grid: Shape | None) -> Launch | None:
    """The launch to build the model for: the known block shape, and the known grid or 2 blocks
    along each grid dimension the kernel reads (None: symbolic)."""
    if block is None:
        return None
    reads_block = [False, False, False]
    reads_grid = False
    for x in walk(kernel):
        if isinstance(x, n.BlockIdx):
            reads_block[x.dim] = True
        elif isinstance(x, n.GridDim):
            reads_grid = True
    if grid is None:
        if reads_grid:
            return None  # how many blocks there are matters: stay symbolic
        grid = tuple(2 if reads_block[d] or d == 0 else 1 for d in range(3))  # type: ignore[assignment]
    return Launch(grid, block)  # type: ignore[arg-type]


class RaceQuestion:
    """Race questions about one model; ``block``/``grid``: known shapes (used where the model is
    symbolic in them)."""

    def __init__(self, model: Model, block: Shape | None, grid: Shape | None):
        self.model = model
        self.c = c = Copies(model, ("1", "2"))
        self.fixed = c.universe  # the known launch shape, on the model's blockDim/gridDim parameters
        every = c.universe  # the generic range of the unknown launch extents and the scalar parameters
        warp = c.universe  # the same, with at least a warp of threads along x (``decide(warp=True)``)
        example = c.universe  # one point of it, for the example pair
        least, least_warp = c.universe, c.universe  # the smallest launch and sizes of each range
        self.universal: set[str] = set()
        for names, limits, pick, known in ((BLOCK_DIM, MAX_BLOCK_DIM, (32, 2, 2), block),
                                           (GRID_DIM, MAX_GRID_DIM, (2, 2, 2), grid)):
            for d, name in enumerate(names):
                if name not in c.affs:
                    continue
                p = c.affs[name]
                if known is not None:
                    self.fixed &= p.eq_set(c.const(known[d]))
                    continue
                every &= p.ge_set(c.const(2)) & p.le_set(c.const(limits[d]))
                warp &= p.ge_set(c.const(32 if name == BLOCK_DIM[0] else 2)) & p.le_set(c.const(limits[d]))
                example &= p.eq_set(c.const(pick[d]))
                least &= p.eq_set(c.const(2))
                least_warp &= p.eq_set(c.const(32 if name == BLOCK_DIM[0] else 2))
                self.universal.add(name)
        for param in model.kernel.params:
            if param.name in c.affs and isinstance(param.ptype, ScalarType) and not param.ptype.is_float:
                lo, hi = int_range(param.ptype)
                lo, hi = max(lo, SCALAR_RANGE[0]), min(hi, SCALAR_RANGE[1])
                if lo > hi:
                    continue  # a narrow type (a flag, a char): left existential
                p = c.affs[param.name]
                every &= p.ge_set(c.const(lo)) & p.le_set(c.const(hi))
                warp &= p.ge_set(c.const(lo)) & p.le_set(c.const(hi))
                example &= p.eq_set(c.const(lo))
                least &= p.eq_set(c.const(lo))
                least_warp &= p.eq_set(c.const(lo))
                self.universal.add(param.name)
        # A uniform value the model cannot read (``n * n``, a load of __constant__ memory) lies in
        # its type's range: outside it, an index could wrap around onto another thread's.
        for name, e in model.uniform_exprs.items():
            if name in c.affs and e.type.is_int:
                lo, hi = int_range(e.type)
                self.fixed &= c.affs[name].ge_set(c.const(lo)) & c.affs[name].le_set(c.const(hi))
        self.every = every.params()
        self.every_warp = warp.params()
        self.example = example
        # Points of the generic range where a race must happen too: one without a race refutes
        # "for every launch" with an emptiness check instead of a projection onto the parameters.
        self.witnesses = {False: (least, example), True: (least_warp, example)}
        self._domains: dict[tuple, isl.Set] = {}
        self.pieces = c.other_thread_pieces("1", "2")
        self.block_pieces = self._block_pieces()

    def _block_pieces(self) -> list[isl.Set]:
        """Instances of blocks 0 and 1 along one grid dimension (equal elsewhere), where every
        block value is known exactly; dimensions a value of unknown stride depends on are left out."""
        c, model = self.c, self.model
        out = []
        for d in model.block_dims:
            if any(bv.stride is None and d in bv.block_dims for bv in model.block_values):
                continue
            for first, second in (("1", "2"), ("2", "1")):
                piece = c.dim(BLOCK_IDX[d], first).eq_set(c.const(0)) & c.dim(BLOCK_IDX[d], second).eq_set(c.const(1))
                for e in range(3):
                    if e != d:
                        piece &= c.dim(BLOCK_IDX[e], "1").eq_set(c.dim(BLOCK_IDX[e], "2"))
                for bv in model.block_values:
                    if bv.stride is not None and bv.stride[0] == d:
                        _, e, k = bv.stride  # blockIdx[d] * k * blockDim[e]: 0 and k * blockDim[e]
                        piece &= c.dim(bv.name, first).eq_set(c.const(0))
                        piece &= c.dim(bv.name, second).eq_set(c._block_dim(e) * isl.Val(k))
                    else:
                        piece &= c.dim(bv.name, "1").eq_set(c.dim(bv.name, "2"))
                out.append(piece)
        return out

    def decide(self, s: isl.Set, *, warp: bool = False) -> dict[str, int] | None:
        """An example pair of threads in ``s`` (``{"threadIdx.x#1": 0, ...}``) if ``s`` is non-empty
        for every unknown launch extent and every scalar argument of the generic range, else None
        (``warp``: every unknown ``blockDim.x`` from a warp's 32 threads on, as code that relies on
        warps is written for)."""
        s = s & self.fixed
        if s.is_empty():
            return None
        # Cheap refutations first: a launch of the range (the smallest, the example's) where no
        # pair races. Projecting a set of many dimensions onto its parameters is the slow step
        # (for a 3-D block's pairs of shared accesses: seconds each), an emptiness check at fixed
        # values is not.
        if any((s & point).is_empty() for point in self.witnesses[warp]):
            return None
        params = s.params()
        for i in reversed(range(params.dim(isl.dim_type.param))):
            if params.get_dim_name(isl.dim_type.param, i) not in self.universal:
                params = params.eliminate(isl.dim_type.param, i, 1)
        if not (self.every_warp if warp else self.every).is_subset(params):
            return None
        example = s & self.example
        if example.is_empty():
            example = s
        # Only the thread and block coordinates, smallest first: the easiest pair to read.
        keep = [f"{d}#{copy}" for copy in ("1", "2") for d in BLOCK_IDX + THREAD_IDX]
        for i in reversed(range(len(self.c.names))):
            if self.c.names[i] not in keep:
                example = example.project_out(isl.dim_type.set, i, 1)
        example = example.project_out(isl.dim_type.param, 0, example.dim(isl.dim_type.param))
        point = example.lexmin().sample_point()
        names = [name for name in self.c.names if name in keep]
        return {name: int(point.get_coordinate_val(isl.dim_type.set, i).to_python()) for i, name in enumerate(names)}

    def ordered(self, a: Access, b: Access) -> isl.Set:
        """Instance pairs of ``a`` (copy 1) and ``b`` (copy 2) that a barrier of both threads orders."""
        barriers = self.model.barriers
        return self.c.separated(a.time, "1", b.time, "2", barriers) | self.c.separated(b.time, "2", a.time, "1", barriers)

    def _domain(self, a: Access, copy: str, warp: bool | None) -> isl.Set:
        """``a``'s domain in ``copy`` at the known launch shape; ``warp`` not None: at the first
        witness launch of ``decide(warp=warp)`` only. Cached: each access meets every other."""
        key = (a.id, copy, warp)
        d = self._domains.get(key)
        if d is None:
            d = self.c.domain(a, copy) & self.fixed
            if warp is not None:
                d &= self.witnesses[warp][0]
            self._domains[key] = d
        return d

    def same_block_race(self, a: Access, b: Access, *, at_witness: bool | None = None) -> tuple[isl.Set, isl.Set] | None:
        """``(base, race)``: the instance pairs where ``a`` and ``b`` certainly touch one element,
        and those of two threads of one block among them that no barrier orders (None: never
        provably the same element). ``at_witness``: at the first launch ``decide(warp=at_witness)``
        refutes at only (the smallest one: a cheap question, see ``decide``)."""
        c = self.c
        same = c.same_element(a, "1", b, "2")
        if same is None:
            return None
        base = self._domain(a, "1", at_witness) & self._domain(b, "2", at_witness) & same
        if base.is_empty():
            return None
        # Every piece of "another thread" lies in one block: the pairs of two blocks (an access in
        # each of two branches on blockIdx, a kernel's versions) leave before the subtraction.
        near = base & c.same_block("1", "2")
        race = c.empty
        if near.is_empty():
            return base, race
        # One subtraction, then the pieces of "another thread" (``(near & piece) - ordered`` for
        # each piece is the same set, at six subtractions for a 3-D block).
        unordered = self.unordered(near, a, b)
        if not unordered.is_empty():
            for piece in self.pieces:
                race = race | (unordered & piece)
        return base, race

    def unordered(self, pairs: isl.Set, a: Access, b: Access) -> isl.Set:
        """The instance pairs of ``pairs`` (``a`` in copy 1, ``b`` in copy 2) that no barrier of
        both threads orders: ``pairs - ordered(a, b)``, asked barrier by barrier inside
        ``pairs`` (``Copies.unseparated``: each barrier's "between" set is built where
        ``pairs`` fixes the dimensions of the loops around neither access, the launch, ...,
        not over the whole copy space, and the first barriers usually leave nothing)."""
        barriers = self.model.barriers
        out = self.c.unseparated(pairs, a.time, "1", b.time, "2", barriers)
        return out if out.is_empty() else self.c.unseparated(out, b.time, "2", a.time, "1", barriers)

    def conflict(self, a: Access, b: Access) -> WriteConflict | None:
        model = self.model
        found = self.same_block_race(a, b)
        if found is None:
            return None
        base, race = found
        for piece in self.block_pieces:
            race = race | (base & piece)
        point = self.decide(race)
        if point is None:
            return None
        first, second = thread_values(model, point, "1"), thread_values(model, point, "2")
        other = b.loc if b.loc != a.loc else None
        return WriteConflict(model.kernel.name, a.buffer, _element(a), a.loc, first, second, other)


def thread_values(model: Model, point: dict[str, int], copy: str) -> tuple[tuple[str, int], ...]:
    """``(("tx", 3), ("bx", 0))``: the thread and block of ``copy`` in ``point`` (dimensions that vary)."""
    out: list[tuple[str, int]] = []
    for prefix, names, dims in (("t", THREAD_IDX, model.thread_dims), ("b", BLOCK_IDX, model.block_dims)):
        for d in sorted(set(dims) | {0}):
            out.append((prefix + "xyz"[d], point[f"{names[d]}#{copy}"]))
    return tuple(out)


def _element(a: Access) -> str:
    """``y[i]``: the stored element, as the model spells the access (IR expressions)."""
    return a.text or f"{a.buffer}[...]"
