"""C++ records with member functions in device code: member function calls (``v.dot(w)``,
``p->norm()``, an implicit ``this->f()``), member operators (``a + b``, ``f(x)`` through
``operator()``), user constructors (member initializers in declaration order, default member
initializers, then the body) and ``this``.

A member function is inlined like a free device function, with ``this`` bound to the object's
place (an ``AggLV`` of a local record, a ``RecLV`` of a record in device memory, or a temporary
holding a record value): ``x`` inside it is ``this->x``, a member of that place. Clang has already
resolved overloads, so the callee is the call's referenced declaration."""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.errors import UserError

from frontend import bases as cxx
from frontend import ctypes_map as tm
from frontend.lower import inlining, lambdas, virtual_calls
from frontend.lower.context import CK, function_body
from frontend.lower.helpers import strip, zero_of
from frontend.lower.inheritance import downcast_place, subobject, this_path, this_source
from frontend.values import AggLV, Closure, LValue, Value, VarAddress

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder

# Object expressions whose place ``lvalue`` finds (everything else is a temporary record value).
_PLACES = (CK.DECL_REF_EXPR, CK.MEMBER_REF_EXPR, CK.ARRAY_SUBSCRIPT_EXPR, CK.UNARY_OPERATOR)


# ------------------------------------------------------------------ this
def this_place(kb: KernelBuilder, c: ci.Cursor) -> LValue:
    this = kb.frame.this
    if this is None:
        raise kb.error("'this' outside a member function", c)
    return this


def this_expr(kb: KernelBuilder, c: ci.Cursor, discard: bool) -> Value:
    """``this``: the address of the object (usable as ``this->x`` and ``*this``)."""
    return VarAddress(this_place(kb, c))


# ------------------------------------------------------------------ calls
def method_call(kb: KernelBuilder, c: ci.Cursor, fn: ci.Cursor, children: list[ci.Cursor],
                discard: bool) -> Value | None:
    """A call of a member function or member operator ``fn`` (``c`` is the call expression)."""
    if fn.is_virtual_method():  # the overrider of the object's dynamic class (virtual_calls.py)
        return virtual_calls.virtual_call(kb, c, fn, children, discard, lambda base: this_place(kb, c) if base is None
                                          else object_place(kb, base, fn, c))
    check_method(kb, fn, c)
    definition = fn.get_definition() or fn
    if fn.kind == CK.CXX_METHOD and fn.spelling.startswith("operator"):
        # Clang lists the operands around the operator's name: the object first.
        operands = [ch for ch in children
                    if not (strip(ch).kind == CK.DECL_REF_EXPR and strip(ch).spelling == fn.spelling)]
        if fn.spelling == "operator()" and (lambdas.is_closure_type(kb, operands[0].type) or
                                            strip(operands[0]).kind == CK.LAMBDA_EXPR):  # `[&] { ... }()`
            closure = kb.expr(operands[0])
            if not isinstance(closure, Closure):
                raise kb.error("this call of a lambda is not supported in device code", c)
            return lambdas.call_closure(kb, closure, operands[1:], c, discard, definition)
        if fn.is_static_method():
            return inlining.inline(kb, definition, operands, c, discard)
        this = subobject(kb, object_place(kb, operands[0], fn, c), this_path(kb, operands[0], fn, c), c,
                         this_source(kb, operands[0]))
        return inlining.inline(kb, definition, operands[1:], c, discard, this=this)
    callee = strip(children[0]) if children else None
    args = children[1:]
    if fn.is_static_method():
        return inlining.inline(kb, definition, args, c, discard)
    if callee is None or callee.kind != CK.MEMBER_REF_EXPR:
        raise kb.error("calls through pointers to member functions are not supported", c)
    base = next((ch for ch in callee.get_children() if ch.kind.is_expression()), None)
    this = this_place(kb, c) if base is None else object_place(kb, base, fn, c)
    # a base class's member function: `this` is the object's base subobject
    this = subobject(kb, this, this_path(kb, base, fn, c), c, this_source(kb, base))
    return inlining.inline(kb, definition, args, c, discard, this=this)


def check_method(kb: KernelBuilder, fn: ci.Cursor, c: ci.Cursor) -> None:
    if fn.is_virtual_method():
        raise kb.error(f"virtual member function '{fn.spelling}' is not supported in device code", c)
    record = fn.semantic_parent
    record_bases(kb, record, c)  # refuses the bases polypy cannot lay out (frontend.bases)
    if function_body(fn.get_definition() or fn) is None:
        raise kb.error(f"member function '{fn.spelling}' has no definition polypy can translate", c)


