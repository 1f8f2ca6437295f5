"""A kernel's versions (``polypy.ir.versions.KernelVersions``) compiled by LLVM: each version's
functions under a name of its own, and the function that chooses one for a launch::

    i32 @K_select(i32 gridDim.x, i32 gridDim.y, i32 gridDim.z,
                  i32 blockDim.x, i32 blockDim.y, i32 blockDim.z, i32 workers, ptr facts)

returns the index of the first version whose guard holds, ``len(versions)`` for the default, -1
where there is none (a whole program's promise broken). Nothing is decided here: each guard is
its one IR expression (``Guard.expr``), lowered by the expression emitter the kernels use
(``codegen.llvm.expressions``), as the C backend prints it (``codegen.c.versions``) and Python
evaluates it (``Guard.holds``). What the launch alone knows (two arguments apart, an array not
proven in bounds: ``polypy_rt_apart(a, b)``, ``polypy_rt_unproven(a)``; a scalar argument's
value, ``x_stride1 == 1`` of ``UnitStrides``) comes in ``facts``, one byte per such call or
comparison (``DispatchABI.facts``), which the caller fills from the same expressions
(``fact_bytes``). Version ``i`` of ``K`` is compiled as kernel ``K__<its name>`` (``K__b64x1x1_r``);
the default keeps ``K``.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from llvmlite import ir

from codegen.llvm.expressions import ExpressionEmitter
from codegen.llvm.types import I8, I32, PTR

from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.types import ScalarType
from polypy.ir.versions import APART, UNPROVEN, WORKERS, Facts, KernelVersions, UnitStrides, known
from polypy.ir.visitor import walk

# The parameters of ``K_select``, in order.
SELECT_PARAMS = ("gridDim.x", "gridDim.y", "gridDim.z", "blockDim.x", "blockDim.y", "blockDim.z", "workers", "facts")
# What ``K_select`` returns where no version's guard holds and there is no default.
NO_VERSION = -1


@dataclasses.dataclass(frozen=True)
class DispatchABI:
    """How to call ``symbol`` (``K_select``) and what its answer names: ``versions``, the kernel
    name each version is compiled under, in the value's order, then the default's (if any);
    ``facts``: the calls (and comparisons of arguments) whose truth the caller passes, one byte
    each, in order."""

    kernel: str
    symbol: str
    versions: tuple[str, ...]
    has_default: bool
    facts: tuple[n.Expr, ...]


def version_kernels(versions: KernelVersions) -> tuple[n.Kernel, ...]:
    """The kernels of ``versions`` under the names they are compiled as (see the module
    docstring), in the value's order, then the default."""
    name = versions.name
    out = tuple(dataclasses.replace(k, name=f"{name}__{g.suffix()}") for g, k in versions.versions)
    return out + ((versions.default,) if versions.default is not None else ())


def fact_calls(versions: KernelVersions) -> tuple[n.Expr, ...]:
    """The calls of the guards of ``versions`` whose value only the launch knows, and the
    comparisons of ``UnitStrides`` (of the launch's arguments), each once."""
    calls = [x for g, _ in versions.versions for x in walk(g.expr())
             if isinstance(x, n.Call) and x.fn in (APART, UNPROVEN)]
    calls += [x for g, _ in versions.versions for c in g.conditions if isinstance(c, UnitStrides)
              for x in walk(c.expr()) if isinstance(x, n.Binary) and x.op == "eq"]
    return tuple(dict.fromkeys(calls))


def fact_bytes(abi: DispatchABI, facts: Facts) -> bytes:
    """``facts`` for ``K_select``: each call of ``abi.facts`` evaluated for the launch."""
    out = []
    for call in abi.facts:
        value = known(call, facts)
        if not isinstance(value, n.Const):
            from polypy.ir.printer import format_expr

            raise InternalError(f"kernel {abi.kernel!r}: the launch's facts do not decide {format_expr(call)}")
        out.append(1 if value.value else 0)
    return bytes(out)


def emit_dispatch(llmod: ir.Module, versions: KernelVersions) -> DispatchABI:
    """``K_select`` for ``versions`` in ``llmod`` (the versions' own functions are emitted by
    ``lower.emit_module`` from ``version_kernels``)."""
    names = tuple(k.name for k in version_kernels(versions))
    abi = DispatchABI(versions.name, f"{versions.name}_select", names, versions.default is not None,
                      fact_calls(versions))
    fn = ir.Function(llmod, ir.FunctionType(I32, [I32] * 7 + [PTR]), name=abi.symbol)
    fn.attributes.add("nounwind")
    for arg, name in zip(fn.args, SELECT_PARAMS):
        arg.name = name
    guards = _GuardExpressions(_SelectFunction(fn, abi.facts))
    b = guards.fn.builder
    for index, (guard, _) in enumerate(versions.versions):
        taken = fn.append_basic_block(f"version.{index}")
        other = fn.append_basic_block(f"after.{index}")
        b.cbranch(guards.expr(guard.expr()), taken, other)
        b.position_at_end(taken)
        b.ret(ir.Constant(I32, index))
        b.position_at_end(other)
    b.ret(ir.Constant(I32, len(versions.versions) if abi.has_default else NO_VERSION))
    return abi


