"""What a polyhedral model holds (see ``polypy.poly.model``): accesses, barriers, loops,
block-uniform values, and the ``Model`` that gathers them."""
from __future__ import annotations

import dataclasses

import islpy as isl

from polypy.errors import Loc
from polypy.ir import nodes as n
from polypy.ir.types import ScalarType
from polypy.poly.paths import AccessId, StmtPath
from polypy.poly.space import Launch


@dataclasses.dataclass(frozen=True)
class BlockValue:
    """A non-affine value that is the same for all threads of a block (a set dimension).

    ``stride`` is ``(d, e, c)`` when the value is ``blockIdx[d] * c * blockDim[e]`` (c > 0),
    which lets grid-wide questions tell blocks apart; ``linear`` is ``(a, b, e, c)`` when it is
    ``c * blockDim[e]`` times the row-major index ``gridDim[a] * blockIdx[b] + blockIdx[a]`` of
    the block in the plane ``(a, b)`` (two blocks that differ along ``a`` or ``b`` have values
    at least ``c * blockDim[e]`` apart, in one direction or the other).
    """

    name: str
    vtype: ScalarType
    block_dims: tuple[int, ...]
    stride: tuple[int, int, int] | None
    linear: tuple[int, int, int, int] | None = None


@dataclasses.dataclass(frozen=True)
class Delinearized:
    """An index ``outer * P + inner`` with ``0 <= inner < P`` on the access's domain.

    ``P`` is a grid-uniform value that is not a constant (``w`` in ``y * w + x``): the product
    is not affine, but two indices with the same ``P`` are equal exactly when their ``outer``
    and ``inner`` parts are (the classic delinearization of a row-major 2-D index).

    ``valid``: where ``0 <= inner < P`` holds only for some parameter values (backprop's
    ``in_row * hid + col`` needs ``col < hid``, true when ``16 * gridDim.x <= hid``), those values:
    a set over the instance space that constrains parameters only. Elsewhere the index is
    unknown. None: it holds for all.
    """

    factor: str
    outer: isl.PwAff
    inner: isl.PwAff
    valid: isl.Set | None = None
    # ``P`` itself (a parameter of the model): lets an affine index of the same buffer be read
    # as ``0 * P + e`` where ``0 <= e < P`` (``relations``), None where unknown
    size: isl.PwAff | None = None


@dataclasses.dataclass
class Access:
    id: AccessId
    kind: str  # "read" | "write" | "atomic"
    buffer: str
    space: str  # "global" (pointer parameters) | "shared" | "local" | "constant" | "device"
    elem: ScalarType
    loc: Loc | None
    text: str
    elems: tuple[isl.PwAff | None, ...]  # per index dimension; None: unknown
    domain: isl.Set
    time: tuple[int | str, ...]
    domain_exact: bool
    atomic_op: str | None = None
    atomic_has_result: bool = False
    delin: tuple[Delinearized | None, ...] = ()  # per index dimension whose ``elems`` is None
    # Through a pointer held in a __constant__/__device__ record: ``(key, slot, offset)``, the
    # pointer read from element ``slot`` of the view ``key``, plus ``offset`` (``polypy.poly.held``;
    # for the race warnings only: ``elems`` stays unknown for every other question).
    held: tuple[str, isl.PwAff, isl.PwAff] | None = None

    @property
    def index_exact(self) -> bool:
        return all(e is not None or (d is not None and d.valid is None)
                   for e, d in zip(self.elems, self.delin or (None,) * len(self.elems)))

    @property
    def exact(self) -> bool:
        return self.domain_exact and self.index_exact

    @property
    def writes(self) -> bool:
        return self.kind in ("write", "atomic")

    @property
    def reads(self) -> bool:
        return self.kind in ("read", "atomic")

    @property
    def line(self) -> int | None:
        return self.loc.line if self.loc is not None else None


@dataclasses.dataclass
class Barrier:
    """A ``__syncthreads()`` statement.

    ``exact``: its domain is exact, so a thread that executes an instance after the barrier's
    time certainly executed the barrier instances of its domain in between. With ``cut =
    (loop, outer loops)`` that holds only for instances inside the same instance of ``loop``
    (same iterations of the ``outer loops``): the loop has a ``break``, so its iterations may
    stop early.
    """

    path: StmtPath
    loc: Loc | None
    time: tuple[int | str, ...]
    domain: isl.Set
    exact: bool
    cut: tuple[str, tuple[str, ...]] | None = None


