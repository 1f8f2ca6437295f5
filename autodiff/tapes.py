"""Tapes: values the forward sweep stores for the reverse sweep, indexed by loop iteration.

A value valid at a point inside loops is stored in a per-thread local array with one dimension
per enclosing loop (sized by static trip bounds, ``autodiff.loops.trip_bound``), at the
forward iteration numbers, and read back at the reverse sweep's iteration numbers. Loops
without a constant-start, constant-step ``for`` shape get an iteration counter (``counter``).

The functions take the state of reverse mode (``autodiff.reverse_state.ReverseState``): they add
the stores and counters to what the reverse sweep asks of the forward sweep (``st.before``,
``st.loop_prologue``, ``st.top_decls``) and the tapes to ``st.tapes``.
"""
from __future__ import annotations

import dataclasses

from autodiff import build as b
from autodiff.loops import launch_positive, loop_base, runtime_trip_bound, trip_bound
from autodiff.report import Caching
from autodiff.reverse_state import CannotTape, NeedTape, ReverseState, loc_at, note
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.semantics import eval_binary, eval_cast, eval_unary
from polypy.ir.types import I32, I64, PointerType
from polypy.ir.jumps import jumps_out
from polypy.ir.queries import declared_names, written_names
from polypy.ir.visitor import substitute, walk
from polypy.poly.paths import StmtPath, format_path

Point = StmtPath


def tape(st: ReverseState, e: n.Expr, p: Point, *, tape: bool, what: str, runtime: bool | None = None) -> n.Expr:
    """Store ``e`` (valid at ``p`` in the forward sweep) at ``p``; read it back in reverse.
    ``tape``: whether a tape is allowed here (else ``NeedTape``); ``runtime``: whether a tape may
    be sized at launch (default: the options say)."""
    if not tape:
        raise NeedTape()
    runtime = st.opt.runtime_tapes if runtime is None else runtime and bool(st.opt.runtime_tapes)
    loops = st.prog.loops_around(p)
    bounds: list[int | n.Expr] = []
    for loop in loops:
        bound: int | n.Expr | None = trip_bound(st.prog, loop)
        if bound is None and runtime:
            bound = runtime_trip_bound(st.prog, loop)
        if bound is None:
            s = st.prog.stmt(loop)
            line = f" at line {s.loc.line}" if s.loc is not None else f" {format_path(loop)}"
            known = "at launch" if runtime else "statically"
            raise CannotTape(loop, f"the trip count of the loop{line} is not known {known}, so a tape "
                                   f"cannot be sized")
        bounds.append(max(bound, 1) if isinstance(bound, int) else bound)
    size = 1
    for bound in bounds:
        size *= bound if isinstance(bound, int) else 1
    if size > st.opt.max_tape:
        raise CannotTape(loops[-1], f"a tape of {size} elements is larger than the limit of {st.opt.max_tape}")
    # One tape per value and point: the uses of a value in several reverse statements (cfd's
    # velocity_nb_x, read by five adjoints) read the tape of the first (not a copy each).
    key = ("taped", e, p, tuple(st.ctx[loop].index for loop in loops))
    found = st.memo.get(key)
    if found is not None:
        return found
    taped = _shared_tape(st, e, p, loops, what)
    if taped is None:
        taped = _new_tape(st, e, p, loops, bounds, size, what)
        if _in_loop_body(p, loops) and isinstance(taped, n.Load):
            st.memo.setdefault(_LOOP_TAPES, []).append(_LoopTape(taped.buffer, e, p, loops[0]))
    st.memo[key] = taped
    return taped


_LOOP_TAPES = ("loop tapes",)  # st.memo key: the _LoopTape of each tape made in a single loop


@dataclasses.dataclass
class _LoopTape:
    """A tape of value ``e`` stored at ``point`` of ``loop`` (its only loop), which may also
    serve another loop with the same iterations (``_shared_tape``)."""

    name: str
    e: n.Expr
    point: Point
    loop: StmtPath


