"""PyTorch benchmark: a CUDA kernel run through ``polypy.torch`` vs PyTorch's own CPU operator.

For layernorm (``samples/layernorm.cu`` vs ``torch.nn.functional.layer_norm``) and row softmax
(``samples/softmax_rows.cu`` vs ``torch.softmax(x, -1)``), in float32 on the same tensors:

* ``fwd``: the forward alone (``torch.no_grad()``); polypy's time includes the wrapper (checks,
  output allocation, uninitialized as PyTorch's are: ``zero_outputs=False``);
* ``bwd``: the backward alone (``torch.autograd.grad`` on a graph kept with ``retain_graph``):
  polypy launches the synthesized ``K_grad`` (which also repeats the kernel's effect), PyTorch
  its hand-written backward kernel;
* ratios are PyTorch's time over polypy's: above 1, the translated CUDA kernel is faster.

Before anything is timed, polypy's outputs and gradients are compared with PyTorch's (the
``max err`` column: over the output and each gradient, the largest difference relative to the
largest magnitude of PyTorch's result). Best of ``--repeat`` runs, interleaved.
PyTorch runs with ``torch.get_num_threads()`` threads, polypy on every core this process may use.

    python -m bench.torch_ops [--small] [--repeat N] [--only layernorm,softmax]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import sys
from typing import Any, Callable, TextIO

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import polypy  # noqa: E402
from bench.timing import Timing, time_interleaved  # noqa: E402

# rows x cols per op: the sizes bench/sizes.py uses for the samples, and a smoke size.
SIZES = {"layernorm": (4096, 4096), "softmax": (4096, 2048)}
SMALL = {"layernorm": (64, 256), "softmax": (64, 256)}
BLOCK = 256
EPS = 1e-5


@dataclasses.dataclass(frozen=True)
class Row:
    op: str
    shape: tuple[int, int]
    polypy_fwd: float  # seconds, best run
    torch_fwd: float
    polypy_bwd: float
    torch_bwd: float
    max_error: float  # largest max|polypy - torch| / max|torch| over the output and the gradients

    @property
    def fwd_ratio(self) -> float:
        return self.torch_fwd / self.polypy_fwd

    @property
    def bwd_ratio(self) -> float:
        return self.torch_bwd / self.polypy_bwd


@dataclasses.dataclass
class Op:
    """One operator: the polypy function, PyTorch's, and their inputs (the first is x)."""

    polypy_fn: Callable[..., Any]
    torch_fn: Callable[..., Any]
    inputs: list[Any]


def _rows(x: Any) -> int:
    return x.numel() // x.shape[-1]


def make_op(name: str, rows: int, cols: int) -> Op:
    import torch
    import torch.nn.functional as F

    import polypy.torch as pt

    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows, cols, generator=g) * 2 + 0.5
    if name == "layernorm":
        mod = polypy.compile(ROOT / "samples" / "layernorm.cu")
        fn = pt.function(mod.layernorm, inputs=["x", "gamma", "beta"], outputs={"y": "x"},
                         params={"cols": lambda x: x.shape[-1], "eps": EPS}, grid=_rows, block=BLOCK,
                         zero_outputs=False)  # the kernel writes every element, as torch's own op does
        gamma = torch.rand(cols, generator=g) + 0.5
        beta = torch.rand(cols, generator=g) - 0.5
        return Op(fn, lambda x, gamma, beta: F.layer_norm(x, (x.shape[-1],), gamma, beta, eps=EPS), [x, gamma, beta])
    if name == "softmax":
        mod = polypy.compile(ROOT / "samples" / "softmax_rows.cu")
        fn = pt.function(mod.softmax_rows, inputs=["x"], outputs={"y": "x"},
                         params={"cols": lambda x: x.shape[-1]}, grid=_rows, block=BLOCK,
                         zero_outputs=False)
        return Op(fn, lambda x: torch.softmax(x, dim=-1), [x])
    raise SystemExit(f"unknown op {name!r} (ops: {', '.join(SIZES)})")


