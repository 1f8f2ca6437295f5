"""Records holding lambdas made in device code (``template <class F> struct Mapper { F f; ... };
Mapper<decltype(l)> m{l};``): a local record whose members of closure type are ``Closure``
bindings beside the places of its other members (an ``AggLV`` whose field ``.f`` is the closure).
``m.f`` is then that closure, so ``f(x)`` in a member function calls it; a copy of the record
copies it as a copy of the lambda does (``inlining.closure_copy``: shared when its copies never
change, the captures it owns copied for a ``mutable`` one; ``inlining.copy_to_local``).

A brace list (aggregate initialization) or a copy makes such a record; a user-written
constructor taking the lambda, and a record holding a lambda in memory, are refused, located."""
from __future__ import annotations

from typing import TYPE_CHECKING

import clang.cindex as ci

from polypy.ir import nodes as n

from frontend import ctypes_map as tm
from frontend.closures import closure_declaration
from frontend.lower import inlining
from frontend.lower.helpers import strip
from frontend.lower.context import CK
from frontend.values import AggLV, Closure, LValue

if TYPE_CHECKING:
    from frontend.lower.builder import KernelBuilder


def holds_closure(t: ci.Type) -> bool:
    """Whether record type ``t`` has a member (its own) whose type is a lambda's closure."""
    return tm.is_record(t) and any(closure_declaration(f.type) is not None for f in tm.canonical(t).get_fields())


def closure_record(kb: KernelBuilder, t: ci.Type, init: ci.Cursor | None, name: str, where: ci.Cursor) -> AggLV:
    """The local record of type ``t`` made from brace list ``init``: each member from its item,
    in declaration order."""
    init = strip(init) if init is not None else None
    ctor = init.referenced if init is not None and init.kind == CK.CALL_EXPR else None
    if ctor is not None and ctor.kind == CK.CONSTRUCTOR and ctor.is_default_method() and \
            (ctor.is_copy_constructor() or ctor.is_move_constructor()):
        # `auto d = c;`: a copy, its lambdas copied as lambdas are
        source = [a for a in init.get_children() if a.kind.is_expression()]
        copy = inlining.copy_to_local(kb, kb.record_value(source[0], t), t, name, init) if len(source) == 1 else None
        if isinstance(copy, AggLV):
            return copy
    if init is None or init.kind != CK.INIT_LIST_EXPR:
        raise kb.error(f"a record holding a lambda ('{tm.canonical(t).spelling}') is supported in device code "
                       "when a brace list makes it (Mapper<decltype(l)> m{l};)", where)
    items = list(init.get_children())
    fields: dict[str, LValue] = {}
    for k, f in enumerate(tm.canonical(t).get_fields()):
        item = items[k] if k < len(items) else None
        path = "." + f.spelling
        if closure_declaration(f.type) is not None:
            value = kb.expr(item) if item is not None else None
            if not isinstance(value, Closure):
                raise kb.error(f"member '{f.spelling}' of '{tm.canonical(t).spelling}' holds a lambda polypy cannot "
                               "follow", item or where)
            fields[path] = inlining.closure_copy(kb, value, item)
            continue
        st = tm.scalar_type(f.type)
        if st is not None:
            value = kb.scalar(item) if item is not None else None
            fields[path] = inlining.copy_to_local(kb, value if value is not None else n.Const(0, st), f.type,
                                                  name + path, item or where)  # type: ignore[assignment]
        elif tm.is_record(f.type) and not tm.has_array_member(f.type) and item is not None:
            copy = inlining.copy_to_local(kb, kb.record_value(item, f.type), f.type, name + path, item)
            if not isinstance(copy, AggLV):
                raise kb.error(f"member '{f.spelling}' of a record holding a lambda is not supported", item)
            fields.update({path + p: v for p, v in copy.fields.items()})
        else:
            raise kb.error(f"member '{f.spelling}' of type '{f.type.spelling}' of a record holding a lambda is not "
                           "supported in device code", item or where)
    return AggLV(fields, tm.canonical(t).spelling)
