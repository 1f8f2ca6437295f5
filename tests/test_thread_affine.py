"""gpu2cpu.thread_affine: linear forms in a thread counter -- selects whose condition is the same
for every thread, and large counter-free atoms in forms that are only rewritten in place."""
from __future__ import annotations

from gpu2cpu.thread_affine import CounterAnalysis, Ranges
from polypy.ir import nodes as n
from polypy.ir.types import BOOL, I32, I64, U32

TX = n.Var("tx", U32)
ROW = n.Var("row", I32)
NX = n.Var("nx", I32)
K = n.Var("k", I32)


def _analysis(**options) -> CounterAnalysis:
    return CounterAnalysis("tx", 0, lets={}, available=lambda name: True, ranges=Ranges({"tx": 0}), **options)


def _col(offset: n.Expr) -> n.Expr:
    """(i32)tx + row * nx + offset"""
    return n.Binary("add", n.Binary("add", n.Cast(I32, TX), n.Binary("mul", ROW, NX)), offset)


def _terms(lin) -> list[str]:
    return [type(a).__name__ for a, _ in lin.terms]


def test_a_select_on_a_uniform_condition_is_linear_with_a_select_atom():
    # (row == 0) ? c : c - nx  ->  c - nx + (row == 0 ? nx : 0)
    cond = n.Binary("eq", ROW, n.Const(0, I32))
    select = n.Select(cond, _col(n.Const(0, I32)), _col(n.Unary("neg", NX)))
    found = _analysis().linear(select)
    assert found is not None
    lin, _ = found
    assert lin.coef == 1
    assert "Select" in _terms(lin)
    chosen = [a for a, _ in lin.terms if isinstance(a, n.Select)][0]
    assert chosen.cond == cond and chosen.b == n.Const(0, I64)


def test_a_select_on_the_counter_or_with_different_strides_is_not_linear():
    on_counter = n.Select(n.Binary("eq", n.Cast(I32, TX), n.Const(0, I32)), _col(n.Const(0, I32)),
                          _col(n.Const(-1, I32)))
    assert _analysis().linear(on_counter) is None
    strides = n.Select(n.Binary("eq", ROW, n.Const(0, I32)), _col(n.Const(0, I32)),
                       n.Binary("mul", n.Cast(I32, TX), n.Const(2, I32)))
    assert _analysis().linear(strides) is None
    flag = n.Var("flag", BOOL)
    same = n.Select(flag, _col(n.Const(3, I32)), _col(n.Const(3, I32)))
    lin, _ = _analysis().linear(same)
    assert "Select" not in _terms(lin)  # both operands the same form: no select left


def test_a_layer_offset_is_an_atom_only_where_forms_are_rewritten_in_place():
    # (i32)((i64)c + ((i64)k - 1) * (i64)nx): the product of two 32-bit values reaches 2**62
    layer = n.Binary("mul", n.Binary("sub", n.Cast(I64, K), n.Const(1, I64)), n.Cast(I64, NX))
    index = n.Cast(I32, n.Binary("add", n.Cast(I64, _col(n.Const(0, I32))), layer))
    assert _analysis().linear(index) is None
    found = _analysis(free_atoms=True, index_forms=True).linear(index)
    assert found is not None and found[0].coef == 1
    lin, needs = found
    assert any(a == layer for a, _ in lin.terms)
    assert needs, "the conversion to i32 is exact only under a run-time check"
    # two such atoms could overflow i64 when summed: refused even there
    twice = n.Binary("add", n.Binary("add", n.Cast(I64, TX), layer), n.Binary("mul", n.Cast(I64, ROW), n.Cast(I64, NX)))
    assert _analysis(free_atoms=True, index_forms=True).linear(twice) is None
