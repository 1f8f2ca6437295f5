"""Lambdas in device code: a lambda expression is a ``Closure`` value (its call operator and the
bindings of what it captured); calling it inlines the call operator with those bindings, and
passing it to a function template binds the parameter to the same closure.

Captures are the enclosing function's variables that the body names. Clang's closure type has
one field per capture, a reference for a capture by reference: when every field is a reference
the lambda shares the caller's bindings (``[&]``, ``[&a, &b]``); when none is, it holds copies
made where the lambda is evaluated (``[=]``, ``[a, b]``), which a non-``mutable`` lambda cannot
change, so sharing one closure between copies of it is exact. Mixed captures, ``mutable``
lambdas with copies, init-captures and ``this`` are refused.

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
from frontend.values import AggLV, Closure, LValue, PtrVarLV, Value, VarLV

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def lambda_expr(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Value:
    closure_decl = tm.canonical(c.type).get_declaration()
    kb.closure_types.add(decl_key(closure_decl))
    operator = next((m for m in closure_decl.get_children()
                     if m.kind in (CK.CXX_METHOD, CK.FUNCTION_TEMPLATE) and m.spelling == "operator()"), None)
    if operator is None or operator.kind != CK.CXX_METHOD:
        raise kb.error("generic lambdas (auto parameters) are not supported in device code", c)
    fields = list(tm.canonical(c.type).get_fields())
    by_ref = {tm.is_reference(f.type) for f in fields}
    if len(by_ref) > 1:
        raise kb.error("lambdas mixing captures by value and by reference are not supported in device code", c)
    body = next((ch for ch in c.get_children() if ch.kind == CK.COMPOUND_STMT), None)
    outer = kb.frame.env
    names: dict[tuple, ci.Cursor] = {}
    stack = [body] if body is not None else []
    while stack:
        x = stack.pop()
        if x.kind == CK.CXX_THIS_EXPR:
            raise kb.error("lambdas using 'this' are not supported in device code", x)
        if x.kind == CK.DECL_REF_EXPR and x.referenced is not None and \
                x.referenced.kind in (CK.VAR_DECL, CK.PARM_DECL) and decl_key(x.referenced) in outer:
            names.setdefault(decl_key(x.referenced), x.referenced)
        stack.extend(x.get_children())
    if len(names) < len(fields):
        raise kb.error("lambda init-captures are not supported in device code", c)
    if by_ref == {True}:
        return Closure(operator, {key: outer[key] for key in names})
    if fields and not operator.is_const_method():
        raise kb.error("mutable lambdas capturing by value are not supported in device code", c)
    # Copies; a name the closure has no field for is a constant (not captured: its value).
    return Closure(operator, {key: capture_copy(kb, decl, outer[key], c) for key, decl in names.items()})


def capture_copy(kb: KernelBuilder, decl: ci.Cursor, binding, c: ci.Cursor):
    """A by-value capture of ``decl``: a copy of its value now."""
    t = decl.type
    if tm.is_array(t):
        raise kb.error(f"lambdas capturing the array '{decl.spelling}' by value are not supported in "
                       "device code", c)
    value = kb.binding_value(binding, c)
    if isinstance(value, Closure):
        return value
    if tm.is_pointer(tm.strip_reference(t)):
        return kb.pointer_binding(value, False, decl.spelling, c)
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
    return inlining.inline(kb, operator, args, c, discard, captures=closure.captures)


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