def object_place(kb: KernelBuilder, obj: ci.Cursor, fn: ci.Cursor, c: ci.Cursor) -> LValue:
    """Where the object of a call of member ``fn`` lives: its place, or a temporary holding
    its value (a function's or constructor's result; any object for a ``const`` member)."""
    inner = strip(obj)
    if tm.is_pointer(inner.type):  # `p->f()`
        return kb.deref(kb.expr(inner), c)
    if inner.kind == CK.CXX_THIS_EXPR:
        return this_place(kb, c)
    if inner.kind in _PLACES:
        return kb.lvalue(inner)
    if inner.kind in (CK.CXX_STATIC_CAST_EXPR, CK.CSTYLE_CAST_EXPR):
        place = downcast_place(kb, inner)  # `static_cast<Derived&>(*this).f()`: the object itself
        if place is not None:
            return place
    callee = inner.referenced if inner.kind == CK.CALL_EXPR else None
    if callee is not None and callee.kind != CK.CONSTRUCTOR and tm.is_reference(callee.result_type) and \
            not tm.is_pointer(tm.strip_reference(callee.result_type)) and not fn.is_const_method():
        # `a.add(x).add(y)`: a call returning a reference (`return *this;`) names the place the
        # non-const member changes (a const one reads a copy, below)
        return kb.lvalue(inner)
    result = inner.kind == CK.CXX_FUNCTIONAL_CAST_EXPR or \
        (callee is not None and (callee.kind == CK.CONSTRUCTOR or not tm.is_reference(callee.result_type)))
    if not fn.is_const_method() and inner.kind == CK.CONDITIONAL_OPERATOR:
        return kb.lvalue(inner)  # `(c ? a : b).inc()` changes a or b: one of two places (place_choice.py)
    if not fn.is_const_method() and not result:
        # a copy would lose the change
        raise kb.error(f"calling the non-const member function '{fn.spelling}' on this object is not supported "
                       "in device code (name the object)", obj)
    value = kb.record_value(inner, inner.type)
    return inlining.copy_to_local(kb, value, tm.strip_reference(inner.type), "obj", obj)  # type: ignore[return-value]


# ------------------------------------------------------------------ constructors
def is_user_construction(kb: KernelBuilder, fn: ci.Cursor, c: ci.Cursor) -> bool:
    """Whether constructor ``fn`` does more than copy or leave members unset: it is user-written,
    or its record gives members default initializers or has members whose own default
    constructor does something. (Clang gives the implicit members it defines a body too;
    those are "defaulted".)"""
    if not fn.is_default_method():
        return function_body(fn.get_definition() or fn) is not None
    if fn.is_copy_constructor() or fn.is_move_constructor():
        return False
    record = fn.semantic_parent
    return record is not None and (any(
        f.kind == CK.FIELD_DECL and (member_initializer(f) is not None or
                                     default_constructor(kb, f.type, c) is not None)
        for f in _fields(record)) or any(default_constructor(kb, b.type, c) is not None
                                               for b in record_bases(kb, record, c)))


def record_bases(kb: KernelBuilder, record: ci.Cursor | None, c: ci.Cursor) -> list[cxx.Base]:
    """The base subobjects of the class ``record`` (refused ones with ``c``'s location)."""
    if record is None or record.kind == CK.UNION_DECL or record.type.get_canonical().kind != ci.TypeKind.RECORD:
        return []
    try:
        return cxx.bases(record.type)
    except UserError as e:
        raise kb.error(e.message, c) from None


def construct_value(kb: KernelBuilder, c: ci.Cursor, fn: ci.Cursor, args: list[ci.Cursor]) -> Value:
    """``T(a, b)`` as a value: constructed in a temporary record."""
    rt = tm.strip_reference(c.type)
    fields: dict[str, LValue] = {}
    for leaf in tm.leaves(rt):
        if leaf.scalar is None:
            raise kb.error(f"'{rt.spelling}' has a member '{leaf.path[1:]}' of type '{leaf.ctype.spelling}', "
                           "which is not supported in a constructed record", c)
        fields[leaf.path] = kb.temp(leaf.scalar, None, "tmp" + leaf.path.replace(".", "_"), c)
    target = AggLV(fields, rt.spelling)
    construct(kb, target, fn, args, c)
    return kb.read(target, c)


