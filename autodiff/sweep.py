"""The single-sweep gather: every tap of a read-only input in one launch (issue 38, item 1).

``autodiff.gather`` builds one **tap** kernel per index ``A[r_k(p)]`` at which the thread ``p``
reads a read-only input: ``d_A[r_k(p)] += partial_k(p) * d_B[p]`` under the forward's guard
``D_k(p)``, each proved injective by isl. Run one after the other they cost one pass over the
grid per tap. Here the taps become one pass in which the thread ``p`` owns the element
``q = r_0(p)`` of ``d_A`` (``r_0``: the first tap) and adds what every tap gives it:

* for each tap ``k`` a constant shift ``s_k`` of the global thread index with
  ``r_k(p + s_k) = r_0(p)`` (the preimage of ``q`` under ``r_k``): read from the index
  expressions as polynomials over the global indices and the uniform values, the smallest
  shift in a small box that makes the two equal, so that the whole inverse is a translation;
* the **sweep** kernel: for each tap ``k``, the tap's own code run at the thread ``p + s_k``
  (the global index ``blockIdx.d * blockDim.d + threadIdx.d`` replaced by itself plus
  ``s_k,d``; a tap that names ``threadIdx`` or ``blockIdx`` anywhere else is not shifted), under
  ``p + s_k`` being a thread of the launch. Its guard ``D_k(p + s_k)`` is the tap's own, so
  every thread runs one straight sequence of guarded adds to one element: no atomics, and isl
  checks on the sweep itself that each element of ``d_A`` is added to by one thread;
* the **halo** of each shifted tap: the instances ``p'`` of tap ``k`` whose owner
  ``p' - s_k`` is not a thread of the launch (elements of ``d_A`` outside ``r_0``'s image),
  run as tap ``k`` restricted to those threads (a subset of an injective tap: plain ``+=``).
  The guard is a comparison of one global index with the launch's extent, so the thread
  loops of the halo launches are cut to the boundary rows by the CPU schedule.

The sweep and the halos together run every instance of every tap exactly once (an instance
``p'`` of tap ``k`` runs in the sweep at ``p' - s_k`` when that is a thread of the launch, in
the halo otherwise), whatever the shifts: they only decide which thread does it, and isl's
answer on the sweep decides whether that is race-free.
"""
from __future__ import annotations

import dataclasses
import itertools

from polypy.ir import nodes as n
from polypy.ir.queries import conjuncts, declared_names
from polypy.ir.rewrite import rename_locals
from polypy.ir.types import U32
from polypy.ir.visitor import Mutator, walk

def update_of(s: n.Stmt, shadow: str) -> n.Expr | None:
    """The added value of ``shadow[i] = shadow[i] + v`` (either order) or ``shadow[i] - v``
    (``-v``), else None."""
    if not (isinstance(s, n.Store) and s.buffer == shadow and isinstance(s.value, n.Binary)
            and s.value.op in ("add", "sub")):
        return None
    a, c = s.value.a, s.value.b
    pairs = ((a, c), (c, a)) if s.value.op == "add" else ((a, c),)
    for own, other in pairs:
        if isinstance(own, n.Load) and own.buffer == shadow and own.index == s.index and not any(
                isinstance(x, n.Load) and x.buffer == shadow for x in walk(other)):
            return other if s.value.op == "add" else n.Unary("neg", other)
    return None


SHIFT_BOX = 3  # shifts searched per dimension: -3..3 (a stencil's radius)

Poly = dict  # monomial (sorted tuple of atom keys) -> integer coefficient


def global_dim(e: n.Expr) -> int | None:
    """``d`` if ``e`` is ``blockIdx.d * blockDim.d + threadIdx.d`` (operands in either order)."""
    if not (isinstance(e, n.Binary) and e.op == "add"):
        return None
    for prod, tid in ((e.a, e.b), (e.b, e.a)):
        if isinstance(tid, n.ThreadIdx) and isinstance(prod, n.Binary) and prod.op == "mul":
            a, b = prod.a, prod.b
            if {type(a), type(b)} == {n.BlockIdx, n.BlockDim} and a.dim == b.dim == tid.dim:
                return tid.dim
    return None


def only_global_indices(node) -> bool:
    """Whether every ``threadIdx``/``blockIdx`` in ``node`` is part of a global index."""
    inside = 0
    total = 0
    for x in walk(node):
        if isinstance(x, (n.ThreadIdx, n.BlockIdx)):
            total += 1
        elif isinstance(x, n.Expr) and global_dim(x) is not None:
            inside += 2
    return total == inside


