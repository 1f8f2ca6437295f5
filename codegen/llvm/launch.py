"""Running a grid of blocks on all cores.

The compiled ``K_blocks(first, last, ...)`` runs a range of linear block ids. A launch splits
``[0, num_blocks)`` into chunks of consecutive blocks; worker threads (a persistent pool, plus
the calling thread) take chunks from a shared counter until none is left, so uneven blocks
balance out. Each call goes through ctypes, which releases the GIL for the duration of the
native call: the workers run truly in parallel. Each call allocates its own shared/local
scratch (once per chunk, reused by every block of the chunk).
"""
from __future__ import annotations

import concurrent.futures
import itertools
import os
import threading
from typing import Callable

from polypy.errors import UserError

# Chunks per worker: enough to balance uneven blocks, few enough that per-call overhead
# (a ctypes call, scratch allocation) stays negligible.
CHUNKS_PER_WORKER = 8


class _WorkerPool:
    """The process-wide worker threads (a cache: created on first use, grown on demand)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._size = 0

    def submit(self, fn: Callable[[], None], copies: int) -> list[concurrent.futures.Future]:
        """Run ``copies`` calls of ``fn`` on pool threads (the pool grows to at least ``copies``)."""
        with self._lock:
            if self._executor is None or copies > self._size:
                if self._executor is not None:
                    self._executor.shutdown(wait=False)  # its idle threads exit; running work finishes
                self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=copies,
                                                                       thread_name_prefix="polypy-worker")
                self._size = copies
            return [self._executor.submit(fn) for _ in range(copies)]


_POOL_CACHE = _WorkerPool()


def default_threads() -> int:
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


def run_blocks(call: Callable[[int, int], int], num_blocks: int, threads: int) -> None:
    """``call(first, last)`` over ``[0, num_blocks)`` on ``threads`` threads; raise on a status."""
    if num_blocks <= 0:
        return
    workers = max(1, min(threads, num_blocks))
    if workers == 1:
        status = call(0, num_blocks)
        if status:
            raise LaunchError(status)
        return
    chunk = max(1, num_blocks // (workers * CHUNKS_PER_WORKER))
    starts = itertools.count(0, chunk)  # next() is atomic under the GIL
    failures: list[int] = []

    def work() -> None:
        while not failures:
            first = next(starts)
            if first >= num_blocks:
                return
            status = call(first, min(first + chunk, num_blocks))
            if status:
                failures.append(status)
                return

    futures = _POOL_CACHE.submit(work, workers - 1)
    try:
        work()
    finally:
        for f in futures:
            f.result()
    if failures:
        raise LaunchError(failures[0])
