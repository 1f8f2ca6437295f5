"""autodiff's structure (issue 15): linear rules with transposes shared by both modes, and
passes on the Mutator that return their input object when they have nothing to do.

* each linear rule's transpose is the transpose of its JVP: ``<L t, c> == <t, L^T c>`` at
  random points (``select`` on both branches);
* both modes take ``select``/``cast``/``add``/``sub``/``neg`` from ``rules.LINEAR_RULES``:
  without the ``select`` entry neither mode can differentiate a conditional expression;
* ``normalize_for_ad``, the forward-mode builder and reverse mode's forward sweep keep the
  statements they do not change (``is``);
* reverse mode's parts are functions over one state (issue 39): no class of theirs inherits
  from another autodiff class (no mixins), and each imports only the parts below it.
"""
from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

import polypy
from autodiff import differentiate, rules
from autodiff.activity import analyze_activity, select_active
from autodiff.forward import ForwardBuilder
from autodiff.names import Names
from autodiff.normalize import normalize_for_ad
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import BOOL, F32, F64


def _ev(e: n.Expr, env: dict[str, float]) -> float:
    if isinstance(e, n.Var):
        return env[e.name]
    if isinstance(e, n.Const):
        return e.value
    if isinstance(e, n.Unary) and e.op == "neg":
        return -_ev(e.x, env)
    if isinstance(e, n.Binary) and e.op in ("add", "sub", "mul"):
        a, c = _ev(e.a, env), _ev(e.b, env)
        return a + c if e.op == "add" else a - c if e.op == "sub" else a * c
    if isinstance(e, n.Select):
        return _ev(e.a, env) if _ev(e.cond, env) else _ev(e.b, env)
    if isinstance(e, n.Cast):
        return float(np.dtype(e.to.dtype).type(_ev(e.x, env)))
    raise AssertionError(f"unexpected {e!r}")


def _example(op: str) -> n.Expr:
    a, c, p = n.Var("a", F64), n.Var("c", F64), n.Var("p", BOOL)
    return {"add": n.Binary("add", a, c), "sub": n.Binary("sub", a, c), "neg": n.Unary("neg", a),
            "select": n.Select(p, a, c), "cast": n.Cast(F32, a)}[op]


@pytest.mark.parametrize("op", ["add", "sub", "neg", "select", "cast"])
@pytest.mark.parametrize("cond", [True, False])
def test_linear_rules_transpose_their_jvp(op: str, cond: bool) -> None:
    e = _example(op)
    rule = rules.linear_rule(e)
    assert rule is not None and rule is rules.LINEAR_RULES[op]
    operands = rule.operands(e)
    tangents = tuple(n.Var(f"t{i}", x.type) for i, x in enumerate(operands))
    ct = n.Var("ct", e.type)
    tangent = rule.jvp(e, tangents)
    cts = rule.transpose(e, ct)
    assert tangent is not None and len(cts) == len(operands)
    rng = np.random.default_rng(5)
    for _ in range(5):
        env = {"p": cond, "ct": float(rng.normal()), **{t.name: float(rng.normal()) for t in tangents}}
        # the cotangent of operand i flows only where the rule's branch says (select)
        taken = [True] * len(operands)
        if rule.branch is not None:
            b_cond = bool(_ev(rule.branch(e), env))
            taken = [b_cond, not b_cond]
        lhs = _ev(tangent, env) * env["ct"]
        rhs = sum(env[t.name] * _ev(c, env) for t, c, on in zip(tangents, cts, taken) if on)
        assert lhs == pytest.approx(rhs, rel=1e-6, abs=1e-12)
    # a zero tangent everywhere is no tangent
    if rule.branch is None:
        assert rule.jvp(e, (None,) * len(operands)) is None


SELECT_SRC = """__global__ void k(const double* x, const double* z, double* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i] > 0.0 ? x[i] * z[i] : -z[i];
}
"""


@pytest.mark.parametrize("mode", ["reverse", "forward"])
def test_both_modes_take_select_from_the_linear_rules(tmp_path, monkeypatch, mode: str) -> None:
    src = tmp_path / "k.cu"
    src.write_text(SELECT_SRC)
    kernel = polypy.load(src).kernel("k")
    differentiate(kernel, mode=mode)  # fine with the table as it is
    monkeypatch.delitem(rules.LINEAR_RULES, "select")
    with pytest.raises(UserError) as info:
        differentiate(kernel, mode=mode)
    assert "no derivative rule for Select" in info.value.message
    assert info.value.loc is not None and info.value.loc.line == 5


LOOPS_SRC = """__global__ void k(const double* x, double* y, int n, int m)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int s = 0;
    for (int j = 0; j < m; ++j)
        s += j;
    if (i < n) {
        double acc = 0.0;
        for (int j = 0; j < m; ++j) {
            if (j == s)
                break;
            acc += x[i + j];
        }
        y[i] = acc;
    }
}
"""


def test_passes_keep_what_they_do_not_change(tmp_path) -> None:
    src = tmp_path / "k.cu"
    src.write_text(LOOPS_SRC)
    kernel = polypy.load(src).kernel("k")
    # the first loop (integers only, no break) is kept by normalize and by forward mode
    loops = [s for s in kernel.body if isinstance(s, n.For)]
    assert loops, kernel.body
    names = Names(kernel, {"k_fwd"})
    normalized = normalize_for_ad(kernel, names)
    assert normalized is not kernel  # the loop with a break became a while loop
    assert any(s is loops[0] for s in normalized.body)
    assert not any(isinstance(x, n.Break) for s in normalized.body for x in _stmts(s))
    active = select_active(kernel, None, ())
    fwd = ForwardBuilder(kernel, active, analyze_activity(kernel, active), names)
    body = fwd.visit_block(kernel.body)
    assert any(s is loops[0] for s in body)
    # reverse mode's forward sweep keeps it too (nothing recorded inside it)
    assert any(s is loops[0] for s in differentiate(kernel).body)
    # nothing to normalize: the very same kernel comes back
    assert normalize_for_ad(normalized, Names(normalized)) is normalized


def _stmts(s: n.Stmt):
    from polypy.ir.visitor import walk
    return walk(s)


# reverse mode's parts, each importing only the ones after it
REVERSE_PARTS = ("reverse", "sweeps", "accumulation", "availability", "tapes", "reverse_state")


def _autodiff_imports(tree: ast.Module) -> dict[str, str]:
    """Name bound at module level by ``from autodiff... import`` -> the autodiff module it comes from."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "autodiff":
            for alias in node.names:
                module = alias.name if node.module == "autodiff" else node.module.split(".")[1]
                out[alias.asname or alias.name] = module
    return out


def test_reverse_mode_parts_are_functions_over_one_state_in_layers() -> None:
    root = pathlib.Path(__file__).resolve().parents[1] / "autodiff"
    for i, part in enumerate(REVERSE_PARTS):
        tree = ast.parse((root / f"{part}.py").read_text(encoding="utf-8"))
        imported = _autodiff_imports(tree)
        for module in imported.values():
            if module in REVERSE_PARTS:
                assert REVERSE_PARTS.index(module) > i, f"autodiff.{part} imports autodiff.{module}, a part above it"
        own = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    root_name = base
                    while isinstance(root_name, ast.Attribute):
                        root_name = root_name.value
                    name = root_name.id if isinstance(root_name, ast.Name) else ""
                    assert name not in imported and name not in own, \
                        f"class {node.name} of autodiff.{part} inherits from {ast.unparse(base)} (a mixin)"
