"""Adjoint accumulation: where the cotangent reaching a variable or a load is added.

* a variable ``v``: its adjoint register ``d_v`` (``take_adjoint`` consumes it at ``v``'s
  assignment);
* a load ``X[i]``: ``d_X[i] += ct`` -- plain where the buffer's elements are proved private to
  a thread (``polypy.poly.sharing``) or, for a shared array, where no other thread of the block
  touches the element between the same two barriers (``polypy.poly.intervals``: a tree
  reduction's reads; the reversed barriers order the other threads' updates), *versioned* where they are private under a run-time
  condition on the launch and the integer arguments (``c[i * NJ + j]`` with ``j < nj``:
  ``nj <= NJ``): a ``bool`` evaluated once at the top of the kernel picks the plain ``+=`` or
  the atomic for every contribution (the condition is grid-uniform, so all threads agree and
  the two kinds never mix on one element); through a block window in shared memory where isl finds one
  (``autodiff.windows``), summed per block where every thread of a block reads one element of a
  read-only buffer (``autodiff.reductions``), atomic otherwise.

The functions take the state of reverse mode (``autodiff.reverse_state.ReverseState``): adjoint
registers in ``st.adjoint``, per-block sums in ``st.deferred``, block windows in ``st.windows``,
each buffer's privacy and window decided once (``st.private``, ``st.windowed``).
"""
from __future__ import annotations

from autodiff import build as b
from autodiff.availability import avail
from autodiff.reductions import Reduction, block_reductions
from autodiff.report import Accumulation
from autodiff.reverse_state import ReverseState, loc_at, note
from autodiff.windows import Privatized
from polypy.ir import nodes as n
from polypy.ir.printer import format_expr
from polypy.ir.types import BOOL, I32, ScalarType
from polypy.ir.visitor import walk, walk_only
from polypy.poly.paths import StmtPath

Point = StmtPath


# ================================================================== adjoint accumulation
def adjoint_name(st: ReverseState, v: str, ty: ScalarType) -> str:
    """The adjoint register of variable ``v`` (named on first use)."""
    name = st.adjoint.get(v)
    if name is None:
        name = st.names.fresh("d_" + v)
        st.adjoint[v] = name
        st.adjoint_type[v] = ty
    return name


def accumulate_var(st: ReverseState, v: n.Var, ct: n.Expr) -> list[n.Stmt]:
    """``d_v += ct``."""
    name = adjoint_name(st, v.name, v.vtype)
    return [n.Assign(name, b.add(n.Var(name, v.vtype), ct))]


def take_adjoint(st: ReverseState, v: str, ty: ScalarType, loc) -> tuple[list[n.Stmt], n.Var]:
    """``ct = d_v; d_v = 0``: the adjoint of an assignment's result, consumed."""
    name = adjoint_name(st, v, ty)
    ct = st.names.fresh(v + "_ct")
    return [n.Decl(ct, ty, n.Var(name, ty), loc=loc), n.Assign(name, b.zero(ty), loc=loc)], n.Var(ct, ty)


def accumulate_load(st: ReverseState, e: n.Load, ct: n.Expr, p: Point) -> list[n.Stmt]:
    """``d_X[i] += ct`` for the load ``X[i]`` at ``p``, by the strategy chosen for it (reported)."""
    shadow = st.shadow[e.buffer]
    index = tuple(avail(st, i, p) for i in e.index)
    strategy, reason = _strategy(st, e, p)
    note(st, ("acc", e.buffer, e), Accumulation(e.buffer, format_expr(e), e.loc or loc_at(st, p),
                                                   strategy, reason))
    if strategy == "plain":
        return [n.Store(shadow, index, b.add(n.Load(shadow, index, e.etype), ct), loc=e.loc)]
    if strategy == "versioned":
        plain = n.Store(shadow, index, b.add(n.Load(shadow, index, e.etype), ct), loc=e.loc)
        privatized = _window(st, e.buffer)[0]
        if privatized is not None:  # the other version goes through the block window
            coords = tuple(avail(st, c, p) for c in privatized.window.coordinates(e.index))
            other = tuple(st.windows.accumulate(privatized, coords, index, ct, e.loc))
        else:
            other = (n.AtomicRMW("add", shadow, index, ct, loc=e.loc),)
        return [n.If(n.Var(_version_flag(st, e.buffer), BOOL), (plain,), other, loc=e.loc)]
    if strategy == "window":
        privatized = _window(st, e.buffer)[0]
        assert privatized is not None
        coords = tuple(avail(st, c, p) for c in privatized.window.coordinates(e.index))
        return st.windows.accumulate(privatized, coords, index, ct, e.loc)
    if strategy == "block-reduction":
        key = (e.buffer, index)
        reg = st.deferred.get(key)
        if reg is None:
            reg = st.names.fresh(f"d_{e.buffer}_sum")
            st.deferred[key] = reg
            st.adjoint_type[reg] = e.etype
        return [n.Assign(reg, b.add(n.Var(reg, e.etype), ct), loc=e.loc)]
    return [n.AtomicRMW("add", shadow, index, ct, loc=e.loc)]


