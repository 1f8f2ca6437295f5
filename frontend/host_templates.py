"""Host code inside classes and templates: which member functions host code has, which of them
are template patterns (a launch there names its kernel through the template's parameters), the
instances clang made of them, and the compile-time test that tells one instance from another.

A launch written once in a template's body (``k<T><<<g, b>>>(x)`` in ``template <class T> void
run(T*)``, or in a member of ``template <class Real> class Pi``, written in the class or outside
it) launches one kernel instance per instance of the template. clang has instantiated each used
instance's body (called from host code, or instantiated explicitly: ``template class Pi<float>;``),
where the launch names its kernel instance; the translation keeps the template's text and picks
the launcher with a test on the template's parameters (``__is_same(Real, float)``).

    template <class Real> struct Pi {          template <class Real> struct Pi {
      void go() {                                void go() {
        k<Real><<<g, b>>>(p);          ==>         if constexpr (__is_same(Real, float)) k_float_launch(...);
      } };                                         else if constexpr (__is_same(Real, double)) k_double_launch(...);
                                                 } };
"""
from __future__ import annotations

import hashlib

import clang.cindex as ci

from frontend.clang_setup import cursor_loc
from frontend.closures import closure_declaration
from frontend.lower import CK
from polypy.errors import UserError

_MEMBERS = (CK.CXX_METHOD, CK.CONSTRUCTOR, CK.DESTRUCTOR, CK.FUNCTION_TEMPLATE, CK.CONVERSION_FUNCTION)
_CLASSES = (CK.CLASS_DECL, CK.STRUCT_DECL, CK.CLASS_TEMPLATE, CK.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION)
_PARAMS = (CK.TEMPLATE_TYPE_PARAMETER, CK.TEMPLATE_NON_TYPE_PARAMETER, CK.TEMPLATE_TEMPLATE_PARAMETER)


def in_class_members(decls: list[ci.Cursor]) -> list[ci.Cursor]:
    """The member functions defined inside the class bodies of ``decls`` (the user's top-level
    declarations), nested classes included: host code that the top level does not list."""
    out: list[ci.Cursor] = []
    todo = [d for d in decls if d.kind in _CLASSES]
    while todo:
        cls = todo.pop(0)
        for m in cls.get_children():
            if m.kind in _CLASSES:
                todo.append(m)
            elif m.kind in _MEMBERS and m.is_definition():
                out.append(m)
    return out


def template_args(cursor: ci.Cursor) -> list[str]:
    """The template arguments of a function or class template instance, as C++ text."""
    out = []
    try:
        count = cursor.get_num_template_arguments()
    except Exception:  # noqa: BLE001 - libclang raises for non-templates on some versions
        return out
    for i in range(max(count, 0)):
        try:
            kind = cursor.get_template_argument_kind(i)
        except ValueError:  # a kind this clang.cindex does not name (a pack, in PyTorch's headers)
            kind = None
        if kind == ci.TemplateArgumentKind.INTEGRAL:
            out.append(str(cursor.get_template_argument_value(i)))
        elif kind == ci.TemplateArgumentKind.TYPE:
            out.append(cursor.get_template_argument_type(i).spelling)
        elif kind == ci.TemplateArgumentKind.DECLARATION:
            # `k<add>` and `k<mul>` (a function or object's address): libclang does not name the
            # declaration; the instances' USRs tell them apart (else they would be taken as one).
            out.append(f"arg{i}_{hashlib.sha1(cursor.get_usr().encode()).hexdigest()[:8]}")
        else:
            out.append(f"arg{i}")
    return out


def in_class_template(fn: ci.Cursor) -> bool:
    """Whether ``fn`` is a member of a class template (its body a pattern, not code)."""
    parent = fn.semantic_parent
    while parent is not None and parent.kind in _CLASSES:
        if parent.kind in (CK.CLASS_TEMPLATE, CK.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION):
            return True
        parent = parent.semantic_parent
    return False


def is_pattern(fn: ci.Cursor) -> bool:
    """A function template or a member of a class template: a launch in its body is resolved in
    the bodies of its instances."""
    return fn.kind == CK.FUNCTION_TEMPLATE or in_class_template(fn)


