"""Pointers that may point into one of several buffers (issue 36 item 1).

``c ? A + x : B + y``, ``p = B;`` after ``p = A;``, the ping-pong ``tmp = in; in = out; out = tmp;``
of device code, a device function returning pointers into different buffers: such a pointer is a
``PointerChoice``, a small selector (which buffer, an i32) and, per candidate buffer, a pointer
into it. A pointer variable of that kind (``ChoiceVarLV``) holds the selector and one offset (in
elements of the pointee type) in two locals. Every access through it is a branch over the
candidates, as statements::

    t = *p;     ->   if (p_sel == 0) t = A[p_off]; else t = B[p_off];
    *p = v;     ->   if (p_sel == 0) A[p_off] = v; else B[p_off] = v;

never a select that would load from the other buffer as well (out of bounds there, possibly).
The candidates point to elements of one type; each may be a typed view of its buffer
(``docs/typed_views.md``), read and written as that view is. For isl, an access through such a
pointer is an access to each candidate buffer under a condition it cannot read (the selector is
data), so a may-access: the analyses stay sound, and exact for ordinary pointers.

Which buffers a pointer variable may point into is only known once all of its assignments are
seen, while the accesses before them (in a loop, before the re-pointing at its end) are lowered
first. So a kernel is lowered again when an assignment points a variable into a buffer it was not
lowered for (``KernelBuilder.discovered``: the round goes on to find the others, and what it
builds is dropped), knowing the buffers of every such variable from the start
(``KernelBuilder.pointer_sets``, keyed by ``pointer_hint``). Each new round knows at least one
more (variable, buffer) pair, so the rounds end.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

import clang.cindex as ci

from polypy.errors import Loc, UserError
from polypy.ir import nodes as n
from polypy.ir.types import BOOL, I32, I64
from polypy.ir.visitor import walk

from frontend import ctypes_map as tm
from frontend.arith import add_offsets, convert, negated_offset
from frontend.values import (
    AggLV, ChoiceLV, ChoiceVarLV, LValue, PendingPtrLV, Pointer, PointerChoice, PtrVarLV, Value,
)

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder

MAX_ROUNDS = 32


def lower_until_settled(make: Callable[[dict], KernelBuilder], where: Loc | None) -> n.Kernel:
    """``make(sets).build()`` with the pointer sets that each round finds, until a round finds no
    pointer variable pointed into a buffer it was not lowered for. A refusal in a round that found
    one may come of what that round could not lower right: the next round tells."""
    sets: dict[tuple, tuple[Pointer, ...]] = {}
    for _ in range(MAX_ROUNDS):
        builder = make(sets)
        try:
            kernel = builder.build()
        except Exception:  # noqa: BLE001 - re-raised unless the round is to be made again
            if not builder.discovered:
                raise
        if not builder.discovered:
            return kernel
        sets = {**sets, **builder.discovered}
    raise UserError(f"pointer variables re-pointed among more buffers than polypy follows ({MAX_ROUNDS} rounds of "
                    "lowering)", where)


def pointer_hint(kb: KernelBuilder, key: tuple) -> tuple:
    """The key of a pointer variable among those of the kernel: its declaration and how many
    variables of that declaration came before (a device function inlined twice has two)."""
    count = kb.pointer_counts.get(key, 0)
    kb.pointer_counts[key] = count + 1
    return (key, count)


# --------------------------------------------------------------------------- values

def options_of(v: Pointer | PointerChoice) -> tuple[Pointer, ...]:
    return v.options if isinstance(v, PointerChoice) else (v,)


def selector(v: Pointer | PointerChoice) -> n.Expr:
    return convert(v.sel, I32) if isinstance(v, PointerChoice) else n.Const(0, I32)


def same_base(a: Pointer, b: Pointer) -> bool:
    """Whether ``a`` and ``b`` point into one buffer (and row), seen as one type."""
    return a.buffer == b.buffer and a.prefix == b.prefix and a.stored == b.stored and a.record is None \
        and b.record is None and _same_elements(a.layout, b.layout)


def _same_elements(a: tm.ElemLayout, b: tm.ElemLayout) -> bool:
    return a.scalar == b.scalar and a.stride == b.stride and a.slots == b.slots and a.record is None \
        and b.record is None and a.views == b.views


def _position(options: tuple[Pointer, ...], p: Pointer) -> int | None:
    return next((k for k, o in enumerate(options) if same_base(o, p)), None)


def _merged(old: tuple[Pointer, ...], new: tuple[Pointer, ...]) -> tuple[Pointer, ...]:
    out = list(old)
    for p in new:
        if _position(tuple(out), p) is None:
            out.append(dataclasses.replace(p, offset=None))
    return tuple(out)


def check_options(kb: KernelBuilder, options: tuple[Pointer, ...], c: ci.Cursor) -> None:
    for o in options:
        if o.record is not None or o.layout.record is not None:
            raise kb.error("a pointer to records of mixed member types that may point into several buffers is not "
                           "supported in device code", c)
        if not _same_elements(o.layout, options[0].layout):
            raise kb.error("a pointer that may point into several buffers must point to elements of one type "
                           f"(here '{options[0].layout.ctype_spelling}' and '{o.layout.ctype_spelling}')", c)


def shifted(v: PointerChoice, delta: n.Expr) -> PointerChoice:
    """``v + delta`` (``delta`` in elements)."""
    return PointerChoice(v.sel, tuple(dataclasses.replace(o, offset=add_offsets(o.offset, delta)) for o in v.options))


def choice_value(sel: n.Expr, values: list[n.Expr], loc: Loc | None) -> n.Expr:
    """``values[sel]`` as selects (pure values only: each is computed where it is chosen)."""
    out = values[-1]
    for k in range(len(values) - 2, -1, -1):
        if values[k] != out:
            out = n.Select(n.Binary("eq", sel, n.Const(k, sel.type), loc=loc), values[k], out, loc=loc)
    return out


def branches(kb: KernelBuilder, sel: n.Expr, count: int, body: Callable[[int], None], loc: Loc | None) -> None:
    """``if (sel == 0) body(0); else if (sel == 1) body(1); ... else body(count - 1);`` emitted as
    statements (each test is made before any branch runs)."""
    if isinstance(sel, n.Const):
        body(int(sel.value))
        return
    blocks = []
    for k in range(count):
        with kb.sub_block() as stmts:
            body(k)
        blocks.append(tuple(stmts))
    chain = blocks[-1]
    for k in range(count - 2, -1, -1):
        chain = (n.If(n.Binary("eq", sel, n.Const(k, sel.type), loc=loc), blocks[k], chain, loc=loc),)
    for s in chain:
        kb.emit(s)


# --------------------------------------------------------------------------- places

def choice_element(kb: KernelBuilder, ptr: PointerChoice, j: n.Expr | None, c: ci.Cursor) -> LValue:
    """Element ``j`` of ``ptr`` (``ptr[j]``; ``*ptr`` for None): per member, the place among the
    candidates' elements."""
    return _combine(ptr.sel, [kb.pointer_element(o, j, c) for o in ptr.options])


