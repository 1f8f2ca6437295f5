"""Lambdas in device code: a lambda expression is a ``Closure`` value (its call operator and the
bindings of what it captured); calling it inlines the call operator with those bindings, and
passing it to a function template binds the parameter to the same closure.

Captures are the enclosing function's variables that the body names, init-captures
(``[n = 2 * k]``) and ``this``. Clang's closure type has one field per capture, a reference for
a capture by reference: those share the caller's bindings; the others are copies made where
the lambda is evaluated (``lambda_expr``), which a non-``mutable`` lambda cannot change, so
sharing one closure between copies of it is exact. A ``mutable`` lambda's copies are its own
state (``Closure.owned``): its calls change them, and a copy of the closure (``auto g = f;``,
passing it by value) copies them (``inlining.closure_copy``). A generic lambda's operator is a
template: each call inlines the instance clang chose. ``[*this]`` holds a copy of the object
(``this_copy``), made where the lambda is evaluated; a local array captured by value is a copy
of its elements (``array_copies``).

A kernel parameter holding a lambda made in host code (``frontend.closures``) is a ``Closure``
too (``closure_param``): its captures are the parameter's members; a ``mutable`` one's are each
thread's copies, and copies of such a closure are refused (``Closure.shared_copy``)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n

from frontend import ctypes_map as tm
from frontend.closures import HostClosure
from frontend.lower import inlining
from frontend.lower.context import CK, decl_key
from frontend.lower.array_copies import copy_array
from frontend.values import AggLV, ArrayBinding, Closure, LValue, PtrVarLV, RecLV, RefBinding, Value, VarLV

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def lambda_expr(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Value:
    """The closure of lambda expression ``c``, made where it is evaluated.

    Clang gives the closure type one field per capture, in capture order: the explicit captures
    as written (libclang lists each but ``this`` as a ``VariableRef``, an init-capture's naming
    its own variable), then the implicit ones. A field of reference type is a capture by
    reference (the caller's own binding), any other a copy made now; the implicit captures all
    have the capture default's kind. ``this`` (explicit, or implicit through ``[=]``/``[&]``)
    binds the enclosing member function's object."""
    closure_decl = tm.canonical(c.type).get_declaration()
    kb.closure_types.add(decl_key(closure_decl))
    # (a generic lambda's operator is a template: each call inlines the instance clang chose)
    operator = next((m for m in closure_decl.get_children()
                     if m.kind in (CK.CXX_METHOD, CK.FUNCTION_TEMPLATE) and m.spelling == "operator()"), None)
    if operator is None:
        raise kb.error("this lambda has no call operator polypy can find", c)
    fields = list(tm.canonical(c.type).get_fields())
    explicit = [ch.referenced for ch in c.get_children() if ch.kind == CK.VARIABLE_REF]
    outer = kb.frame.env
    body = next((ch for ch in c.get_children() if ch.kind == CK.COMPOUND_STMT), None)
    used: dict[tuple, ci.Cursor] = {}
    uses_this = False
    stack = [body] if body is not None else []
    while stack:
        x = stack.pop()
        if x.kind == CK.CXX_THIS_EXPR or (x.kind == CK.MEMBER_REF_EXPR and _implicit_this(x)):
            uses_this = True
        if x.kind == CK.DECL_REF_EXPR and x.referenced is not None and \
                x.referenced.kind in (CK.VAR_DECL, CK.PARM_DECL) and decl_key(x.referenced) in outer:
            used.setdefault(decl_key(x.referenced), x.referenced)
        stack.extend(x.get_children())
    this_type = _this_pointer_type(kb, closure_decl)
    mutable = not operator.is_const_method()
    captures: dict[tuple, object] = {}
    owned: list[tuple] = []
    shared: list = []
    rest = list(fields)
    copies_this = False
    for decl in explicit:
        if decl is None:
            raise kb.error("a capture polypy cannot follow", c)
        while rest and this_type is not None and \
                (_same(rest[0].type, this_type) or _is_this_class(rest[0].type, this_type)) and \
                tm.canonical(rest[0].type).spelling != tm.canonical(tm.strip_reference(decl.type)).spelling:
            # the explicit `this` or `*this` (no VariableRef names them)
            copies_this = copies_this or _is_this_class(rest.pop(0).type, this_type)
        if not rest:
            raise kb.error("a capture polypy cannot follow", c)
        field = rest.pop(0)
        key = decl_key(decl)
        if key in outer:  # `[a, &b]`
            if tm.is_reference(field.type):
                captures[key] = outer[key]
                shared.append(decl)
            else:
                captures[key] = capture_copy(kb, decl, outer[key], c)
                owned.append(key)
        else:  # an init-capture `[n = 2 * k]`, `[&r = a[i]]`: its own variable
            captures[key] = init_capture(kb, decl, field, c)
            owned.append(key) if not tm.is_reference(field.type) else shared.append(None)
    if this_type is not None and uses_this:  # the `this` field, explicit or implicit
        rest = [f for f in rest if not _same(f.type, this_type)]
    if this_type is not None and not copies_this:
        # `[*this]` after the explicit captures, or none: one field of the class itself more than
        # the implicit captures of variables of that class
        implicit = sum(1 for key, decl in used.items() if key not in captures and
                       _is_this_class(tm.strip_reference(decl.type), this_type))
        copies_this = sum(1 for f in rest if _is_this_class(f.type, this_type)) > implicit
    by_reference = any(tm.is_reference(f.type) for f in rest)
    for key, decl in used.items():
        if key in captures:
            continue
        if by_reference:  # `[&]`: the caller's own variables
            captures[key] = outer[key]
            shared.append(decl)
        else:  # `[=]` (or a constant the lambda does not capture: its value)
            captures[key] = capture_copy(kb, decl, outer[key], c)
            owned.append(key)
    this = None
    if uses_this or copies_this:
        this = kb.frame.this
        if this is None:
            raise kb.error("'this' in a lambda outside a member function", c)
    if copies_this:  # `[*this]`: a copy of the object, made now; `this` in the body is the copy
        this = this_copy(kb, this, _this_class(kb, closure_decl), c)
    return Closure(operator, captures, this=this, owned=tuple(owned) if mutable else (),
                   owns_this=copies_this and mutable, by_reference=tuple(shared))


def this_copy(kb: KernelBuilder, this, record: ci.Cursor, c: ci.Cursor):
    """A copy of the object ``this`` (of class ``record``) a ``[*this]`` lambda holds: member by
    member, as the implicit copy constructor copies; a user-written one is refused."""
    if any(m.kind == CK.CONSTRUCTOR and m.is_copy_constructor() and not m.is_default_method()
           for m in record.get_children()):
        raise kb.error(f"'[*this]' copies '{record.spelling}' with its user-written copy constructor, which is "
                       "not supported in device code", c)
    if isinstance(this, RecLV):
        this = kb.expand_record(this, c)
    value = kb.read(this, c)
    copy = inlining.copy_to_local(kb, value, None, "this_copy", c)
    if not isinstance(copy, AggLV):
        raise kb.error("a copy of '*this' polypy cannot make", c)
    return copy


def _implicit_this(x: ci.Cursor) -> bool:
    """A member named without an object (``w`` for ``this->w`` inside a member function)."""
    return not any(ch.kind.is_expression() for ch in x.get_children()) and x.referenced is not None and \
        x.referenced.kind in (CK.FIELD_DECL, CK.CXX_METHOD) and not x.referenced.is_static_method()


def _this_pointer_type(kb: KernelBuilder, closure_decl: ci.Cursor):
    """The type of ``this`` where the lambda is written (``_pointer_to`` the member function's
    class, through lambdas made in lambdas), or None outside member functions."""
    record = _this_class(kb, closure_decl)
    return _pointer_to(record) if record is not None else None


def _this_class(kb: KernelBuilder, closure_decl: ci.Cursor) -> ci.Cursor | None:
    """The class of the member function the lambda is written in (through lambdas made in
    lambdas), or None."""
    fn = closure_decl.semantic_parent
    while fn is not None and fn.kind in _FUNCTIONS:
        parent = fn.semantic_parent
        if parent is None or parent.kind not in (CK.STRUCT_DECL, CK.CLASS_DECL, CK.CLASS_TEMPLATE,
                                                  CK.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION):
            return None
        if decl_key(parent) not in kb.closure_types:
            return parent
        fn = parent.semantic_parent  # a lambda made in a lambda's body
    return None


_FUNCTIONS = (CK.CXX_METHOD, CK.CONSTRUCTOR, CK.DESTRUCTOR, CK.CONVERSION_FUNCTION, CK.FUNCTION_TEMPLATE)


def _pointer_to(record: ci.Cursor):
    return ("pointer", tm.canonical(record.type).spelling)


def _is_this_class(t: ci.Type, this_type: tuple) -> bool:
    """Whether field type ``t`` is the class of ``this`` itself (a ``[*this]`` copy; ``const`` in a
    ``const`` member function)."""
    ct = tm.canonical(t)
    return ct.kind == ci.TypeKind.RECORD and tm.canonical(ct.get_declaration().type).spelling == this_type[1]


def _same(t: ci.Type, this_type: tuple) -> bool:
    """Whether field type ``t`` is the type of ``this`` (``this_type``: ``_pointer_to``)."""
    ct = tm.canonical(t)
    return ct.kind == ci.TypeKind.POINTER and tm.canonical(ct.get_pointee()).spelling == this_type[1]


def init_capture(kb: KernelBuilder, decl: ci.Cursor, field: ci.Cursor, c: ci.Cursor):
    """The binding of init-capture ``decl`` (``[n = 2 * k]``: a copy of the value now;
    ``[&r = a[i]]``: the place)."""
    init = next((ch for ch in decl.get_children() if ch.kind.is_expression()), None)
    if init is None:
        raise kb.error(f"init-capture '{decl.spelling}' without an initializer", c)
    if tm.is_reference(field.type):
        return RefBinding(kb.lvalue(init))
    t = tm.strip_reference(decl.type)
    if tm.is_array(t):
        raise kb.error(f"lambdas capturing the array '{decl.spelling}' by value are not supported in device code", c)
    if tm.is_record(t):
        return inlining.copy_to_local(kb, kb.record_value(init, t), t, decl.spelling, c)
    value = kb.expr(init)
    if isinstance(value, Closure):
        return inlining.closure_copy(kb, value, c)
    if tm.is_pointer(t):
        return kb.pointer_binding(value, True, decl.spelling, c, decl_key(decl))
    return inlining.copy_to_local(kb, value, t, decl.spelling, c)


def capture_copy(kb: KernelBuilder, decl: ci.Cursor, binding, c: ci.Cursor):
    """A by-value capture of ``decl``: a copy of its value now."""
    t = decl.type
    if tm.is_array(t):  # `[a]`, `[=]` naming a local array: a copy of each element, made now
        if not isinstance(binding, ArrayBinding):
            raise kb.error(f"lambdas capturing the array '{decl.spelling}' by value are not supported in "
                           "device code", c)
        return copy_array(kb, binding, decl.spelling, c)
    value = kb.binding_value(binding, c)
    if isinstance(value, Closure):
        return inlining.closure_copy(kb, value, c)
    if tm.is_pointer(tm.strip_reference(t)):
        return kb.pointer_binding(value, True, decl.spelling, c, decl_key(decl))
    return inlining.copy_to_local(kb, value, tm.strip_reference(t), decl.spelling, c)


def is_closure_type(kb: KernelBuilder, t: ci.Type) -> bool:
    return decl_key(tm.canonical(tm.strip_reference(t)).get_declaration()) in kb.closure_types


def call_closure(kb: KernelBuilder, closure: Closure, args: list[ci.Cursor], c: ci.Cursor,
                 discard: bool, callee: ci.Cursor | None = None) -> Value | None:
    """A call of ``closure``; ``callee``: the operator clang resolved (of a generic lambda made in
    host code, the instance of its operator template for these arguments)."""
    operator = closure.operator
    if operator.kind == CK.FUNCTION_TEMPLATE and callee is not None:
        operator = callee
    return inlining.inline(kb, operator, args, c, discard, captures=closure.captures, this=closure.this)


def closure_param(kb: KernelBuilder, p: ci.Cursor, closure: HostClosure, mutated: set[tuple]) -> None:
    """A kernel parameter whose type is the closure of a lambda made in host code
    (``frontend.closures``): one IR parameter per scalar or pointer the captures hold, the
    parameter a ``Closure`` binding each captured variable to its copy (the launcher passes the
    record ``closure.name``, whose member ``.a`` is the capture of ``a``)."""
    name = p.spelling or f"arg{len(kb.params)}"
    where = kb.loc(p)
    if decl_key(p) in mutated:
        raise kb.error(f"kernel parameter '{name}' holding a lambda is assigned in the kernel: not supported", p)
    kb.names.taken.add(name)
    kb.closure_types.add(decl_key(tm.canonical(p.type).get_declaration()))
    # A `mutable` lambda changes its copies: each thread's own, as each thread's copy of a
    # by-value parameter (a struct whose operator() changes its members alike).
    mutable = closure.operator.kind == CK.CXX_METHOD and not closure.operator.is_const_method()
    members: list[tuple[str, str]] = []
    captures = {}
    for cap, var, ftype in closure.captures:
        fields: dict[str, LValue] = {}
        for leaf in tm.leaves(ftype, ""):
            pname = kb.names.fresh(f"{name}_{cap}{leaf.path}")
            if leaf.scalar is not None:
                kb.params.append(n.Param(pname, leaf.scalar, loc=where))
                fields[leaf.path] = kb.temp(leaf.scalar, n.Var(pname, leaf.scalar), f"{cap}{leaf.path}", p) \
                    if mutable else VarLV(pname, leaf.scalar)
                members.append((f".{cap}{leaf.path}", pname))
            elif tm.is_pointer(leaf.ctype) and not tm.is_pointer(tm.pointee(leaf.ctype)):
                ptr = kb.pointer_param(pname, leaf.ctype, where)
                views = ptr.record.views if ptr.record is not None else ((None, pname),)
                members.extend((f".{cap}{leaf.path}", v) for _, v in views)
                if mutable and not leaf.path:
                    fields[leaf.path] = kb.pointer_binding(ptr, True, cap, p, decl_key(var))
                elif mutable:
                    raise kb.error(f"the mutable lambda passed as kernel parameter '{name}' captures '{cap}', a "
                                   "record holding pointers: not supported", p)
                else:
                    fields[leaf.path] = PtrVarLV(ptr, None)
            else:
                raise kb.error(f"the lambda passed as kernel parameter '{name}' captures '{cap}', whose member "
                               f"'{leaf.path}' of type '{leaf.ctype.spelling}' is not supported", p)
        captures[decl_key(var)] = fields[""] if "" in fields else AggLV(fields, tm.canonical(ftype).spelling)
    kb.source_params.append(n.SourceParam(name, closure.name, tuple(members)))
    kb.bind(p, Closure(closure.operator, captures, mutable and bool(captures)))
