"""Running a list of passes: verification after each, optional dumps and timings.

A pass is a pure function ``Kernel -> Kernel``, or ``KernelVersions -> KernelVersions`` (the
passes that make a kernel's versions, ``polypy.passes.versions``; each new kernel among the
versions is verified, and the dump prints every version with its guard). A pipeline is a visible list of ``Pass``
entries. ``run_pipeline`` verifies the IR after every pass that changed it (a pass that changes nothing
returns its input, which is not checked again; the last pass's output is checked once at least), prints it after the passes named in
``POLYPY_PRINT_AFTER`` (comma separated, or ``all``) or by ``printing_after`` (``polypy translate
--dump-after NAME``), records per-pass time when asked, and
re-raises a crash inside a pass as an ``InternalError`` that names the pass (a ``UserError``
passes through unchanged: it is the input's fault and already says where).
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import sys
import time
from typing import Callable, Sequence

from polypy.errors import InternalError, UserError
from polypy.ir.nodes import Kernel
from polypy.ir.printer import print_kernel
from polypy.ir.verifier import verify_kernel
from polypy.ir.versions import KernelVersions, print_versions
from polypy.stack import on_big_stack


@dataclasses.dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[Kernel], Kernel]


# The passes whose output ``run_pipeline`` prints, set for a block of code by ``printing_after``,
# and the names of the passes run within that block (so that a dump that printed nothing can say so).
_PRINT_AFTER: contextvars.ContextVar[str | None] = contextvars.ContextVar("polypy_print_after", default=None)
_RAN: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("polypy_passes_ran", default=None)


@contextlib.contextmanager
def printing_after(names: str | None):
    """Within the block, every ``run_pipeline`` prints the IR after the passes ``names`` (comma
    separated, as ``POLYPY_PRINT_AFTER``; None: no change). Yields the set of the names of the
    passes run within the block."""
    token = _PRINT_AFTER.set(names) if names is not None else None
    ran: set[str] = set()
    ran_token = _RAN.set(ran)
    try:
        yield ran
    finally:
        _RAN.reset(ran_token)
        if token is not None:
            _PRINT_AFTER.reset(token)


@on_big_stack
def run_pipeline(
    kernel: Kernel | KernelVersions,
    passes: Sequence[Pass],
    *,
    verify: bool = True,
    timings: dict[str, float] | None = None,
    print_after: str | None = None,
    stream=None,
) -> Kernel | KernelVersions:
    """Apply ``passes`` in order; see the module docstring."""
    wanted = print_after if print_after is not None else _PRINT_AFTER.get()
    if wanted is None:
        wanted = os.environ.get("POLYPY_PRINT_AFTER", "")
    dump_names = {w.strip() for w in wanted.split(",") if w.strip()}
    out = stream if stream is not None else sys.stderr
    verified = False
    for p in passes:
        start = time.perf_counter()
        try:
            result = p.run(kernel)
        except UserError:
            raise
        except InternalError as exc:
            raise InternalError(f"in pass {p.name}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - re-raised with the pass named
            raise InternalError(f"in pass {p.name} on kernel {kernel.name!r}: {type(exc).__name__}: {exc}") from exc
        if timings is not None:
            timings[p.name] = timings.get(p.name, 0.0) + time.perf_counter() - start
        ran = _RAN.get()
        if ran is not None:
            ran.add(p.name)
        kind = Kernel if isinstance(kernel, Kernel) else KernelVersions
        if not isinstance(result, kind):
            raise InternalError(f"pass {p.name} returned {type(result).__name__}, not a {kind.__name__}")
        if verify and (result is not kernel or p is passes[-1] and not verified):
            # A pass that changed nothing returns its input: checked once, not after every pass.
            try:
                _verify(result, kernel)
            except InternalError as exc:
                raise InternalError(f"after pass {p.name}: {exc}") from exc
            verified = True
        if p.name in dump_names or "all" in dump_names:
            print(f"// ----- IR after {p.name} ({kernel.name})", file=out)
            print(print_kernel(result) if isinstance(result, Kernel) else print_versions(result), file=out, end="")
        kernel = result
    return kernel


def _verify(result: Kernel | KernelVersions, before: Kernel | KernelVersions) -> None:
    """``verify_kernel`` on ``result``, or on each kernel of versions that ``before`` did not have."""
    if isinstance(result, Kernel):
        verify_kernel(result)
        return
    old = {id(k) for k in before.kernels} if isinstance(before, KernelVersions) else set()
    for k in result.kernels:
        if id(k) not in old:
            verify_kernel(k)
