"""Block windows: where in a read-only buffer one block's accesses fall, as a small box.

For a buffer ``X`` that the kernel only reads, ``block_window(kernel, "X")`` proves (or
refuses) that every element block ``b`` reads lies in a *window*: a box of slots whose
position depends on the block and whose size is bounded independently of the block and of
every scalar argument, only through ``blockDim``::

    index of a read of X     =  coordinate c_d  (one per window dimension)
    c_d                      =  base_d(b) + z_d,   0 <= z_d < extent_d

* one dimension when the index is quasi-affine (``x[g + k]``, ``mask[(dy + 2) * 5 + dx + 2]``);
* two when it is a row-major ``outer * P + inner`` with ``0 <= inner < P`` and ``P`` a
  grid-uniform value (``img[(y + dy) * width + x + dx]``): the coordinates are ``outer`` and
  ``inner``, and distinct coordinate pairs are distinct elements (delinearization).

``base_d(b)`` is linear in the block's position (``blockIdx``, and block values
``blockIdx * c * blockDim``), read off the coordinates isl computes for the accesses; the
range of ``c_d - base_d(b)`` over every access instance of every block of every launch gives
the extent (as an affine function of ``blockDim`` where isl finds one, else a constant).

Neighbouring blocks' windows are shifted copies: along a grid dimension ``e`` that
``base_d`` follows with a positive ``step_d`` (``base_d(b + 1_e) = base_d(b) + step_d``), the
window of block ``b`` and that of any other block differing in ``e`` overlap only in the
slots ``z_d < extent_d - step_d`` or ``z_d >= step_d``. So a slot with ``extent_d - step_d <=
z_d < step_d`` for some such ``d`` along every grid dimension in use is touched by no other
block (``Window.exclusive`` says whether every grid dimension in use is followed).

The coordinates are found by a syntactic split of the index (as ``model._delinearize`` does,
also counting a bare ``P`` as ``1 * P``: ``y * nx + x - nx`` is ``(y - 1) * nx + x``); the
split is checked by building the model of the kernel with every read of ``X`` rewritten as
``outer * P + inner``, so isl both computes and verifies it. Everything handed out is IR.
"""
from __future__ import annotations

import dataclasses
import itertools

import islpy as isl

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.queries import buffers_written, written_names
from polypy.ir.rewrite import int_add, int_scale, signed_terms
from polypy.ir.types import I64, PointerType, ScalarType
from polypy.ir.visitor import Mutator, walk, walk_only
from polypy.poly.affine import _val, expression_key
from polypy.poly.model import BLOCK_DIM, BLOCK_IDX, MAX_BLOCK_DIM, THREAD_IDX, Model, build_model
from polypy.poly.paths import StmtPath, edit_statements, statement_at
from polypy.poly.relations import Copies

# Slots of one window at most (elements of shared memory per block, per privatized buffer).
WINDOW_LIMIT = 2048


