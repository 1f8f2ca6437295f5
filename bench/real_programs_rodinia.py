"""Rodinia 3.1 (yuhc/gpu-rodinia) for ``bench/real_programs.py``: one description per program.

Counting: Rodinia's "24 CUDA benchmarks" are its 23 directories ``cuda/<name>`` (``util``
excluded) with srad's two versions, ``srad_v1`` and ``srad_v2`` (separate programs with their
own Makefiles), counted as two. particlefilter builds two programs from one Makefile
(``naive``, ``float``): two rows, one benchmark, correct when both are. cfd is its ``euler3d``
program (the one ``cuda/cfd/run`` runs).

Flags are those of each Makefile and ``common/make.config`` (which defines none): the Makefiles
pass ``-I$(CUDA_DIR)/include`` (not needed: polypy ships the CUDA headers), ``-I../common``,
``-DTIMING``/``-DGPU_TIMER`` here and there, ``$(KERNEL_DIM)`` (empty unless set). Where the
CUDA program only prints its result under a switch its Makefile offers (``make OUTPUT=1`` ->
``-DOUTPUT``; ``BENCH_PRINT`` and ``TRACEBACK`` are commented-out ``#define``s), that -D is
passed to both versions so that there is something to compare; the description says so.

Rodinia's ``data/`` directory is not in the checkout: ``inputs(directory, size)`` writes small
seeded inputs in each program's own format (``size``: ``tiny`` for an emulated reference,
``small`` for the table, ``time`` for ``--time``) and returns the parameters the argument
templates use. Programs that open ``../../data/<name>/...`` themselves run from a directory
that deep, with ``data`` pointing at the generated files.
"""
from __future__ import annotations

import pathlib
import random
from typing import Callable, Mapping

from bench.real_programs_spec import Build, Check, Output, Probe, Program

Inputs = Callable[[pathlib.Path, str], Mapping[str, str]]


def _pick(size: str, tiny, small, time):
    return {"tiny": tiny, "small": small, "time": time}[size]


def _write_lines(path: pathlib.Path, values) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{v}\n" for v in values))
    return str(path)


# ---------------------------------------------------------------------------------------------
# input generators (each seeded: the same size gives the same files)

def _hotspot(directory: pathlib.Path, size: str) -> dict[str, str]:
    n, iters = _pick(size, (64, 4), (256, 20), (1024, 200))
    rng = random.Random(1)
    temp = _write_lines(directory / f"temp_{n}", (f"{323.0 + 20 * rng.random():.6f}" for _ in range(n * n)))
    power = _write_lines(directory / f"power_{n}", (f"{0.001 * rng.random():.8f}" for _ in range(n * n)))
    return {"n": str(n), "iters": str(iters), "temp": temp, "power": power, "pyramid": "2"}


def _hotspot3d(directory: pathlib.Path, size: str) -> dict[str, str]:
    n, layers, iters = _pick(size, (32, 4, 4), (64, 8, 20), (256, 8, 100))
    rng = random.Random(2)
    count = n * n * layers
    power = _write_lines(directory / "power", (f"{0.001 * rng.random():.8f}" for _ in range(count)))
    temp = _write_lines(directory / "temp", (f"{323.0 + 20 * rng.random():.6f}" for _ in range(count)))
    return {"n": str(n), "layers": str(layers), "iters": str(iters), "power": power, "temp": temp}


def _bfs(directory: pathlib.Path, size: str) -> dict[str, str]:
    """Rodinia's graph format: node count; per node ``start degree``; the source; edge count;
    per edge ``destination cost``."""
    nodes = _pick(size, 512, 4096, 1 << 18)
    rng = random.Random(3)
    edges: list[list[int]] = [[] for _ in range(nodes)]
    for v in range(nodes):
        for _ in range(rng.randint(1, 4)):
            w = rng.randrange(nodes)
            edges[v].append(w)
            edges[w].append(v)
    lines = [str(nodes)]
    start = 0
    for v in range(nodes):
        lines.append(f"{start} {len(edges[v])}")
        start += len(edges[v])
    lines += ["", "0", "", str(start)]
    lines += [f"{w} {rng.randint(1, 10)}" for v in range(nodes) for w in edges[v]]
    return {"graph": _write_lines(directory / "graph.txt", lines)}


def _nn(directory: pathlib.Path, size: str) -> dict[str, str]:
    """Hurricane records: fixed-width lines, latitude at column 28, longitude at 33."""
    records = _pick(size, 256, 4096, 1 << 20)
    rng = random.Random(4)
    lines = []
    for i in range(records):
        lat, lon = rng.uniform(7, 70), rng.uniform(0, 358)
        lines.append(f"{1950 + i % 60:4d} {1 + i % 12:2d} {1 + i % 28:2d} {i % 24:2d} {i % 100:2d} "
                     f"{'STORM':<9s} {lat:5.1f} {lon:5.1f} {rng.randint(10, 160):4d} {rng.randint(900, 1010):4d}")
    db = _write_lines(directory / "hurricane.db", lines)
    return {"filelist": _write_lines(directory / "filelist.txt", [db]), "k": "5", "lat": "30", "lng": "90"}


