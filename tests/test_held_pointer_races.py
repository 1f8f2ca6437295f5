"""Races through pointers held in ``__constant__`` records (issue 35, Rodinia heartwall).

``d_bufs[blockIdx.x].a[t]`` is an access of a hidden pool at an index read from constant memory
(``frontend/lower/held_pointers.py``). The race warnings judge two such accesses that read their
pointer from the same slot as accesses of one array at the offsets given (``polypy.poly.held``):
a thread's store and another thread's read of the same element with no ``__syncthreads()``
between is a warning located at both; with the barrier, none.
"""
from __future__ import annotations

import pathlib

from polypy.driver.cli import main
from polypy.driver.source import load
from polypy.poly.race_report import race_warnings

PROGRAM = """#include <cstdio>
struct Bufs { float *a; float *b; int n; };
__constant__ Bufs d_bufs[4];
__global__ void shift(float *out)
{
    int t = threadIdx.x;
    d_bufs[blockIdx.x].a[t] = 2.0f * d_bufs[blockIdx.x].b[t];
    BARRIER
    out[blockIdx.x * blockDim.x + t] = d_bufs[blockIdx.x].a[(t + 1) % blockDim.x];
}
int main()
{
    Bufs h[4];
    for (int i = 0; i < 4; i++) {
        cudaMalloc(&h[i].a, 64 * sizeof(float));
        cudaMalloc(&h[i].b, 64 * sizeof(float));
        h[i].n = 64;
    }
    cudaMemcpyToSymbol(d_bufs, h, sizeof(h));
    float *out;
    cudaMalloc(&out, 4 * 64 * sizeof(float));
    shift<<<4, 64>>>(out);
    cudaDeviceSynchronize();
    printf("done\\n");
    return 0;
}
"""


def _report(tmp_path: pathlib.Path, capsys, text: str) -> str:
    src = tmp_path / "held.cu"
    src.write_text(text)
    out = tmp_path / "held.cpp"
    assert main(["translate", str(src), "--report", "-o", str(out)]) == 0
    assert out.exists()
    return capsys.readouterr().err


def test_a_read_of_another_threads_store_through_a_held_pointer_is_a_race(tmp_path, capsys) -> None:
    err = _report(tmp_path, capsys, PROGRAM.replace("BARRIER", ""))
    src = tmp_path / "held.cu"
    # The read (line 9), the store it races with (line 7), threads of one block.
    assert f"{src}:9:40: warning: thread (tx=" in err, err
    # the pointer as the source spells it, not the hidden pool's index
    assert "reads 'd_bufs[blockIdx.x].a[(i64)((u32)((i32)threadIdx.x + 1) % blockDim.x)]'" in err
    assert "pool" not in err and "_u64" not in err
    assert "of the same block writes in kernel shift, with no __syncthreads() between them" in err
    assert f"{src}:7:5: note: the store" in err
    assert "launched here with block (64, 1, 1)" in err


def _warnings(tmp_path: pathlib.Path, text: str) -> str:
    """The race warnings alone (no translation: cheaper)."""
    src = tmp_path / "held.cu"
    src.write_text(text)
    return "\n".join(race_warnings(load(str(src))))


def test_no_warning_with_the_barrier(tmp_path) -> None:
    assert _warnings(tmp_path, PROGRAM.replace("BARRIER", "__syncthreads();")) == ""


def test_two_stores_through_one_slot_race(tmp_path) -> None:
    err = _warnings(tmp_path, PROGRAM.replace("BARRIER", "if (t == 0) d_bufs[blockIdx.x].a[1] = 0.0f;"))
    src = tmp_path / "held.cu"
    assert f"{src}:7:5: warning: threads (tx=1, bx=0) and (tx=0, bx=0) both write " \
           "'d_bufs[blockIdx.x].a[(i64)((i32)threadIdx.x)]'" in err, err
    assert f"{src}:8:17: note: the other store" in err


def test_different_slots_are_not_reported(tmp_path) -> None:
    # ``a`` and ``b`` may hold one pointer (the host decides), but need not: a race that only may
    # happen is no warning (a warning is a race that certainly happens).
    text = PROGRAM.replace("BARRIER", "").replace("d_bufs[blockIdx.x].a[(t + 1) % blockDim.x]",
                                                  "d_bufs[blockIdx.x].b[(t + 1) % blockDim.x]")
    assert _warnings(tmp_path, text) == ""


# Rodinia heartwall's shape (kernel.cu:761/784), written anew: counted ``while`` loops bounded by
# ``__constant__`` memory, then a column sum whose start is a local assigned before it and whose
# step is read from ``__constant__`` memory, through a held pointer.
COLUMNS = """struct Common { int elem; int rows; float scale; };
struct Unique { float *m; float *src; };
__constant__ Common d_common;
__constant__ Unique d_unique[8];
#define THREADS 128
__global__ void columns()
{
    int bx = blockIdx.x, tx = threadIdx.x, ei, pos, p;
    float sum;
    ei = tx;
    while (ei < d_common.elem) {
        d_unique[bx].m[ei] = d_unique[bx].src[ei] - d_unique[bx].m[ei];
        ei = ei + THREADS;
    }
    BARRIER
    ei = tx;
    while (ei < d_common.rows) {
        pos = ei;
        sum = 0;
        for (p = pos; p < pos + d_common.elem; p = p + d_common.rows) {
            d_unique[bx].m[p] = d_unique[bx].m[p] + sum;
            sum = d_unique[bx].m[p];
        }
        ei = ei + THREADS;
    }
}
int main()
{
    columns<<<8, THREADS>>>();
    return 0;
}
"""


def test_heartwalls_missing_barrier_is_found(tmp_path) -> None:
    err = _warnings(tmp_path, COLUMNS.replace("BARRIER", ""))
    src = tmp_path / "held.cu"
    assert f"{src}:12:9: warning: threads (tx=0, bx=0) and (tx=1, bx=0) both write" in err, err
    assert f"{src}:21:13: note: the other store" in err
    assert f"{src}:21:33: warning: thread (tx=0, bx=0) reads" in err  # what 12:9 of another thread stores
    assert "both write 'd_unique[bx].m[" in err and "reads 'd_unique[bx].m[" in err
    assert "pool" not in err


def test_the_pointer_is_spelled_as_written_unless_a_macro_hides_it(tmp_path) -> None:
    # The pointer read is spelled as the source spaces it; where a macro hides the member access,
    # the text stays the model's (the pool's index).
    text = PROGRAM.replace("BARRIER", "if (t == 0) d_bufs[blockIdx.x].a[1] = 0.0f;").replace(
        "    d_bufs[blockIdx.x].a[t] = 2.0f", "    d_bufs[ blockIdx.x ] .a[t] = 2.0f").replace(
        "__constant__ Bufs d_bufs[4];", "__constant__ Bufs d_bufs[4];\n#define A(i) d_bufs[i].a").replace(
        "out[blockIdx.x * blockDim.x + t] = d_bufs[blockIdx.x].a", "out[blockIdx.x * blockDim.x + t] = A(blockIdx.x)")
    err = _warnings(tmp_path, text)
    assert "both write 'd_bufs[ blockIdx.x ] .a[(i64)((i32)threadIdx.x)]'" in err, err
    assert "reads 'd_bufs_f32_pool[" in err, err


def test_the_column_sum_with_its_barrier_does_not_race(tmp_path) -> None:
    # Each thread sums its own columns (p = pos + k * rows, pos < rows): no false warning from the
    # sum's trips, nor from a step the model could take beyond its type's range.
    assert _warnings(tmp_path, COLUMNS.replace("BARRIER", "__syncthreads();")) == ""