def _shared_tape(st: ReverseState, e: n.Expr, p: Point, loops: list[StmtPath], what: str) -> n.Expr | None:
    """The read, in the reverse sweep of ``p``'s loop, of a tape another loop already keeps of
    the same value (softmax's ``exp(x[c] - row_max)``, needed by the reverse sweeps of the sum's
    loop and of the output's), or None.

    Exact where the two loops are ``for`` loops in one block with the same start, stop, step and
    counter type, so that their ``i``-th iterations have the same counter value; each point is a
    statement of its loop's body that every iteration reaches (no jump leaves the body), so both
    loops would store every index; and the two values are one expression up to the counter, whose
    locals are written neither in the loops nor between them, which loads no memory the kernel
    writes, and (as every ``Call``) calls only pure functions: the values are the same at each
    index. The store is kept in the earlier of the two loops (the reverse sweep reaches the later
    loop first): a forward loop left without stores is then dead code."""
    if not _in_loop_body(p, loops):
        return None
    loop = loops[0]
    for other in st.memo.get(_LOOP_TAPES, ()):
        if other.loop == loop or other.loop[:-1] != loop[:-1] or other.loop[-1][0] != loop[-1][0]:
            continue
        a, b = st.prog.stmt(other.loop), st.prog.stmt(loop)
        if not (isinstance(a, n.For) and isinstance(b, n.For)) or \
                (a.start, a.stop, a.step, a.vtype) != (b.start, b.stop, b.step, b.vtype) or \
                substitute(e, {n.Var(b.var, b.vtype): n.Var(a.var, a.vtype)}) != other.e:
            continue
        first, last = sorted((other.loop, loop), key=lambda path: path[-1][1])
        span = st.prog.block(first[:-1], first[-1][0])[first[-1][1]:last[-1][1] + 1]
        if not _same_between(st, span, (e, a.start, a.stop, a.step), {a.var, b.var}) or \
                jumps_out(a.body) or jumps_out(b.body):
            continue
        if first == loop:  # store in this loop (the earlier one) instead of the later one
            stores = st.before[other.point]
            at = next(i for i, x in enumerate(stores) if isinstance(x, n.Store) and x.buffer == other.name)
            store = stores.pop(at)
            st.before.setdefault(p, []).append(dataclasses.replace(store, index=(_forward_index(st, loop),), value=e))
            other.e, other.point, other.loop = e, p, loop
        line = st.prog.stmt(first).loc
        where = f"the loop at line {line.line}" if line is not None else "an earlier loop"
        note(st, ("tape", other.name, p), Caching(what, e.loc or loc_at(st, p), "tape",
                                                  f"the tape {other.name} of the same values, stored by {where}"))
        return n.Load(other.name, (n.Var(st.ctx[loop].index, I32),), e.type)
    return None


def _in_loop_body(p: Point, loops: list[StmtPath]) -> bool:
    """Whether ``p`` is a point of the body of its only loop, a ``for`` (not nested in a branch)."""
    return len(loops) == 1 and p[:-1] == loops[0] and p[-1][0] == "body"


def _same_between(st: ReverseState, span: tuple[n.Stmt, ...], exprs: tuple[n.Expr, ...], counters: set[str]) -> bool:
    """Whether ``exprs`` have one value throughout ``span`` (the statements from the first loop
    to the second): they read no local ``span`` writes or declares (the loops' counters aside)
    and load only memory the kernel never writes."""
    written = (written_names(span) | declared_names(span)) - counters
    for e in exprs:
        for x in walk(e):
            if isinstance(x, n.Var) and x.name in written:
                return False
            if isinstance(x, n.Load) and x.buffer in st.prog.written_buffers:
                return False
    return True