def _combine(sel: n.Expr, places: list) -> LValue:
    first = places[0]
    if isinstance(first, AggLV):
        return AggLV({path: _combine(sel, [p.fields[path] for p in places]) for path in first.fields}, first.spelling)
    return ChoiceLV(sel, tuple(places), first.type)


def read_choice(kb: KernelBuilder, lv: ChoiceLV, c: ci.Cursor) -> n.Expr:
    loc = kb.loc(c)
    t = kb.temp(lv.type, None, "through", c)

    def body(k: int) -> None:
        value = kb.read(lv.options[k], c)
        kb.emit(n.Assign(t.name, value, loc=loc))  # type: ignore[arg-type]

    branches(kb, lv.sel, len(lv.options), body, loc)
    return n.Var(t.name, t.type, loc=loc)


def store_choice(kb: KernelBuilder, lv: ChoiceLV, value: n.Expr, c: ci.Cursor) -> None:
    loc = kb.loc(c)
    if not isinstance(value, (n.Var, n.Const)):
        value = n.Var(kb.temp(lv.type, value, "value", c).name, lv.type, loc=loc)
    branches(kb, lv.sel, len(lv.options), lambda k: kb.store(lv.options[k], value, c), loc)


def choice_address(lv: ChoiceLV, address: Callable[[LValue], Value]) -> Value:
    """``&place`` of a member reached through a ``PointerChoice`` (``&p->y``)."""
    options = [address(o) for o in lv.options]
    if not all(isinstance(o, Pointer) for o in options):
        return options[0]  # the caller refuses it
    return PointerChoice(lv.sel, tuple(options))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- variables