def _poly(e: n.Expr) -> Poly | None:
    """``e`` as a polynomial with integer coefficients over atoms: the global indices
    (``("g", d)``), the other launch registers and scalar variables; None past that (loads,
    divisions, ...). Integer casts are looked through: only used to find shifts, which
    isl then checks."""
    d = global_dim(e)
    if d is not None:
        return {(("g", d),): 1}
    if isinstance(e, n.Const):
        return {(): int(e.value)} if isinstance(e.value, int) and not isinstance(e.value, bool) else None
    if isinstance(e, n.Var):
        return {(("v", e.name),): 1}
    if isinstance(e, (n.BlockDim, n.GridDim)):
        return {((type(e).__name__, e.dim),): 1}
    if isinstance(e, n.Cast) and _exact_cast(e):
        return _poly(e.x)
    if isinstance(e, n.Unary) and e.op == "neg":
        x = _poly(e.x)
        return None if x is None else {m: -c for m, c in x.items()}
    if isinstance(e, n.Binary) and e.op in ("add", "sub", "mul"):
        a, b = _poly(e.a), _poly(e.b)
        if a is None or b is None:
            return None
        if e.op == "mul":
            out: Poly = {}
            for (ma, ca), (mb, cb) in itertools.product(a.items(), b.items()):
                m = tuple(sorted(ma + mb))
                out[m] = out.get(m, 0) + ca * cb
            return {m: c for m, c in out.items() if c}
        sign = 1 if e.op == "add" else -1
        out = dict(a)
        for m, c in b.items():
            out[m] = out.get(m, 0) + sign * c
        return {m: c for m, c in out.items() if c}
    return None


def _exact_cast(e: n.Cast) -> bool:
    """A cast that keeps every value of its operand as the model takes it: a signed widening, or
    a global index (below 2**31, the launch assumptions) to a signed type of 32 bits or more."""
    to, x = e.to, e.x.type
    if to.is_float or x.is_float or not to.is_signed:
        return False
    if x.is_signed:
        return to.bits >= x.bits
    return global_dim(e.x) is not None and to.bits >= 32


def _shifted(p: Poly, shift: dict[int, int]) -> Poly | None:
    """``p`` with each global index ``g_d`` replaced by ``g_d + shift[d]`` (None if ``p`` is not
    linear in the global indices)."""
    out: Poly = {}
    for m, c in p.items():
        gs = [a for a in m if a[0] == "g"]
        if len(gs) > 1:
            return None
        out[m] = out.get(m, 0) + c
        if gs and shift.get(gs[0][1], 0):
            rest = tuple(a for a in m if a != gs[0])
            out[rest] = out.get(rest, 0) + c * shift[gs[0][1]]
    return {m: c for m, c in out.items() if c}


def find_shift(reference: tuple[n.Expr, ...], index: tuple[n.Expr, ...], dims: tuple[int, ...]) -> dict[int, int] | None:
    """The smallest shift ``s`` (sum of magnitudes, then first found) in ``[-SHIFT_BOX,
    SHIFT_BOX]`` per dimension with ``index(p + s) = reference(p)``, None if there is none."""
    if len(reference) != len(index):
        return None
    ref = [_poly(e) for e in reference]
    got = [_poly(e) for e in index]
    if any(x is None for x in ref + got):
        return None
    box = range(-SHIFT_BOX, SHIFT_BOX + 1)
    for s in sorted(itertools.product(box, repeat=len(dims)), key=lambda v: sum(map(abs, v))):
        shift = dict(zip(dims, s))
        if all(_shifted(g, shift) == r for g, r in zip(got, ref)):
            return shift
    return None


class _Shift(Mutator):
    """Each global index of a dimension in ``shift`` replaced by itself plus the shift (u32)."""

    def __init__(self, shift: dict[int, int]):
        self.shift = shift

    def visit_Cast(self, e: n.Cast) -> n.Expr:
        # (i32)(global index) + s: signed, where the model needs no wrap-around
        d = global_dim(e.x)
        if d is None or not _exact_cast(e) or not self.shift.get(d, 0):
            return self.generic_visit(e)
        s = self.shift[d]
        return n.Binary("add" if s > 0 else "sub", e, n.Const(abs(s), e.to), loc=e.loc)

    def visit_Binary(self, e: n.Binary) -> n.Expr:
        d = global_dim(e)
        if d is None:
            return self.generic_visit(e)
        s = self.shift.get(d, 0)
        if s == 0:
            return e
        return n.Binary("add" if s > 0 else "sub", e, n.Const(abs(s), U32), loc=e.loc)


def _extent(d: int) -> n.Expr:
    return n.Binary("mul", n.GridDim(d), n.BlockDim(d))


