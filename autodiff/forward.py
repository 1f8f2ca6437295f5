"""Forward mode: a GPU-form kernel ``K`` -> ``K_fwd`` computing tangents next to the values.

Every active value ``x`` gets a tangent ``d_x`` computed right before ``x`` is (re)assigned,
from the operands' values and tangents through the rules table (JVP). Parameters follow the
calling convention (``autodiff.shadows``): ``T* d_p`` after an active pointer (on entry the
tangent of its contents, on return the tangent of its final contents -- every element K writes
gets its tangent written), ``T d_s`` after an active scalar. Shared and local arrays get
tangent arrays; barriers, loops and branches stay as they are (no reversal, no caching).
"""
from __future__ import annotations

from autodiff import build as b
from autodiff import rules
from autodiff.activity import Activity, ActiveParams
from autodiff.names import Names
from autodiff.shadows import interleave_dynamic_shared, shadow_buffers, shadow_disjoint, shadow_params
from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.types import ScalarType
from polypy.ir.visitor import Mutator


class ForwardBuilder(Mutator):
    """Each statement that assigns an active value gets its tangent statement right before it;
    ``if``/``for``/``while`` are walked by ``Mutator.generic_visit`` (a statement with nothing
    active inside comes back as the very same object)."""

    def __init__(self, kernel: n.Kernel, active: ActiveParams, activity: Activity, names: Names):
        self.k = kernel
        self.act = activity
        self.names = names
        self.params, self.param_shadow = shadow_params(kernel, active, names, mode="forward")
        self.buffers, self.buffer_shadow = shadow_buffers(kernel, activity.buffers, names)
        self.shadow = {**self.param_shadow, **self.buffer_shadow}
        self.dynamic = {buf.name: self.shadow[buf.name] for buf in kernel.buffers
                        if buf.name in self.buffer_shadow and buf.shape is None}
        self.tangent_var: dict[str, str] = {p: self.param_shadow[p] for p in active.scalars}

    def _tan_name(self, v: str) -> str:
        name = self.tangent_var.get(v)
        if name is None:
            name = self.names.fresh("d_" + v)
            self.tangent_var[v] = name
        return name

    # ------------------------------------------------------------------ expressions
    def tangent(self, e: n.Expr) -> n.Expr | None:
        if not self.act.expr(e):
            return None
        if isinstance(e, n.Var):
            return n.Var(self._tan_name(e.name), e.vtype)
        if isinstance(e, n.Load):
            return n.Load(self.shadow[e.buffer], e.index, e.etype)
        linear = rules.linear_rule(e)
        if linear is not None:
            return linear.jvp(e, tuple(self.tangent(x) for x in linear.operands(e)))
        args = rules.float_args(e)
        if not args:
            rules.rule_for(e)  # no rule for this kind of expression: a UserError naming it
            raise InternalError(f"tangent: unexpected {type(e).__name__}", e.loc)
        return rules.jvp(e, args, tuple(self.tangent(a) for a in args))

    def _or_zero(self, t: n.Expr | None, ty: ScalarType) -> n.Expr:
        return t if t is not None else b.zero(ty)

    # ------------------------------------------------------------------ statements
    def visit_Expr(self, e: n.Expr) -> n.Expr:
        return e  # tangents are built per statement, from whole expressions

    def visit_Decl(self, s: n.Decl) -> n.Stmt | tuple[n.Stmt, ...]:
        if s.name not in self.act.variables:
            return s
        t = self.tangent(s.init) if s.init is not None else None
        return n.Decl(self._tan_name(s.name), s.vtype, self._or_zero(t, s.vtype), loc=s.loc), s

    def visit_Assign(self, s: n.Assign) -> n.Stmt | tuple[n.Stmt, ...]:
        if s.name not in self.act.variables:
            return s
        ty = s.value.type
        return n.Assign(self._tan_name(s.name), self._or_zero(self.tangent(s.value), ty), loc=s.loc), s

    def _module_array(self, s: n.Store | n.AtomicRMW) -> None:
        rules.check_module_array(s, self.act.expr(s.value), self.k.space(s.buffer))

    def visit_Store(self, s: n.Store) -> n.Stmt | tuple[n.Stmt, ...]:
        shadow = self.shadow.get(s.buffer)
        if shadow is None:
            self._module_array(s)
            return s
        elem = self.k.elem_type(s.buffer)
        return n.Store(shadow, s.index, self._or_zero(self.tangent(s.value), elem), loc=s.loc), s

    def visit_AtomicRMW(self, s: n.AtomicRMW) -> n.Stmt | tuple[n.Stmt, ...]:
        shadow = self.shadow.get(s.buffer)
        if shadow is None:
            self._module_array(s)
            return s
        rules.check_atomic(s, self.act.variables)
        t = self.tangent(s.value)
        if t is None:
            return s
        return n.AtomicRMW(s.op, shadow, s.index, t, loc=s.loc), s

    def visit_Shuffle(self, s: n.Shuffle) -> n.Stmt | tuple[n.Stmt, ...]:
        if s.dest not in self.act.variables:
            return s
        ty = s.value.type
        t = self._or_zero(self.tangent(s.value), ty)
        tmp = self.names.fresh(s.dest + "_tan")
        return (n.Decl(tmp, ty, t, loc=s.loc),
                n.Shuffle(self._tan_name(s.dest), s.mode, n.Var(tmp, ty), s.lane, s.width, s.mask, loc=s.loc), s)

    def build(self, name: str) -> n.Kernel:
        body = self.visit_block(self.k.body)
        # Tangents of variables assigned by shuffles and declared without initializer are declared
        # where their primal is; those only assigned (never declared here) are the parameters'.
        kernel = n.Kernel(name, self.params, tuple(self.k.buffers) + tuple(self.buffers), body, "gpu", loc=self.k.loc,
                          disjoint=shadow_disjoint(self.k, self.param_shadow))
        return interleave_dynamic_shared(kernel, self.dynamic)


def forward_kernel(kernel: n.Kernel, active: ActiveParams, activity: Activity, names: Names, name: str) -> n.Kernel:
    return ForwardBuilder(kernel, active, activity, names).build(name)