def pointer_variable(kb: KernelBuilder, value: Pointer | PointerChoice, hint: tuple | None, name: str,
                     c: ci.Cursor) -> PtrVarLV | ChoiceVarLV:
    """A pointer variable holding ``value``; ``hint`` (``pointer_hint``) for one the function
    assigns, None for one it never assigns."""
    known = kb.pointer_sets.get(hint) if hint is not None else None
    if known is None and isinstance(value, Pointer):
        if hint is None:
            return PtrVarLV(pinned(kb, value, name, c), None)
        init = value.offset if value.offset is not None else n.Const(0, I32)
        var = kb.temp(init.type, init, name + "_off", c)
        return PtrVarLV(dataclasses.replace(value, offset=None), var, hint)
    options = known if known is not None else _merged((), options_of(value))
    check_options(kb, options, c)
    lv = ChoiceVarLV(options, kb.temp(I32, None, name + "_sel", c), kb.temp(I64, None, name + "_off", c), hint)
    assign_pointer(kb, lv, value, c)
    return lv


def pinned(kb: KernelBuilder, value: Pointer, name: str, c: ci.Cursor) -> Pointer:
    """``value`` with each index expression that reads a variable or memory (``float* p = a + i;``
    then ``i++``) computed now into a local of its own: the pointer keeps the address it was given,
    as in C, not one recomputed from later values. Expressions of constants and thread/block
    coordinates stay as they are."""
    def fixed(e: n.Expr | None, part: str) -> n.Expr | None:
        if e is None or not any(isinstance(x, (n.Var, n.Load, n.Call)) for x in walk(e)):
            return e
        var = kb.temp(e.type, e, f"{name}_{part}", c)
        return n.Var(var.name, var.type, loc=e.loc)

    prefix = tuple(fixed(e, "row") for e in value.prefix)
    offset = fixed(value.offset, "off")
    record = value.record
    if record is not None and record.terms:
        record = dataclasses.replace(record, terms=tuple((fixed(e, "at"), k) for e, k in record.terms))
    if prefix == value.prefix and offset is value.offset and record is value.record:
        return value
    return dataclasses.replace(value, prefix=prefix, offset=offset, record=record)  # type: ignore[arg-type]


def pending_pointer(kb: KernelBuilder, key: tuple, name: str, hint: tuple, init: n.Expr | None,
                    c: ci.Cursor) -> PendingPtrLV | ChoiceVarLV:
    """A pointer variable without a buffer yet (``T* p;``, a function's pointer result): its first
    assignment fixes the buffer (``assign_pending``), unless an earlier round found several."""
    known = kb.pointer_sets.get(hint)
    if known is not None:
        return ChoiceVarLV(known, kb.temp(I32, n.Const(0, I32), name + "_sel", c),
                           kb.temp(I64, n.Const(0, I64), name + "_off", c), hint)
    return PendingPtrLV(key, name, kb.temp(I64, init, name + "_off", c), hint)