@dataclasses.dataclass(frozen=True)
class WindowDim:
    """One dimension of a window; every expression is ``i64`` and block-uniform."""

    base: n.Expr  # the coordinate of slot 0 in the current block
    extent: n.Expr  # slots along this dimension (depends on the launch's blockDim at most)
    max_extent: int  # its largest value over every launch within CUDA's limits
    step: n.Expr | None  # base(next block along grid_dim) - base(this block), > 0; None: no such step
    grid_dim: int | None
    extent_linear: tuple[dict[str, int], int] = dataclasses.field(default=({}, 1), compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class Window:
    buffer: str
    dims: tuple[WindowDim, ...]  # 1 (quasi-affine index) or 2 (outer, inner of outer * P + inner)
    factor: n.Expr | None  # P
    exclusive: bool  # every grid dimension in use is followed by a dimension with a step
    grid_dims: tuple[int, ...]  # grid dimensions that may have more than one block
    repeats: bool  # some element may be read by two access instances of one block

    @property
    def max_slots(self) -> int:
        total = 1
        for d in self.dims:
            total *= d.max_extent
        return total

    def coordinates(self, index: tuple[n.Expr, ...]) -> tuple[n.Expr, ...]:
        """The window coordinates of a read ``X[index]`` of the buffer (IR, in the index's type)."""
        (e,) = index
        if self.factor is None:
            return (e,)
        split = split_index(e, expression_key(self.factor))
        if split is None:
            raise ValueError(f"index of {self.buffer} does not split as outer * P + inner")
        _, outer, inner = split
        return outer, inner

    def element(self, coords: tuple[n.Expr, ...]) -> n.Expr:
        """The (i64) index of the element with window coordinates ``coords`` (i64)."""
        if self.factor is None:
            return coords[0]
        return n.Binary("add", n.Binary("mul", coords[0], _i64(self.factor)), coords[1])


def block_window(kernel: n.Kernel, buffer: str) -> Window | str:
    """The window of the read-only pointer parameter ``buffer``, or why there is none."""
    return _window(kernel, buffer, None)


@dataclasses.dataclass(frozen=True)
class Chunk:
    """``trips`` consecutive iterations of a serial ``for`` loop: those whose loop variable lies
    in ``[first, first + trips * step)``; ``first`` is a block-uniform value the caller names."""

    loop: StmtPath  # the loop in the kernel
    trips: int
    first: str  # the name of the i64 variable holding the chunk's first loop-variable value


def chunk_window(kernel: n.Kernel, buffer: str, chunk: Chunk) -> Window | str:
    """The window of the reads of ``buffer`` in one chunk of a serial loop (*a tile along the
    loop*), or why there is none.

    Every read of ``buffer`` must lie in the loop (``for (k = s; k < e; k += c)``, ``c > 0`` a
    constant). The window is the one of the kernel whose loop body runs only where ``first <=
    k < first + trips * c``, with ``first`` a new integer parameter: isl bounds what one block
    reads in any such chunk, for every value of ``first``. A coordinate ``a * k + ...`` then
    has its slot 0 at ``a * first`` plus the block's position (``WindowDim.base`` reads the
    variable ``chunk.first``), so a caller running the iterations of one chunk at a time (a
    reverse sweep, backwards) sets ``first`` to the chunk's smallest loop-variable value and
    has a window of ``trips``-bounded size however long the loop runs.
    """
    p = kernel.param(buffer)
    if p is None or not isinstance(p.ptype, PointerType):
        return f"{buffer} is not a pointer parameter"
    try:
        loop = statement_at(kernel, chunk.loop)
    except (IndexError, KeyError):
        loop = None
    if not (isinstance(loop, n.For) and isinstance(loop.step, n.Const) and loop.step.value > 0):
        return "the chunked loop is not a for loop with a constant positive step"
    inside = sum(1 for x in walk(loop) if isinstance(x, n.Load) and x.buffer == buffer)
    if inside != sum(1 for x in walk(kernel) if isinstance(x, n.Load) and x.buffer == buffer):
        return f"{buffer} is also read outside the loop"
    if loop.var in written_names(loop.body):
        return "the loop body assigns the loop variable"
    k = n.Cast(I64, n.Var(loop.var, loop.vtype)) if loop.vtype != I64 else n.Var(loop.var, I64)
    first = n.Var(chunk.first, I64)
    last = n.Binary("add", first, n.Const(chunk.trips * int(loop.step.value), I64))
    guard = n.Binary("land", n.Binary("ge", k, first), n.Binary("lt", k, last))
    guarded = dataclasses.replace(loop, body=(n.If(guard, loop.body),))
    kernel = edit_statements(kernel, {chunk.loop: lambda s: (guarded,)})
    kernel = dataclasses.replace(kernel, params=kernel.params + (n.Param(chunk.first, I64),))
    constant = _constant_factor(kernel, buffer)
    if constant is not None:
        # Rows of a fixed length (gemm's a[i * NK + k]): two coordinates, (i, k), so that a chunk
        # of k and the block's rows make a small box, where the flat index would span whole rows.
        # isl sees the row length as a parameter ``P`` to delinearize; nothing needs 0 <= k < P:
        # a slot's element is outer * P + inner whatever the parts, and the flush is atomic.
        split = _window(_symbolic_factor(kernel, buffer, constant, chunk.first + "_p"), buffer,
                        (loop.var, chunk.first), any_inner=True)
        if isinstance(split, Window):
            return dataclasses.replace(split, factor=constant)
    return _window(kernel, buffer, (loop.var, chunk.first))


def _constant_factor(kernel: n.Kernel, buffer: str) -> n.Const | None:
    """The constant ``P > 1`` that every read of ``buffer`` multiplies one non-constant term by."""
    found: set[tuple[int, ScalarType]] = set()
    for x in walk(kernel):
        if not (isinstance(x, n.Load) and x.buffer == buffer):
            continue
        e = x.index[0]
        if not (e.type.is_int and e.type.is_signed):
            return None
        consts = set()
        for _, term in signed_terms(e, 1):
            factors = _factors(term)
            if len(factors) > 1 and any(not isinstance(f, n.Const) for f in factors):
                consts |= {(int(f.value), f.type) for f in factors if isinstance(f, n.Const) and int(f.value) > 1}
        if len(consts) != 1:
            return None
        found |= consts
    if len(found) != 1:
        return None
    value, ty = found.pop()
    return n.Const(value, ty)


def _symbolic_factor(kernel: n.Kernel, buffer: str, constant: n.Const, name: str) -> n.Kernel:
    """``kernel`` with ``constant`` in the reads of ``buffer`` replaced by a new integer parameter."""
    class Symbolic(Mutator):
        def visit_Load(self, e: n.Load) -> n.Expr:
            if e.buffer != buffer:
                return self.generic_visit(e)
            return dataclasses.replace(e, index=(_Replace().visit(e.index[0]),))

    class _Replace(Mutator):
        def visit_Const(self, e: n.Const) -> n.Expr:
            return n.Var(name, e.type) if e == constant else e

    kernel = Symbolic().visit(kernel)
    return dataclasses.replace(kernel, params=kernel.params + (n.Param(name, constant.type),))


def _window(kernel: n.Kernel, buffer: str, chunk: tuple[str, str] | None, *, any_inner: bool = False
            ) -> Window | str:
    """``block_window``; with ``chunk`` = (loop dimension, parameter), slot 0 also moves with the
    parameter as the coordinates move with the loop dimension (``chunk_window``). ``any_inner``:
    a split ``outer * P + inner`` is taken without a proof of ``0 <= inner < P`` (two slots may
    then hold one element, so the window is never exclusive)."""
    p = kernel.param(buffer)
    if p is None or not isinstance(p.ptype, PointerType):
        return f"{buffer} is not a pointer parameter"
    if buffer in buffers_written(kernel):
        return f"the kernel writes {buffer}"
    loads = [x for x in walk_only(kernel, n.Load) if x.buffer == buffer]
    if not loads:
        return f"the kernel does not read {buffer}"
    mutable = written_names(kernel)
    splits = [split_index(x.index[0], None, kernel=kernel, mutable=mutable) for x in loads]
    keys = {s[0] if s is not None else None for s in splits}
    if len(keys) != 1:
        return f"the reads of {buffer} do not share one row-major form outer * P + inner"
    key = keys.pop()
    factor = None
    if key is not None:
        factor = next(_factor_named(x.index[0], key) for x in loads)
        kernel = _Canonical(buffer, key).visit(kernel)
    try:
        model = build_model(kernel)
    except UserError as exc:  # unsupported input: no proof (any other failure is a bug: raised)
        return f"no model ({exc})"
    coords: list[list[tuple[isl.PwAff, isl.Set]]] = [[] for _ in range(1 if key is None else 2)]
    for a in model.accesses_of(buffer):
        if key is None:
            if a.elems[0] is None:
                return f"isl cannot express the index {a.text}"
            coords[0].append((a.elems[0], a.domain))
            continue
        delin = a.delin[0] if a.delin else None
        if delin is None or delin.factor != key or (delin.valid is not None and not any_inner):
            return f"isl cannot prove 0 <= inner < P for the index {a.text}"
        coords[0].append((delin.outer, a.domain))
        coords[1].append((delin.inner, a.domain))
    if chunk is not None:
        if chunk[0] not in model.dims:
            return "isl does not model the chunked loop's variable exactly"
        if not _shared_by_threads(model, coords):
            return ("an index moves with every thread index: the threads of a block read different elements "
                    "of a chunk, so a window would save few atomics")
    dims = []
    for pieces in coords:
        dim = _window_dim(model, pieces, chunk)
        if isinstance(dim, str):
            return dim
        dims.append(dim)
    grid_dims = tuple(model.block_dims)
    covered = {d.grid_dim for d in dims if d.step is not None}
    least = 1
    for d in dims:
        least *= _value_at(d.extent_linear, 1)
    if least > WINDOW_LIMIT:
        return f"the window of {buffer} in one block is not bounded by a small function of blockDim"
    return Window(buffer, tuple(dims), factor, all(e in covered for e in grid_dims) and not any_inner, grid_dims,
                  _repeats(model, buffer))


def _shared_by_threads(model: Model, coords: list[list[tuple[isl.PwAff, isl.Set]]]) -> bool:
    """Whether every access has a thread dimension in use that moves none of its coordinates:
    the threads along it read the same elements (gemm's ``a[i * NK + k]`` for every ``threadIdx.x``)."""
    for i in range(len(coords[0])):
        moving: set[int] = set()
        for pieces in coords:
            for _, aff in pieces[i][0].get_pieces():
                for d in model.thread_dims:
                    if not aff.get_coefficient_val(isl.dim_type.in_, model.dims.index(THREAD_IDX[d])).is_zero():
                        moving.add(d)
        if all(d in moving for d in model.thread_dims):
            return False
    return True


def _repeats(model: Model, buffer: str) -> bool:
    """Whether two different access instances of one block may read the same element."""
    c = Copies(model, ("1", "2"))
    accesses = model.accesses_of(buffer)
    instance_dims = [d for d in model.dims if d not in c.block_level]
    for i, a in enumerate(accesses):
        for b in accesses[i:]:
            same = c.same_element(a, "1", b, "2")
            if same is None:
                return True
            s = c.domain(a, "1") & c.domain(b, "2") & c.same_block("1", "2") & same
            if a is b:
                differ = c.empty
                for d in instance_dims:
                    x, y = c.dim(d, "1"), c.dim(d, "2")
                    differ = differ | x.lt_set(y) | x.gt_set(y)
                s &= differ
            if not s.is_empty():
                return True
    return False


# ---------------------------------------------------------------------------------------- syntax


def split_index(e: n.Expr, key: str | None, *, kernel: n.Kernel | None = None,
                mutable: set[str] | None = None) -> tuple[str | None, n.Expr, n.Expr] | None:
    """``e`` as ``(key of P, outer, inner)`` with ``e == outer * P + inner`` (signed arithmetic),
    ``(None, 0, e)`` when no term has a grid-uniform non-constant factor; None if ``e`` does
    not split with the factor ``key`` (when given).

    Without ``key``, ``P`` is the first grid-uniform, non-constant factor of a term that also
    has a thread- or block-dependent factor.
    """
    ty = e.type
    if not (ty.is_int and ty.is_signed):
        return (None, n.Const(0, ty), e) if key is None else None
    terms = signed_terms(e, 1)
    if key is None:
        for _, term in terms:
            factors = _factors(term)
            uniform = [f for f in factors if _grid_uniform(f, kernel, mutable) and not isinstance(f, n.Const)]
            if uniform and len(uniform) < len(factors) and any(not isinstance(f, n.Const) for f in factors
                                                               if f not in uniform):
                key = expression_key(uniform[0])
                break
        if key is None:
            return None, n.Const(0, ty), e
    outer: n.Expr | None = None
    inner: n.Expr | None = None
    for sign, term in terms:
        factors = _factors(term)
        hit = next((i for i, f in enumerate(factors) if expression_key(f) == key), None)
        if hit is None:
            inner = _accumulate(inner, sign, term)
            continue
        rest = factors[:hit] + factors[hit + 1:]
        x: n.Expr = n.Const(1, ty)
        for f in rest:
            x = f if isinstance(x, n.Const) and x.value == 1 else n.Binary("mul", x, f)
        outer = _accumulate(outer, sign, x)
    if outer is None:
        return None
    return key, outer, inner if inner is not None else n.Const(0, ty)


def _accumulate(total: n.Expr | None, sign: int, term: n.Expr) -> n.Expr:
    if total is None:
        return term if sign > 0 else n.Unary("neg", term)
    return n.Binary("add" if sign > 0 else "sub", total, term)


def _factors(e: n.Expr) -> list[n.Expr]:
    if isinstance(e, n.Binary) and e.op == "mul" and e.type == e.a.type == e.b.type:
        return _factors(e.a) + _factors(e.b)
    return [e]


def _grid_uniform(e: n.Expr, kernel: n.Kernel | None, mutable: set[str] | None) -> bool:
    for x in walk(e):
        if isinstance(x, (n.ThreadIdx, n.BlockIdx, n.Load)):
            return False
        if isinstance(x, n.Var):
            if kernel is None:
                return False
            p = kernel.param(x.name)
            if p is None or isinstance(p.ptype, PointerType) or (mutable is not None and x.name in mutable):
                return False
    return True


def _factor_named(e: n.Expr, key: str) -> n.Expr:
    for _, term in signed_terms(e, 1):
        for f in _factors(term):
            if expression_key(f) == key:
                return f
    raise ValueError(key)


class _Canonical(Mutator):
    """Every read of ``buffer`` with its index written ``outer * P + inner``."""

    def __init__(self, buffer: str, key: str):
        self.buffer = buffer
        self.key = key

    def visit_Load(self, e: n.Load) -> n.Expr:
        e = self.generic_visit(e)
        if e.buffer != self.buffer:
            return e
        split = split_index(e.index[0], self.key)
        if split is None:
            return e
        _, outer, inner = split
        factor = _factor_named(e.index[0], self.key)
        return dataclasses.replace(e, index=(n.Binary("add", n.Binary("mul", outer, factor), inner),))


# ---------------------------------------------------------------------------------------- isl


def _window_dim(model: Model, pieces: list[tuple[isl.PwAff, isl.Set]],
                chunk: tuple[str, str] | None = None) -> WindowDim | str:
    """Base, extent and step of one coordinate over all its access instances (``chunk``: see ``_window``)."""
    block_level = [d for d in BLOCK_IDX if d in model.dims] + [bv.name for bv in model.block_values]
    first_aff = pieces[0][0].get_pieces()[0][1]
    coefs: dict[str, int] = {}
    for name in block_level:
        val = first_aff.get_coefficient_val(isl.dim_type.in_, model.dims.index(name))
        if not val.is_int():
            return "the window position is not integral in the block index"
        if int(val.to_python()) != 0:
            coefs[name] = int(val.to_python())
    along = 0  # the coordinate's coefficient on the chunked loop's variable
    if chunk is not None:
        val = first_aff.get_coefficient_val(isl.dim_type.in_, model.dims.index(chunk[0]))
        if not val.is_int():
            return "the window position is not integral in the loop variable"
        along = int(val.to_python())
    ls = isl.LocalSpace.from_space(model.space)
    values: isl.Set | None = None
    for pa, dom in pieces:
        offset = pa
        for name, c in coefs.items():
            var = isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, model.dims.index(name)))
            offset = offset - var * _val(c)
        if along:
            first = offset.get_domain_space().find_dim_by_name(isl.dim_type.param, chunk[1])
            if first < 0:
                return "the chunk's first value is not a parameter of the model"
            offset = offset - isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.param, first)) * _val(along)
        s = isl.Map.from_pw_aff(offset.intersect_domain(dom)).range()
        values = s if values is None else values.union(s)
    assert values is not None
    values = values.coalesce()
    if values.is_empty():
        return "no access instance"
    everything = values.project_out_all_params()
    lo_val, hi_val = everything.dim_min_val(0), everything.dim_max_val(0)
    if not (lo_val.is_int() and hi_val.is_int()):
        return "the window of one block is not bounded independently of the scalar arguments"
    by_block_dim = _keep_params(values, set(BLOCK_DIM))
    context = _block_dim_box(by_block_dim.space)
    lo = _affine_bound(by_block_dim, context, lower=True) or ({}, int(lo_val.to_python()))
    hi = _affine_bound(by_block_dim, context, lower=False) or ({}, int(hi_val.to_python()))
    extent = ({k: hi[0].get(k, 0) - lo[0].get(k, 0) for k in set(hi[0]) | set(lo[0])}, hi[1] - lo[1] + 1)
    max_extent = _max_over_box(extent)
    if max_extent is None or max_extent < 1:
        return "the window has no bounded size"
    base: n.Expr | None = None
    step = grid_dim = None
    for name, c in coefs.items():
        term, this_step, this_dim = _block_term(model, name, c)
        if term is None:
            return f"the window position depends on {name}, which is not blockIdx * c * blockDim"
        base = term if base is None else n.Binary("add", base, term)
        if len(coefs) == 1 and c > 0:
            step, grid_dim = this_step, this_dim
    if along:
        term = int_scale(n.Var(chunk[1], I64), along)
        base = term if base is None else n.Binary("add", base, term)
    lo_ir = _linear_ir(lo)
    if base is None:
        base = lo_ir
    elif not (isinstance(lo_ir, n.Const) and lo_ir.value == 0):
        base = n.Binary("add", base, lo_ir) if not (isinstance(lo_ir, n.Const) and lo_ir.value < 0) \
            else n.Binary("sub", base, n.Const(-lo_ir.value, I64))
    return WindowDim(base, _linear_ir(extent), max_extent, step, grid_dim, extent)


