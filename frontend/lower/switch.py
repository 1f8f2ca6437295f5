"""``switch`` statements, lowered to structured ``if``s.

The body of a switch is read as segments: a run of case labels (``case 1: case 2:``, ``default:``)
followed by the statements up to the next label. Every case label must sit at the top level of
the body; a label inside a nested statement (Duff's device) has no structured form and is refused.

When no segment falls through into the next (each ends with ``break``, or is the last one) and
no ``break`` is buried inside a segment, the switch is an if/else chain, ``default`` last::

    switch (v) {                     if (v == 0) { A }
      case 0: A; break;       ==>    else if (v == 1 || v == 2) { B }
      case 1: case 2: B; break;      else { C }
      default: C;
    }

Otherwise a ``fall`` flag carries fallthrough from one segment into the next, and each ``break``
leaves the switch through ``remove_returns`` (the switch body is lowered with ``break`` spelled
as a marker ``Return``, which is exactly "leave this block")::

    bool fall = false;
    if (fall || v == 0) { fall = true; A }          (a break: the rest of the switch is skipped)
    if (fall || v != 0 && v != 1) { fall = true; D }
    ...
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.jumps import escaping_jumps
from polypy.ir.types import BOOL, I64, U64
from polypy.passes.eliminate_returns import remove_returns

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.clang_setup import evaluate, preorder
from frontend.lower.context import CK, decl_key

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder

_LABELS = (CK.CASE_STMT, CK.DEFAULT_STMT)


@dataclasses.dataclass
class _Segment:
    labels: list[tuple[int, int] | None]  # (low, high) of a case (low == high but for GNU ranges); None: default
    stmts: list[ci.Cursor]
    cursor: ci.Cursor  # the first label, for locations


def switch_stmt(kb: KernelBuilder, c: ci.Cursor) -> None:
    children = list(c.get_children())
    if len(children) != 2 or children[0].kind in (CK.DECL_STMT, CK.VAR_DECL):
        raise kb.error("declarations in switch conditions are not supported", children[0])
    cond_c, body_c = children
    st = tm.scalar_type(cond_c.type)
    if st is None or not st.is_int:
        raise kb.error("switch on a value that is not an integer", cond_c)
    segments = switch_segments(kb, body_c)
    value = kb.scalar(cond_c)
    if not isinstance(value, (n.Var, n.Const)):
        var = kb.temp(st, value, "sw", cond_c)
        value = n.Var(var.name, st)
    # Lower each segment with `break` spelled as a marker return (see the module docstring).
    saved_depth = kb.loop_depth
    kb.loop_depth = 0
    markers: dict[int, n.Return] = {}
    kb.switch_markers.append(markers)
    lowered: list[tuple[_Segment, tuple[n.Stmt, ...]]] = []
    try:
        for seg in segments:
            with kb.sub_block() as out:
                for s in seg.stmts:
                    kb.statement(s)
            lowered.append((seg, tuple(out)))
    finally:
        kb.switch_markers.pop()
        kb.loop_depth = saved_depth
    check_segment_scopes(kb, segments)
    loc = kb.loc(c)
    all_cases = [lab for seg in segments for lab in seg.labels if lab is not None]

    def match(seg: _Segment) -> n.Expr:
        terms: list[n.Expr] = []
        for lab in seg.labels:
            if lab is None:
                terms.append(n.Unary("not", _any_case(value, all_cases, loc), loc=loc))
            else:
                terms.append(_in_case(value, lab, loc))
        return _join("lor", terms, loc)

    # Fold empty segments that fall through into the next one (`case 1: ; case 2: ...`).
    merged: list[tuple[_Segment, tuple[n.Stmt, ...]]] = []
    for seg, body in lowered:
        if merged and not merged[-1][1]:
            prev, _ = merged.pop()
            seg = _Segment(prev.labels + seg.labels, seg.stmts, prev.cursor)
        merged.append((seg, body))
    plain = []  # (segment, body without its tail break) when no segment falls through
    for i, (seg, body) in enumerate(merged):
        tail = bool(body) and id(body[-1]) in markers
        inner = body[:-1] if tail else body
        if any(id(j) in markers for j in escaping_jumps(inner, n.Return)):
            plain = None
            break
        jumps = bool(body) and isinstance(body[-1], (n.Return, n.Continue))  # a real return, a continue
        if not tail and not jumps and i + 1 < len(merged):
            plain = None
            break
        plain.append((seg, inner))
    if plain is not None:
        emit_switch_chain(kb, plain, match, loc)
        return
    # General form: a fall flag, breaks through remove_returns.
    for seg, body in merged:
        for j in escaping_jumps(body, n.Return):
            if id(j) not in markers:
                raise kb.error("return inside a switch with fallthrough or a nested break is not supported; "
                               "end each case with break", seg.cursor)
    fall = kb.temp(BOOL, n.Const(False, BOOL), "fall", c)
    fall_v = n.Var(fall.name, BOOL)
    block = tuple(
        n.If(n.Binary("lor", fall_v, match(seg), loc=loc),
             (n.Assign(fall.name, n.Const(True, BOOL), loc=loc),) + body, loc=loc)
        for seg, body in merged)
    for s in remove_returns(block, kb.names.fresh):
        kb.emit(s)


def emit_switch_chain(kb: KernelBuilder, plain, match, loc) -> None:
    default = [(seg, body) for seg, body in plain if None in seg.labels]
    cases = [(seg, body) for seg, body in plain if None not in seg.labels]
    orelse: tuple[n.Stmt, ...] = default[0][1] if default else ()
    for seg, body in reversed(cases):
        if not body and not orelse:
            continue
        if body and isinstance(body[-1], n.Return):
            # `case 1: ...; return;` needs no else: the rest follows the if, which keeps the
            # common `if (c) { A; return } B` shape for remove_returns.
            orelse = (n.If(match(seg), body, loc=loc),) + orelse
        else:
            orelse = (n.If(match(seg), body, orelse, loc=loc),)
    for s in orelse:
        kb.emit(s)


def switch_segments(kb: KernelBuilder, body: ci.Cursor) -> list[_Segment]:
    items = list(body.get_children()) if body.kind == CK.COMPOUND_STMT else [body]
    segments: list[_Segment] = []
    for item in items:
        if item.kind in _LABELS:
            labels: list[tuple[int, int] | None] = []
            first = item
            while item.kind in _LABELS:
                parts = list(item.get_children())
                if item.kind == CK.DEFAULT_STMT:
                    labels.append(None)
                else:
                    values = [evaluate(p) for p in parts[:-1]]
                    if not values or any(not isinstance(v, int) for v in values):
                        raise kb.error("case label is not an integer constant", item)
                    labels.append((values[0], values[-1]))
                item = parts[-1]
            segments.append(_Segment(labels, [], first))
            if item.kind == CK.NULL_STMT:
                continue
        if not segments:
            if item.kind == CK.NULL_STMT:
                continue
            raise kb.error("statement before the first case label of a switch (never executed) "
                           "is not supported", item)
        segments[-1].stmts.append(item)
    for seg in segments:
        for s in seg.stmts:
            nested = _nested_label(s)
            if nested is not None:
                raise kb.error("case label inside a nested statement of a switch (such as Duff's device) "
                               "is not supported", nested)
    return segments


def check_segment_scopes(kb: KernelBuilder, segments: list[_Segment]) -> None:
    """A variable declared in one case and used in a later one has no structured form."""
    declared: dict[tuple, ci.Cursor] = {}
    for seg in segments:
        for s in seg.stmts:
            for ref in preorder(s):
                if ref.kind == CK.DECL_REF_EXPR and ref.referenced is not None and \
                        decl_key(ref.referenced) in declared:
                    raise kb.error(f"'{ref.spelling}' is declared under another case label of this switch; "
                                   "declare it before the switch", ref)
        for s in seg.stmts:
            if s.kind == CK.DECL_STMT:
                for d in s.get_children():
                    declared[decl_key(d)] = d


def _nested_label(c: ci.Cursor) -> ci.Cursor | None:
    """A case/default label inside ``c`` that belongs to the enclosing switch."""
    if c.kind == CK.SWITCH_STMT:
        return None  # its labels are its own
    for ch in c.get_children():
        if ch.kind in _LABELS:
            return ch
        if ch.kind == CK.SWITCH_STMT:
            continue  # its labels are its own
        found = _nested_label(ch)
        if found is not None:
            return found
    return None


def _in_case(value: n.Expr, lab: tuple[int, int], loc) -> n.Expr:
    # Case values convert to the type of the switch value as C converts them (wrapping).
    lo, hi = (convert(n.Const(v, I64 if v < 2 ** 63 else U64), value.type) for v in lab)
    if lab[0] == lab[1]:
        return n.Binary("eq", value, lo, loc=loc)
    return n.Binary("land", n.Binary("le", lo, value, loc=loc), n.Binary("le", value, hi, loc=loc), loc=loc)


def _any_case(value: n.Expr, cases: list[tuple[int, int]], loc) -> n.Expr:
    return _join("lor", [_in_case(value, lab, loc) for lab in cases], loc)


def _join(op: str, terms: list[n.Expr], loc) -> n.Expr:
    if not terms:
        return n.Const(op == "land", BOOL)
    out = terms[0]
    for t in terms[1:]:
        out = n.Binary(op, out, t, loc=loc)
    return out
