"""Host-to-device copies that are not made (``frontend.host_copies``): the device array becomes the
host buffer where the program cannot tell them apart, and every copy it could tell stays.

Each host function of ``PROGRAM`` is one case: the report names the decision and its reason, and
the translated program's results equal the CUDA semantics (computed here), whether the copy was
made or not -- a copy wrongly left out shows as a wrong sum.
"""
from __future__ import annotations

import re
import subprocess
import sys

from c_support import need_compiler, run_against_runtime

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>
#define N 1000
__global__ void add(const int* a, int* m, int n) {   // reads a, writes m
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) m[i] = m[i] + 2 * a[i];
}
__global__ void triple(int* m, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) m[i] = 3 * m[i];
}
struct Pair { int start; int count; };
__global__ void spans(const Pair* p, int* m, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) m[i] = p[i].start * p[i].count;
}
static long long total(const int* v) { long long s = 0; for (int i = 0; i < N; i++) s += v[i]; return s; }
static void fill(int* v, int k) { for (int i = 0; i < N; i++) v[i] = k; }

long long shared_both() {               // both copies go: ref only read, in only written on the device
  int* ref = (int*)malloc(N * sizeof(int));
  int* in = (int*)malloc(N * sizeof(int));
  int* out = (int*)malloc(N * sizeof(int));
  if (!in) return -1;
  for (int i = 0; i < N; i++) { ref[i] = i % 7; in[i] = i; }
  int *d_ref, *d_m;
  cudaMalloc((void**)&d_ref, N * sizeof(int));
  cudaMalloc((void**)&d_m, N * sizeof(int));
  cudaMemcpy(d_ref, ref, N * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemcpy(d_m, in, N * sizeof(int), cudaMemcpyHostToDevice);
  for (int r = 0; r < 3; r++) add<<<(N + 127) / 128, 128>>>(d_ref, d_m, N);
  cudaMemcpy(out, d_m, N * sizeof(int), cudaMemcpyDeviceToHost);   // out takes d_m, that is in's memory
  long long s = ref[5];
  for (int i = 0; i < N; i++) s += out[i] * 3;
  cudaFree(d_ref);
  cudaFree(d_m);
  free(ref); free(in); free(out);
  return s;
}

long long host_writes_after() {         // the device must keep the values from before the write
  int* h = (int*)malloc(N * sizeof(int));
  int* out = (int*)malloc(N * sizeof(int));
  for (int i = 0; i < N; i++) h[i] = i;
  int *d, *d_m;
  cudaMalloc((void**)&d, N * sizeof(int));
  cudaMalloc((void**)&d_m, N * sizeof(int));
  cudaMemcpy(d, h, N * sizeof(int), cudaMemcpyHostToDevice);
  h[0] = 1000;
  cudaMemset(d_m, 0, N * sizeof(int));
  add<<<(N + 127) / 128, 128>>>(d, d_m, N);
  cudaMemcpy(out, d_m, N * sizeof(int), cudaMemcpyDeviceToHost);
  long long s = total(out) + h[0];
  cudaFree(d); cudaFree(d_m); free(h); free(out);
  return s;
}

long long written_then_read() {         // the host must keep its values after the kernel writes d
  int* h = (int*)malloc(N * sizeof(int));
  int* out = (int*)malloc(N * sizeof(int));
  for (int i = 0; i < N; i++) h[i] = i;
  int* d;
  cudaMalloc((void**)&d, N * sizeof(int));
  cudaMemcpy(d, h, N * sizeof(int), cudaMemcpyHostToDevice);
  triple<<<(N + 127) / 128, 128>>>(d, N);
  cudaMemcpy(out, d, N * sizeof(int), cudaMemcpyDeviceToHost);
  long long s = total(out) + h[N - 1];
  cudaFree(d); free(h); free(out);
  return s;
}

long long alias_write() {               // p points into h: its write must not reach the device
  int* h = (int*)malloc(N * sizeof(int));
  int* out = (int*)malloc(N * sizeof(int));
  for (int i = 0; i < N; i++) h[i] = 1;
  int* p = &h[1];
  int *d, *d_m;
  cudaMalloc((void**)&d, N * sizeof(int));
  cudaMalloc((void**)&d_m, N * sizeof(int));
  cudaMemcpy(d, h, N * sizeof(int), cudaMemcpyHostToDevice);
  p[0] = 50;
  cudaMemset(d_m, 0, N * sizeof(int));
  add<<<(N + 127) / 128, 128>>>(d, d_m, N);
  cudaMemcpy(out, d_m, N * sizeof(int), cudaMemcpyDeviceToHost);
  long long s = total(out);
  cudaFree(d); cudaFree(d_m); free(h); free(out);
  return s;
}

long long in_a_loop() {
  int* h = (int*)malloc(N * sizeof(int));
  int* out = (int*)malloc(N * sizeof(int));
  fill(h, 1);
  int *d, *d_m;
  cudaMalloc((void**)&d, N * sizeof(int));
  cudaMalloc((void**)&d_m, N * sizeof(int));
  cudaMemset(d_m, 0, N * sizeof(int));
  for (int r = 0; r < 2; r++) {
    cudaMemcpy(d, h, N * sizeof(int), cudaMemcpyHostToDevice);
    add<<<(N + 127) / 128, 128>>>(d, d_m, N);
  }
  cudaMemcpy(out, d_m, N * sizeof(int), cudaMemcpyDeviceToHost);
  long long s = total(out);
  cudaFree(d); cudaFree(d_m); free(h); free(out);
  return s;
}

long long copied_twice() {              // d1 and d2 must stay two arrays: the kernel writes d1 only
  int* h = (int*)malloc(N * sizeof(int));
  int* out = (int*)malloc(N * sizeof(int));
  for (int i = 0; i < N; i++) h[i] = 2;
  int *d1, *d2;
  cudaMalloc((void**)&d1, N * sizeof(int));
  cudaMalloc((void**)&d2, N * sizeof(int));
  cudaMemcpy(d1, h, N * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemcpy(d2, h, N * sizeof(int), cudaMemcpyHostToDevice);
  triple<<<(N + 127) / 128, 128>>>(d1, N);
  cudaMemcpy(out, d2, N * sizeof(int), cudaMemcpyDeviceToHost);
  long long s = total(out);
  cudaFree(d1); cudaFree(d2); free(h); free(out);
  return s;
}

long long used_before() {
  int* h = (int*)malloc(N * sizeof(int));
  int* out = (int*)malloc(N * sizeof(int));
  for (int i = 0; i < N; i++) h[i] = 3;
  int* d;
  cudaMalloc((void**)&d, N * sizeof(int));
  cudaMemset(d, 0, N * sizeof(int));
  cudaMemcpy(d, h, N * sizeof(int), cudaMemcpyHostToDevice);
  triple<<<(N + 127) / 128, 128>>>(d, N);
  cudaMemcpy(out, d, N * sizeof(int), cudaMemcpyDeviceToHost);
  long long s = total(out);
  cudaFree(d); free(h); free(out);
  return s;
}

long long freed_early() {               // h is freed while d is still used
  int* h = (int*)malloc(N * sizeof(int));
  int* out = (int*)malloc(N * sizeof(int));
  for (int i = 0; i < N; i++) h[i] = 4;
  int* d;
  cudaMalloc((void**)&d, N * sizeof(int));
  cudaMemcpy(d, h, N * sizeof(int), cudaMemcpyHostToDevice);
  free(h);
  triple<<<(N + 127) / 128, 128>>>(d, N);
  cudaMemcpy(out, d, N * sizeof(int), cudaMemcpyDeviceToHost);
  long long s = total(out);
  cudaFree(d); free(out);
  return s;
}

long long passed_on() {                 // fill() writes h after the copy
  int* h = (int*)malloc(N * sizeof(int));
  int* out = (int*)malloc(N * sizeof(int));
  fill(h, 5);
  int *d, *d_m;
  cudaMalloc((void**)&d, N * sizeof(int));
  cudaMalloc((void**)&d_m, N * sizeof(int));
  cudaMemcpy(d, h, N * sizeof(int), cudaMemcpyHostToDevice);
  fill(h, 6);
  cudaMemset(d_m, 0, N * sizeof(int));
  add<<<(N + 127) / 128, 128>>>(d, d_m, N);
  cudaMemcpy(out, d_m, N * sizeof(int), cudaMemcpyDeviceToHost);
  long long s = total(out) + h[0];
  cudaFree(d); cudaFree(d_m); free(h); free(out);
  return s;
}

long long libc_write_after() {          // memset writes h after the copy
  int* h = (int*)calloc(N, sizeof(int));
  int* out = (int*)malloc(N * sizeof(int));
  memset(h, 1, N * sizeof(int));
  int *d, *d_m;
  cudaMalloc((void**)&d, N * sizeof(int));
  cudaMalloc((void**)&d_m, N * sizeof(int));
  cudaMemcpy(d, h, N * sizeof(int), cudaMemcpyHostToDevice);
  memset(h, 0, N * sizeof(int));
  cudaMemset(d_m, 0, N * sizeof(int));
  add<<<(N + 127) / 128, 128>>>(d, d_m, N);
  cudaMemcpy(out, d_m, N * sizeof(int), cudaMemcpyDeviceToHost);
  long long s = total(out) + h[0];
  cudaFree(d); cudaFree(d_m); free(h); free(out);
  return s;
}

long long taken_plain(int* status) {    // out takes d_m's block; freed before d_m's cudaFree
  int* a = (int*)malloc(N * sizeof(int));
  int* out = (int*)malloc(N * sizeof(int));
  for (int i = 0; i < N; i++) a[i] = i % 5;
  int *d_a, *d_m;
  cudaMalloc((void**)&d_a, N * sizeof(int));
  cudaMalloc((void**)&d_m, N * sizeof(int));
  cudaMemcpy(d_a, a, N * sizeof(int), cudaMemcpyHostToDevice);
  cudaMemset(d_m, 0, N * sizeof(int));
  add<<<(N + 127) / 128, 128>>>(d_a, d_m, N);
  cudaMemcpy(out, d_m, N * sizeof(int), cudaMemcpyDeviceToHost);
  out[0] += 100;
  long long s = 0;
  for (int i = 0; i < N; i++) s += out[i];
  free(out);
  int* again;                           // may get the address back: a new block all the same
  cudaMalloc((void**)&again, N * sizeof(int));
  cudaMemset(again, 0, N * sizeof(int));
  *status = (int)cudaFree(d_m) * 10 + (int)cudaFree(again);
  cudaFree(d_a);
  free(a);
  return s;
}

long long take_after_a_touch() {        // out is written before the copy: its own memory stays
  int* out = (int*)malloc(N * sizeof(int));
  out[0] = 7;
  int* d;
  cudaMalloc((void**)&d, N * sizeof(int));
  cudaMemset(d, 0, N * sizeof(int));
  triple<<<(N + 127) / 128, 128>>>(d, N);
  cudaMemcpy(out, d, N * sizeof(int), cudaMemcpyDeviceToHost);
  long long s = 0;
  for (int i = 0; i < N; i++) s += out[i];
  cudaFree(d);
  free(out);
  return s;
}

long long device_used_after() {         // d is launched on after the copy: out keeps its memory
  int* out = (int*)malloc(N * sizeof(int));
  int* d;
  cudaMalloc((void**)&d, N * sizeof(int));
  cudaMemset(d, 0, N * sizeof(int));
  cudaMemcpy(out, d, N * sizeof(int), cudaMemcpyDeviceToHost);
  add<<<(N + 127) / 128, 128>>>(d, d, N);
  long long s = 0;
  for (int i = 0; i < N; i++) s += out[i] + 1;
  cudaFree(d);
  free(out);
  return s;
}

long long freed_before_cudafree(int* status) {  // records of scalars, freed before d_p's cudaFree
  Pair* pairs = (Pair*)malloc(N * sizeof(Pair));
  int* out = (int*)malloc(N * sizeof(int));
  for (int i = 0; i < N; i++) { pairs[i].start = i % 3; pairs[i].count = 2; }
  Pair* d_p;
  int* d_m;
  cudaMalloc((void**)&d_p, N * sizeof(Pair));
  cudaMalloc((void**)&d_m, N * sizeof(int));
  cudaMemcpy(d_p, pairs, N * sizeof(Pair), cudaMemcpyHostToDevice);
  spans<<<(N + 127) / 128, 128>>>(d_p, d_m, N);
  cudaMemcpy(out, d_m, N * sizeof(int), cudaMemcpyDeviceToHost);
  long long s = pairs[4].start;
  for (int i = 0; i < N; i++) s += out[i];
  free(pairs);
  int* other = (int*)malloc(N * sizeof(Pair));  // new memory, wherever it is
  for (int i = 0; i < 2 * N; i++) other[i] = -1;
  *status = (int)cudaFree(d_p);
  cudaFree(d_m);
  s += other[0];
  free(other);
  free(out);
  return s;
}

long long round_trip() {                // d is used only between the copies of each turn: d is h
  int* h = (int*)malloc(N * sizeof(int));
  for (int i = 0; i < N; i++) h[i] = i % 4;
  int* d;
  cudaMalloc((void**)&d, N * sizeof(int));
  long long s = 0;
  for (int r = 0; r < 3; r++) {
    h[r] += 10;
    cudaMemcpy(d, h, N * sizeof(int), cudaMemcpyHostToDevice);
    triple<<<(N + 127) / 128, 128>>>(d, N);
    cudaDeviceSynchronize();
    cudaMemcpy(h, d, N * sizeof(int), cudaMemcpyDeviceToHost);
    s += h[r];
  }
  for (int i = 0; i < N; i++) s += h[i];
  free(h);
  cudaFree(d);
  return s;
}

long long read_between() {              // the host reads h between the copies: its old values
  int* h = (int*)malloc(N * sizeof(int));
  for (int i = 0; i < N; i++) h[i] = 1;
  int* d;
  cudaMalloc((void**)&d, N * sizeof(int));
  long long s = 0;
  for (int r = 0; r < 2; r++) {
    cudaMemcpy(d, h, N * sizeof(int), cudaMemcpyHostToDevice);
    triple<<<(N + 127) / 128, 128>>>(d, N);
    s += h[N - 1];
    cudaMemcpy(h, d, N * sizeof(int), cudaMemcpyDeviceToHost);
  }
  cudaFree(d);
  s += total(h);
  free(h);
  return s;
}

long long trip_passed_on() {            // h goes to fill(), which could hand it to CUDA
  int* h = (int*)malloc(N * sizeof(int));
  fill(h, 2);
  int* d;
  cudaMalloc((void**)&d, N * sizeof(int));
  for (int r = 0; r < 2; r++) {
    cudaMemcpy(d, h, N * sizeof(int), cudaMemcpyHostToDevice);
    triple<<<(N + 127) / 128, 128>>>(d, N);
    cudaMemcpy(h, d, N * sizeof(int), cudaMemcpyDeviceToHost);
  }
  cudaFree(d);
  long long s = 0;
  for (int i = 0; i < N; i++) s += h[i];
  free(h);
  return s;
}

int main() {
  printf("%lld\n%lld\n%lld\n", round_trip(), read_between(), trip_passed_on());
  printf("%lld\n%lld\n%lld\n%lld\n%lld\n", shared_both(), host_writes_after(), written_then_read(), alias_write(),
         in_a_loop());
  printf("%lld\n%lld\n%lld\n%lld\n%lld\n", copied_twice(), used_before(), freed_early(), passed_on(),
         libc_write_after());
  int status = -1;
  long long taken = taken_plain(&status);
  printf("%lld\n%d\n%lld\n%lld\n", taken, status, take_after_a_touch(), device_used_after());
  status = -1;
  long long early = freed_before_cudafree(&status);
  printf("%lld\n%d\n", early, status);
  return 0;
}
"""

# What each case of PROGRAM must print (CUDA semantics), and its copies' decisions: (line of the
# copy, shared, a phrase of the reason).
N = 1000
def _round_trip() -> int:
    h, s = [i % 4 for i in range(N)], 0
    for r in range(3):
        h[r] += 10
        h = [3 * v for v in h]
        s += h[r]
    return s + sum(h)


EXPECTED = [
    _round_trip(),
    4 + 9 * N,
    18 * N,
    sum(i + 6 * (i % 7) for i in range(N)) * 3 + 5,
    2 * sum(range(N)) + 1000,
    3 * sum(range(N)) + N - 1,
    2 * N,
    2 * 2 * N,
    2 * N,
    9 * N,
    12 * N,
    10 * N + 6,
    2 * 0x01010101 * N,
    2 * sum(i % 5 for i in range(N)) + 100,
    0,
    0,
    N,
    1 + sum(2 * (i % 3) for i in range(N)) - 1,
    0,
]
TOTAL = (False, "out is used otherwise")  # passed to total(), a function of the program
DECISIONS = {
    "shared_both": [(True, "nothing writes d_ref or ref after the copy"),
                    (True, "and the host neither reads nor writes in after the copy"),
                    (True, "out takes d_m's memory: after the copy, nothing uses d_m but cudaFree, nor in (the host "
                           "buffer d_m is) but free")],
    "host_writes_after": [(False, "the host writes h after the copy"), TOTAL],
    "written_then_read": [(False, "and the host reads h after the copy"), TOTAL],
    "alias_write": [(False, "h[...] is used otherwise"), TOTAL],
    "in_a_loop": [(False, "the copy is inside a loop"), TOTAL],
    "copied_twice": [(False, "h is copied to the device more than once")] * 2 + [TOTAL],
    "used_before": [(False, "d is used before the copy otherwise than by its cudaMalloc"), TOTAL],
    "freed_early": [(False, "h is freed before the device array that became it"), TOTAL],
    "passed_on": [(False, "h is used otherwise"), TOTAL],
    "libc_write_after": [(False, "the host writes h after the copy"), TOTAL],
    "taken_plain": [(True, "nothing writes d_a or a after the copy"),
                    (True, "out takes d_m's memory: after the copy, nothing uses d_m but cudaFree")],
    "take_after_a_touch": [(False, "out is used before the copy")],
    "device_used_after": [(False, "d is used after the copy")],
    "round_trip": [(True, "d is h itself: a round trip in the loop at line")] * 2,
    "read_between": [(False, "inside a loop, switch or lambda; not a round trip: the statement at line"),
                     (False, "the copy is inside a loop")],
    "trip_passed_on": [(False, "not a round trip: h is used otherwise"), (False, "the copy is inside a loop")],
    "freed_before_cudafree": [(True, "nothing writes d_p or pairs after the copy"),
                              (True, "out takes d_m's memory: after the copy, nothing uses d_m but cudaFree")],
}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=600)


def test_copies_the_program_cannot_tell_apart_are_not_made_and_results_are_cuda_s(tmp_path) -> None:
    need_compiler(cpp=True)
    src = tmp_path / "copies.cu"
    src.write_text(PROGRAM)
    translated = _cli("translate", str(src), "--report", "-o", str(tmp_path / "copies.cpp"))
    assert translated.returncode == 0, translated.stderr
    lines = PROGRAM.splitlines()
    found: dict[str, list[tuple[bool, str]]] = {}
    for m in re.finditer(r"copies\.cu:(\d+):\d+: cudaMemcpy of \w+ to \w+: (no copy, |copied: )(.*)",
                         translated.stderr):
        line = int(m.group(1))
        function = next(l.split("(")[0].split()[-1] for l in reversed(lines[:line]) if l.startswith("long long "))
        found.setdefault(function, []).append((m.group(2) == "no copy, ", m.group(3)))
    assert set(found) == set(DECISIONS), translated.stderr
    for function, decisions in DECISIONS.items():
        assert [shared for shared, _ in found[function]] == [s for s, _ in decisions], (function, found[function])
        for (_, why), (_, phrase) in zip(found[function], decisions):
            assert phrase in why, (function, why)
    code = (tmp_path / "copies.cpp").read_text()
    assert code.count("polypy_rt_share_copy((void**)&") == 5 and code.count("polypy_rt_take_copy(&") == 3
    assert code.count("polypy_rt_same_copy(h, d, ") == 1
    # The takers' blocks and frees go through the runtime: out three times; in, whose memory out
    # takes, and pairs, freed before its device array's cudaFree, as polypy_rt_shared_free.
    assert code.count("polypy_rt_host_malloc(") == 3 + 1
    frees = sorted(re.findall(r"(polypy_rt_\w+_free)\( *(\w+)\)", code.split("long long shared_both")[1]))
    assert frees == [("polypy_rt_host_free", "out")] * 3 + [("polypy_rt_shared_free", "h"),
                                                          ("polypy_rt_shared_free", "in"),
                                                          ("polypy_rt_shared_free", "pairs")]
    for mode in ((), ("--emulate",)):  # the emulator, the reference, makes every copy
        run = _cli("run", str(src), *mode)
        assert run.returncode == 0, run.stderr
        assert [int(v) for v in run.stdout.split()] == EXPECTED, mode


RUNTIME = r"""
#include <cstdio>
#include <cstdlib>
#include "cuda_runtime.h"
int main() {
  const size_t n = 1000;
  int* h = (int*)malloc(n * sizeof(int));
  for (size_t i = 0; i < n; i++) h[i] = (int)i;
  int* d = 0;
  cudaMalloc(&d, n * sizeof(int));
  polypy_rt_share_copy((void**)&d, h, n * sizeof(int));
  void* base = 0;
  size_t size = 0;
  int found = polypy_rt_find_alloc(h + 10, &base, &size);
  printf("shared %d %d %zu\n", d == h, found, size);
  printf("free %d\n", (int)cudaFree(d));
  h[n - 1] = 7;                                    // still the host's: cudaFree freed nothing
  found = polypy_rt_find_alloc(h, &base, &size);
  printf("after %d %d\n", h[n - 1], found);
  int* big = 0;                                    // a block larger than the copy: copied
  cudaMalloc(&big, 2 * n * sizeof(int));
  int* was = big;
  polypy_rt_share_copy((void**)&big, h, n * sizeof(int));
  printf("larger %d %d %d\n", big == was, big[0], big[n - 1]);
  int* other = 0;                                  // a pointer cudaMalloc did not give: copied
  cudaMalloc(&other, 2 * n * sizeof(int));
  int* inside = other + n;
  polypy_rt_share_copy((void**)&inside, h, n * sizeof(int));
  printf("inside %d %d\n", inside == other + n, inside[5]);
  int* dev = 0;                                    // a source in device memory: copied
  int* d2 = 0;
  cudaMalloc(&dev, n * sizeof(int));
  cudaMalloc(&d2, n * sizeof(int));
  cudaMemcpy(dev, h, n * sizeof(int), cudaMemcpyHostToDevice);
  int* d2_was = d2;
  polypy_rt_share_copy((void**)&d2, dev, n * sizeof(int));
  printf("device %d %d\n", d2 == d2_was, d2[3]);
  cudaFree(big); cudaFree(other); cudaFree(dev); cudaFree(d2);
  int* wide = (int*)polypy_rt_host_malloc(2 * n * sizeof(int));  // a host block larger than the copy: copied
  int* dm = 0;
  cudaMalloc(&dm, n * sizeof(int));
  cudaMemcpy(dm, h, n * sizeof(int), cudaMemcpyHostToDevice);
  int* wide_was = wide;
  polypy_rt_take_copy(&wide, dm, n * sizeof(int));
  printf("wide %d %d\n", wide == wide_was, wide[n - 1]);
  int* out = (int*)polypy_rt_host_malloc(n * sizeof(int));     // exactly the copy's size: taken
  polypy_rt_take_copy(&out, dm, n * sizeof(int));
  printf("taken %d %d free %d\n", out == dm, out[n - 1], (int)cudaFree(dm));
  polypy_rt_host_free(out);
  polypy_rt_host_free(wide);
  int* buf = (int*)malloc(n * sizeof(int));                    // a shared buffer, then taken: two owners
  for (size_t i = 0; i < n; i++) buf[i] = 3;
  int* db = 0;
  cudaMalloc(&db, n * sizeof(int));
  polypy_rt_share_copy((void**)&db, buf, n * sizeof(int));
  int* res = (int*)polypy_rt_host_malloc(n * sizeof(int));
  polypy_rt_take_copy(&res, db, n * sizeof(int));
  cudaFree(db);
  polypy_rt_host_free(buf);                                    // the first owner: nothing freed
  res[0] += 1;
  printf("owners %d %d %zu\n", res == buf, res[0] + res[n - 1], *polypy_rt_host_count());
  polypy_rt_host_free(res);
  int* early = (int*)malloc(n * sizeof(int));                  // the host frees it before the cudaFree
  for (size_t i = 0; i < n; i++) early[i] = 9;
  int* de = 0;
  cudaMalloc(&de, n * sizeof(int));
  polypy_rt_share_copy((void**)&de, early, n * sizeof(int));
  polypy_rt_shared_free(early);                                // left to the cudaFree: still named
  printf("deferred %d %d %zu", de == early, de[n - 1], *polypy_rt_count());
  int freed = (int)cudaFree(de);
  printf(" free %d %zu\n", freed, *polypy_rt_count());
  polypy_rt_shared_free(malloc(n));                           // no device pointer names it: freed
  int* buf2 = (int*)malloc(n * sizeof(int));                   // shared, taken, then freed before the cudaFree
  for (size_t i = 0; i < n; i++) buf2[i] = 5;
  int* db2 = 0;
  cudaMalloc(&db2, n * sizeof(int));
  polypy_rt_share_copy((void**)&db2, buf2, n * sizeof(int));
  int* res2 = (int*)polypy_rt_host_malloc(n * sizeof(int));
  polypy_rt_take_copy(&res2, db2, n * sizeof(int));
  polypy_rt_shared_free(buf2);                                 // res2 still holds the memory
  printf("held %d %d %zu", res2 == buf2, res2[n - 1], *polypy_rt_host_count());
  polypy_rt_host_free(res2);                                   // the last owner: freed
  freed = (int)cudaFree(db2);
  printf(" free %d\n", freed);
  int* rt = (int*)malloc(n * sizeof(int));                     // a round trip: its turns
  for (size_t i = 0; i < n; i++) rt[i] = 2;
  int* drt = 0;
  cudaMalloc(&drt, n * sizeof(int));
  polypy_rt_share_copy((void**)&drt, rt, n * sizeof(int));     // the first turn: shared
  drt[0] = 6;                                                  // a kernel's write
  polypy_rt_same_copy(rt, drt, n * sizeof(int));               // nothing to copy
  polypy_rt_share_copy((void**)&drt, rt, n * sizeof(int));     // a later turn: drt is rt already
  printf("trip %d %d %zu", drt == rt, rt[0], *polypy_rt_count());
  int* away = (int*)malloc(n * sizeof(int));
  polypy_rt_same_copy(away, drt, n * sizeof(int));             // another buffer: copied
  printf(" copy %d %d\n", away[0], away[n - 1]);
  cudaFree(drt);
  free(rt);
  free(away);
  printf("left %zu %zu\n", *polypy_rt_host_count(), *polypy_rt_count());
  free(h);
  return 0;
}
"""


def test_the_runtime_shares_and_takes_only_whole_blocks_of_the_copy_s_size(tmp_path) -> None:
    assert run_against_runtime(tmp_path, "share", RUNTIME) == (
        "shared 1 1 4000\nfree 0\nafter 7 0\nlarger 1 0 7\ninside 1 5\ndevice 1 3\n"
        "wide 1 7\ntaken 1 7 free 0\nowners 1 7 1\ndeferred 1 9 1 free 0 0\nheld 1 5 1 free 0\ntrip 1 6 1 copy 6 2\nleft 0 0\n")
