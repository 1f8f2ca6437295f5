"""Unit tests of the IR core: nodes, traversal, printer/parser, verifier, C semantics of constants."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from polypy.errors import InternalError, Loc
from polypy.ir import (
    BOOL, F32, F64, I32, I64, U32, Binary, Cast, Const, For, Kernel, Mutator, Param, PointerType, Store, Var,
    Visitor, parse_kernel, print_kernel, verify_kernel,
)
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.semantics import eval_binary, eval_cast, eval_unary
from polypy.ir.visitor import substitute, walk


def test_locations_do_not_take_part_in_equality_and_nodes_are_frozen():
    a = Const(1, I32, loc=Loc("a.cu", 1, 1))
    b = Const(1, I32, loc=Loc("b.cu", 9, 9))
    assert a == b and hash(a) == hash(b)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.value = 2  # type: ignore[misc]


def test_constants_are_normalized_to_their_type():
    assert Const(2**32 + 5, U32).value == 5
    assert Const(2**31, I32).value == -(2**31)
    assert Const(0.1, F32).value == float(np.float32(0.1))
    assert Const(3, BOOL).value is True


def test_expression_types():
    x = Var("x", F32)
    assert Binary("add", x, x).type == F32
    assert Binary("lt", x, x).type == BOOL
    assert Cast(I64, x).type == I64
    assert n.ThreadIdx(0).type == U32


def test_mutator_rebuilds_only_changed_nodes():
    k = parse_kernel("""kernel k(n: i32, x: f32*) {
      var i: i32 = (i32)threadIdx.x
      if (i < n) {
        x[i] = x[i] + 1.0f
      }
    }""")

    class Nothing(Mutator):
        pass

    assert Nothing().visit(k) is k

    class RenameX(Mutator):
        def visit_Load(self, e):
            return dataclasses.replace(self.generic_visit(e), buffer="y")

    k2 = RenameX().visit(k)
    assert k2 is not k
    assert k2.body[0] is k.body[0]  # the untouched declaration is shared


def test_mutator_splices_and_deletes_statements():
    k = parse_kernel("""kernel k(x: f32*) {
      x[0] = 1.0f
      x[1] = 2.0f
      x[2] = 3.0f
    }""")

    class Edit(Mutator):
        def visit_Store(self, s):
            value = s.index[0].value
            if value == 0:
                return None
            if value == 1:
                return (s, dataclasses.replace(s, index=(Const(5, I32),)))
            return s

    body = Edit().visit(k).body
    assert [s.index[0].value for s in body] == [1, 5, 2]


def test_visitor_dispatch_uses_the_most_specific_method():
    seen = []

    class V(Visitor):
        def visit_GpuIndex(self, e):
            seen.append(("gpu", e.dim))

        def visit_ThreadIdx(self, e):
            seen.append(("thread", e.dim))

    V().visit(Binary("add", n.ThreadIdx(0), n.BlockDim(1)))
    assert seen == [("thread", 0), ("gpu", 1)]


def test_substitute_and_walk():
    e = Binary("mul", Var("a", I32), Binary("add", Var("a", I32), Const(1, I32)))
    e2 = substitute(e, {Var("a", I32): Const(3, I32)})
    assert format_expr(e2) == "3 * (3 + 1)"
    assert sum(isinstance(x, Var) for x in walk(e)) == 2


KERNEL_TEXT = """constant coef: f32[2] = {0.5f, -2.0f}

