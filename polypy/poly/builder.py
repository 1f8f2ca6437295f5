"""Building the polyhedral model of one kernel (see ``polypy.poly.model`` for what is built):
a pre-scan of uses and loops, the instance space, a walk over the statements that records
domains, schedules and accesses; it restarts when the space needs another dimension."""
from __future__ import annotations

import dataclasses

import islpy as isl

from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.jumps import escape_kinds, jumps_out
from polypy.ir.printer import ExprFormatter, format_expr
from polypy.ir.queries import written_names
from polypy.ir.types import ScalarType
from polypy.ir.visitor import walk, walk_only
from polypy.poly.affine import Converter, _val, expression_key
from polypy.poly.delinearize import delinearize
from polypy.poly.base_domain import base_domain
from polypy.poly.held import held_index, held_pools, held_text
from polypy.poly.index_shapes import (block_factor, block_stride, is_grid_stride, last_block_product, linear_block_stride,
                                      wrapping_block_factor)
from polypy.poly.instances import Access, Barrier, BlockValue, Loop, Model, Stride
from polypy.poly.paths import AccessId, StmtPath, child_blocks, statement_accesses
from polypy.poly.space import (
    BLOCK_DIM, BLOCK_IDX, CTX, GRID_DIM, THREAD_IDX, Launch,
)
from polypy.poly.uniformity import Uniformity

EXACT, CUT, INEXACT = 2, 1, 0
# ``build_model(constants=True)`` (the race warnings) models a loop of a grid-uniform step that is
# not a constant by its first trips only (``_loop``).
FIRST_TRIPS = 3


class _Restart(Exception):
    """The instance space needs another dimension; build again with it."""


@dataclasses.dataclass
class _State:
    """What persists between restarts of one build."""

    block_values: dict[str, BlockValue] = dataclasses.field(default_factory=dict)
    abstract_fors: set[StmtPath] = dataclasses.field(default_factory=set)
    block_exprs: dict[str, n.Expr] = dataclasses.field(default_factory=dict)


