"""Statements and control flow, SIMT style, over the lanes of one chunk.

``run_block(stmts, lanes)`` executes a statement list on a set of lanes, shrinking the set as
lanes leave it: after a statement that can ``return``, ``break`` or ``continue`` (``_may_exit``),
lanes that did so stop executing the rest of the list. Loops iterate while any lane is still
in them; a lane that breaks waits for the others at the loop's end, exactly like a diverged
warp reconverging::

    while (c) { A; if (p) continue; B } update { U }
      iteration:  lanes L --c--> L1 --A--> L1 --(not p)--> L2 --B--> ... --U on L1-minus-breaks
"""
from __future__ import annotations

import sys
from typing import Callable

import numpy as np

from polypy.emulator import ops, warps
from polypy.emulator.atomics import atomic_rmw
from polypy.emulator.evaluate import Evaluator
from polypy.emulator.faults import LaneFault, first_true
from polypy.emulator.lanes import LaneSet
from polypy.emulator.memory import Memory, garbage
from polypy.emulator.races import RaceFound
from polypy.emulator.grid_sync import grid_barrier
from polypy.emulator.state import ChunkState
from polypy.errors import DeviceAssertError, InternalError, MisalignedAddressError, UserError
from polypy.ir.printf import fault_format, fault_summary, format_call
from polypy.ir import nodes as n
from polypy.ir.jumps import jumps_out
from polypy.ir.types import I32, U32

Value = np.ndarray | np.generic

# A loop still running after this many iterations is almost surely waiting for another thread
# (a spin lock, a flag set by another block), which lockstep execution can never let run.
MAX_LOOP_ITERATIONS = 1 << 22


class _LoopFrame:
    """Lanes that left the innermost loop (``brk``) or its current iteration (``cont``)."""

    __slots__ = ("brk", "cont")

    def __init__(self) -> None:
        self.brk: np.ndarray | None = None  # allocated when a lane first breaks
        self.cont: np.ndarray | None = None


