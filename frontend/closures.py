"""Lambdas made in host code and passed to kernels (nvcc ``--extended-lambda``).

The closure of ``[=] __device__ (float v) { return a * v + k; }`` is an object of an unnamed
class whose fields are copies of the captured variables, made where the lambda is evaluated
(clang lists the capture initializers as the lambda expression's first children, in the order
of the class's fields). C++ cannot name that class, so the translated program declares a record
of its own for it, one field per capture, named as the variable::

    float a = 2.f; int k = 3;                           struct polypy_lambda_7_30 { float a; int k; };
    apply<<<g, b>>>(n, y, x, [=] __device__ (float v)   ...
        { return a * v + k; });                  ==>    apply_lambda_7_30_launch(g, b, 0, n, y, x,
                                                            polypy_lambda_7_30{a, k});

The kernel instance ``apply<(lambda)>`` takes that record (its launcher reads ``f.a``, ``f.k``)
and calls the lambda's body with the captured names bound to those fields
(``frontend.lower.lambdas.closure_param``). Where the program makes the lambda, the record is
made from the same variables at the same point: a ``__device__`` lambda, which host code cannot
call, becomes the record; a ``__host__ __device__`` lambda stays, wrapped with the record
(``polypy_close(lambda, record)``, polypy's runtime: an object that is both), so host code still
calls it.

Refused, located: captures by reference (host memory, which device code cannot reach), ``this``,
init-captures, captured arrays and lambdas, ``mutable`` ``__host__ __device__`` lambdas with
captures (host code may change the copies), and lambdas without an explicit ``__device__``
(nvcc does not let device code call them). A ``mutable`` ``__device__`` lambda changes each
thread's own copies, as a function object's ``operator()`` changes a by-value kernel parameter.

A lambda passed to a host function template that launches (``parallel_for(n, [=] __device__
(int i) {...})``) instantiates it with the record, made at the call site: the template's launch
tests its parameter against the record (``frontend.host_templates.instance_condition``), and
both the record and the instance's launcher are declared before the template
(``launch_forwards``).
"""
from __future__ import annotations

import dataclasses

import clang.cindex as ci

from polypy.errors import UserError

from frontend.clang_setup import cursor_loc, preorder, spelled_extent

CK = ci.CursorKind
TK = ci.TypeKind
_NOT_CAPTURES = (CK.VARIABLE_REF, CK.PARM_DECL, CK.COMPOUND_STMT, CK.TYPE_REF, CK.CUDADEVICE_ATTR,
                 CK.CUDAHOST_ATTR, CK.TEMPLATE_TYPE_PARAMETER, CK.NAMESPACE_REF, CK.TEMPLATE_REF)


@dataclasses.dataclass(frozen=True, eq=False)
class HostClosure:
    """A lambda made in host code whose closure type a kernel instance takes."""

    name: str  # the record the translated program declares for it
    decl: ci.Cursor  # the closure class
    lam: ci.Cursor  # the LAMBDA_EXPR
    operator: ci.Cursor  # the closure type's operator() (a method, or a template for `auto` parameters)
    captures: tuple[tuple[str, ci.Cursor, ci.Type], ...]  # (name, captured variable, field type), in field order
    host: bool  # declared __host__ __device__: host code may call it too

    def record_text(self) -> str:
        fields = " ".join(f"{_spelling(t)} {name};" for name, _, t in self.captures)
        where = cursor_loc(self.lam)
        return (f"/* the captures of the lambda at {where.file}:{where.line}:{where.col}, passed to a kernel */\n"
                f"struct {self.name} {{ {fields} }};".replace("{  }", "{ }"))

    def value_text(self) -> str:
        return f"{self.name}{{{', '.join(name for name, _, _ in self.captures)}}}"


def closure_declaration(t: ci.Type) -> ci.Cursor | None:
    """The closure class of a lambda made in a function, if ``t`` is one."""
    while t.kind in (TK.LVALUEREFERENCE, TK.RVALUEREFERENCE):
        t = t.get_pointee()
    t = t.get_canonical()
    if t.kind != TK.RECORD:
        return None
    decl = t.get_declaration()
    parent = decl.semantic_parent
    if decl.kind != CK.CLASS_DECL or parent is None or not (decl.spelling or t.spelling).startswith("(lambda at "):
        return None
    return decl


