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


def test_a_trip_count_divided_by_the_block_size_has_a_range():
    """``(cols + blockDim.x - 1) / blockDim.x`` (a reversed block-stride loop's trip count, issue
    38) divides by a positive range, not a constant: the quotient lies between the corners'
    quotients. Without a range, the guard ``(k - 1 - j) * blockDim.x + tx < cols`` of the loop
    over ``j < k`` was no interval of ``tx`` and its thread loop kept a branch per thread."""
    cols = n.Var("cols", I32)
    bdx = n.Cast(I64, n.Cast(I32, n.BlockDim(0)))
    trips = n.Binary("div", n.Binary("sub", n.Binary("add", n.Cast(I64, cols), bdx), n.Const(1, I64)), bdx)
    assert Ranges().of(trips) == (-(1 << 31), (1 << 31) + 1022)  # quotients by 1: the extremes
    k = n.Var("k", I64)
    ranges = Ranges({"tx": 0}, lets={"k": trips})
    j_loop = n.For("j", I64, n.Const(0, I64), k, n.Const(1, I64), ())
    ranges.loops["j"] = j_loop
    back = n.Binary("mul", n.Binary("sub", n.Binary("sub", k, n.Const(1, I64)), n.Var("j", I64)), bdx)
    lo, hi = ranges.of(back)
    assert -(1 << 48) < lo and hi < 1 << 48
    analysis = CounterAnalysis("tx", 0, lets={}, available=lambda name: True, ranges=ranges)
    guard = n.Binary("lt", n.Binary("add", back, n.Cast(I64, n.Var("tx", U32))), n.Cast(I64, cols))
    assert analysis.interval(guard) is not None
