"""Streams whose work runs while the host goes on (issue 41): a created stream's launches, copies,
fills, host functions, callbacks and event records run in issue order on its worker thread;
synchronizing waits, querying polls; the legacy default stream waits for blocking streams, not for
non-blocking ones; cudaStreamWaitEvent orders two streams.

The program (``tests/programs/runtime/streams.cu``, our own) holds a stream with a host function
that waits for a gate the host opens after issuing more work, so every check below depends on the
host going on while the stream's work waits (with work that completed at once, the queries would
say cudaSuccess and the gate would be found closed).
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from c_support import need_compiler

PROGRAM = pathlib.Path(__file__).resolve().parent / "programs" / "runtime" / "streams.cu"

EXPECTED = """\
pending cudaErrorNotReady cudaErrorNotReady cudaErrorNotReady released 1
ordered 12 12 cudaSuccess cudaSuccess
joined 27 27 cudaErrorNotReady
callbacks 3 1 2 3 value 113
legacy 1113 1113 cudaErrorNotReady 1114
errors cudaErrorInvalidConfiguration cudaSuccess cudaSuccess 1115 wait_bad cudaErrorInvalidValue
"""


@pytest.mark.parametrize("mode", [(), ("--emulate",)], ids=["compiled", "emulated"])
def test_streams_run_concurrently_with_the_host_in_stream_order(mode: tuple[str, ...]) -> None:
    """Lines: work pending behind the gate (stream and event queries and the elapsed time are
    cudaErrorNotReady, the host function saw the gate open); the stream's fill, two kernels of 16
    blocks and copy in order (0 + 5 + 7); a second stream's kernel after the first stream's event
    (2 * 13 + 1, pending while the gate is shut); a host function, kernel, copy, callback and host
    function in issue order, the callback seeing the copy (113); a synchronous copy after a
    blocking stream's work (1113) but not after a non-blocking stream's (still 1113, that stream
    pending, 1114 once synchronized); an invalid configuration on a stream is the launch's error,
    a destroyed stream's work still runs (1115), a wait with flags is cudaErrorInvalidValue."""
    need_compiler(cpp=True)
    r = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "run", str(PROGRAM), *mode], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == EXPECTED


LATCH = pathlib.Path(__file__).resolve().parent / "programs" / "runtime" / "latch.cu"

LATCH_EXPECTED = "".join(f"round {r} cudaErrorNotReady cudaErrorNotReady cudaSuccess {2 ** (r + 1) - 1:g} "
                         f"{2047 * 2 ** r + 2 ** r - 1:g} {2047 * 2 ** r + 2 ** r - 1:g}\n" for r in (1, 2, 3))


def _polypy(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polypy.driver.cli", *args], capture_output=True, text=True,
                          timeout=600)


def test_a_kernel_the_host_releases_holds_its_stream_until_the_host_stores() -> None:
    """A kernel polling a volatile latch (and one polling with atomicAdd(gate, 0) in four blocks of
    32 threads) that only the host writes: accepted in a whole program, run by its stream's worker;
    the work issued behind it waits (both streams are cudaErrorNotReady) until the host stores, then
    runs in order (x -> 2x + 1 each round)."""
    need_compiler(cpp=True)
    r = _polypy("run", str(LATCH))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == LATCH_EXPECTED


HELD = r"""#include <cstdio>
#include <cuda_runtime.h>
__global__ void hold(KIND unsigned int* latch, unsigned int* out) {
  if (blockIdx.x == 1 && threadIdx.x == 0) STORE;
  while (latch[0] < 1)
    ;
}
int main() {
  unsigned int* latch;
  cudaMallocHost(&latch, 2 * sizeof(unsigned int));
  *latch = 0;
  cudaStream_t s;
  cudaStreamCreate(&s);
  hold<<<2, 1, 0, STREAM>>>(latch, latch + 1);
  *latch = 1;
  cudaStreamSynchronize(s);
  printf("released\n");
  return 0;
}
"""