kernel k(n: i32, a: f32, x: const f32* restrict, y: f32*) stage cpu {
  source p: "Params" (.n = n, .a = a)
  shared tile: f32[16][blockDim.x]
  local w: f32[4]
  constant coef: f32[2]
  var i: i32 = (i32)(blockIdx.x * blockDim.x)
  var t: f32
  var old: f32
  for threads tx: u32 = 0u to blockDim.x step 1u {
    if (i < n && !(x[i] > 0.0f)) {
      y[i] = a * x[i] + coef[1] * -(t)
    } else if (i == -3) {
      t = exp(a) * (1.0f - a) / (a + 2.0f)
    } else {
      t = (f32)(i % 7) ? 1.0f : 2.0f
    }
  }
  while (i > 0) {
    i = i >> 1
    continue
  } update {
    t = t + 1.0f
  }
  old = atomic.add y[0], t
  atomic.max y[1], -t
  old = atomic.cas y[2], 0.0f, 1.5e+20f
  var z: i64 = (i64)i << 3l
  var q: bool = i > 0 ? true : false
  var r: i32 = -(-i) + -5
  var c: f64 = 1e-300 + inf
  var u: u64 = 18446744073709551615ul
  var s8: i8 = 5:i8
}
"""


def test_printer_parser_round_trip_on_every_construct():
    from polypy.ir.parser import parse_module
    from polypy.ir.printer import print_module

    module = parse_module(KERNEL_TEXT)
    text = print_module(module)
    assert parse_module(text) == module
    assert print_module(parse_module(text)) == text


def _exprs(depth: int):
    leaf = st.sampled_from([Var("a", I32), Var("b", I32), Const(3, I32), Const(-7, I32), n.ThreadIdx(0)]).map(
        lambda e: Cast(I32, e) if e.type != I32 else e)
    if depth == 0:
        return leaf
    sub = _exprs(depth - 1)
    ops = ["add", "sub", "mul", "div", "rem", "shl", "shr", "band", "bor", "bxor"]
    return st.one_of(
        leaf,
        st.tuples(st.sampled_from(ops), sub, sub).map(lambda t: Binary(t[0], t[1], t[2])),
        st.tuples(st.sampled_from(["neg", "bnot"]), sub).map(lambda t: n.Unary(t[0], t[1])),
        st.tuples(sub, sub, sub).map(lambda t: n.Select(Binary("lt", t[0], t[1]), t[1], t[2])),
    )


@settings(max_examples=200, deadline=None)
@given(_exprs(3))
def test_printed_expressions_parse_back_to_the_same_tree(e):
    k = Kernel("k", (Param("a", I32), Param("b", I32), Param("out", PointerType(I32))), (),
               (Store("out", (Const(0, I32),), e),))
    verify_kernel(k)
    again = parse_kernel(print_kernel(k))
    assert again == k, print_kernel(k)


BAD = [
    ("undeclared", "kernel k(x: f32*) {\n  x[0] = v\n}", None),
    ("type mismatch", "kernel k(x: f32*, n: i32) {\n  x[0] = n\n}", "stored value has type i32"),
    ("rank", "kernel k(x: f32*) {\n  x[0][1] = 1.0f\n}", "takes 1 index"),
    ("break outside loop", "kernel k(x: f32*) {\n  break\n}", "outside a loop"),
    ("assign loop var", "kernel k(x: f32*) {\n  for i: i32 = 0 to 4 step 1 {\n    i = 3\n  }\n}", "loop variable"),
    ("twice", "kernel k(x: f32*) {\n  var a: i32 = 0\n  var a: i32 = 1\n}", "declared twice"),
    ("barrier in cpu form", "kernel k(x: f32*) stage cpu {\n  barrier\n}", "barrier in CPU form"),
    ("thread loop in gpu form", "kernel k(x: f32*) {\n  for threads tx: u32 = 0u to 4u step 1u {\n  }\n}",
     "thread loop in GPU form"),
    ("scope", "kernel k(x: f32*) {\n  if (true) {\n    var a: f32 = 1.0f\n  }\n  x[0] = a\n}", None),
    ("assigned let", "kernel k(x: i32*) {\n  let a: i32 = 1\n  a = 2\n  x[0] = a\n}", "let 'a' is assigned"),
    ("let of an atomic", "kernel k(x: i32*) {\n  let a: i32 = 1\n  a = atomic.add x[0], 1\n}", "let 'a' is assigned"),
]


@pytest.mark.parametrize("name,text,message", BAD, ids=[b[0] for b in BAD])
def test_verifier_rejects_broken_ir(name, text, message):
    from polypy.errors import UserError

    try:
        k = parse_kernel(text)
    except UserError:
        assert message is None  # the parser already refuses names it does not know
        return
    with pytest.raises(InternalError) as info:
        verify_kernel(k)
    if message is not None:
        assert message in str(info.value)


def test_verifier_checks_types_of_hand_built_nodes():
    k = Kernel("k", (Param("x", PointerType(F32)),), (),
               (Store("x", (Const(0, I32),), Binary("add", Const(1.0, F32), Const(1.0, F64))),))
    with pytest.raises(InternalError, match="right operand of add"):
        verify_kernel(k)
    k = Kernel("k", (Param("x", PointerType(F32)),), (),
               (For("i", I32, Const(0, I32), Const(4, I64), Const(1, I32), ()),))
    with pytest.raises(InternalError, match="loop bound"):
        verify_kernel(k)


@pytest.mark.parametrize("op,a,b,ty,expected", [
    ("div", -7, 2, I32, -3), ("rem", -7, 2, I32, -1), ("rem", 7, -2, I32, 1),
    ("sub", 0, 1, U32, 2**32 - 1), ("shr", -8, 1, I32, -4), ("shr", 2**31, 1, U32, 2**30),
    ("mul", 2**31 - 1, 2, I32, -2), ("shl", 1, 40, I32, None), ("div", 1, 0, I32, None),
    ("add", 0.1, 0.2, F32, float(np.float32(0.1) + np.float32(0.2))),
])
def test_constant_semantics_match_c(op, a, b, ty, expected):
    assert eval_binary(op, Const(a, ty).value, Const(b, ty).value, ty) == expected


def test_casts_and_unary_follow_c():
    assert eval_cast(-3.7, F64, I32) == -3
    assert eval_cast(3e10, F64, I32) is None  # undefined in C: never folded
    assert eval_cast(-1, I32, U32) == 2**32 - 1
    assert eval_cast(2.0, F64, BOOL) is True
    assert eval_unary("neg", -(2**31), I32) == -(2**31)
    assert eval_unary("bnot", 0, U32) == 2**32 - 1


_PICKLE_KERNEL = """kernel k(n: i32, x: f32*) {
  var i: i32 = (i32)threadIdx.x
  if (i < n) {
    x[i] = x[i] + 1.0f
  }
}"""

# Writes a kernel to argv[1], asked first (memos set) in a process that gave out the class bits of
# ``kinds_of`` in another order than a fresh process does.
_PICKLE_WRITE = f"""
import pickle, sys
from polypy.ir import nodes as n, parse_kernel
from polypy.ir.node_base import Node, class_bit
from polypy.ir.visitor import has_kind, walk
classes, stack = [], [Node]
while stack:
    c = stack.pop()
    classes.append(c)
    stack.extend(c.__subclasses__())