def _kmeans(directory: pathlib.Path, size: str) -> dict[str, str]:
    points, features = _pick(size, (256, 8), (2048, 16), (1 << 17, 34))
    rng = random.Random(5)
    lines = [f"{i + 1} " + " ".join(f"{rng.gauss(float(i % 5), 1.0):.4f}" for _ in range(features))
             for i in range(points)]
    return {"points": _write_lines(directory / "points.txt", lines)}


def _btree(directory: pathlib.Path, size: str) -> dict[str, str]:
    """``mil.txt``: the key count, then one key a line; ``command.txt``: the queries (``k``:
    that many single-key searches, ``j``: range searches), as in Rodinia's own files."""
    keys, queries = _pick(size, (2000, 100), (20000, 1000), (1000000, 10000))
    rng = random.Random(6)
    values = rng.sample(range(1, 4 * keys), keys)
    data = _write_lines(directory / "mil.txt", [str(keys), *map(str, values)])
    command = directory / "command.txt"
    command.write_text(f"j {queries} {min(queries, 3000)}\nk {queries}\n")
    return {"data": data, "command": str(command)}


def _cfd(directory: pathlib.Path, size: str) -> dict[str, str]:
    """A domain file: element count; per element its volume and, for each of 4 faces, the
    neighbour (1-based; -1, -2 for wall and far-field faces) and the face normal (3 numbers)."""
    count = _pick(size, 256, 512, 4096)
    rng = random.Random(7)
    lines = [str(count)]
    for i in range(count):
        parts = [f"{0.5 + rng.random():.6f}"]
        for j, off in enumerate((1, -1, 16, -16)):
            k = i + off
            neighbour = k + 1 if 0 <= k < count else -1 - (j % 2)
            normal = [rng.uniform(-0.01, 0.01) for _ in range(3)]
            parts.append(f"{neighbour} " + " ".join(f"{x:.6f}" for x in normal))
        lines.append(" ".join(parts))
    return {"domain": _write_lines(directory / "domain.txt", lines)}


def _srad_image(directory: pathlib.Path, size: str) -> dict[str, str]:
    """``data/srad/image.pgm``: an ASCII PGM of Rodinia's 502x458 ultrasound image size (the
    program reads exactly that size, then resizes it to the rows/columns it is given)."""
    rng = random.Random(8)
    rows, cols = 502, 458
    pixels = (str(min(255, max(0, int(128 + 40 * rng.gauss(0, 1))))) for _ in range(rows * cols))
    _write_lines(directory / "data" / "srad" / "image.pgm", ["P2", f"{cols} {rows}", "255", *pixels])
    nr, iters = _pick(size, (32, 2), (128, 10), (502, 100))
    return {"rows": str(nr), "cols": str(nr), "iters": str(iters)}


def _mummer(directory: pathlib.Path, size: str) -> dict[str, str]:
    length, reads = _pick(size, (2000, 20), (20000, 200), (1000000, 20000))
    rng = random.Random(9)
    genome = "".join(rng.choice("ACGT") for _ in range(length))
    ref = _write_lines(directory / "ref.fna", [">reference", *(genome[i:i + 70] for i in range(0, length, 70))])
    lines = []
    for r in range(reads):
        at = rng.randrange(length - 100)
        lines += [f">read{r}", genome[at:at + 100]]
    return {"ref": ref, "query": _write_lines(directory / "query.fna", lines)}


def _dwt2d(directory: pathlib.Path, size: str) -> dict[str, str]:
    """``data/dwt2d/rgb.bmp``: the program reads width*height*3 raw bytes from it (no header)."""
    n = _pick(size, 64, 192, 1024)
    rng = random.Random(10)
    path = directory / "data" / "dwt2d" / "rgb.bmp"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(min(255, int(abs(rng.gauss(100, 40)))) for _ in range(n * n * 3)))
    return {"image": "rgb.bmp", "n": str(n)}


def _huffman(directory: pathlib.Path, size: str) -> dict[str, str]:
    """Any bytes (the program encodes the file); skewed so that the codes differ in length."""
    count = _pick(size, 1 << 14, 1 << 18, 1 << 24)
    rng = random.Random(11)
    path = directory / "input.bin"
    path.write_bytes(bytes(min(255, int(rng.expovariate(1 / 20))) for _ in range(count)))
    return {"data": str(path)}


