"""Block windows: a block's adjoint contributions to a read-only input, summed in shared memory first.

When threads of a grid read overlapping elements of a read-only buffer ``X`` (stencil halos,
convolution windows, a filter every thread reads), every contribution to ``d_X`` would be a
global atomic: a compare-and-swap loop on a CPU, contended when many threads hit a few
elements. ``polypy.poly.block_window`` proves that the elements block ``b`` reads lie in a box
of statically bounded size at a block-dependent position (the *window*). Then::

    kernel K_grad(...) {
      win_X[z] = 0 for the window's slots; barrier
      ...
      atomic.add win_X[slot(i)], ct          (was: atomic.add d_X[i], ct)
      ...
      barrier
      for z = tid to slots step nthreads:    (every thread of the block, after the reverse sweep)
        v = win_X[z]
        if (v != 0):
          i = element(z)
          if (no other block's window holds i)   d_X[i] += v        (plain)
          else                                    atomic.add d_X[i], v
    }

The adds into ``win_X`` are shared-memory atomics: cheap on a GPU, plain read-modify-writes on
a CPU (one CPU thread runs a block). Per block, a 7-tap stencil's filter then costs 7 global
atomics instead of 7 per thread, and an image's halo costs atomics only on the border of the
block's window; the interior, proved by isl to belong to no other block, is flushed with plain
adds.

Exactness. ``d_X[i]`` ends with its initial value plus the same contributions as with an
atomic per contribution: each contribution is added exactly once, to the slot of ``i`` in the
window of the block that made it (``slot`` is injective on the window: ``i`` is the flattened
``(outer, inner)`` of a proved delinearization, or the affine index itself), and every nonzero
slot is added once to ``d_X`` by its block. What changes is only the association of the
floating-point sum: a block's contributions to ``i`` are summed first (in the order the block's
threads run, like any shared-memory atomics), then added as one term. Atomic adds already
leave the order of the terms unspecified, so no result the kernel could produce before is
excluded by the contract, and the results stay within the same rounding error bound (the
finite-difference and dot-product tests check this on every sample). On a CPU the per-block
sums are deterministic and the interior elements of a window, flushed with plain adds by one
block, no longer depend on scheduling at all. Slots holding zero are skipped, which changes
nothing (``x + 0.0 == x`` except that ``-0.0 + 0.0`` is ``+0.0``), and which also means no
element outside what the block read is ever touched: a slot outside the block's footprint is
never written, so it stays zero. The plain adds race with nothing: isl proved that no other
block's window (which contains everything that block reads) holds the element, and within the
block the flush runs after a barrier that follows every contribution; the emulator's race
detector checks this on every gradient test.

When the window's size depends on ``blockDim`` beyond the static allocation
(``WINDOW_LIMIT`` slots), a block-uniform test at run time chooses between the window and the
original atomics, so every launch stays correct.
"""
from __future__ import annotations

import dataclasses

from autodiff import build as b
from autodiff.names import Names
from autodiff.shadows import block_threads, linear_tid
from polypy.ir import nodes as n
from polypy.ir.types import BOOL, I32, I64, ScalarType
from polypy.poly.windows import WINDOW_LIMIT, Chunk, Window


# Static shared memory a gradient kernel may use with its windows: CUDA's 48 KiB limit for static
# ``__shared__`` arrays, less a reserve for the block-reduction buffers and tapes added later.
SHARED_BUDGET = 48 * 1024
SHARED_RESERVE = 4 * 1024


def static_shared_bytes(buffers) -> int:
    """Bytes of the fixed-size ``shared`` buffers among ``buffers`` (dynamic ones are sized at launch)."""
    total = 0
    for buf in buffers:
        if buf.space != "shared" or buf.shape is None:
            continue
        count = 1
        for d in buf.shape:
            if not isinstance(d, n.Const):
                break
            count *= int(d.value)
        else:
            total += count * buf.elem.itemsize
    return total


def window_bytes(window: Window, elem: ScalarType) -> int:
    return min(window.max_slots, WINDOW_LIMIT) * elem.itemsize


