"""The ``torch.autograd.Function`` behind every ``polypy.torch.KernelFunction`` (part of ``polypy.torch``):
forward runs the kernel and saves what backward needs; backward launches the synthesized gradient
(``KernelFunction._backward``) and gives each input its gradient in the input's shape and type.
Also the helpers of the backward's arguments: the gradient's shadow parameters (``shadow_names``)
and whether a seed may be passed as it is (``overlaps``)."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Sequence

from polypy.errors import InternalError
from polypy.ir import nodes as n
from polypy.ir.types import PointerType, ScalarType

if TYPE_CHECKING:  # pragma: no cover
    from polypy.torch import KernelFunction


def is_float(ptype: PointerType | ScalarType) -> bool:
    """Whether a parameter of type ``ptype`` holds floating-point values (it may have a gradient)."""
    return (ptype.elem if isinstance(ptype, PointerType) else ptype).is_float


@functools.lru_cache(maxsize=None)
def autograd_function() -> type:
    """The ``torch.autograd.Function`` behind every ``KernelFunction`` (made once: a cache; the
    caller has checked that PyTorch is there: ``polypy.torch._torch``)."""
    import torch
    from torch.autograd.function import once_differentiable

    class PolypyKernel(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, fn: KernelFunction, *inputs: Any) -> Any:
            values = dict(zip(fn.inputs, inputs))
            outs, state = fn._forward(values)
            prepared = state["prepared"]
            tensors = [name for name in fn.inputs if isinstance(prepared[name], torch.Tensor)]
            ctx.save_for_backward(*[prepared[name] for name in tensors])
            ctx.fn = fn
            ctx.tensor_inputs = tensors
            ctx.state = {k: v for k, v in state.items() if k != "prepared"}
            ctx.state["scalars"] = {name: v for name, v in prepared.items() if name not in tensors}
            ctx.input_like = {name: (tuple(v.shape), v.dtype) for name, v in values.items()
                              if isinstance(v, torch.Tensor)}
            non_diff = [t for name, t in zip(fn.outputs, outs) if not is_float(fn._ptypes[name])]
            if non_diff:
                ctx.mark_non_differentiable(*non_diff)
            return tuple(outs)

        @staticmethod
        @once_differentiable
        def backward(ctx: Any, *grad_outputs: Any) -> Any:
            fn: KernelFunction = ctx.fn
            prepared = dict(ctx.state["scalars"])
            prepared.update(zip(ctx.tensor_inputs, ctx.saved_tensors))
            state = dict(ctx.state, prepared=prepared)
            needed = dict(zip(fn.inputs, ctx.needs_input_grad[1:]))
            grads = fn._backward(state, grad_outputs, needed)
            result: list[Any] = [None]
            for name in fn.inputs:
                g = grads.get(name)
                if g is not None:
                    shape, dtype = ctx.input_like[name]
                    g = g.reshape(shape).to(dtype)
                result.append(g)
            return tuple(result)

    return PolypyKernel


def overlaps(t: Any, others: Sequence[Any]) -> bool:
    """Whether tensor ``t``'s bytes meet those of one of ``others`` (a launch refuses arrays
    that overlap)."""
    lo = t.data_ptr()
    hi = lo + t.numel() * t.element_size()
    for o in others:
        a = o.data_ptr()
        if a < hi and lo < a + o.numel() * o.element_size():
            return True
    return False


def shadow_names(kernel: n.Kernel, gradient: n.Kernel) -> dict[str, str]:
    """Shadow parameter -> its primal (a C-level name): each shadow follows its primal."""
    primal_names = {p.name for p in kernel.params}
    shadows: dict[str, str] = {}
    last = None
    for p in gradient.params:
        if p.name in primal_names:
            last = p.name
        elif last is None:
            raise InternalError(f"gradient kernel {gradient.name!r}: parameter {p.name!r} follows no primal")
        else:
            shadows[p.name] = last
    c_of = {name: sp.name for sp in kernel.source_params for _, name in sp.members}
    return {s: c_of.get(primal, primal) for s, primal in shadows.items()}