@pytest.mark.parametrize("case", ["grid_stores", "not_volatile"])
def test_a_wait_the_grid_or_the_compiler_could_end_stays_refused(tmp_path: pathlib.Path, case: str) -> None:
    """A kernel that writes global memory (another block could store the latch: out may alias it)
    or polls through a plain pointer (the load may be hoisted) is refused at its loop, as before."""
    kind, store = ("volatile", "out[0] = 1") if case == "grid_stores" else ("", "(void)out")
    src = tmp_path / "held.cu"
    src.write_text(HELD.replace("KIND", kind).replace("STORE", store).replace("STREAM", "s"))
    out = tmp_path / "held.cpp"
    r = _polypy("translate", str(src), "-o", str(out))
    assert r.returncode == 1
    assert f"{src}:5:3: error: this loop can only end through a store by another thread or block" in r.stderr
    assert "Traceback" not in r.stderr and not out.exists()


def test_the_emulator_refuses_a_wait_the_grid_could_end_as_translation_does(tmp_path: pathlib.Path) -> None:
    """``run --emulate`` checks spin waits as a compiled run does: the same located error, before
    anything runs (it ran the kernel before, and on the default stream it would have hung)."""
    need_compiler(cpp=True)
    src = tmp_path / "held.cu"
    src.write_text(HELD.replace("KIND", "volatile").replace("STORE", "out[0] = 1").replace("STREAM", "s"))
    r = _polypy("run", str(src), "--emulate")
    assert r.returncode == 1
    assert f"{src}:5:3: error: this loop can only end through a store by another thread or block" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


@pytest.mark.parametrize("mode", [(), ("--emulate",)], ids=["compiled", "emulated"])
def test_a_kernel_the_host_releases_is_not_run_on_the_default_stream(tmp_path: pathlib.Path,
                                                                     mode: tuple[str, ...]) -> None:
    """On the default stream the launch would run on the host's own thread, which then could never
    store: the program stops with the kernel's location instead of waiting forever; emulated too
    (the emulator hung)."""
    need_compiler(cpp=True)
    src = tmp_path / "held.cu"
    src.write_text(HELD.replace("KIND", "volatile").replace("STORE", "(void)out").replace("STREAM", "0"))
    r = _polypy("run", str(src), *mode)
    assert r.returncode == 1
    assert (f"{src}:3:17: error: kernel 'hold' waits for a store by the host or another stream; polypy runs it "
            "only on a created stream") in r.stderr
    assert "released" not in r.stdout


WAITS_FOR_ITSELF = r"""#include <cstdio>
#include <cuda_runtime.h>
__global__ void hold(volatile unsigned int* latch) {
  while (latch[0] < 1)
    ;
}
__global__ void bump(int* x) { x[0] += 1; }
int main() {
  unsigned int* latch;
  int* x;
  cudaMallocHost(&latch, sizeof(unsigned int));
  cudaMallocManaged(&x, sizeof(int));
  *latch = 0;
  *x = 1;
  cudaStream_t s;
  cudaStreamCreate(&s);
  hold<<<1, 1, 0, s>>>(latch);
  printf("issued\n");
  WAIT;
  *latch = 1;
  cudaDeviceSynchronize();
  printf("released %d\n", *x);
  return 0;
}
"""


@pytest.mark.parametrize("wait, mode", [("bump<<<1, 1>>>(x)", ()), ("cudaStreamSynchronize(s)", ()),
                                        ("bump<<<1, 1>>>(x)", ("--emulate",))],
                         ids=["default_stream", "sync", "default_stream_emulated"])
def test_the_host_waiting_for_a_kernel_that_waits_for_the_host_stops_with_an_error(tmp_path: pathlib.Path, wait: str,
                                                                                   mode: tuple[str, ...]) -> None:
    """Work of the legacy default stream (run on the host's thread, after the blocking stream's
    work) or a synchronization issued after a kernel that waits for a host store, before the store:
    the host waits for itself. The program stops naming the kernel (it hung before); what it
    printed before the wait is kept. On a GPU the synchronization deadlocks; the default stream's
    launch would let the host go on, which polypy does not do (docs/runtime_api.md)."""
    need_compiler(cpp=True)
    src = tmp_path / "waits.cu"
    src.write_text(WAITS_FOR_ITSELF.replace("WAIT", wait))
    r = _polypy("run", str(src), *mode)
    assert r.returncode == 1
    assert (f"{src}:3:17: error: kernel 'hold' waits for a store by the host, but the host waits for the stream "
            "work it holds") in r.stderr
    assert r.stdout == "issued\n"


