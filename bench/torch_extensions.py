"""PyTorch's own extension tutorial (github.com/pytorch/extension-cpp) built for the CPU, unmodified.

Takes a checkout of that repository (this script fetches nothing, and polypy holds none of its
code) and, for the current ``extension_cpp`` package's CUDA ops (``extension_cpp/csrc/cuda/
muladd.cu`` with ``csrc/muladd.cpp``):

* builds them with ``polypy.torch.load`` (the ``.cu`` translated; the ``.cpp``, which registers
  the op schemas and its own CPU kernels, as it is; the translated CUDA kernels are registered
  after them and replace them: docs/torch_extensions.md);
* checks what the package's tests check: ``mymuladd`` and ``myadd_out`` against ``a * b + c`` and
  ``a + b``, gradients through the package's own ``register_autograd`` (its ``ops.py``, loaded
  from the checkout) against the reference's, and ``torch.library.opcheck``;
* times ``mymuladd`` against the package's hand-written C++ CPU kernels (``csrc/muladd.cpp``
  alone, built by ``torch.utils.cpp_extension.load`` with the same flags) and the Python
  baseline ``a * b + c``, best of ``--repeat``.

Each build runs in its own process (both register the ``extension_cpp`` namespace). The classic
LLTM (``cuda/lltm_cuda_kernel.cu``, in the repository's history before the package) is tried too
when ``--lltm DIR`` names an extracted copy of it; its result is printed as it comes. With
``--time`` (no package checkout needed) the LLTM is built, checked and timed against the
tutorial's own C++ CPU version instead (``bench/torch_lltm.py``).

    python -m bench.torch_extensions /tmp/extcpp [--repeat 5] [--threads N] [--build DIR] [--lltm /tmp/lltm]
    python -m bench.torch_extensions --lltm /tmp/lltm --time [--repeat 200] [--threads 1,2] [--build DIR]
        [--dtypes float32,float64] [--sizes 16/32/128,64/256/1024]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SIZES = (10_000, 1_000_000, 10_000_000)

CHILD = r"""
import json, pathlib, sys, time, importlib.util
sys.path.insert(0, {root!r})
import torch
mode, checkout, build, repeat = {mode!r}, pathlib.Path({checkout!r}), {build!r}, {repeat}
csrc = checkout / "extension_cpp" / "csrc"
flags = ["-O3", "-fopenmp"]
if mode == "polypy":
    import polypy.torch as pt
    lib = pt.load("extension_cpp", [str(csrc / "muladd.cpp"), str(csrc / "cuda" / "muladd.cu")],
                  build_directory=build, is_python_module=False, verbose=False)
else:
    import torch.utils.cpp_extension as ce
    lib = ce.load("extension_cpp", [str(csrc / "muladd.cpp")], extra_cflags=flags, extra_ldflags=["-fopenmp"],
                  build_directory=build, is_python_module=False)
torch.ops.load_library(lib)
spec = importlib.util.spec_from_file_location("extension_cpp_ops", csrc.parent / "ops.py")
ops = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ops)   # the package's register_fake / register_autograd
out = {{}}
if mode == "polypy":
    torch.manual_seed(0)
    checks = []
    for shape, c in (((3,), 1), ((20,), 3.14), ((2, 3), -0.3)):
        a, b = torch.randn(shape, requires_grad=True), torch.randn(shape, requires_grad=True)
        r = ops.mymuladd(a, b, c)
        torch.testing.assert_close(r, a * b + c)
        g = torch.randn_like(r)
        torch.testing.assert_close(torch.autograd.grad(r, [a, b], g), torch.autograd.grad(a * b + c, [a, b], g))
        torch.library.opcheck(torch.ops.extension_cpp.mymuladd.default, [a, b, c])
        torch.library.opcheck(torch.ops.extension_cpp.mymuladd.default, [a.detach(), b.detach(), c])
        checks.append(f"mymuladd{{shape}}")
    for n in (3, 20):
        a, b, o = torch.randn(n), torch.randn(n), torch.randn(n)
        ops.myadd_out(a, b, o)
        torch.testing.assert_close(o, a + b)
        torch.library.opcheck(torch.ops.extension_cpp.myadd_out.default, [a, b, torch.randn(n)])
        checks.append(f"myadd_out({{n}})")
    out["checks"] = checks
    # Which kernel serves CPU tensors: PyTorch's dispatcher names the file that registered it.
    dump = torch._C._dispatch_dump("extension_cpp::mymuladd")
    out["cpu_kernel_from"] = [line.strip() for line in dump.splitlines() if line.strip().startswith("CPU")]
