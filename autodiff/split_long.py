"""split_long_expressions: very long floating-point expressions cut into locals before reverse mode.

Requires: a GPU-form kernel (what ``normalize_for_ad`` returns). Guarantees: the same values,
bit for bit (every operation runs once, on the same operands, in the same order within its
statement); statements whose expressions are small are unchanged.

Reverse mode sends a cotangent to each operand of a nonlinear operation multiplied by the other
operand: for a left-nested product ``((s * s) * s) * ... * s`` of n factors the partial of the
k-th factor is the product of the k - 1 before it, an expression of k - 1 nodes, so the
gradient's text (and the time to build it) grows as n squared: a 20,000-factor product (what
machine-generated code and the fuzzer write) took hours. Here, in a statement whose value has
more than ``SPLIT_ABOVE`` nodes, every floating-point operand of more than ``CHUNK`` nodes is
computed first into a local of its own, bottom-up (the operand's own long operands first)::

    y = s * s * ... * s        =>     var p: f32 = s * ... * s     (CHUNK factors)
                                      var p_1: f32 = p * s * ... * s
                                      ...
                                      y = p_k * s * ... * s

Each partial is then at most ``CHUNK`` nodes, and the gradient grows linearly. Operands evaluated
only under a condition (the branches of a ``select``, the right side of ``&&``/``||``) are not
hoisted: the local would evaluate them unconditionally (a load out of bounds, a division by zero
the condition guards). Integer expressions (indices, the isl analyses' affine forms) are left as
they are.
"""
from __future__ import annotations

from autodiff.names import Names
from polypy.ir import nodes as n
from polypy.ir.queries import tree_size
from polypy.ir.visitor import rebuild

SPLIT_ABOVE = 256  # a statement's value larger than this is cut
CHUNK = 32  # no operand of more nodes stays inline in such a statement

_CONDITIONAL = ("land", "lor")


def split_long_expressions(kernel: n.Kernel, names: Names) -> n.Kernel:
    """``kernel`` with its long floating-point statement values cut into locals (see above)."""
    body = _block(kernel.body, names)
    return kernel if body is kernel.body else rebuild(kernel, body=body)


def _block(stmts: tuple[n.Stmt, ...], names: Names) -> tuple[n.Stmt, ...]:
    out: list[n.Stmt] = []
    changed = False
    for s in stmts:
        new = _stmt(s, names)
        changed |= len(new) != 1 or new[0] is not s
        out.extend(new)
    return tuple(out) if changed else stmts


def _stmt(s: n.Stmt, names: Names) -> tuple[n.Stmt, ...]:
    if isinstance(s, n.If):
        then, orelse = _block(s.then, names), _block(s.orelse, names)
        return (s,) if then is s.then and orelse is s.orelse else (rebuild(s, then=then, orelse=orelse),)
    if isinstance(s, (n.For, n.While)):
        body = _block(s.body, names)
        return (s,) if body is s.body else (rebuild(s, body=body),)
    value = s.init if isinstance(s, n.Decl) else s.value if isinstance(s, (n.Assign, n.Store)) else None
    if value is None or not value.type.is_float or tree_size(value) <= SPLIT_ABOVE:
        return (s,)
    hoisted: list[n.Stmt] = []
    value = _cut(value, hoisted, names, s.loc)
    if isinstance(s, n.Decl):
        return (*hoisted, rebuild(s, init=value))
    return (*hoisted, rebuild(s, value=value))


def _cut(e: n.Expr, hoisted: list[n.Stmt], names: Names, loc) -> n.Expr:
    """``e`` with its long floating-point operands bound to locals appended to ``hoisted``.
    Iterative over left-nested chains (a 100,000-term product nests that deep)."""
    spine: list[tuple[n.Expr, list[tuple[str, n.Expr]]]] = []
    node = e
    while operands := _unconditional_operands(node):  # descend the first operand without recursion
        spine.append((node, operands))
        node = operands[0][1]
    result = node
    for parent, operands in reversed(spine):
        replaced: dict[str, n.Expr] = {operands[0][0]: _bind(result, hoisted, names, loc)}
        for field, child in operands[1:]:
            replaced[field] = _bind(_cut(child, hoisted, names, loc), hoisted, names, loc)
        result = _replace(parent, replaced)
    return result


def _bind(e: n.Expr, hoisted: list[n.Stmt], names: Names, loc) -> n.Expr:
    if e.type.is_float and not isinstance(e, (n.Var, n.Const)) and tree_size(e) > CHUNK:
        name = names.fresh("p")
        hoisted.append(n.Decl(name, e.type, e, loc=loc))
        return n.Var(name, e.type)
    return e


def _unconditional_operands(e: n.Expr) -> list[tuple[str, n.Expr]]:
    """The operands of ``e`` evaluated whenever ``e`` is, by field (calls: ``args``, by index)."""
    if isinstance(e, n.Binary) and e.op not in _CONDITIONAL:
        return [("a", e.a), ("b", e.b)]
    if isinstance(e, n.Unary):
        return [("x", e.x)]
    if isinstance(e, n.Cast):
        return [("x", e.x)]
    if isinstance(e, n.Call):
        return [(f"args{i}", a) for i, a in enumerate(e.args)]
    return []


def _replace(e: n.Expr, fields: dict[str, n.Expr]) -> n.Expr:
    if isinstance(e, n.Call):
        args = tuple(fields.get(f"args{i}", a) for i, a in enumerate(e.args))
        return e if all(x is y for x, y in zip(args, e.args)) else rebuild(e, args=args)
    if all(getattr(e, f) is v for f, v in fields.items()):
        return e
    return rebuild(e, **fields)
