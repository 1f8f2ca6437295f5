"""The Visitor/Mutator contract: explicit child lists, scoped hooks, identity when nothing changes.

* every node class lists the fields that hold nodes (``CHILDREN``), and only those;
* ``enter_*``/``exit_*`` and ``enter_field``/``exit_field`` hooks fire in order and nest;
* a Mutator that changes nothing returns the very same object, for every sample kernel in GPU
  and CPU form;
* every registered pass that has nothing (more) to do returns its input object: each pass runs
  on the kernels of every sample and again on its own output, and where a run gives a kernel
  structurally equal to its input it must be the input object (``is``), not a rebuilt copy.
"""
from __future__ import annotations

import dataclasses
import textwrap
import typing

import pytest

from polypy.ir import nodes as n
from polypy.ir import parse_kernel
from polypy.ir.visitor import Mutator, Visitor, rebuild, walk
from samples.spec import all_samples

SAMPLES = all_samples()


def _node_classes() -> list[type]:
    return [c for c in vars(n).values() if isinstance(c, type) and issubclass(c, n.Node)]


def _holds_nodes(hint: object) -> bool:
    if isinstance(hint, type):
        return issubclass(hint, n.Node)
    return any(_holds_nodes(a) for a in typing.get_args(hint) if a is not Ellipsis)


@pytest.mark.parametrize("cls", _node_classes(), ids=lambda c: c.__name__)
def test_children_are_exactly_the_node_fields(cls):
    hints = typing.get_type_hints(cls, vars(n))
    fields = [f.name for f in dataclasses.fields(cls) if f.name != "loc"]
    expected = tuple(name for name in fields if _holds_nodes(hints[name]))
    assert cls.CHILDREN == expected  # in field order
    blocks = tuple(name for name in expected if hints[name] == tuple[n.Stmt, ...])
    assert cls.BLOCKS == blocks
    assert not {"CHILDREN", "BLOCKS"} & {f.name for f in dataclasses.fields(cls)}


KERNEL = """
kernel k(n: i32, x: f32*) {
  for i: i32 = 0 to n step 1 {
    if (i < 3) {
      x[i] = 1.0f
    } else {
      for j: i32 = 0 to i step 1 {
        x[j] = 2.0f
      }
    }
  }
}
"""


