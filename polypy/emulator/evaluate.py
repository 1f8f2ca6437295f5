"""Expressions over the active lanes of a chunk.

``Evaluator.eval(expr, lanes)`` returns a vector with one entry per lane of ``lanes`` (or a
NumPy scalar when the value is uniform). Dispatch is one table keyed by node class. Operands
that C evaluates conditionally (``&&``, ``||``, ``?:``) are evaluated only on the lanes that
need them, so ``i < n && x[i] > 0`` never loads ``x[n]``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from polypy.emulator import ops
from polypy.emulator.faults import LaneFault
from polypy.emulator.lanes import LaneSet
from polypy.emulator.mathlib import MATH_IMPLS
from polypy.emulator.memory import Memory
from polypy.emulator.races import Accessors, RaceFound
from polypy.emulator.state import ChunkState
from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n

Value = np.ndarray | np.generic


class Evaluator:
    def __init__(self, state: ChunkState):
        self.state = state
        self._const_cache: dict[int, np.generic] = {}
        self._table: dict[type, Callable[[n.Expr, LaneSet], Value]] = {
            n.Const: self._const,
            n.Var: self._var,
            n.ThreadIdx: self._thread_idx,
            n.BlockIdx: self._block_idx,
            n.BlockDim: self._block_dim,
            n.GridDim: self._grid_dim,
            n.Unary: self._unary,
            n.Binary: self._binary,
            n.Select: self._select,
            n.Cast: self._cast,
            n.Call: self._call,
            n.Load: self._load,
        }

    def eval(self, e: n.Expr, lanes: LaneSet) -> Value:
        if lanes.count == 0:
            return np.zeros(0, dtype=e.type.dtype)
        handler = self._table.get(type(e))
        if handler is None:
            raise InternalError(f"emulator: unknown expression {type(e).__name__}", e.loc)
        return handler(e, lanes)

    # -- leaves
    def _const(self, e: n.Const, lanes: LaneSet) -> Value:
        got = self._const_cache.get(id(e))
        if got is None:
            got = e.ctype.dtype.type(e.value)
            self._const_cache[id(e)] = got
        return got

    def _var(self, e: n.Var, lanes: LaneSet) -> Value:
        value = self.state.env.get(e.name)
        if value is None:
            raise InternalError(f"emulator: variable {e.name!r} read before its declaration", e.loc)
        return lanes.take(value)

    def _thread_idx(self, e: n.ThreadIdx, lanes: LaneSet) -> Value:
        chunk = self.state.chunk
        if chunk.geometry.block[e.dim] == 1:
            return np.uint32(0)
        return lanes.take_cached(("threadIdx", e.dim), chunk.thread_idx[e.dim])

    def _block_idx(self, e: n.BlockIdx, lanes: LaneSet) -> Value:
        chunk = self.state.chunk
        if chunk.geometry.grid[e.dim] == 1:
            return np.uint32(0)
        if chunk.num_blocks == 1:
            return chunk.block_idx[e.dim][0]
        return lanes.take_cached(("blockIdx", e.dim), chunk.block_idx[e.dim])

    def _block_dim(self, e: n.BlockDim, lanes: LaneSet) -> Value:
        return np.uint32(self.state.chunk.geometry.block[e.dim])

    def _grid_dim(self, e: n.GridDim, lanes: LaneSet) -> Value:
        return np.uint32(self.state.chunk.geometry.grid[e.dim])

    # -- operators
    def _unary(self, e: n.Unary, lanes: LaneSet) -> Value:
        return ops.unary(e.op, self.eval(e.x, lanes), e.x.type)

    def _binary(self, e: n.Binary, lanes: LaneSet) -> Value:
        if e.op in ("land", "lor"):
            return self._logic(e, lanes)
        a = self.eval(e.a, lanes)
        b = self.eval(e.b, lanes)
        try:
            return ops.binary(e.op, a, b, e.a.type)
        except LaneFault as fault:
            raise self.fault(fault, lanes, e) from None

    def _logic(self, e: n.Binary, lanes: LaneSet) -> Value:
        a = self.eval(e.a, lanes)
        need_b = a if e.op == "land" else np.logical_not(a)  # lanes where a does not decide
        if not isinstance(a, np.ndarray):
            return self.eval(e.b, lanes) if need_b else a
        sub = lanes.select(need_b)
        if sub.count == 0:
            return a
        out = a.copy()
        out[need_b] = self.eval(e.b, sub)
        return out

    def _select(self, e: n.Select, lanes: LaneSet) -> Value:
        cond = self.eval(e.cond, lanes)
        if not isinstance(cond, np.ndarray):
            return self.eval(e.a if cond else e.b, lanes)
        then_lanes = lanes.select(cond)
        if then_lanes.count == lanes.count:
            return self.eval(e.a, lanes)
        if then_lanes.count == 0:
            return self.eval(e.b, lanes)
        out = np.empty(lanes.count, dtype=e.type.dtype)
        out[cond] = self.eval(e.a, then_lanes)
        other = np.logical_not(cond)
        out[other] = self.eval(e.b, lanes.select(other))
        return out

    def _cast(self, e: n.Cast, lanes: LaneSet) -> Value:
        return ops.cast(self.eval(e.x, lanes), e.x.type, e.to)

    def _call(self, e: n.Call, lanes: LaneSet) -> Value:
        impl = MATH_IMPLS.get(e.fn)
        if e.fn == "texture":
            return self._texture(e, lanes)
        if impl is None:
            raise UserError(f"the emulator has no implementation of math function {e.fn!r}", e.loc)
        args = [self.eval(a, lanes) for a in e.args]
        if e.fn == "bitcast":
            return impl(args[0], e.rtype.dtype)
        return ops.convert(ops.scalar(impl(*args)), e.rtype.dtype)

    def _texture(self, e: n.Call, lanes: LaneSet) -> Value:
        """A texture fetch, lane by lane, through the program's runtime (``ChunkState.textures``)."""
        fetch = self.state.textures
        if fetch is None:
            raise UserError("texture fetches are not supported by the emulator outside whole programs (run the "
                            "program: polypy run --emulate)", e.loc)
        args = [self.eval(a, lanes) for a in e.args]
        shape = next((np.shape(a) for a in args if np.ndim(a) > 0), ())
        columns = [np.broadcast_to(np.asarray(a), shape).ravel() for a in args]
        values = np.array([fetch(*(int(c[k]) if j not in (3, 4, 5) else float(c[k]) for j, c in enumerate(columns)))
                           for k in range(columns[0].size)], dtype=np.float64).reshape(shape)
        return ops.convert(ops.scalar(values) if shape == () else values, e.rtype.dtype)

    # -- memory
    def _load(self, e: n.Load, lanes: LaneSet) -> Value:
        index = [self.eval(i, lanes) for i in e.index]
        mem = self.state.memory(e.buffer, e)
        try:
            flat = mem.address(index, lanes, self.state.chunk, "load from")
            mem.check_written(flat, index, "load from")
        except LaneFault as fault:
            raise self.fault(fault, lanes, e) from None
        if mem.records is not None:
            try:
                mem.records.read(flat + mem.record_offset, self.accessors(lanes), self.state.sites.id(e))
            except RaceFound as race:
                raise self.race(race, mem, index, lanes, e, "read") from None
        return mem.storage[flat]

    # -- diagnostics shared with the statement executor
    def accessors(self, lanes: LaneSet) -> Accessors:
        chunk = self.state.chunk
        block = lanes.take_cached("lane_block", chunk.lane_block)
        pubs = self.state.pubs
        return Accessors(lanes.take_cached("gtid", chunk.gtid), lanes.take_cached("gblock", chunk.gblock),
                         chunk.epoch[block], pubs.tick(lanes.count) if pubs is not None else None, pubs)

    def fault(self, fault: LaneFault, lanes: LaneSet, node: n.Node) -> UserError:
        lane = int(lanes.ids[fault.position])
        return UserError(f"{fault.message}, in {self.state.chunk.describe_lane(lane)}", node.loc)

    def race(self, race: RaceFound, mem: Memory, index: list[Value], lanes: LaneSet, node: n.Node,
             kind: str) -> UserError:
        chunk = self.state.chunk
        geometry = chunk.geometry
        lane = int(lanes.ids[race.position])
        me = int(chunk.gtid[lane])
        my_block = int(chunk.gblock[lane])
        element = mem.format_index(index, race.position)
        if race.other_thread is not None:
            other = f"{race.other_kind} by {geometry.describe_thread(race.other_thread)}"
        elif race.other_block is not None:
            other = f"{race.other_kind}s by several threads of block {geometry.describe_block(race.other_block)}"
        else:
            other = f"{race.other_kind}s by threads of several blocks"
        if race.other_block is not None and race.other_block == my_block:
            why = "with no barrier between them"
        else:
            why = "threads of different blocks are not ordered"
        message = (f"data race on {mem.space} memory {element}: {kind} by {geometry.describe_thread(me)} "
                   f"conflicts with {other} ({why})")
        note = (f"the conflicting {race.other_kind} is here", self.state.sites.loc(race.other_site))
        return UserError(message, node.loc, notes=(note,))