def host_closure(decl: ci.Cursor, cache: dict) -> HostClosure:
    """The ``HostClosure`` of closure class ``decl`` (``closure_declaration``); ``cache``: by
    the class's place, shared by a translation unit's kernels (``ModuleContext.closures``)."""
    key = _key(decl)
    found = cache.get(key)
    where = cursor_loc(decl)
    if found is not None:
        if found.decl != decl:  # one lambda written in a template, a closure type per instance
            raise UserError("a lambda passed to a kernel in a function template instantiated more than once is not "
                            "supported (each instance has its own closure type)", where)
        return found
    owner = decl.semantic_parent
    if owner.kind == CK.CXX_METHOD and owner.spelling == "operator()" and \
            closure_declaration(owner.semantic_parent.type) is not None:
        raise UserError("a lambda made inside another lambda in host code and passed to a kernel is not supported",
                        where)
    lam = next((c for c in preorder(owner) if c.kind == CK.LAMBDA_EXPR and _key(closure_declaration(c.type) or c)
                == key), None)
    if lam is None:
        raise UserError("a lambda passed to a kernel, made where polypy does not see it, is not supported", where)
    operator = next((m for m in decl.get_children()
                     if m.kind in (CK.CXX_METHOD, CK.FUNCTION_TEMPLATE) and m.spelling == "operator()"), None)
    if operator is None:
        raise UserError("a lambda without a call operator passed to a kernel", where)
    if not _explicit_device(operator):
        raise UserError("a lambda passed to a kernel must be declared __device__ or __host__ __device__ "
                        "(nvcc --extended-lambda: '[=] __device__ (...) { ... }')", cursor_loc(lam))
    fields = list(decl.type.get_canonical().get_fields())
    if any(f.type.kind in (TK.LVALUEREFERENCE, TK.RVALUEREFERENCE) for f in fields):
        raise UserError("a __device__ lambda capturing host variables by reference ([&], [&x]): device code "
                        "cannot reach host memory (capture by value: [=] or [x])", cursor_loc(lam))
    if any(f.type.get_canonical().kind in (TK.CONSTANTARRAY, TK.INCOMPLETEARRAY) for f in fields):
        raise UserError("a lambda capturing an array by value is not supported when passed to a kernel",
                        cursor_loc(lam))
    for ref in lam.get_children():
        if ref.kind == CK.VARIABLE_REF and ref.referenced is not None and \
                ref.referenced.location.offset == ref.location.offset:  # `[v = a]` declares v there
            raise UserError("lambda init-captures are not supported when the lambda is passed to a kernel",
                            cursor_loc(ref))
    inits = [c for c in lam.get_children() if c.kind not in _NOT_CAPTURES and not c.kind.is_attribute()]
    if len(inits) != len(fields):
        if any(c.kind == CK.CXX_THIS_EXPR or (c.kind == CK.MEMBER_REF_EXPR and not any(
                ch.kind.is_expression() for ch in c.get_children())) for c in preorder(lam)):
            raise UserError("a lambda capturing 'this' (naming a member of the enclosing object) is not supported "
                            "when passed to a kernel: copy the members it uses into local variables and capture "
                            "those", cursor_loc(lam))
        raise UserError("this lambda's captures cannot be matched with its closure's fields: not supported for a "
                        "lambda passed to a kernel", cursor_loc(lam))
    captures = []
    for init, field in zip(inits, fields):
        captures.append(_capture(init, field.type, lam))
    if captures and operator.kind == CK.CXX_METHOD and not operator.is_const_method() and \
            _has_attr(operator, CK.CUDAHOST_ATTR):
        # Host code may call it, changing the lambda's copies, which the record would not see.
        raise UserError("mutable __host__ __device__ lambdas capturing by value are not supported when passed to a "
                        "kernel (a __device__ one is)", cursor_loc(lam))
    loc = cursor_loc(lam)
    name = f"polypy_lambda_{loc.line}_{loc.col}"
    taken = {c.name for c in cache.values()}
    base, i = name, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    made = HostClosure(name, decl, lam, operator, tuple(captures), _has_attr(operator, CK.CUDAHOST_ATTR))
    cache[key] = made
    return made


def _capture(init: ci.Cursor, field_type: ci.Type, lam: ci.Cursor) -> tuple[str, ci.Cursor, ci.Type]:
    """One capture: (the variable's name, the variable, the field's type); refuses those the
    translated program cannot copy into a record of its own."""
    inner = init
    while inner.kind == CK.UNEXPOSED_EXPR and len(list(inner.get_children())) == 1:
        inner = next(iter(inner.get_children()))
    if inner.kind == CK.CXX_THIS_EXPR or (inner.kind == CK.UNARY_OPERATOR and
                                          any(c.kind == CK.CXX_THIS_EXPR for c in inner.get_children())):
        raise UserError("a lambda capturing 'this' is not supported when passed to a kernel (capture the "
                        "members it uses in local variables)", cursor_loc(init))
    var = inner.referenced if inner.kind == CK.DECL_REF_EXPR else None
    if var is None or var.kind not in (CK.VAR_DECL, CK.PARM_DECL):
        raise UserError("lambda init-captures are not supported when the lambda is passed to a kernel",
                        cursor_loc(init))
    canon = field_type.get_canonical()
    if closure_declaration(canon) is not None:
        raise UserError(f"a lambda capturing the lambda '{var.spelling}' is not supported when passed to a kernel",
                        cursor_loc(init))
    if "(" in _spelling(field_type):  # an unnamed struct, a function pointer
        raise UserError(f"a lambda passed to a kernel captures '{var.spelling}', of a type the translated program "
                        f"cannot name ('{canon.spelling}'): not supported", cursor_loc(init))
    if canon.kind == TK.RECORD:
        parent = canon.get_declaration().semantic_parent
        if parent is not None and parent.kind in (CK.FUNCTION_DECL, CK.CXX_METHOD, CK.FUNCTION_TEMPLATE):
            raise UserError(f"a lambda passed to a kernel captures '{var.spelling}', of a type defined inside a "
                            "function: declare the type at namespace scope", cursor_loc(init))
    return var.spelling, var, field_type


