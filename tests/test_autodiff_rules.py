"""The derivative rules table: complete over the math functions, numerically right, and a
missing rule is an error that names the operation and where it is."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import polypy
from autodiff import differentiate, rules
from autodiff.check import check_gradients
from polypy.errors import UserError
from polypy.ir import parse_kernel
from polypy.ir.mathfns import MATH_FUNCTIONS
from polypy.passes import SIMPLIFY, run_pipeline

GID = "(i32)(blockIdx.x * blockDim.x + threadIdx.x)"


def test_every_math_function_has_a_rule_or_a_zero_derivative() -> None:
    tables = (rules.CALL_RULES, rules.ZERO_DERIVATIVE, rules.NOT_DIFFERENTIABLE)
    for name in MATH_FUNCTIONS:
        assert sum(name in t for t in tables) == 1, name
    assert set(rules.CALL_RULES) | set(rules.ZERO_DERIVATIVE) | set(rules.NOT_DIFFERENTIABLE) == set(MATH_FUNCTIONS)
    for name, rule in rules.CALL_RULES.items():
        assert rule.arity == MATH_FUNCTIONS[name].arity, name


def test_every_float_operator_has_a_rule() -> None:
    for op in ("neg", "add", "sub", "mul", "div", "rem"):
        assert op in rules.ARITH_RULES
    for op in ("lt", "le", "gt", "ge", "eq", "ne", "land", "lor", "band", "bor", "bxor", "shl", "shr", "not"):
        assert op in rules.NON_FLOAT_OPS


# Points where each function is smooth (away from kinks and domain edges).
DOMAINS: dict[str, tuple[tuple[float, float], ...]] = {
    "acosh": ((1.2, 2.0),),
    "tan": ((-1.0, 1.0),),
    "fabs": ((0.2, 0.9),),  # sign flipped for half the points below
    "saturate": ((0.1, 0.9),),
    "pow": ((0.5, 1.5), (0.5, 2.0)),
    "fmod": ((1.1, 1.4), (0.95, 1.0)),
    "atan2": ((0.2, 1.0), (-1.0, -0.2)),
    "copysign": ((0.2, 0.9), (-0.9, -0.2)),
    "fdim": ((0.5, 0.9), (0.1, 0.4)),
}


def _kernel_for(fn: str, arity: int) -> str:
    inputs = ["x", "z", "u"][:arity]
    params = ", ".join(f"{p}: const f64*" for p in inputs)
    call = f"{fn}({', '.join(f'{p}[{GID}]' for p in inputs)})"
    return f"""kernel f(n: i32, {params}, y: f64*) {{
  if ({GID} < n) {{
    y[{GID}] = {call}
  }}
}}
"""


@pytest.mark.parametrize("fn", sorted(rules.CALL_RULES))
def test_rule_matches_finite_differences(fn: str) -> None:
    arity = MATH_FUNCTIONS[fn].arity
    k = run_pipeline(parse_kernel(_kernel_for(fn, arity)), SIMPLIFY)
    rng = np.random.default_rng(abs(hash(fn)) % 1000)
    n = 40
    args: dict = {"n": np.int32(n)}
    for i, p in enumerate(["x", "z", "u"][:arity]):
        lo, hi = DOMAINS.get(fn, ((0.2, 0.9),) * 3)[min(i, len(DOMAINS.get(fn, ((0.2, 0.9),))) - 1)]
        values = rng.uniform(lo, hi, n)
        if fn in ("fabs", "fmin", "fmax", "hypot", "fma", "copysign") and i == 0:
            values *= np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
        args[p] = values
    args["y"] = np.zeros(n)
    g = differentiate(k)
    fwd = differentiate(k, mode="forward")
    result = check_gradients(k, g, 1, 64, args, k_fwd=fwd)
    assert abs(result.finite_difference) > 1e-6
    assert result.error() < 1e-6, (fn, result)


@pytest.mark.parametrize("fn", sorted(name for name in rules.ZERO_DERIVATIVE if MATH_FUNCTIONS[name].domain == "float"
                                      and not MATH_FUNCTIONS[name].returns_bool))
def test_piecewise_constant_functions_have_zero_derivative(fn: str) -> None:
    k = run_pipeline(parse_kernel(_kernel_for(fn, 1)), SIMPLIFY)
    g = run_pipeline(differentiate(k), SIMPLIFY)
    args = {"n": 16, "x": np.linspace(0.1, 3.3, 16), "y": np.zeros(16), "d_x": np.zeros(16), "d_y": np.ones(16)}
    polypy.emulate(g, 1, 16, args)
    assert np.all(args["d_x"] == 0.0)
    assert np.all(args["d_y"] == 0.0)  # overwritten: the seed is consumed


def test_a_missing_rule_names_the_function_and_its_line(tmp_path, monkeypatch) -> None:
    src = tmp_path / "k.cu"
    src.write_text("""__global__ void k(const double* x, double* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = 2.0 * cbrt(x[i]);
}
""")
    module = polypy.load(src)
    monkeypatch.delitem(rules.CALL_RULES, "cbrt")
    with pytest.raises(UserError) as info:
        differentiate(module.kernel("k"))
    err = info.value
    assert "cbrt" in err.message and "no derivative rule" in err.message
    assert err.loc is not None and err.loc.line == 5 and err.loc.file == str(src)


def test_jvp_and_vjp_are_transposes() -> None:
    from polypy.ir import nodes as n
    from polypy.ir.types import F64
    x, y = n.Var("x", F64), n.Var("y", F64)
    e = n.Binary("mul", x, n.Call("sin", (y,), F64))
    tx, ty, ct = n.Var("tx", F64), n.Var("ty", F64), n.Var("ct", F64)
    tangent = rules.jvp(e, (x, n.Call("sin", (y,), F64)), (tx, ty))
    cot = rules.vjp(e, (x, n.Call("sin", (y,), F64)), ct, (True, True))
    assert tangent is not None and all(c is not None for c in cot)
    # <J t, ct> == <t, J^T ct> symbolically: evaluate both at a point
    env = {"x": 0.3, "y": 0.7, "tx": 1.3, "ty": -0.4, "ct": 2.5}

    def ev(expr):
        import math
        if isinstance(expr, n.Var):
            return env[expr.name]
        if isinstance(expr, n.Const):
            return expr.value
        if isinstance(expr, n.Call):
            return getattr(math, expr.fn)(*(ev(a) for a in expr.args))
        if isinstance(expr, n.Unary):
            return -ev(expr.x)
        ops = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
               "div": lambda a, b: a / b}
        return ops[expr.op](ev(expr.a), ev(expr.b))
    lhs = ev(tangent) * env["ct"]
    rhs = env["tx"] * ev(cot[0]) + env["ty"] * ev(cot[1])
    assert lhs == pytest.approx(rhs)
    assert dataclasses.is_dataclass(rules.CALL_RULES["sin"])