def construct(kb: KernelBuilder, target: LValue, fn: ci.Cursor, args: list[ci.Cursor], c: ci.Cursor) -> None:
    """Run constructor ``fn`` on ``target``: members in declaration order from the member
    initializer list or their default initializers, then the body."""
    implicit = isinstance(fn, ImplicitDefault)
    definition = None if implicit else fn.get_definition() or fn
    record = fn.record if implicit else fn.semantic_parent
    bases = record_bases(kb, record, c)
    delegate = None if definition is None else _delegated_construction(definition, record)
    if delegate is not None:
        # `V() : V(0, 0, 0) {}`: the target constructor runs whole (its members, its body),
        # with arguments evaluated in this constructor's frame; then this body.
        ctor, ctor_args = delegate
        inlining.inline(kb, definition, args, c, True, this=target,
                        prologue=lambda: initialize_by(kb, this_place(kb, c), record.type, ctor, ctor_args, c))
        return
    inits: dict[str, ci.Cursor | None] = {}
    pending: str | None = None
    for ch in definition.get_children() if definition is not None else ():
        if ch.kind == CK.MEMBER_REF:
            pending = ch.spelling
            inits[pending] = None
        elif pending is not None and ch.kind.is_expression():
            inits[pending] = ch
            pending = None
        elif ch.kind in (CK.TYPE_REF, CK.TEMPLATE_REF) and ch.extent.start.offset > definition.location.offset:
            # After the constructor's name (not a `T::` qualifier): `: Base(x)` (its base
            # subobject's initializer) or a delegating `: T(x, 0)` (refused).
            base = next((b for b in bases if ch.referenced is not None and
                         _names_base(b.type.get_declaration(), ch.referenced)), None)
            if base is None:
                raise kb.error("delegating constructor initializers (and initializers of bases polypy cannot "
                               "see) are not supported in device code", c)
            pending = base.name
            inits[pending] = None

    def here() -> LValue:
        return target if implicit else this_place(kb, c)

    def prologue() -> None:
        for b in bases:  # base subobjects first, in declaration order
            place = kb.member_lv(here(), b.name, c)
            if b.name in inits:
                initialize(kb, place, b.type, inits[b.name], c)
            else:
                ctor = default_constructor(kb, b.type, c)
                if ctor is not None:
                    construct(kb, place, ctor, [], c)
        own_members()

    fields = _fields(record)

    def own_members() -> None:
        for f in fields:
            if f.spelling in inits:
                init = inits[f.spelling]
            else:
                default = member_initializer(f)
                if default is None:
                    ctor = default_constructor(kb, f.type, c)
                    if ctor is not None:  # a member record's own default constructor
                        construct(kb, kb.member_lv(here(), f.spelling, c), ctor, [], c)
                    continue  # otherwise left unset, as C++ leaves it
                init = default
            place = kb.member_lv(here(), f.spelling, c)
            initialize(kb, place, f.type, init, c)

    if definition is None:  # an instance's implicit default constructor: its members, no body
        prologue()
        return
    inlining.inline(kb, definition, args, c, True, this=target, prologue=prologue)


class ImplicitDefault:
    """The implicit default constructor of a class template instance, which libclang does not
    list (it lists no member of an implicit instance): ``construct`` runs its bases' and members'
    initialization on the object."""

    def __init__(self, record: ci.Cursor):
        self.record = record


def _names_base(decl: ci.Cursor, referenced: ci.Cursor) -> bool:
    """Whether a constructor's initializer naming ``referenced`` (a class, or a class template:
    ``: Base<T>(a, 7)``) names the base class ``decl``."""
    if decl == referenced:
        return True
    pattern = ci.conf.lib.clang_getSpecializedCursorTemplate(decl)
    return pattern is not None and pattern == referenced


def _delegated_construction(definition: ci.Cursor, record: ci.Cursor | None) -> tuple[ci.Cursor, list] | None:
    """The constructor a delegating constructor (``V(float a) : V(a, a, a) {}``) names, and the
    arguments of that call, or None. Clang lists the class's own name after the constructor's
    name, then the call of the target constructor."""
    if record is None:
        return None
    children = list(definition.get_children())
    for i, ch in enumerate(children):
        if ch.kind in (CK.TYPE_REF, CK.TEMPLATE_REF) and ch.extent.start.offset > definition.location.offset and \
                ch.referenced is not None and tm.canonical(ch.referenced.type) == tm.canonical(record.type):
            call = strip(children[i + 1]) if i + 1 < len(children) else None
            if call is not None and call.referenced is not None and call.referenced.kind == CK.CONSTRUCTOR:
                return call.referenced, [a for a in call.get_children() if a.kind.is_expression()]
    return None