class _SelectFunction:
    """The state of ``K_select`` the expression emitter reads: ``gridDim``/``blockDim``/the
    workers are its parameters; ``facts``: the byte of each fact."""

    def __init__(self, fn: ir.Function, facts: Sequence[n.Call]):
        self.fn = fn
        self.llmod = fn.module
        self.builder = ir.IRBuilder(fn.append_basic_block("entry"))
        self.grid_dim = list(fn.args[0:3])
        self.block_dim = list(fn.args[3:6])
        self.block_idx: list[ir.Value] = []
        self.values = {WORKERS.name: fn.args[6]}
        self.facts = {call: i for i, call in enumerate(facts)}

    def new_block(self, name: str) -> ir.Block:
        return self.fn.append_basic_block(name)

    def slot(self, name: str, ty: ScalarType) -> ir.Value:
        raise InternalError(f"a guard names {name!r}, which no launch gives")

    def fact(self, e: n.Expr) -> ir.Value:
        """The truth of fact ``e``: its byte of the parameter ``facts``."""
        index = self.facts.get(e)
        if index is None:
            from polypy.ir.printer import format_expr

            raise InternalError(f"a guard tests {format_expr(e)}, which the dispatch does not know", e.loc)
        b = self.builder
        byte = b.load(b.gep(self.fn.args[7], [ir.Constant(I32, index)], source_etype=I8), typ=I8)
        return b.icmp_unsigned("!=", byte, ir.Constant(I8, 0))


class _GuardExpressions(ExpressionEmitter):
    """Guard expressions: as a kernel's, a call being a fact of the launch."""

    def visit_Call(self, e: n.Call) -> ir.Value:
        return self.fn.fact(e)

    def visit_Binary(self, e: n.Binary) -> ir.Value:
        if e in self.fn.facts:  # a comparison of the launch's arguments
            return self.fn.fact(e)
        return super().visit_Binary(e)


class JitDispatch:
    """``K_select`` of a kernel's versions, compiled and loaded (``JitModule.dispatch``): which
    version a launch runs (``select``) and the launch itself (``run``)."""

    def __init__(self, owner, abi: DispatchABI, address: int):
        import ctypes

        self.owner = owner  # the JitModule: keeps the code alive, holds the versions' kernels
        self.abi = abi
        self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, *([ctypes.c_uint32] * 6), ctypes.c_int32,
                                       ctypes.c_char_p)(address)

    def index(self, facts: Facts) -> int:
        """The index ``K_select`` answers for a launch of ``facts`` (grid, block, workers and the
        facts of ``abi.facts`` known)."""
        assert facts.grid is not None and facts.block is not None and facts.workers is not None
        return int(self._cfunc(*facts.grid, *facts.block, max(1, facts.workers), fact_bytes(self.abi, facts)))

    def select(self, facts: Facts):
        """The compiled kernel (``JitKernel``) of the version a launch of ``facts`` runs."""
        index = self.index(facts)
        if index == NO_VERSION:
            from polypy.errors import UserError

            raise UserError(f"a launch of {self.abi.kernel} with block shape {facts.block}, which none of its "
                            f"versions has (and it has no default)")
        return self.owner.kernels[self.abi.versions[index]]

    def run(self, grid: tuple[int, int, int], block: tuple[int, int, int], shmem: int, arrays, scalars, *,
            threads: int | None = None, unproven: frozenset[str] = frozenset()) -> None:
        """One launch of the version ``K_select`` chooses for it (``JitKernel.run``): the arrays
        apart where they share no memory, ``unproven``: the arrays not proven in bounds."""
        import numpy as np

        from codegen.llvm.launch import default_threads
        from polypy.launch import arrays_apart

        workers = threads if threads is not None else default_threads()
        ints = {name: int(v) for name, v in scalars.items() if isinstance(v, (int, np.integer))}
        facts = Facts(grid=grid, block=block, workers=workers, apart=arrays_apart(arrays), unproven=unproven,
                      arguments=ints)
        self.select(facts).run(grid, block, shmem, arrays, scalars, threads=threads)