for n in {sizes!r}:
    a, b = torch.randn(n), torch.randn(n)
    f = (lambda: a * b + 2.5) if mode == "python" else (lambda: torch.ops.extension_cpp.mymuladd(a, b, 2.5))
    torch.testing.assert_close(f(), a * b + 2.5)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter(); f(); best = min(best, time.perf_counter() - t)
    out[str(n)] = best
print("RESULT " + json.dumps(out))
"""


def run_child(mode: str, checkout: pathlib.Path, build: pathlib.Path, repeat: int, threads: int | None) -> dict:
    build.mkdir(parents=True, exist_ok=True)  # PyTorch's load takes an existing directory
    code = CHILD.format(root=str(ROOT), mode=mode, checkout=str(checkout), build=str(build), repeat=repeat,
                        sizes=SIZES)
    env = dict(os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {}))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise SystemExit(f"{mode} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def try_lltm(lltm: pathlib.Path, build: pathlib.Path) -> str:
    """Builds the classic LLTM CUDA extension with polypy.torch.load; the first lines of the outcome."""
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\nimport polypy.torch as pt\n"
            f"m = pt.load('lltm_cuda', [{str(lltm / 'cuda' / 'lltm_cuda.cpp')!r}, "
            f"{str(lltm / 'cuda' / 'lltm_cuda_kernel.cu')!r}], build_directory={str(build)!r})\nprint('built')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    text = (proc.stdout + proc.stderr).strip().splitlines()
    return "\n".join(text[-8:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=pathlib.Path, nargs="?", help="a checkout of github.com/pytorch/extension-cpp")
    parser.add_argument("--repeat", type=int, default=None, help="timed calls (default: 5; with --time 200)")
    parser.add_argument("--threads", type=str, default=None,
                        help="OMP_NUM_THREADS for every variant (polypy's launches, PyTorch's own operators); "
                             "with --time a list (default 1,2)")
    parser.add_argument("--build", type=pathlib.Path, default=None, help="build directory (default: a temporary one)")
    parser.add_argument("--lltm", type=pathlib.Path, default=None, help="an extracted revision with cuda/lltm_cuda_kernel.cu")
    parser.add_argument("--time", action="store_true", help="time the LLTM of --lltm against its cpp/lltm.cpp")
    parser.add_argument("--dtypes", default="float32,float64", help="with --time")
    parser.add_argument("--sizes", default=None, help="with --time: batch/features/state,... (default 16/32/128,64/256/1024)")
    args = parser.parse_args(argv)
    if args.time:
        if args.lltm is None:
            parser.error("--time needs --lltm DIR")
        from bench.torch_lltm import DEFAULT_SIZES, parse_sizes, time_lltm

        with tempfile.TemporaryDirectory(prefix="polypy-lltm-") as tmp:
            time_lltm(args.lltm, args.build or pathlib.Path(tmp), repeat=args.repeat or 200,
                      threads=[int(n) for n in (args.threads or "1,2").split(",")],
                      dtypes=args.dtypes.split(","), sizes=parse_sizes(args.sizes) if args.sizes else DEFAULT_SIZES)
        return 0
    if args.checkout is None:
        parser.error("the checkout of github.com/pytorch/extension-cpp is needed (or --lltm DIR --time)")
    args.repeat = args.repeat or 5
    args.threads = int(args.threads) if args.threads else None
    with tempfile.TemporaryDirectory(prefix="polypy-torch-ext-") as tmp:
        base = args.build or pathlib.Path(tmp)
        t = time.perf_counter()
        mine = run_child("polypy", args.checkout, base / "polypy", args.repeat, args.threads)
        print(f"polypy.torch.load build + checks: {time.perf_counter() - t:.0f} s; passed: {', '.join(mine['checks'])}")
        print(f"kernel for CPU tensors: {'; '.join(mine['cpu_kernel_from'])}")
        cpu = run_child("cpp", args.checkout, base / "cpp", args.repeat, args.threads)
        py = run_child("python", args.checkout, base / "python", args.repeat, args.threads)
        print(f"{'numel':>10} {'polypy ms':>10} {'C++ CPU ms':>11} {'python ms':>10} {'C++/polypy':>11} {'python/polypy':>14}")
        for n in SIZES:
            p, c, b = mine[str(n)], cpu[str(n)], py[str(n)]
            print(f"{n:>10} {p * 1e3:>10.3f} {c * 1e3:>11.3f} {b * 1e3:>10.3f} {c / p:>11.2f} {b / p:>14.2f}")
        if args.lltm is not None:
            print("classic LLTM with polypy.torch.load:\n" + try_lltm(args.lltm, base / "lltm"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
