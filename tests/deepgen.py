"""Machine-generated long and deep CUDA kernels, and a measurement of what polypy's tools cost on
them (this module holds no tests; tests/test_deep_input.py uses its generators).

Each generator takes a size (terms of an expression, levels of nesting) and returns the source
of one kernel ``k(int n, const float* x, float* out)`` whose thread ``i < n`` writes ``out[i]``
from ``x[i..i+6]``: long sums, products of a local and of loads, ``&&`` chains, ``?:`` chains,
and nested ``if``s, brackets and ``for`` loops.

Run as a script, it measures the command line on each case and size (CPU seconds and maximum
resident memory, from ``/usr/bin/time -v``; a command past the limit on CPU seconds is reported
as such)::

    PYTHONPATH=. python tests/deepgen.py sum,ifs 1000,10000 translate,grad --cpu-limit 120
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from typing import Callable

HEAD = "__global__ void k(int n, const float* x, float* out) {\n" \
       "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"


def _kernel(body: str) -> str:
    return f"{HEAD}  if (i < n) {{\n{body}\n  }}\n}}\n"


def coef(j: int) -> str:
    return f"{(j % 13) * 0.125 - 0.75:.3f}f"


def long_sum(terms: int) -> str:
    """``out[i] = c0*x[i+0] + c1*x[i+1] + ...``."""
    return _kernel("    out[i] = " + " + ".join(f"{coef(j)}*x[i+{j % 7}]" for j in range(terms)) + ";")


def local_product(terms: int) -> str:
    """``float v = x[i]; out[i] = v * v * ... * v``."""
    return _kernel("    float v = x[i];\n    out[i] = " + " * ".join(["v"] * terms) + ";")


def load_product(terms: int) -> str:
    """``out[i] = x[i] * x[i+1] * ... `` (loads)."""
    return _kernel("    out[i] = " + " * ".join(f"x[i+{j % 7}]" for j in range(terms)) + ";")


def and_chain(terms: int) -> str:
    """``out[i] = x[i] * (x[i] > c0 && x[i+1] > c1 && ...)``."""
    chain = " && ".join(f"x[i+{j % 7}] > {coef(j)}" for j in range(terms))
    return _kernel(f"    out[i] = x[i] * ({chain});")


def select_chain(terms: int) -> str:
    """``out[i] = x[i] < c0 ? c0*x[i+1] : x[i] < c1 ? ... : x[i]`` (a right-deep ``?:`` chain)."""
    arms = "".join(f"x[i] < {j}.5f ? {coef(j)}*x[i+{j % 7}] : " for j in range(terms))
    return _kernel(f"    out[i] = {arms}x[i];")


def nested_ifs(levels: int) -> str:
    """``if (acc < 2) { acc = acc*0.5 + 0.75; if (acc < 3) { ... } }``, ``levels`` deep."""
    opens = "".join(f"    if (acc < {j + 2}.0f) {{ acc = acc * 0.5f + 0.75f;\n" for j in range(levels))
    return _kernel(f"    float acc = x[i];\n{opens}    {'}' * levels}\n    out[i] = acc;")


def nested_parens(levels: int) -> str:
    e = "x[i]"
    for j in range(levels):
        e = f"({e} * 0.5f + {j % 5}.0f)"
    return _kernel(f"    out[i] = {e};")


def nested_fors(levels: int) -> str:
    """``for (int a0 = 0; a0 < 1 + (i & 1); ++a0) for (int a1 ...) acc = acc * 0.5f + x[i];``:
    ``levels`` loops, each running once or twice (twice only on odd threads, innermost ten)."""
    loops = "".join(f"    for (int a{j} = 0; a{j} < {'1 + (i & 1)' if j >= levels - 10 else '1'}; ++a{j})\n"
                    for j in range(levels))
    return _kernel(f"    float acc = 0.0f;\n{loops}      acc = acc * 0.5f + x[i];\n    out[i] = acc;")


CASES: dict[str, Callable[[int], str]] = {
    "sum": long_sum, "local-product": local_product, "load-product": load_product, "and": and_chain,
    "select": select_chain, "ifs": nested_ifs, "parens": nested_parens, "fors": nested_fors,
}

TOOLS = {
    "translate": lambda src, out: ["translate", src, "-o", out],
    "llvm": lambda src, out: ["translate", src, "--emit", "llvm", "-o", out],
    "grad": lambda src, out: ["grad", src, "--kernel", "k", "-o", out],
    "fwd": lambda src, out: ["grad", src, "--kernel", "k", "--mode", "forward", "-o", out],
}


def measure(case: str, size: int, tool: str, *, timeout: float, workdir: str) -> str:
    """One row: the command's CPU seconds and max RSS, or how it ended otherwise."""
    src = os.path.join(workdir, f"{case}{size}.cu")
    out = os.path.join(workdir, f"{case}{size}.{tool}.out")
    with open(src, "w") as f:
        f.write(CASES[case](size))
    # A limit on CPU seconds, not on wall-clock time: the machine may be shared.
    cmd = ["/usr/bin/time", "-v", "bash", "-c", f'ulimit -t {int(timeout)}; exec "$@"', "limit", sys.executable,
           "-m", "polypy.driver.cli", *TOOLS[tool](src, out)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", done.stderr).group(1))
    system = float(re.search(r"System time \(seconds\): ([\d.]+)", done.stderr).group(1))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1)) // 1024
    status = {0: "ok", 128 + 9: f"over {timeout:g} s CPU", 128 + 24: f"over {timeout:g} s CPU"}.get(
        done.returncode, f"exit {done.returncode}")
    if done.returncode == 1:
        status += ": " + next((line for line in done.stderr.splitlines() if "error:" in line), "?")[-120:]
    return f"{case:14} {size:>7} {tool:9} {user + system:8.1f} s {rss:6} MB  {status}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", help=f"comma separated: {','.join(CASES)}")
    parser.add_argument("sizes", help="comma separated terms or levels")
    parser.add_argument("tools", help=f"comma separated: {','.join(TOOLS)}")
    parser.add_argument("--cpu-limit", type=float, default=120.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as workdir:
        for case in args.cases.split(","):
            for size in map(int, args.sizes.split(",")):
                for tool in args.tools.split(","):
                    print(measure(case, size, tool, timeout=args.cpu_limit, workdir=workdir), flush=True)
    return 0


# ---------------------------------------------------------------- counting work in the tests
def counted_calls(monkeypatch, module, name: str, run: Callable[[], None]) -> int:
    """How often ``module.name`` (a function; for a generator, the items it yields) is called
    while ``run()`` runs (tests/test_deep_input.py, tests/test_long_expressions.py)."""
    import inspect

    count = [0]
    original = getattr(module, name)

    def counting(*args, **kwargs):
        count[0] += 1
        return original(*args, **kwargs)

    def counting_items(*args, **kwargs):
        for x in original(*args, **kwargs):
            count[0] += 1
            yield x

    with monkeypatch.context() as m:
        m.setattr(module, name, counting_items if inspect.isgeneratorfunction(original) else counting)
        run()
    return count[0]


def cli_step(tmp_path, source: str, name: str, command: str, *args: str) -> Callable[[], None]:
    """A function that writes ``source`` to ``tmp_path/name.cu`` and runs ``polypy COMMAND`` on it
    with ``args`` (exit status 0 asserted), its output in ``tmp_path``."""
    from polypy.driver.cli import main as polypy_main

    def run() -> None:
        path = tmp_path / f"{name}.cu"
        path.write_text(source)
        assert polypy_main([command, str(path), *args, "-o", str(tmp_path / f"{name}.out")]) == 0

    return run


if __name__ == "__main__":
    sys.exit(main())
