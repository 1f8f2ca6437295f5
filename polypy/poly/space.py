"""Names of the polyhedral instance space (``blockIdx.x``, ..., ``gridDim.z``), CUDA's limits on
launch shapes, and ``Launch``: a concrete launch the model may be specialized to."""
from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, TypeVar

import islpy as isl

from polypy.launch import MAX_BLOCK, MAX_GRID


CTX = isl.DEFAULT_CONTEXT
DIMS = "xyz"
BLOCK_IDX = tuple(f"blockIdx.{d}" for d in DIMS)
THREAD_IDX = tuple(f"threadIdx.{d}" for d in DIMS)
BLOCK_DIM = tuple(f"blockDim.{d}" for d in DIMS)
GRID_DIM = tuple(f"gridDim.{d}" for d in DIMS)

# CUDA limits on launch shapes (compute capability >= 3.0), from polypy.launch's table.
MAX_BLOCK_DIM = MAX_BLOCK
MAX_GRID_DIM = MAX_GRID
INDEX_LIMIT = (1 << 31) - 1

# isl counts its elementary steps (``isl_ctx_next_operation``: simplex pivots, ...) and fails a
# call once a context's budget is spent. An analysis question whose sets blow up (projections of
# unions with many existentials: a random kernel's coarse block once took minutes in one
# subtraction) gets at most this many steps and then the conservative answer. The samples'
# shared-memory dataflow asks 67 questions; none needs 100,000 steps, 12 need more than 10,000.
ISL_BUDGET = 1_000_000
_QUOTA = "maximal number of operations exceeded"

T = TypeVar("T")


def bounded(question: Callable[[], T], default: T, budget: int | None = None) -> T:
    """``question()`` with isl limited to ``budget`` operations (``ISL_BUDGET`` by default);
    ``default`` (which must be the conservative answer) where isl runs out. Inside another
    ``bounded`` call the outer budget governs."""
    if CTX.get_max_operations():
        return question()
    CTX.set_max_operations(ISL_BUDGET if budget is None else budget)
    CTX.reset_operations()
    try:
        return question()
    except isl.Error as e:
        if _QUOTA not in str(e):
            raise
        return default
    finally:
        CTX.set_max_operations(0)
        CTX.reset_operations()


@dataclasses.dataclass(frozen=True)
class Launch:
    """A concrete launch: grid and block shape (x, y, z), and known integer scalar arguments."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    scalars: tuple[tuple[str, int], ...] = ()

    @staticmethod
    def of(grid: int | tuple[int, ...], block: int | tuple[int, ...],
           scalars: Mapping[str, object] | None = None) -> Launch:
        """From launch-syntax shapes (an int or 1 to 3 ints) and scalar arguments by name.

        Integer (and bool) scalars become known values; floating-point ones are irrelevant.
        """
        def dims(shape: int | tuple[int, ...]) -> tuple[int, int, int]:
            t = (shape,) if isinstance(shape, int) else tuple(shape)
            if not 1 <= len(t) <= 3 or any(int(x) < 1 for x in t):
                raise ValueError(f"bad launch shape {shape!r}")
            return tuple(int(x) for x in t) + (1,) * (3 - len(t))  # type: ignore[return-value]
        ints = []
        for name, value in (scalars or {}).items():
            if isinstance(value, (bool, int)) or getattr(getattr(value, "dtype", None), "kind", "f") in "biu":
                ints.append((name, int(value)))  # type: ignore[call-overload]
        return Launch(dims(grid), dims(block), tuple(sorted(ints)))

    def scalar(self, name: str) -> int | None:
        for key, value in self.scalars:
            if key == name:
                return value
        return None