def _block_term(model: Model, name: str, c: int) -> tuple[n.Expr | None, n.Expr | None, int | None]:
    """``c * name`` in IR (i64), the step between neighbouring blocks and the grid dimension."""
    if name in BLOCK_IDX:
        d = BLOCK_IDX.index(name)
        step: n.Expr = n.Const(c, I64)
        return int_scale(n.Cast(I64, n.BlockIdx(d)), c), step, d
    bv = next(bv for bv in model.block_values if bv.name == name)
    if bv.stride is None:
        return None, None, None
    d, e, k = bv.stride
    step = int_scale(n.Cast(I64, n.BlockDim(e)), c * k)
    return n.Binary("mul", n.Cast(I64, n.BlockIdx(d)), step), step, d


def _keep_params(s: isl.Set, keep: set[str]) -> isl.Set:
    for i in range(s.dim(isl.dim_type.param) - 1, -1, -1):
        if s.get_dim_name(isl.dim_type.param, i) not in keep:
            s = s.project_out(isl.dim_type.param, i, 1)
    return s


def _block_dim_box(space: isl.Space) -> isl.Set:
    ctx = isl.Set.universe(space.params())
    for i in range(ctx.dim(isl.dim_type.param)):
        name = ctx.get_dim_name(isl.dim_type.param, i)
        limit = MAX_BLOCK_DIM[BLOCK_DIM.index(name)]
        ctx = ctx.lower_bound_val(isl.dim_type.param, i, _val(1)).upper_bound_val(isl.dim_type.param, i,
                                                                                          _val(limit))
    return ctx


