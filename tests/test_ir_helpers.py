"""The shared IR helper library: jumps (polypy/ir/jumps.py), renaming and folding builders
(polypy/ir/rewrite.py), thread uniformity (polypy/analysis/uniformity.py)."""
from __future__ import annotations

import pytest

from polypy.analysis.uniformity import thread_uniform
from polypy.ir import nodes as n
from polypy.ir import parse_kernel, print_kernel
from polypy.ir.jumps import escape_kinds, escaping_jumps, first_escaping_jump, jumps_out
from polypy.ir.queries import local_types
from polypy.ir.rewrite import fold_max, fold_min, int_add, int_scale, int_sub, rename_buffers, rename_locals
from polypy.ir.types import F32, I32, I64, U32

LOOP = """kernel k(n: i32, x: f32*) {
  for i: i32 = 0 to n step 1 {
    if (i > 3) {
      continue
    } else {
      if (i > 5) {
        break
      }
    }
    for j: i32 = 0 to n step 1 {
      if (j > 2) {
        break
      }
      if (j > 7) {
        return
      }
    }
    while (n > 2) {
      continue
    }
  }
}"""


def _loop_body() -> tuple[n.Stmt, ...]:
    loop = parse_kernel(LOOP).body[0]
    assert isinstance(loop, n.For)
    return loop.body


def test_jumps_of_a_loop_body_nested_loops_own_their_break_and_continue():
    body = _loop_body()
    found = list(escaping_jumps(body))
    assert [type(s) for s in found] == [n.Continue, n.Break, n.Return]  # source order
    assert [s.loc.line for s in found] == [4, 7, 15]
    assert escape_kinds(body) == {"break", "continue", "return"}
    assert jumps_out(body, n.Break) and jumps_out(body, n.Continue)
    assert first_escaping_jump(body, n.Return).loc.line == 15
    # the inner loop alone: its break and continue stay inside it, only the return leaves
    inner = body[1]
    assert escape_kinds(inner) == {"return"}
    assert not jumps_out(inner, n.Break, n.Continue)
    assert escape_kinds(body[2]) == set()
    # a jump statement alone leaves itself; a block without jumps leaves nothing
    assert first_escaping_jump(n.Break()) is not None
    assert list(escaping_jumps(())) == []
    assert escape_kinds(body[0].then) == {"continue"}


def test_rename_locals_renames_every_place_a_local_name_stands():
    k = parse_kernel("""kernel k(n: i32, x: i32*) {
  var a: i32 = n
  a = a + 1
  for i: i32 = 0 to a step 1 {
    b = atomic.add x[i], a
  }
  c = shfl.idx(4294967295u, a, 0, 32)
  d = vote.any(4294967295u, a > 0)
}""")
    out = rename_locals(k, {"a": "a2", "i": "i2", "b": "b2", "c": "c2", "d": "d2", "x": "not_a_local"})
    assert print_kernel(out) == print_kernel(parse_kernel("""kernel k(n: i32, x: i32*) {
  var a2: i32 = n
  a2 = a2 + 1
  for i2: i32 = 0 to a2 step 1 {
    b2 = atomic.add x[i2], a2
  }
  c2 = shfl.idx(4294967295u, a2, 0, 32)
  d2 = vote.any(4294967295u, a2 > 0)
}"""))
    # unchanged: the same object, also for a tuple of statements
    assert rename_locals(k, {"zz": "yy"}) is k
    assert rename_locals(k.body, {"zz": "yy"}) is k.body
    assert rename_locals(k, {}) is k
    assert rename_locals(k.body, {"a": "q"})[0].name == "q"
    # values: other reads replaced in the same walk, the replacement not renamed again
    a, n_ = n.Var("a", I32), n.Var("n", I32)
    out = rename_locals(k.body[:2], {"a": "a2"}, values={n_: n.Binary("add", a, a)})
    assert out[0].init == n.Binary("add", a, a) and out[1].value == n.Binary("add", n.Var("a2", I32), n.Const(1, I32))


