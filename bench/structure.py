"""What barrier elimination and forwarding change in each sample's translation, kernel by kernel.

For every sample: the ``__syncthreads()`` in the source and how many survive, and in the CPU form
with and without the polyhedral optimizations, the thread-loop nests per block (one per barrier
interval) and the per-thread buffers (values kept across thread loops). Printed side by side;
the time each variant takes is in ``python -m bench`` (columns polypy-llvm / polypy-noopt).

    python -m bench.structure [--only reduce_sum,backprop_layerforward]
"""
from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import polypy  # noqa: E402
from polypy.driver.pipelines import to_cpu  # noqa: E402
from polypy.ir import nodes as n  # noqa: E402
from polypy.ir.visitor import walk  # noqa: E402
from samples.spec import all_samples  # noqa: E402


def barriers(kernel: n.Kernel) -> int:
    return sum(isinstance(x, n.Barrier) for x in walk(kernel))


def thread_nests(kernel: n.Kernel) -> int:
    """Outermost thread loops (one nest per barrier interval and warp step)."""
    count = 0

    def visit(stmts, inside: bool) -> None:
        nonlocal count
        for s in stmts:
            is_thread = isinstance(s, n.For) and s.kind == "threads"
            if is_thread and not inside:
                count += 1
            for field in ("then", "orelse", "body", "update"):
                child = getattr(s, field, None)
                if isinstance(child, tuple):
                    visit(child, inside or is_thread)

    visit(kernel.body, False)
    return count


def per_thread_buffers(kernel: n.Kernel) -> int:
    """CPU-form ``local`` buffers indexed by thread (their shape mentions blockDim)."""
    return sum(1 for b in kernel.buffers if b.space == "local" and b.shape is not None
               and any(isinstance(x, n.BlockDim) for d in b.shape for x in walk(d)))


def rows(only: set[str]) -> list[list[str]]:
    out = []
    for s in all_samples():
        if only and s.name not in only:
            continue
        module = polypy.load(s.source, defines=s.defines)
        k = module.kernel(s.kernel)
        opt, plain = to_cpu(k, optimize=True), to_cpu(k, optimize=False)
        from gpu2cpu.barriers import eliminate_barriers  # the same pass to_cpu runs, for the count
        from gpu2cpu.forward_shared import eliminate_dead_shared_stores, forward_shared_stores

        kept = barriers(eliminate_barriers(eliminate_dead_shared_stores(forward_shared_stores(k))))
        out.append([s.name, str(barriers(k)), str(kept), f"{thread_nests(plain)} -> {thread_nests(opt)}",
                    f"{per_thread_buffers(plain)} -> {per_thread_buffers(opt)}"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="")
    args = parser.parse_args(argv)
    header = ["kernel", "barriers", "kept", "thread-loop nests (noopt -> opt)", "per-thread buffers (noopt -> opt)"]
    table = [header] + rows({x for x in args.only.split(",") if x})
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for i, r in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
