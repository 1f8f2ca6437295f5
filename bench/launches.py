"""What a launch costs: a host loop of small launches, polypy against a hand-written OpenMP loop.

One CUDA program of ours (``PROGRAM``): a host loop of ``steps`` pairs of launches of two tiny
kernels over ``n`` floats (JACOBI1D's shape: a three-point average, then a copy back), written
twice: as is (polypy runs the loop in one parallel region: ``frontend.merge_loops``) and with a
never-taken ``printf`` in the loop, which keeps its launches separate (one parallel region each,
as before the merge). The OpenMP program does the same sweeps with ``#pragma omp parallel for``
per sweep, and serially. Each build runs with ``OMP_WAIT_POLICY=passive`` (as ``bench``) unless
the environment sets it; every figure is the best of ``--repeat`` runs, the builds taken in turn.

Variants: ``polypy merged`` and ``polypy separate`` as translated; ``... shared`` built with
``-DPOLYPY_RT_SMALL_GRID_WORK=1``, so that every launch is spread over the team even when
its grid is small (the cost of the barrier or of the fork and join itself).

    python -m bench.launches [--n 4096,1048576] [--steps 20000] [--repeat 5] [--threads 0]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include <omp.h>
#include <cuda_runtime.h>
__global__ void average(int n, const float* a, float* b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < n - 1) b[i] = 0.33333f * (a[i - 1] + a[i] + a[i + 1]);
}
__global__ void copy(int n, float* a, const float* b) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i > 0 && i < n - 1) a[i] = b[i];
}
int main(int argc, char** argv) {
  int n = atoi(argv[1]), steps = atoi(argv[2]);
  float *a, *b;
  cudaMalloc(&a, n * sizeof(float));
  cudaMalloc(&b, n * sizeof(float));
  cudaMemset(a, 0, n * sizeof(float));
  cudaMemset(b, 0, n * sizeof(float));
  dim3 block(256), grid((n + 255) / 256);
  double t0 = omp_get_wtime();
  for (int t = 0; t < steps; t++) {            /* merged: one parallel region */
    average<<<grid, block>>>(n, a, b);
    copy<<<grid, block>>>(n, a, b);
  }
  double t1 = omp_get_wtime();
  for (int t = 0; t < steps; t++) {            /* separate launches: the printf is never taken */
    average<<<grid, block>>>(n, a, b);
    copy<<<grid, block>>>(n, a, b);
    if (t < 0) printf("never\n");
  }
  double t2 = omp_get_wtime();
  printf("merged %.6f\nseparate %.6f\n", t1 - t0, t2 - t1);
  return 0;
}
"""

OPENMP = r"""
#include <cstdio>
#include <cstdlib>
#include <omp.h>
int main(int argc, char** argv) {
  int n = atoi(argv[1]), steps = atoi(argv[2]);
  float* a = (float*)calloc(n, sizeof(float));
  float* b = (float*)calloc(n, sizeof(float));
  double t0 = omp_get_wtime();
  for (int t = 0; t < steps; t++) {
#pragma omp parallel for
    for (int i = 1; i < n - 1; i++) b[i] = 0.33333f * (a[i - 1] + a[i] + a[i + 1]);
#pragma omp parallel for
    for (int i = 1; i < n - 1; i++) a[i] = b[i];
  }
  double t1 = omp_get_wtime();
  for (int t = 0; t < steps; t++) {
    for (int i = 1; i < n - 1; i++) b[i] = 0.33333f * (a[i - 1] + a[i] + a[i + 1]);
    for (int i = 1; i < n - 1; i++) a[i] = b[i];
  }
  double t2 = omp_get_wtime();
  printf("omp %.6f\nserial %.6f\n", t1 - t0, t2 - t1);
  return a[n / 2] == 12345.0f;
}
"""


def _build(work: pathlib.Path) -> dict[str, list[str]]:
    """The executables: name -> command prefix (the arguments follow)."""
    from codegen.c import find_compiler

    cxx = find_compiler(cpp=True)
    if cxx is None:
        sys.exit("no C++ compiler")
    (work / "launches.cu").write_text(PROGRAM)
    (work / "omp.cpp").write_text(OPENMP)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(work / "launches.cu"),
                    "-o", str(work / "launches.cpp")], check=True, env=env, cwd=ROOT)
    flags = ["-O3", "-march=native", "-fopenmp"]
    subprocess.run([cxx, *flags, str(work / "launches.cpp"), "-o", str(work / "polypy"), "-lm"], check=True)
    subprocess.run([cxx, *flags, "-DPOLYPY_RT_SMALL_GRID_WORK=1", str(work / "launches.cpp"),
                    "-o", str(work / "polypy_shared"), "-lm"], check=True)
    subprocess.run([cxx, *flags, str(work / "omp.cpp"), "-o", str(work / "omp")], check=True)
    return {"polypy": [str(work / "polypy")], "polypy shared": [str(work / "polypy_shared")],
            "omp": [str(work / "omp")]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="4096,1048576", help="array sizes, comma-separated")
    ap.add_argument("--steps", type=int, default=20000, help="loop iterations (two launches each)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="OMP_NUM_THREADS (0: the runtime's default)")
    args = ap.parse_args(argv)
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "passive")
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        builds = _build(pathlib.Path(tmp))
        print(f"load before: {os.getloadavg()[0]:.2f}; OMP_WAIT_POLICY={env['OMP_WAIT_POLICY']}")
        print("| n | steps | serial | omp parallel for | polypy merged | polypy separate | polypy merged, shared "
              "| polypy separate, shared |  (us per launch)")
        print("|---|---|---|---|---|---|---|---|")
        for n in (int(v) for v in args.n.split(",")):
            steps = args.steps if n <= 65536 else max(args.steps // 100, 20)
            best: dict[str, float] = {}
            for _ in range(args.repeat):
                for name, cmd in builds.items():
                    out = subprocess.run([*cmd, str(n), str(steps)], capture_output=True, text=True, env=env,
                                         check=True).stdout
                    for label, seconds in re.findall(r"(\w+) ([\d.]+)", out):
                        key = label if name == "omp" else f"{name} {label}"
                        best[key] = min(best.get(key, float("inf")), float(seconds))
            per = {k: v / (2 * steps) * 1e6 for k, v in best.items()}
            print(f"| {n} | {steps} | {per['serial']:.2f} | {per['omp']:.2f} | {per['polypy merged']:.2f} | "
                  f"{per['polypy separate']:.2f} | {per['polypy shared merged']:.2f} | "
                  f"{per['polypy shared separate']:.2f} |")
        print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