def _new_tape(st: ReverseState, e: n.Expr, p: Point, loops, bounds: list, size: int, what: str) -> n.Expr:
    """A new register (outside loops) or tape holding ``e`` at ``p``, and its read in reverse."""
    base = _tape_name(e)
    if not loops:
        name = st.names.fresh(base + "_saved")
        st.top_decls.append(n.Decl(name, e.type))
        st.before.setdefault(p, []).append(n.Assign(name, e, loc=e.loc))
        note(st, ("tape", name), Caching(what, e.loc or loc_at(st, p), "tape", "one register"))
        return n.Var(name, e.type)
    name = st.names.fresh(base + "_tape")
    shape = tuple(b.const(bound, I32) if isinstance(bound, int) else bound for bound in bounds)
    st.tapes.append(n.Buffer(name, e.type, shape, "local"))
    fwd = tuple(_forward_index(st, loop) for loop in loops)
    st.before.setdefault(p, []).append(n.Store(name, fwd, e, loc=e.loc))
    dims = ''.join(f'[{x if isinstance(x, int) else format_expr(x)}]' for x in bounds)
    if all(isinstance(x, int) for x in bounds):
        detail = f"{size} elements per thread ({name}{dims})"
    else:
        detail = f"sized at launch from the arguments ({name}{dims} per thread)"
    note(st, ("tape", name), Caching(what, e.loc or loc_at(st, p), "tape", detail))
    return n.Load(name, tuple(n.Var(st.ctx[loop].index, I32) for loop in loops), e.type)


def _forward_index(st: ReverseState, loop: StmtPath) -> n.Expr:
    """The iteration number inside ``loop`` in the forward sweep (i32).

    A ``for`` loop's is a function of its variable, ``(v - start) / step``, where the reverse
    sweep's iteration ``i`` is the one with ``v == start + i * step`` (``sweeps._rev_loop``):
    with constant start and step, and also where ``step`` is at least 1 at every launch (a
    positive constant or a product of launch dimensions, ``launch_positive``: ``c +=
    blockDim.x``) and ``start`` reads nothing the loop writes and no memory, so that it has its
    value on entry in every iteration (``c = threadIdx.x``), and the counter is signed (its
    ``+= step`` does not wrap in a defined CUDA program, as the reverse sweep's ``start + i *
    step`` assumes). Computed in 64 bits, the difference is exact and the quotient is ``i``.
    Other loops count their iterations (``counter``): a counter carried from one iteration to
    the next, which the CPU schedule keeps per thread (``m_tape[c_count - 1]``, a scatter),
    where the closed form is a vector store."""
    s = st.prog.stmt(loop)
    if isinstance(s, n.For) and isinstance(s.start, n.Const) and isinstance(s.step, n.Const):
        e: n.Expr = b.sub(n.Var(s.var, s.vtype), s.start)
        e = b.div(e, s.step)
        return b.cast(I32, e)
    if isinstance(s, n.For) and s.vtype.is_signed and s.vtype.bits <= 64 and _invariant_start(st, loop, s) and (
            (isinstance(s.step, n.Const) and int(s.step.value) > 0) or launch_positive(s.step, s.vtype)):
        diff = n.Binary("sub", b.cast(I64, n.Var(s.var, s.vtype)), b.cast(I64, s.start))
        return b.cast(I32, n.Binary("div", diff, b.cast(I64, s.step)))
    return n.Binary("sub", n.Var(counter(st, loop), I32), b.const(1, I32))


def _invariant_start(st: ReverseState, loop: StmtPath, s: n.For) -> bool:
    """Whether ``s.start``, evaluated anywhere in the loop's body, has its value on entry: it
    reads no local the loop writes or declares and no memory (and calls nothing)."""
    written = st.prog.written_in(loop) | {s.var}
    for x in walk(s.start):
        if isinstance(x, (n.Load, n.Call)) or (isinstance(x, n.Var) and x.name in written):
            return False
        if not isinstance(x, (n.Var, n.Const, n.Cast, n.Binary, n.Unary, n.ThreadIdx, n.BlockIdx, n.BlockDim,
                              n.GridDim)):
            return False
    return True


def counter(st: ReverseState, loop: StmtPath) -> str:
    """An iteration counter for ``loop`` in the forward sweep (incremented at the body start)."""
    name = st.counters.get(loop)
    if name is None:
        name = st.names.fresh(loop_base(st.prog.stmt(loop)) + "_count")
        st.counters[loop] = name
        st.top_decls.append(n.Decl(name, I32))
        st.before.setdefault(loop, []).append(n.Assign(name, b.const(0, I32)))
        st.loop_prologue.setdefault(loop, []).insert(
            0, n.Assign(name, n.Binary("add", n.Var(name, I32), b.const(1, I32))))
    return name


