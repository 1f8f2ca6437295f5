"""Accesses through pointers held in ``__constant__``/``__device__`` records, for the race checks.

The frontend lowers ``d_unique[bx].d_in2[ei]`` to an access of a hidden pool parameter at an
index read from memory (``n.HeldPointerSlots``, ``frontend/lower/held_pointers.py``)::

    pool[(i64)(d_unique_u64[bx * 29 + 9] - base) / 4l + (i64)ei]

For the model that index is unknown: the access is a may-access of a pointer parameter that may
alias every other one, which keeps barrier decisions and footprints sound. The race warnings
want the opposite side, races that certainly happen, and one fact gives them: the record's
bytes cannot change during a launch (``__constant__`` memory; a kernel storing a pointer member
is refused), so two accesses that read the pointer from the same *slot* (the same element of the
same view of the symbol, ``bx * 29 + 9``) go through the same pointer, and touch the same element
exactly when their offsets from it (``ei``) are equal. ``held_index`` splits such an index into
``(key, slot, offset)``; ``as_held_array`` gives the race checks the access as one of a 2-D array
``key`` indexed ``[slot, offset]``, on which ``Copies.same_element`` ("certainly the same
element") holds exactly where it should (a pointer copied into a local first is seen through
where the local certainly holds one value: ``polypy.poly.held_locals``). Two different slots
may hold the same pointer or overlapping ones: such pairs *may* race, and are not reported (a
warning is a race that certainly happens, ``write_conflicts``); barrier elimination and
lockstep keep treating every pool access as may-aliasing everything (the safe side).
"""
from __future__ import annotations

import dataclasses
from typing import Protocol

import islpy as isl

from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.poly.index_shapes import signed_terms
from polypy.poly.instances import Access


class _IntConverter(Protocol):
    def int_expr(self, e: n.Expr, ctx: isl.Set) -> isl.PwAff | None: ...

    def const(self, value: int) -> isl.PwAff: ...


def held_pools(kernel: n.Kernel) -> dict[str, n.HeldPointerSlots]:
    """The pool parameters of ``kernel``'s held pointers, by name."""
    return {s.pool: s for s in kernel.held_pointers}


def held_index(slots: n.HeldPointerSlots, index: n.Expr, conv: _IntConverter,
               dom: isl.Set) -> tuple[str, isl.PwAff, isl.PwAff] | None:
    """``index`` of an access of ``slots.pool`` as ``(key, slot, offset)``: the pointer read from
    element ``slot`` of the view ``key`` names, plus ``offset`` elements (both quasi-affine on
    ``dom``). None where the index has another shape or a part the model cannot read."""
    pointer: tuple[str, isl.PwAff] | None = None
    offset = None
    for sign, term in signed_terms(index, 1):
        read = pointer_read(slots, term)
        if read is not None:
            if pointer is not None or sign < 0:
                return None  # two pointers, or a pointer subtracted: not an element of one
            slot = conv.int_expr(read.index[0], dom)
            if slot is None:
                return None
            pointer = (read.buffer, slot)
            continue
        value = conv.int_expr(term, dom)
        if value is None:
            return None
        value = value if sign > 0 else -value
        offset = value if offset is None else offset + value
    if pointer is None:
        return None
    key, slot = pointer
    if offset is None:
        offset = conv.const(0)
    return f"{slots.pool}@{key}", slot, offset


def held_text(slots: n.HeldPointerSlots, index: n.Expr) -> str | None:
    """An access of ``slots.pool`` at ``index`` as the source spells its pointer, the offset as
    the model spells indices: ``d_unique[bx].d_in2[(i64)ei]`` (not ``pool[(i64)(d_unique_u64[bx
    * 29 + 9] - base) / 4l + (i64)ei]``). None where the index has another shape or the source
    text of the pointer read is not known (``HeldPointerSlots.spellings``)."""
    spelling = None
    offset = ""
    for sign, term in signed_terms(index, 1):
        read = pointer_read(slots, term)
        if read is not None:
            if spelling is not None or sign < 0:
                return None
            spelling = next((text for loc, text in slots.spellings if loc == read.loc), None)
            if spelling is None:
                return None
            continue
        text = format_expr(term)
        offset += (" - " if sign < 0 else " + ") + text if offset else ("-" + text if sign < 0 else text)
    if spelling is None:
        return None
    return f"{spelling}[{offset or '0'}]"


def pointer_read(slots: n.HeldPointerSlots, term: n.Expr) -> n.Load | None:
    """The load of the pointer in ``(i64)(view[slot] - base) / size`` (``/ size`` absent for
    1-byte elements), the frontend's shape of a held pointer's element index."""
    size = slots.elem.itemsize
    if size != 1:
        if not (isinstance(term, n.Binary) and term.op == "div" and isinstance(term.b, n.Const)
                and int(term.b.value) == size):
            return None
        term = term.a
    while isinstance(term, n.Cast) and term.to.is_int and term.x.type.is_int:
        term = term.x
    if not (isinstance(term, n.Binary) and term.op == "sub" and isinstance(term.b, n.Var)
            and term.b.name == slots.base and isinstance(term.a, n.Load) and len(term.a.index) == 1):
        return None
    return term.a


def as_held_array(a: Access) -> Access | None:
    """``a`` (an access through a held pointer with an exact domain, slot and offset) as an
    access of the array ``key`` at ``[slot, offset]``, for the race checks only (see above)."""
    if a.held is None or not a.domain_exact:
        return None
    key, slot, offset = a.held
    return dataclasses.replace(a, buffer=key, elems=(slot, offset), delin=())


def race_accesses(accesses: tuple[Access, ...] | list[Access]) -> list[Access]:
    """The global accesses the race checks judge: the exact ones, and those through held
    pointers as ``as_held_array`` gives them."""
    out = []
    for a in accesses:
        if a.space not in ("global", "device"):
            continue
        if a.exact:
            out.append(a)
            continue
        held = as_held_array(a)
        if held is not None:
            out.append(held)
    return out