def _spelling(t: ci.Type) -> str:
    """The field's type as the record declares it: canonical (a typedef local to the function is
    not visible at namespace scope), without top-level const (the record is a copy)."""
    canon = t.get_canonical()
    text = canon.spelling
    if canon.is_const_qualified() and canon.kind == TK.POINTER:  # `const float *const`
        text = text[:text.rfind("const")].rstrip()
    elif canon.is_const_qualified() and text.startswith("const "):
        text = text[len("const "):]
    return text


def _explicit_device(fn: ci.Cursor) -> bool:
    """Whether ``fn`` is declared ``__device__`` in the source (clang makes lambdas without
    attributes implicitly __host__ __device__; nvcc does not: they are host functions)."""
    return any(c.kind == CK.CUDADEVICE_ATTR and c.location.file is not None for c in fn.get_children())


def _has_attr(fn: ci.Cursor, kind: ci.CursorKind) -> bool:
    return any(c.kind == kind and c.location.file is not None for c in fn.get_children())


def _key(decl: ci.Cursor) -> tuple:
    loc = decl.location
    return (loc.file.name if loc.file is not None else "", loc.offset, decl.spelling)


def closure_edits(closures, fname: str, start: int, end: int) -> list[tuple[int, int, str]]:
    """(start, end, text) byte-offset replacements that make the records of ``closures`` (the
    ``HostClosure``s of a translation unit) where the lambdas in ``fname`` between byte offsets
    ``start`` and ``end`` are made: a ``__device__`` lambda becomes its record; a
    ``__host__ __device__`` one stays, wrapped with it (``polypy_close``, polypy's runtime)."""
    out: list[tuple[int, int, str]] = []
    for hc in closures:
        loc = hc.lam.location
        if loc.file is None or loc.file.name != fname:
            continue
        s, e = spelled_extent(hc.lam)
        if not (start <= s and e <= end):
            continue
        if hc.host:
            out += [(s, s, "polypy_close("), (e, e, f", {hc.value_text()})")]
        else:
            out.append((s, e, hc.value_text()))
    return sorted(out)


def argument_text(closures, a: ci.Cursor, conv) -> str:
    """The text of launch argument ``a`` as written (``conv``: the file's ``OffsetMap``), with
    ``closure_edits`` applied: a lambda written in a launch is made there."""
    start, end = spelled_extent(a)
    edits = closure_edits(closures, a.location.file.name if a.location.file else "", start, end)
    text = conv.spelled(a)
    out, pos = [], 0
    for s, e, repl in edits:
        out += [text[pos:conv.char(s) - conv.char(start)], repl]
        pos = conv.char(e) - conv.char(start)
    out.append(text[pos:])
    return "".join(out)


def file_parts(closures, fname: str, inside: list[tuple[int, int]], conv, place
               ) -> tuple[tuple[tuple[int, int, str], ...], tuple[tuple[int, str], ...]]:
    """``HostFile.closures`` and ``HostFile.records`` of file ``fname`` (character offsets;
    ``conv``: its ``OffsetMap``): the edits making the records where the lambdas are made, but
    for those in the spans ``inside`` (launches, whose text has them: ``argument_text``), and
    each record's declaration, at byte offset ``place(lambda)``."""
    spans = []
    for s, e, text in closure_edits(closures, fname, 0, len(conv.data)):
        s, e = conv.char(s), conv.char(e)
        if not any(a <= s and e <= b for a, b in inside):
            spans.append((s, e, text))
    records = sorted((conv.char(place(hc.lam)), hc.record_text()) for hc in closures
                     if hc.lam.location.file is not None and hc.lam.location.file.name == fname)
    return tuple(spans), tuple(records)


def launch_forwards(call: ci.Cursor, args: list[str], kernel: str, at: int | None) -> list[tuple[int, str, str]]:
    """``HostFile.forwards`` of launch ``call`` in a host function template, of kernel instance
    ``kernel`` (``args``: its template arguments as text): each record of a closure it takes,
    declared with the instance's launcher at character offset ``at`` (the top-level declaration
    holding the template; None: not at the file's global scope, refused), since the template's
    test and call name them (``frontend.host_templates.instance_condition``)."""
    records = [a for a in args if a.startswith("polypy_lambda_")]
    if records and at is None:
        raise UserError("a launch of a kernel taking a lambda, in a host function template that is not at the "
                        "file's global scope, is not supported", cursor_loc(call))
    return [(at, r, kernel) for r in records]
