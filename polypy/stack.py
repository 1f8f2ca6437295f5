"""Room for deep input: run a stage on a thread with a large stack and a high recursion limit.

Machine-generated CUDA holds expressions of 100,000 terms (``x[0] + x[1] + ...``, a left-deep
tree 100,000 levels deep) and statements nested a thousand deep. Every walk of polypy's IR (the
one ``Visitor``/``Mutator``, printers, passes, code generators) and libclang's parser recurse
over such trees. Rather than rewrite each walk as a loop, the entry points of the stages run on
a worker thread that has the stack those walks need::

    @on_big_stack
    def load(path, ...): ...          # parse + pipeline on a 1 GiB stack

``call_on_big_stack`` starts the thread with ``threading.stack_size(STACK_BYTES)`` and raises
``sys.setrecursionlimit`` to ``RECURSION_LIMIT`` while it runs (restored when the last such call
ends); the caller waits. A call made on such a thread already runs directly, so entry points
nest freely. Whatever the function returns or raises comes back unchanged (a ``UserError``
keeps its class, message and location), and the thread runs in a copy of the caller's
``contextvars`` context (``printing_after`` and the like still apply).

The stack is reserved, not committed: pages are touched only as deep as a walk goes. The
limits on what this room holds are in ``polypy.ir.depth`` (``MAX_DEPTH``): deeper input is
refused with a located ``UserError`` before any walk can run out of stack.

On Python 3.11 the recursion limit counts Python frames and the C stack is the thread's own, so
the two settings here decide how deep a walk may go. (The recursion limit is per interpreter:
while a deep call runs, other threads see the raised limit too.)
"""
from __future__ import annotations

import contextvars
import functools
import sys
import threading
from typing import Any, Callable, TypeVar

# Reserved stack of the worker thread. Measured (a 2,000-term sum through the frontend, the
# pipelines and both code generators; a 1,000,000-term sum through libclang): the walks take
# 500-1000 bytes of C stack per level of nesting, libclang about 600, so 1 GiB holds about a
# million levels.
STACK_BYTES = 1 << 30
# Python frames allowed on the worker thread: the walks take about 6 frames per level, so this
# stops a walk (RecursionError) near 500,000 levels, before the C stack runs out, and leaves
# room above polypy.ir.depth.MAX_DEPTH (200,000 levels).
RECURSION_LIMIT = 3_000_000

_local = threading.local()
_limit_lock = threading.Lock()
_limit_users = 0
_saved_limit = 0

F = TypeVar("F", bound=Callable[..., Any])


def on_big_stack(fn: F) -> F:
    """Decorator: every call of ``fn`` runs through ``call_on_big_stack``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return call_on_big_stack(fn, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def on_big_stack_now() -> bool:
    """Whether the calling thread is one of ``call_on_big_stack``'s workers."""
    return getattr(_local, "deep", False)


def call_on_big_stack(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` on a worker thread with a large stack (see the module docstring);
    directly when the caller already is such a worker."""
    if on_big_stack_now():
        return fn(*args, **kwargs)
    context = contextvars.copy_context()
    outcome: dict[str, Any] = {}

    def work() -> None:
        _local.deep = True
        try:
            outcome["value"] = context.run(fn, *args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller unchanged
            outcome["error"] = exc

    _raise_limit()
    try:
        with _stack_size_lock:
            old = threading.stack_size(STACK_BYTES)
            try:
                worker = threading.Thread(target=work, name=f"polypy-deep:{getattr(fn, '__name__', 'call')}",
                                          daemon=True)
                worker.start()
            finally:
                threading.stack_size(old)
        worker.join()
    finally:
        _restore_limit()
    if "error" in outcome:
        error = outcome.pop("error")
        try:
            raise error
        finally:
            del error  # no reference cycle through this frame
    return outcome["value"]


# threading.stack_size is process-wide: set it, start the thread, and put it back under a lock.
_stack_size_lock = threading.Lock()


def _raise_limit() -> None:
    global _limit_users, _saved_limit
    with _limit_lock:
        if _limit_users == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, RECURSION_LIMIT))
        _limit_users += 1


def _restore_limit() -> None:
    global _limit_users
    with _limit_lock:
        _limit_users -= 1
        if _limit_users == 0:
            sys.setrecursionlimit(_saved_limit)
