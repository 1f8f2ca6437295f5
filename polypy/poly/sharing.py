"""How a buffer's elements are shared between threads — what adjoint accumulation needs.

For a buffer (or one access of it), over every launch:

* ``thread_private``: every element is accessed by at most one thread of the whole grid, so
  the adjoint of that element can be accumulated with a plain ``+=``;
* ``block_uniform``: within each block, every instance accesses one and the same element, so
  a block-level reduction followed by one update per block suffices;
* ``block_private``: every element is accessed by at most one block (a block reduction can
  then store instead of using an atomic).

Otherwise atomics are needed -- or, where the elements are private for *some* launches only
(``c[i * NJ + j]`` with ``j < nj``: private exactly when ``nj <= NJ``), ``private_when`` is the
condition on the launch and the integer arguments under which they are (an IR expression, a
grid-uniform ``bool``), so a gradient can test it once at run time and choose (versioning). The answers are proved with isl on the symbolic model (a
launch shape may be given to decide kernels that are only analysable for fixed sizes); an
unknown index makes the corresponding answer False. Accesses through *other* pointer
parameters that may alias this one are not considered: the question is about this buffer's
own accesses (its shadow in the gradient has the same aliasing as the primal).
"""
from __future__ import annotations

import dataclasses
from typing import Iterator

import islpy as isl

from polypy.ir import nodes as n
from polypy.ir.types import I64, ScalarType
from polypy.ir.visitor import walk
from polypy.poly.model import BLOCK_DIM, GRID_DIM, Access, Launch, build_model
from polypy.poly.paths import AccessId
from polypy.poly.relations import Copies


@dataclasses.dataclass(frozen=True)
class Sharing:
    buffer: str
    thread_private: bool
    block_uniform: bool
    block_private: bool
    private_when: n.Expr | None = None  # thread private exactly... at least where this holds
    # isl operations the search for ``private_when`` took, and why it gave up (if it did: then
    # ``private_when`` is None, the always-correct shared path)
    condition_steps: int = 0
    condition_gave_up: str = ""

    @property
    def accumulation(self) -> str:
        """``"plain"`` (+=), ``"block-reduction"`` or ``"atomic"``."""
        if self.thread_private:
            return "plain"
        if self.block_uniform:
            return "block-reduction"
        return "atomic"


def sharing(kernel: n.Kernel, buffer: str, *, access: AccessId | None = None,
            launch: Launch | None = None, reduced: frozenset[tuple] = frozenset()) -> Sharing:
    """How the elements of ``buffer`` (or those touched by ``access``) are shared.

    ``reduced``: ``(loc, text)`` of reads whose contributions the caller sums over each block
    and adds once per block after a barrier that every thread of the block reaches (a gradient's
    block reduction of a block-uniform load: softmax's ``xr[0]``). Such a read, where isl finds
    it block-uniform, leaves the thread question: ``thread_private`` and ``private_when`` then
    say that the *other* accesses are private to a thread and that no other block touches an
    element one of these reads (``block_uniform`` and ``block_private`` are about all accesses).
    """
    model = build_model(kernel, launch=launch)
    accesses = [a for a in model.accesses_of(buffer) if access is None or a.id == access]
    if access is not None and not accesses:
        raise KeyError(str(access))
    c = Copies(model, ("1", "2"))
    everything = _Pairs(_distinct(accesses))  # symmetric questions
    # each block has its own copy of a shared array: only threads of one block can share
    blocks = [] if kernel.space(buffer) == "shared" else c.other_block_pieces("1", "2")
    threads = c.other_thread_pieces("1", "2") + blocks
    out = {id(a) for a in accesses if blocks and a.kind == "read" and (a.loc, a.text) in reduced and _uniform(c, a, a)}
    summed = _distinct([a for a in accesses if id(a) in out])
    rest = _distinct([a for a in accesses if id(a) not in out])
    questions = [(_Pairs(rest), threads)] + ([([(u, a) for u in summed for a in rest], blocks)] if summed else [])
    thread_private = all(_never_shared(c, a, b, pieces) for pairs, pieces in questions for a, b in pairs)
    block_private = thread_private or all(_never_shared(c, a, b, blocks) for a, b in everything)
    block_uniform = all(_uniform(c, a, b) for a, b in everything)
    search = _Search()
    when = None
    if not thread_private:
        when = _private_condition(model, c, questions, search)
    return Sharing(buffer, thread_private, block_uniform, block_private, when, search.steps, search.gave_up)