def initialize_by(kb: KernelBuilder, place: LValue, t: ci.Type, ctor: ci.Cursor, args: list[ci.Cursor],
                  c: ci.Cursor) -> None:
    """``place`` initialized by constructor ``ctor`` called with ``args``: a user construction
    runs; an implicit copy or move copies its argument's value."""
    if is_user_construction(kb, ctor, c):
        construct(kb, place, ctor, args, c)
    elif len(args) == 1:
        kb.assign(place, kb.record_value(args[0], t), c)
    elif not args:  # `: V()` value-initializes: an implicit default constructor zeroes
        kb.assign(place, zero_of(place), c)
    else:
        raise kb.error(f"constructing '{t.spelling}' this way is not supported in device code", c)


def default_constructor(kb: KernelBuilder, t: ci.Type, c: ci.Cursor) -> ci.Cursor | None:
    """The default constructor of type ``t`` when running it does something, else None."""
    ct = tm.canonical(t)
    if ct.kind in (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY):
        if default_constructor(kb, ct.element_type, c) is not None:
            raise kb.error(f"arrays of records with constructors ('{t.spelling}') are not supported in device "
                           "code", c)
        return None
    if not tm.is_record(ct):
        return None
    decl = ct.get_declaration()
    for m in decl.get_children():
        if m.kind == CK.CONSTRUCTOR and m.is_default_constructor() and is_user_construction(kb, m, c):
            return m
    pattern = _pattern(decl)
    if pattern is None:
        return None
    # An implicit instance of a class template: libclang lists none of its members.
    if any(m.kind == CK.CONSTRUCTOR and m.is_default_constructor() for m in pattern.get_children()):
        raise kb.error(f"the default constructor of '{t.spelling}' (an instance of a class template) is run here, "
                       "which polypy cannot follow: construct it explicitly (`: Base<T>()`, `T x = T();`)", c)
    does = any(member_initializer(f) is not None or default_constructor(kb, f.type, c) is not None
               for f in _fields(decl)) or any(default_constructor(kb, b.type, c) is not None
                                               for b in record_bases(kb, decl, c))
    return ImplicitDefault(decl) if does else None  # type: ignore[return-value]


def _pattern(decl: ci.Cursor) -> ci.Cursor | None:
    """The class template of which ``decl`` is an implicit instance (libclang lists no children
    for those), or None."""
    if any(True for _ in decl.get_children()):
        return None
    pattern = ci.conf.lib.clang_getSpecializedCursorTemplate(decl)
    if pattern is None or pattern.kind not in (CK.CLASS_TEMPLATE, CK.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION):
        return None
    return pattern


def initialize(kb: KernelBuilder, place: LValue, t: ci.Type, init: ci.Cursor | None, c: ci.Cursor) -> None:
    """A member initialized from ``init`` (``x()``, ``x{}``: value-initialized, zero)."""
    if init is None or (init.kind in (CK.UNEXPOSED_EXPR, CK.INIT_LIST_EXPR) and not list(init.get_children())):
        kb.assign(place, zero_of(place), c)
        return
    if init.kind == CK.INIT_LIST_EXPR and tm.scalar_type(t) is not None and len(list(init.get_children())) == 1:
        init = next(iter(init.get_children()))  # `x{v}`
    if tm.is_record(t):
        ctor = strip(init)
        if ctor.kind == CK.CALL_EXPR and ctor.referenced is not None and \
                ctor.referenced.kind == CK.CONSTRUCTOR and is_user_construction(kb, ctor.referenced, ctor):
            construct(kb, place, ctor.referenced, [a for a in ctor.get_children() if a.kind.is_expression()],
                          ctor)
            return
        kb.assign(place, kb.record_value(init, t), init)
        return
    kb.assign(place, kb.expr(init), init)


def member_initializer(field: ci.Cursor) -> ci.Cursor | None:
    """The default member initializer of ``field`` (``int n = 3;``), or None (of a class template
    instance's member, the instantiated one, which libclang shows). An array member's children
    start with its size (``float x[8]``: the literal 8), which initializes nothing."""
    # (After the member's name: not a template argument of its type, `Loader<int, CHECKED> l;`.)
    exprs = [ch for ch in field.get_children() if ch.kind.is_expression()
             and ch.extent.start.offset > field.location.offset]
    t = field.type.get_canonical()
    while exprs and t.kind in (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.DEPENDENTSIZEDARRAY):
        exprs = exprs[1:]  # one size per dimension (`float a[3][3]`: two)
        t = t.element_type.get_canonical()
    return exprs[-1] if exprs else None


def _fields(record: ci.Cursor | None) -> list[ci.Cursor]:
    """The own members of class ``record``: through its type, as libclang lists no children for
    an implicit class template instance."""
    if record is None or record.type.get_canonical().kind != ci.TypeKind.RECORD:
        return []
    return list(record.type.get_canonical().get_fields())
