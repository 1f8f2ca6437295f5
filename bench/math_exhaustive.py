"""Exhaustive accuracy of the C prelude's single-precision math functions (not a test: minutes).

``python -m bench.math_exhaustive [tanhf|expf ...] [--build DIR]`` compiles a C program made of the
prelude (``codegen.c.templates.prelude``, the code the C backend emits) and a loop over all 2^32
float bit patterns, and prints, per function, the largest error in ulps of the exact result (the
ulp of the exact value's binade, 2^-149 below the normals) where the result is finite and nonzero,
how many results differ from the correctly rounded one, and whether the special values came out
right: NaN for NaN, the sign of a zero kept, +-inf and 0 where the rounded result overflows or
underflows. The exact result is glibc's double function of the argument (``tanh((double)x)``), whose
own error (below 2 ulp of a double, 2^-28 ulp of a float) is far below what is measured. The same is
printed for glibc's float function (``tanhf``), which the translated code called before.

Double-precision functions (``tanh``: the prelude's ``polypy_tanh``) cannot be checked on every
argument: they are checked on ``--count`` pseudo-random arguments of each of four kinds (any bit
pattern; uniform on [-22, 22] and on [-1, 1]; a magnitude uniform in its logarithm from 1e-300 to
30, either sign) and on edge values, against glibc's ``long double`` function (x87 extended
precision: 11 more bits), with glibc's double function alongside.
"""
from __future__ import annotations

import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile

from codegen.c.templates import prelude

# name -> (the prelude's function, glibc's float function, the double reference)
FUNCTIONS = {
    "tanhf": ("polypy_tanhf", "tanhf", "tanh"),
    "expf": ("polypy_expf", "expf", "exp"),
}
# name -> (the prelude's function, glibc's double function, the long double reference)
FUNCTIONS_F64 = {
    "tanh": ("polypy_tanh", "tanh", "tanhl"),
}

MAIN = r"""
#include <stdio.h>
#include <omp.h>

typedef struct { double max_err; double max_at; unsigned long long wrong_rounding, bad_special; } stats;

static void check(stats* s, float x, float y, double exact) {
  float rounded = (float)exact;
  if (exact != exact) { if (y == y) s->bad_special++; return; }
  if (rounded == 0.0f || __builtin_isinf(rounded)) {  /* underflow, zero or overflow: exactly that */
    if (y != rounded || __builtin_signbit(y) != __builtin_signbit(rounded)) s->bad_special++;
    return;
  }
  if (y != rounded) s->wrong_rounding++;
  int e = __builtin_ilogb(exact);
  double ulp = __builtin_ldexp(1.0, (e < -126 ? -126 : e) - 23);
  double err = __builtin_fabs((double)y - exact) / ulp;
  if (err > s->max_err) { s->max_err = err; s->max_at = x; }
}

static void merge(stats* into, const stats* s) {
  if (s->max_err > into->max_err) { into->max_err = s->max_err; into->max_at = s->max_at; }
  into->wrong_rounding += s->wrong_rounding;
  into->bad_special += s->bad_special;
}

int main(void) {
  stats ours = {0, 0, 0, 0}, libm = {0, 0, 0, 0};
  #pragma omp parallel
  {
    stats o = {0, 0, 0, 0}, l = {0, 0, 0, 0};
    float xs[1024], ys[1024];
    #pragma omp for schedule(dynamic, 64)
    for (long long chunk = 0; chunk < (1ll << 22); chunk++) {
      for (int i = 0; i < 1024; i++) {
        uint32_t bits = (uint32_t)((chunk << 10) | i);
        memcpy(&xs[i], &bits, sizeof bits);
      }
      for (int i = 0; i < 1024; i++) ys[i] = OURS(xs[i]);  /* vectorized, as in a kernel's loop */
      for (int i = 0; i < 1024; i++) {
        double exact = REF((double)xs[i]);
        check(&o, xs[i], ys[i], exact);
        check(&l, xs[i], LIBM(xs[i]), exact);
      }
    }
    #pragma omp critical
    { merge(&ours, &o); merge(&libm, &l); }
  }
  printf("%s: max %.7f ulp (at %a), %llu of 2^32 not correctly rounded, %llu special values wrong\n",
         NAME, ours.max_err, ours.max_at, ours.wrong_rounding, ours.bad_special);
  printf("glibc %s: max %.7f ulp (at %a), %llu of 2^32 not correctly rounded, %llu special values wrong\n",
         LIBM_NAME, libm.max_err, libm.max_at, libm.wrong_rounding, libm.bad_special);
  return ours.bad_special != 0;
}
"""