class _Pairs:
    """The unordered pairs of ``accesses`` (each with itself too), made as they are asked for:
    a long sum touches one buffer thousands of times, so there are millions of pairs (building
    the list was quadratic), and the questions usually stop at the first shared pair."""

    def __init__(self, accesses: tuple[Access, ...]):
        self.accesses = accesses

    def __len__(self) -> int:
        k = len(self.accesses)
        return k * (k + 1) // 2

    def __iter__(self) -> Iterator[tuple[Access, Access]]:
        accesses = self.accesses
        for i, a in enumerate(accesses):
            for j in range(i, len(accesses)):
                yield a, accesses[j]


def _distinct(accesses: list[Access]) -> tuple[Access, ...]:
    """``accesses`` less those that repeat an earlier one's question: the same statement
    (so the same enclosing strided loops), instances and element. The questions below ask
    about pairs, each access with itself included, and read of an access only its buffer,
    element type, statement path, domain and index (``elems``, ``delin``): a pair of repeats is answered by
    the access with itself, a repeat with another access as the first one with it. A
    2,000-factor product of ``x[i]`` is one access, not 2,000,000 pairs of them."""
    seen: set[tuple] = set()
    out: list[Access] = []
    for a in accesses:
        key = (a.buffer, a.elem, a.id.path, str(a.domain), tuple(str(e) for e in a.elems), repr(a.delin))
        if key not in seen:
            seen.add(key)
            out.append(a)
    return tuple(out)


def _shared_pairs(c: Copies, a: Access, b: Access) -> isl.Set | None:
    overlap = c.overlap(a, "1", b, "2")
    if overlap is None:
        return None
    return c.domain(a, "1") & c.domain(b, "2") & overlap & c.congruence(a, "1", b, "2")


def _never_shared(c: Copies, a: Access, b: Access, pieces: list) -> bool:
    """No instance pair of ``a`` and ``b`` in one of ``pieces`` touches the same element."""
    if not pieces:
        return True
    s = _shared_pairs(c, a, b)
    if s is None:
        return True
    return all((s & piece).is_empty() for piece in pieces)


# At most this many constraints in a versioning condition (beyond: not worth a run-time test).
MAX_CONDITION_TERMS = 6
# The search for a versioning condition projects one set per (access pair, thread piece) and
# tests candidate constraints against their union; each projection of a many-dimensional pair
# set can take a second. Beyond these budgets it gives up (no condition: the shared path, which
# is always correct): more (pair, piece) questions than this, or more isl operations in all.
# (PolyBench's gemm asks 80: c's 10 access pairs over 4 thread and 4 block pieces.)
MAX_CONDITION_QUESTIONS = 96
MAX_CONDITION_STEPS = 256


class _Search:
    """The budget of one condition search: isl operations counted, and why it gave up."""

    def __init__(self) -> None:
        self.steps = 0
        self.gave_up = ""

    def step(self, count: int = 1) -> bool:
        """Count ``count`` isl operations; False (and gave up) once past the budget."""
        self.steps += count
        if self.steps > MAX_CONDITION_STEPS:
            self.gave_up = f"the search for a run-time condition gave up after {MAX_CONDITION_STEPS} isl operations"
            return False
        return True


def _private_condition(model, c: Copies, questions: list, search: _Search) -> n.Expr | None:
    """A grid-uniform condition under which no two threads share an element (no pair of
    ``questions``' ``(pairs, pieces)`` shares one within a piece), or None.

    The parameter values where two threads may share one (``bad``, exact up to the model's
    over-approximations) are projected out of the pairwise question; the condition is the
    complement of ``bad`` within the launch assumptions, written over the parameters that
    have an IR meaning (``blockDim``/``gridDim``, integer arguments, grid-uniform values).
    """
    asked = sum(len(pairs) * len(pieces) for pairs, pieces in questions)
    if asked > MAX_CONDITION_QUESTIONS:
        pairs, pieces = questions[0]
        search.gave_up = (f"no search for a run-time condition: {len(pairs)} access pairs x {len(pieces)} "
                          f"thread pieces is more than {MAX_CONDITION_QUESTIONS} questions")
        return None
    bad = None
    context = model.context
    for a, b, pieces in ((a, b, pieces) for pairs, pieces in questions for a, b in pairs):
        s = _shared_pairs(c, a, b)
        if s is None:
            continue
        for piece in pieces:
            shared = s & piece
            if not search.step():
                return None
            if shared.is_empty():  # (projecting it gives the empty set)
                continue
            # a projection costs about one step per basic set (a pair set of a loop with
            # clamped neighbours has hundreds: a second or more to project)
            if not search.step(shared.n_basic_set()):
                return None
            p = shared.params()
            bad = p if bad is None else bad | p
    if bad is None:
        return None
    context = context.align_params(bad.space)
    bad = (bad & context).coalesce()
    if bad.is_empty():
        return None  # private after all (a union the piecewise test could not see)
    if context.is_subset(bad):
        return None  # never private
    # Each constraint of ``bad`` whose negation alone excludes every parameter value in ``bad``
    # is a sufficient condition; their disjunction is too (``nj <= NJ || ni <= 1``).
    cond: n.Expr | None = None
    terms = 0
    seen: set[str] = set()
    basics = bad.gist(context).get_basic_sets()
    for basic in basics:
        for con in basic.get_constraints():
            key = str(con)
            if key in seen:
                continue
            seen.add(key)
            term = _term(model, con, context, search)
            if term is _OUT_OF_STEPS:
                return None
            if term is None:
                continue
            expr, negated = term
            if not (negated & bad).is_empty():
                continue
            terms += 1
            cond = expr if cond is None else n.Binary("lor", cond, expr)
            if terms >= MAX_CONDITION_TERMS:
                return cond
    if cond is None:
        cond = _conjunction(model, basics, context, search)
    return cond


