"""Scaling of ``polypy.distributed`` on a Dask LocalCluster (loopback), against one process.

    python -m bench.distributed_scaling            # matmul 2048^3, jacobi 4096^2
    python -m bench.distributed_scaling --small    # seconds: a smoke run

For each workload: the launch in this process on one thread (``polypy.compile(threads=1)``),
then on a LocalCluster of 1 and of 2 worker processes with one thread each (one task per
worker, each running its blocks on one thread). Every distributed result is compared bitwise
with the single-process one. Times are the best of ``--repeat`` launches after one warm-up
launch (which compiles the kernel on the workers), the variants taking turns; ``MB in/out`` is
what one launch ships to its tasks and gets back, ``in task`` the seconds the slowest task of
the best launch spent running its blocks (the rest of the time is shipping, scheduling and
merging). Nothing is asserted: this prints figures.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import time
from typing import Any, Callable

import numpy as np

import polypy
from samples.spec import Case, sample

# name -> (case at full size, case for --small)
WORKLOADS: dict[str, tuple[Case, Case]] = {
    "matmul_tiled": (Case(grid=(128, 128), block=(16, 16), sizes={"M": 2048, "N": 2048, "K": 2048}),
                     Case(grid=(8, 8), block=(16, 16), sizes={"M": 128, "N": 128, "K": 128})),
    "jacobi2d": (Case(grid=(128, 256), block=(32, 16), sizes={"nx": 4096, "ny": 4096}),
                 Case(grid=(8, 16), block=(32, 16), sizes={"nx": 256, "ny": 256})),
}


def _copy(args: dict[str, Any]) -> dict[str, Any]:
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}


def measure(name: str, case: Case, workers: tuple[int, ...], repeat: int) -> list[tuple[str, float, str]]:
    """Rows (variant, best seconds, details). The clusters are all started first and the
    variants timed round-robin, so that a change in machine load falls on all of them alike."""
    from distributed import Client, LocalCluster

    import polypy.distributed as pd

    s = sample(name)
    args = s.make_args(np.random.default_rng(0), case, np.float32)
    here = polypy.compile(s.source, defines=s.defines, threads=1)
    single = _copy(args)
    variants: list[tuple[str, Callable[[], None], Any, dict[str, Any]]] = [
        ("1 process, 1 thread", lambda: here[name][case.grid, case.block, case.shmem](**single), None, single)]
    with contextlib.ExitStack() as stack:
        for w in workers:
            cluster = stack.enter_context(LocalCluster(n_workers=w, processes=True, threads_per_worker=1,
                                                       host="127.0.0.1", dashboard_address="127.0.0.1:0"))
            client = stack.enter_context(Client(cluster))
            there = pd.compile(client, s.source, defines=s.defines, tasks=w, threads=1)
            remote = _copy(args)
            label = f"LocalCluster {w} worker{'s' if w > 1 else ''} x 1 thread"
            variants.append((label, functools.partial(_launch, there[name], case, remote), there[name], remote))
        for _, run, _, _ in variants:
            run()  # warm-up: compiles (here or on the workers), faults the pages in
        best = [float("inf")] * len(variants)
        busy = [0.0] * len(variants)  # the slowest task's seconds in the best launch
        for _ in range(repeat):
            for i, (_, run, kernel, _) in enumerate(variants):
                start = time.perf_counter()
                run()
                seconds = time.perf_counter() - start
                if seconds < best[i]:
                    best[i] = seconds
                    busy[i] = max(kernel.last_task_seconds) if kernel is not None else 0.0
        rows = []
        for (label, _, kernel, out), seconds, in_task in zip(variants, best, busy):
            if kernel is None:
                rows.append((label, seconds, ""))
                continue
            for o in s.outputs:
                if not np.array_equal(out[o], single[o]):
                    raise SystemExit(f"{name}: distributed {o} differs from the single-process result")
            sent, got = kernel.last_transfer
            rows.append((label, seconds, f"{in_task:9.4f}  {sent / 1e6:.1f} / {got / 1e6:.1f}"))
    return rows


def _launch(kernel: Any, case: Case, args: dict[str, Any]) -> None:
    kernel[case.grid, case.block, case.shmem](**args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.distributed_scaling", description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="the small sizes (a smoke run)")
    parser.add_argument("--repeat", type=int, default=5, help="timed launches per variant (best is shown)")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads")
    opts = parser.parse_args(argv)
    for name in opts.only.split(","):
        case = WORKLOADS[name][1 if opts.small else 0]
        rows = measure(name, case, (1, 2), opts.repeat)
        base = rows[0][1]
        sizes = ", ".join(f"{k}={v}" for k, v in case.sizes.items())
        print(f"\n{name} ({sizes}; grid {case.grid}, block {case.block})")
        print(f"  {'variant':34} {'seconds':>9} {'speedup':>8}  {'in task':>9}  MB in/out")
        for label, seconds, moved in rows:
            print(f"  {label:34} {seconds:9.4f} {base / seconds:7.2f}x  {moved}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
