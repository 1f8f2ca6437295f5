"""Host loops of launches that can run in one OpenMP parallel region (``polypy.ir.host.LoopMerge``).

A host loop that launches small kernels many times (PolyBench's JACOBI1D: 20,000 launches of two
kernels) pays a fork and a join of the thread team per launch. Where the host code between the
launches only does scalar work on local variables (a counter, a pointer swap, a ``dim3``), the
whole loop can run in one parallel region instead, as OpenMP's parallel-region merging does::

    for (t...) {                          #pragma omp parallel firstprivate(A, B)
      k1<<<g, b>>>(A, B);                 for (t...) {            // every thread, the same values
      tmp = A; A = B; B = tmp;      ==>     k1: omp for over the blocks; barrier
      k2<<<g, b>>>(A, B);                   tmp = A; A = B; B = tmp;
    }                                       k2: omp for over the blocks; barrier
                                          }  (thread 0 copies A, B back)

Each thread runs the loop's host code itself: it is pure scalar work whose operands every thread
has alike, so every thread computes the values CUDA's single host thread would; variables
declared before the loop and assigned in it are ``firstprivate`` and copied back after it. Each
launch shares its grid's blocks among the team and ends at a barrier, so it sees every write of
the launch before it, as on a device.

The loop is merged only when everything in it is, by its syntax, one of: a launch of a kernel
this file defines, on the default stream; a declaration of a local scalar, pointer or ``dim3``;
an assignment, increment or compound assignment to a local variable (or a member of a local
struct); arithmetic, comparisons, casts, ``?:`` and literals over locals and host globals;
``if``, ``for``, ``while``, ``do``, ``break``, ``continue``; ``cudaDeviceSynchronize()`` (a
no-op: launches complete before they return). Anything else -- a call (``cudaMemcpy``,
``printf``, a stream or event call), a read or write through a pointer or subscript, an address
taken, ``return``, ``goto``, a ``static`` local, a launch on a stream or through a pointer --
keeps the loop's launches separate, and ``--report`` says which construct and where.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import clang.cindex as ci

from polypy.ir.host import LoopMerge

from frontend.clang_setup import binary_operator, cursor_loc, preorder, unary_operator
from frontend.lower.context import function_body, has_attr

CK = ci.CursorKind

_LOOPS = (CK.FOR_STMT, CK.WHILE_STMT, CK.DO_STMT)
_FUNCTIONS = (CK.FUNCTION_DECL, CK.CXX_METHOD, CK.CONSTRUCTOR, CK.DESTRUCTOR, CK.FUNCTION_TEMPLATE,
              CK.CONVERSION_FUNCTION)
# Cursors below an expression that name a type or scope, not a value.
_NAMES = (CK.TYPE_REF, CK.TEMPLATE_REF, CK.NAMESPACE_REF, CK.OVERLOADED_DECL_REF)
_LEAVES = (CK.INTEGER_LITERAL, CK.FLOATING_LITERAL, CK.CHARACTER_LITERAL, CK.CXX_BOOL_LITERAL_EXPR,
           CK.CXX_NULL_PTR_LITERAL_EXPR, CK.CXX_UNARY_EXPR)  # sizeof, alignof: types, no evaluation
_TRANSPARENT = (CK.PAREN_EXPR, CK.UNEXPOSED_EXPR, CK.CSTYLE_CAST_EXPR, CK.CXX_STATIC_CAST_EXPR,
                CK.CXX_FUNCTIONAL_CAST_EXPR, CK.CONDITIONAL_OPERATOR, CK.INIT_LIST_EXPR)
_ASSIGNMENTS = frozenset({"=", "*=", "/=", "%=", "+=", "-=", "<<=", ">>=", "&=", "^=", "|="})
# Host calls that are no-ops between launches that complete before they return: what they
# return (the sticky error) only reads the runtime's state.
_NO_OPS = frozenset({"cudaDeviceSynchronize", "cudaThreadSynchronize"})
# Plain-value types a merged loop may declare and assign: they are copied into each thread.
_VALUE_KINDS = frozenset({ci.TypeKind.BOOL, ci.TypeKind.CHAR_U, ci.TypeKind.UCHAR, ci.TypeKind.CHAR16,
                          ci.TypeKind.CHAR32, ci.TypeKind.USHORT, ci.TypeKind.UINT, ci.TypeKind.ULONG,
                          ci.TypeKind.ULONGLONG, ci.TypeKind.CHAR_S, ci.TypeKind.SCHAR, ci.TypeKind.WCHAR,
                          ci.TypeKind.SHORT, ci.TypeKind.INT, ci.TypeKind.LONG, ci.TypeKind.LONGLONG,
                          ci.TypeKind.FLOAT, ci.TypeKind.DOUBLE, ci.TypeKind.LONGDOUBLE, ci.TypeKind.ENUM,
                          ci.TypeKind.POINTER})
_VALUE_RECORDS = frozenset({"dim3", "uint3", "int2", "int3", "int4", "uint2", "uint4", "float2", "float3",
                            "float4", "double2"})


@dataclasses.dataclass(frozen=True)
class LoopDecision:
    """A host loop that launches kernels: merged into one parallel region or not, and why.
    ``private``: the variables declared before the loop that it assigns (firstprivate, copied
    back after it)."""

    loop: ci.Cursor
    merged: bool
    why: str
    launches: int
    private: tuple[str, ...] = ()


def loop_span(d: LoopDecision, text: str, char: Callable[[int], int]) -> LoopMerge:
    """A loop decision as a span of its file (``char``: a byte offset -> a character offset in
    ``text``). A loop whose text is not the file's (written in a macro) is not merged: the region
    goes around the loop's text; nor one with a pragma on it or in it, which clang's AST of host
    code does not show (``#pragma omp parallel for`` on the loop, ``omp critical`` inside)."""
    start, end = char(d.loop.extent.start.offset), char(d.loop.extent.end.offset)
    merged, why = d.merged, d.why
    if merged and not (text[start:end].startswith(("for", "while")) and text[start:end].endswith("}")):
        merged, why = False, "the loop is written in a macro"
    before = text[:start].rstrip().rsplit("\n", 1)[-1].lstrip()
    if merged and (before.startswith("#") or "_Pragma" in text[start:end]
                   or any(line.lstrip().startswith("#pragma") for line in text[start:end].splitlines())):
        merged, why = False, "a pragma on the loop or in it"
    return LoopMerge(start, end, merged, why, d.launches, d.private if merged else (), cursor_loc(d.loop))


class _Keep(Exception):
    """The loop stays as separate launches: ``why``, at ``where``."""

    def __init__(self, why: str, where: ci.Cursor):
        super().__init__(why)
        self.why, self.where = why, where


# A launch's verdict: None when the launch can run in a merged loop, else the reason it cannot.
LaunchCheck = Callable[[ci.Cursor], "str | None"]


def merge_loops(functions: Sequence[ci.Cursor], is_launch: Callable[[ci.Cursor], bool],
                check_launch: LaunchCheck) -> list[LoopDecision]:
    """The decisions for the outermost host loops of ``functions`` that launch kernels: a loop
    that can be merged is (its inner loops are part of it); one that cannot is reported and its
    inner loops are tried. ``is_launch(call)``: whether a call is a ``<<<...>>>`` launch;
    ``check_launch(call)``: None if that launch may run in a merged loop, else why not."""
    out: list[LoopDecision] = []
    for fn in functions:
        if fn.kind == CK.FUNCTION_TEMPLATE:
            continue  # its launches depend on the instance (LaunchSite.when): kept as they are
        body = function_body(fn)
        if body is not None:
            _loops_in(body, is_launch, check_launch, out)
    return out


def _loops_in(c: ci.Cursor, is_launch, check_launch, out: list[LoopDecision]) -> None:
    for child in c.get_children():
        if child.kind in _LOOPS:
            launches = sum(1 for x in preorder(child) if x.kind == CK.CALL_EXPR and is_launch(x))
            if launches:
                decision = _decide(child, launches, is_launch, check_launch)
                out.append(decision)
                if decision.merged:
                    continue
        if child.kind not in (CK.LAMBDA_EXPR, CK.CLASS_DECL, CK.STRUCT_DECL):
            _loops_in(child, is_launch, check_launch, out)


def _decide(loop: ci.Cursor, launches: int, is_launch, check_launch) -> LoopDecision:
    body = [c for c in loop.get_children() if c.kind.is_statement() and not c.kind.is_expression()]
    if loop.kind == CK.DO_STMT or not body or body[-1].kind != CK.COMPOUND_STMT:
        why = "its body is not a { ... } block" if loop.kind != CK.DO_STMT else "a do-while loop"
        return LoopDecision(loop, False, why, launches)
    checker = _Checker(loop, is_launch, check_launch)
    try:
        for child in loop.get_children():
            checker.visit(child)
    except _Keep as keep:
        loc = cursor_loc(keep.where)
        at = f" (line {loc.line})" if loc is not None else ""
        return LoopDecision(loop, False, keep.why + at, launches)
    private = tuple(sorted(checker.assigned))
    why = "the host code between its launches is scalar work on locals"
    if private:
        why += f" (each thread keeps its own {', '.join(private)}, copied back after the loop)"
    return LoopDecision(loop, True, why, launches, private)


class _Checker:
    def __init__(self, loop: ci.Cursor, is_launch, check_launch):
        self.loop = loop
        self.is_launch, self.check_launch = is_launch, check_launch
        self.start, self.end = loop.extent.start.offset, loop.extent.end.offset
        self.file = loop.extent.start.file.name if loop.extent.start.file else None
        self.assigned: set[str] = set()

    def visit(self, c: ci.Cursor) -> None:
        if c.kind.is_expression():
            self.expr(c)
        elif c.kind in (CK.COMPOUND_STMT, CK.IF_STMT, CK.FOR_STMT, CK.WHILE_STMT, CK.DO_STMT, CK.DECL_STMT):
            for child in c.get_children():
                self.visit(child)
        elif c.kind in (CK.NULL_STMT, CK.BREAK_STMT, CK.CONTINUE_STMT) or c.kind in _NAMES:
            return
        elif c.kind == CK.VAR_DECL:
            self.declaration(c)
        else:
            raise _Keep(f"{_describe(c)} in the loop", c)

    def declaration(self, d: ci.Cursor) -> None:
        if d.storage_class in (ci.StorageClass.STATIC, ci.StorageClass.EXTERN):
            raise _Keep(f"the {d.storage_class.name.lower()} variable {d.spelling} in the loop", d)
        if not _value_type(d.type):
            raise _Keep(f"the variable {d.spelling} of type {d.type.spelling} (not a scalar, pointer or dim3)", d)
        for child in d.get_children():
            if child.kind.is_expression():
                self.expr(child)

    def expr(self, e: ci.Cursor) -> None:
        k = e.kind
        if k in _LEAVES or k in _NAMES:
            return
        if k in _TRANSPARENT:
            for child in e.get_children():
                self.expr(child)
            return
        if k == CK.DECL_REF_EXPR:
            self.read(e)
            return
        if k == CK.MEMBER_REF_EXPR:
            base = [c for c in e.get_children() if c.kind.is_expression()]
            if not base or base[0].type.get_canonical().kind == ci.TypeKind.POINTER:
                raise _Keep(f"a read through a pointer ({_spelled(e)})", e)
            self.expr(base[0])
            return
        if k == CK.UNARY_OPERATOR:
            op = unary_operator(e)
            (operand,) = list(e.get_children())
            if op in ("++", "--"):
                self.assign(operand)
            elif op == "*":
                raise _Keep(f"a read through a pointer ({_spelled(e)})", e)
            elif op == "&":
                raise _Keep(f"an address taken ({_spelled(e)})", e)
            self.expr(operand)
            return
        if k in (CK.BINARY_OPERATOR, CK.COMPOUND_ASSIGNMENT_OPERATOR):
            left, right = list(e.get_children())
            if binary_operator(e) in _ASSIGNMENTS:
                self.assign(left)
            self.expr(left)
            self.expr(right)
            return
        if k == CK.ARRAY_SUBSCRIPT_EXPR:
            raise _Keep(f"a memory access ({_spelled(e)})", e)
        if k == CK.CALL_EXPR:
            self.call(e)
            return
        raise _Keep(f"{_describe(e)} ({_spelled(e)})", e)

    def call(self, e: ci.Cursor) -> None:
        if self.is_launch(e):
            why = self.check_launch(e)
            if why is not None:
                raise _Keep(why, e)
            children = list(e.get_children())
            for config in list(children[1].get_children())[1:]:  # __cudaPushCallConfiguration(grid, block, ...)
                self.expr(config)
            for arg in children[2:]:
                self.expr(arg)
            return
        callee = e.referenced
        if callee is not None and callee.kind == CK.CONSTRUCTOR and _value_type(callee.semantic_parent.type):
            for arg in e.get_children():
                self.expr(arg)
            return
        if callee is not None and callee.spelling in _NO_OPS and not list(e.get_children())[1:]:
            return
        name = callee.spelling if callee is not None else _spelled(e)
        raise _Keep(f"a call of {name}", e)

    def read(self, e: ci.Cursor) -> None:
        d = e.referenced
        if d is None:
            raise _Keep(f"an unresolved name ({e.spelling})", e)
        if d.kind in (CK.ENUM_CONSTANT_DECL, CK.TEMPLATE_NON_TYPE_PARAMETER):
            return
        if d.kind in (CK.VAR_DECL, CK.PARM_DECL):
            if has_attr(d, CK.CUDADEVICE_ATTR, "polypy_device") or has_attr(d, CK.CUDACONSTANT_ATTR, "polypy_constant"):
                raise _Keep(f"a host read of the device variable {d.spelling}", e)
            return
        if d.kind in _FUNCTIONS:
            raise _Keep(f"the function {d.spelling} used as a value", e)
        raise _Keep(f"the name {d.spelling} ({d.kind.name.lower()})", e)

    def assign(self, target: ci.Cursor) -> None:
        """``target`` is assigned: it must be a local variable (or a member of one) of a value
        type; one declared before the loop becomes private to each thread."""
        t = target
        while t.kind in (CK.PAREN_EXPR, CK.UNEXPOSED_EXPR) or (
                t.kind == CK.MEMBER_REF_EXPR and _base(t) is not None
                and _base(t).type.get_canonical().kind != ci.TypeKind.POINTER):
            inner = _base(t) if t.kind == CK.MEMBER_REF_EXPR else next(iter(t.get_children()), None)
            if inner is None:
                break
            t = inner
        d = t.referenced if t.kind == CK.DECL_REF_EXPR else None
        if d is None or d.kind not in (CK.VAR_DECL, CK.PARM_DECL):
            raise _Keep(f"an assignment to {_spelled(target)}, not a local variable", target)
        if d.semantic_parent is None or d.semantic_parent.kind not in _FUNCTIONS \
                or d.storage_class in (ci.StorageClass.STATIC, ci.StorageClass.EXTERN):
            raise _Keep(f"an assignment to {d.spelling}, not a local variable", target)
        if not _value_type(d.type):
            raise _Keep(f"an assignment to {d.spelling} of type {d.type.spelling} (not a scalar, pointer or dim3)",
                        target)
        declared = d.extent.start
        inside = (declared.file is not None and declared.file.name == self.file
                  and self.start <= declared.offset < self.end)
        if not inside:
            self.assigned.add(d.spelling)


def _base(member: ci.Cursor) -> ci.Cursor | None:
    return next((c for c in member.get_children() if c.kind.is_expression()), None)


def _value_type(t: ci.Type) -> bool:
    """A type a thread can hold its own copy of: scalars, pointers, dim3 and the vector types
    (not references, arrays, or classes with their own copying)."""
    if t.kind in (ci.TypeKind.LVALUEREFERENCE, ci.TypeKind.RVALUEREFERENCE):
        return False
    c = t.get_canonical()
    if c.kind in _VALUE_KINDS:
        return True
    if c.kind == ci.TypeKind.RECORD:
        return c.get_declaration().spelling in _VALUE_RECORDS
    return False


def _describe(c: ci.Cursor) -> str:
    names = {CK.RETURN_STMT: "a return", CK.GOTO_STMT: "a goto", CK.SWITCH_STMT: "a switch",
             CK.LABEL_STMT: "a label", CK.LAMBDA_EXPR: "a lambda", CK.CXX_NEW_EXPR: "a new",
             CK.CXX_DELETE_EXPR: "a delete", CK.CXX_THROW_EXPR: "a throw", CK.CXX_TRY_STMT: "a try",
             CK.ASM_STMT: "an asm statement", CK.STRING_LITERAL: "a string"}
    return names.get(c.kind, c.kind.name.lower().replace("_", " "))


def _spelled(c: ci.Cursor) -> str:
    text = " ".join(t.spelling for t in c.get_tokens())
    return text if len(text) <= 40 else text[:37] + "..."