def _myocyte(directory: pathlib.Path, size: str) -> dict[str, str]:
    """``data/myocyte/y.txt`` (91 initial values) and ``params.txt`` (18 parameters): seeded
    values in [0, 1), not Rodinia's physiological ones (the run checks the translation, not
    the model)."""
    rng = random.Random(12)
    _write_lines(directory / "data" / "myocyte" / "y.txt", (f"{rng.random():.6f}" for _ in range(91)))
    _write_lines(directory / "data" / "myocyte" / "params.txt", (f"{rng.random():.6f}" for _ in range(18)))
    return {"xmax": str(_pick(size, 1, 10, 100))}


def write_avi(path: pathlib.Path, width: int, height: int, frames) -> None:
    """An uncompressed AVI of 8-bit grey frames (``frames``: ``bytes`` of ``width*height`` each,
    stored bottom row first, as a DIB is): RIFF ``AVI `` with a ``hdrl`` list (``avih``, one
    ``strl`` with a ``vids`` ``strh`` and a BITMAPINFOHEADER ``strf``), a ``movi`` list of
    ``00db`` chunks and an ``idx1`` index, as Rodinia's avilib (leukocyte, heartwall) reads them."""
    import struct

    def chunk(tag: bytes, data: bytes) -> bytes:
        return tag + struct.pack("<I", len(data)) + data + (b"\0" if len(data) % 2 else b"")

    def riff_list(kind: bytes, data: bytes) -> bytes:
        return chunk(b"LIST", kind + data)

    frames = list(frames)
    size = width * height
    avih = struct.pack("<14I", 40000, size * 25, 0, 0x10, len(frames), 0, 1, size, width, height, 0, 0, 0, 0)
    strh = struct.pack("<4s4sIHHIIIIIIIIhhhh", b"vids", b"DIB ", 0, 0, 0, 0, 1, 25, 0, len(frames), size,
                       0xFFFFFFFF, 0, 0, 0, width, height)
    palette = b"".join(bytes((g, g, g, 0)) for g in range(256))
    strf = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 8, 0, size, 0, 0, 256, 256) + palette
    hdrl = riff_list(b"hdrl", chunk(b"avih", avih) + riff_list(b"strl", chunk(b"strh", strh) + chunk(b"strf", strf)))
    movi_chunks, index, offset = [], [], 4
    for frame in frames:
        assert len(frame) == size
        c = chunk(b"00db", frame)
        index.append(struct.pack("<4sIII", b"00db", 0x10, offset, size))
        movi_chunks.append(c)
        offset += len(c)
    body = hdrl + riff_list(b"movi", b"".join(movi_chunks)) + chunk(b"idx1", b"".join(index))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"RIFF" + struct.pack("<I", 4 + len(body)) + b"AVI " + body)


def _cells_video(path: pathlib.Path, width: int, height: int, count: int, seed: int) -> None:
    """Frames of a grey background with noise and bright rings of radius 8-14 (cells) drifting a
    pixel a frame; the same seed gives the same file."""
    rng = random.Random(seed)
    cells = [(rng.uniform(30, width - 30), rng.uniform(130, 310), rng.uniform(8, 14)) for _ in range(12)]
    frames = []
    for f in range(count):
        pixels = bytearray(rng.randrange(90, 110) for _ in range(width * height))
        for x0, y0, r in cells:
            cx, cy = x0 + f, y0 + 0.5 * f
            for y in range(int(cy - r - 2), int(cy + r + 3)):
                for x in range(int(cx - r - 2), int(cx + r + 3)):
                    if 0 <= x < width and 0 <= y < height:
                        d = abs(((x - cx) ** 2 + (y - cy) ** 2) ** 0.5 - r)
                        if d < 2:
                            pixels[(height - 1 - y) * width + x] = min(255, 170 + int(40 * (2 - d)))
        frames.append(bytes(pixels))
    write_avi(path, width, height, frames)


def _leukocyte(directory: pathlib.Path, size: str) -> dict[str, str]:
    """``testfile.avi``: Rodinia's video is 640x480, 8-bit grey; the program crops rows 110-328 and
    reads frames 0 to N for N frames of tracking (16 in the file: ``time`` tracks 10)."""
    frames = _pick(size, 2, 3, 10)
    path = directory / "testfile.avi"
    if not path.exists():
        _cells_video(path, 640, 480, 16, seed=13)
    return {"avi": str(path), "frames": str(frames)}