def read_pointer_var(lv: ChoiceVarLV, loc: Loc | None, offset: n.Expr | None = None) -> PointerChoice:
    off = offset if offset is not None else n.Var(lv.offset_var.name, I64, loc=loc)
    return PointerChoice(n.Var(lv.sel_var.name, I32, loc=loc),
                         tuple(dataclasses.replace(o, offset=off) for o in lv.options))


def repoint(kb: KernelBuilder, hint: tuple | None, known: tuple[Pointer, ...], value: Pointer | PointerChoice,
            c: ci.Cursor) -> None:
    """A pointer variable pointed into a buffer it was not lowered for: noted, for the next round
    (this one emits nothing for the assignment, and its kernel is dropped)."""
    options = _merged(kb.discovered.get(hint, known), options_of(value))
    check_options(kb, options, c)
    if hint is None:
        raise kb.error("this pointer cannot be re-pointed into another buffer here", c)
    kb.discovered[hint] = options


def assign_pointer(kb: KernelBuilder, lv: PtrVarLV | ChoiceVarLV, value: Value | None, c: ci.Cursor) -> None:
    """``p = value`` of a pointer variable."""
    if not isinstance(value, (Pointer, PointerChoice)):
        raise kb.error("cannot tell which buffer this pointer points into", c)
    loc = kb.loc(c)
    if isinstance(lv, PtrVarLV):
        if lv.offset_var is None:
            raise kb.error("this pointer cannot be reassigned here", c)
        if isinstance(value, Pointer) and value.buffer == lv.base.buffer and value.prefix == lv.base.prefix \
                and value.stored == lv.base.stored:
            off = value.offset if value.offset is not None else n.Const(0, lv.offset_var.type)
            kb.emit(n.Assign(lv.offset_var.name, convert(off, lv.offset_var.type), loc=loc))
            return
        repoint(kb, lv.hint, (lv.base,), value, c)
        return
    options = options_of(value)
    positions = [_position(lv.options, o) for o in options]
    if None in positions:
        repoint(kb, lv.hint, lv.options, value, c)
        return
    offsets = [convert(o.offset if o.offset is not None else n.Const(0, I64), I64) for o in options]
    if isinstance(value, Pointer):
        kb.emit(n.Assign(lv.offset_var.name, offsets[0], loc=loc))
        kb.emit(n.Assign(lv.sel_var.name, n.Const(positions[0], I32), loc=loc))
        return
    # Through temporaries: the new value may read the variable itself (`p = c ? p + 1 : B`).
    sel = selector(value)
    if all(o == offsets[0] for o in offsets):
        new_sel = sel if positions == list(range(len(options))) else \
            choice_value(sel, [n.Const(k, I32) for k in positions], loc)  # type: ignore[misc]
        t_sel, t_off = kb.temp(I32, new_sel, "sel", c), kb.temp(I64, offsets[0], "off", c)
    else:
        t_sel, t_off = kb.temp(I32, None, "sel", c), kb.temp(I64, None, "off", c)

        def body(k: int) -> None:
            kb.emit(n.Assign(t_off.name, offsets[k], loc=loc))
            kb.emit(n.Assign(t_sel.name, n.Const(positions[k], I32), loc=loc))

        branches(kb, sel, len(options), body, loc)
    kb.emit(n.Assign(lv.offset_var.name, n.Var(t_off.name, I64), loc=loc))
    kb.emit(n.Assign(lv.sel_var.name, n.Var(t_sel.name, I32), loc=loc))