def _index(d: int) -> n.Expr:
    return n.Binary("add", n.Binary("mul", n.BlockIdx(d), n.BlockDim(d)), n.ThreadIdx(d))


def _all(conds: list[n.Expr]) -> n.Expr | None:
    out = None
    for c in conds:
        out = c if out is None else n.Binary("land", out, c)
    return out


def _any(conds: list[n.Expr]) -> n.Expr | None:
    out = None
    for c in conds:
        out = c if out is None else n.Binary("lor", out, c)
    return out


def in_launch(shift: dict[int, int]) -> n.Expr | None:
    """The thread ``p + shift`` is a thread of the launch (None: always)."""
    conds = []
    for d, s in sorted(shift.items()):
        if s > 0:
            conds.append(n.Binary("lt", n.Binary("add", _index(d), n.Const(s, U32)), _extent(d)))
        elif s < 0:
            conds.append(n.Binary("ge", _index(d), n.Const(-s, U32)))
    return _all(conds)


def owner_outside(shift: dict[int, int]) -> n.Expr | None:
    """The thread ``p - shift`` is not a thread of the launch (None: never)."""
    conds = []
    for d, s in sorted(shift.items()):
        if s > 0:
            conds.append(n.Binary("lt", _index(d), n.Const(s, U32)))
        elif s < 0:
            conds.append(n.Binary("ge", n.Binary("add", _index(d), n.Const(-s, U32)), _extent(d)))
    return _any(conds)


@dataclasses.dataclass(frozen=True)
class Sweep:
    """The sweep kernel and the halo kernels (run after it, one after the other), the shifts,
    and ``probe``: a kernel with one store, at the owner's element, run by exactly the threads
    that add to the shadow in the sweep (isl's privacy question about the sweep, asked with two
    accesses instead of two per tap), or None where the taps' guards are not all plain ``if``s."""
    sweep: n.Kernel
    halos: tuple[n.Kernel, ...]
    shifts: tuple[dict[int, int], ...]
    probe: n.Kernel | None = None
    unskipped: int = 0  # halos without a grid-uniform test that skips them: full passes over the grid

    def passes(self) -> int:
        """Passes over the grid the sweep costs where the launch covers the data: itself and
        each halo that no test skips (the cost model of the choice between the sweep and the
        tap launches, one pass each)."""
        return 1 + self.unskipped

    def describe(self) -> str:
        names = "xyz"
        shown = ", ".join("(" + ", ".join(f"{names[d]}{s:+d}" for d, s in sorted(sh.items()) if s) + ")"
                          for sh in self.shifts if any(sh.values()))
        skipped = len(self.halos) - self.unskipped
        return (f"single sweep ({self.passes()} pass{'es' if self.passes() > 1 else ''} over the grid "
                f"where the launch covers the data, against {len(self.shifts)} tap launches): one launch in which the thread that owns an element of the shadow adds the "
                f"contributions of all {len(self.shifts)} loads (the other loads' read relations are one load's "
                f"shifted by {shown} threads; isl proves each element added to by one thread), and "
                f"{len(self.halos)} launch{'es' if len(self.halos) != 1 else ''} for the elements whose owner is "
                f"outside the launch ({skipped} of them skipped by one test where isl shows the launch covers "
                f"those elements); no atomics")


def translation_classes(taps: list[n.Kernel], shadow: str) -> tuple[list[list[int]] | None, str]:
    """The taps (each ``K_grad`` sliced to the updates of ``shadow`` at one index) grouped into
    classes whose indices are one another's translations by a few threads (3DConvolution's
    planes ``i - 1``, ``i``, ``i + 1`` of an argument ``i``: three classes of nine), in order of
    their first tap; or None and why no tap can be shifted."""
    indices = []
    for t in taps:
        if any(b.space == "local" for b in t.buffers if any(
                isinstance(x, (n.Load, n.Store)) and x.buffer == b.name for x in walk(t))):
            return None, "a tap uses an array local to a thread"
        if not only_global_indices(t):
            return None, "a tap names threadIdx or blockIdx outside a global index blockIdx * blockDim + threadIdx"
        stores = [x for x in walk(t) if isinstance(x, n.Store) and x.buffer == shadow]
        if not stores or any(s.index != stores[0].index for s in stores):
            return None, "a tap updates the shadow at more than one index"
        indices.append(stores[0].index)
    dims = tuple(sorted({d for t in taps for x in walk(t) if isinstance(x, n.Expr)
                         for d in [global_dim(x)] if d is not None}))
    classes: list[list[int]] = []
    for i, index in enumerate(indices):
        for c in classes:
            if find_shift(indices[c[0]], index, dims) is not None:
                c.append(i)
                break
        else:
            classes.append([i])
    return classes, ""