class Executor:
    def __init__(self, state: ChunkState):
        self.state = state
        self.ev = Evaluator(state)
        self.loops: list[_LoopFrame] = []
        self._exits: dict[int, bool] = {}
        self._table: dict[type, Callable[[n.Stmt, LaneSet], None]] = {
            n.Decl: self._decl,
            n.Assign: self._assign_stmt,
            n.Store: self._store,
            n.AtomicRMW: self._atomic,
            n.Barrier: self._barrier,
            n.Prefetch: lambda s, lanes: None,  # a hint: nothing happens
            n.Fence: self._fence,
            n.Print: self._print,
            n.AssertFail: self._assert_fail,
            n.WarpSync: self._warp_sync,
            n.Shuffle: self._shuffle,
            n.Vote: self._vote,
            n.If: self._if,
            n.For: self._for,
            n.While: self._while,
            n.Break: self._break,
            n.Continue: self._continue,
            n.Return: self._return,
        }

    def run(self, body: tuple[n.Stmt, ...]) -> None:
        self.run_block(body, LaneSet.all(self.state.chunk.num_lanes))

    def run_block(self, stmts: tuple[n.Stmt, ...], lanes: LaneSet) -> None:
        for s in stmts:
            if lanes.count == 0:
                return
            handler = self._table.get(type(s))
            if handler is None:
                raise InternalError(f"emulator: unknown statement {type(s).__name__}", s.loc)
            handler(s, lanes)
            if self._may_exit(s):
                lanes = lanes.select(np.logical_not(self._stopped(lanes)))

    # -- lanes leaving a block
    def _may_exit(self, s: n.Stmt) -> bool:
        got = self._exits.get(id(s))
        if got is None:
            got = jumps_out(s)  # lanes may skip the statements after it in the same list
            self._exits[id(s)] = got
        return got

    def _stopped(self, lanes: LaneSet) -> np.ndarray:
        stop = lanes.take(self.state.chunk.returned)
        if self.loops:
            frame = self.loops[-1]
            if frame.brk is not None:
                stop = stop | lanes.take(frame.brk)
            if frame.cont is not None:
                stop = stop | lanes.take(frame.cont)
        return stop

    # -- variables
    def assign(self, name: str, dtype: np.dtype, lanes: LaneSet, value: Value) -> None:
        env = self.state.env
        value = ops.convert(value, dtype)
        current = env.get(name)
        if lanes.is_all:
            if not isinstance(value, np.ndarray):
                env[name] = value
            elif isinstance(current, np.ndarray):
                current[:] = value
            else:
                env[name] = value.copy()  # never share an array with another variable
            return
        if not isinstance(current, np.ndarray):
            size = self.state.chunk.num_lanes
            current = garbage(dtype, size) if current is None else np.full(size, current, dtype=dtype)
            env[name] = current
        current[lanes.idx] = value

    def _decl(self, s: n.Decl, lanes: LaneSet) -> None:
        if s.init is not None:
            self.assign(s.name, s.vtype.dtype, lanes, self.ev.eval(s.init, lanes))
        elif s.name not in self.state.env:
            self.state.env[s.name] = garbage(s.vtype.dtype, self.state.chunk.num_lanes)

    def _assign_stmt(self, s: n.Assign, lanes: LaneSet) -> None:
        value = self.ev.eval(s.value, lanes)
        self.assign(s.name, s.value.type.dtype, lanes, value)

    # -- memory
    def _address(self, mem: Memory, index: list[Value], lanes: LaneSet, s: n.Stmt, access: str) -> np.ndarray:
        try:
            return mem.address(index, lanes, self.state.chunk, access)
        except LaneFault as fault:
            raise self.ev.fault(fault, lanes, s) from None

    def _store(self, s: n.Store, lanes: LaneSet) -> None:
        index = [self.ev.eval(i, lanes) for i in s.index]
        value = self.ev.eval(s.value, lanes)
        mem = self.state.memory(s.buffer, s)
        flat = self._address(mem, index, lanes, s, "store to")
        if not mem.writable:
            raise UserError(f"store to {s.buffer}, whose array is read-only", s.loc)
        if mem.records is not None:
            try:
                mem.records.write(flat + mem.record_offset, self.ev.accessors(lanes), self.state.sites.id(s))
            except RaceFound as race:
                raise self.ev.race(race, mem, index, lanes, s, "write") from None
        mem.storage[flat] = value
        mem.mark_written(flat)

    def _atomic(self, s: n.AtomicRMW, lanes: LaneSet) -> None:
        index = [self.ev.eval(i, lanes) for i in s.index]
        value = self.ev.eval(s.value, lanes)
        compare = self.ev.eval(s.compare, lanes) if s.compare is not None else None
        mem = self.state.memory(s.buffer, s)
        flat = self._address(mem, index, lanes, s, f"atomic.{s.op} on")
        if s.op != "exch":  # every other atomic reads the old value
            try:
                mem.check_written(flat, index, f"atomic.{s.op} on")
            except LaneFault as fault:
                raise self.ev.fault(fault, lanes, s) from None
        if not mem.writable:
            raise UserError(f"atomic.{s.op} on {s.buffer}, whose array is read-only", s.loc)
        if mem.records is not None:
            try:
                mem.records.atomic(flat + mem.record_offset, self.ev.accessors(lanes), self.state.sites.id(s))
            except RaceFound as race:
                raise self.ev.race(race, mem, index, lanes, s, f"atomic.{s.op}") from None
        old = atomic_rmw(s.op, mem.storage, np.ascontiguousarray(flat), value, compare, s.dest is not None)
        mem.mark_written(flat)
        if s.dest is not None:
            assert old is not None
            self.assign(s.dest, mem.elem.dtype, lanes, old)

    # -- synchronization and warps
    def _warp_sync(self, s: n.WarpSync, lanes: LaneSet) -> None:
        raise UserError("__syncwarp: the emulator runs kernels as polypy.load gives them (its GPU pipeline turns "
                        "__syncwarp into block barriers, gpu2cpu.lower_warp_syncs)", s.loc)

    def _print(self, s: n.Print, lanes: LaneSet) -> None:
        """Each lane's call is written whole, lanes in order (CUDA orders no threads)."""
        values = [np.broadcast_to(self.ev.eval(a, lanes), (lanes.count,)) for a in s.args]
        sys.stdout.write("".join(format_call(s.format, [v[i].item() for v in values], s.strings)
                                 for i in range(lanes.count)))
        sys.stdout.flush()

    def _assert_fail(self, s: n.AssertFail, lanes: LaneSet) -> None:
        """CUDA's message for each lane, then the launch fails (the GPU stops the kernel)."""
        where = [np.broadcast_to(self.ev.eval(w, lanes), (lanes.count,)) for w in s.where]
        message = fault_format(s)
        for i in range(lanes.count):
            sys.stderr.write(message % tuple(int(w[i]) for w in where))
        error = MisalignedAddressError if s.fault == "misaligned" else DeviceAssertError
        raise error(fault_summary(s), s.loc)

    def _fence(self, s: n.Fence, lanes: LaneSet) -> None:
        """Lanes run one statement at a time and atomics serialize: what a thread wrote before a
        fence is already seen by every other thread. The race detector learns of device-scope
        fences (``fences.Publications``), which order blocks."""
        pubs = self.state.pubs
        if pubs is None or s.scope == "block":
            return
        chunk = self.state.chunk
        block = lanes.take_cached("lane_block", chunk.lane_block)
        threads = np.broadcast_to(lanes.take_cached("gtid", chunk.gtid), (lanes.count,))
        pubs.fence(threads, np.broadcast_to(chunk.epoch[block], (lanes.count,)))

    def _barrier(self, s: n.Barrier, lanes: LaneSet) -> None:
        chunk = self.state.chunk
        if s.scope == "grid":
            grid_barrier(self.state, s, lanes)
            return
        blocks = lanes.take_cached("lane_block", chunk.lane_block)
        arrived = np.bincount(np.broadcast_to(blocks, (lanes.count,)), minlength=chunk.num_blocks)
        partial = (arrived > 0) & (arrived < chunk.live)
        if partial.any():
            b = int(np.argmax(partial))
            t = chunk.threads_per_block
            present = np.zeros(t, dtype=bool)
            present[lanes.ids[blocks == b] - b * t] = True
            waiting = np.logical_not(present) & np.logical_not(chunk.returned[b * t:(b + 1) * t])
            missing = b * t + int(np.argmax(waiting))
            raise UserError(
                f"barrier reached by only some threads of block {chunk.block_name(b)}: "
                f"{arrived[b]} of its {chunk.live[b]} live threads arrive, and {chunk.describe_lane(missing)} "
                f"does not (a barrier must be reached by all threads of a block or by none)", s.loc)
        chunk.epoch[arrived > 0] += 1

    def _shuffle(self, s: n.Shuffle, lanes: LaneSet) -> None:
        value = self.ev.eval(s.value, lanes)
        lane = self.ev.eval(s.lane, lanes)
        width = self.ev.eval(s.width, lanes)
        self.ev.eval(s.mask, lanes)
        try:
            out = warps.shuffle(s.mode, value, lane, width, lanes, self.state.chunk)
        except LaneFault as fault:
            raise self.ev.fault(fault, lanes, s) from None
        self.assign(s.dest, s.value.type.dtype, lanes, out)

    def _vote(self, s: n.Vote, lanes: LaneSet) -> None:
        pred = self.ev.eval(s.pred, lanes)
        mask = self.ev.eval(s.mask, lanes)
        out = warps.vote(s.mode, lanes.broadcast(pred), mask, lanes, self.state.chunk)
        dtype = (U32 if s.mode in ("ballot", "activemask") else I32).dtype
        self.assign(s.dest, dtype, lanes, out)

    # -- control flow
    def _if(self, s: n.If, lanes: LaneSet) -> None:
        cond = self.ev.eval(s.cond, lanes)
        if not isinstance(cond, np.ndarray):
            self.run_block(s.then if cond else s.orelse, lanes)
            return
        then_lanes = lanes.select(cond)
        if then_lanes.count:
            self.run_block(s.then, then_lanes)
        if s.orelse and then_lanes.count < lanes.count:
            self.run_block(s.orelse, lanes.select(np.logical_not(cond)))

    def _while(self, s: n.While, lanes: LaneSet) -> None:
        frame = _LoopFrame()
        self.loops.append(frame)
        try:
            current = lanes
            for _ in range(MAX_LOOP_ITERATIONS):
                body = current.select(self.ev.eval(s.cond, current))
                if body.count == 0:
                    return
                self.run_block(s.body, body)
                current = self._next_iteration(frame, body)
                if s.update and current.count:
                    self.run_block(s.update, current)
                    # A `break` in the update (how a do-while tests its condition) leaves too.
                    current = self._next_iteration(frame, current)
            raise self._runaway(s)
        finally:
            self.loops.pop()

    def _for(self, s: n.For, lanes: LaneSet) -> None:
        dtype = s.vtype.dtype
        start = self.ev.eval(s.start, lanes)
        stop_values = self.ev.eval(s.stop, lanes)
        step_values = self.ev.eval(s.step, lanes)
        endless = np.less(start, stop_values) & np.equal(step_values, 0)
        if np.any(endless):
            lane = int(lanes.ids[first_true(endless)])
            raise UserError(f"for loop with step 0 never ends, in {self.state.chunk.describe_lane(lane)}", s.loc)
        stop = self._chunk_wide(stop_values, lanes, dtype)
        step = self._chunk_wide(step_values, lanes, dtype)
        self.assign(s.var, dtype, lanes, start)
        env = self.state.env
        frame = _LoopFrame()
        self.loops.append(frame)
        try:
            current = lanes
            for _ in range(MAX_LOOP_ITERATIONS):
                body = current.select(np.less(current.take(env[s.var]), current.take(stop)))
                if body.count == 0:
                    return
                self.run_block(s.body, body)
                current = self._next_iteration(frame, body)
                if current.count:
                    self.assign(s.var, dtype, current, np.add(current.take(env[s.var]), current.take(step)))
            raise self._runaway(s)
        finally:
            self.loops.pop()

    def _chunk_wide(self, value: Value, lanes: LaneSet, dtype: np.dtype) -> Value:
        """A per-lane loop bound kept for the whole loop, indexable by lane id."""
        if not isinstance(value, np.ndarray):
            return value
        full = np.zeros(self.state.chunk.num_lanes, dtype=dtype)
        lanes.put(full, value)
        return full

    def _next_iteration(self, frame: _LoopFrame, body: LaneSet) -> LaneSet:
        """The lanes of an iteration that go on to the next: not returned, not broken out."""
        stop = body.take(self.state.chunk.returned)
        if frame.brk is not None:
            stop = stop | body.take(frame.brk)
        going_on = body.select(np.logical_not(stop))
        if frame.cont is not None:
            frame.cont[:] = False
        return going_on

    def _runaway(self, s: n.Stmt) -> UserError:
        return UserError(f"loop still running after {MAX_LOOP_ITERATIONS} iterations; a thread waiting for "
                         f"another thread or block cannot make progress in the emulator", s.loc)

    def _break(self, s: n.Break, lanes: LaneSet) -> None:
        frame = self.loops[-1]
        if frame.brk is None:
            frame.brk = np.zeros(self.state.chunk.num_lanes, dtype=bool)
        lanes.put(frame.brk, True)

    def _continue(self, s: n.Continue, lanes: LaneSet) -> None:
        frame = self.loops[-1]
        if frame.cont is None:
            frame.cont = np.zeros(self.state.chunk.num_lanes, dtype=bool)
        lanes.put(frame.cont, True)

    def _return(self, s: n.Return, lanes: LaneSet) -> None:
        chunk = self.state.chunk
        ids = lanes.ids
        chunk.returned[ids] = True
        chunk.live -= np.bincount(chunk.lane_block[ids], minlength=chunk.num_blocks)