def _heartwall(directory: pathlib.Path, size: str) -> dict[str, str]:
    """``test.avi`` (Rodinia's own video is not in the checkout), 8-bit grey; the program tracks 51 points
    hard-coded at rows 252-543 and columns 155-457, each searched in a window of +-40 pixels around
    a 51x51 template taken from frame 0. Our frames are one smooth random texture moved down and
    right by one pixel a frame, so that each point's best match is a clear peak. (The CUDA
    version's output is not compared: its kernel races, see the program's note.)"""
    frames = _pick(size, 2, 3, 6)
    path = directory / "test.avi"
    if not path.exists():
        _texture_video(path, 512, 600, 6, seed=36)
    return {"avi": str(path), "frames": str(frames)}


def _texture_video(path: pathlib.Path, width: int, height: int, count: int, seed: int) -> None:
    """Frames of one texture (uniform noise blurred by a 9x9 box, stretched to 0-255) moved one
    pixel down and right per frame; the same seed gives the same file."""
    rng = random.Random(seed)
    w, h, k = width + count, height + count, 4
    noise = [[rng.random() for _ in range(w + 2 * k)] for _ in range(h + 2 * k)]
    rows = [[sum(r[x:x + 2 * k + 1]) for x in range(w)] for r in noise]  # (box sums: small, slow is fine)
    field = [[sum(rows[y + d][x] for d in range(2 * k + 1)) for x in range(w)] for y in range(h)]
    lo = min(min(r) for r in field)
    hi = max(max(r) for r in field)
    scaled = [[int(255 * (v - lo) / (hi - lo)) for v in r] for r in field]
    frames = []
    for f in range(count):
        top, left = count - f, count - f  # the texture moves down and right a pixel a frame
        frames.append(bytes(scaled[top + y][left + x] for y in range(height - 1, -1, -1) for x in range(width)))
    write_avi(path, width, height, frames)


def _sizes(**per_size) -> Inputs:
    """Parameters only (programs that make their own data): ``name=(tiny, small, time)``."""
    def inputs(directory: pathlib.Path, size: str) -> dict[str, str]:
        return {k: str(_pick(size, *v)) for k, v in per_size.items()}
    return inputs


# ---------------------------------------------------------------------------------------------
# the programs

def _c(d: str, **kw) -> Build:
    return Build(f"cuda/{d}", **kw)


def _o(d: str, **kw) -> Build:
    return Build(f"openmp/{d}", **kw)


# ---------------------------------------------------------------------------------------------
# probes: results the programs compute but do not print (our C code, linked in with ld --wrap)

# backprop: the network as facetrain.c hands it to bpnn_free (backprop.c), after one training
# step, and every argument of exp(): the pre-activation sums of the hidden and output units, in
# the same order in both versions (the CUDA version's host code sums the GPU's partial sums and
# calls exp itself, as C++: expf for a float; the OpenMP version's squash calls exp). The hidden units themselves are all
# 1.0f (Rodinia's weights and inputs are uniform in [0, 1], so the sums are in the thousands):
# the sums are what checks the GPU's reduction. The input-to-hidden weights are not written: the
# CUDA version adjusts them on the GPU, copies them back into a scratch array and frees it
# (net->input_weights keeps the old values), while the OpenMP version updates them in place.
_BACKPROP_PROBE = Probe(("bpnn_free", "exp", "expf"), r"""
#include <stdio.h>
#include <stdlib.h>
#include "backprop.h"
void __real_bpnn_free(BPNN *net);
double __real_exp(double x);
float __real_expf(float x);
/* the OpenMP version calls exp from several threads, in no fixed order: kept, sorted, written */
enum { CAPACITY = 1 << 16 };
static double args[CAPACITY];
static int count;
static void keep(double x) {
  int k = __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED);
  if (k < CAPACITY) args[k] = x;
}
double __wrap_exp(double x) { keep(x); return __real_exp(x); }
float __wrap_expf(float x) { keep(x); return __real_expf(x); }
static int ascending(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static void row(FILE *f, const char *name, const float *v, int n) {
  fprintf(f, "%s\n", name);
  for (int i = 0; i < n; i++) fprintf(f, "%.7g\n", v[i]);
}
void __wrap_bpnn_free(BPNN *net) {
  FILE *f = fopen("probe.txt", "w");
  int hid = net->hidden_n, out = net->output_n, n = count < CAPACITY ? count : CAPACITY;
  qsort(args, n, sizeof args[0], ascending);
  fprintf(f, "exp arguments (sorted)\n");
  for (int i = 0; i < n; i++) fprintf(f, "%.9g\n", args[i]);
  row(f, "hidden units", net->hidden_units, hid + 1);
  row(f, "output units", net->output_units, out + 1);
  row(f, "output delta", net->output_delta, out + 1);
  row(f, "hidden delta", net->hidden_delta, hid + 1);
  for (int j = 0; j <= hid; j++) row(f, "hidden weights", net->hidden_weights[j], out + 1);
  for (int j = 0; j <= hid; j++) row(f, "hidden prev weights", net->hidden_prev_weights[j], out + 1);
  fclose(f);
  __real_bpnn_free(net);
}
""")