MAIN_F64 = r"""
#include <stdio.h>
#include <omp.h>

typedef struct { double max_err; double max_at; unsigned long long count, wrong_rounding, bad_special; } stats;

static void check(stats* s, double x, double y, long double exact) {
  double rounded = (double)exact;
  s->count++;
  if (exact != exact) { if (y == y) s->bad_special++; return; }
  if (rounded == 0.0 || __builtin_isinf(rounded)) {
    if (y != rounded || __builtin_signbit(y) != __builtin_signbit(rounded)) s->bad_special++;
    return;
  }
  if (y != rounded) s->wrong_rounding++;
  int e = __builtin_ilogbl(exact);
  long double ulp = __builtin_ldexpl(1.0L, (e < -1022 ? -1022 : e) - 52);
  double err = (double)(__builtin_fabsl((long double)y - exact) / ulp);
  if (err > s->max_err) { s->max_err = err; s->max_at = x; }
}

static void merge(stats* into, const stats* s) {
  if (s->max_err > into->max_err) { into->max_err = s->max_err; into->max_at = s->max_at; }
  into->count += s->count;
  into->wrong_rounding += s->wrong_rounding;
  into->bad_special += s->bad_special;
}

static uint64_t splitmix(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double argument(uint64_t bits, int kind) {
  double u = (double)(bits >> 11) * 0x1p-53, x;  /* uniform on [0, 1) */
  switch (kind) {
    case 0: memcpy(&x, &bits, sizeof x); return x;
    case 1: return 44.0 * u - 22.0;
    case 2: return 2.0 * u - 1.0;
    default: x = exp(log(1e-300) + u * (log(30.0) - log(1e-300))); return (bits & 1) ? -x : x;
  }
}

static const double EDGES[] = {0.0, -0.0, 1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0, 0x1p-1074, -0x1p-1074, 0x1p-1022,
                               0x1.fffffffffffffp-1023, 1e-300, 0x1p-27, 0x1p-26, 0.0108, 0.0109, 0.5493,
                               19.0, 19.06, 19.1, 22.0, 22.5, 1e300, -1e300, 0x1.fffffffffffffp1023};

int main(int argc, char** argv) {
  long long count = argc > 1 ? atoll(argv[1]) : 100000000ll;
  stats ours = {0, 0, 0, 0, 0}, libm = {0, 0, 0, 0, 0};
  for (unsigned i = 0; i < sizeof EDGES / sizeof EDGES[0]; i++) {
    check(&ours, EDGES[i], OURS(EDGES[i]), REF((long double)EDGES[i]));
    check(&libm, EDGES[i], LIBM(EDGES[i]), REF((long double)EDGES[i]));
  }
  #pragma omp parallel
  {
    stats o = {0, 0, 0, 0, 0}, l = {0, 0, 0, 0, 0};
    double xs[1024], ys[1024];
    #pragma omp for schedule(dynamic, 16)
    for (long long chunk = 0; chunk < 4 * (count / 1024); chunk++) {
      uint64_t state = (uint64_t)chunk * 0x2545f4914f6cdd1dull;
      for (int i = 0; i < 1024; i++) xs[i] = argument(splitmix(&state), (int)(chunk & 3));
      for (int i = 0; i < 1024; i++) ys[i] = OURS(xs[i]);  /* vectorized, as in a kernel's loop */
      for (int i = 0; i < 1024; i++) {
        long double exact = REF((long double)xs[i]);
        check(&o, xs[i], ys[i], exact);
        check(&l, xs[i], LIBM(xs[i]), exact);
      }
    }
    #pragma omp critical
    { merge(&ours, &o); merge(&libm, &l); }
  }
  printf("%s: max %.4f ulp (at %a), %llu of %llu not correctly rounded, %llu special values wrong\n",
         NAME, ours.max_err, ours.max_at, ours.wrong_rounding, ours.count, ours.bad_special);
  printf("glibc %s: max %.4f ulp (at %a), %llu of %llu not correctly rounded, %llu special values wrong\n",
         LIBM_NAME, libm.max_err, libm.max_at, libm.wrong_rounding, libm.count, libm.bad_special);
  return ours.bad_special != 0;
}
"""


def run(name: str, build: pathlib.Path, count: int = 10**8) -> str:
    ours, libm, ref = FUNCTIONS[name] if name in FUNCTIONS else FUNCTIONS_F64[name]
    source = build / f"exhaustive_{name}.c"
    defines = (f"#define OURS {ours}\n#define LIBM {libm}\n#define REF {ref}\n"
               f"#define NAME \"{ours}\"\n#define LIBM_NAME \"{libm}\"\n#include <stdlib.h>\n")
    source.write_text(prelude() + defines + (MAIN if name in FUNCTIONS else MAIN_F64))
    exe = build / f"exhaustive_{name}"
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise SystemExit("no C compiler")
    subprocess.run([cc, "-std=gnu99", "-O3", "-march=native", "-fopenmp", "-ffp-contract=off", "-fno-math-errno",
                    str(source), "-o", str(exe), "-lm"], check=True)
    done = subprocess.run([str(exe), str(count)], capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr)
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("functions", nargs="*", default=[*FUNCTIONS, *FUNCTIONS_F64], choices=[*FUNCTIONS, *FUNCTIONS_F64])
    parser.add_argument("--count", type=int, default=10**8, help="double functions: arguments of each kind")
    parser.add_argument("--build", help="directory for the program (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        build = pathlib.Path(args.build or tmp)
        build.mkdir(parents=True, exist_ok=True)
        for name in args.functions:
            print(run(name, build, args.count), end="", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