def _tape_name(e: n.Expr) -> str:
    if isinstance(e, n.Var):
        return e.name
    if isinstance(e, n.Load):
        return e.buffer
    return "value"


# ---------------------------------------------------------------------- tapes sized at launch
#
# A tape of a loop whose trip count is a function of the kernel's arguments has that function as
# its extent (``local x_tape: f64[max(steps, 0)]``). Before a launch the driver evaluates it
# (``tape_extents``) and runs a copy of the kernel with constant extents (``size_tapes``):
# rounded up to a power of two, so that nearby trip counts share one compiled kernel.


def runtime_tapes(kernel: n.Kernel) -> tuple[n.Buffer, ...]:
    """The per-thread buffers of ``kernel`` whose extents depend on its arguments."""
    return tuple(buf for buf in kernel.buffers if buf.space == "local" and buf.shape is not None
                 and not all(isinstance(d, n.Const) for d in buf.shape))


def tape_extents(kernel: n.Kernel, grid: tuple[int, ...], block: tuple[int, ...],
                 scalars: dict[str, object]) -> dict[str, tuple[int, ...]]:
    """The extents each argument-sized buffer of ``kernel`` needs for a launch (by name)."""
    out = {}
    for buf in runtime_tapes(kernel):
        out[buf.name] = tuple(max(1, _extent(kernel, d, grid, block, scalars, buf)) for d in buf.shape or ())
    return out


def _extent(kernel: n.Kernel, d: n.Expr, grid, block, scalars: dict[str, object], buf: n.Buffer) -> int:
    if not any(isinstance(x, (n.ThreadIdx, n.BlockIdx)) for x in walk(d)):
        return int(_evaluate(d, grid, block, scalars, buf))
    from polypy.poly.trips import max_over_threads  # the longest run over the launch's threads

    types = {p.name: p.ptype for p in kernel.params if not isinstance(p.ptype, PointerType)}
    got = max_over_threads(d, grid, block, scalars, types)
    if got is None:
        raise UserError(f"the extent of tape {buf.name!r} ({format_expr(d)}) cannot be bounded over the threads of "
                        f"this launch", buf.loc)
    return got


def size_tapes(kernel: n.Kernel, extents: dict[str, tuple[int, ...]]) -> n.Kernel:
    """``kernel`` with the named buffers given constant extents."""
    buffers = tuple(dataclasses.replace(buf, shape=tuple(b.const(x, I32) for x in extents[buf.name]))
                    if buf.name in extents else buf for buf in kernel.buffers)
    return dataclasses.replace(kernel, buffers=buffers)


def uniform_extents(kernel: n.Kernel) -> n.Kernel:
    """``kernel`` with each tape extent that reads ``threadIdx``/``blockIdx`` replaced by a bound
    that holds for every thread (interval arithmetic over the index ranges): for backends that
    size per-thread arrays once per launch (the C/OpenMP code)."""
    buffers = []
    for buf in kernel.buffers:
        if buf in runtime_tapes(kernel) and any(isinstance(x, (n.ThreadIdx, n.BlockIdx)) for d in buf.shape or ()
                                                for x in walk(d)):
            shape = []
            for d in buf.shape or ():
                hi = _interval(d)[1] if any(isinstance(x, (n.ThreadIdx, n.BlockIdx)) for x in walk(d)) else d
                if hi is None:
                    raise UserError(f"the extent of tape {buf.name!r} ({format_expr(d)}) has no bound that holds "
                                    f"for every thread", buf.loc)
                shape.append(hi)
            buf = dataclasses.replace(buf, shape=tuple(shape))
        buffers.append(buf)
    return dataclasses.replace(kernel, buffers=tuple(buffers))


