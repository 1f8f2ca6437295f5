"""split_dynamic_shared: an interleaved ``extern __shared__`` array becomes one array per residue.

Requires: a CPU-form kernel. Guarantees: the same values at the same accesses; every access that
was in bounds stays in bounds, every access that was out of bounds stays out of bounds.

Dynamic shared memory is one allocation whose size the kernel cannot see, so a kernel that keeps
records in it lays them out interleaved: complex pairs as ``s[2*i]``/``s[2*i + 1]``, and every
gradient of a kernel with ``extern __shared__`` memory keeps the shadow in the odd elements
(``autodiff.shadows``). On a CPU a thread loop over ``i`` then reads and writes with stride ``q``:
gathers and scatters where the loop vectorizes. Where every access of the kernel's only extern
array is ``e * q + c`` (one literal ``q >= 2`` for all of them, literal ``0 <= c < q``) and at
least two residues ``c`` occur, the array becomes ``q`` arrays, one per residue::

    extern shared smem: f32[]                        extern shared smem: f32[] part 0/2 in smem
                                          ==>        extern shared smem_1: f32[] part 1/2 in smem
    smem[(i32)(tx + 3u) * 2 + 1] = ...               smem_1[(i32)(tx + 3u)] = ...

``Buffer.part`` places part ``p`` at element ``p * ceil(N / q)`` of the ``N`` the launch gives,
with ``ceil((N - p) / q)`` elements: exactly the ``i`` with ``i * q + p < N``, so a bounds check
of a part is the check of the original access. The parts are disjoint (``polypy.poly.alias``);
the backends allocate ``q * ceil(N / q)`` elements. Not done with two or more extern arrays
(they share their first bytes, so splitting one would separate it from the others) or where any
access has another form. ``report`` receives one ``LoweringDecision`` per array split.
"""
from __future__ import annotations

import dataclasses

from polypy.ir import nodes as n
from polypy.ir.visitor import Mutator, walk_block

from gpu2cpu.names import NameSupply
from gpu2cpu.report import LoweringDecision


def split_dynamic_shared(kernel: n.Kernel, *, report: list[LoweringDecision] | None = None) -> n.Kernel:
    """Split the kernel's interleaved extern shared array by residue; see the module docstring."""
    dynamic = [b for b in kernel.buffers if b.space == "shared" and b.shape is None]
    if len(dynamic) != 1 or dynamic[0].part is not None:
        return kernel
    buf = dynamic[0]
    forms = [_residue(node.index) for node in walk_block(kernel.body)
             if isinstance(node, (n.Load, n.Store, n.AtomicRMW)) and node.buffer == buf.name]
    if not forms or any(f is None for f in forms):
        return kernel
    strides = {q for _, q, _ in forms}  # type: ignore[misc]
    residues = {c for _, _, c in forms}  # type: ignore[misc]
    if len(strides) != 1 or len(residues) < 2:
        return kernel
    (q,) = strides
    supply = NameSupply(kernel)
    names = [buf.name] + [supply.fresh(f"{buf.name}_{c}") for c in range(1, q)]
    parts = tuple(dataclasses.replace(buf, name=names[c], part=(c, q), symbol=buf.name) for c in range(q))
    body = _Split(buf.name, names).visit_block(kernel.body)
    buffers = []
    for b in kernel.buffers:
        buffers.extend(parts if b is buf else (b,))
    if report is not None:
        report.append(LoweringDecision(kernel.name, buf.loc,
                                       f"extern shared '{buf.name}' is addressed as i * {q} + c: split into "
                                       f"{q} arrays, one per c ({', '.join(names)}), so thread loops access "
                                       f"them with unit stride"))
    return dataclasses.replace(kernel, body=body, buffers=tuple(buffers))


def _residue(index: tuple[n.Expr, ...]) -> tuple[n.Expr, int, int] | None:
    """``(e, q, c)`` where the (one-dimensional) index is ``e * q + c`` with literals ``q >= 2``
    and ``0 <= c < q`` (``c`` absent: 0); else None."""
    if len(index) != 1:
        return None
    e = index[0]
    c = 0
    if isinstance(e, n.Binary) and e.op == "add":
        for lhs, rhs in ((e.a, e.b), (e.b, e.a)):
            if isinstance(rhs, n.Const) and isinstance(lhs, n.Binary) and lhs.op == "mul":
                e, c = lhs, int(rhs.value)
                break
        else:
            return None
    if not (isinstance(e, n.Binary) and e.op == "mul"):
        return None
    for lhs, rhs in ((e.a, e.b), (e.b, e.a)):
        if isinstance(rhs, n.Const) and rhs.type.is_int and int(rhs.value) >= 2 and 0 <= c < int(rhs.value):
            return lhs, int(rhs.value), c
    return None


class _Split(Mutator):
    def __init__(self, buffer: str, names: list[str]):
        self.buffer = buffer
        self.names = names

    def _rewrite(self, node):
        node = self.generic_visit(node)
        if node.buffer != self.buffer:
            return node
        got = _residue(node.index)
        assert got is not None  # every access was checked before
        e, _, c = got
        return dataclasses.replace(node, buffer=self.names[c], index=(e,))

    visit_Load = _rewrite
    visit_Store = _rewrite
    visit_AtomicRMW = _rewrite
