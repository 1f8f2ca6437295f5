"""Where a kernel template's instance goes in the emitted program.

An instance's translated code (its launcher takes the kernel's parameters, with their C++ types)
normally replaces the template's definition. C++ lets a template argument be a type declared
after the template, as long as it is declared before the instantiation::

    template <class Op> __global__ void apply(float* x, int n, Op op) { ... }
    struct Scale { float s; __device__ float operator()(float v) const { return s * v; } };
    int main() { ... apply<<<g, b>>>(x, n, Scale{2.0f}); }

There the launcher of ``apply<Scale>`` cannot stand where ``apply`` is (``Scale`` is not declared
yet). It goes right before the top-level declaration that follows the last declaration of a type
its template arguments name: every launch of it comes later (a launch's arguments have those
types, so it is in a function declared after them). Only top-level places of the file's global
scope are used; an instance that would have to move into or out of a namespace or a linkage block
is refused, located, rather than placed where its names would mean something else.

An instance taking the closure of a lambda made in host code (``frontend.closures``) goes right
before the top-level function that makes the lambda (after the template, even where nothing
stands between them), with the record the program declares for the closure.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

import clang.cindex as ci

from polypy.errors import UserError

from frontend.clang_setup import cursor_loc
from frontend.closures import closure_declaration
from frontend.kernel_values import is_template_kernel

CK = ci.CursorKind
_FUNCTIONS = (CK.FUNCTION_DECL, CK.CXX_METHOD, CK.FUNCTION_TEMPLATE, CK.CONSTRUCTOR, CK.DESTRUCTOR,
              CK.CONVERSION_FUNCTION, CK.LAMBDA_EXPR)


def later_places(instances: Iterable[tuple[ci.Cursor, str]], decls: list[ci.Cursor]) -> dict[str, ci.Cursor]:
    """IR kernel name -> the top-level declaration (of ``decls``, the user's top-level declarations
    in order) before which the instance's code goes, for the instances that cannot stay at
    their template."""
    out: dict[str, ci.Cursor] = {}
    for cursor, name in instances:
        if not is_template_kernel(cursor) or cursor.kind == CK.FUNCTION_TEMPLATE:
            continue
        home = _holder(cursor, decls)
        if home is None:
            continue
        later, lambdas, types = [], False, [-1]
        for d in _argument_declarations(cursor):
            i = _holder(d, decls)
            if i is not None and closure_declaration(d.type) is not None:
                # A lambda's closure: the instance and the record of its captures (frontend.closures)
                # go right before the function making the lambda, which launches the instance.
                lambdas = True
                i -= 1
            elif i is not None:
                types.append(i)
            if i is not None:
                later.append(i)
        last = max(later, default=-1)
        # decls[last] is a type the instance names (then at global scope), or what stands before
        # the function making a lambda (anything)
        named = (home, last, last + 1) if max(types) == last else (home, last + 1)
        if lambdas and last < home:
            raise UserError(f"kernel template instance '{cursor.displayname}' takes a lambda made in a function "
                            "defined before the kernel template: define the kernel template first", cursor_loc(cursor))
        if last <= home and not lambdas:
            continue
        if last + 1 >= len(decls) or not all(_global(decls[i]) for i in named):
            raise UserError(f"kernel template instance '{cursor.displayname}' takes a type declared after the "
                            "template, and its translation cannot be placed after that type at the file's global "
                            "scope (the template, the type or what follows is in a namespace or a linkage block): "
                            "declare the type before the kernel template", cursor_loc(cursor))
        out[name] = decls[last + 1]
    return out


def _argument_declarations(cursor: ci.Cursor) -> Iterator[ci.Cursor]:
    """The declarations of the types the instance's template arguments name, nested arguments too
    (``Pair<Scale, float>``), through pointers, references and arrays."""
    for i in range(cursor.get_num_template_arguments()):
        if cursor.get_template_argument_kind(i) == ci.TemplateArgumentKind.TYPE:
            yield from _type_declarations(cursor.get_template_argument_type(i), 0)


def _type_declarations(t: ci.Type, depth: int) -> Iterator[ci.Cursor]:
    if depth > 16:
        return
    t = t.get_canonical()
    while t.kind in (ci.TypeKind.POINTER, ci.TypeKind.LVALUEREFERENCE, ci.TypeKind.RVALUEREFERENCE,
                     ci.TypeKind.CONSTANTARRAY, ci.TypeKind.INCOMPLETEARRAY):
        t = (t.get_pointee() if t.kind in (ci.TypeKind.POINTER, ci.TypeKind.LVALUEREFERENCE,
                                           ci.TypeKind.RVALUEREFERENCE) else t.element_type).get_canonical()
    decl = t.get_declaration()
    if decl.kind != CK.NO_DECL_FOUND:
        parent = decl.semantic_parent
        if parent is not None and parent.kind in _FUNCTIONS and closure_declaration(t) is None:
            raise UserError(f"a type defined inside a function ('{decl.spelling or t.spelling}') cannot be a template "
                            "argument of a __global__ function template (as nvcc says): declare it at namespace "
                            "scope", cursor_loc(decl))
        yield decl
    for j in range(max(t.get_num_template_arguments(), 0)):
        yield from _type_declarations(t.get_template_argument_type(j), depth + 1)


def closure_home(lam: ci.Cursor, decls: list[ci.Cursor]) -> ci.Cursor | None:
    """The top-level declaration (of ``decls``) making lambda ``lam``, where the record of its
    closure and the instances taking it go (for a declaration in namespaces, the outermost
    namespace: the records and launchers are global); None inside a class or a linkage block."""
    i = _holder(lam, decls)
    if i is None:
        return None
    return decls[i] if _global(decls[i]) else _outer_namespace(decls[i])


def _outer_namespace(d: ci.Cursor) -> ci.Cursor | None:
    """The namespace at the file's global scope that holds ``d`` through namespaces only (the
    records and launchers go before it, at global scope), or None."""
    outer = None
    parent = d.lexical_parent
    while parent is not None and parent.kind == CK.NAMESPACE:
        outer, parent = parent, parent.lexical_parent
    return outer if parent is not None and parent.kind == CK.TRANSLATION_UNIT else None


def _holder(c: ci.Cursor, decls: list[ci.Cursor]) -> int | None:
    """The index of the top-level declaration whose extent holds ``c``'s location."""
    loc = c.location
    if loc.file is None:
        return None
    for i, d in enumerate(decls):
        ext = d.extent
        if ext.start.file is not None and ext.start.file.name == loc.file.name \
                and ext.start.offset <= loc.offset <= ext.end.offset:
            return i
    return None


def _global(d: ci.Cursor) -> bool:
    parent = d.semantic_parent
    return parent is not None and parent.kind == CK.TRANSLATION_UNIT and d.lexical_parent is not None \
        and d.lexical_parent.kind == CK.TRANSLATION_UNIT
