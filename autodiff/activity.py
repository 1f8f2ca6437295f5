"""Activity analysis: which values carry derivatives.

The active *parameters* are chosen by the caller (``select_active``): float pointers and float
scalars by default, restricted by ``wrt`` (inputs) and ``const``; float pointers the kernel
writes stay active unless named in ``const`` (their shadow carries the seed). Integers, bools
and everything computed only from inactive values are inactive, so index arithmetic, thread
ids and integer loops are never differentiated nor cached.

From the parameters, a fixpoint over the kernel ("varied" analysis; flow-insensitive, which is
exact enough because local names are unique):

* a float local is active if some assignment gives it an active value;
* a ``__shared__``/local array is active if some store or atomic puts an active value in it;
* a load is active if its buffer is active; an expression is active if it is float-typed and
  has an active operand (``select``: an active chosen operand; a cast from an integer: never).

Bit casts (``__float_as_int``, ``*(int*)&f``) are followed as Enzyme's type analysis follows
float data through integer registers: an integer computed from the bits of an active value
(``bitcast``, then integer arithmetic, variables, memory) *carries active bits*, and a bit cast
of such an integer back to a float is active. No derivative rule exists for it (the integer
operations in between have none), so differentiating through it is a located error naming the
bit cast (``autodiff.rules.NOT_DIFFERENTIABLE``), never a silent zero; Enzyme, too, refuses
integer operations on float data that it does not recognize. Bits that carry no active value
(an integer parameter's, a constant's) give an inactive float, and so does a value conversion
``(int)x`` (piecewise constant: derivative zero).
"""
from __future__ import annotations

import dataclasses

from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.queries import buffers_written
from polypy.ir.types import PointerType
from polypy.ir.visitor import walk_only


@dataclasses.dataclass(frozen=True)
class ActiveParams:
    """The parameters that get shadows, in parameter order."""

    pointers: tuple[str, ...]
    scalars: tuple[str, ...]

    def __contains__(self, name: str) -> bool:
        return name in self.pointers or name in self.scalars


def select_active(kernel: n.Kernel, wrt: tuple[str, ...] | None, const: tuple[str, ...]) -> ActiveParams:
    """Active parameters from ``wrt`` / ``const`` (see the module docstring); checks the names."""
    params = {p.name: p for p in kernel.params}
    # A struct parameter of the C signature stands for its members (one IR parameter each).
    members = {sp.name: tuple(m for _, m in sp.members) for sp in kernel.source_params if sp.name not in params}
    expand = lambda names: tuple(m for x in names for m in members.get(x, (x,)))  # noqa: E731
    wrt = expand(wrt) if wrt is not None else None
    const = expand(const)
    if wrt is not None:
        wrt = tuple(w for w in wrt if not (w in params and w not in const and not _float_param(params[w])
                                           and any(w in ms for ms in members.values())))
    for name in tuple(wrt or ()) + tuple(const):
        if name not in params:
            known = ", ".join(params) or "none"
            raise UserError(f"kernel '{kernel.name}' has no parameter named '{name}' (parameters: {known})",
                            kernel.loc)
    both = set(wrt or ()) & set(const)
    if both:
        raise UserError(f"parameter '{sorted(both)[0]}' is named both in --wrt and in --const", kernel.loc)
    for name in wrt or ():
        if not _float_param(params[name]):
            raise UserError(f"cannot differentiate with respect to '{name}': it is not a floating-point "
                            f"parameter ({params[name].ptype})", params[name].loc or kernel.loc)
    written = buffers_written(kernel.body)
    pointers, scalars = [], []
    for p in kernel.params:
        if not _float_param(p) or p.name in const:
            continue
        if isinstance(p.ptype, PointerType):
            if wrt is None or p.name in wrt or p.name in written:
                pointers.append(p.name)
        elif wrt is None or p.name in wrt:
            scalars.append(p.name)
    return ActiveParams(tuple(pointers), tuple(scalars))


def _float_param(p: n.Param) -> bool:
    t = p.ptype.elem if isinstance(p.ptype, PointerType) else p.ptype
    return t.is_float