def _conjunction(model, basics: list, context: isl.Set, search: _Search) -> n.Expr | None:
    """A condition excluding each piece of ``bad`` by one of its own constraints, negated:
    ``blockDim.x <= 16 && 16 * gridDim.x <= hid`` where threads share elements when the block is
    wider than 16 *or* the blocks' columns run past ``hid`` (backprop's weights). None where a
    piece has no constraint with an IR meaning, more than ``MAX_CONDITION_TERMS`` terms, or
    the conjunction holds only for degenerate launches. A piece already excluded by the terms
    chosen so far adds none."""
    cond: n.Expr | None = None
    allowed = context
    terms = 0
    for basic in basics:
        if not search.step():
            return None
        if (allowed & isl.Set.from_basic_set(basic).align_params(allowed.space)).is_empty():
            continue  # excluded already by a term chosen for another piece
        terms += 1
        if terms > MAX_CONDITION_TERMS:
            return None
        chosen = None
        for con in basic.get_constraints():
            term = _term(model, con, context, search)
            if term is _OUT_OF_STEPS:
                return None
            if term is not None:
                chosen = term
                break
        if chosen is None:
            return None
        cond = chosen[0] if cond is None else n.Binary("land", cond, chosen[0])
        allowed = allowed & chosen[1]
    if cond is None or not search.step() or _typical(allowed).is_empty():
        return None
    return cond


_OUT_OF_STEPS = ("out of steps",)


def _term(model, con: isl.Constraint, context: isl.Set, search: _Search):
    """``(IR condition, parameter set)`` of ``con`` negated, where the negation names only
    parameters with an IR meaning and holds for some typical launch; None where not;
    ``_OUT_OF_STEPS`` once the search is past its budget."""
    expr = _negate(model, con)  # cheapest test first (no isl set operation)
    if expr is None:
        return None
    negated = _negation_set(con, context)
    if negated is None or _degenerate(negated, con):
        return None
    if not search.step():
        return _OUT_OF_STEPS
    return expr, negated


# A condition that holds only where a size or launch dimension it names is below this is not
# worth a run-time test (``rows <= 1``: the launch is degenerate, the atomics cost nothing).
TYPICAL_SIZE = 16
# Nor is one that holds only where a value it names is at least this (issue 38: cfd's
# ``-nelr <= -2147483647``). With a symbolic launch the only bound on a thread's global index
# ``blockIdx.x * blockDim.x + threadIdx.x`` is the model's assumption that it stays below 2**31
# (the product is not affine, so "nelr >= the number of threads" cannot be said); two accesses
# ``v[i]`` and ``v[i + nelr]`` then never meet only when ``nelr`` is beyond every index, and
# the complement of the shared set is a condition that never holds at a real size. Half the
# index limit separates the real sizes (arrays of up to a billion elements) from the artefacts.
ABSURD_SIZE = 1 << 30


def _degenerate(negated: isl.Set, con: isl.Constraint) -> bool:
    """Whether ``negated`` holds only for degenerate or absurd values of the parameters ``con``
    names (below ``TYPICAL_SIZE`` or at least ``ABSURD_SIZE``)."""
    typical = negated
    space = con.get_space()
    for i in range(space.dim(isl.dim_type.param)):
        if not con.get_coefficient_val(isl.dim_type.param, i).is_zero():
            name = space.get_dim_name(isl.dim_type.param, i)
            pos = typical.find_dim_by_name(isl.dim_type.param, name)
            typical = typical.lower_bound_val(isl.dim_type.param, pos, isl.Val(_typical_size(name)))
            typical = typical.upper_bound_val(isl.dim_type.param, pos, isl.Val(ABSURD_SIZE - 1))
    return typical.is_empty()


