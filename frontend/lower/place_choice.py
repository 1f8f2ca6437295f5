"""References chosen at run time among a known set of places: ``cond ? a : b`` as a place
(``(c ? x : y) = v``, ``float& pick(int i) { return i ? a : b; }``) and a function returning a
reference from several ``return``s (``T& operator[](int i) { switch (i) { case 0: return x;
... } }``).

The place is one of the candidates, the one a selector variable names: reads and writes are
branches over the selector (``ChoiceLV``, as for a pointer into one of several buffers), so
each access touches exactly the place CUDA's reference names. A candidate must stay in scope
after the call (its index reads no local of the callee's body) and evaluating a side of the
conditional must compute nothing but the place."""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import I32
from polypy.ir.visitor import walk

from frontend.lower.context import CK
from frontend.values import AggLV, ChoiceLV, LValue, RecLV, RefResult, VarLV

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def conditional_place(kb: KernelBuilder, c: ci.Cursor) -> LValue:
    """``cond ? a : b`` where both sides are places of one type (a C++ lvalue conditional)."""
    cond_c, a_c, b_c = list(c.get_children())
    cond = kb.condition(cond_c)
    if isinstance(cond, n.Const):  # `_Nm ? *(end() - 1) : *end()` (std::array's back()): one side only
        return kb.lvalue(a_c if cond.value else b_c)
    with kb.sub_block() as a_stmts:
        a = kb.lvalue(a_c)
    with kb.sub_block() as b_stmts:
        b = kb.lvalue(b_c)
    if not (_selectors(a_stmts, a_c) and _selectors(b_stmts, b_c)):
        raise kb.error("a side of this conditional place computes more than the place (name the place first: "
                       "a reference variable)", c)
    for stmt in a_stmts + b_stmts:  # a nested conditional's selector: computed either way
        kb.emit(stmt)
    sel = kb.temp(I32, n.Select(cond, n.Const(0, I32), n.Const(1, I32), loc=kb.loc(c)), "which", c)
    return choose(kb, n.Var(sel.name, I32), [a, b], c)


def _selectors(stmts: list[n.Stmt], side: ci.Cursor) -> bool:
    """Whether a side's statements are only the selector of a nested conditional place
    (``k == 0 ? x : (k == 1 ? y : z)``) reading no memory: computing it when the other side is
    taken changes nothing and cannot fault."""
    if not stmts:
        return True
    inner = side
    while inner.kind in (CK.PAREN_EXPR, CK.UNEXPOSED_EXPR) and len(list(inner.get_children())) == 1:
        inner = next(iter(inner.get_children()))
    return inner.kind == CK.CONDITIONAL_OPERATOR and all(
        isinstance(s, n.Decl) and not any(isinstance(x, (n.Load, n.Call)) for x in walk(s)) for s in stmts)


def choose(kb: KernelBuilder, sel: n.Expr, places: list[LValue], c: ci.Cursor) -> LValue:
    """The place among ``places`` that ``sel`` (0, 1, ...) names: per scalar member, a
    ``ChoiceLV``."""
    if len(places) == 1:
        return places[0]
    places = [kb.expand_record(p, c) if isinstance(p, RecLV) else p for p in places]
    first = places[0]
    if isinstance(first, AggLV):
        if not all(isinstance(p, AggLV) and p.fields.keys() == first.fields.keys() for p in places):
            raise kb.error("a reference to one of several records polypy cannot lay out alike", c)
        return AggLV({path: choose(kb, sel, [p.fields[path] for p in places], c)  # type: ignore[union-attr]
                      for path in first.fields}, first.spelling)
    types = {getattr(p, "type", None) for p in places}
    if len(types) != 1 or None in types:
        raise kb.error("a reference to one of several places polypy cannot follow", c)
    return ChoiceLV(sel, tuple(places), first.type)  # type: ignore[union-attr]


def returned_place(kb: KernelBuilder, result: RefResult, place: LValue, c: ci.Cursor) -> None:
    """``return place;`` of a function returning a reference from several ``return``s: the
    selector takes the place's position among the candidates."""
    assert result.choices is not None and result.sel is not None
    if place in result.choices:
        k = result.choices.index(place)
    else:
        k = len(result.choices)
        result.choices.append(place)
    kb.emit(n.Assign(result.sel.name, n.Const(k, I32), loc=kb.loc(c)))


def chosen_place(kb: KernelBuilder, result: RefResult, body: list[n.Stmt], fn: ci.Cursor, c: ci.Cursor) -> LValue:
    """After the inlined ``body``: the place the call's reference names."""
    assert result.choices is not None and result.sel is not None
    if not result.choices:
        raise kb.error(f"'{fn.spelling}' returns no place polypy can follow", c)
    declared = {s.name for stmt in body for s in walk(stmt) if isinstance(s, n.Decl)}
    for place in result.choices:
        inner = sorted(_names(place) & declared)
        if inner:
            raise kb.error(f"'{fn.spelling}' returns a reference to a place indexed by its own local '{inner[0]}', "
                           "which is not supported", c)
    return choose(kb, n.Var(result.sel.name, I32), list(result.choices), c)


def _names(place) -> set[str]:
    """The variables a place's IR names (its indices; a variable itself)."""
    found: set[str] = set()
    stack = [place]
    while stack:
        x = stack.pop()
        if isinstance(x, n.Expr):
            found.update(e.name for e in walk(x) if isinstance(e, n.Var))
        elif isinstance(x, VarLV):
            found.add(x.name)
        elif isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, (tuple, list)):
            stack.extend(x)
        elif hasattr(x, "__dataclass_fields__"):
            stack.extend(getattr(x, f) for f in x.__dataclass_fields__)
    return found