def assign_pending(kb: KernelBuilder, lv: PendingPtrLV, value: Value | None, c: ci.Cursor) -> PtrVarLV:
    """The first assignment of a pointer declared without a buffer fixes its buffer; a choice of
    buffers makes it a ``ChoiceVarLV`` from its declaration on (the next round)."""
    if isinstance(value, PointerChoice):
        repoint(kb, lv.hint, (), value, c)
        value = value.options[0]  # for the rest of this round only
    if not isinstance(value, Pointer):
        raise kb.error(f"cannot tell which buffer pointer '{lv.name}' points into", c)
    bound = PtrVarLV(dataclasses.replace(value, offset=None), lv.offset_var, lv.hint)
    for frame in reversed(kb.frames):
        if lv.key in frame.env:
            frame.env[lv.key] = bound
            break
    return bound


def settled(kb: KernelBuilder, v: PointerChoice, c: ci.Cursor) -> PointerChoice:
    """``v`` with one offset for all candidates (held in a local where they differ)."""
    if all(o.offset == v.options[0].offset for o in v.options):
        return v
    var = ChoiceVarLV(_merged((), v.options), kb.temp(I32, None, "sel", c), kb.temp(I64, None, "off", c))
    assign_pointer(kb, var, v, c)
    return read_pointer_var(var, kb.loc(c))


# --------------------------------------------------------------------------- expressions

def choose_pointer(kb: KernelBuilder, cond: n.Expr, a: Pointer | PointerChoice, b: Pointer | PointerChoice,
                   a_stmts: list[n.Stmt], b_stmts: list[n.Stmt], c: ci.Cursor) -> PointerChoice:
    """``cond ? a : b`` of pointers into different buffers."""
    options = options_of(a) + options_of(b)
    check_options(kb, options, c)
    loc = kb.loc(c)
    if not a_stmts and not b_stmts:
        first = n.Const(len(options_of(a)), I32)  # b's candidates come after a's
        sb = n.Binary("add", selector(b), first, loc=loc) if isinstance(b, PointerChoice) else first
        which = kb.temp(I32, n.Select(cond, selector(a), sb, loc=loc), "which", c)  # the choice, made here
        return PointerChoice(n.Var(which.name, I32, loc=loc), options)
    var = ChoiceVarLV(_merged((), options), kb.temp(I32, None, "sel", c), kb.temp(I64, None, "off", c))
    with kb.sub_block() as then:
        kb.block.extend(a_stmts)
        assign_pointer(kb, var, a, c)
    with kb.sub_block() as orelse:
        kb.block.extend(b_stmts)
        assign_pointer(kb, var, b, c)
    kb.emit(n.If(cond, tuple(then), tuple(orelse), loc=loc))
    return read_pointer_var(var, loc)


def _apart(kb: KernelBuilder, a: Pointer, b: Pointer) -> bool:
    """Whether ``a`` and ``b`` point into different objects for sure: different buffers, not two
    that may be one allocation (pointer parameters, module arrays: a parameter may hold the
    address of another or of a module array)."""
    if a.buffer == b.buffer:
        return False

    def own(p: Pointer) -> bool:  # a shared or local array of the kernel
        buf = kb.buffers.get(p.buffer)
        return buf is not None and buf.space in ("shared", "local")

    def param(p: Pointer) -> bool:
        return any(q.name == p.buffer for q in kb.params)

    return own(a) or own(b) or not (param(a) or param(b))


_RELATIONS = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "-": "sub"}


