"""Running a grid of blocks on all cores.

The compiled ``K_worker(next, total, chunk, ...)`` takes chunks of consecutive block ids from the
counter ``*next`` (an atomic fetch-add) until none is left. A launch calls it once on each of its
threads -- the calling thread plus helpers from a persistent pool -- with the same counter: one
native call per thread, scratch memory allocated once per thread, and uneven blocks (or a core
busy with something else) balance out without going back to Python. Each call goes through
ctypes, which releases the GIL for the duration of the native call: the threads run truly in
parallel.

The pool hands work over with one lock pair per helper thread (no futures, no queues): waking
helpers costs a few microseconds each. A launch that finds the pool busy (another Python thread
is launching) runs on its calling thread alone -- the counter protocol makes one call enough.
Launches too small to repay the wake-up run on the calling thread too (``JitKernel.run`` decides,
from what the blocks of earlier launches of the same kernel and block shape cost: the time spent
in the native calls, which ``run_workers`` returns).
"""
from __future__ import annotations

import functools
import os
import threading
import time
from typing import Callable

from polypy.errors import Loc, UserError

# Chunks per thread: enough to balance uneven blocks and a core that is busy elsewhere, few
# enough that the shared counter is not contended (one atomic add per chunk).
CHUNKS_PER_WORKER = 16


@functools.cache
def default_threads() -> int:
    """The cores this process may use (looked up once: every launch asks)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class LaunchError(UserError):
    """A compiled kernel reported a failure (its status code)."""

    def __init__(self, status: int):
        what = "out of memory allocating its shared/local memory" if status == 1 else f"failed with status {status}"
        super().__init__(f"kernel launch {what}")
        self.status = status


class BoundsError(UserError):
    """A bounds-checked launch stopped at an access outside its array (nothing was touched there)."""

    def __init__(self, message: str, loc: Loc | None = None, *, kernel: str, buffer: str, index: int, extent: int,
                 kind: str):
        super().__init__(message, loc)
        self.kernel = kernel
        self.buffer = buffer
        self.index = index
        self.extent = extent
        self.kind = kind


def chunk_size(num_blocks: int, workers: int) -> int:
    """Blocks per chunk for a launch of ``num_blocks`` on ``workers`` threads."""
    if workers <= 1:
        return max(1, num_blocks)
    return max(1, num_blocks // (workers * CHUNKS_PER_WORKER))


class _Helper:
    """One pool thread: ``go`` is released to start ``task``, ``done`` when it has returned."""

    def __init__(self) -> None:
        self.go = threading.Lock()
        self.go.acquire()
        self.done = threading.Lock()
        self.done.acquire()
        self.task: Callable[[], None] | None = None
        self.error: BaseException | None = None
        threading.Thread(target=self._loop, name="polypy-worker", daemon=True).start()

    def _loop(self) -> None:
        while True:
            self.go.acquire()
            try:
                assert self.task is not None
                self.task()
            except BaseException as exc:  # noqa: BLE001 - handed to the launching thread
                self.error = exc
            self.done.release()

    def start(self, task: Callable[[], None]) -> None:
        self.task, self.error = task, None
        self.go.release()

    def join(self) -> BaseException | None:
        self.done.acquire()
        self.task = None
        return self.error


class _WorkerPool:
    """The process-wide helper threads (a cache: created on first use, grown on demand)."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._busy = threading.Lock()
        self._helpers: list[_Helper] = []

    def run(self, task: Callable[[], None], helpers: int) -> None:
        """``task`` on the calling thread and on ``helpers`` pool threads at once; returns when
        every copy has returned (re-raising the first exception). When the pool is in use by
        another launch, ``task`` runs on the calling thread only."""
        if helpers <= 0 or not self._busy.acquire(blocking=False):
            task()
            return
        try:
            while len(self._helpers) < helpers:
                self._helpers.append(_Helper())
            team = self._helpers[:helpers]
            for h in team:
                h.start(task)
            error: BaseException | None = None
            try:
                task()
            except BaseException as exc:  # noqa: BLE001 - re-raised once the helpers are done
                error = exc
            for h in team:
                failure = h.join()
                if error is None:
                    error = failure
            if error is not None:
                raise error
        finally:
            self._busy.release()


_POOL_CACHE = _WorkerPool()
if hasattr(os, "register_at_fork"):  # a forked child has none of the parent's threads
    os.register_at_fork(after_in_child=_POOL_CACHE._reset)


def run_workers(call: Callable[[], int], workers: int) -> float:
    """``call()`` (one ``K_worker`` call on a launch's counter) on ``workers`` threads; raise on a
    nonzero status. Returns the seconds spent in ``call`` on all threads together: what the
    launch's blocks cost, without the time it took to wake the helpers."""
    failures: list[int] = []
    busy: list[float] = []

    def task() -> None:
        start = time.perf_counter()
        status = call()
        busy.append(time.perf_counter() - start)
        if status:
            failures.append(status)

    _POOL_CACHE.run(task, workers - 1)
    if failures:
        raise LaunchError(failures[0])
    return sum(busy)