def test_rename_buffers_renames_loads_stores_and_atomics_only():
    k = parse_kernel("""kernel k(x: f32*, y: f32*) {
  var t: u32 = threadIdx.x
  y[t] = x[t] + y[t]
  atomic.add x[0u], 1.0f
}""")
    out = rename_buffers(k, {"x": "x_copy"})
    text = print_kernel(out)
    assert "x_copy[t]" in text and "atomic.add x_copy[0u]" in text and "y[t] = " in text
    assert "x: f32*" in text  # parameters are not touched
    assert rename_buffers(k, {"z": "w"}) is k
    assert rename_buffers(k.body, {"z": "w"}) is k.body


def test_integer_builders_fold_the_obvious():
    x = n.Var("x", I64)
    c = lambda v: n.Const(v, I64)  # noqa: E731
    assert int_add(x, c(0)) is x and int_add(c(0), x) is x
    assert int_add(c(2), c(3)) == c(5)
    assert int_add(x, c(-4)) == n.Binary("sub", x, c(4))
    assert int_add(x, c(4)) == n.Binary("add", x, c(4))
    assert int_sub(x, c(4)) == n.Binary("sub", x, c(4))
    assert int_sub(x, c(-4)) == n.Binary("add", x, c(4))
    assert int_sub(x, c(0)) is x
    assert int_sub(c(7), x) == n.Binary("sub", c(7), x)
    assert int_scale(x, 1) is x
    assert int_scale(c(6), 3) == c(18)
    assert int_scale(x, 3) == n.Binary("mul", x, c(3))
    y, z = n.Var("y", I64), n.Var("z", I64)
    assert fold_max([x], I64) is x
    assert fold_max([x, y, z], I64) == n.Call("max", (n.Call("max", (x, y), I64), z), I64)
    assert fold_min([x, y], I32) == n.Call("min", (x, y), I32)
    with pytest.raises(ValueError):
        fold_min([], I64)


def test_thread_uniform():
    t = n.ThreadIdx(0)
    v, w = n.Var("v", U32), n.Var("w", U32)
    assert thread_uniform(n.Binary("add", v, n.BlockIdx(0)), divergent={"w"})
    assert not thread_uniform(n.Binary("add", v, t), divergent=set())
    assert not thread_uniform(n.Binary("add", v, w), divergent={"w"})
    shared = n.Load("s", (v,), F32)
    assert thread_uniform(shared, divergent=set(), local_buffers={"p"})
    assert not thread_uniform(n.Load("p", (v,), F32), divergent=set(), local_buffers={"p"})
    assert not thread_uniform(n.Load("s", (t,), F32), divergent=set())


def test_local_types_of_declarations_and_loop_variables():
    k = parse_kernel("""kernel k(n: i32, x: f32*) {
  var a: f32 = 1.0f
  for i: i64 = 0 to 4 step 1 {
    var b: u32 = 2u
  }
}""")
    assert local_types(k.body) == {"a": F32, "i": I64, "b": U32}
    assert local_types(k.body[1]) == {"i": I64, "b": U32}


def test_the_llvm_emitter_passes_one_state_object_and_has_no_mixins():
    """The LLVM emitter's parts are separate objects over one explicit state (``KernelFunction``),
    not base classes of one emitter: each has at most one base of the project's own."""
    from codegen.llvm import dispatch, lower
    from codegen.llvm.expressions import ExpressionEmitter
    from codegen.llvm.function import KernelFunction
    from codegen.llvm.statements import StatementEmitter

    assert not hasattr(lower, "_KernelEmitter")
    for cls in (KernelFunction, ExpressionEmitter, StatementEmitter, dispatch._GuardExpressions):
        own = [c for c in cls.__mro__[1:] if c.__module__.split(".")[0] in ("frontend", "codegen")]
        assert len(own) <= 1 and len(cls.__bases__) == 1, cls
    assert not any(issubclass(KernelFunction, c) for c in (ExpressionEmitter, StatementEmitter))