class _Recorder(Mutator):
    """Keeps a loop stack and a fact list with hooks only; records what each store saw."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.loops: list[str] = []
        self.facts: list[str] = []
        self.seen: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []

    def enter_For(self, s: n.For) -> None:
        self.events.append(f"enter for {s.var}")

    def exit_For(self, s: n.For) -> None:
        self.events.append(f"exit for {s.var}")

    def enter_field(self, node: n.Node, name: str) -> None:
        if isinstance(node, n.For) and name == "body":
            self.loops.append(node.var)
        if isinstance(node, n.If) and name in ("then", "orelse"):
            self.facts.append(("" if name == "then" else "!") + "cond")

    def exit_field(self, node: n.Node, name: str) -> None:
        if isinstance(node, n.For) and name == "body":
            assert self.loops.pop() == node.var
        if isinstance(node, n.If) and name in ("then", "orelse"):
            self.facts.pop()

    def enter_Stmt(self, s: n.Stmt) -> None:  # the most specific hook wins: not For
        self.events.append(f"enter {type(s).__name__}")

    def visit_Store(self, s: n.Store) -> n.Stmt:
        index = s.index[0]
        assert isinstance(index, n.Var)
        self.seen.append((index.name, tuple(self.loops), tuple(self.facts)))
        return self.generic_visit(s)


def test_hooks_fire_in_order_with_scopes():
    kernel = parse_kernel(textwrap.dedent(KERNEL))
    r = _Recorder()
    assert r.visit(kernel) is kernel
    assert r.events == ["enter for i", "enter If", "enter Store", "enter for j", "enter Store",
                        "exit for j", "exit for i"]
    assert r.seen == [("i", ("i",), ("cond",)), ("j", ("i", "j"), ("!cond",))]
    assert r.loops == [] and r.facts == []


def test_loop_variable_is_not_in_scope_in_its_bounds():
    kernel = parse_kernel(textwrap.dedent(KERNEL))

    class Bounds(Visitor):
        def __init__(self) -> None:
            self.loops: list[str] = []
            self.seen: list[tuple[str, tuple[str, ...]]] = []

        def enter_field(self, node, name):
            if isinstance(node, n.For) and name == "body":
                self.loops.append(node.var)

        def exit_field(self, node, name):
            if isinstance(node, n.For) and name == "body":
                self.loops.pop()

        def visit_Var(self, e: n.Var) -> None:
            self.seen.append((e.name, tuple(self.loops)))

    b = Bounds()
    b.visit(kernel)
    # `j < i` is read in i's body but outside j's; x[j] inside both.
    assert ("n", ()) in b.seen and ("i", ("i",)) in b.seen and ("j", ("i", "j")) in b.seen
    assert all(not (name == "j" and "j" not in loops) for name, loops in b.seen)


def test_exit_hook_runs_when_the_visit_raises():
    kernel = parse_kernel(textwrap.dedent(KERNEL))

    class Fails(Visitor):
        def __init__(self) -> None:
            self.depth = 0

        def enter_For(self, s):
            self.depth += 1

        def exit_For(self, s):
            self.depth -= 1

        def visit_Store(self, s):
            raise ValueError("stop")

    f = Fails()
    with pytest.raises(ValueError):
        f.visit(kernel)
    assert f.depth == 0


def test_hooks_wrap_an_overriding_visit_method():
    kernel = parse_kernel(textwrap.dedent(KERNEL))

    class Count(Mutator):
        def __init__(self) -> None:
            self.stack: list[str] = []
            self.max_depth = 0

        def enter_For(self, s):
            self.stack.append(s.var)
            self.max_depth = max(self.max_depth, len(self.stack))

        def exit_For(self, s):
            self.stack.pop()

        def visit_For(self, s):  # handled by hand, hooks still fire around it
            assert self.stack[-1] == s.var
            return self.generic_visit(s)

    c = Count()
    assert c.visit(kernel) is kernel
    assert c.max_depth == 2 and c.stack == []


def test_mutator_rebuilds_only_the_changed_path():
    kernel = parse_kernel(textwrap.dedent(KERNEL))

    class Twos(Mutator):
        def visit_Const(self, e: n.Const) -> n.Expr:
            return n.Const(3.0, e.ctype) if e.value == 2.0 else e

    out = Twos().visit(kernel)
    assert out is not kernel and out != kernel
    loop = out.body[0]
    assert loop.start is kernel.body[0].start and loop.stop is kernel.body[0].stop
    assert loop.body[0].then is kernel.body[0].body[0].then  # untouched branch shared
    assert loop.body[0].orelse is not kernel.body[0].body[0].orelse


def test_visit_block_sees_every_statement_list_with_its_field():
    kernel = parse_kernel(textwrap.dedent(KERNEL))

    class Blocks(Visitor):
        def __init__(self) -> None:
            self.fields: list[str] = ["body"]
            self.blocks: list[tuple[str, int]] = []

        def enter_field(self, node, name):
            self.fields.append(name)

        def exit_field(self, node, name):
            self.fields.pop()

        def visit_block(self, block):
            self.blocks.append((self.fields[-1], len(block)))
            super().visit_block(block)

    b = Blocks()
    b.visit_block(kernel.body)
    assert b.blocks == [("body", 1), ("body", 1), ("then", 1), ("orelse", 1), ("body", 1)]

    class Doubler(Mutator):  # a block-level rewrite: every store twice
        def visit_block(self, block):
            out = super().visit_block(block)
            return tuple(x for s in out for x in ((s, s) if isinstance(s, n.Store) else (s,)))

    doubled = Doubler().visit(kernel)
    assert len(doubled.body[0].body[0].then) == 2 and len(doubled.body[0].body[0].orelse[0].body) == 2
    assert doubled.body[0].start is kernel.body[0].start


def test_rebuild_keeps_the_node_when_nothing_changed():
    kernel = parse_kernel(textwrap.dedent(KERNEL))
    loop = kernel.body[0]
    assert rebuild(loop, body=tuple(loop.body), stop=loop.stop) is loop
    assert rebuild(loop, body=loop.body + ()) is loop
    equal_copy = n.Var(loop.var, loop.vtype)
    changed = rebuild(loop, start=equal_copy)  # equal is not the same: rebuilt
    assert changed is not loop and changed.start is equal_copy and changed.body is loop.body


def test_edit_statements_by_path_keeps_what_no_edit_changes():
    from polypy.poly.paths import edit_statements, iter_statements

    kernel = parse_kernel(textwrap.dedent(KERNEL))
    paths = [p for p, _ in iter_statements(kernel.body)]
    assert edit_statements(kernel, {p: lambda s: (s,) for p in paths}) is kernel
    inner = paths[-1]  # the store in the inner loop
    out = edit_statements(kernel, {inner: lambda s: (s, s)})
    assert out.body[0].body[0].then is kernel.body[0].body[0].then
    assert len(out.body[0].body[0].orelse[0].body) == 2


# --------------------------------------------------------------------------- over every sample


class _Nothing(Mutator):
    pass


class _HooksOnly(Mutator):
    def __init__(self) -> None:
        self.depth = 0

    def enter_Stmt(self, s):
        self.depth += 1

    def exit_Stmt(self, s):
        self.depth -= 1

    def enter_field(self, node, name):
        pass


def _check_no_op_mutators(k: n.Kernel) -> None:
    assert _Nothing().visit(k) is k
    hooks = _HooksOnly()
    assert hooks.visit(k) is k and hooks.depth == 0
    for node in walk(k):
        assert _Nothing().visit(node) is node


def _same(a: n.Kernel, b: n.Kernel) -> bool:
    return a == b and a.private_atomics == b.private_atomics


def _run_twice(p, kernel: n.Kernel, exercised: set[str], *, again: bool = True) -> n.Kernel:
    """``p`` on ``kernel`` and (``again``) on its own output: whenever a run gives a kernel equal
    to its input, it must be the input object itself. The kernel's notes (``private_atomics``: no
    part in ``==``) count: a pass that sets a note changed the kernel."""
    out = p.run(kernel)
    if _same(out, kernel):
        assert out is kernel, f"pass {p.name} rebuilt {kernel.name} without changing it"
    if again and out.stage == kernel.stage:  # serialize-threads changes the stage: no second run
        again = p.run(out)
        if _same(again, out):
            assert again is out, f"pass {p.name} rebuilt {kernel.name} (its own output) without changing it"
    exercised.add(p.name)
    return out


@pytest.mark.parametrize("name", [s.name for s in SAMPLES])
def test_every_registered_pass_with_nothing_to_do_returns_its_input(name):
    """Every pass of the registry, in the driver's pipelines (GPU, CPU, before and after AD)
    and alone on the form it takes, over every kernel of the sample; and a Mutator that changes
    nothing (with or without hooks) returns every node of every form as it is."""
    from frontend import parse_file

    from gpu2cpu.coarsen_blocks import plan_coarsening
    from polypy.driver import pipelines as pl
    from polypy.passes.specialize import SPECIALIZE_CLEANUP

    s = next(s for s in SAMPLES if s.name == name)
    block = tuple(s.cases[0].block) + (1,) * (3 - len(s.cases[0].block))
    exercised: set[str] = set()
    for kernel in parse_file(str(s.source), defines=dict(s.defines)).kernels:
        gpu = kernel
        for p in pl.GPU_PIPELINE:
            gpu = _run_twice(p, gpu, exercised)
        cpu = gpu
        for p in pl.cpu_pipeline(report=[]):
            cpu = _run_twice(p, cpu, exercised)
        for k in (kernel, gpu, cpu):  # frontend output, GPU form, CPU form
            _check_no_op_mutators(k)
        _run_twice(pl.make_pass("guard-early-returns"), kernel, exercised)  # the frontend ran it already
        for p in pl.before_ad_pipeline() + pl.after_ad_pipeline():
            _run_twice(p, gpu, exercised)
        lowered = _run_twice(pl.make_pass("serialize-threads"), gpu, exercised)
        for step in ("distribute-thread-loops", "version-thread-loops", "normalize-grid-stride"):
            _run_twice(pl.make_pass(step, report=[]), lowered, exercised)
        specialized = _run_twice(pl.make_pass("specialize-block-shape", block=block), cpu, exercised)
        for step in SPECIALIZE_CLEANUP:  # each step of its clean-up, again on its output
            _run_twice(pl.make_pass(step.name), specialized, exercised)
        factor = plan_coarsening(gpu, block=block).factor
        if factor > 1:
            # Requires a kernel for which `factor` is legal: its own output is no such kernel.
            _run_twice(pl.make_pass("coarsen-blocks", block=block, factor=factor), gpu, exercised, again=False)
            # Its blockDim.x is a function of blockIdx.x: not run on its own output either.
            _run_twice(pl.make_pass("specialize-partial-coarse", block=block, factor=factor), cpu, exercised,
                       again=False)
        else:
            exercised.update(("coarsen-blocks", "specialize-partial-coarse"))  # not legal here (other samples do)
        _check_version_passes(cpu, block, exercised)
    assert exercised == set(pl.pass_names())  # a new pass is added to this test


def _check_version_passes(cpu, block, exercised: set[str]) -> None:
    """The passes that make a kernel's versions (``KernelVersions -> KernelVersions``): with nothing
    to do (no shapes, no coarsener, nothing more to add) each returns its input object."""
    from polypy.driver import pipelines as pl
    from polypy.ir.types import PointerType
    from polypy.ir.versions import KernelVersions

    alone = KernelVersions(cpu)
    shaped = pl.make_pass("version-block-shapes", shapes=(block,)).run(alone)
    assert len(shaped.versions) == 1 and shaped.default is cpu
    for name, options in (("version-block-shapes", {}), ("version-coarse-blocks", {}),
                          ("version-arrays-apart", {"check_bounds": True}), ("version-without-default", {})):
        assert pl.make_pass(name, **options).run(alone) is alone, name
    assert pl.make_pass("version-block-shapes", shapes=(block,)).run(shaped) is shaped  # that shape is made
    assert pl.make_pass("version-coarse-blocks").run(shaped) is shaped  # no coarsener
    twins = pl.make_pass("version-arrays-apart").run(shaped)
    assert pl.make_pass("version-arrays-apart").run(twins) is twins  # twins made already (or none pay)
    no_default = pl.make_pass("version-without-default").run(shaped)
    assert no_default.default is None and pl.make_pass("version-without-default").run(no_default) is no_default
    assert pl.make_pass("version-bounds-checks").run(shaped) is shaped  # no arrays unproven
    grids = {tuple(block): (1, 1, 1)}
    assert pl.make_pass("version-grid-bounds", grids=grids).run(shaped) is shaped  # a default: nothing to bound
    assert pl.make_pass("version-grid-bounds").run(no_default) is no_default  # no grids known
    bounded = pl.make_pass("version-grid-bounds", grids=grids).run(no_default)
    assert bounded is not no_default and pl.make_pass("version-grid-bounds", grids=grids).run(bounded) is bounded
    pointers = [p.name for p in cpu.params if isinstance(p.ptype, PointerType)]
    if pointers:
        checked = pl.make_pass("version-bounds-checks", arrays=pointers[:1], among=pointers).run(shaped)
        assert len(checked.versions) > len(shaped.versions)
        again = pl.make_pass("version-bounds-checks", arrays=pointers[:1], among=pointers).run(checked)
        assert again is checked  # those checked versions are made
    assert pl.make_pass("version-unit-strides").run(shaped) is shaped  # no tensor accessors
    _run_twice(pl.make_pass("specialize-unit-strides"), cpu, exercised)
    exercised.update(("version-block-shapes", "version-coarse-blocks", "version-arrays-apart",
                      "version-without-default", "version-bounds-checks", "version-grid-bounds",
                      "version-unit-strides"))
