"""Statement paths, access numbering and edits by path (``polypy.poly.paths``)."""
from __future__ import annotations

from polypy.ir import Load, Var, parse_kernel, print_kernel
from polypy.ir import nodes as n
from polypy.poly import (
    AccessId, edit_statements, format_path, iter_statements, replace_loads, statement_accesses, statement_at,
)
from polypy.ir.types import F32

TEXT = """kernel k(n: i32, a: f32*, idx: const i32*) {
  shared s: f32[64]
  var t: f32 = a[idx[threadIdx.x]] + s[0]
  if (n > 0) {
    s[threadIdx.x] = t
  } else {
    barrier
  }
  while (a[0] > 0.0f) {
    atomic.add a[idx[1]], 1.0f
  } update {
    t = n > 2 && a[2] > 0.0f ? s[1] : t
  }
}
"""


def test_paths_in_program_order() -> None:
    k = parse_kernel(TEXT)
    paths = [format_path(p) for p, _ in iter_statements(k.body)]
    assert paths == ["body[0]", "body[1]", "body[1].then[0]", "body[1].orelse[0]",
                     "body[2]", "body[2].body[0]", "body[2].update[0]"]
    assert isinstance(statement_at(k, ((("body", 2), ("update", 0)))), n.Assign)
    assert str(AccessId((("body", 1), ("then", 0)), 1)) == "body[1].then[0]#1"


def test_access_numbering() -> None:
    k = parse_kernel(TEXT)
    decl = statement_accesses(k.body[0])
    assert [(a.index, a.kind, a.buffer) for a in decl] == [(0, "read", "a"), (1, "read", "idx"), (2, "read", "s")]
    store = statement_accesses(k.body[1].then[0])
    assert [(a.kind, a.buffer) for a in store] == [("write", "s")]
    loop = statement_accesses(k.body[2])  # only the while condition belongs to the loop itself
    assert [(a.kind, a.buffer) for a in loop] == [("read", "a")]
    atomic = statement_accesses(k.body[2].body[0])
    assert [(a.kind, a.buffer) for a in atomic] == [("read", "idx"), ("atomic", "a")]
    update = statement_accesses(k.body[2].update[0])
    assert [(a.buffer, a.conditional) for a in update] == [("a", True), ("s", True)]


def test_replace_loads_uses_the_same_numbering() -> None:
    k = parse_kernel(TEXT)
    decl = k.body[0]
    new = replace_loads(decl, {1: n.Const(3, decl.init.a.index[0].type), 2: Var("t0", F32)})
    assert "a[3] + t0" in print_kernel(edit_statements(k, {(("body", 0),): lambda s: (new,)}))
    # Replacing an outer load still counts the loads inside it.
    new = replace_loads(decl, {0: Var("t0", F32), 2: Var("t1", F32)})
    assert print_kernel(edit_statements(k, {(("body", 0),): lambda s: (new,)})).splitlines()[2] == \
        "  var t: f32 = t0 + t1"
    assert replace_loads(decl, {}) is decl


def test_edit_statements_splices_and_deletes() -> None:
    k = parse_kernel(TEXT)
    edits = {
        (("body", 1), ("orelse", 0)): lambda s: (),
        (("body", 1), ("then", 0)): lambda s: (s, s),
        (("body", 2),): lambda s: (n.Barrier(), s),
    }
    text = print_kernel(edit_statements(k, edits))
    assert text.count("s[threadIdx.x] = t") == 2
    assert "} else {" not in text
    assert "  barrier\n  while" in text
    assert edit_statements(k, {}) is k
    loads = [x for x in statement_accesses(k.body[0]) if isinstance(x.node, Load)]
    assert len(loads) == 3