def build_sweep(taps: list[n.Kernel], shadow: str, name: str) -> tuple[Sweep | None, str]:
    """The sweep of ``taps`` (each ``K_grad`` sliced to the updates of ``shadow`` at one index,
    unconditioned), or None and why not."""
    indices = []
    for t in taps:
        if any(b.space == "local" for b in t.buffers if any(
                isinstance(x, (n.Load, n.Store)) and x.buffer == b.name for x in walk(t))):
            return None, "a tap uses an array local to a thread"
        if not only_global_indices(t):
            return None, "a tap names threadIdx or blockIdx outside a global index blockIdx * blockDim + threadIdx"
        stores = [x for x in walk(t) if isinstance(x, n.Store) and x.buffer == shadow]
        if not stores or any(s.index != stores[0].index for s in stores):
            return None, "a tap updates the shadow at more than one index"
        indices.append(stores[0].index)
    dims = tuple(sorted({d for t in taps for x in walk(t) if isinstance(x, n.Expr)
                         for d in [global_dim(x)] if d is not None}))
    shifts = []
    for index in indices:
        s = find_shift(indices[0], index, dims)
        if s is None:
            return None, ("the read relations of its loads are not one another's translations by a few threads "
                          "(no single-sweep inverse)")
        shifts.append(s)
    # the owner: the tap whose shifts to the others are smallest (the centre of the stencil), so
    # that few instances fall outside the launch
    ref = min(range(len(shifts)), key=lambda r: sum(abs(s[d] - shifts[r][d]) for s in shifts for d in dims))
    shifts = [{d: s[d] - shifts[ref][d] for d in dims} for s in shifts]
    body: list[n.Stmt] = []
    inner: list[n.Stmt] = []  # the interior: every tap runs, no guard
    interior: list[n.Expr] | None = []
    taken = {p.name for p in taps[0].params}
    halos = []
    unskipped = 0
    for i, (t, s) in enumerate(zip(taps, shifts)):
        part = _Shift(s).visit_block(rename_locals(t.body, _fresh(t, f"_s{i}", taken)))
        cond = in_launch(s)
        body.extend(part if cond is None else (n.If(cond, part, loc=t.loc),))
        guards = _guards(t.body, shadow, declared_names(t))
        if guards is None or interior is None:
            interior = None
        else:
            interior += [x for g in ([cond] if cond is not None else []) + [_Shift(s).visit(g) for g in guards]
                         for x in conjuncts(g)]
            inner.extend(_Shift(s).visit_block(rename_locals(_unguarded(t.body, shadow), _fresh(t, f"_i{i}", taken))))
        out = owner_outside(s)
        if out is not None:
            halo = dataclasses.replace(t, body=(n.If(out, t.body, loc=t.loc),), name=f"{name}_halo{len(halos)}")
            never, when = _never_runs(halo, shadow)
            if not never:
                # where isl finds when the halo is empty (the launch covers the elements: most
                # launches), one grid-uniform test skips it
                unskipped += when is None
                halos.append(halo if when is None else dataclasses.replace(
                    halo, body=(n.If(n.Unary("not", when), halo.body, loc=t.loc),)))
    summed = _summed(tuple(inner), shadow, indices[ref], taken) if interior else None
    if summed is not None:
        # one test per thread: inside the stencil's interior (every shifted tap's guard holds)
        # the adds run unguarded, into one register, in the taps' order; the CPU schedule
        # splits the thread loop at the test's bounds
        body = [n.If(_all(list(dict.fromkeys(interior))), summed, tuple(body), loc=taps[0].loc)]
    sweep = dataclasses.replace(taps[0], body=tuple(body), name=f"{name}_sweep")
    return Sweep(sweep, tuple(halos), tuple(shifts), _probe(taps, shifts, indices[ref], shadow, name),
                 unskipped), ""


class _Accumulate(Mutator):
    """Each update ``shadow[..] = shadow[..] + v`` (all at the owner's element) as ``acc = acc + v``."""

    def __init__(self, shadow: str, acc: n.Var):
        self.shadow, self.acc, self.ok = shadow, acc, True

    def visit_Store(self, s: n.Store):
        if s.buffer != self.shadow:
            return s
        v = update_of(s, self.shadow)
        if v is None:
            self.ok = False
            return s
        return n.Assign(self.acc.name, n.Binary("add", self.acc, v), loc=s.loc)

    def visit_Load(self, e: n.Load):
        if e.buffer == self.shadow:
            self.ok = False
        return e