def _member_template_instance(fn: ci.Cursor) -> bool:
    """An instance of a member function template (whose template arguments libclang does not
    list for member functions)."""
    if fn.kind == CK.FUNCTION_DECL or fn.kind == CK.FUNCTION_TEMPLATE:
        return False
    pattern = ci.conf.lib.clang_getSpecializedCursorTemplate(fn)
    return pattern is not None and pattern.kind == CK.FUNCTION_TEMPLATE


def is_instance(fn: ci.Cursor) -> bool:
    """An instance of a function template, or a member function of an instance of a class
    template: a body clang instantiated."""
    if fn.kind not in (CK.FUNCTION_DECL, *_MEMBERS) or fn.kind == CK.FUNCTION_TEMPLATE:
        return False
    if template_args(fn) or _member_template_instance(fn):
        return True
    parent = fn.semantic_parent
    while parent is not None and parent.kind in (CK.CLASS_DECL, CK.STRUCT_DECL):
        if template_args(parent):
            return True
        parent = parent.semantic_parent
    return False


def explicit_class_members(decls: list[ci.Cursor], path: str) -> list[str]:
    """``Pi<float>::go`` for each member function of each class template that the file instantiates
    explicitly (``template class Pi<float>;``): the members clang instantiated there, which no
    call leads to. Members whose name is overloaded, constructors and destructors cannot be named
    so; a launch in one of them stays unresolved (and is refused) unless a call reaches it."""
    templates = {d.spelling: d for d in decls if d.kind == CK.CLASS_TEMPLATE}
    out = []
    for d in decls:
        if d.kind not in (CK.CLASS_DECL, CK.STRUCT_DECL) or not template_args(d) or list(d.get_children()):
            continue
        if d.location.file is None or d.location.file.name != path:
            continue
        first = next(iter(d.get_tokens()), None)
        if first is None or first.spelling != "template":
            continue  # `extern template class ...`: instantiated in another file
        pattern = templates.get(d.spelling)
        if pattern is None:
            continue
        members = [m for m in pattern.get_children() if m.kind == CK.CXX_METHOD]
        names = [m.spelling for m in members]
        spec = d.type.get_canonical().spelling
        out += [f"{spec}::{name}" for name in dict.fromkeys(names) if names.count(name) == 1]
    return out


def instance_condition(call: ci.Cursor, instance: ci.Cursor | None, top_level: list[ci.Cursor],
                       record=None) -> str:
    """``__is_same(T, float) && (B) == (128)``: the template arguments of ``instance`` (an instance
    of a host function template, or a member of a class template's instance), as a test on the
    template's parameters as the text around the launch ``call`` names them. A lambda's closure
    type (``frontend.closures``), which C++ cannot name, is tested as the record the translated
    program makes where the lambda is made (``record(closure class)``: its name), which the
    template's parameter then is, or holds as a base (``polypy_is_closure``, polypy's runtime)."""
    if instance is None:
        raise UserError("this launch launches different kernels from different instances of its function, "
                        "which polypy cannot tell apart", cursor_loc(call))
    own = template_args(instance)
    owner = instance.semantic_parent
    if owner is not None and (owner.kind not in (CK.CLASS_DECL, CK.STRUCT_DECL) or not template_args(owner)):
        owner = None
    if _member_template_instance(instance) and owner is None and record is not None and \
            instance.semantic_parent is not None and instance.semantic_parent.kind in (CK.CLASS_DECL, CK.STRUCT_DECL):
        terms = _member_closure_terms(instance, record)
        if terms:
            return " && ".join(terms)
    if _member_template_instance(instance) or (own and owner is not None) or \
            (owner is not None and owner.semantic_parent is not None and owner.semantic_parent.kind in _CLASSES):
        raise UserError("a launch whose kernel depends on the template parameters of a member function template "
                        "or of a nested class of a class template is not supported", cursor_loc(call))
    scope = _pattern_scope(call, top_level)
    if scope is None:
        raise UserError("this launch launches different kernels from different instances of its function, "
                        "which polypy cannot tell apart", cursor_loc(call))
    params = [p for p in scope.get_children() if p.kind in _PARAMS]
    source = instance if own else owner
    values = template_args(source)
    if len(params) != len(values) or any(p.kind == CK.TEMPLATE_TEMPLATE_PARAMETER for p in params) or \
            scope.kind == CK.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION:
        raise UserError("launches in templates with template template parameters, parameter packs or partial "
                        "specializations are not supported", cursor_loc(call))
    terms = []
    for i, (param, value) in enumerate(zip(params, values)):
        closure = closure_declaration(source.get_template_argument_type(i)) \
            if source.get_template_argument_kind(i) == ci.TemplateArgumentKind.TYPE else None
        if closure is not None:
            if record is None:
                raise UserError("a launch in a host function template instantiated with a lambda's type is not "
                                "supported here: launch the kernel in the function that makes the lambda",
                                cursor_loc(call))
            terms.append(f"polypy_is_closure<{param.spelling}, {record(closure)}>::value")
        elif source.get_template_argument_kind(i) == ci.TemplateArgumentKind.TYPE:
            terms.append(f"__is_same({param.spelling}, {value})")
        else:
            terms.append(f"({param.spelling}) == ({value})")
    return " && ".join(terms) or "true"