def _strategy(st: ReverseState, e: n.Load, p: Point | None = None) -> tuple[str, str]:
    strategy, why = _base_strategy(st, e, p)
    if strategy == "block-reduction" and _load_key(e) in st.summed.get(e.buffer, ()):
        return strategy, why  # the privacy of the other loads counts on it: no block window
    if strategy in ("atomic", "block-reduction"):
        privatized, reason = _window(st, e.buffer)
        if strategy == "atomic" and _private_when(st, e.buffer) is not None:
            other = "through the block window" if privatized is not None else "atomic"
            return "versioned", f"{why}; tested once per launch: plain += when it holds, {other} otherwise"
        if privatized is not None:
            return "window", reason
        if strategy == "atomic" and reason:
            why = f"{why}; {reason}"
    return strategy, why


def _base_strategy(st: ReverseState, e: n.Load, p: Point | None = None) -> tuple[str, str]:
    space = st.kernel.space(e.buffer)
    if space == "local":
        return "plain", "local array: one per thread"
    private, why = _is_private(st, e.buffer)
    if _load_key(e) in st.summed.get(e.buffer, ()):  # left out of the privacy question: it must be summed
        return "block-reduction", "every thread of a block reads this one element of a read-only buffer"
    if private:
        return "plain", why
    if space == "shared" and p is not None and st.intervals is not None:
        # private between barriers: the reversed barriers order the updates of other threads
        alone, reason = st.intervals(st.kernel, p, e)
        if alone:
            return "plain", reason
    if (st.opt.block_reductions and space == "global" and e.buffer not in st.prog.written_buffers
            and _block_invariant(st, e.index)):
        return "block-reduction", "every thread of a block reads this one element of a read-only buffer"
    return "atomic", why


def _window(st: ReverseState, buffer: str) -> tuple[Privatized | None, str]:
    """The block window ``buffer``'s adjoints go through, if any (with the reason either way).

    Only for read-only global buffers with at least one access that would be atomic, and
    only where the window saves atomics: several contributions of a block to one element,
    or elements that no other block touches (flushed with plain adds).
    """
    got = st.windowed.get(buffer)
    if got is not None:
        return got
    got = (None, "")
    if (st.opt.windows and st.window_oracle is not None and st.kernel.space(buffer) == "global"
            and buffer not in st.prog.written_buffers and buffer in st.shadow):
        loads = [x for x in walk_only(st.kernel, n.Load) if x.buffer == buffer]
        if any(_base_strategy(st, x)[0] == "atomic" for x in loads):
            window = st.window_oracle(buffer)
            chunk = st.chunks.get(buffer)
            if isinstance(window, str) and chunk is not None:  # a window per chunk of a serial loop
                window = st.window_oracle(buffer, st.kernel, chunk)
            else:
                chunk = None
            if isinstance(window, str):
                got = (None, f"no block window: {window}")
            elif not (window.exclusive or window.repeats):  # type: ignore[attr-defined]
                got = (None, "no block window: each element is read once per block and may be read by "
                             "other blocks, so a window would save no atomic")
            elif not st.windows.fits(window, st.kernel.elem_type(buffer),  # type: ignore[arg-type]
                                       tuple(st.kernel.buffers) + tuple(st.shadow_buffers)):
                got = (None, "no block window: it would take the kernel's static shared memory past "
                             "CUDA's 48 KiB")
            else:
                privatized = st.windows.add(buffer, window, st.shadow[buffer],  # type: ignore[arg-type]
                                              st.kernel.elem_type(buffer), chunk)
                got = (privatized, _describe_window(privatized))
    st.windowed[buffer] = got
    return got


def _is_private(st: ReverseState, buffer: str) -> tuple[bool, str]:
    if buffer not in st.private:
        if not st.opt.privacy:
            st.private[buffer] = (False, "privacy proofs disabled")
        else:
            got = tuple(st.privacy(buffer))
            summed = _summed_loads(st, buffer) if not got[0] else frozenset()
            if summed:
                # the block-uniform loads, summed per block, left out: the others may be private
                other = tuple(st.privacy(buffer, summed, st.kernel))
                if other[0] or len(other) > 2:
                    st.summed[buffer] = summed
                    got = (other[0], f"{other[1]} (leaving out the block-uniform loads, summed per block and "
                                     f"added once after a barrier)") + other[2:]
            st.private[buffer] = got  # type: ignore[assignment]
    got = st.private[buffer]
    return got[0], got[1]