def _typical(s: isl.Set) -> isl.Set:
    """``s`` where every parameter takes a typical value: neither degenerate nor absurd."""
    for i in range(s.dim(isl.dim_type.param)):
        s = s.lower_bound_val(isl.dim_type.param, i, isl.Val(_typical_size(s.get_dim_name(isl.dim_type.param, i))))
        s = s.upper_bound_val(isl.dim_type.param, i, isl.Val(ABSURD_SIZE - 1))
    return s


def _typical_size(name: str) -> int:
    # a grid of one block along a dimension is an ordinary launch; a size or block of one is not
    return 1 if name in GRID_DIM else TYPICAL_SIZE


def _negation_set(con: isl.Constraint, context: isl.Set) -> isl.Set | None:
    """The parameter values (within ``context``) where ``con`` fails."""
    if con.get_space().dim(isl.dim_type.div) > 0:
        return None
    aff = con.get_aff()
    below = isl.Set.from_basic_set(isl.BasicSet.from_constraint(
        isl.Constraint.inequality_from_aff(aff.neg().add_constant_val(isl.Val(-1)))))
    out = below
    if con.is_equality():
        out = out | isl.Set.from_basic_set(isl.BasicSet.from_constraint(
            isl.Constraint.inequality_from_aff(aff.add_constant_val(isl.Val(-1)))))
    return out.align_params(context.space) & context


def _param_expr(model, name: str) -> n.Expr | None:
    """The IR of an isl parameter a condition may test: an integer argument, a launch dimension
    (``_negate`` lets a condition bound those only from above), or a grid-uniform value built
    from arguments."""
    if name in BLOCK_DIM:
        return n.BlockDim(BLOCK_DIM.index(name))
    if name in GRID_DIM:
        return n.GridDim(GRID_DIM.index(name))
    p = model.kernel.param(name)
    if p is not None and isinstance(p.ptype, ScalarType) and p.ptype.is_int:
        return n.Var(name, p.ptype)
    e = model.uniform_exprs.get(name)
    if e is None or (name not in model.guard_params and any(isinstance(x, (n.BlockDim, n.GridDim)) for x in walk(e))):
        return None
    return e


def _negate(model, con: isl.Constraint) -> n.Expr | None:
    """``not (sum coef * param + constant >= 0)`` (or ``== 0``) as an i64 IR condition,
    written ``sum <= -constant - 1`` (``!= -constant``). A launch dimension may only be bounded
    from above (``blockDim.x <= 16``, ``16 * gridDim.x <= hid``): a size bounded by the launch
    (``n <= blockDim.x - 3``) describes a degenerate launch."""
    constant = int(con.get_constant_val().to_python())
    total: n.Expr | None = None
    space = con.get_space()
    for kind in (isl.dim_type.set, isl.dim_type.div):
        for i in range(space.dim(kind)):
            if not con.get_coefficient_val(kind, i).is_zero():
                return None
    for i in range(space.dim(isl.dim_type.param)):
        coef = int(con.get_coefficient_val(isl.dim_type.param, i).to_python())
        if coef == 0:
            continue
        name = space.get_dim_name(isl.dim_type.param, i)
        if (name in BLOCK_DIM or name in GRID_DIM) and (coef < 0 or con.is_equality()):
            return None
        x = _param_expr(model, name)
        if x is None:
            return None
        term: n.Expr = n.Cast(I64, x) if x.type != I64 else x
        if abs(coef) != 1:
            term = n.Binary("mul", n.Const(abs(coef), I64), term)
        if total is None:
            total = term if coef > 0 else n.Unary("neg", term)
        else:
            total = n.Binary("add" if coef > 0 else "sub", total, term)
    if total is None:
        return None
    if con.is_equality():
        return n.Binary("ne", total, n.Const(-constant, I64))
    return n.Binary("le", total, n.Const(-constant - 1, I64))


def _uniform(c: Copies, a: Access, b: Access) -> bool:
    """No two instances of one block touch different elements."""
    s = c.domain(a, "1") & c.domain(b, "2") & c.same_block("1", "2")
    return (s & c.differ(a, "1", b, "2")).is_empty()
