"""The per-term work of a long expression (issue 35 item 7: a 100,000-term sum through
``translate`` and ``--emit llvm``): work done on every node of a kernel that decides or changes
nothing is counted here (never timed), on small sums. tests/test_deep_input.py holds the deep
and long input's correctness cases."""
from __future__ import annotations

from deepgen import cli_step, coef, counted_calls, long_sum, nested_fors


def test_thread_loops_without_loops_inside_are_not_planned(tmp_path, monkeypatch) -> None:
    """sink_thread_loops sinks serial loops out of a loop over tx; its plan substituted and
    walked the whole body of every loop over tx (a 100,000-term sum: 6 s CPU) to find none.
    A body with no loop is left as it is without a plan; a body with one is still planned."""
    import gpu2cpu.sink_thread_loops as sink

    assert counted_calls(monkeypatch, sink, "_Plan", cli_step(tmp_path, long_sum(50), "sum", "translate")) == 0  # was 1
    assert counted_calls(monkeypatch, sink, "_Plan", cli_step(tmp_path, nested_fors(2), "fors", "translate")) > 0


def test_the_frontend_asks_libclang_for_a_file_s_name_once(tmp_path, monkeypatch) -> None:
    """Every node the frontend makes is located: the bindings' ``location.file.name`` is a
    string made (and freed) by libclang for each (8 per term of a long sum, a tenth of the
    frontend). The name is now asked once per file; the locations are those libclang gives."""
    import clang.cindex as ci

    import polypy
    from polypy.ir import nodes as n
    from polypy.ir.visitor import walk

    asked = [0]
    original = ci.File.name

    def name(self):
        asked[0] += 1
        return original.fget(self)

    path = tmp_path / "sum.cu"
    path.write_text(long_sum(300))
    with monkeypatch.context() as m:
        m.setattr(ci.File, "name", property(name))
        kernel = polypy.load(path).kernel("k")
    assert asked[0] < 30, asked  # was one per node located: over 2,000
    consts = [x for x in walk(kernel) if isinstance(x, n.Const) and x.type.name == "f32"]
    assert consts[0].loc.file == str(path) and consts[0].loc.line == 4
    text = path.read_text().splitlines()[3]
    assert text[consts[0].loc.col - 1:].startswith("-0.750f*x[i+0]"), consts[0].loc
    assert text[consts[-1].loc.col - 1:] == f"{coef(299)}*x[i+{299 % 7}];", consts[-1].loc


def test_cursors_children_are_listed_without_the_bindings_callback_per_call(tmp_path, monkeypatch) -> None:
    """``Cursor.get_children`` makes a ctypes callback per call and compares each child with
    the null cursor (a call into libclang): the frontend's walk of a kernel and the lowering of
    its expressions asked it about 24 times per term of a long sum. Now the walk
    (``clang_setup.preorder``) and the lowering of operators, subscripts and conversions list
    children through ``clang_setup.child_cursors`` (one callback for all calls), which gives
    the same cursors. Counted: ``get_children`` calls per cursor of the kernel (2.1 before)."""
    import clang.cindex as ci

    import polypy
    from frontend.clang_setup import parse_translation_unit, preorder
    from polypy.stack import call_on_big_stack

    asked = [0]
    original = ci.Cursor.get_children

    def get_children(self):
        asked[0] += 1
        return original(self)

    path = tmp_path / "sum.cu"
    path.write_text(long_sum(500))
    with monkeypatch.context() as m:
        m.setattr(ci.Cursor, "get_children", get_children)
        polypy.load(path)

    tu = call_on_big_stack(parse_translation_unit, str(path), "cuda")
    kernel = next(c for c in tu.cursor.get_children() if c.spelling == "k")
    own = sum(1 for _ in preorder(kernel))
    assert own > 5_000 and asked[0] < 0.5 * own, (asked[0], own)
    from frontend.clang_setup import child_cursors

    assert all([(x.kind, x.extent.start.offset) for x in child_cursors(c)]
               == [(x.kind, x.extent.start.offset) for x in c.get_children()] for c in preorder(kernel))
    assert child_cursors(kernel)[0].translation_unit is tu
