"""How a host function uses a pointer variable, read from its cursors: what a reference to a
device or host pointer does, the libc and runtime calls that read or write through one, and the
checks a copy between host and device must pass to be left out (``frontend.host_copies``, whose
docstring states the conditions). A check that fails raises ``Refused`` with the reason."""
from __future__ import annotations

import clang.cindex as ci

from frontend.clang_setup import binary_operator, evaluate, unary_operator
from frontend.launch_shapes import HostFunction, Pos

CK = ci.CursorKind

# Writes and reads each libc/runtime call makes through a pointer argument, by argument position.
CALLS: dict[str, tuple[frozenset[int], frozenset[int]]] = {
    "memset": (frozenset({0}), frozenset()),
    "memcpy": (frozenset({0}), frozenset({1})),
    "memmove": (frozenset({0}), frozenset({1})),
    "fread": (frozenset({0}), frozenset()),
    "fwrite": (frozenset(), frozenset({0})),
    "cudaMemcpy": (frozenset({0}), frozenset({1})),
    "cudaMemset": (frozenset({0}), frozenset()),
}
ALLOCATORS = ("malloc", "calloc")  # a take rewrites these two: no new[] there
LOOPS = (CK.FOR_STMT, CK.WHILE_STMT, CK.DO_STMT, CK.CXX_FOR_RANGE_STMT)
CASTS = (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR, CK.CSTYLE_CAST_EXPR, CK.CXX_STATIC_CAST_EXPR,
          CK.CXX_REINTERPRET_CAST_EXPR, CK.CXX_CONST_CAST_EXPR, CK.CXX_FUNCTIONAL_CAST_EXPR)
SCALARS = frozenset({
    ci.TypeKind.BOOL, ci.TypeKind.CHAR_U, ci.TypeKind.UCHAR, ci.TypeKind.CHAR_S, ci.TypeKind.SCHAR,
    ci.TypeKind.SHORT, ci.TypeKind.USHORT, ci.TypeKind.INT, ci.TypeKind.UINT, ci.TypeKind.LONG,
    ci.TypeKind.ULONG, ci.TypeKind.LONGLONG, ci.TypeKind.ULONGLONG, ci.TypeKind.FLOAT, ci.TypeKind.DOUBLE,
})
MAX_ALIGN = 16  # bytes malloc and new[] align every block to (x86-64, AArch64)


class Refused(Exception):
    """A copy must be made: the message says why."""


def device_use(facts: HostFunction, r) -> tuple[str, ci.Cursor | None, int]:
    """What the reference ``r`` to a device pointer does: "alloc" (``&d`` given to
    ``cudaMalloc``), "address" (``&d`` otherwise), "launch" (an argument of a launch, with its
    position), "free" (``cudaFree``), "write" or "read" (a ``cudaMemcpy``/``cudaMemset``
    operand), or "other"; with the call it is in."""
    level, parent, index = parent_of(r)
    if parent is not None and parent.kind == CK.UNARY_OPERATOR and unary_operator(parent) == "&":
        _, call, i = parent_of(r, level)
        alloc = call is not None and call.kind == CK.CALL_EXPR and call.spelling == "cudaMalloc" and i == 1
        return ("alloc" if alloc else "address"), call, -1
    if parent is None or parent.kind != CK.CALL_EXPR:
        return "other", parent, -1
    if (parent.extent.start.offset, parent.extent.end.offset) in facts.launches:
        return ("launch" if index >= 2 else "other"), parent, index - 2
    if parent.spelling == "cudaFree" and index == 1:
        return "free", parent, -1
    if parent.spelling in ("cudaMemcpy", "cudaMemset"):
        writes, reads = CALLS[parent.spelling]
        if index - 1 in writes:
            return "write", parent, -1
        if index - 1 in reads:
            return "read", parent, -1
    return "other", parent, -1


def check_site(facts: HostFunction, call: ci.Cursor, var) -> None:
    """The copy ``call`` (which names ``var``) runs once per run of its function, where written:
    no ``goto`` in the function, no loop, ``switch`` or lambda around it, no macro making it."""
    if facts.has_goto:
        raise Refused("the function uses goto")
    start, end = call.extent.start.offset, call.extent.end.offset
    inside = [r for r in var.refs if start <= r.cursor.extent.start.offset < end]
    if not inside:
        raise Refused("the copy was not found in its function")
    if any(anc.kind in LOOPS or anc.kind in (CK.SWITCH_STMT, CK.LAMBDA_EXPR) for anc, _ in inside[0].ancestors):
        raise Refused("the copy is inside a loop, switch or lambda")
    if call.extent.start.file is None or call.location.file is None or \
            call.extent.start.file.name != call.location.file.name or \
            not spelled_in_file(call, "cudaMemcpy"):
        raise Refused("the copy is written by a macro")


