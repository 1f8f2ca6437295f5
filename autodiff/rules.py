"""Derivative rules, one table keyed by operation, shared by forward and reverse mode.

Each differentiable operation ``y = f(x1, ..., xk)`` has one rule: its *partials*
``dy/dxi`` as IR expressions of the (already available) argument values and of the result
``y`` (``exp`` reuses ``y``; ``tanh`` is ``1 - y*y``). From the partials,

* forward mode (JVP) builds ``ydot = sum_i dy/dxi * xidot``;
* reverse mode (VJP, the transpose of the JVP) builds ``xibar += dy/dxi * ybar``.

A partial of ``None`` means the argument does not influence the result differentiably (the
sign source of ``copysign``). Operations whose derivative is zero
almost everywhere (``floor``, comparisons, integer functions) are listed in ``ZERO_DERIVATIVE``
with the reason; operations with no derivative at all (``bitcast``) in ``NOT_DIFFERENTIABLE``;
every name in ``polypy.ir.mathfns.MATH_FUNCTIONS`` is in exactly one of ``CALL_RULES``,
``ZERO_DERIVATIVE`` and ``NOT_DIFFERENTIABLE`` (a test checks it). Asking for the derivative of an
operation in neither is a ``UserError`` naming the operation and its source location — never
a silent zero.

Linear operations (``add``, ``sub``, ``neg``, ``select`` in its value operands, ``cast``
between float types) are rules of their own in ``LINEAR_RULES``, as in JAX's ``ad.py``: a
linear op's JVP is the op itself applied to the tangents, and its VJP is its *transpose*
applied to the cotangent. Both modes look there first (no partials multiplied by 1 or -1, and
``select`` routes the cotangent to the chosen operand under the same condition instead of
multiplying by an indicator); ``add``/``sub``/``neg`` also keep their constant partials in
``ARITH_RULES`` for the generic ``jvp``/``vjp`` below.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

from autodiff import build as b
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.mathfns import bit_cast_spelling
from polypy.ir.types import ScalarType
from polypy.ir.visitor import rebuild as rebuild_node

Partials = tuple["n.Expr | None", ...]
PartialRule = Callable[[tuple[n.Expr, ...], n.Expr], Partials]


@dataclasses.dataclass(frozen=True)
class Rule:
    """``partials(args, result)``: one partial per argument (``None``: no dependence)."""

    name: str
    arity: int
    partials: PartialRule


def _c(value: float, like: n.Expr) -> n.Const:
    return b.const(value, like.type)


def _unary(name: str, f: Callable[[n.Expr, n.Expr], n.Expr]) -> Rule:
    return Rule(name, 1, lambda args, r: (f(args[0], r),))


def _inv(x: n.Expr) -> n.Expr:
    return b.div(_c(1.0, x), x)


def _sign(x: n.Expr) -> n.Expr:
    return b.select(b.cmp("gt", x, _c(0.0, x)), _c(1.0, x),
                    b.select(b.cmp("lt", x, _c(0.0, x)), _c(-1.0, x), _c(0.0, x)))


def _indicator(cond: n.Expr, like: n.Expr, value: float = 1.0) -> n.Expr:
    return b.select(cond, _c(value, like), _c(0.0, like))


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


def _sq(x: n.Expr) -> n.Expr:
    return b.mul(x, x)


def _pow(args: tuple[n.Expr, ...], r: n.Expr) -> Partials:
    a, e = args
    # d/da a^e = e a^(e-1) (0 when e == 0, avoiding 0 * inf at a == 0);
    # d/de a^e = a^e log(a) (0 when a == 0, where the limit from a > 0 is 0).
    da = b.select(b.cmp("eq", e, _c(0.0, e)), _c(0.0, a),
                  b.mul(e, b.call("pow", a, b.sub(e, _c(1.0, e)))))
    de = b.select(b.cmp("eq", a, _c(0.0, a)), _c(0.0, a), b.mul(r, b.call("log", a)))
    return da, de


def _atan2(args: tuple[n.Expr, ...], r: n.Expr) -> Partials:
    y, x = args
    d = b.add(_sq(x), _sq(y))
    return b.div(x, d), b.neg(b.div(y, d))


def _fmin_fmax(op: str) -> PartialRule:
    # fmin(a, NaN) == a: the argument that is returned gets the derivative (ties: the first).
    def rule(args: tuple[n.Expr, ...], r: n.Expr) -> Partials:
        a, c = args
        take_a = b.lor(b.pred("isnan", c), b.cmp(op, a, c))
        return _indicator(take_a, a), b.select(take_a, _c(0.0, a), _c(1.0, a))
    return rule


def _fdim(args: tuple[n.Expr, ...], r: n.Expr) -> Partials:
    a, c = args
    above = b.cmp("gt", a, c)
    return _indicator(above, a), _indicator(above, a, -1.0)


def _fmod(args: tuple[n.Expr, ...], r: n.Expr) -> Partials:
    a, c = args
    return _c(1.0, a), b.neg(b.call("trunc", b.div(a, c)))


def _copysign(args: tuple[n.Expr, ...], r: n.Expr) -> Partials:
    a, s = args
    flips = b.cmp("ne", b.pred("signbit", a), b.pred("signbit", s))
    return b.select(flips, _c(-1.0, a), _c(1.0, a)), None


CALL_RULES: dict[str, Rule] = {
    rule.name: rule for rule in (
        _unary("exp", lambda x, r: r),
        _unary("exp2", lambda x, r: b.mul(r, _c(_LN2, x))),
        _unary("exp10", lambda x, r: b.mul(r, _c(_LN10, x))),
        _unary("expm1", lambda x, r: b.call("exp", x)),
        _unary("log", lambda x, r: _inv(x)),
        _unary("log2", lambda x, r: b.div(_c(1.0, x), b.mul(x, _c(_LN2, x)))),
        _unary("log10", lambda x, r: b.div(_c(1.0, x), b.mul(x, _c(_LN10, x)))),
        _unary("log1p", lambda x, r: b.div(_c(1.0, x), b.add(_c(1.0, x), x))),
        _unary("sqrt", lambda x, r: b.div(_c(0.5, x), r)),
        _unary("rsqrt", lambda x, r: b.mul(_c(-0.5, x), b.mul(r, b.mul(r, r)))),
        _unary("cbrt", lambda x, r: b.div(_c(1.0, x), b.mul(_c(3.0, x), b.mul(r, r)))),
        _unary("sin", lambda x, r: b.call("cos", x)),
        _unary("cos", lambda x, r: b.neg(b.call("sin", x))),
        _unary("tan", lambda x, r: b.add(_c(1.0, x), b.mul(r, r))),
        _unary("asin", lambda x, r: _inv(b.call("sqrt", b.sub(_c(1.0, x), _sq(x))))),
        _unary("acos", lambda x, r: b.neg(_inv(b.call("sqrt", b.sub(_c(1.0, x), _sq(x)))))),
        _unary("atan", lambda x, r: _inv(b.add(_c(1.0, x), _sq(x)))),
        _unary("sinh", lambda x, r: b.call("cosh", x)),
        _unary("cosh", lambda x, r: b.call("sinh", x)),
        _unary("tanh", lambda x, r: b.sub(_c(1.0, x), b.mul(r, r))),
        _unary("asinh", lambda x, r: _inv(b.call("sqrt", b.add(_sq(x), _c(1.0, x))))),
        _unary("acosh", lambda x, r: _inv(b.call("sqrt", b.sub(_sq(x), _c(1.0, x))))),
        _unary("atanh", lambda x, r: _inv(b.sub(_c(1.0, x), _sq(x)))),
        _unary("erf", lambda x, r: b.mul(_c(_TWO_OVER_SQRT_PI, x), b.call("exp", b.neg(_sq(x))))),
        _unary("erfc", lambda x, r: b.mul(_c(-_TWO_OVER_SQRT_PI, x), b.call("exp", b.neg(_sq(x))))),
        _unary("fabs", lambda x, r: _sign(x)),
        _unary("saturate", lambda x, r: _indicator(b.land(b.cmp("gt", x, _c(0.0, x)),
                                                          b.cmp("lt", x, _c(1.0, x))), x)),
        Rule("pow", 2, _pow),
        Rule("atan2", 2, _atan2),
        Rule("fmin", 2, _fmin_fmax("le")),
        Rule("fmax", 2, _fmin_fmax("ge")),
        Rule("fmod", 2, _fmod),
        Rule("hypot", 2, lambda args, r: (b.div(args[0], r), b.div(args[1], r))),
        Rule("copysign", 2, _copysign),
        Rule("fdim", 2, _fdim),
        Rule("fma", 3, lambda args, r: (args[1], args[0], _c(1.0, args[0]))),
    )
}

# Operations whose derivative is zero wherever it exists, with the reason.
ZERO_DERIVATIVE: dict[str, str] = {
    "floor": "piecewise constant", "ceil": "piecewise constant", "trunc": "piecewise constant",
    "round": "piecewise constant", "rint": "piecewise constant",
    "isnan": "boolean result", "isinf": "boolean result", "isfinite": "boolean result",
    "signbit": "boolean result",
    "min": "integer function", "max": "integer function", "abs": "integer function",
}

# Operations with no derivative rule at all, with the reason: differentiating through one is a
# located error. ``bitcast`` from a float gives an integer (inactive, like every integer); back to
# a float it is active when the integer carries an active value's bits (``autodiff.activity``), and
# then the integer operations in between have no derivative: Enzyme's conservative answer too.
NOT_DIFFERENTIABLE: dict[str, str] = {
    "bitcast": "it reinterprets the bits of an active value, and the integer operations on those bits "
               "have no derivative rule",
}

ARITH_RULES: dict[str, Rule] = {
    "neg": Rule("neg", 1, lambda args, r: (_c(-1.0, args[0]),)),
    "add": Rule("add", 2, lambda args, r: (_c(1.0, args[0]), _c(1.0, args[0]))),
    "sub": Rule("sub", 2, lambda args, r: (_c(1.0, args[0]), _c(-1.0, args[0]))),
    "mul": Rule("mul", 2, lambda args, r: (args[1], args[0])),
    # d(a/b)/db = -a/b^2 = -(a/b)/b
    "div": Rule("div", 2, lambda args, r: (_inv(args[1]), b.neg(b.div(r, args[1])))),
    # C's fmod semantics for float %: a - trunc(a/b) * b
    "rem": Rule("rem", 2, _fmod),
}

# ------------------------------------------------------------------ linear operations

Tangents = tuple["n.Expr | None", ...]


@dataclasses.dataclass(frozen=True)
class LinearRule:
    """A linear operation ``y = L(x1, ..., xk)`` in its ``operands`` (``None`` tangent: zero).

    ``jvp(e, tangents)`` is ``L`` applied to the operands' tangents (``None`` when all are zero);
    ``transpose(e, ct)`` is ``L^T`` applied to the result's cotangent: one cotangent per operand.
    ``branch(e)``, when present, is a condition under which only the first operand's cotangent
    flows (the second's where it is false): ``select``'s transpose is
    ``(c ? ct : 0, c ? 0 : ct)``, which the reverse sweep emits as an ``if``/``else``.
    """

    name: str
    operands: Callable[[n.Expr], tuple[n.Expr, ...]]
    jvp: Callable[[n.Expr, Tangents], "n.Expr | None"]
    transpose: Callable[[n.Expr, n.Expr], tuple[n.Expr, ...]]
    branch: Callable[[n.Expr], n.Expr] | None = None


def _add_jvp(e: n.Expr, tangents: Tangents) -> n.Expr | None:
    ta, tb = tangents
    if tb is None:
        return ta
    if e.op == "sub":  # type: ignore[attr-defined]
        tb = b.neg(tb)
    return tb if ta is None else b.add(ta, tb)


def _select_jvp(e: n.Expr, tangents: Tangents) -> n.Expr:
    assert isinstance(e, n.Select)
    ta, tb = tangents
    return b.select(e.cond, ta if ta is not None else b.zero(e.type), tb if tb is not None else b.zero(e.type))


def _map_jvp(f: Callable[[n.Expr, n.Expr], n.Expr]) -> Callable[[n.Expr, Tangents], "n.Expr | None"]:
    def jvp(e: n.Expr, tangents: Tangents) -> n.Expr | None:
        return None if tangents[0] is None else f(e, tangents[0])
    return jvp


LINEAR_RULES: dict[str, LinearRule] = {
    "add": LinearRule("add", lambda e: (e.a, e.b), _add_jvp, lambda e, ct: (ct, ct)),  # type: ignore[attr-defined]
    "sub": LinearRule("sub", lambda e: (e.a, e.b), _add_jvp,  # type: ignore[attr-defined]
                      lambda e, ct: (ct, b.neg(ct))),
    "neg": LinearRule("neg", lambda e: (e.x,), _map_jvp(lambda e, t: b.neg(t)),  # type: ignore[attr-defined]
                      lambda e, ct: (b.neg(ct),)),
    "select": LinearRule("select", lambda e: (e.a, e.b), _select_jvp,  # type: ignore[attr-defined]
                         lambda e, ct: (ct, ct), branch=lambda e: e.cond),  # type: ignore[attr-defined]
    "cast": LinearRule("cast", lambda e: (e.x,), _map_jvp(lambda e, t: b.cast(e.to, t)),  # type: ignore[attr-defined]
                       lambda e, ct: (b.cast(e.x.type, ct),)),  # type: ignore[attr-defined]
}


def linear_rule(e: n.Expr) -> LinearRule | None:
    """The linear rule of ``e`` (``add``/``sub``/``neg``/``select``/``cast``), if it has one."""
    if isinstance(e, n.Select):
        return LINEAR_RULES.get("select")
    if isinstance(e, n.Cast):
        return LINEAR_RULES.get("cast")
    if isinstance(e, (n.Unary, n.Binary)):
        return LINEAR_RULES.get(e.op)
    return None


# Everything else produces a bool or an integer: never active, so never differentiated.
NON_FLOAT_OPS: dict[str, str] = {
    **{op: "comparison (boolean result)" for op in n.COMPARE_OPS},
    **{op: "logical operator (boolean result)" for op in n.LOGIC_OPS},
    **{op: "bitwise operator (integer result)" for op in n.BIT_OPS},
    "not": "logical operator (boolean result)", "bnot": "bitwise operator (integer result)",
}


def op_name(e: n.Expr) -> str:
    if isinstance(e, n.Call):
        return e.fn
    if isinstance(e, (n.Unary, n.Binary)):
        return e.op
    return type(e).__name__.lower()


def rule_for(e: n.Expr) -> Rule | None:
    """The rule of ``e``; ``None`` for a zero-derivative operation; ``UserError`` if unknown."""
    if isinstance(e, n.Call):
        rule = CALL_RULES.get(e.fn)
        if rule is not None:
            return rule
        if e.fn in ZERO_DERIVATIVE:
            return None
        if e.fn in NOT_DIFFERENTIABLE:
            raise UserError(f"cannot differentiate the bit cast {_spelling(e)}: {NOT_DIFFERENTIABLE[e.fn]} "
                            f"(write the operation in floating point, e.g. fabsf or copysignf, or name its "
                            f"inputs in --const)", e.loc)
        raise UserError(f"no derivative rule for the math function '{e.fn}' (polypy grad cannot differentiate it)",
                        e.loc)
    if isinstance(e, (n.Unary, n.Binary)):
        rule = ARITH_RULES.get(e.op)
        if rule is not None:
            return rule
        if e.op in NON_FLOAT_OPS:
            return None
        raise UserError(f"no derivative rule for the operator '{e.op}'", e.loc)
    raise UserError(f"no derivative rule for {type(e).__name__} expressions", e.loc)


def partials(e: n.Expr, args: tuple[n.Expr, ...], result: n.Expr) -> Partials:
    """The partials of operation ``e`` at argument values ``args`` (result value ``result``)."""
    rule = rule_for(e)
    if rule is None:
        return (None,) * len(args)
    got = rule.partials(args, result)
    return tuple(p if p is None or p.type == result.type else b.cast(result.type, p) for p in got)


def _spelling(e: n.Call) -> str:
    """The CUDA spelling of bit cast ``e`` (``'__int_as_float'``)."""
    return f"'{bit_cast_spelling(e.args[0].type, e.rtype)[0]}'"


def float_args(e: n.Expr) -> tuple[n.Expr, ...]:
    """The operands of ``e`` that derivatives flow through (all of a call or arithmetic node)."""
    if isinstance(e, n.Call):
        return e.args
    if isinstance(e, n.Unary):
        return (e.x,)
    if isinstance(e, n.Binary):
        return (e.a, e.b)
    return ()


def rebuild(e: n.Expr, args: tuple[n.Expr, ...]) -> n.Expr:
    """``e`` with its operands replaced by ``args`` (same order as ``float_args``; ``e`` itself if the same)."""
    if isinstance(e, n.Call):
        return rebuild_node(e, args=tuple(args))
    if isinstance(e, n.Unary):
        return rebuild_node(e, x=args[0])
    if isinstance(e, n.Binary):
        return rebuild_node(e, a=args[0], b=args[1])
    raise TypeError(type(e).__name__)


# ------------------------------------------------------------------ the two modes, from the partials


def jvp(e: n.Expr, args: tuple[n.Expr, ...], tangents: tuple[n.Expr | None, ...]) -> n.Expr | None:
    """Tangent of ``e`` given its operand values and tangents (``None``: zero tangent)."""
    result = rebuild(e, args)
    if isinstance(e, n.Call) and e.fn in NOT_DIFFERENTIABLE:
        rule_for(e)  # active with inactive operands (bits of an active value): the located error
    if all(t is None for t in tangents):
        return None
    out: n.Expr | None = None
    for p, t in zip(partials(e, args, result), tangents):
        if p is None or t is None:
            continue
        term = b.mul(p, b.cast(result.type, t))
        out = term if out is None else b.add(out, term)
    return out


def vjp(e: n.Expr, args: tuple[n.Expr, ...], ct: n.Expr, active: tuple[bool, ...]) -> tuple[n.Expr | None, ...]:
    """Cotangents of the operands of ``e`` given the result's cotangent ``ct`` (transposed JVP)."""
    result = rebuild(e, args)
    out: list[n.Expr | None] = []
    for p, arg, is_active in zip(partials(e, args, result), args, active):
        if p is None or not is_active:
            out.append(None)
            continue
        out.append(b.cast(arg.type, b.mul(ct, p)))
    return tuple(out)


def differentiable_type(ty: ScalarType) -> bool:
    return ty.is_float


# ------------------------------------------------------------------ memory effects (both modes)


def check_module_array(s: n.Store | n.AtomicRMW, active: bool, space: str) -> None:
    """An active value stored in (or added to) a ``__device__``/``__constant__`` array has nowhere to
    put its derivative: module arrays have no shadow."""
    if active and space in ("device", "constant"):
        how = "stored in" if isinstance(s, n.Store) else "added to"
        raise UserError(f"cannot differentiate through the module array '{s.buffer}': an active value is {how} "
                        f"it, and module arrays have no shadow", s.loc)


def check_atomic(s: n.AtomicRMW, active_variables) -> None:
    """Only atomicAdd/atomicSub on an active buffer are differentiable, and only when the old value
    they return is not used in active computation (it depends on the threads' order)."""
    if s.op not in ("add", "sub"):
        raise UserError(f"no derivative rule for atomic.{s.op} on the active buffer '{s.buffer}' (only "
                        f"atomicAdd/atomicSub are differentiable)", s.loc)
    if s.dest is not None and s.dest in active_variables:
        raise UserError(f"cannot differentiate the value returned by atomic.{s.op} on '{s.buffer}': it depends on "
                        f"the order in which threads update the element", s.loc)