# kmeans: the cluster centres kmeans_clustering (kmeans_clustering.c) returns to cluster.c. The
# CUDA version prints them too (-o), the OpenMP version has that printing commented out.
_KMEANS_PROBE = Probe(("kmeans_clustering",), r"""
#include <stdio.h>
float **__real_kmeans_clustering(float **feature, int nfeatures, int npoints, int nclusters, float threshold,
                                 int *membership);
float **__wrap_kmeans_clustering(float **feature, int nfeatures, int npoints, int nclusters, float threshold,
                                 int *membership) {
  float **centres = __real_kmeans_clustering(feature, nfeatures, npoints, nclusters, threshold, membership);
  FILE *f = fopen("probe.txt", "a");
  int k = nclusters < npoints ? nclusters : npoints;
  for (int i = 0; i < k; i++) {
    for (int j = 0; j < nfeatures; j++) fprintf(f, "%.7g ", centres[i][j]);
    fprintf(f, "\n");
  }
  for (int i = 0; i < npoints; i++) fprintf(f, "%d\n", membership[i]);
  fclose(f);
  return centres;
}
""")


# meschach_lib/makefile's LIST1-3 and ZLIST1-2 (meschach.a as ./configure --with-all builds it)
_MESCHACH = tuple(f"../meschach_lib/{name}.c" for name in (
    "copy err matrixio memory vecop matop pxop submat init otherio machine matlab ivecop version meminfo memstat "
    "lufactor bkpfacto chfactor qrfactor solve hsehldr givens update norm hessen symmeig schur svd fft mfunc "
    "bdfactor sparse sprow sparseio spchfctr splufctr spbkp spswap iter0 itersym iternsym "
    "zmachine zcopy zmatio zmemory zvecop zmatop znorm zfunc zlufctr zsolve zmatlab zhsehldr zqrfctr zgivens "
    "zhessen zschur").split())

TEMP_LINES = r"^\s*\d+\s+[-+0-9.eE]+\s*$"