for c in sorted(classes, key=lambda c: c.__name__, reverse=True):
    class_bit(c)
k = parse_kernel({_PICKLE_KERNEL!r})
assert has_kind(k, n.Load) and not has_kind(k, n.For)
hash(k), [hash(x) for x in walk(k)]
pickle.dump(k, open(sys.argv[1], "wb"))
"""

# Reads it in a fresh process: every class's has_kind as a walk finds it, equal to and hashed as
# the same kernel parsed here.
_PICKLE_READ = f"""
import pickle, sys
from polypy.ir import nodes as n, parse_kernel
from polypy.ir.node_base import Node
from polypy.ir.visitor import has_kind, walk
classes, stack = [], [Node]
while stack:
    c = stack.pop()
    classes.append(c)
    stack.extend(c.__subclasses__())
fresh = parse_kernel({_PICKLE_KERNEL!r})
has_kind(fresh, n.Store)
k = pickle.load(open(sys.argv[1], "rb"))
wrong = [c.__name__ for c in classes if has_kind(k, c) != any(isinstance(x, c) for x in walk(k))]
print("wrong kinds:", wrong)
print("equal:", k == fresh, "same hash:", hash(k) == hash(fresh), {{fresh: 1}}.get(k))
"""


def test_a_pickled_kernel_answers_has_kind_and_hash_in_another_process(tmp_path):
    # The memos (`_kinds`: bits given out in this process's order; `_hash`: str hashes with this
    # process's seed) used to travel in the pickle, and answered wrongly in another process.
    import os
    import pathlib
    import subprocess
    import sys

    import polypy

    root = str(pathlib.Path(polypy.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=root)
    path = tmp_path / "k.pickle"
    for script, seed in ((_PICKLE_WRITE, "1"), (_PICKLE_READ, "2")):
        done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True,
                              env=dict(env, PYTHONHASHSEED=seed), cwd=tmp_path, timeout=120)
        assert done.returncode == 0, done.stderr
    assert done.stdout == "wrong kinds: []\nequal: True same hash: True 1\n"