@dataclasses.dataclass
class Privatized:
    """One shadow accumulated through a block window."""

    window: Window
    shadow: str  # the global shadow d_X
    elem: ScalarType
    buffer: str  # the shared window array
    base: list[str]  # per dimension: the coordinate of slot 0 (i64)
    extent: list[str]  # per dimension: slots (i64)
    slots: str  # total slots (i32)
    fits: str | None  # when the allocation may be too small: the run-time test (bool)
    chunk: Chunk | None = None  # a window per chunk of this serial loop (``autodiff.chunks``)


class Windows:
    """The block windows of one gradient kernel: declarations, accumulation, zeroing, flush."""

    def __init__(self, names: Names):
        self.names = names
        self.items: dict[str, Privatized] = {}

    def add(self, primal: str, window: Window, shadow: str, elem: ScalarType, chunk: Chunk | None = None
            ) -> Privatized:
        got = self.items.get(primal)
        if got is not None:
            return got
        fresh = self.names.fresh
        static = window.max_slots <= WINDOW_LIMIT
        got = Privatized(window, shadow, elem, fresh(f"win_{primal}"),
                         [fresh(f"{primal}_w_base") for _ in window.dims],
                         [fresh(f"{primal}_w_len") for _ in window.dims],
                         fresh(f"{primal}_w_slots"), None if static else fresh(f"{primal}_w_fits"), chunk)
        self.items[primal] = got
        return got

    def fits(self, window: Window, elem: ScalarType, others) -> bool:
        """Whether one more window keeps the kernel's static shared memory (``others``: its other
        buffers) within ``SHARED_BUDGET`` (with ``SHARED_RESERVE`` to spare)."""
        used = static_shared_bytes(others) + static_shared_bytes(self.buffers)
        return used + window_bytes(window, elem) <= SHARED_BUDGET - SHARED_RESERVE

    @property
    def buffers(self) -> list[n.Buffer]:
        out = []
        for p in self.items.values():
            size = min(p.window.max_slots, WINDOW_LIMIT)
            out.append(n.Buffer(p.buffer, p.elem, (b.const(size, I32),), "shared"))
        return out

    # ------------------------------------------------------------------ the kernel's top
    def _whole(self) -> list[Privatized]:
        return [p for p in self.items.values() if p.chunk is None]

    def chunked(self, loop) -> list[Privatized]:
        """The windows of the chunks of the serial loop at path ``loop``."""
        return [p for p in self.items.values() if p.chunk is not None and p.chunk.loop == loop]

    def declarations(self, items: list[Privatized] | None = None) -> list[n.Stmt]:
        out: list[n.Stmt] = []
        for p in self._whole() if items is None else items:
            total: n.Expr | None = None
            for dim, base, extent in zip(p.window.dims, p.base, p.extent):
                out.append(n.Decl(base, I64, dim.base))
                out.append(n.Decl(extent, I64, dim.extent))
                total = n.Var(extent, I64) if total is None else n.Binary("mul", total, n.Var(extent, I64))
            assert total is not None
            if p.fits is not None:
                out.append(n.Decl(p.fits, BOOL, b.cmp("le", total, b.const(WINDOW_LIMIT, I64))))
                total = b.select(n.Var(p.fits, BOOL), total, b.const(0, I64))
            out.append(n.Decl(p.slots, I32, b.cast(I32, total)))
        return out

    def zero(self, items: list[Privatized] | None = None) -> list[n.Stmt]:
        """Every thread of the block zeroes the windows together (a barrier must follow)."""
        out: list[n.Stmt] = []
        for p in self._whole() if items is None else items:
            z = self.names.fresh("z")
            store = n.Store(p.buffer, (n.Var(z, I32),), b.zero(p.elem))
            out.append(n.For(z, I32, b.cast(I32, linear_tid()), n.Var(p.slots, I32), b.cast(I32, block_threads()),
                             (store,)))
        return out

    # ------------------------------------------------------------------ the reverse sweep
    def accumulate(self, p: Privatized, coords: tuple[n.Expr, ...], index: tuple[n.Expr, ...], ct: n.Expr,
                   loc) -> list[n.Stmt]:
        """``d_X[index] += ct`` through the window (``coords``: the window coordinates of ``index``)."""
        slot: n.Expr | None = None
        for k, c in enumerate(coords):
            z = n.Binary("sub", b.cast(I64, c), n.Var(p.base[k], I64))
            slot = z if slot is None else n.Binary("add", n.Binary("mul", slot, n.Var(p.extent[k], I64)), z)
        assert slot is not None
        into_window = n.AtomicRMW("add", p.buffer, (b.cast(I32, slot),), ct, loc=loc)
        if p.fits is None:
            return [into_window]
        direct = n.AtomicRMW("add", p.shadow, index, ct, loc=loc)
        return [n.If(n.Var(p.fits, BOOL), (into_window,), (direct,), loc=loc)]

    # ------------------------------------------------------------------ the end of the kernel
    def flush(self, items: list[Privatized] | None = None) -> list[n.Stmt]:
        """After every contribution (a barrier first): each nonzero slot added to the shadow."""
        items = self._whole() if items is None else items
        if not items:
            return []
        return [n.Barrier()] + [self._flush_one(p) for p in items]

    def _flush_one(self, p: Privatized) -> n.Stmt:
        fresh = self.names.fresh
        w = p.window
        z, v = fresh("z"), fresh("v")
        zv = n.Var(z, I32)
        body: list[n.Stmt] = []
        # slot -> per-dimension offsets (row-major over the window's dimensions)
        offsets: list[n.Expr] = []
        rest: n.Expr = b.cast(I64, zv)
        for k in range(len(w.dims) - 1, -1, -1):
            name = fresh("zo")
            if k == 0:
                body.append(n.Decl(name, I64, rest))
                offsets.insert(0, n.Var(name, I64))
                break
            body.append(n.Decl(name, I64, n.Binary("rem", rest, n.Var(p.extent[k], I64))))
            offsets.insert(0, n.Var(name, I64))
            rest = n.Binary("div", rest, n.Var(p.extent[k], I64))
        coords = tuple(n.Binary("add", n.Var(base, I64), off) for base, off in zip(p.base, offsets))
        elem = fresh("i")
        body.append(n.Decl(elem, I64, w.element(coords)))
        target = (n.Var(elem, I64),)
        value = n.Var(v, p.elem)
        plain = n.Store(p.shadow, target, n.Binary("add", n.Load(p.shadow, target, p.elem), value))
        atomic = n.AtomicRMW("add", p.shadow, target, value)
        exclusive = self._exclusive(p, offsets)
        if exclusive is None:
            body.append(atomic)
        else:
            body.append(n.If(exclusive, (plain,), (atomic,)))
        loop_body = (n.Decl(v, p.elem, n.Load(p.buffer, (zv,), p.elem)),
                     n.If(b.cmp("ne", value, b.zero(p.elem)), tuple(body)))
        return n.For(z, I32, b.cast(I32, linear_tid()), n.Var(p.slots, I32), b.cast(I32, block_threads()), loop_body)

    @staticmethod
    def _exclusive(p: Privatized, offsets: list[n.Expr]) -> n.Expr | None:
        """Slot offsets that no other block's window holds (see ``polypy.poly.windows``)."""
        w = p.window
        if not w.exclusive:
            return None
        cond: n.Expr | None = None
        for e in w.grid_dims:
            along: n.Expr | None = None
            for k, dim in enumerate(w.dims):
                if dim.grid_dim != e or dim.step is None:
                    continue
                ext = n.Var(p.extent[k], I64)
                inside = b.land(b.cmp("ge", offsets[k], n.Binary("sub", ext, dim.step)),
                                b.cmp("lt", offsets[k], dim.step))
                along = inside if along is None else b.lor(along, inside)
            assert along is not None
            cond = along if cond is None else b.land(cond, along)
        return cond
