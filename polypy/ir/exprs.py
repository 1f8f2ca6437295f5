"""The expression nodes of the IR (``Expr``: side-effect free values, each with a ``type``).
Used through ``polypy.ir.nodes``."""
from __future__ import annotations

from dataclasses import field

from polypy.ir.types import BOOL, U32, ScalarType, normalize_value
from polypy.ir.node_base import Node, _node


# --------------------------------------------------------------------------- expressions


@_node
class Expr(Node):
    @property
    def type(self) -> ScalarType:  # pragma: no cover - every subclass defines it
        raise NotImplementedError


@_node
class Const(Expr):
    """A literal. Integer values are stored wrapped to their type, f32 values rounded to f32."""

    value: int | float | bool
    ctype: ScalarType

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", normalize_value(self.value, self.ctype))

    @property
    def type(self) -> ScalarType:
        return self.ctype


@_node
class Var(Expr):
    """A local scalar variable or a scalar kernel parameter."""

    name: str
    vtype: ScalarType

    @property
    def type(self) -> ScalarType:
        return self.vtype


@_node
class GpuIndex(Expr):
    """Base of the four CUDA built-in index registers; ``dim`` is 0, 1, 2 for x, y, z."""

    dim: int

    @property
    def type(self) -> ScalarType:
        return U32


@_node
class ThreadIdx(GpuIndex):
    pass


@_node
class BlockIdx(GpuIndex):
    pass


@_node
class BlockDim(GpuIndex):
    pass


@_node
class GridDim(GpuIndex):
    pass


UNARY_OPS = ("neg", "not", "bnot")
ARITH_OPS = ("add", "sub", "mul", "div", "rem")
BIT_OPS = ("shl", "shr", "band", "bor", "bxor")
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
LOGIC_OPS = ("land", "lor")  # short-circuit: the right operand is evaluated only when needed
BINARY_OPS = ARITH_OPS + BIT_OPS + COMPARE_OPS + LOGIC_OPS


@_node
class Unary(Expr):
    """``neg`` (-x), ``not`` (!x on bool), ``bnot`` (~x on integers)."""

    CHILDREN = ("x",)

    op: str
    x: Expr
    _type: ScalarType | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def type(self) -> ScalarType:
        return self._type or _derived_type(self)

    def _own_type(self) -> tuple[ScalarType | None, Expr]:
        return (BOOL if self.op == "not" else None), self.x


@_node
class Binary(Expr):
    """A binary operation. Operands have the same type except for shifts (result: lhs type).

    Comparisons and ``land``/``lor`` produce ``bool``; ``land``/``lor`` take bool operands and
    evaluate ``b`` only when ``a`` does not decide the result (C's ``&&``/``||``).
    """

    CHILDREN = ("a", "b")

    op: str
    a: Expr
    b: Expr
    _type: ScalarType | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def type(self) -> ScalarType:
        return self._type or _derived_type(self)

    def _own_type(self) -> tuple[ScalarType | None, Expr]:
        return (BOOL if self.op in COMPARE_OPS or self.op in LOGIC_OPS else None), self.a


@_node
class Select(Expr):
    """``cond ? a : b``; only the chosen operand is evaluated (it may load out of bounds otherwise)."""

    CHILDREN = ("cond", "a", "b")

    cond: Expr
    a: Expr
    b: Expr
    _type: ScalarType | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def type(self) -> ScalarType:
        return self._type or _derived_type(self)

    def _own_type(self) -> tuple[ScalarType | None, Expr]:
        return None, self.a


_TYPE_FROM_OPERAND = (Unary, Binary, Select)


def _derived_type(node: Expr) -> ScalarType:
    """The type of a ``Unary``/``Binary``/``Select``, which is its first operand's unless the
    operation fixes it (comparisons: bool). Found down the chain of first operands without
    recursion and remembered in every node of the chain (``_type``): asking each level of a
    100,000-term sum for its type would otherwise take quadratic time and a deep stack."""
    chain = []
    while isinstance(node, _TYPE_FROM_OPERAND):
        found = node._type
        if found is not None:
            break
        found, operand = node._own_type()
        chain.append(node)
        if found is not None:
            break
        node = operand
    else:
        found = node.type
    for link in chain:
        object.__setattr__(link, "_type", found)
    return found


@_node
class Cast(Expr):
    """C conversion of ``x`` to ``to`` (float→int truncates toward zero; int→bool is ``!= 0``)."""

    CHILDREN = ("x",)

    to: ScalarType
    x: Expr

    @property
    def type(self) -> ScalarType:
        return self.to


@_node
class Call(Expr):
    """A pure math function by canonical name (``exp``, ``sqrt``, ``fmin``, ``min``, ...).

    ``fn`` names the operation independently of precision (``expf`` and ``exp`` are both
    ``exp``); ``rtype`` and the argument types say which precision. See ``polypy.ir.mathfns``.
    """

    CHILDREN = ("args",)

    fn: str
    args: tuple[Expr, ...]
    rtype: ScalarType

    @property
    def type(self) -> ScalarType:
        return self.rtype


@_node
class Load(Expr):
    """``buffer[index...]``. Pointer parameters take one index; arrays one per dimension."""

    CHILDREN = ("index",)

    buffer: str
    index: tuple[Expr, ...]
    etype: ScalarType

    @property
    def type(self) -> ScalarType:
        return self.etype