def _member_closure_terms(instance: ci.Cursor, record) -> list[str]:
    """The test for an instance of a member function template (of a class that is no template)
    whose every template parameter is a lambda's closure type, deduced from a function parameter
    declared ``F``, ``const F&`` or ``F&&`` (libclang does not list a member instance's template
    arguments: they are read from its parameters' types); [] where that is not so."""
    pattern = ci.conf.lib.clang_getSpecializedCursorTemplate(instance)
    params = [p for p in pattern.get_children() if p.kind in _PARAMS]
    declared = [p for p in pattern.get_children() if p.kind == CK.PARM_DECL]
    given = list(instance.get_arguments())
    if not params or len(declared) != len(given):
        return []
    terms = []
    for param in params:
        closure = None
        for d, g in zip(declared, given):
            t = d.type
            while t.kind in (ci.TypeKind.LVALUEREFERENCE, ci.TypeKind.RVALUEREFERENCE):
                t = t.get_pointee()
            if param.kind == CK.TEMPLATE_TYPE_PARAMETER and t.spelling in (param.spelling, f"const {param.spelling}"):
                closure = closure_declaration(g.type)
                break
        if closure is None:
            return []
        terms.append(f"polypy_is_closure<{param.spelling}, {record(closure)}>::value")
    return terms


def _pattern_scope(call: ci.Cursor, top_level: list[ci.Cursor]) -> ci.Cursor | None:
    """The innermost template whose text holds ``call`` and whose parameter list is in scope
    there: a function template, a class template, or a member of a class template defined
    outside the class (``template <class R> R Pi<R>::go() {...}``: its own names for them)."""
    if call.location.file is None:
        return None
    fname, offset = call.location.file.name, call.extent.start.offset
    best = None
    todo = list(top_level)
    while todo:
        d = todo.pop()
        if d.location.file is None or d.location.file.name != fname:
            continue
        if not d.extent.start.offset <= offset < d.extent.end.offset:
            continue
        if d.kind in _CLASSES:
            todo += [m for m in d.get_children() if m.kind in _CLASSES or m.kind == CK.FUNCTION_TEMPLATE]
        has_params = any(p.kind in _PARAMS for p in d.get_children())
        if has_params and (best is None or d.extent.start.offset >= best.extent.start.offset):
            best = d
    return best


def instance_key(fn: ci.Cursor, base: tuple) -> tuple:
    """``base`` (the declaration's key) told apart per instance: the function's own template
    arguments and the class instance it is a member of (``Pi<float>::go`` vs ``Pi<double>::go``)."""
    parent = fn.semantic_parent
    owner = parent.type.get_canonical().spelling if parent is not None and parent.kind in _CLASSES else ""
    return base + tuple(template_args(fn)) + (owner,)
