"""The classic LLTM of PyTorch's extension tutorial: polypy's build of its CUDA extension against
the tutorial's own hand-written C++ CPU version, timed.

Takes an extracted copy of the tutorial before the package (github.com/pytorch/extension-cpp at
the parent of ec66d01: ``cpp/lltm.cpp``, ``cuda/lltm_cuda.cpp``, ``cuda/lltm_cuda_kernel.cu``;
this script fetches nothing, and polypy holds none of its code). Builds

* ``cuda/lltm_cuda.cpp`` + ``cuda/lltm_cuda_kernel.cu`` with ``polypy.torch.load`` (translated),
* ``cpp/lltm.cpp`` with ``torch.utils.cpp_extension.load`` and ``-O3`` (the tutorial's C++ CPU
  version, as its ``cpp/jit.py`` builds it, optimized),

checks that their forward and backward agree (every output the two have in common, against each
other, and the forward's ``new_h`` / ``new_cell`` against the tutorial's formulas in PyTorch
operations), and times both calls, interleaved (one call of each in turn, ``--repeat`` rounds),
best and median, for each thread count in its own process (``OMP_NUM_THREADS`` and
``torch.set_num_threads``). Sizes are batch / features / state (the tutorial's ``benchmark.py``
defaults: 16 / 32 / 128).

    python -m bench.torch_extensions --lltm /tmp/lltm --time [--build DIR] [--repeat 200]
        [--threads 1,2] [--dtypes float32,float64] [--sizes 16/32/128,64/256/1024]

(Against PyTorch 2.13 the classic extension needs its three uses of the removed ``Tensor.type()``
changed in a scratch copy first: docs/torch_extensions.md.)
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_SIZES = ((16, 32, 128), (64, 256, 1024))

CHILD = r"""
import json, math, statistics, sys, time
sys.path.insert(0, {root!r})
import torch
import torch.utils.cpp_extension as ce
import polypy.torch as pt
threads, lltm, build, repeat = {threads!r}, {lltm!r}, {build!r}, {repeat!r}
torch.set_num_threads(threads)
poly = pt.load("lltm_cuda", [lltm + "/cuda/lltm_cuda.cpp", lltm + "/cuda/lltm_cuda_kernel.cu"],
               build_directory=build + "/poly")
cpp = ce.load("lltm_cpp", [lltm + "/cpp/lltm.cpp"], extra_cflags=["-O3"], build_directory=build + "/cpp")

def reference(x, w, b, h, c):   # the tutorial's formulas, in PyTorch operations
    gates = torch.addmm(b, torch.cat([h, x], 1), w.t()).chunk(3, 1)
    new_c = c + torch.nn.functional.elu(gates[2]) * torch.sigmoid(gates[0])
    return torch.tanh(new_c) * torch.sigmoid(gates[1]), new_c

def best_median(samples):
    return min(samples), statistics.median(samples)