def spelled_in_file(call: ci.Cursor, name: str) -> bool:
    """Whether the call's text starts with ``name`` itself (no macro makes it)."""
    return [t.spelling for t in call.get_tokens()][:1] == [name]


def check_null_init(decl: ci.Cursor) -> None:
    init = initializer_of(decl)
    if init is not None and not is_null(init):
        raise Refused(f"{decl.spelling} is initialized")


def assignment_of(facts: HostFunction, r, name: str) -> ci.Cursor | None:
    """The value assigned where the reference ``r`` is the left side of a statement ``v = e;``
    (None where it is not); an assignment inside an expression is refused."""
    raw, raw_pos = r.ancestors[-1]
    if not (raw.kind == CK.BINARY_OPERATOR and binary_operator(raw) == "=" and facts.index[r.pos] == 0):
        return None
    if facts.kind_above(raw_pos) != CK.COMPOUND_STMT:
        raise Refused(f"{name} is assigned inside an expression (line {r.cursor.location.line})")
    return list(raw.get_children())[-1]


def check_types(d: ci.Cursor, h: ci.Cursor) -> None:
    for v in (d, h):
        if v.storage_class == ci.StorageClass.STATIC:
            raise Refused(f"{v.spelling} is static")
        if v.type.get_canonical().kind != ci.TypeKind.POINTER:
            raise Refused(f"{v.spelling} is not a pointer")
    de, he = (v.type.get_canonical().get_pointee() for v in (d, h))
    if de.get_canonical().spelling.replace("const ", "") != he.get_canonical().spelling.replace("const ", ""):
        raise Refused(f"{d.spelling} and {h.spelling} have different element types")
    if not 0 < de.get_align() <= MAX_ALIGN:
        raise Refused(f"the elements of {d.spelling} need more alignment than malloc gives")


def scalar_record(t: ci.Type) -> bool:
    """Whether ``t`` (canonical) is a struct or union whose members are all scalars."""
    fields = list(t.get_fields()) if t.kind == ci.TypeKind.RECORD else []
    return bool(fields) and all(f.type.get_canonical().kind in SCALARS for f in fields)


def element_access(r, level: int, name: str) -> str:
    """"read", "write" or "none" (``sizeof``) for the element access ``h[i]`` at
    ``r.ancestors[level]``, or ``h[i].m`` where the elements are records of scalars."""
    sub = r.ancestors[level][0]
    line = r.cursor.location.line
    kind = sub.type.get_canonical()
    if kind.kind not in SCALARS:
        member = level - 1
        while member >= 0 and r.ancestors[member][0].kind == CK.PAREN_EXPR:
            member -= 1
        if not scalar_record(kind) or member < 0 or r.ancestors[member][0].kind != CK.MEMBER_REF_EXPR:
            raise Refused(f"the elements of {name} are not scalars (line {line})")
        level = member  # h[i].m: an access to a scalar, as h[i] is for scalar elements
    i = level - 1
    while i >= 0 and r.ancestors[i][0].kind == CK.PAREN_EXPR:
        i -= 1
    if i < 0:
        raise Refused(f"{name}[...] is used otherwise (line {line})")
    parent = r.ancestors[i][0]
    index = r.facts.index[node_at(r, i + 1)[1]]
    if parent.kind == CK.UNEXPOSED_EXPR:  # lvalue-to-rvalue: a read, unless kept an lvalue (const T&)
        if parent.type.is_const_qualified():
            raise Refused(f"{name}[...] is bound to a reference (line {line})")
        return "read"
    op = binary_operator(parent) if parent.kind in (CK.BINARY_OPERATOR, CK.COMPOUND_ASSIGNMENT_OPERATOR) else ""
    if index == 0 and (op == "=" or parent.kind == CK.COMPOUND_ASSIGNMENT_OPERATOR):
        return "write"
    if parent.kind == CK.UNARY_OPERATOR and unary_operator(parent) in ("++", "--"):
        return "write"
    if parent.kind == CK.CXX_UNARY_EXPR:  # sizeof h[0]: not evaluated
        return "none"
    raise Refused(f"{name}[...] is used otherwise (line {line}): it could be reached through another pointer")