def test_the_frontend_kernel_builder_is_one_state_object_passed_to_the_parts():
    """The frontend's KernelBuilder is the state of one kernel's lowering, not a class assembled
    from one mixin per job: its parts (statements, expressions, places, calls, ...) are modules of
    functions taking it as their first argument, and the methods it has beyond its own state and
    small helpers hand a construct to the function of the same name in its part."""
    import importlib
    import inspect
    import pkgutil

    import frontend.lower
    from frontend.lower.builder import KernelBuilder

    assert KernelBuilder.__bases__ == (object,)
    for info in pkgutil.iter_modules(frontend.lower.__path__):
        module = importlib.import_module(f"frontend.lower.{info.name}")
        own = [v for v in vars(module).values() if inspect.isclass(v) and v.__module__ == module.__name__]
        assert not [c.__name__ for c in own if c.__name__.endswith("Lowering")], module.__name__
    forwarded = 0
    for name, fn in vars(KernelBuilder).items():
        if not inspect.isfunction(fn):
            continue
        body = [line.strip() for line in inspect.getsource(fn).splitlines()[1:] if line.strip()]
        if len(body) == 1 and body[0].startswith("return ") and f".{name}(self" in body[0]:
            part = body[0].split()[1].split(".")[0]
            target = getattr(importlib.import_module(f"frontend.lower.{part}"), name)
            assert list(inspect.signature(target).parameters)[0] == "kb", name
            forwarded += 1
    assert forwarded >= 10


def test_fresh_names_take_the_next_free_suffix_and_count_on():
    """``NameSupply.fresh`` tried ``t_1``, ``t_2``, ... from the start on every call: 10,000
    temporaries of one base (a ``?:`` nested 3,000 deep) were 50 million membership tests. Now
    each base remembers where it stopped: names taken in between (``taken`` is public) are still
    skipped. Counted: membership tests for 2,000 names of one base."""
    from polypy.ir.names import NameSupply

    class CountingSet(set):
        tests = 0

        def __contains__(self, item):
            CountingSet.tests += 1
            return super().__contains__(item)

    supply = NameSupply(["t", "t_2"])
    supply.taken = CountingSet(supply.taken)
    assert [supply.fresh("t") for _ in range(3)] == ["t_1", "t_3", "t_4"]
    supply.taken.add("t_5")  # taken from outside, as the frontend does
    assert supply.fresh("t") == "t_6" and supply.fresh("u") == "u" and supply.fresh("u") == "u_1"
    CountingSet.tests = 0
    names = [supply.fresh("t") for _ in range(2_000)]
    assert len(set(names)) == 2_000 and not set(names) & {"t", "t_1", "t_2", "t_3", "t_4", "t_5", "t_6"}
    assert CountingSet.tests <= 2 * 2_000, CountingSet.tests


# Traversals that must see every node, and why (any other one sees only what its methods name).
_SEES_EVERY_NODE = {
    "polypy.ir.visitor._Substituter",  # replaces any sub-expression equal to a key
    "codegen.llvm.expressions.ExpressionEmitter",  # emits every expression
    "codegen.llvm.statements.StatementEmitter",
    "codegen.llvm.dispatch._GuardExpressions",
}


def test_passes_see_only_the_nodes_their_methods_name():
    """A Mutator or Visitor that overrides ``visit_tuple`` (or ``visit``/``generic_visit``) walks
    every node of every expression, once per reference of a shared subtree: the fuzz run's
    quadratic and worse cases (issue 35). Five passes that rewrite statement lists
    (``race_form``, ``specialize``, ``hoist_faults``, ``raise_counted_loops``,
    ``hoist_invariants``) did so; they override ``visit_block`` now. Every traversal of the
    packages is checked, so a new one cannot bring the walk back unnoticed."""
    import importlib
    import pkgutil

    from polypy.ir.visitor import Mutator, Visitor

    for package in ("polypy", "frontend", "gpu2cpu", "autodiff", "codegen"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, package + "."):
            if not info.name.startswith("polypy.torch"):  # (needs torch; no traversal in it)
                importlib.import_module(info.name)

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    found = {f"{c.__module__}.{c.__qualname__}" for base in (Mutator, Visitor) for c in subclasses(base)
             if c._wanted_mask() == -1 and c.__module__.split(".")[0] in ("polypy", "frontend", "gpu2cpu",
                                                                          "autodiff", "codegen")}
    assert found == _SEES_EVERY_NODE
