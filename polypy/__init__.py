"""polypy: run CUDA kernels on multicore CPUs and synthesize their gradients.

Public API::

    import polypy
    module = polypy.load("kernels.cu")                   # GPU-form IR (parsed + simplified)
    polypy.emulate(module.kernel("saxpy"), grid, block, args)   # reference semantics, NumPy arrays
    mod = polypy.compile("kernels.cu")                   # JIT for this CPU (all cores), cached on disk
    mod.saxpy[grid, block](n, 2.0, x, y)                 # NumPy arrays updated in place
    g = polypy.grad(mod.saxpy, wrt=["x", "y"])           # the launchable gradient kernel
    g[grid, block](n, 2.0, x, d_x, y, d_y)               # shadows follow their arrays (Enzyme's convention)

The names are re-exported lazily (PEP 562): ``import polypy`` imports no stage and nothing of the
driver (``polypy.driver``) until one of them is first used.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from polypy.errors import InternalError, Loc, PolypyError, UserError

__version__ = "0.1.0"

# public name -> (module, attribute)
_LAZY = {
    "compile": ("polypy.driver.api", "compile"),
    "grad": ("polypy.driver.gradients", "grad"),
    "load": ("polypy.driver.source", "load"),
    "parse": ("polypy.driver.source", "parse"),
}

if TYPE_CHECKING:  # pragma: no cover
    from polypy.driver.api import compile
    from polypy.driver.gradients import grad
    from polypy.driver.source import load, parse


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'polypy' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def emulate(kernel, grid, block, args, *, shmem: int = 0, globals=None, check_races: bool = True) -> None:
    """Run a GPU-form kernel with exact CUDA semantics on NumPy arrays (the reference oracle)."""
    from polypy.emulator import emulate as _emulate

    _emulate(kernel, grid, block, args, shmem=shmem, globals=globals, check_races=check_races)


__all__ = ["compile", "grad", "load", "parse", "emulate", "UserError", "InternalError", "PolypyError", "Loc", "__version__"]