def measure(name: str, rows: int, cols: int, *, repeat: int, budget_s: float = 10.0) -> Row:
    import torch

    op = make_op(name, rows, cols)
    leaves = {impl: [t.clone().requires_grad_() for t in op.inputs] for impl in ("polypy", "torch")}
    fns = {"polypy": op.polypy_fn, "torch": op.torch_fn}
    seed = torch.randn(rows, cols, generator=torch.Generator().manual_seed(1))
    graphs = {impl: fns[impl](*leaves[impl]) for impl in fns}

    def backward(impl: str) -> tuple:
        return torch.autograd.grad(graphs[impl], leaves[impl], grad_outputs=seed, retain_graph=True)

    # correctness first (this also compiles the gradient kernel)
    def rel_error(ours: Any, theirs: Any) -> float:
        ours, theirs = ours.detach().double(), theirs.detach().double()
        return float((ours - theirs).abs().max() / theirs.abs().max().clamp_min(1e-30))

    error = rel_error(graphs["polypy"], graphs["torch"])
    for ours, theirs in zip(backward("polypy"), backward("torch")):
        error = max(error, rel_error(ours, theirs))

    def forward_runner(impl: str):
        def run(_: Any) -> None:
            with torch.no_grad():
                fns[impl](*op.inputs)
        return run

    def backward_runner(impl: str):
        return lambda _: backward(impl)

    fwd = time_interleaved({impl: (forward_runner(impl), {}) for impl in fns}, repeat=repeat, warmup=1,
                           budget_s=budget_s)
    bwd = time_interleaved({impl: (backward_runner(impl), {}) for impl in fns}, repeat=repeat, warmup=1,
                           budget_s=budget_s)
    for result in (*fwd.values(), *bwd.values()):
        if not isinstance(result, Timing):
            raise result
    return Row(name, (rows, cols), fwd["polypy"].best, fwd["torch"].best, bwd["polypy"].best, bwd["torch"].best,
               error)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.3f}"


def format_table(rows: list[Row]) -> str:
    head = (f"{'op':<10} {'rows x cols':>12} {'polypy fwd':>10} {'torch fwd':>10} {'fwd ratio':>9}   "
            f"{'polypy bwd':>10} {'torch bwd':>10} {'bwd ratio':>9} {'max err':>9}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.op:<10} {f'{r.shape[0]}x{r.shape[1]}':>12} {_ms(r.polypy_fwd):>10} {_ms(r.torch_fwd):>10} "
                     f"{r.fwd_ratio:>8.2f}x   {_ms(r.polypy_bwd):>10} {_ms(r.torch_bwd):>10} {r.bwd_ratio:>8.2f}x "
                     f"{r.max_error:>9.1e}")
    lines.append("times in ms (best run); ratio = torch / polypy (above 1: polypy is faster); float32")
    return "\n".join(lines)


def run(argv: list[str] | None = None, *, file: TextIO | None = None) -> list[Row]:
    """Measure and print the table; returns its rows."""
    out = file if file is not None else sys.stdout
    parser = argparse.ArgumentParser(prog="python -m bench.torch_ops", description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="small tensors: a smoke run of a few seconds")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs per variant (best is reported)")
    parser.add_argument("--only", default="", help="comma-separated ops (default: all)")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        raise SystemExit("bench.torch_ops needs PyTorch: pip install -e '.[torch]'") from None
    sizes = SMALL if args.small else SIZES
    only = [x for x in args.only.split(",") if x] or list(sizes)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"PyTorch {torch.__version__} ({torch.get_num_threads()} threads) vs polypy ({cores} cores)", file=out)
    rows = []
    for name in only:
        if name not in sizes:
            raise SystemExit(f"unknown op {name!r} (ops: {', '.join(sizes)})")
        rows.append(measure(name, *sizes[name], repeat=args.repeat))
    print(format_table(rows), file=out)
    return rows


def main(argv: list[str] | None = None) -> int:
    run(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