def pointer_relation(kb: KernelBuilder, op: str, a: Pointer | PointerChoice, b: Pointer | PointerChoice,
                     c: ci.Cursor) -> n.Expr:
    """``a == b`` (and ``!=``, ``<``, ..., ``a - b``) where either may point into several buffers:
    per pair of candidates, their offsets in one buffer; pointers into two different objects are
    unequal, and C defines neither their order nor their difference (those pairs cannot occur in a
    valid program). Two candidates that may be one allocation (two pointer parameters) are refused."""
    loc = kb.loc(c)
    zero = n.Const(0, I64)
    cases: list[tuple[n.Expr, n.Expr]] = []
    for i, x in enumerate(options_of(a)):
        for j, y in enumerate(options_of(b)):
            if same_base(x, y):
                value: n.Expr | None = n.Binary(_RELATIONS[op], convert(x.offset or zero, I64),
                                                convert(y.offset or zero, I64), loc=loc)
            elif x.buffer == y.buffer or not _apart(kb, x, y):
                raise kb.error(f"'{op}' of pointers that may point into '{x.buffer}' and '{y.buffer}' (which may be "
                               "one allocation, or are different rows or views of one) is not supported in device "
                               "code", c)
            elif op in ("==", "!="):
                value = n.Const(op == "!=", BOOL)
            else:
                value = None  # undefined in C: never the case in a valid program
            if value is not None:
                test = n.Binary("land", n.Binary("eq", selector(a), n.Const(i, I32), loc=loc),
                                n.Binary("eq", selector(b), n.Const(j, I32), loc=loc), loc=loc)
                cases.append((test, value))
    if not cases:
        raise kb.error(f"'{op}' of pointers into different buffers is not defined", c)
    out = cases[-1][1]
    for test, value in reversed(cases[:-1]):
        out = n.Select(test, value, out, loc=loc)
    return out


def pointer_arith(kb: KernelBuilder, op: str, a: Value | None, b: Value | None, c: ci.Cursor) -> Value:
    """``p + k``, ``k + p``, ``p - k``, ``p - q`` and the comparisons of pointers."""
    if op in ("+", "-") and isinstance(a, (Pointer, PointerChoice)) and isinstance(b, n.Expr):
        delta = b if op == "+" else negated_offset(b)
        if isinstance(a, PointerChoice):
            return shifted(a, delta)
        return dataclasses.replace(a, offset=add_offsets(a.offset, delta))
    if op == "+" and isinstance(b, (Pointer, PointerChoice)) and isinstance(a, n.Expr):
        return pointer_arith(kb, op, b, a, c)
    if op not in _RELATIONS or not isinstance(a, (Pointer, PointerChoice)) or \
            not isinstance(b, (Pointer, PointerChoice)):
        raise kb.error(f"pointer operation '{op}' is not supported in device code", c)
    st = tm.scalar_type(c.type)
    if isinstance(a, PointerChoice) or isinstance(b, PointerChoice):
        result = pointer_relation(kb, op, a, b, c)
        return convert(result, st) if st is not None else result
    # `p - q`, `p < q`: C defines them for two pointers into one array, in elements of their type
    # (the equality of pointers into different parameters depends on the arguments, which may alias).
    if a.buffer != b.buffer or a.prefix != b.prefix or a.stored != b.stored or a.record is not None \
            or b.record is not None or a.layout.stride != b.layout.stride or a.layout.scalar != b.layout.scalar:
        if op == "-":
            raise kb.error("the difference of pointers into different buffers (or rows, or views) is not "
                           "supported in device code", c)
        raise kb.error(f"comparing pointers into different buffers (or rows, or views) with '{op}' is not "
                       "supported in device code", c)
    zero = n.Const(0, I64)
    result = n.Binary(_RELATIONS[op], convert(a.offset or zero, I64), convert(b.offset or zero, I64), loc=kb.loc(c))
    return convert(result, st) if st is not None else result


def atomic_choice(kb: KernelBuilder, lv: ChoiceLV, at: Callable[[LValue], n.Expr | None], discard: bool,
                  c: ci.Cursor) -> n.Expr | None:
    """An atomic through a pointer into one of several buffers: ``at(place)`` (the atomic on one
    candidate's place, giving the old value) in the branch of the buffer it points into."""
    loc = kb.loc(c)
    old = None if discard else kb.temp(lv.type, None, "old", c)

    def body(k: int) -> None:
        value = at(lv.options[k])
        if old is not None and value is not None:
            kb.emit(n.Assign(old.name, value, loc=loc))

    branches(kb, lv.sel, len(lv.options), body, loc)
    return None if old is None else n.Var(old.name, old.type, loc=loc)
