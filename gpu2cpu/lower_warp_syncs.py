"""lower_warp_syncs: ``__syncwarp(mask)`` as block barriers between guarded phases.

Requires: GPU form, returns eliminated. Guarantees: no ``WarpSync`` is left; each became a
barrier every thread of the block reaches, the statements around it split into phases guarded
by flags computed once (``lockstep_warps``' machinery)::

    if (t < 32) {                      lane_on = t < 32
      v = s[t]                         if (lane_on) v = s[t]
      for (k = 16; k > 0; k >>= 1) {   for (k = 16; k > 0; k >>= 1) {    (every thread)
        v += s[t + k]                    if (lane_on) v += s[t + k]
        __syncwarp()          ==>        barrier
        s[t] = v                         if (lane_on) s[t] = v
        __syncwarp()                     barrier
      }                                  barrier
    }                                  }

A ``__syncwarp`` every thread of the block reaches (block-uniform control,
``polypy.analysis.uniformity``) simply becomes the block barrier. Those under thread-dependent
control (a cooperative group tile's ``sync()`` inside ``if (t < 16)``, which the frontend emits as
``__syncwarp`` of the tile's lanes) are lowered as sketched above.

A barrier of the whole block orders more than ``__syncwarp`` does (other warps wait too), which
is one legal schedule: warps are not ordered by CUDA at all. The lanes of the mask run every
phase before any runs the next, which is what ``__syncwarp`` promises them. It is exact when the
threads that reach each ``__syncwarp`` are the threads of whole warps, or the lanes left out
reach none: so every ``__syncwarp`` of the kernel must sit under the same conditions (the same
``if`` branches), and a loop around one must be controlled by values every thread computes
alike (it then runs for every thread, its body guarded). Anything else (``__syncwarp`` in both
branches of an ``if``, or under a loop whose trips differ between threads, or left by
``break``/``continue``) is refused at the ``__syncwarp``.
"""
from __future__ import annotations

from polypy.analysis.uniformity import divergent_warp_syncs
from polypy.errors import UserError
from polypy.ir import nodes as n
from polypy.ir.visitor import Mutator, has_kind, rebuild

from gpu2cpu.lockstep_warps import _Lowering, _Unsupported


def lower_warp_syncs(kernel: n.Kernel) -> n.Kernel:
    kernel = _uniform_syncs_to_barriers(kernel)
    found: list[tuple[n.WarpSync, tuple[tuple[int, str], ...]]] = []
    _collect(kernel.body, (), found)
    if not found:
        return kernel
    first, path = found[0]
    for sync, other in found[1:]:
        if other != path:
            raise UserError("__syncwarp under other conditions than the kernel's first __syncwarp "
                            f"(line {first.loc.line if first.loc else '?'}): polypy runs __syncwarp exactly only when "
                            "all of them are under the same if branches", sync.loc)
    lowering = _Lowering(kernel, frozenset(), syncs=True)
    try:
        body = lowering.region(kernel.body)
    except _Unsupported:
        raise UserError("__syncwarp in control flow polypy cannot run with block barriers: a loop around it "
                        "whose trips differ between threads, or a break/continue/return leaving the code around "
                        "it", first.loc) from None
    return rebuild(kernel, body=body)


class _ToBarriers(Mutator):
    def __init__(self, keep: set[int]):
        self.keep = keep

    def visit_WarpSync(self, s: n.WarpSync) -> n.Stmt:
        return s if id(s) in self.keep else n.Barrier(loc=s.loc)


def _uniform_syncs_to_barriers(kernel: n.Kernel) -> n.Kernel:
    """Every ``WarpSync`` in block-uniform control as the block barrier: all threads reach it,
    and waiting for the whole block is one schedule CUDA allows for the lanes of the mask."""
    if not has_kind(kernel.body, n.WarpSync):
        return kernel
    keep = {id(s) for s in divergent_warp_syncs(kernel)}
    return rebuild(kernel, body=_ToBarriers(keep).visit_block(kernel.body))


def _collect(stmts: tuple[n.Stmt, ...], path: tuple[tuple[int, str], ...],
             found: list[tuple[n.WarpSync, tuple[tuple[int, str], ...]]]) -> None:
    """Every ``WarpSync`` with the ``if`` branches around it (the ``if``'s identity, the branch).
    A recursion, not a Visitor: the path of branches is its argument, built on the way down."""
    for s in stmts:
        if isinstance(s, n.WarpSync):
            found.append((s, path))
        elif isinstance(s, n.If):
            _collect(s.then, path + ((id(s), "then"),), found)
            _collect(s.orelse, path + ((id(s), "else"),), found)
        elif isinstance(s, (n.For, n.While)):
            _collect(s.body, path, found)
            if isinstance(s, n.While):
                _collect(s.update, path, found)