class _Builder:
    def __init__(self, kernel: n.Kernel, launch: Launch | None, state: _State, constants: bool = False):
        self.kernel = kernel
        self.constants = constants  # ``build_model(constants=True)``: see ``polypy.poly.uniformity``
        self.launch = launch
        self.state = state
        self.mutable = written_names(kernel.body)
        self.params = {p.name: p for p in kernel.params}
        self.assumptions: list[str] = []
        self.uniform_params: dict[str, str] = {}
        self.uniform_exprs: dict[str, n.Expr] = {}
        self.guard_params: set[str] = set()  # uniform parameters a no-wrap guard of a block factor names
        self.wrapped_locals: set[str] = set()  # locals bound to a value that wraps (``wrapped_operand``)
        self.kernel_expr = state.block_exprs
        self.strides: list[Stride] = []
        self.bound: dict[str, isl.PwAff] = {}
        self.accesses: list[Access] = []
        self.barriers: list[Barrier] = []
        self.loops: list[Loop] = []
        self.local_inits: dict[str, n.Expr] = {}
        self.formatter = ExprFormatter()  # names of uniform values: every level of a chain is named
        self.held = held_pools(kernel)
        self.decl_count: dict[str, int] = {}
        for node in walk_only(kernel, n.Decl):
            self.decl_count[node.name] = self.decl_count.get(node.name, 0) + 1
            if isinstance(node, n.Decl) and node.init is not None and node.name not in self.mutable:
                self.local_inits[node.name] = node.init
        self.uniformity = Uniformity(kernel, self.mutable, self.params, self.local_inits, constants)
        self._scan_uses()
        self._scan_loops()

    # ------------------------------------------------------------------ pre-scan
    def _scan_uses(self) -> None:
        self.thread_used = [False] * 3
        self.block_used = [False] * 3
        for node in walk_only(self.kernel, n.ThreadIdx, n.BlockDim, n.BlockIdx, n.GridDim):
            if isinstance(node, (n.ThreadIdx, n.BlockDim)):
                self.thread_used[node.dim] = True
            elif isinstance(node, (n.BlockIdx, n.GridDim)):
                self.block_used[node.dim] = True
        self.thread_used[0] = self.block_used[0] = True
        if self.launch is None:
            unit = [BLOCK_DIM[d] for d in (1, 2) if not self.thread_used[d]]
            unit += [GRID_DIM[d] for d in (1, 2) if not self.block_used[d]]
            if unit:
                self.assumptions.append(
                    "launch dimensions the kernel never reads are 1 (" + ", ".join(unit) + " == 1)")
            self.assumptions.append("blockDim and gridDim within CUDA limits (blockDim <= (1024, 1024, 64))")

    def _scan_loops(self) -> None:
        self.depth = 0
        taken = {p.name for p in self.kernel.params} | {b.name for b in self.kernel.buffers}
        for node in walk_only(self.kernel, n.Decl, n.For):
            if isinstance(node, n.Decl):
                taken.add(node.name)
            elif isinstance(node, n.For):
                taken.add(node.var)
        self.loop_dim: dict[StmtPath, str] = {}
        count = 0

        def visit(block: tuple[n.Stmt, ...], prefix: StmtPath, field: str, depth: int) -> None:
            nonlocal count
            self.depth = max(self.depth, depth)
            for i, s in enumerate(block):
                path = prefix + ((field, i),)
                if isinstance(s, n.For):
                    name = s.var if path not in self.state.abstract_fors else f"iter({s.var})"
                    self.loop_dim[path] = name
                elif isinstance(s, n.While):
                    count += 1
                    line = f"@{s.loc.line}" if s.loc is not None else str(count)
                    name = f"iter(while{line})"
                    while name in self.loop_dim.values():
                        name += "'"
                    self.loop_dim[path] = name
                for child_field, child in child_blocks(s):
                    visit(child, path, child_field, depth + 1)

        visit(self.kernel.body, (), "body", 0)
        self.time_len = 2 * (self.depth + 1) + 1

    # ------------------------------------------------------------------ space
    def _make_space(self) -> None:
        params: list[str] = []
        if self.launch is None:
            params += [BLOCK_DIM[d] for d in range(3) if self.thread_used[d]]
            params += [GRID_DIM[d] for d in range(3) if self.block_used[d]]
        for p in self.kernel.params:
            if isinstance(p.ptype, ScalarType) and not p.ptype.is_float and p.name not in self.mutable:
                if self.launch is None or self.launch.scalar(p.name) is None:
                    params.append(p.name)
        self.block_value_list = list(self.state.block_values.values())
        dims = list(BLOCK_IDX) + list(THREAD_IDX) + [bv.name for bv in self.block_value_list]
        dims += list(self.loop_dim.values())
        self.dims = tuple(dims)
        self.space = isl.Space.create_from_names(CTX, set=dims, params=params)
        self.affs = isl.affs_from_space(self.space)
        self.conv = Converter(self)
        self.universe = isl.Set.universe(self.space)
        self.empty = isl.Set.empty(self.space)

    def _extent(self, kind: str, d: int) -> isl.PwAff:
        if kind == "block":
            if self.launch is not None:
                return self.conv.const(self.launch.block[d])
            return self.affs[BLOCK_DIM[d]] if self.thread_used[d] else self.conv.const(1)
        if self.launch is not None:
            return self.conv.const(self.launch.grid[d])
        return self.affs[GRID_DIM[d]] if self.block_used[d] else self.conv.const(1)

    # ------------------------------------------------------------------ Scope protocol
    def variable(self, name: str) -> isl.PwAff | None:
        value = self.bound.get(name)
        if value is not None:
            return value
        p = self.params.get(name)
        if p is None or not isinstance(p.ptype, ScalarType) or p.ptype.is_float or name in self.mutable:
            return None
        known = self.launch.scalar(name) if self.launch is not None else None
        if known is not None:
            return self.conv.const(known)
        return self.affs[name]

    def gpu_index(self, e: n.GpuIndex) -> isl.PwAff:
        if isinstance(e, n.ThreadIdx):
            return self.affs[THREAD_IDX[e.dim]]
        if isinstance(e, n.BlockIdx):
            return self.affs[BLOCK_IDX[e.dim]]
        if isinstance(e, n.BlockDim):
            return self._extent("block", e.dim)
        return self._extent("grid", e.dim)

    def _uniformity(self, e: n.Expr, seen: frozenset[str] = frozenset()) -> int:
        """0: varies between threads or over time; 1: grid-uniform; 2: block-uniform (``polypy.poly.uniformity``)."""
        return self.uniformity.level(e, seen)

    def uniform_value(self, e: n.Expr) -> isl.PwAff | None:
        if isinstance(e, (n.Const, n.Var, n.GpuIndex)):
            return None
        level = self._uniformity(e)
        if level == 0:
            return None
        text = self.formatter.format(e)
        key = expression_key(e, text)
        if level == 1:
            self.uniform_params[key] = text
            self.uniform_exprs[key] = e
            return self.universe.param_pw_aff_on_domain_id(isl.Id(key, context=CTX))
        if key in self.affs:
            return self.affs[key]
        block_dims = tuple(sorted({x.dim for x in walk(e) if isinstance(x, n.BlockIdx)}))
        self.state.block_values[key] = BlockValue(key, e.type, block_dims, block_stride(e), linear_block_stride(e))
        self.state.block_exprs[key] = e
        raise _Restart()

    def wrapped_operand(self, e: n.Expr, wrapped: bool) -> isl.PwAff | None:
        """A block value for a block-uniform operand of a comparison whose value wraps (``wrapped``,
        or it reads a local bound to such a value), else None (the converter keeps the value).

        Dwt2d picks its version per block by ``(i32)((blockIdx.x + 1u) * 64u + 1u) >= sx``: over a
        symbolic grid (``gridDim.x`` up to ``2**31 - 1``) the product wraps, and its exact value is
        pieces with floor divisions by ``2**32`` that every question about the version's accesses
        carries. As a block value (one unknown per block, in the operand's type, nothing else known
        of it: no stride) the comparison is one constraint and the version's blocks one piece,
        exactly: the same block has one value, so whatever a question asks within a block holds as
        before; across blocks the model only forgets which blocks run the version (it may pair any
        two), the safe side."""
        if not wrapped and not any(isinstance(x, n.Var) and x.name in self.wrapped_locals for x in walk(e)):
            return None
        if self._uniformity(e) != 2:
            return None
        value = self.local_inits.get(e.name, e) if isinstance(e, n.Var) else e
        key = expression_key(value, self.formatter.format(value))
        if key in self.affs:
            return self.affs[key]
        block_dims = tuple(sorted({x.dim for x in walk(value) if isinstance(x, n.BlockIdx)}))
        self.state.block_values[key] = BlockValue(key, value.type, block_dims, None, None)
        self.state.block_exprs[key] = value
        raise _Restart()

    # ------------------------------------------------------------------ walk
    def build(self) -> Model:
        self._make_space()
        dom = base_domain(self)
        self.context = dom.params()
        self.cut: tuple[str, tuple[str, ...]] | None = None
        self.loop_stack: list[str] = []
        self._block(self.kernel.body, (), "body", 0, dom, EXACT, (), False)
        if self.launch is None and any(bv.stride is not None for bv in self.block_value_list):
            self.assumptions.append("fewer than 2**31 threads per grid dimension "
                                    "(blockIdx * blockDim + blockDim < 2**31)")
        factors = self._block_factors()  # before the alignment: it may add guard parameters
        self._align_params(factors)
        if self.launch is None:
            thread_dims = tuple(d for d in range(3) if self.thread_used[d])
            block_dims = tuple(d for d in range(3) if self.block_used[d])
        else:
            thread_dims = tuple(d for d in range(3) if self.launch.block[d] > 1)
            block_dims = tuple(d for d in range(3) if self.launch.grid[d] > 1)
        return Model(
            thread_dims=thread_dims, block_dims=block_dims, context=self.context.align_params(self.space.params()),
            kernel=self.kernel, launch=self.launch, space=self.space, dims=self.dims,
            block_values=tuple(self.block_value_list), loops=tuple(self.loops),
            accesses=tuple(self.accesses), barriers=tuple(self.barriers), time_len=self.time_len,
            assumptions=tuple(self.assumptions), uniform_params=dict(self.uniform_params),
            strides=tuple(self.strides), uniform_exprs=dict(self.uniform_exprs),
            block_factors=factors, guard_params=frozenset(self.guard_params),
        )

    def _block_factors(self) -> dict[str, tuple[int, isl.PwAff, isl.Set | None]]:
        """``blockIdx[d] * P`` block values: ``(d, P, where)``, ``where`` None for a signed product
        (it never wraps), else the parameter values where the unsigned product cannot wrap: the
        last block's ``(u64)(gridDim[d] - 1) * (u64)P`` fits in its type (an isl parameter named
        after that expression where it is not affine, listed in ``guard_params``)."""
        out = {}
        for bv in self.block_value_list:
            e = self.kernel_expr.get(bv.name) if bv.stride is None else None
            split, where = block_factor(e), None
            if split is None and (split := wrapping_block_factor(e)) is not None:
                bound = last_block_product(*split)
                last = self.conv.int_expr(bound, self.universe) if self._uniformity(split[1]) == 1 else None
                if last is None:
                    continue
                where = last.le_set(self.conv.const((1 << e.type.bits) - 1))
                self.guard_params.update(k for k, x in self.uniform_exprs.items() if x is bound)
            if split is None:
                continue
            d, q = split
            value = self.conv.int_expr(q, self.universe) if self._uniformity(q) == 1 else None
            if value is not None and Converter.constant_value(value) is None:
                out[bv.name] = (d, value, where)
        return out

    def _align_params(self, factors: dict[str, tuple[int, isl.PwAff, isl.Set | None]]) -> None:
        """Give every isl object of the model the same parameters (those of any of them)."""
        space = self.space
        for _, value, where in factors.values():
            space = space.align_params(value.space)
            space = space if where is None else space.align_params(where.space)
        for a in self.accesses:
            space = space.align_params(a.domain.space)
            for e in a.elems:
                if e is not None:
                    space = space.align_params(e.space)
        for b in self.barriers:
            space = space.align_params(b.domain.space)
        params = space.params()
        self.space = self.space.align_params(params)
        for a in self.accesses:
            a.domain = a.domain.align_params(params)
            a.elems = tuple(e.align_params(params) if e is not None else None for e in a.elems)
        for b in self.barriers:
            b.domain = b.domain.align_params(params)
        self.strides = [dataclasses.replace(st, start=st.start.align_params(params), step=st.step.align_params(params))
                        for st in self.strides]
        for k, (d, value, where) in factors.items():
            factors[k] = (d, value.align_params(params), None if where is None else where.align_params(params))

    def _time(self, prefix: tuple[tuple[int, int | str], ...], pos: int, inner: int | str = 0,
              sub: int = 0) -> tuple[int | str, ...]:
        coords: list[int | str] = [c for pair in prefix for c in pair] + [pos, inner]
        coords += [0] * (self.time_len - 1 - len(coords))
        coords.append(sub)
        return tuple(coords)

    # Exactness of a domain while walking: EXACT, or CUT (exact but for a ``break`` of the
    # loop ``self.cut``: later iterations may not run, which only barriers can tolerate, see
    # ``Barrier.cut``), or INEXACT.
    def _block(self, stmts: tuple[n.Stmt, ...], prefix: StmtPath, field: str, offset: int,
               dom: isl.Set, exact: int, tprefix: tuple[tuple[int, int | str], ...],
               in_loop: bool) -> tuple[isl.Set, int]:
        for i, s in enumerate(stmts):
            path = prefix + ((field, i),)
            dom, exact = self._stmt(s, path, offset + i + 1, dom, exact, tprefix, in_loop)
        return dom, exact

    def _stmt(self, s: n.Stmt, path: StmtPath, pos: int, dom: isl.Set, exact: int,
              tprefix: tuple[tuple[int, int | str], ...], in_loop: bool) -> tuple[isl.Set, int]:
        if isinstance(s, (n.Return, n.Break, n.Continue)):
            return self.empty, EXACT
        if isinstance(s, n.Barrier):
            self.barriers.append(Barrier(path, s.loc, self._time(tprefix, pos), dom, exact >= CUT,
                                         self.cut if exact == CUT else None))
            return dom, exact
        if isinstance(s, n.If):
            return self._if(s, path, pos, dom, exact, tprefix, in_loop)
        if isinstance(s, (n.For, n.While)):
            return self._loop(s, path, pos, dom, exact, tprefix, in_loop)
        self._record(s, path, dom, exact == EXACT, lambda sub: self._time(tprefix, pos, 0, sub))
        if isinstance(s, n.Decl) and s.init is not None and s.name not in self.mutable:
            if s.vtype.is_int or s.vtype.is_bool:
                before = self.conv.wraps
                value = self.conv.int_expr(s.init, dom)
                if value is not None:
                    self.bound[s.name] = value
                    if self.conv.wraps > before:
                        self.wrapped_locals.add(s.name)
        return dom, exact

    def _if(self, s: n.If, path: StmtPath, pos: int, dom: isl.Set, exact: int,
            tprefix: tuple[tuple[int, int | str], ...], in_loop: bool) -> tuple[isl.Set, int]:
        self._record(s, path, dom, exact == EXACT, lambda sub: self._time(tprefix, pos, 0, sub))
        c = self.conv.cond(s.cond, dom)
        branch_exact = exact if c.exact else INEXACT
        after_then, exact_then = self._block(s.then, path, "then", 0, dom & c.true, branch_exact,
                                             tprefix + ((pos, 1),), in_loop)
        after_else, exact_else = self._block(s.orelse, path, "orelse", 0, dom & c.false, branch_exact,
                                             tprefix + ((pos, 2),), in_loop)
        kinds = escape_kinds(s.then) | escape_kinds(s.orelse)
        if not kinds:
            return dom, exact
        level = min(exact_then, exact_else, branch_exact)
        if kinds == {"break"} and self.cut is not None and self.loop_stack and \
                self.cut[0] == self.loop_stack[-1] and exact >= CUT:
            # Only instances that broke out of the cut loop may be counted in by mistake.
            level = max(level, CUT)
        return after_then | after_else, level

    def _loop(self, s: n.For | n.While, path: StmtPath, pos: int, dom: isl.Set, exact: int,
              tprefix: tuple[tuple[int, int | str], ...], in_loop: bool) -> tuple[isl.Set, int]:
        dim = self.loop_dim[path]
        k = self.affs[dim]
        free = dom.eliminate(isl.dim_type.set, self.dims.index(dim), 1)
        c = self.conv.const
        loop_exact = True
        trips = None
        if isinstance(s, n.For) and path not in self.state.abstract_fors:
            start = self.conv.int_expr(s.start, dom)
            stop = self.conv.int_expr(s.stop, dom)
            step = self.conv.int_expr(s.step, dom)
            step_value = Converter.constant_value(step) if step is not None else None
            strided = start is not None and stop is not None and step_value is None and \
                self._strided(s, step, dom)
            if not strided and (start is None or stop is None or step_value is None or step_value <= 0):
                self.state.abstract_fors.add(path)
                raise _Restart()
            body_dom = free & k.ge_set(start) & k.lt_set(stop)
            if strided and self.constants and not any(isinstance(x, (n.BlockDim, n.GridDim)) for x in walk(s.step)):
                # For the race warnings (they judge races that certainly happen): the first
                # ``FIRST_TRIPS`` trips, exactly (a subset of the iterations, with exact indices).
                # Not a step of launch dimensions (a grid-stride loop): isl would take their
                # product for any value, 1 too, and find two threads' trips on one element.
                trips_dom = self.empty
                for j in range(FIRST_TRIPS):
                    trips_dom = trips_dom | k.eq_set(start + step.scale_val(isl.Val(j)))  # type: ignore[union-attr]
                body_dom &= trips_dom
            elif strided:
                # start <= k < stop only (see ``Stride``): an over-approximation of the iterations
                self.strides.append(Stride(dim, path, start, step, expression_key(s.step),  # type: ignore[arg-type]
                                           is_grid_stride(s.start, s.step)))
                loop_exact = False
            elif step_value > 1:
                body_dom &= (k - start).mod_val(_val(step_value)).eq_set(c(0))
            header_dom = free
            self.bound[s.var] = k
        else:
            header_dom = free & k.ge_set(c(0))
            body_dom = header_dom
            if not in_loop:
                trips = f"trips({dim})"
                n_trips = self.universe.param_pw_aff_on_domain_id(isl.Id(trips, context=CTX))
                body_dom &= k.lt_set(n_trips) & n_trips.ge_set(c(0))
                header_dom &= k.le_set(n_trips) & n_trips.ge_set(c(0))
            else:
                loop_exact = False
            if isinstance(s, n.While):
                cond = self.conv.cond(s.cond, body_dom)
                body_dom &= cond.true
        self.loops.append(Loop(dim, path, s.loc, isinstance(s, n.For) and path not in self.state.abstract_fors,
                               trips))
        self._record(s, path, header_dom, False, lambda sub: self._time(tprefix, pos, dim, sub))
        body_exact = exact if loop_exact and not jumps_out(s, n.Return) else INEXACT
        outer_cut = self.cut
        if jumps_out(s.body, n.Break) and body_exact > INEXACT:
            # Iterations after a break do not run. A barrier of this loop still certainly ran
            # before any later instance of the same loop instance (the break is block-uniform
            # when the loop contains barriers), which is all ``Barrier.cut`` promises.
            if self.cut is None and body_exact == EXACT:
                self.cut = (dim, tuple(t for t in (x for pair in tprefix for x in pair) if isinstance(t, str)))
                body_exact = CUT
            else:
                body_exact = INEXACT
        inner = tprefix + ((pos, dim),)
        self.loop_stack.append(dim)
        self._block(s.body, path, "body", 0, body_dom, body_exact, inner, True)
        if isinstance(s, n.While) and s.update:
            self._block(s.update, path, "update", len(s.body), body_dom, body_exact, inner, True)
        self.loop_stack.pop()
        self.cut = outer_cut
        if jumps_out(s, n.Return):
            return dom, INEXACT
        return dom, exact

    def _strided(self, s: n.For, step: isl.PwAff | None, dom: isl.Set) -> bool:
        """Whether ``s`` is a strided loop (``Stride``): its step a grid-uniform value >= 1 (on
        ``dom``), no barrier (an inexact domain would make it useless) and no way out of it."""
        if step is None or self._uniformity(s.step) != 1:
            return False
        if any(isinstance(x, n.Barrier) for x in walk(s)) or jumps_out(s.body, n.Break) \
                or jumps_out(s, n.Return):
            return False
        return is_grid_stride(s.start, s.step) or (dom & step.lt_set(self.conv.const(1))).is_empty()

    # ------------------------------------------------------------------ accesses
    def _record(self, s: n.Stmt, path: StmtPath, dom: isl.Set, exact: bool, time_of) -> None:
        for raw in statement_accesses(s):
            space = self.kernel.space(raw.buffer)
            # A load under ``?:``/``&&``/``||`` runs only where its guards say.
            gdom, guards_exact = dom, raw.all_guards
            for cond_expr, holds in raw.guards:
                cond = self.conv.cond(cond_expr, gdom)
                gdom = gdom & (cond.true if holds else cond.false)
                guards_exact = guards_exact and cond.exact
            elems = tuple(self.conv.int_expr(i, gdom) for i in raw.indices)
            adom = gdom & self._in_bounds(raw.buffer, elems)
            delin = tuple(delinearize(self, i, adom) if e is None else None for i, e in zip(raw.indices, elems))
            if isinstance(raw.node, n.Load):
                text = format_expr(raw.node)
            else:
                text = raw.buffer + "".join(f"[{format_expr(i)}]" for i in raw.indices)
            atomic_op = raw.node.op if isinstance(raw.node, n.AtomicRMW) else None
            slots = self.held.get(raw.buffer)
            held = held_index(slots, raw.indices[0], self.conv, adom) \
                if slots is not None and len(raw.indices) == 1 else None
            if held is not None:  # through a pointer held in a record: the source's spelling of it
                text = held_text(slots, raw.indices[0]) or text  # type: ignore[arg-type]
            self.accesses.append(Access(
                id=AccessId(path, raw.index), kind=raw.kind, buffer=raw.buffer, space=space,
                elem=self.kernel.elem_type(raw.buffer), loc=raw.node.loc if raw.node.loc is not None else s.loc,
                text=text, elems=elems, domain=adom, time=time_of(0 if raw.kind == "read" else 1),
                domain_exact=exact and guards_exact, atomic_op=atomic_op,
                atomic_has_result=isinstance(raw.node, n.AtomicRMW) and raw.node.dest is not None,
                delin=delin, held=held,
            ))

    def _in_bounds(self, buffer: str, elems: tuple[isl.PwAff | None, ...]) -> isl.Set:
        """Indices a well-defined kernel can use: within a fixed-size array, >= 0 in shared memory."""
        b = self.kernel.buffer(buffer)
        if b is None:
            return self.universe
        out = self.universe
        zero = self.conv.const(0)
        for d, e in enumerate(elems):
            if e is None:
                continue
            out &= e.ge_set(zero)
            if b.shape is not None and isinstance(b.shape[d], n.Const):
                out &= e.lt_set(self.conv.const(int(b.shape[d].value)))
        return out



def build(kernel: n.Kernel, launch: Launch | None, *, constants: bool = False) -> Model:
    """The model of ``kernel``, built again with a larger space until it needs no other dimension."""
    state = _State()
    for _ in range(1000):
        try:
            return _Builder(kernel, launch, state, constants).build()
        except _Restart:
            continue
    # not reached: every restart adds a dimension or marks a loop
    raise InternalError(f"polyhedral model of {kernel.name!r} did not converge")