def _load_key(e: n.Load) -> tuple:
    """How ``polypy.poly.sharing`` names the access of a load: its location and text."""
    return e.loc, format_expr(e)


def _summed_loads(st: ReverseState, buffer: str) -> frozenset[tuple]:
    """The keys (``_load_key``) of ``buffer``'s loads that all sum their adjoints per block
    (read-only global, block-invariant index): every load of ``st.kernel`` with such a key does."""
    if not (st.opt.block_reductions and st.kernel.space(buffer) == "global"
            and buffer not in st.prog.written_buffers):
        return frozenset()
    keys: dict[tuple, bool] = {}
    for x in walk_only(st.kernel, n.Load):
        if x.buffer == buffer:
            key = _load_key(x)
            keys[key] = keys.get(key, True) and x.loc is not None and _block_invariant(st, x.index)
    return frozenset(k for k, ok in keys.items() if ok)


def _private_when(st: ReverseState, buffer: str) -> n.Expr | None:
    """The run-time condition under which ``buffer``'s elements are private, if the oracle gave one."""
    _is_private(st, buffer)
    got = st.private[buffer]
    return got[2] if len(got) > 2 else None  # type: ignore[misc]


def _version_flag(st: ReverseState, buffer: str) -> str:
    """The kernel-level ``bool`` holding ``buffer``'s privacy condition (declared once, at the top)."""
    flag = st.versions.get(buffer)
    if flag is None:
        cond = _private_when(st, buffer)
        assert cond is not None
        flag = st.names.fresh(f"{buffer}_private")
        st.versions[buffer] = flag
        st.top_decls.append(n.Decl(flag, BOOL, cond))
    return flag


def _block_invariant(st: ReverseState, index: tuple[n.Expr, ...]) -> bool:
    """Same value in every thread of a block and every loop iteration, and valid at the end."""
    def ok(e: n.Expr, depth: int = 0) -> bool:
        for x in walk(e):
            if isinstance(x, (n.ThreadIdx, n.Load)):
                return False
            if isinstance(x, n.Var):
                if x.name in st.prog.params and x.name not in st.prog.writers:
                    continue
                writers = st.prog.writers.get(x.name, [])
                if len(writers) != 1 or len(writers[0]) != 1 or depth > 8:
                    return False
                s = st.prog.stmt(writers[0])
                if not (isinstance(s, n.Decl) and s.init is not None and ok(s.init, depth + 1)):
                    return False
        return True
    return all(ok(i) for i in index)


def end_reductions(st: ReverseState) -> tuple[list[n.Stmt], list[n.Buffer]]:
    """The block reductions at the end of ``K_grad``: of the scalar parameters' adjoint registers,
    and of the per-block sums of block-uniform loads (with the shared buffers they need)."""
    items: list[Reduction] = []
    for p in st.kernel.params:
        if p.name in st.active.scalars:
            reg = st.adjoint[p.name]
            items.append(Reduction(reg, p.ptype, st.param_shadow[p.name], (b.const(0, I32),)))  # type: ignore[arg-type]
            note(st, ("acc", p.name), Accumulation(p.name, f"scalar parameter {p.name}", p.loc,
                                                     "block-reduction",
                                                     "every thread contributes: summed in a register, reduced "
                                                     "over the block, one atomic per block"))
    for (buffer, index), reg in st.deferred.items():
        items.append(Reduction(reg, st.adjoint_type[reg], st.shadow[buffer], index))
    return block_reductions(items, st.names)


def _describe_window(p: Privatized) -> str:
    w = p.window
    shape = " x ".join(format_expr(d.extent) for d in w.dims)
    flush = ("plain adds for the elements isl proves no other block reads, atomics for the rest" if w.exclusive
             else "one atomic per nonzero element")
    where = "a block-dependent" if any(d.step is not None or not isinstance(d.base, n.Const) for d in w.dims) \
        else "a fixed"
    if p.chunk is not None:
        return (f"isl: in {p.chunk.trips} consecutive iterations of its loop, a block reads a window of {shape} "
                f"elements at a block- and iteration-dependent position; the reverse sweep runs the loop "
                f"{p.chunk.trips} iterations at a time, summing a chunk's contributions in shared memory, then "
                f"flushing them: {flush}")
    return (f"isl: a block reads a window of {shape} elements at {where} position; its contributions "
            f"are summed in shared memory, then flushed: {flush}")