@dataclasses.dataclass
class Loop:
    dim: str
    path: StmtPath
    loc: Loc | None
    exact: bool  # the dimension is the loop variable (else an abstract iteration counter)
    trips: str | None  # parameter bounding an abstract top-level loop


@dataclasses.dataclass
class Stride:
    """A ``for`` whose step ``S`` is a positive grid-uniform value that is not a constant
    (``for (c = tid; c < n; c += blockDim.x)``).

    The loop variable is the dimension ``dim``, bounded by ``start <= dim < stop`` only: the
    domain over-approximates (isl cannot say "``dim - start`` is a multiple of a parameter"),
    so the loop's body is not exact. What is lost is kept as a pairwise fact: for instances
    inside two strided loops with the same step ``key``, ``(dim - start)`` of one minus
    ``(dim - start)`` of the other is a multiple of ``S`` (``Copies.congruence``), which is
    what proves ``x[c]`` private to a thread when ``start`` is the thread index.
    """

    dim: str
    path: StmtPath
    start: isl.PwAff  # on the model's space
    step: isl.PwAff  # parameters only, >= 1 on the model's context
    key: str  # expression_key of the step expression
    # grid-stride loops (start = blockIdx * blockDim + threadIdx, step = blockDim * gridDim):
    # 0 <= start < step, which isl cannot derive (a product of parameters)
    start_below_step: bool = False

    def encloses(self, path: StmtPath) -> bool:
        """Whether the statement at ``path`` is in the loop's body."""
        return len(path) > len(self.path) and path[:len(self.path)] == self.path


@dataclasses.dataclass
class Model:
    kernel: n.Kernel
    launch: Launch | None
    space: isl.Space
    dims: tuple[str, ...]
    block_values: tuple[BlockValue, ...]
    loops: tuple[Loop, ...]
    accesses: tuple[Access, ...]
    barriers: tuple[Barrier, ...]
    time_len: int
    assumptions: tuple[str, ...]
    uniform_params: dict[str, str]  # isl parameter -> what it stands for
    thread_dims: tuple[int, ...]  # threadIdx dimensions that can be non-zero
    context: isl.Set  # what the launch assumptions say about the parameters
    block_dims: tuple[int, ...]  # blockIdx dimensions that can be non-zero
    strides: tuple[Stride, ...] = ()  # loops with a grid-uniform, non-constant step
    # block values ``blockIdx[d] * P`` with ``P`` grid-uniform and not constant (``blockIdx.x * cols``):
    # name -> (d, P on the model's space, where); blocks apart along d are >= P apart when P >= 0
    # and, for an unsigned product, where it cannot wrap (``where``: parameter values; None: always)
    block_factors: dict[str, tuple[int, isl.PwAff, isl.Set | None]] = dataclasses.field(default_factory=dict)
    uniform_exprs: dict[str, n.Expr] = dataclasses.field(default_factory=dict)  # isl parameter -> its IR
    # uniform parameters that name a launch's largest unsigned block product (``(u64)(gridDim.x -
    # 1u) * (u64)cols``): a run-time condition may bound them from above although they use gridDim
    guard_params: frozenset[str] = frozenset()

    def access(self, aid: AccessId) -> Access:
        for a in self.accesses:
            if a.id == aid:
                return a
        raise KeyError(str(aid))

    def barrier(self, path: StmtPath) -> Barrier:
        for b in self.barriers:
            if b.path == path:
                return b
        raise KeyError(path)

    def accesses_of(self, buffer: str) -> tuple[Access, ...]:
        return tuple(a for a in self.accesses if a.buffer == buffer)

    @property
    def loop_dims(self) -> tuple[str, ...]:
        return tuple(lp.dim for lp in self.loops)

    def buffer_shape(self, buffer: str) -> tuple[int, ...] | None:
        b = self.kernel.buffer(buffer)
        if b is None or b.shape is None:
            return None
        out = []
        for d in b.shape:
            if not isinstance(d, n.Const):
                return None
            out.append(int(d.value))
        return tuple(out)
