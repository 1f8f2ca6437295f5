"""Recursive device functions (docs/cxx_device.md, "Recursion").

Device functions are inlined; a function that calls itself again while it is being inlined
(directly or through others) cannot be. ``inline`` notices the repeated call (the function is
already among the frames being lowered) and raises ``RecursionFound``; the inlining of the
function's outermost call catches it and lowers the call as a *call machine* instead:

- each function of the recursive group (the ones whose calls recurred: a ``Member``) is lowered
  once: its parameters fresh locals (one per member of a record), its pointer parameters offsets
  into the array its first call passed (every call must pass a pointer into that array), its
  reference parameters the places its first call named (every call must name the same), its
  result a local. Functions it calls that do not recur are inlined into it, as anywhere;
- a call of a member inside a member is a marker (``marker = <call id>``) after the arguments
  are computed into locals; ``return`` stays ``Return``;
- ``call_machine`` cuts the bodies into blocks at the markers and returns and makes the
  machine: per-thread stacks of the callers' live locals and local arrays, bounded in bytes
  (``STACK_BYTES``); a call past them is a stack overflow: the launch fails with a device fault
  located at the call (as an assert failure does), never a host crash.

The machine is ordinary IR (loops, ifs, local buffers): the emulator, both backends and the
polyhedral passes treat it as they treat any per-thread loop; nothing moves across it that would
not move across a loop reading and writing the same memory. A collective operation (barrier,
shuffle, vote, ``__syncwarp``) or a launch inside a recursive function is refused, located.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import BOOL, I32, I64, ScalarType
from polypy.ir.visitor import walk

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.lower.context import Frame, decl_key, function_body, sanitize
from frontend.lower.call_machine import Call, Member, machine
from frontend.lower.helpers import ArrayRef, strip
from frontend.lower.pointer_choice import pointer_hint
from frontend.closures import closure_declaration
from frontend.values import AggLV, Aggregate, LValue, Pointer, PtrVarLV, RefBinding, Value, VarLV

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder

_COLLECTIVES = (n.Barrier, n.WarpSync, n.Shuffle, n.Vote, n.Launch)


class RecursionFound(Exception):
    """A call of the function of ``kb.frames[index]`` while it is being inlined."""

    def __init__(self, index: int, cursor: ci.Cursor):
        super().__init__(index)
        self.index = index
        self.cursor = cursor


def same_function(frame: Frame, key: tuple, fn: ci.Cursor) -> bool:
    # Instances of one function template share a declaration: a template that calls another
    # instance of itself (`f<i>` calling `f<i - 1>`, ended by a specialization) is no recursion.
    return frame.key == key and frame.cursor.get_usr() == fn.get_usr()


class Group:
    """The recursive group being lowered: its members (by USR) and its calls."""

    def __init__(self, kb: KernelBuilder, usrs: set[str], marker: str):
        self.kb = kb
        self.usrs = usrs
        self.marker = marker
        self.members: dict[str, Member] = {}
        self.calls: list[Call] = []
        self.lowering: list[str] = []  # the members whose bodies are being lowered (innermost last)
        self.before = set(kb.buffers)

    def has(self, fn: ci.Cursor) -> bool:
        return fn.get_usr() in self.usrs

    # -------------------------------------------------------------- members
    def member(self, fn: ci.Cursor, pointers: dict[int, Pointer], refs: dict[int, LValue], this: LValue | None,
               c: ci.Cursor) -> Member:
        usr = fn.get_usr()
        found = self.members.get(usr)
        if found is not None:
            return found
        kb = self.kb
        body = function_body(fn)
        if body is None:
            raise kb.error(f"call to '{fn.spelling}', which has no definition polypy can translate", c)
        mutated = kb.assigned_decls(fn)
        env: dict = {}
        params: list[list[tuple[str, ScalarType, Pointer | None]] | None] = []
        for i, p in enumerate(fn.get_arguments()):
            if i in refs:  # every call passes the same place (``call``)
                env[decl_key(p)] = RefBinding(refs[i])
                params.append(None)
                continue
            name = kb.names.fresh(sanitize(p.spelling or f"arg{i}"))
            if i in pointers:
                base = dataclasses.replace(pointers[i], offset=None)
                hint = pointer_hint(kb, decl_key(p)) if decl_key(p) in mutated else None
                env[decl_key(p)] = PtrVarLV(base, VarLV(name, I64), hint)
                params.append([(name, I64, base)])
            elif tm.scalar_type(p.type) is not None:
                st = tm.scalar_type(p.type)
                env[decl_key(p)] = VarLV(name, st)
                params.append([(name, st, None)])
            else:  # a record of numbers (checked by the caller): a local per member
                fields = {path: VarLV(kb.names.fresh(sanitize(name + path)), st)
                          for path, st in record_leaves(kb, p.type, fn, p.spelling, c)}
                env[decl_key(p)] = AggLV(fields, p.type.spelling)
                params.append([(v.name, v.type, None) for v in fields.values()])
        rt = fn.result_type
        result: VarLV | AggLV | None = None
        if rt.get_canonical().kind != ci.TypeKind.VOID:
            st = tm.scalar_type(rt)
            if st is not None:
                result = VarLV(kb.names.fresh(sanitize(fn.spelling) + "_ret"), st)
            elif tm.is_record(rt) and not tm.is_reference(rt):
                result = AggLV({path: VarLV(kb.names.fresh(sanitize(fn.spelling + "_ret" + path)), st)
                                for path, st in record_leaves(kb, rt, fn, None, c)}, rt.spelling)
            else:
                raise kb.error(f"recursive function '{fn.spelling}' returns '{rt.spelling}': only numbers, records "
                               "of numbers and void are supported as results of recursive functions", c)
        member = Member(fn, params, dict(refs), result, this)
        self.members[usr] = member
        frame = Frame(decl_key(fn), fn, env, result=result, this=this)
        kb.frames.append(frame)
        kb.call_sites.append(c)
        self.lowering.append(usr)
        saved_depth = kb.loop_depth
        kb.loop_depth = 0
        try:
            with kb.sub_block() as out:
                kb.statement(body)
        finally:
            kb.loop_depth = saved_depth
            kb.frames.pop()
            kb.call_sites.pop()
            self.lowering.pop()
        member.body = tuple(out)
        for s in member.body:
            for x in walk(s):
                if isinstance(x, _COLLECTIVES):
                    what = "a launch" if isinstance(x, n.Launch) else "a collective operation (barrier, shuffle, vote)"
                    raise UserError(f"{what} inside the recursive function '{fn.spelling}' is not supported",
                                    x.loc or kb.loc(c))
        return member

    def own_arrays(self, body: tuple[n.Stmt, ...]) -> list[str]:
        """The local arrays made while lowering the group that ``body`` uses."""
        names: list[str] = []
        for s in body:
            for x in walk(s):
                buf = getattr(x, "buffer", None) if isinstance(x, (n.Load, n.Store, n.AtomicRMW)) else None
                found = self.kb.buffers.get(buf) if buf is not None else None
                if found is not None and buf not in self.before and buf not in names and found.space == "local":
                    names.append(buf)
        return names

    # -------------------------------------------------------------- calls
    def call(self, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor, discard: bool,
             this: LValue | None) -> Value | None:
        """A call of member ``fn`` inside the group: the arguments into locals, the marker, the result."""
        kb = self.kb
        params = list(fn.get_arguments())
        if len(args) != len(params):
            raise kb.error(f"call to '{fn.spelling}' with {len(args)} arguments, expected {len(params)}", c)
        values: list[list[VarLV] | None] = []
        pointers: dict[int, Pointer] = {}
        refs: dict[int, LValue] = {}
        for i, (p, a) in enumerate(zip(params, args)):
            pt = p.type
            name = p.spelling or f"arg{i}"
            if tm.is_reference(pt):
                try:
                    refs[i] = kb.lvalue(strip(a))
                except UserError:
                    raise kb.error(f"argument '{name}' of the recursive function '{fn.spelling}' is not the place the "
                                   "outermost call's reference names, which is not supported", a) from None
                values.append(None)
                continue
            value = kb.arg_value(a, fn, i)
            if isinstance(value, ArrayRef):
                value = value.decay(kb, a)
            if tm.is_pointer(pt) or tm.is_array(pt):
                ptr = self._pointer(fn, name, value, a)
                pointers[i] = ptr
                offset = ptr.offset if ptr.offset is not None else n.Const(0, I64)
                values.append([kb.temp(I64, convert(offset, I64), sanitize(name) + "_arg", a)])
                continue
            values.append([kb.temp(st, e, sanitize(name + path) + "_arg", a)
                           for path, st, e in _parts(kb, fn, p, value, a)])
        callee = self.member(fn, pointers, refs, this, c)
        if this != callee.this:
            raise kb.error(f"recursive call of '{fn.spelling}' on another object than the outermost call's is not "
                           "supported", c)
        for i, lv in refs.items():
            if callee.refs.get(i) != lv:
                raise kb.error(f"argument '{params[i].spelling}' of the recursive function '{fn.spelling}' is not the "
                               "place the outermost call's reference names, which is not supported", args[i])
        for i, ptr in pointers.items():
            param = callee.params[i]
            if param is None or param[0][2] is None or dataclasses.replace(ptr, offset=None) != param[0][2]:
                raise kb.error(f"argument '{params[i].spelling}' of the recursive function '{fn.spelling}' points "
                               "into another array than the outermost call's, which is not supported", args[i])
        assigns = [(var, n.Var(v.name, v.type)) for param, vs in zip(callee.params, values)
                   if param is not None and vs is not None for (var, _, _), v in zip(param, vs)]
        caller = self.lowering[-1] if self.lowering else fn.get_usr()
        self.calls.append(Call(caller, fn.get_usr(), assigns, kb.loc(c)))
        kb.emit(n.Assign(self.marker, n.Const(len(self.calls) - 1, I32), loc=kb.loc(c)))
        result = callee.result
        if result is None or discard:
            return None
        if isinstance(result, AggLV):  # copied now: the next call of the function overwrites it
            return kb.read(AggLV({path: kb.temp(v.type, n.Var(v.name, v.type), sanitize(fn.spelling + path), c)
                                  for path, v in result.fields.items()}, result.spelling), c)
        got = kb.temp(result.type, n.Var(result.name, result.type), sanitize(fn.spelling), c)
        return n.Var(got.name, got.type)

    def _pointer(self, fn: ci.Cursor, name: str, value: Value | None, a: ci.Cursor) -> Pointer:
        kb = self.kb
        if not isinstance(value, Pointer) or value.prefix or value.record is not None:
            raise kb.error(f"argument '{name}' of the recursive function '{fn.spelling}' must point into one "
                           "array (a pointer chosen among several, into a row or into records is not supported)", a)
        if value.buffer not in self.before and kb.buffers.get(value.buffer) is not None and \
                kb.buffers[value.buffer].space == "local":
            raise kb.error(f"argument '{name}' of the recursive function '{fn.spelling}' points into a local array "
                           "of a recursive call, which is not supported", a)
        return value


# ------------------------------------------------------------------ entry
def lower_group(kb: KernelBuilder, fn: ci.Cursor, env: dict, this: LValue | None, c: ci.Cursor,
                discard: bool) -> Value | None:
    """The outermost call of recursive ``fn`` (its arguments already bound in ``env``) as a call
    machine (module docstring), emitted here; its value."""
    usrs = {fn.get_usr()}
    while True:
        attempt = len(kb.frames)
        group = Group(kb, set(usrs), kb.names.fresh("rcall"))
        saved = kb.recursion
        kb.recursion = group
        try:
            with kb.sub_block() as prelude:
                entry = _entry(kb, group, fn, env, this, c)
            break
        except RecursionFound as e:
            # another function recurs inside the group (it is inlined into a member and calls
            # itself again): it joins the group, and the group is lowered again
            if e.index < attempt:
                raise
            usrs.add(e.cursor.get_usr())
        finally:
            kb.recursion = saved
    for s in prelude:
        kb.emit(s)
    for s in machine(kb, group, entry, c):
        kb.emit(s)
    if kb.assert_flag is not None:
        kb.emit(n.If(n.Var(kb.assert_flag, BOOL), (n.Return(loc=kb.loc(c)),), loc=kb.loc(c)))
    result = entry.result
    if result is None or discard:
        return None
    if isinstance(result, AggLV):
        return kb.read(result, c)
    return n.Var(result.name, result.type)


def _entry(kb: KernelBuilder, group: Group, fn: ci.Cursor, env: dict, this: LValue | None, c: ci.Cursor) -> Member:
    """Lowers the group from the outermost call; emits the assignments of its parameters."""
    pointers: dict[int, Pointer] = {}
    refs: dict[int, LValue] = {}
    values: list[list[n.Expr] | None] = []
    for i, p in enumerate(fn.get_arguments()):
        b = env.get(decl_key(p))
        name = p.spelling or f"arg{i}"
        if tm.is_reference(p.type):
            if not isinstance(b, RefBinding):
                raise kb.error(f"reference parameter '{name}' of the recursive function '{fn.spelling}' bound to a "
                               "temporary or a lambda is not supported", c)
            refs[i] = b.target
            values.append(None)
            continue
        value = kb.binding_value(b, c) if b is not None else None
        if tm.is_pointer(p.type) or tm.is_array(p.type):
            ptr = group._pointer(fn, name, value, c)
            pointers[i] = ptr
            values.append([convert(ptr.offset if ptr.offset is not None else n.Const(0, I64), I64)])
        else:
            values.append([e for _, _, e in _parts(kb, fn, p, value, c)])
    member = group.member(fn, pointers, refs, this, c)
    for param, vs in zip(member.params, values):
        if param is not None and vs is not None:
            for (var, st, _), v in zip(param, vs):
                kb.emit(n.Decl(var, st, v, loc=kb.loc(c)))
    return member


def record_leaves(kb: KernelBuilder, t: ci.Type, fn: ci.Cursor, name: str | None,
                  c: ci.Cursor) -> list[tuple[str, ScalarType]]:
    """The members of record type ``t`` (a parameter ``name`` of ``fn``, or its result), all numbers."""
    what = f"parameter '{name}'" if name is not None else "the result"
    if not tm.is_record(t) or closure_declaration(t) is not None:
        raise kb.error(f"{what} of the recursive function '{fn.spelling}' has type '{t.spelling}': only numbers, "
                       "pointers and records of numbers are supported", c)
    out = []
    for leaf in tm.leaves(t):
        if leaf.scalar is None:
            raise kb.error(f"{what} of the recursive function '{fn.spelling}' is a record holding pointers, which "
                           "is not supported", c)
        out.append((leaf.path, leaf.scalar))
    return out


def _parts(kb: KernelBuilder, fn: ci.Cursor, p: ci.Cursor, value: Value | None,
           a: ci.Cursor) -> list[tuple[str, ScalarType, n.Expr]]:
    """The argument ``value`` for parameter ``p`` (a number or a record of numbers), by member."""
    st = tm.scalar_type(p.type)
    name = p.spelling or "argument"
    if st is not None:
        if not isinstance(value, n.Expr):
            raise kb.error(f"argument '{name}' must be a number", a)
        return [("", st, convert(value, st))]
    out = []
    for path, st in record_leaves(kb, p.type, fn, name, a):
        part = value.fields.get(path) if isinstance(value, Aggregate) else None
        if not isinstance(part, n.Expr):
            raise kb.error(f"argument '{name}' must be a record of numbers", a)
        out.append((path, st, convert(part, st)))
    return out


__all__ = ["Group", "RecursionFound", "lower_group", "same_function"]
