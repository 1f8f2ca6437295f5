"""Inlining device functions: parameters become fresh locals (or bindings of the caller's pointers
and references); ``return`` becomes an assignment to a result local plus structured control flow."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable

import clang.cindex as ci

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import BOOL, I32
from polypy.ir.visitor import walk
from polypy.passes.eliminate_returns import remove_returns

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.closures import closure_declaration
from frontend.clang_setup import binary_operator, unary_operator
from frontend.lower import accessors, place_choice, recursion
from frontend.lower.initializer_lists import initializer_list_value
from frontend.lower.cccl import refuse_in_device_code
from frontend.lower.context import CK, Frame, decl_key, function_body, is_kernel_decl, sanitize
from frontend.lower.accessors import accessor_type
from frontend.lower.helpers import ArrayRef, ScalarArray, strip
from frontend.lower.pointer_choice import pending_pointer, pointer_hint
from frontend.lower.inheritance import bound_subobject
from frontend.lower.array_copies import copy_array
from frontend.values import (
    Aggregate, AggLV, ArrayBinding, Binding, BoundCopyLV, ChoiceVarLV, Closure, ClosureResult, PendingPtrLV, PlaceOf,
    RefResult, LValue, Pointer,
    PointerChoice, PtrVarLV, RecLV,
    RefBinding, Value, VarAddress,
)

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


# ------------------------------------------------------------------ inlining
def inline(kb: KernelBuilder, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor, discard: bool, *,
           this: LValue | None = None, prologue: Callable[[], None] | None = None,
           captures: dict | None = None, bound: list[Binding] | None = None) -> Value | None:
    """``fn`` inlined at call ``c``; ``this``: the object of a member function; ``prologue``
    runs in the callee's frame before its body (a constructor's member initializers);
    ``bound``: the parameters' bindings, made by the caller (a call polypy makes itself, with
    values it computed: ``args`` is then empty)."""
    key = decl_key(fn)
    if kb.recursion is not None and kb.recursion.has(fn):  # a call inside a recursive group (recursion.py)
        if captures or bound is not None or prologue is not None:
            raise kb.error(f"this recursive call of '{fn.spelling}' is not supported", c)
        return kb.recursion.call(fn, args, c, discard, this)
    again = next((i for i, f in enumerate(kb.frames) if recursion.same_function(f, key, fn)), None)
    if again is not None:  # a recursive call: its outermost call becomes a call machine (recursion.py)
        if captures or bound is not None or prologue is not None or kb.frames[again].is_kernel:
            raise kb.error(f"recursive call to '{fn.spelling}' is not supported", c)
        raise recursion.RecursionFound(again, kb.frames[again].cursor)
    if is_kernel_decl(fn):
        raise kb.error("kernels cannot be called from device code", c)
    refuse_in_device_code(fn, kb.error, call=c)
    body = function_body(fn)
    if body is None:
        raise kb.error(f"call to '{fn.spelling}', which has no definition polypy can translate", c)
    params = list(fn.get_arguments())
    given = len(bound) if bound is not None else len(args)
    if given != len(params):
        raise kb.error(f"call to '{fn.spelling}' with {given} arguments, expected {len(params)}", c)
    mutated = kb.assigned_decls(fn)
    env: dict[tuple, Binding] = dict(captures or {})  # a lambda's captured variables
    for p, binding in zip(params, bound or ()):
        env[decl_key(p)] = binding
    # Arguments are evaluated in the caller's frame, before the callee runs.
    for i, (p, a) in enumerate(zip(params, args)):
        env[decl_key(p)] = bind_argument(kb, p, a, fn, i, mutated, c)
    result: LValue | None = None
    rt = fn.result_type
    returns_this = False
    if fn.kind == CK.CONSTRUCTOR:
        pass
    elif tm.is_reference(rt):
        # `T& operator+=(...) { ...; return *this; }`: the call's value is the object itself.
        returns_this = this is not None and _returns_only_this(fn)
        if not returns_this and not discard:
            if not _returns_once_at_the_end(fn):
                # several returns: the place is one of those they name (place_choice.py)
                result = RefResult(choices=[], sel=kb.temp(I32, n.Const(0, I32), sanitize(fn.spelling) + "_which", c))
            else:
                # `float& at(int i) { return a[i]; }` used as a value: the place its one return names.
                result = RefResult()
    elif tm.is_pointer(rt) and not tm.is_pointer(tm.pointee(rt)):
        # A pointer result: the first `return` fixes its buffer; a `return` into another one
        # makes it a pointer into one of several buffers (pointer_choice.py).
        name = sanitize(fn.spelling) + "_ret"
        result = pending_pointer(kb, ("return", name, id(c)), name, pointer_hint(kb, ("return", key)), None, c)
    elif rt.get_canonical().kind != ci.TypeKind.VOID:
        st = tm.scalar_type(rt)
        if st is not None:
            result = kb.temp(st, None, fn.spelling + "_ret", c)
        elif tm.is_record(rt) and closure_declaration(rt) is not None:
            # `auto make_scale(float s) { return [s](float x) { ... }; }`: the closure its one
            # return makes (statements.return_stmt)
            if not _returns_once_at_the_end(fn):
                raise kb.error(f"'{fn.spelling}' returns a lambda from several returns, which is not supported "
                               "in device code", c)
            result = ClosureResult()
        elif tm.is_record(rt):
            fields: dict[str, LValue] = {}
            for leaf in tm.leaves(rt):
                if leaf.scalar is None:
                    raise kb.error(f"'{fn.spelling}' returns a record holding pointers, which is not supported", c)
                fields[leaf.path] = kb.temp(leaf.scalar, None, fn.spelling + "_ret" + leaf.path, c)
            result = AggLV(fields, rt.spelling)
        else:
            raise kb.error(f"'{fn.spelling}' returns '{rt.spelling}', which is not supported", c)
    frame = Frame(key, fn, env, result=result, this=this)
    depth = len(kb.frames)
    buffers_before = set(kb.buffers)
    kb.frames.append(frame)
    kb.call_sites.append(c)
    saved_depth = kb.loop_depth
    kb.loop_depth = 0
    recurs = False
    try:
        with kb.sub_block() as out:
            if prologue is not None:
                prologue()
            kb.statement(body)
    except recursion.RecursionFound as e:
        if e.index != depth or kb.recursion is not None:
            raise
        recurs = True
    finally:
        kb.loop_depth = saved_depth
        kb.frames.pop()
        kb.call_sites.pop()
    if recurs:
        # the local arrays of the lowering given up: dropped at the end if nothing reads them
        kb.abandoned_locals |= {b for b in kb.buffers if b not in buffers_before and kb.buffers[b].space == "local"}
        if captures or prologue is not None or bound is not None or kb.place_calls and kb.place_calls[-1] == c:
            raise kb.error(f"this call of the recursive function '{fn.spelling}' is not supported", c)
        return recursion.lower_group(kb, fn, env, this, c, discard)
    for s in remove_returns(tuple(out), kb.names.fresh):
        kb.emit(s)
    if kb.assert_flag is not None and any(isinstance(x, n.Assign) and x.name == kb.assert_flag
                                          for s in out for x in walk(s)):
        # A failed assert in the callee stops the thread: the caller returns too.
        kb.emit(n.If(n.Var(kb.assert_flag, BOOL), (n.Return(loc=kb.loc(c)),), loc=kb.loc(c)))
    wants_place = bool(kb.place_calls) and kb.place_calls[-1] == c
    if returns_this and not discard:
        assert this is not None
        return PlaceOf(this) if wants_place else kb.read(this, c)
    if isinstance(frame.result, RefResult) and frame.result.choices is not None:
        frame.result.target = place_choice.chosen_place(kb, frame.result, out, fn, c)
    if isinstance(frame.result, RefResult):
        if frame.result.target is None:
            raise kb.error(f"'{fn.spelling}' returns no place polypy can follow", c)
        return PlaceOf(frame.result.target) if wants_place else kb.read(frame.result.target, c)
    if isinstance(frame.result, ClosureResult):
        if frame.result.closure is None:
            raise kb.error(f"'{fn.spelling}' returns no lambda polypy can follow", c)
        return None if discard else frame.result.closure
    if result is None or discard:
        return None
    result = frame.result  # a pointer result is fixed by its first return
    if isinstance(result, PendingPtrLV):
        raise kb.error(f"'{fn.spelling}' returns no pointer polypy can follow", c)
    return kb.read(result, c)


def bind_argument(kb: KernelBuilder, p: ci.Cursor, a: ci.Cursor, fn: ci.Cursor, i: int, mutated: set[tuple],
                  c: ci.Cursor) -> Binding:
    pt = p.type
    name = p.spelling or f"arg{i}"
    if accessor_type(pt) is not None:  # an accessor, by value or by reference (accessors.py)
        return accessors.accessor_binding(kb, p, a, fn, "parameter")
    if tm.is_reference(pt):
        target_t = tm.strip_reference(pt)
        if decl_key(tm.canonical(target_t).get_declaration()) in kb.closure_types or \
                strip(a).kind == CK.LAMBDA_EXPR:  # (`unroll<4>([&](int i) { ... })` to an `F&&`)
            # a lambda by reference (`const F& f`): the same closure (lambdas.py: its copies are
            # never changed, so sharing it is exact)
            value = kb.arg_value(a, fn, i)
            if isinstance(value, Closure):
                return value
        if tm.is_array(target_t) and tm.scalar_type(tm.canonical(target_t).element_type) is not None:
            # `T (&a)[N]` of scalars: bound as the array's first element's address, as a
            # `T*` parameter would be (the callee indexes it; its extent is the argument's)
            return array_reference_binding(kb, p, a, fn, i, mutated)
        if tm.is_array(target_t):
            raise kb.error(f"parameter '{name}' of '{fn.spelling}' is a reference to an array "
                           f"('{pt.spelling}'), which is not supported: declare it as a pointer to the "
                           "elements", a)
        inner = strip(a)
        try:
            # a derived object bound to a `Base&`: its base subobject (frontend.lower.inheritance)
            return RefBinding(bound_subobject(kb, kb.lvalue(inner), a, pt, a))
        except UserError:
            if not target_t.is_const_qualified() and not (pt.kind == ci.TypeKind.RVALUEREFERENCE and _prvalue(a)):
                raise
        value = kb.arg_value(a, fn, i)  # const T& or T&& bound to a temporary (its own copy)
        copy = copy_to_local(kb, value, target_t, name, a)
        return BoundCopyLV(copy.fields, copy.spelling) if type(copy) is AggLV else copy
    value = initializer_list_value(kb, a, pt) or kb.arg_value(a, fn, i)  # (`std::max({a, b, c})`)
    if isinstance(value, Closure):  # a lambda passed to a function template
        return closure_copy(kb, value, a)
    if isinstance(value, ArrayRef):
        value = value.decay(kb, a)
    if tm.is_pointer(pt) or tm.is_array(pt):
        if isinstance(value, VarAddress):
            return value
        if not isinstance(value, (Pointer, PointerChoice)):
            raise kb.error(f"argument for pointer parameter '{name}' must point into a buffer", a)
        return kb.pointer_binding(value, decl_key(p) in mutated, name, a, decl_key(p))
    if tm.is_record(pt) and tm.has_array_member(pt) and not tm.has_union(pt) and isinstance(value, Aggregate) and \
            not any(tm.is_pointer(leaf.ctype) for leaf in tm.leaves(pt)):
        # `float det(M m)` of `struct M { float a[3][3]; }`: a copy in memory, as a local of the
        # record is, so that `m.a[r][s]` is an element at run-time indices (member_rows.py)
        return record_copy_in_memory(kb, value, pt, name, a)
    return copy_to_local(kb, value, pt, name, a)


def record_copy_in_memory(kb: KernelBuilder, value: Aggregate, t: ci.Type, name: str, a: ci.Cursor) -> ScalarArray:
    """A local record in memory (a one-element array of it) holding a copy of ``value``."""
    binding = kb.record_array(name, (1,), tm.local_layout(t, kb.loc(a)), "local", kb.loc(a))
    place = kb.element_lv(binding, (n.Const(0, I32),), a)
    kb.assign(kb.expand_record(place, a) if isinstance(place, RecLV) else place, value, a)
    return ScalarArray(binding)


def _prvalue(a: ci.Cursor) -> bool:
    """Whether argument ``a`` is certainly a prvalue (a literal, arithmetic, a call returning a
    value: ``make_pair(v * 2, 3)``), whose ``T&&`` parameter binds a temporary of its own; not
    ``std::move(x)``, which names ``x``."""
    e = strip(a)
    if e.kind in (CK.INTEGER_LITERAL, CK.FLOATING_LITERAL, CK.CXX_BOOL_LITERAL_EXPR, CK.CHARACTER_LITERAL,
                  CK.CXX_FUNCTIONAL_CAST_EXPR):
        return True
    if e.kind == CK.BINARY_OPERATOR:
        return binary_operator(e) not in ("=", ",")
    if e.kind == CK.UNARY_OPERATOR:
        return unary_operator(e) in ("-", "+", "!", "~")
    if e.kind == CK.CALL_EXPR and e.referenced is not None and e.referenced.kind == CK.FUNCTION_DECL:
        return not tm.is_reference(e.referenced.result_type)
    return False


def closure_copy(kb: KernelBuilder, closure: Closure, c: ci.Cursor) -> Closure:
    """A copy of a lambda's closure object: the closure itself when its copies never change;
    for a ``mutable`` lambda made in device code, fresh copies of the captures it owns (a
    call of the copy changes those, not the original's; by-reference captures stay shared)."""
    if not closure.owned and not closure.owns_this:
        return closure.shared_copy(kb.error, c)
    captures = dict(closure.captures)
    for key in closure.owned:
        b = captures[key]
        if isinstance(b, ArrayBinding):  # an array captured by value
            captures[key] = copy_array(kb, b, "capture", c)
        elif isinstance(b, Closure):
            captures[key] = closure_copy(kb, b, c)
        elif isinstance(b, (PtrVarLV, ChoiceVarLV)):
            captures[key] = kb.pointer_binding(kb.binding_value(b, c), True, "capture", c, key)
        else:
            value = kb.binding_value(b, c)
            captures[key] = copy_to_local(kb, value, None, "capture", c)
    this = closure.this
    if closure.owns_this:  # a `mutable` `[*this]` lambda's own object
        this = copy_to_local(kb, kb.read(this, c), None, "this_copy", c)
    return dataclasses.replace(closure, captures=captures, this=this)


def array_reference_binding(kb: KernelBuilder, p: ci.Cursor, a: ci.Cursor, fn: ci.Cursor, i: int,
                            mutated: set[tuple]) -> Binding:
    """A reference-to-array parameter of scalars, ``T (&a)[N]`` (CUB's ``ITEMS_PER_THREAD``
    arrays): the argument is an array of ``N`` elements of ``T`` (clang checks the type), so
    the callee's ``a[k]`` is the argument's element ``k``, as through a ``T*``."""
    value = kb.arg_value(a, fn, i)
    if isinstance(value, ArrayRef):
        value = value.decay(kb, a)
    if isinstance(value, VarAddress):
        return value
    if not isinstance(value, (Pointer, PointerChoice)):
        raise kb.error(f"argument for array reference parameter '{p.spelling}' must name an array", a)
    return kb.pointer_binding(value, decl_key(p) in mutated, p.spelling or f"arg{i}", a, decl_key(p))


def copy_to_local(kb: KernelBuilder, value: Value | None, t: ci.Type | None, name: str, a: ci.Cursor) -> Binding:
    """A fresh local holding ``value`` (of C type ``t``; None: the value's own type)."""
    st = tm.scalar_type(t) if t is not None else (value.type if isinstance(value, n.Expr) else None)
    if st is not None:
        if not isinstance(value, n.Expr):
            raise kb.error(f"argument '{name}' must be a number", a)
        return kb.temp(st, convert(value, st), name, a)
    if t is None or tm.is_record(t):
        if not isinstance(value, Aggregate):
            raise kb.error(f"argument '{name}' must be a record", a)
        fields: dict[str, LValue] = {}
        for path, v in value.fields.items():
            if isinstance(v, Pointer):
                fields[path] = PtrVarLV(v, None)
            elif isinstance(v, Closure):  # a lambda held by a record (closure_records.py)
                fields[path] = closure_copy(kb, v, a)  # type: ignore[assignment]
            elif isinstance(v, n.Expr):
                fields[path] = kb.temp(v.type, v, name + path, a)
            else:
                raise kb.error(f"unsupported member '{path}' in argument '{name}'", a)
        return AggLV(fields, value.spelling)
    raise kb.error(f"parameter '{name}' of type '{t.spelling if t is not None else '?'}' is not supported", a)


def _returns_only_this(fn: ci.Cursor) -> bool:
    """Whether every ``return`` of ``fn`` (outside lambdas) returns ``*this``."""
    found = False
    stack = [function_body(fn)]
    while stack:
        c = stack.pop()
        if c is None or c.kind == CK.LAMBDA_EXPR:
            continue
        if c.kind == CK.RETURN_STMT:
            value = [strip(ch) for ch in c.get_children()]
            if len(value) != 1 or value[0].kind != CK.UNARY_OPERATOR:
                return False
            operand = [strip(ch) for ch in value[0].get_children()]
            if unary_operator(value[0]) != "*" or len(operand) != 1 or operand[0].kind != CK.CXX_THIS_EXPR:
                return False
            found = True
            continue
        stack.extend(c.get_children())
    return found


def _returns_once_at_the_end(fn: ci.Cursor) -> bool:
    """Whether ``fn``'s only ``return`` is the last statement of its body (so the place it names
    is in scope after the inlined body)."""
    body = function_body(fn)
    statements = list(body.get_children()) if body is not None else []
    if not statements or statements[-1].kind != CK.RETURN_STMT:
        return False
    count = 0
    stack = list(statements)
    while stack:
        c = stack.pop()
        if c.kind == CK.LAMBDA_EXPR:
            continue
        count += c.kind == CK.RETURN_STMT
        stack.extend(c.get_children())
    return count == 1