Linear = tuple[dict[str, int], int]  # sum of coefficient * blockDim.d, plus a constant


def _affine_bound(values: isl.Set, context: isl.Set, *, lower: bool) -> Linear | None:
    """An affine function of ``blockDim`` bounding ``values`` on the given side for every
    ``blockDim`` in ``context``: one of the pieces of the exact bound that bounds all the others."""
    bound = values.dim_min(0) if lower else values.dim_max(0)
    candidates = []
    for _, aff in bound.get_pieces():
        linear = _linear(aff)
        if linear is not None:
            candidates.append(linear)
    valid = []
    for linear in candidates:
        cand = _pw_aff(linear, bound.get_domain_space())
        if cand is None:
            continue
        wrong = bound.lt_set(cand) if lower else bound.gt_set(cand)
        if (wrong & context).is_empty():
            valid.append(linear)
    if not valid:
        return None
    # The tightest for large blocks (several pieces may bound the others: B + 2 and 2B - 1 for B >= 3).
    def at_large_blocks(linear: Linear) -> int:
        return linear[1] + sum(c * MAX_BLOCK_DIM[BLOCK_DIM.index(k)] for k, c in linear[0].items())
    return max(valid, key=at_large_blocks) if lower else min(valid, key=at_large_blocks)


def _linear(aff: isl.Aff) -> Linear | None:
    if aff.dim(isl.dim_type.div) != 0:
        return None
    coefs = {}
    for i in range(aff.dim(isl.dim_type.param)):
        val = aff.get_coefficient_val(isl.dim_type.param, i)
        if not val.is_int():
            return None
        if int(val.to_python()) != 0:
            coefs[aff.get_dim_name(isl.dim_type.param, i)] = int(val.to_python())
    const = aff.get_constant_val()
    if not const.is_int():
        return None
    return coefs, int(const.to_python())