PER_THREAD = r"""#include <cstdio>
#include <thread>
#include <cuda_runtime.h>
__global__ void fill(int* x) { x[threadIdx.x] = 1; }
int main() {
  int* x;
  cudaMalloc(&x, 64 * sizeof(int));
  cudaStream_t s;
  cudaStreamCreate(&s);
  std::thread launcher([&]() {
    fill<<<1, 2000, 0, s>>>(x);
    printf("launcher %s\n", cudaGetErrorName(cudaPeekAtLastError()));
  });
  launcher.join();
  printf("main %s\n", cudaGetErrorName(cudaGetLastError()));
  std::thread copier([&]() {
    cudaMemcpyAsync(x, x + 1, sizeof(int), (cudaMemcpyKind)7, s);
    cudaStreamSynchronize(s);
    printf("copier %s\n", cudaGetErrorName(cudaGetLastError()));
  });
  copier.join();
  printf("main %s %s\n", cudaGetErrorName(cudaGetLastError()), cudaGetErrorName(cudaStreamSynchronize(s)));
  return 0;
}
"""


def test_last_errors_are_per_host_thread_and_a_streams_work_reports_to_its_issuer(tmp_path: pathlib.Path) -> None:
    """As in CUDA, cudaGetLastError/cudaPeekAtLastError are each host thread's: a launch with an
    invalid configuration on a stream, issued by another host thread, is that thread's error, not
    main's (main saw it before); the failing copy a thread issued to a stream is recorded, when the
    stream's worker runs it, as that thread's last error; neither is sticky."""
    need_compiler(cpp=True)
    src = tmp_path / "per_thread.cu"
    src.write_text(PER_THREAD)
    r = _polypy("run", str(src))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == ("launcher cudaErrorInvalidConfiguration\nmain cudaSuccess\n"
                        "copier cudaErrorInvalidMemcpyDirection\nmain cudaSuccess cudaSuccess\n")