out = []
for dtype_name in {dtypes!r}:
    dtype = getattr(torch, dtype_name)
    for batch, features, state in {sizes!r}:
        torch.manual_seed(0)
        stdv = 1.0 / math.sqrt(state)
        x = torch.randn(batch, features, dtype=dtype)
        h = torch.randn(batch, state, dtype=dtype)
        c = torch.randn(batch, state, dtype=dtype)
        w = torch.empty(3 * state, features + state, dtype=dtype).uniform_(-stdv, stdv)
        b = torch.empty(1, 3 * state, dtype=dtype).uniform_(-stdv, stdv)
        gh, gc = torch.randn(batch, state, dtype=dtype), torch.randn(batch, state, dtype=dtype)
        pf, cf = poly.forward(x, w, b, h, c), cpp.forward(x, w, b, h, c)
        # The extension's backward takes the gates as (batch, 3, state), the C++ one as (batch, 3 * state).
        pb_args = (gh, gc, *pf[1:], w)
        cb_args = (gh, gc, *cf[1:], w)
        pb, cb = poly.backward(*pb_args), cpp.backward(*cb_args)
        diff = 0.0
        # In float64 too: the extension's elu goes through fmaxf / fminf, float functions (in CUDA as here).
        tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-5, atol=1e-6)
        for p, q in [*zip(pf[:6], cf[:6]), (pf[6].reshape(batch, -1), cf[6]), *zip(pb[:5], cb[:5]),
                     *zip(pf[:2], reference(x, w, b, h, c))]:
            torch.testing.assert_close(p, q, **tol)
            diff = max(diff, (p - q).abs().max().item())
        calls = {{"poly_fwd": lambda: poly.forward(x, w, b, h, c), "cpp_fwd": lambda: cpp.forward(x, w, b, h, c),
                  "poly_bwd": lambda: poly.backward(*pb_args), "cpp_bwd": lambda: cpp.backward(*cb_args)}}
        samples = {{k: [] for k in calls}}
        for f in calls.values():
            f()   # warm: the allocator's blocks, the OpenMP team
        for _ in range(repeat):
            for k, f in calls.items():
                t = time.perf_counter(); f(); samples[k].append(time.perf_counter() - t)
        out.append(dict(dtype=dtype_name, size=[batch, features, state], max_diff=diff,
                        **{{k: best_median(v) for k, v in samples.items()}}))
print("RESULT " + json.dumps(out))
"""


def parse_sizes(text: str) -> tuple[tuple[int, int, int], ...]:
    """``16/32/128,64/256/1024`` -> ((16, 32, 128), (64, 256, 1024))."""
    sizes = []
    for part in text.split(","):
        numbers = tuple(int(n) for n in part.split("/"))
        if len(numbers) != 3:
            raise SystemExit(f"--sizes: {part!r} is not batch/features/state")
        sizes.append(numbers)
    return tuple(sizes)


def run_threads(lltm: pathlib.Path, build: pathlib.Path, threads: int, repeat: int,
                dtypes: list[str], sizes: tuple[tuple[int, int, int], ...]) -> list[dict]:
    """One process with ``threads`` OpenMP threads: builds (or reloads) both, checks, times."""
    for sub in ("poly", "cpp"):
        (build / sub).mkdir(parents=True, exist_ok=True)
    code = CHILD.format(root=str(ROOT), threads=threads, lltm=str(lltm), build=str(build), repeat=repeat,
                        dtypes=dtypes, sizes=sizes)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise SystemExit(f"LLTM with {threads} threads failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def time_lltm(lltm: pathlib.Path, build: pathlib.Path, *, repeat: int, threads: list[int], dtypes: list[str],
              sizes: tuple[tuple[int, int, int], ...]) -> None:
    """Prints one table row per thread count, dtype and size (ratios above 1: polypy faster)."""
    print(f"load average before: {os.getloadavg()[0]:.1f}; best (median) of {repeat} interleaved calls, ms")
    print(f"{'threads':>7} {'dtype':>7} {'b/f/s':>12} {'fwd polypy':>16} {'fwd C++':>16} {'C++/polypy':>10} "
          f"{'bwd polypy':>16} {'bwd C++':>16} {'C++/polypy':>10} {'max diff':>8}")
    for n in threads:
        for r in run_threads(lltm, build, n, repeat, dtypes, sizes):
            cells = {k: f"{r[k][0] * 1e3:.4f} ({r[k][1] * 1e3:.4f})" for k in ("poly_fwd", "cpp_fwd", "poly_bwd", "cpp_bwd")}
            size = "/".join(map(str, r["size"]))
            print(f"{n:>7} {r['dtype']:>7} {size:>12} {cells['poly_fwd']:>16} {cells['cpp_fwd']:>16} "
                  f"{r['cpp_fwd'][0] / r['poly_fwd'][0]:>10.2f} {cells['poly_bwd']:>16} {cells['cpp_bwd']:>16} "
                  f"{r['cpp_bwd'][0] / r['poly_bwd'][0]:>10.2f} {r['max_diff']:>8.1e}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