def _pw_aff(linear: Linear, space: isl.Space) -> isl.PwAff | None:
    ls = isl.LocalSpace.from_space(space)
    aff = isl.Aff.zero_on_domain(ls) + _val(linear[1])
    for name, c in linear[0].items():
        pos = space.find_dim_by_name(isl.dim_type.param, name)
        if pos < 0:
            return None
        aff = aff + isl.Aff.var_on_domain(ls, isl.dim_type.param, pos) * _val(c)
    return isl.PwAff.from_aff(aff)


def _max_over_box(linear: Linear) -> int | None:
    coefs, const = linear
    names = list(coefs)
    best = None
    for corner in itertools.product(*[(1, MAX_BLOCK_DIM[BLOCK_DIM.index(k)]) for k in names]):
        value = const + sum(coefs[k] * v for k, v in zip(names, corner))
        best = value if best is None else max(best, value)
    return best


def _value_at(linear: Linear, block_dim: int) -> int:
    return linear[1] + sum(c * block_dim for c in linear[0].values())


def _linear_ir(linear: Linear) -> n.Expr:
    coefs, const = linear
    out: n.Expr | None = None
    for name, c in sorted(coefs.items()):
        term = int_scale(n.Cast(I64, n.BlockDim(BLOCK_DIM.index(name))), c)
        out = term if out is None else n.Binary("add", out, term)
    return n.Const(const, I64) if out is None else int_add(out, n.Const(const, I64))


def _i64(e: n.Expr) -> n.Expr:
    return e if e.type == I64 else n.Cast(I64, e)