def test_the_stream_runtime_parses_with_the_bundled_headers(tmp_path: pathlib.Path) -> None:
    """Without a system compiler polypy parses its runtime with its bundled freestanding headers:
    they declare what the queues' deadlock check uses (a timed wait, _Exit), so a program with
    streams translates, its runtime slice keeping the check."""
    out = tmp_path / "latch.cpp"
    r = subprocess.run([sys.executable, "-m", "polypy.driver.cli", "translate", str(LATCH), "-o", str(out)],
                       capture_output=True, text=True, timeout=600, env={**os.environ, "POLYPY_HEADERS": "bundled"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "polypy_rt_queues_check_stall(&stalled, &progress)" in out.read_text()


CHECKED_AT_THE_CALL = r"""#include <cstdio>
#include <cuda_runtime.h>
__device__ int sym[16];
__global__ void twice(int* d) { d[threadIdx.x] *= 2; }
#define SHOW(name, call) printf("%s %s\n", name, cudaGetErrorName(call))
int main() {
  cudaStream_t s;
  cudaStreamCreate(&s);
  int *d;
  cudaMalloc(&d, 64 * sizeof(int));
  static int h[1024];
  for (int i = 0; i < 64; i++) h[i] = i;
  SHOW("direction", cudaMemcpyAsync(d, h, 4, (cudaMemcpyKind)7, s));
  SHOW("null", cudaMemcpyAsync(0, h, 4, cudaMemcpyHostToDevice, s));
  SHOW("past", cudaMemcpyAsync(d, h, 1024 * sizeof(int), cudaMemcpyHostToDevice, s));
  SHOW("past_src", cudaMemcpyAsync(h, d + 8, 512, cudaMemcpyDeviceToHost, s));
  SHOW("empty", cudaMemcpyAsync(0, 0, 0, cudaMemcpyHostToDevice, s));
  SHOW("fill_null", cudaMemsetAsync(0, 0, 4, s));
  SHOW("fill_past", cudaMemsetAsync(d + 32, 0, 1024, s));
  SHOW("to_symbol_direction", cudaMemcpyToSymbolAsync(sym, h, 4, 0, cudaMemcpyDeviceToHost, s));
  SHOW("to_symbol_past", cudaMemcpyToSymbolAsync(sym, h, 8, 60, cudaMemcpyHostToDevice, s));
  SHOW("from_symbol_direction", cudaMemcpyFromSymbolAsync(h, sym, 4, 0, cudaMemcpyHostToDevice, s));
  SHOW("rows_direction", cudaMemcpy2DAsync(d, 64, h, 64, 64, 2, (cudaMemcpyKind)9, s));
  SHOW("rows_past", cudaMemcpy2DAsync(d, 64, h, 64, 64, 8, cudaMemcpyHostToDevice, s));
  SHOW("rows_pitch", cudaMemcpy2DAsync(d, 32, h, 64, 64, 2, cudaMemcpyHostToDevice, s));
  cudaMemcpy3DParms p = {0};
  p.srcPtr = make_cudaPitchedPtr(h, 64, 16, 4);
  p.dstPtr = make_cudaPitchedPtr(d, 64, 16, 4);
  p.extent = make_cudaExtent(64, 4, 1);
  p.kind = (cudaMemcpyKind)7;
  SHOW("volume_direction", cudaMemcpy3DAsync(&p, s));
  SHOW("peer_past", cudaMemcpyPeerAsync(d, 0, d + 1, 0, 1024, s));
  SHOW("copy", cudaMemcpyAsync(d, h, 64 * sizeof(int), cudaMemcpyHostToDevice, s));
  SHOW("sync_past", cudaMemcpy(d, h, 1024 * sizeof(int), cudaMemcpyHostToDevice));
  twice<<<1, 64, 0, s>>>(d);
  SHOW("fill", cudaMemsetAsync(d, 0, 4, s));
  SHOW("back", cudaMemcpyAsync(h, d, 64 * sizeof(int), cudaMemcpyDeviceToHost, s));
  SHOW("stream", cudaStreamSynchronize(s));
  SHOW("last", cudaGetLastError());
  SHOW("last_again", cudaGetLastError());
  printf("values %d %d %d\n", h[0], h[1], h[63]);
  return 0;
}
"""


def test_asynchronous_copies_check_their_arguments_at_the_call(tmp_path: pathlib.Path) -> None:
    """CUDA checks a copy's or fill's arguments when it is issued and returns the error there
    (the work is not queued): an invalid direction is cudaErrorInvalidMemcpyDirection, a null
    pointer with bytes to touch or a range past the end of a cudaMalloc'd block (or a symbol)
    cudaErrorInvalidValue, a 2-D width past a pitch cudaErrorInvalidPitchValue. Before, each
    returned cudaSuccess and the worker failed (or overran the block) later. The good work
    issued after them runs (0 doubled is 0, then filled; 1 * 2, 63 * 2); the last error is the
    last failing call's, not sticky."""
    need_compiler(cpp=True)
    src = tmp_path / "checked.cu"
    src.write_text(CHECKED_AT_THE_CALL)
    r = _polypy("run", str(src))
    assert r.returncode == 0, r.stderr[-3000:]
    invalid = "cudaErrorInvalidValue"
    assert r.stdout.splitlines() == [
        "direction cudaErrorInvalidMemcpyDirection", f"null {invalid}", f"past {invalid}", f"past_src {invalid}",
        "empty cudaSuccess", f"fill_null {invalid}", f"fill_past {invalid}",
        "to_symbol_direction cudaErrorInvalidMemcpyDirection", f"to_symbol_past {invalid}",
        "from_symbol_direction cudaErrorInvalidMemcpyDirection", "rows_direction cudaErrorInvalidMemcpyDirection",
        f"rows_past {invalid}", "rows_pitch cudaErrorInvalidPitchValue",
        "volume_direction cudaErrorInvalidMemcpyDirection", f"peer_past {invalid}", "copy cudaSuccess",
        f"sync_past {invalid}", "fill cudaSuccess", "back cudaSuccess", "stream cudaSuccess", f"last {invalid}",
        "last_again cudaSuccess", "values 0 2 126"]
