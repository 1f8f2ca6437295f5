"""Shadow memory and the gradient calling convention (DESIGN.md, "Gradient calling convention").

* every active pointer parameter ``T* p`` is followed by its shadow ``T* d_p``;
* every active float scalar ``T s`` is followed by ``T* d_s`` in reverse mode (one element,
  accumulated over all threads) and by its tangent ``T d_s`` in forward mode;
* inactive parameters appear once, unchanged.

Each active ``__shared__`` array gets a shadow ``__shared__`` array of the same shape, and each
active local array a local shadow. ``extern __shared__`` memory is one block-sized allocation
whose size the kernel cannot see, so its shadow is *interleaved*: primal element ``i`` moves to
``[2*i]`` and its shadow is ``[2*i + 1]`` (launch the gradient kernel with twice the dynamic
shared bytes). While generating code the shadow is a separate placeholder buffer;
``interleave_dynamic_shared`` rewrites both at the end.
"""
from __future__ import annotations

import dataclasses

from autodiff import build as b
from autodiff.activity import ActiveParams
from autodiff.names import Names
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.types import I32, PointerType
from polypy.ir.visitor import Mutator


def shadow_params(kernel: n.Kernel, active: ActiveParams, names: Names, *, mode: str
                  ) -> tuple[tuple[n.Param, ...], dict[str, str]]:
    """The gradient kernel's parameters and the shadow name of each active parameter."""
    params: list[n.Param] = []
    shadow: dict[str, str] = {}
    for p in kernel.params:
        params.append(p)
        if p.name not in active:
            continue
        name = names.fresh("d_" + p.name)
        shadow[p.name] = name
        if isinstance(p.ptype, PointerType):
            ptype: PointerType | n.ScalarType = PointerType(p.ptype.elem, const=False, restrict=p.ptype.restrict)
        elif mode == "reverse":
            ptype = PointerType(p.ptype)
        else:
            ptype = p.ptype
        params.append(n.Param(name, ptype, loc=p.loc))
    return tuple(params), shadow


def shadow_buffers(kernel: n.Kernel, buffers: set[str], names: Names) -> tuple[list[n.Buffer], dict[str, str]]:
    """Shadow arrays for the active shared/local arrays of ``kernel``."""
    out: list[n.Buffer] = []
    shadow: dict[str, str] = {}
    dynamic = [buf for buf in kernel.buffers if buf.space == "shared" and buf.shape is None]
    for buf in kernel.buffers:
        if buf.name not in buffers:
            continue
        if buf.space not in ("shared", "local"):
            continue
        if buf.shape is None and len(dynamic) > 1:
            raise UserError(f"cannot differentiate through the extern __shared__ array '{buf.name}': the kernel "
                            f"has {len(dynamic)} extern __shared__ arrays sharing one allocation", buf.loc)
        name = names.fresh("d_" + buf.name)
        shadow[buf.name] = name
        out.append(dataclasses.replace(buf, name=name, init=None))
    return out, shadow


def linear_tid() -> n.Expr:
    """``threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)`` (u32)."""
    yz = n.Binary("add", n.ThreadIdx(1), n.Binary("mul", n.BlockDim(1), n.ThreadIdx(2)))
    return n.Binary("add", n.ThreadIdx(0), n.Binary("mul", n.BlockDim(0), yz))


def block_threads() -> n.Expr:
    return n.Binary("mul", n.Binary("mul", n.BlockDim(0), n.BlockDim(1)), n.BlockDim(2))


def _shape(buf: n.Buffer) -> list[int]:
    dims = []
    for d in buf.shape or ():
        if not isinstance(d, n.Const):
            raise UserError(f"shadow of array '{buf.name}' needs a constant shape", buf.loc)
        dims.append(int(d.value))
    return dims


def _unflatten(z: n.Expr, dims: list[int]) -> tuple[n.Expr, ...]:
    index = []
    for k in range(len(dims)):
        inner = 1
        for d in dims[k + 1:]:
            inner *= d
        e = z if inner == 1 else n.Binary("div", z, b.const(inner, I32))
        if k > 0:
            e = n.Binary("rem", e, b.const(dims[k], I32))
        index.append(e)
    return tuple(index)


def zero_shared(buf: n.Buffer, names: Names) -> n.Stmt:
    """All threads of the block zero the shared array ``buf`` together (a barrier must follow)."""
    dims = _shape(buf)
    size = 1
    for d in dims:
        size *= d
    z = names.fresh("z")
    zv = n.Var(z, I32)
    store = n.Store(buf.name, _unflatten(zv, dims), b.zero(buf.elem))
    return n.For(z, I32, b.cast(I32, linear_tid()), b.const(size, I32), b.cast(I32, block_threads()), (store,))


def zero_local(buf: n.Buffer, names: Names) -> n.Stmt:
    dims = _shape(buf)
    size = 1
    for d in dims:
        size *= d
    z = names.fresh("z")
    zv = n.Var(z, I32)
    store = n.Store(buf.name, _unflatten(zv, dims), b.zero(buf.elem))
    return n.For(z, I32, b.const(0, I32), b.const(size, I32), b.const(1, I32), (store,))


class _Interleave(Mutator):
    def __init__(self, pairs: dict[str, str]):
        self.primal = {p: s for p, s in pairs.items()}
        self.shadow = {s: p for p, s in pairs.items()}

    def _index(self, buffer: str, index: tuple[n.Expr, ...]) -> tuple[str, tuple[n.Expr, ...]] | None:
        if buffer in self.primal:
            e = index[0]
            return buffer, (n.Binary("mul", e, b.const(2, e.type)),)
        if buffer in self.shadow:
            e = index[0]
            return self.shadow[buffer], (n.Binary("add", n.Binary("mul", e, b.const(2, e.type)), b.const(1, e.type)),)
        return None

    def visit_Load(self, e: n.Load) -> n.Expr:
        e = self.generic_visit(e)
        got = self._index(e.buffer, e.index)
        return e if got is None else dataclasses.replace(e, buffer=got[0], index=got[1])

    def visit_Store(self, s: n.Store) -> n.Stmt:
        s = self.generic_visit(s)
        got = self._index(s.buffer, s.index)
        return s if got is None else dataclasses.replace(s, buffer=got[0], index=got[1])

    def visit_AtomicRMW(self, s: n.AtomicRMW) -> n.Stmt:
        s = self.generic_visit(s)
        got = self._index(s.buffer, s.index)
        return s if got is None else dataclasses.replace(s, buffer=got[0], index=got[1])


def interleave_dynamic_shared(kernel: n.Kernel, pairs: dict[str, str]) -> n.Kernel:
    """Put each placeholder shadow of an extern shared array into the odd elements of its primal."""
    if not pairs:
        return kernel
    body = _Interleave(pairs).visit_block(kernel.body)
    buffers = tuple(buf for buf in kernel.buffers if buf.name not in set(pairs.values()))
    return dataclasses.replace(kernel, body=body, buffers=buffers)


def shadow_disjoint(original: n.Kernel, param_shadow: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """``Kernel.disjoint`` of a gradient or tangent kernel: every pointer shadow with every
    pointer argument of the original kernel (shadows are storage of their own: the calling
    convention; shadows may share storage with each other as their primals do)."""
    primal = [p.name for p in original.params if isinstance(p.ptype, PointerType)]
    shadows = [param_shadow[name] for name in primal if name in param_shadow]
    return tuple((p, d) for p in primal for d in shadows)