def programs(root: pathlib.Path) -> list[Program]:
    del root  # the table is fixed; a missing directory shows up as a translate failure
    return [
        Program("b+tree", _c("b+tree", cu=("kernel/kernel_gpu_cuda_wrapper.cu", "kernel/kernel_gpu_cuda_wrapper_2.cu",
                                           "util/cuda/cuda.cu"),
                             c=("main.c", "util/timer/timer.c", "util/num/num.c"), flags=("-DRD_WG_SIZE_0=508",)),
                ("file", "{data}", "command", "{command}"), _btree,
                Check("omp", Output("output.txt")),
                omp=_o("b+tree", c=("main.c", "kernel/kernel_cpu.c", "kernel/kernel_cpu_2.c", "util/timer/timer.c",
                                    "util/num/num.c")),
                omp_args=("core", "{threads}", "file", "{data}", "command", "{command}")),
        Program("backprop", _c("backprop", cu=("backprop_cuda.cu",), c=("backprop.c", "facetrain.c", "imagenet.c"),
                               probe=_BACKPROP_PROBE),
                ("{n}",), _sizes(n=(1024, 16384, 65536)), Check("omp", Output("probe.txt")),
                omp=_o("backprop", c=("backprop.c", "facetrain.c", "imagenet.c", "backprop_kernel.c"),
                       probe=_BACKPROP_PROBE),
                note="prints no result: the trained network, as both versions hand it to bpnn_free, written by "
                     "a probe of ours (ld --wrap) and compared, but for the input weights (the CUDA version "
                     "discards its GPU update of them)"),
        Program("bfs", _c("bfs", cu=("bfs.cu",), flags=("-I../util", "-DTIMING")), ("{graph}",), _bfs,
                Check("omp", Output("result.txt")),
                omp=_o("bfs", cxx=("bfs.cpp",), flags=("-DOPEN",)), omp_args=("{threads}", "{graph}")),
        Program("cfd", _c("cfd", cu=("euler3d.cu",)), ("{domain}",), _cfd,
                Check("omp", Output("density", start=r"^\s*\d+\s+\d+\s*$"), rtol=1e-3, atol=1e-3),
                omp=_o("cfd", cxx=("euler3d_cpu.cpp",), flags=("-Dblock_length=1",)),
                note="2000 iterations are hard-coded; a small mesh"),
        Program("dwt2d", _c("dwt2d", cu=("main.cu", "dwt.cu", "components.cu", "dwt_cuda/fdwt53.cu",
                                         "dwt_cuda/fdwt97.cu", "dwt_cuda/common.cu", "dwt_cuda/rdwt97.cu",
                                         "dwt_cuda/rdwt53.cu"), flags=("-I.", "-DOUTPUT")),
                ("{image}", "-d", "{n}x{n}", "-f", "-5", "-l", "3"), _dwt2d, Check("none"), cwd="run/dwt2d",
                note="opens ../../data/dwt2d/<image> itself; no OpenMP version, several .cu files: no reference"),
        Program("gaussian", _c("gaussian", cu=("gaussian.cu",)), ("-s", "{n}"), _sizes(n=(16, 64, 512)),
                Check("emulate", Output("copies.txt")), trace_copies=True,
                note="prints no result (its verbose flag is 0 and only -q changes it) and has no OpenMP version: "
                     "what the kernels return to the host (m, a, b: POLYPY_TRACE_COPIES) against the emulated run"),
        Program("heartwall", _c("heartwall", cu=("main.cu",), c=("AVI/avilib.c", "AVI/avimod.c"),
                                flags=("-I./AVI", "-DOUTPUT")),
                ("{avi}", "{frames}"), _heartwall, Check("none"),
                omp=_o("heartwall", c=("main.c", "AVI/avilib.c", "AVI/avimod.c"), flags=("-I./AVI", "-DOUTPUT")),
                omp_args=("{avi}", "{frames}", "{threads}"),
                note="a generated 512x600 video of a texture moving a pixel a frame. Not compared: the "
                     "kernel races (kernel.cu:761, the subtraction, and :784, the column sums that read "
                     "other threads' results, with no __syncthreads() between), so its output depends on "
                     "the order of the threads (docs/real_programs.md: with that barrier added, polypy's "
                     "result.txt is the OpenMP version's, digit for digit)"),
        Program("hotspot", _c("hotspot", cu=("hotspot.cu",)),
                ("{n}", "{pyramid}", "{iters}", "{temp}", "{power}", "output.out"), _hotspot,
                Check("emulate", Output("output.out")),
                omp=_o("hotspot", cxx=("hotspot_openmp.cpp",), flags=("-DOUTPUT",)),
                omp_args=("{n}", "{n}", "{iters}", "{threads}", "{temp}", "{power}", "output.out"),
                note="the OpenMP version takes a 1000x smaller time step (different numbers, same work): "
                     "emulator reference, OpenMP timed"),
        Program("hotspot3D", _c("hotspot3D", cu=("3D.cu",)),
                ("{n}", "{layers}", "{iters}", "{power}", "{temp}", "output.out"), _hotspot3d,
                Check("omp", Output("output.out")), omp=_o("hotspot3D", c=("3D.c",))),
        Program("huffman", _c("huffman", cu=("main_test_cu.cu", "vlc_kernel_sm64huff.cu", "scan.cu", "pack_kernels.cu"),
                              cxx=("stats_logger.cpp", "cpuencode.cpp")),
                ("{data}",), _huffman,
                Check("self", pattern=r"(?P<ok>PASS|FAIL)! vectors are", expect="PASS"),
                note="its own comparison with a CPU encoder; no OpenMP version"),
        Program("hybridsort", _c("hybridsort", cu=("bucketsort.cu", "mergesort.cu", "main.cu"), flags=("-DVERIFY",)),
                ("r",), None, Check("self", pattern=r"Checking result\.\.\.(?P<ok>PASSED|FAILED)", expect="PASSED",
                                    absent=r"missmatch"),
                note="random input made by the program, checked by its own -DVERIFY comparison with a CPU sort "
                     "(no OpenMP version); includes GLEW's and GLUT's headers (uses neither): needs them installed, "
                     "as nvcc does (Debian: libglew-dev, freeglut3-dev)"),
        Program("kmeans", _c("kmeans", cu=("kmeans_cuda.cu",),
                             c=("cluster.c", "getopt.c", "kmeans.c", "kmeans_clustering.c", "rmse.c"),
                             probe=_KMEANS_PROBE),
                ("-o", "-i", "{points}"), _kmeans,
                Check("omp", Output("probe.txt")),
                omp=_o("kmeans/kmeans_openmp", c=("cluster.c", "getopt.c", "kmeans.c", "kmeans_clustering.c"),
                       probe=_KMEANS_PROBE),
                omp_args=("-n", "{threads}", "-i", "{points}"),
                note="the OpenMP version's printing of the centres is commented out: the centres and every "
                     "point's cluster that kmeans_clustering returns, written by a probe of ours (ld --wrap) "
                     "in both versions, compared"),
        Program("lavaMD", _c("lavaMD", cu=("kernel/kernel_gpu_cuda_wrapper.cu", "util/device/device.cu"),
                             c=("main.c", "util/num/num.c", "util/timer/timer.c"), flags=("-DOUTPUT",)),
                ("-boxes1d", "{boxes}"), _sizes(boxes=(2, 4, 10)),
                Check("omp", Output("result.txt")),
                omp=_o("lavaMD", c=("main.c", "kernel/kernel_cpu.c", "util/num/num.c", "util/timer/timer.c"),
                       flags=("-DOUTPUT",)),
                omp_args=("-cores", "{threads}", "-boxes1d", "{boxes}"), fixed_time=1_000_000_000,
                note="both versions seed rand() from time(NULL): time() is pinned to a constant for both "
                     "(a preloaded shim of the runner's)"),
        Program("leukocyte", _c("leukocyte/CUDA", cu=("find_ellipse_kernel.cu", "track_ellipse_kernel.cu"),
                                c=("detect_main.c", "avilib.c", "find_ellipse.c", "track_ellipse.c", "misc_math.c",
                                   *_MESCHACH), flags=("-I../meschach_lib", "-DOUTPUT")),
                ("{avi}", "{frames}"), _leukocyte, Check("omp", Output("result.txt"), rtol=0.0, atol=1.5),
                omp=_o("leukocyte/OpenMP", c=("detect_main.c", "avilib.c", "find_ellipse.c", "track_ellipse.c",
                                              "misc_math.c", *_MESCHACH), flags=("-I../meschach_lib", "-DOUTPUT")),
                omp_args=("{frames}", "{threads}", "{avi}"),
                note="meschach.a built from its sources as C files of the program; a generated 640x480 video "
                     "of drifting rings: the tracked cells' final centres (result.txt, -DOUTPUT) compared within "
                     "1.5 pixels: the CUDA version computes the MGVF field in float on the GPU, the OpenMP version "
                     "in double (meschach): after one frame the cells detected are the same and 7 of 10 centres "
                     "agree to 1e-3 px, the others move by up to 0.9 px (the translation without optimization "
                     "gives the same output to the last digit)"),
        Program("lud", _c("lud/cuda", cu=("lud.cu", "lud_kernel.cu"), c=("../common/common.c",),
                          flags=("-I../common", "-DGPU_TIMER")),
                ("-s", "{n}", "-v"), _sizes(n=(64, 256, 1024)),
                Check("self", pattern=r"(?P<ok>>>>Verify<<<<)", expect=">>>Verify<<<<", absent=r"dismatch"),
                omp=_o("lud/omp", c=("lud.c", "lud_omp.c", "../common/common.c"), flags=("-I../common",)),
                omp_args=("-s", "{n}", "-n", "{threads}"), time_args=("-s", "{n}"),
                note="-v: the program checks L*U against its input (no 'dismatch' line); timed without -v"),
        Program("mummergpu", _c("mummergpu/src", cu=("mummergpu.cu",),
                                cxx=("mummergpu_gold.cpp", "mummergpu_main.cpp", "suffix-tree.cpp", "PoolMalloc.cpp"),
                                flags=("-I.", "-DUNIX"), own_flags=("-include", "unistd.h", "-O0")),
                ("{ref}", "{query}"), _mummer, Check("own"), omp_args=("-C", "{ref}", "{query}"),
                note="openmp/mummergpu is the same CUDA program run with -C (its CPU path, mummergpu_gold.cpp): "
                     "the reference, run from our binary. Its own C++ files get -include unistd.h (suffix-tree.cpp "
                     "calls read() without it) and -O0 (suffix-tree.cpp:1211 crashes when optimized, -C too)"),
        Program("myocyte", _c("myocyte", cu=("main.cu",)), ("{xmax}", "1", "0"), _myocyte,
                Check("emulate", Output("output.txt")), cwd="run/myocyte",
                note="opens ../../data/myocyte/*.txt itself; the OpenMP version prints nothing: emulator reference, "
                     "which stops at the program's own race (kernel_cam.cu:348 writes d_finavalu[com_offset], "
                     "meant d_com, while block 0 writes d_finavalu[0..45])"),
        Program("nn", _c("nn", cu=("nn_cuda.cu",)), ("{filelist}", "-r", "{k}", "-lat", "{lat}", "-lng", "{lng}"), _nn,
                Check("omp", Output(keep=r"-->", after="-->", sort=True),
                      Output("stderr", keep=r"-->", after="-->", sort=True)),
                omp=_o("nn", c=("nn_openmp.c",)), omp_args=("{filelist}", "{k}", "{lat}", "{lng}"),
                note="the k nearest distances compared (sorted: the OpenMP version prints them unsorted, on stderr)"),
        Program("nw", _c("nw", cu=("needle.cu",), flags=("-DTRACEBACK",)), ("{n}", "10"), _sizes(n=(64, 512, 4096)),
                Check("emulate", Output("result.txt", drop_last=1)),
                omp=_o("nw", cxx=("needle.cpp",)), omp_args=("{n}", "10", "{threads}"),
                note="-DTRACEBACK writes result.txt; the OpenMP version prints nothing: emulator reference. "
                     "The last traceback value reads referrence[i*max_cols+0], never initialized: not compared"),
        Program("particlefilter_naive", _c("particlefilter", cu=("ex_particle_CUDA_naive_seq.cu",)),
                ("-x", "{xy}", "-y", "{xy}", "-z", "{frames}", "-np", "{np}"),
                _sizes(xy=(32, 128, 128), frames=(4, 10, 10), np=(100, 1000, 2000)),
                Check("omp", Output(keep=r"^(XE|YE):")),
                omp=_o("particlefilter", c=("ex_particle_OPENMP_seq.c",)), benchmark="particlefilter",
                fixed_time=1_000_000_000,
                note="seeded from time(0), pinned for both: every frame's estimate (XE, YE) compared "
                     "(the same random draws as the OpenMP version)"),
        Program("particlefilter_float", _c("particlefilter", cu=("ex_particle_CUDA_float_seq.cu",)),
                ("-x", "{xy}", "-y", "{xy}", "-z", "{frames}", "-np", "{np}"),
                _sizes(xy=(32, 128, 128), frames=(4, 10, 10), np=(100, 1000, 2000)),
                Check("omp", Output(keep=r"^(XE|YE):", last=2), rtol=0.02, atol=0.5),
                omp=_o("particlefilter", c=("ex_particle_OPENMP_seq.c",)), benchmark="particlefilter",
                fixed_time=1_000_000_000,
                note="seeded from time(0), pinned for both: the final estimate (XE, YE) compared within 2% "
                     "(single precision: 48.37 vs 48.73 at the small size); it prints only the last frame's"),
        Program("pathfinder", _c("pathfinder", cu=("pathfinder.cu",), flags=("-DBENCH_PRINT",)),
                ("{cols}", "{rows}", "20"), _sizes(cols=(256, 10000, 200000), rows=(20, 100, 500)),
                Check("omp", Output(last=1)), omp=_o("pathfinder", cxx=("pathfinder.cpp",)),
                omp_args=("{cols}", "{rows}"),
                note="-DBENCH_PRINT (the OpenMP version defines it): last line compared; both print the whole "
                     "input, which dominates their times"),
        Program("srad_v1", _c("srad/srad_v1", cu=("main.cu",)), ("{iters}", "0.5", "{rows}", "{cols}"), _srad_image,
                Check("omp", Output("image_out.pgm", start=r"^255\s*$"), rtol=1e-3, atol=1.0),
                omp=_o("srad/srad_v1", c=("main.c",)), omp_args=("{iters}", "0.5", "{rows}", "{cols}", "{threads}"),
                cwd="run/srad/srad_v1", note="opens ../../../data/srad/image.pgm itself"),
        Program("srad_v2", _c("srad/srad_v2", cu=("srad.cu",), flags=("-DOUTPUT",)),
                ("{n}", "{n}", "0", "31", "0", "31", "0.5", "{iters}"), _sizes(n=(64, 256, 1024), iters=(2, 10, 20)),
                Check("omp", Output(last=None, skip=(*_TIMING, r"[A-Za-z]{3,}"))),
                omp=_o("srad/srad_v2", cxx=("srad.cpp",), flags=("-DOUTPUT", "-DOPEN")),
                omp_args=("{n}", "{n}", "0", "31", "0", "31", "{threads}", "0.5", "{iters}")),
        Program("streamcluster", _c("streamcluster", cu=("streamcluster_cuda.cu", "streamcluster_header.cu"),
                                    cxx=("streamcluster_cuda_cpu.cpp",)),
                ("10", "20", "{dim}", "{n}", "{n}", "1000", "none", "output.txt", "1"),
                _sizes(dim=(16, 64, 64), n=(256, 4096, 16384)),
                Check("omp", Output("output.txt")), omp=_o("streamcluster", cxx=("streamcluster_omp.cpp",)),
                omp_args=("10", "20", "{dim}", "{n}", "{n}", "1000", "none", "output.txt", "{threads}"),
                reference_threads=1,
                note="checked against the OpenMP version on one thread: with two, its parallel reduction of "
                     "the cost of opening a centre sums in a different order from run to run, and the "
                     "clustering it prints differs (5 of 8 runs: 44 lines instead of 48); on one thread it "
                     "gives the same file every time, the one the translation gives; timed with all threads"),
    ]


_TIMING = (r"(?i)\btime", r"(?i)\bsec", r"(?i)exec:")