def _summed(inner: tuple[n.Stmt, ...], shadow: str, index: tuple[n.Expr, ...], taken: set[str]
            ) -> tuple[n.Stmt, ...] | None:
    """``acc = shadow[q]; <inner with each update acc = acc + v>; shadow[q] = acc`` for the owner's
    element ``q`` (the same sums in the same order as the updates themselves), None if an update
    is not of that form."""
    stores = [x for st in inner for x in walk(st) if isinstance(x, n.Store) and x.buffer == shadow]
    if not stores:
        return None
    elem = stores[0].value.type
    name, j = "gather_acc", 1
    while name in taken:
        name, j = f"gather_acc{j}", j + 1
    taken.add(name)
    acc = n.Var(name, elem)
    m = _Accumulate(shadow, acc)
    body = m.visit_block(inner)
    if not m.ok:
        return None
    return ((n.Decl(name, elem, n.Load(shadow, index, elem)),) + tuple(body)
            + (n.Store(shadow, index, acc),))


def _fresh(t: n.Kernel, suffix: str, taken: set[str]) -> dict[str, str]:
    """New names for the locals of ``t`` (``taken`` updated)."""
    mapping = {}
    for local in sorted(declared_names(t)):
        new, j = f"{local}{suffix}", 1
        while new in taken:
            new, j = f"{local}{suffix}_{j}", j + 1
        mapping[local] = new
        taken.add(new)
    return mapping


def _unguarded(block: tuple[n.Stmt, ...], shadow: str) -> tuple[n.Stmt, ...]:
    """``block`` with each ``if`` around the update of ``shadow`` replaced by the branch that
    holds it (where ``_guards``'s conditions are known to hold)."""
    out: list[n.Stmt] = []
    for st in block:
        if isinstance(st, n.If) and any(isinstance(x, n.Store) and x.buffer == shadow for x in walk(st)):
            side = st.then if any(isinstance(x, n.Store) and x.buffer == shadow
                                  for y in st.then for x in walk(y)) else st.orelse
            out.extend(_unguarded(side, shadow))
        else:
            out.append(st)
    return tuple(out)


def _guards(block: tuple[n.Stmt, ...], shadow: str, declared: set[str]) -> list[n.Expr] | None:
    """The conditions of the ``if``s around the one update of ``shadow`` in ``block`` (None if it
    is in a loop, or a condition names a local of the tap)."""
    for st in block:
        if isinstance(st, n.Store) and st.buffer == shadow:
            return []
        if isinstance(st, n.If) and any(isinstance(x, n.Store) and x.buffer == shadow for x in walk(st)):
            if any(isinstance(x, n.Var) and x.name in declared for x in walk(st.cond)):
                return None
            for side, cond in ((st.then, st.cond), (st.orelse, n.Unary("not", st.cond))):
                inner = _guards(side, shadow, declared)
                if inner is not None:
                    return [cond] + inner
            return None
        if any(isinstance(x, n.Store) and x.buffer == shadow for x in walk(st)):
            return None
    return None


def _probe(taps: list[n.Kernel], shifts: list[dict[int, int]], index: tuple[n.Expr, ...], shadow: str,
           name: str) -> n.Kernel | None:
    """``if (any tap k's guard holds at p + s_k) shadow[r(p)] = 0``, ``r`` the owner's index: each
    shifted tap adds at ``r_k(p + s_k)``, which is ``r(p)`` (``find_shift``, exact casts only), so
    this store touches an element from a thread wherever the sweep does (and more)."""
    runs = []
    elem = None
    for t, s in zip(taps, shifts):
        stores = [x for x in walk(t) if isinstance(x, n.Store) and x.buffer == shadow]
        if len(stores) != 1:
            return None
        elem = stores[0].value.type
        guards = _guards(t.body, shadow, declared_names(t))
        if guards is None:
            return None
        # without "p + s_k is a thread of the launch": more writers, the same question (and
        # the launch's products gridDim * blockDim keep isl from finding a condition)
        runs.append(_all([_Shift(s).visit(g) for g in guards]) or n.Const(True, n.BOOL))
    store = n.Store(shadow, index, n.Const(0.0, elem))
    return dataclasses.replace(taps[0], body=(n.If(_any(runs), (store,)),), name=f"{name}_probe")


def _never_runs(halo: n.Kernel, shadow: str) -> tuple[bool, n.Expr | None]:
    """(isl proves that no thread of any launch updates ``shadow`` in ``halo``: the halo of a
    shift into the guard, ``i > 0`` and ``i < 1``; else a grid-uniform condition under which
    none does, or None): ``polypy.poly.emptiness``."""
    from polypy.poly.emptiness import writes_never_run

    return writes_never_run(halo, shadow)
