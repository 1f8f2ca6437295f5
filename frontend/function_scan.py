"""One walk of a function's cursors for the questions the frontend asks about all of its code:
which functions it calls (whose code ``frontend.bases`` goes on to read), which conversions
between records it makes (``frontend.bases``), which declarations each kind of reference names,
by the file that declares them (``frontend.lower.cccl``), and which variables it assigns
(``KernelBuilder.assigned_decls``).

Each of these questions was a walk of its own over every cursor of the function (a preorder
through libclang costs about 20 us a cursor: three walks were a tenth of ``translate`` on a
long sum). ``scan(fn)`` walks once and keeps only the answers; it is kept per translation unit
and function cursor, for the last few units only, so that a function inlined at many calls, or
asked about by each of these modules, is walked once. (Not a weak mapping keyed by the unit: the
answers hold cursors, every cursor holds its unit, so no unit would ever be freed.)
"""
from __future__ import annotations

import dataclasses

import clang.cindex as ci

from frontend.clang_setup import binary_operator, child_cursors, file_name, preorder, unary_operator
from frontend.unit_cache import PerUnit

CK = ci.CursorKind
TK = ci.TypeKind

# References whose declarations ``frontend.bases`` follows into the functions they name.
_CALLING = (CK.CALL_EXPR, CK.MEMBER_REF_EXPR, CK.DECL_REF_EXPR)
_FUNCTIONS = (CK.FUNCTION_DECL, CK.CXX_METHOD, CK.CONSTRUCTOR, CK.DESTRUCTOR, CK.CONVERSION_FUNCTION)
# References whose declarations' files ``frontend.lower.cccl`` checks. Not NAMESPACE_REF: a namespace is
# open, and `cuda::` of polypy's own <cuda/pipeline> is the one that CCCL's <cuda/std/...> opened first;
# the names used in it are checked where they are declared.
NAMING = (CK.TYPE_REF, CK.TEMPLATE_REF, CK.DECL_REF_EXPR, CK.MEMBER_REF_EXPR, CK.CALL_EXPR, CK.OVERLOADED_DECL_REF)
_REFERRING = frozenset(_CALLING + NAMING)
_ASSIGNING = (CK.BINARY_OPERATOR, CK.COMPOUND_ASSIGNMENT_OPERATOR)
_WRAPPERS = (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR)


@dataclasses.dataclass
class FunctionScan:
    """What one preorder of a function's cursors found (see the module docstring)."""

    # Definitions of the functions that its calls and references name, in preorder.
    callees: list[ci.Cursor] = dataclasses.field(default_factory=list)
    # (to, from): the record types of each implicit conversion (an unexposed expression of one
    # operand) between two different records, in preorder.
    conversions: list[tuple[ci.Type, ci.Type]] = dataclasses.field(default_factory=list)
    # For each file that declares something a reference of ``NAMING`` names: the first such
    # reference and the declaration it names (in the order of these first references).
    first_reference_into: dict[str, tuple[ci.Cursor, ci.Cursor]] = dataclasses.field(default_factory=dict)
    # Its calls (``CALL_EXPR``), in preorder: for the host code's questions (launches, copies, symbols).
    calls: list[ci.Cursor] = dataclasses.field(default_factory=list)
    # Its references (``DECL_REF_EXPR``) to functions and function templates, in preorder: the
    # kernels that host code names as values (``frontend.kernel_values``).
    function_refs: list[ci.Cursor] = dataclasses.field(default_factory=list)
    # The declarations of the variables it assigns (``p = q``, ``p += k``, ``p++``), in preorder.
    assigned: list[ci.Cursor] = dataclasses.field(default_factory=list)


def scan(fn: ci.Cursor) -> FunctionScan:
    """``fn``'s scan, made on the first question about ``fn`` in its unit."""
    scans = _SCANS.of(fn.translation_unit)
    found = scans.get(fn)
    if found is None:
        found = scans[fn] = _scan(fn)
    return found


# Per translation unit, the scans made: the units used last (``frontend.unit_cache``).
_SCANS: PerUnit = PerUnit(kept=4)


def _scan(fn: ci.Cursor) -> FunctionScan:
    out = FunctionScan()
    for c in preorder(fn):
        kind = c.kind
        if kind == CK.CALL_EXPR:
            out.calls.append(c)
        if kind in _REFERRING:
            _reference(out, c, kind)
        elif kind == CK.UNEXPOSED_EXPR:
            _conversion(out, c)
        if kind in _ASSIGNING:
            op = binary_operator(c)
            if op.endswith("=") and op not in ("==", "!=", "<=", ">="):
                _assigned(out, next(iter(c.get_children()), None))
        elif kind == CK.UNARY_OPERATOR and unary_operator(c) in ("++", "--"):
            _assigned(out, next(iter(c.get_children()), None))
    return out


def _reference(out: FunctionScan, c: ci.Cursor, kind: ci.CursorKind) -> None:
    ref = c.referenced
    if ref is None:
        return
    ref_kind = ref.kind
    if kind in _CALLING and ref_kind in _FUNCTIONS:
        d = ref.get_definition()
        if d is not None:
            out.callees.append(d)
    if kind == CK.DECL_REF_EXPR and (ref_kind in _FUNCTIONS or ref_kind == CK.FUNCTION_TEMPLATE):
        out.function_refs.append(c)
    if kind in NAMING:
        where = file_name(ref)
        if where is not None and where not in out.first_reference_into:
            out.first_reference_into[where] = (c, ref)


def _conversion(out: FunctionScan, c: ci.Cursor) -> None:
    to = _record_of(c.type)  # (first: most conversions are to arithmetic types, and their operand is not asked for)
    if to is None:
        return
    children = child_cursors(c)
    if len(children) != 1:
        return
    source = _record_of(children[0].type)
    if source is not None and to.get_declaration() != source.get_declaration():
        out.conversions.append((to, source))


# Type kinds that are their own canonical type and no record, pointer or reference (asked first:
# canonicalizing is a call into libclang).
_ARITHMETIC = frozenset((TK.BOOL, TK.CHAR_U, TK.UCHAR, TK.USHORT, TK.UINT, TK.ULONG, TK.ULONGLONG, TK.CHAR_S,
                         TK.SCHAR, TK.SHORT, TK.INT, TK.LONG, TK.LONGLONG, TK.FLOAT, TK.DOUBLE, TK.VOID))


def _record_of(t: ci.Type) -> ci.Type | None:
    if t.kind in _ARITHMETIC:
        return None
    c = t.get_canonical()
    if c.kind in (TK.POINTER, TK.LVALUEREFERENCE, TK.RVALUEREFERENCE):
        c = c.get_pointee().get_canonical()
    return c if c.kind == TK.RECORD else None


def _assigned(out: FunctionScan, target: ci.Cursor | None) -> None:
    while target is not None and target.kind in _WRAPPERS:
        target = next(iter(target.get_children()), None)
    if target is not None and target.kind == CK.DECL_REF_EXPR and target.referenced is not None:
        out.assigned.append(target.referenced)