def check_release(r, name: str, last_d: int, d_freed: int | None) -> bool:
    """A release of the host buffer ``name`` a device array became: outside loops, after every
    use of that array but its ``cudaFree`` (``last_d``: the offset of the last such use;
    ``d_freed``: of its first ``cudaFree``, which must exist). Whether it comes before that
    ``cudaFree`` (then the memory is freed there: ``polypy_rt_shared_free``)."""
    line = r.cursor.location.line
    if any(anc.kind in LOOPS for anc, _ in r.ancestors):
        raise Refused(f"{name} is freed inside a loop (line {line})")
    use = r.cursor.extent.start.offset
    if d_freed is None or last_d > use:
        raise Refused(f"{name} is freed before the device array that became it (line {line})")
    return d_freed > use


def node_at(r, level: int) -> tuple[ci.Cursor, Pos]:
    """The cursor at ``level`` of a reference's ancestors; ``len(ancestors)``: the reference."""
    return (r.cursor, r.pos) if level == len(r.ancestors) else r.ancestors[level]


def parent_of(r, level: int | None = None) -> tuple[int, ci.Cursor | None, int]:
    """From ``level`` of a reference's ancestors (default: the reference itself) up through
    parentheses and casts to pointer types: (the level of the first other ancestor, that
    ancestor, the index among its children of the child leading down), or (-1, None, -1)."""
    level = len(r.ancestors) if level is None else level
    j = level - 1
    while j >= 0 and is_transparent(r.ancestors[j][0]):
        j -= 1
    if j < 0:
        return -1, None, -1
    return j, r.ancestors[j][0], r.facts.index[node_at(r, j + 1)[1]]


def is_transparent(c: ci.Cursor) -> bool:
    return c.kind == CK.PAREN_EXPR or (c.kind in CASTS and c.type.get_canonical().kind == ci.TypeKind.POINTER)


def initializer_of(decl: ci.Cursor) -> ci.Cursor | None:
    init = [ch for ch in decl.get_children() if ch.kind not in (CK.TYPE_REF, CK.NAMESPACE_REF, CK.TEMPLATE_REF)]
    return init[-1] if init else None


def call_args(call: ci.Cursor) -> list[ci.Cursor]:
    return list(call.get_children())[1:]


def copy_kind(call: ci.Cursor) -> str:
    args = call_args(call)
    if len(args) < 4:
        return ""
    k = stripped(args[3])
    return k.spelling if k.kind == CK.DECL_REF_EXPR else ""


def stripped(e: ci.Cursor) -> ci.Cursor:
    while e.kind in CASTS:
        children = [ch for ch in e.get_children() if ch.kind not in (CK.TYPE_REF, CK.NAMESPACE_REF)]
        if len(children) != 1:
            return e
        e = children[0]
    return e


def variable_of(e: ci.Cursor) -> ci.Cursor | None:
    """The local variable ``e`` names, through casts; None for any other expression."""
    e = stripped(e)
    if e.kind == CK.DECL_REF_EXPR and e.referenced is not None and e.referenced.kind == CK.VAR_DECL:
        return e.referenced
    return None


def is_null(e: ci.Cursor) -> bool:
    e = stripped(e)
    if e.kind in (CK.CXX_NULL_PTR_LITERAL_EXPR, CK.GNU_NULL_EXPR):
        return True
    return e.kind == CK.INTEGER_LITERAL and evaluate(e) == 0


def is_allocation(e: ci.Cursor) -> bool:
    e = stripped(e)
    if e.kind == CK.CXX_NEW_EXPR:
        return True
    return e.kind == CK.CALL_EXPR and e.spelling in ALLOCATORS


def is_test(r, level: int) -> bool:
    """A null test of the pointer at ``level`` of a reference's ancestors: ``!h``, ``h == NULL``,
    ``if (h)``, ``h && ...`` (through the conversion to ``bool``)."""
    while level >= 0 and r.ancestors[level][0].kind == CK.UNEXPOSED_EXPR and \
            r.ancestors[level][0].type.get_canonical().kind == ci.TypeKind.BOOL:
        level -= 1
    if level < 0:
        return False
    parent = r.ancestors[level][0]
    index = r.facts.index[node_at(r, level + 1)[1]]
    if parent.kind == CK.UNARY_OPERATOR:
        return unary_operator(parent) == "!"
    if parent.kind == CK.BINARY_OPERATOR:
        return binary_operator(parent) in ("==", "!=", "&&", "||")
    return parent.kind in (CK.IF_STMT, CK.WHILE_STMT, CK.CONDITIONAL_OPERATOR) and index == 0