@dataclasses.dataclass
class Activity:
    variables: set[str]
    buffers: set[str]
    bits: set[str] = dataclasses.field(default_factory=set)  # integer variables / buffers: see the docstring
    # Caches of ``expr`` and ``carries_bits`` per node, for the sets as they are: the sweeps ask
    # about every level of an expression, and without them each question re-walked the subtree
    # (quadratic in a 1,000-term sum). ``_mark`` empties them whenever a set grows.
    _expr_cache: dict[n.Expr, bool] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    _bits_cache: dict[n.Expr, bool] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def forget(self) -> None:
        """Empty the caches (after ``variables``, ``buffers`` or ``bits`` changed)."""
        self._expr_cache.clear()
        self._bits_cache.clear()

    def carries_bits(self, e: n.Expr) -> bool:
        """Whether integer ``e`` holds bits of an active value (see the module docstring)."""
        known = self._bits_cache.get(e)
        if known is None:
            known = self._bits_cache[e] = self._carries_bits(e)
        return known

    def _carries_bits(self, e: n.Expr) -> bool:
        if not e.type.is_int:
            return False
        if isinstance(e, n.Var):
            return e.name in self.bits
        if isinstance(e, n.Load):
            return e.buffer in self.bits
        if isinstance(e, n.Call) and e.fn == "bitcast":
            return self.expr(e.args[0])
        if isinstance(e, n.Cast):
            return self.carries_bits(e.x)
        if isinstance(e, n.Unary):
            return self.carries_bits(e.x)
        if isinstance(e, (n.Binary, n.Select)):
            return self.carries_bits(e.a) or self.carries_bits(e.b)
        if isinstance(e, n.Call):
            return any(self.carries_bits(a) for a in e.args)
        return False

    def expr(self, e: n.Expr) -> bool:
        """Whether ``e`` carries a derivative."""
        known = self._expr_cache.get(e)
        if known is None:
            known = self._expr_cache[e] = self._expr(e)
        return known

    def _expr(self, e: n.Expr) -> bool:
        if not e.type.is_float:
            return False
        if isinstance(e, n.Call) and e.fn == "bitcast":
            return self.carries_bits(e.args[0])
        if isinstance(e, n.Var):
            return e.name in self.variables
        if isinstance(e, n.Load):
            return e.buffer in self.buffers
        if isinstance(e, (n.Const, n.GpuIndex)):
            return False
        if isinstance(e, n.Select):
            return self.expr(e.a) or self.expr(e.b)
        if isinstance(e, n.Cast):
            return e.x.type.is_float and self.expr(e.x)
        if isinstance(e, n.Call):
            return any(self.expr(a) for a in e.args)
        if isinstance(e, n.Unary):
            return self.expr(e.x)
        if isinstance(e, n.Binary):
            return self.expr(e.a) or self.expr(e.b)
        return False


def analyze_activity(kernel: n.Kernel, active: ActiveParams) -> Activity:
    """The varied-values fixpoint (see the module docstring)."""
    act = Activity(set(active.scalars), set(active.pointers))
    stmts = list(walk_only(kernel, n.Stmt))
    changed = True
    while changed:
        changed = False
        for s in stmts:
            changed |= _mark_bits(act, s)
            if isinstance(s, n.Decl) and s.init is not None:
                changed |= _mark(act, act.variables, s.name, s.vtype.is_float and act.expr(s.init))
            elif isinstance(s, n.Assign):
                changed |= _mark(act, act.variables, s.name, act.expr(s.value))
            elif isinstance(s, n.Shuffle):
                changed |= _mark(act, act.variables, s.dest, act.expr(s.value))
            elif isinstance(s, n.Store):
                if act.expr(s.value) and kernel.space(s.buffer) in ("shared", "local"):
                    changed |= _mark(act, act.buffers, s.buffer, True)
            elif isinstance(s, n.AtomicRMW):
                if act.expr(s.value) and kernel.space(s.buffer) in ("shared", "local"):
                    changed |= _mark(act, act.buffers, s.buffer, True)
                if s.dest is not None and s.buffer in act.buffers and kernel.elem_type(s.buffer).is_float:
                    changed |= _mark(act, act.variables, s.dest, True)
    return act


def _mark(act: Activity, group: set[str], name: str, condition: bool) -> bool:
    """Add ``name`` to ``group`` (one of ``act``'s sets) if ``condition``; whether it was new."""
    if condition and name not in group:
        group.add(name)
        act.forget()
        return True
    return False


def _mark_bits(act: Activity, s: n.Stmt) -> bool:
    """Integer variables and buffers that ``s`` gives active bits (see the module docstring)."""
    if isinstance(s, n.Decl) and s.init is not None:
        return _mark(act, act.bits, s.name, act.carries_bits(s.init))
    if isinstance(s, n.Assign):
        return _mark(act, act.bits, s.name, act.carries_bits(s.value))
    if isinstance(s, n.Shuffle):
        return _mark(act, act.bits, s.dest, act.carries_bits(s.value))
    if isinstance(s, (n.Store, n.AtomicRMW)):
        changed = _mark(act, act.bits, s.buffer, act.carries_bits(s.value))
        if isinstance(s, n.AtomicRMW) and s.dest is not None:
            changed |= _mark(act, act.bits, s.dest, s.buffer in act.bits)
        return changed
    return False
