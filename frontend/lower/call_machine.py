"""The call machine of a recursive group (``recursion``; docs/cxx_device.md, "Recursion").

The members' lowered bodies are cut into numbered blocks at the calls of the group and the
returns (``_Flattener``); a call saves the caller's locals live where it returns (a liveness
analysis over the blocks) and its local arrays on per-thread stacks indexed by the depth, with
the block to resume in; a return pops them. The machine is ordinary IR::

    while (pc >= 0) { if (pc == 0) {...} if (pc == 1) {...} ... }
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.jumps import jumps_out
from polypy.ir.types import BOOL, I32, ScalarType
from polypy.ir.visitor import walk

from frontend.arith import convert
from frontend.values import AggLV, LValue, Pointer, VarLV

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder

# The bytes of the stack of one call machine in one thread: its frames (the locals a call saves,
# the caller's local arrays, 4 bytes of return block) fit. CUDA's default stack
# (``cudaLimitStackSize``) is 1 KiB per thread, frames of registers spilled by the compiler;
# polypy's frames are not those (docs/cxx_device.md, "Recursion"); its budget is larger.
STACK_BYTES = 8192


@dataclasses.dataclass
class Member:
    """A function of the recursive group, lowered once (``recursion.Group.member``)."""

    fn: ci.Cursor
    # per parameter: its locals (one per member of a record), their types, the pointer's array;
    # None for a reference
    params: list[list[tuple[str, ScalarType, Pointer | None]] | None]
    refs: dict[int, LValue]  # the places reference parameters name (the outermost call's)
    result: VarLV | AggLV | None
    this: LValue | None  # the object of a member function (every call's)
    body: tuple[n.Stmt, ...] = ()
    entry: int = -1
    saved: list[tuple[str, ScalarType]] = dataclasses.field(default_factory=list)
    arrays: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Call:
    """A call inside the group: the marker ``marker = <its index>`` stands for it in the bodies."""

    caller: str  # the calling member's USR
    callee: str
    assigns: list[tuple[str, n.Expr]]
    loc: object


def _zero(t: ScalarType) -> n.Const:
    return n.Const(0.0 if t.name.startswith("f") else (False if t == BOOL else 0), t)


def machine(kb: KernelBuilder, group: Any, entry: Member, c: ci.Cursor) -> list[n.Stmt]:
    loc = kb.loc(c)
    if kb.assert_flag is None:  # set by a stack overflow (or an assert): the thread stops
        kb.assert_flag = kb.names.fresh("assert_failed")
    pc = kb.names.fresh("rpc")
    sp = kb.names.fresh("rsp")
    flat = _Flattener(kb, group, pc, sp, loc)
    order = [entry] + [m for m in group.members.values() if m is not entry]
    for m in order:
        m.entry = flat.new()
    for m in order:
        flat.member = m
        m.arrays = group.own_arrays(m.body)
        end = flat.block(m.body, m.entry, None)
        if end is not None:
            flat.ret(end)
    flat.finish()
    out: list[n.Stmt] = []
    for m in order:
        for var, st, _ in (v for p in m.params if p is not None for v in p):
            if m is not entry:
                out.append(n.Decl(var, st, _zero(st), loc=loc))
        results = m.result.fields.values() if isinstance(m.result, AggLV) else [m.result] if m.result else []
        for v in results:
            out.append(n.Decl(v.name, v.type, _zero(v.type), loc=loc))
    for name, t in flat.hoisted:
        out.append(n.Decl(name, t, _zero(t), loc=loc))
    out.append(n.Decl(group.marker, I32, n.Const(0, I32), loc=loc))
    out.append(n.Decl(pc, I32, n.Const(entry.entry, I32), loc=loc))
    out.append(n.Decl(sp, I32, n.Const(0, I32), loc=loc))
    body = tuple(n.If(n.Binary("eq", n.Var(pc, I32), n.Const(k, I32)), tuple(b), loc=loc)
                 for k, b in enumerate(flat.blocks) if b)
    out.append(n.While(n.Binary("ge", n.Var(pc, I32), n.Const(0, I32)), body, loc=loc))
    return out


@dataclasses.dataclass
class _Loop:
    exit: int
    again: int


class _Flattener:
    """Member bodies cut into numbered blocks (module docstring)."""

    def __init__(self, kb: KernelBuilder, group: Any, pc: str, sp: str, loc):
        self.kb = kb
        self.group = group
        self.pc = pc
        self.sp = sp
        self.loc = loc
        self.blocks: list[list[n.Stmt]] = []
        self.hoisted: list[tuple[str, ScalarType]] = []
        self.stacks: dict[str, str] = {}  # variable or local array -> its stack buffer
        self.ret_stack = kb.names.fresh("rret")
        self.member: Member | None = None
        self.pending: list[tuple[int, int, Call, int]] = []  # (block, position, call, resume block)
        self.depth = 0  # the frames the stacks hold (``finish``)
        self._live_in: list[set[str]] | None = None  # per block: the names live where it starts

    def new(self) -> int:
        self.blocks.append([])
        return len(self.blocks) - 1

    def goto(self, block: int, target: int) -> None:
        self.blocks[block].append(n.Assign(self.pc, n.Const(target, I32), loc=self.loc))

    def _hoist(self, name: str, t: ScalarType) -> None:
        assert self.member is not None
        self.hoisted.append((name, t))
        self.member.saved.append((name, t))

    def _special(self, s: n.Stmt) -> bool:
        """Whether ``s`` holds a call of the group or a jump out of itself (it is cut into blocks)."""
        if jumps_out(s):
            return True
        return any(isinstance(x, n.Assign) and x.name == self.group.marker for x in walk(s))

    def block(self, stmts: tuple[n.Stmt, ...], cur: int | None, loop: _Loop | None) -> int | None:
        for s in stmts:
            if cur is None:
                cur = self.new()  # after a jump: reached by no block
            cur = self.stmt(s, cur, loop)
        return cur

    def stmt(self, s: n.Stmt, cur: int, loop: _Loop | None) -> int | None:
        B = self.blocks
        if isinstance(s, n.Decl):
            self._hoist(s.name, s.vtype)
            if s.init is not None:
                B[cur].append(n.Assign(s.name, s.init, loc=s.loc))
            return cur
        if isinstance(s, n.Assign) and s.name == self.group.marker:
            return self.call(self.group.calls[int(s.value.value)], cur)  # type: ignore[attr-defined]
        if not self._special(s):
            B[cur].append(s)
            return cur
        if isinstance(s, n.Return):
            self.ret(cur)
            return None
        if isinstance(s, (n.Break, n.Continue)):
            assert loop is not None
            self.goto(cur, loop.exit if isinstance(s, n.Break) else loop.again)
            return None
        if isinstance(s, n.If):
            join = self.new()
            then = self.new() if s.then else join
            other = self.new() if s.orelse else join
            B[cur].append(n.If(s.cond, (self._jump(then),), (self._jump(other),), loc=s.loc))
            for start, stmts in ((then, s.then), (other, s.orelse)):
                if stmts:
                    end = self.block(stmts, start, loop)
                    if end is not None:
                        self.goto(end, join)
            return join
        if isinstance(s, n.While):
            head, body, again, leave = self.new(), self.new(), self.new(), self.new()
            self.goto(cur, head)
            B[head].append(n.If(s.cond, (self._jump(body),), (self._jump(leave),), loc=s.loc))
            end = self.block(s.body, body, _Loop(leave, again))
            if end is not None:
                self.goto(end, again)
            end = self.block(s.update, again, _Loop(leave, again))
            if end is not None:
                self.goto(end, head)
            return leave
        if isinstance(s, n.For) and s.kind == "serial":
            self._hoist(s.var, s.vtype)
            B[cur].append(n.Assign(s.var, s.start, loc=s.loc))
            head, body, again, leave = self.new(), self.new(), self.new(), self.new()
            self.goto(cur, head)
            var = n.Var(s.var, s.vtype)
            B[head].append(n.If(n.Binary("lt", var, s.stop), (self._jump(body),), (self._jump(leave),), loc=s.loc))
            end = self.block(s.body, body, _Loop(leave, again))
            if end is not None:
                self.goto(end, again)
            B[again].append(n.Assign(s.var, n.Binary("add", var, s.step), loc=s.loc))
            self.goto(again, head)
            return leave
        raise self.kb.error("a recursive call inside this statement is not supported", None)

    def _jump(self, target: int) -> n.Stmt:
        return n.Assign(self.pc, n.Const(target, I32), loc=self.loc)

    # -------------------------------------------------------------- calls and returns
    def _stack(self, name: str, t: ScalarType, shape: tuple[n.Expr, ...]) -> str:
        found = self.stacks.get(name)
        if found is None:
            found = self.kb.names.fresh(name + "_stk")
            self.kb.buffers[found] = n.Buffer(found, t, (n.Const(self.depth, I32),) + shape, "local", loc=self.loc)
            self.stacks[name] = found
        return found

    def _array_copies(self, m: Member, save: bool) -> list[n.Stmt]:
        out: list[n.Stmt] = []
        spv = n.Var(self.sp, I32)
        for name in m.arrays:
            buf = self.kb.buffers[name]
            if not all(isinstance(d, n.Const) for d in buf.shape):
                raise self.kb.error(f"a local array of variable size in the recursive function "
                                    f"'{m.fn.spelling}' is not supported", None)
            stack = self._stack(name, buf.elem, buf.shape)
            counters = [self.kb.names.fresh("rk") for _ in buf.shape]
            index = tuple(n.Var(k, I32) for k in counters)
            if save:
                inner: n.Stmt = n.Store(stack, (spv,) + index, n.Load(name, index, buf.elem), loc=self.loc)
            else:
                inner = n.Store(name, index, n.Load(stack, (spv,) + index, buf.elem), loc=self.loc)
            for k, d in reversed(list(zip(counters, buf.shape))):
                inner = n.For(k, I32, n.Const(0, I32), convert(d, I32), n.Const(1, I32), (inner,), loc=self.loc)
            out.append(inner)
        return out

    def call(self, call: Call, cur: int) -> int:
        """A call: its statements are made by ``finish``, once every member's locals are known."""
        resume = self.new()
        self.pending.append((cur, len(self.blocks[cur]), call, resume))
        self.blocks[cur].append(n.Break())  # (a placeholder, replaced by ``finish``)
        return resume

    def finish(self) -> None:
        """The saves, jumps and restores of the calls. A call saves the caller's locals that a
        block reachable from its return reads; the stacks hold ``depth`` frames, as many as fit
        ``STACK_BYTES``."""
        group, loc = self.group, self.loc
        live = [self._live(m, resume) for m, resume in
                ((group.members[call.caller], resume) for _, _, call, resume in self.pending)]
        distinct = {name: t for kept in live for name, t in kept}
        arrays = {name for m in group.members.values() for name in m.arrays}
        frame = 4 + sum(t.itemsize for t in distinct.values()) + \
            sum(self._array_bytes(self.kb.buffers[name]) for name in arrays)
        self.depth = max(1, STACK_BYTES // frame)
        self.kb.buffers[self.ret_stack] = n.Buffer(self.ret_stack, I32, (n.Const(self.depth, I32),), "local",
                                                   loc=loc)
        spv = n.Var(self.sp, I32)
        restores: list[tuple[int, list[n.Stmt]]] = []
        for (cur, at, call, resume), kept in zip(self.pending, live):
            m = group.members[call.caller]
            callee = group.members[call.callee]
            save: list[n.Stmt] = []
            for name, t in kept:
                save.append(n.Store(self._stack(name, t, ()), (spv,), n.Var(name, t), loc=loc))
            save += self._array_copies(m, True)
            save.append(n.Store(self.ret_stack, (spv,), n.Const(resume, I32), loc=loc))
            save.append(n.Assign(self.sp, n.Binary("add", spv, n.Const(1, I32)), loc=loc))
            save += [n.Assign(var, value, loc=loc) for var, value in call.assigns]
            save.append(self._jump(callee.entry))
            self.blocks[cur][at] = n.If(n.Binary("ge", spv, n.Const(self.depth, I32)),
                                        tuple(self._overflow(callee, call)), tuple(save), loc=call.loc)
            restore = [n.Assign(name, n.Load(self._stack(name, t, ()), (spv,), t), loc=loc) for name, t in kept]
            restore += self._array_copies(m, False)
            restores.append((resume, restore))
        for resume, restore in restores:  # (after the placeholders: they are found by position)
            self.blocks[resume][:0] = restore

    def _array_bytes(self, buf: n.Buffer) -> int:
        size = buf.elem.itemsize
        for d in buf.shape or ():
            if not isinstance(d, n.Const):
                raise self.kb.error("a local array of variable size in a recursive function is not supported", None)
            size *= int(d.value)
        return size

    def _live(self, m: Member, resume: int) -> list[tuple[str, ScalarType]]:
        """The locals of ``m`` live where block ``resume`` starts: read before they are assigned
        along some path of jumps (and returns of calls, not calls into other functions)."""
        if self._live_in is None:
            self._live_in = self._liveness()
        live = self._live_in[resume]
        return [(name, t) for name, t in self._saved(m) if name in live]

    def _liveness(self) -> list[set[str]]:
        marks = {cur: (call, resume) for cur, _, call, resume in self.pending}
        gen: list[set[str]] = []
        kill: list[set[str]] = []
        nxt: list[set[int]] = []
        for k, b in enumerate(self.blocks):
            g: set[str] = set()
            assigned: set[str] = set()
            for s in b:
                reads = {x.name for x in walk(s) if isinstance(x, n.Var)}
                g |= reads - assigned
                if isinstance(s, n.Assign):  # (a write inside a nested statement may not happen)
                    assigned.add(s.name)
            targets = {int(x.value.value) for s in b for x in walk(s)
                       if isinstance(x, n.Assign) and x.name == self.pc and isinstance(x.value, n.Const)}
            if k in marks:
                call, after = marks[k]
                g |= {x.name for _, e in call.assigns for x in walk(e) if isinstance(x, n.Var)} - assigned
                targets.add(after)
            gen.append(g)
            kill.append(assigned)
            nxt.append(targets - {-1})
        live_in = [set(g) for g in gen]
        changed = True
        while changed:
            changed = False
            for k in reversed(range(len(self.blocks))):
                out = set().union(*(live_in[t] for t in nxt[k])) if nxt[k] else set()
                new = gen[k] | (out - kill[k])
                if new != live_in[k]:
                    live_in[k] = new
                    changed = True
        return live_in

    def _saved(self, m: Member) -> list[tuple[str, ScalarType]]:
        return [(var, st) for p in m.params if p is not None for var, st, _ in p] + m.saved

    def _overflow(self, callee: Member, call: Call) -> list[n.Stmt]:
        kb, loc = self.kb, call.loc
        if kb.assert_flag is None:
            kb.assert_flag = kb.names.fresh("assert_failed")
        fn = callee.fn
        where = tuple(k(d, loc=loc) for k in (n.BlockIdx, n.ThreadIdx) for d in range(3))
        text = f"stack overflow: more than {self.depth} nested recursive calls of '{fn.spelling}'"
        file = loc.file if loc is not None else ""
        line = loc.line if loc is not None else 0
        return [n.AssertFail(text, file, line, f"{fn.result_type.spelling} {fn.displayname}", where, loc=loc),
                n.Assign(kb.assert_flag, n.Const(True, BOOL), loc=loc),
                self._jump(-1)]

    def ret(self, cur: int) -> None:
        spv = n.Var(self.sp, I32)
        pop = (n.Assign(self.pc, n.Load(self.ret_stack, (n.Binary("sub", spv, n.Const(1, I32)),), I32), loc=self.loc),
               n.Assign(self.sp, n.Binary("sub", spv, n.Const(1, I32)), loc=self.loc))
        stop = n.Binary("le", spv, n.Const(0, I32))
        if self.kb.assert_flag is not None:  # a failed assert stops the thread: no caller goes on
            stop = n.Binary("lor", n.Var(self.kb.assert_flag, BOOL), stop)
        self.blocks[cur].append(n.If(stop, (self._jump(-1),), pop, loc=self.loc))


__all__ = ["Call", "Member", "STACK_BYTES", "machine"]