def _interval(e: n.Expr) -> tuple[n.Expr | None, n.Expr | None]:
    """(lowest, highest) value of integer ``e`` over the threads of a launch, as expressions of the
    arguments and launch dimensions (None: unknown)."""
    if isinstance(e, (n.Const, n.Var, n.BlockDim, n.GridDim)):
        return e, e
    if isinstance(e, (n.ThreadIdx, n.BlockIdx)):
        extent = n.BlockDim(e.dim) if isinstance(e, n.ThreadIdx) else n.GridDim(e.dim)
        return b.zero(e.type), n.Binary("sub", extent, b.one(e.type))
    if isinstance(e, n.Cast) and e.to.is_int and e.x.type.is_int:
        lo, hi = _interval(e.x)
        return (None if lo is None else b.cast(e.to, lo)), (None if hi is None else b.cast(e.to, hi))
    if isinstance(e, n.Binary) and e.op in ("add", "sub") and e.type.is_signed:
        (alo, ahi), (blo, bhi) = _interval(e.a), _interval(e.b)
        if e.op == "add":
            return _both("add", alo, blo), _both("add", ahi, bhi)
        return _both("sub", alo, bhi), _both("sub", ahi, blo)
    if isinstance(e, n.Binary) and e.op in ("mul", "div") and isinstance(e.b, n.Const) and e.b.value > 0 \
            and e.type.is_signed:
        lo, hi = _interval(e.a)
        return _both(e.op, lo, e.b), _both(e.op, hi, e.b)
    if isinstance(e, n.Binary) and e.op == "div" and e.type.is_signed and launch_positive(e.b, e.type):
        # C's division truncates toward zero: by a divisor >= 1 that is the same for every thread
        # (a launch dimension: the trip count of a block-strided loop), it never decreases
        lo, hi = _interval(e.a)
        return _both("div", lo, e.b), _both("div", hi, e.b)
    if isinstance(e, n.Select):
        # the larger of both branches is an upper bound, the smaller a lower one
        (alo, ahi), (blo, bhi) = _interval(e.a), _interval(e.b)
        lo = None if alo is None or blo is None else b.select(b.cmp("lt", alo, blo), alo, blo)
        hi = None if ahi is None or bhi is None else b.select(b.cmp("gt", ahi, bhi), ahi, bhi)
        return lo, hi
    return None, None


def _both(op: str, x: n.Expr | None, y: n.Expr | None) -> n.Expr | None:
    return None if x is None or y is None else n.Binary(op, x, y)


def capacity(extent: int) -> int:
    """The extent a launch needing ``extent`` elements is compiled with (the next power of two)."""
    return 1 << max(0, extent - 1).bit_length()


def _evaluate(e: n.Expr, grid, block, scalars: dict[str, object], buf: n.Buffer):
    if isinstance(e, n.Const):
        return e.value
    if isinstance(e, n.Var):
        if e.name not in scalars:
            raise UserError(f"the extent of tape {buf.name!r} reads {e.name!r}, which is not a scalar argument",
                            buf.loc)
        return eval_cast(scalars[e.name].item() if hasattr(scalars[e.name], "item") else scalars[e.name],
                         e.vtype, e.vtype)
    if isinstance(e, n.BlockDim):
        return (tuple(block) + (1, 1, 1))[e.dim]
    if isinstance(e, n.GridDim):
        return (tuple(grid) + (1, 1, 1))[e.dim]
    if isinstance(e, n.Cast):
        return eval_cast(_evaluate(e.x, grid, block, scalars, buf), e.x.type, e.to)
    if isinstance(e, n.Unary):
        return eval_unary(e.op, _evaluate(e.x, grid, block, scalars, buf), e.x.type)
    if isinstance(e, n.Binary):
        return eval_binary(e.op, _evaluate(e.a, grid, block, scalars, buf), _evaluate(e.b, grid, block, scalars, buf),
                           e.a.type)
    if isinstance(e, n.Select):
        c = _evaluate(e.cond, grid, block, scalars, buf)
        return _evaluate(e.a if c else e.b, grid, block, scalars, buf)
    if isinstance(e, n.Call) and e.fn in ("min", "max"):
        xs = [_evaluate(a, grid, block, scalars, buf) for a in e.args]
        return min(xs) if e.fn == "min" else max(xs)
    raise UserError(f"the extent of tape {buf.name!r} cannot be evaluated at launch ({format_expr(e)})", buf.loc)

