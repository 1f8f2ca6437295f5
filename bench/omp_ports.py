"""The "omp" variant: the hand-written OpenMP C ports in ``bench/omp/``, called through ctypes.

``PORTS`` says, for each sample, which C function runs it, its C parameter types, and how the
sample's arguments (plus sizes the CUDA kernel took from its launch shape, such as the number of
rows) map onto its parameters. Each C file documents its signature.
"""
from __future__ import annotations

import ctypes
import dataclasses
from typing import Any, Callable

import numpy as np

from bench.build import load_library
from bench.runner import Runner, Skip
from samples.spec import Case, Sample

# Parameter kinds: a pointer to elements of a NumPy dtype ("f32*"), or a scalar ("i32", "f32").
_POINTERS = {"f32*": np.float32, "i32*": np.int32, "u8*": np.uint8, "u32*": np.uint32}
_SCALARS = {"i32": (ctypes.c_int, int), "f32": (ctypes.c_float, float)}


@dataclasses.dataclass(frozen=True)
class Port:
    """One C entry point: ``symbol(params...)``, fed by ``bind(args, case)`` in parameter order."""

    symbol: str
    params: tuple[str, ...]
    bind: Callable[[dict[str, Any], Case], tuple[Any, ...]]


def _pick(*names: str) -> Callable[[dict[str, Any], Case], tuple[Any, ...]]:
    """Bind the sample's own arguments, by name, in the given order."""
    return lambda args, case: tuple(args[name] for name in names)


PORTS: dict[str, Port] = {
    "saxpy": Port("saxpy_omp", ("i32", "f32", "f32*", "f32*"), _pick("n", "a", "x", "y")),
    "matmul_tiled": Port("matmul_tiled_omp", ("f32*", "f32*", "f32*", "i32", "i32", "i32"),
                         _pick("A", "B", "C", "M", "N", "K")),
    "reduce_sum": Port("reduce_sum_omp", ("f32*", "f32*", "i32"), _pick("in", "out", "n")),
    "transpose_tiled": Port("transpose_tiled_omp", ("f32*", "f32*", "i32", "i32"),
                            _pick("in", "out", "rows", "cols")),
    "stencil1d": Port("stencil1d_omp", ("f32*", "f32*", "f32*", "i32"), _pick("in", "w", "out", "n")),
    "jacobi2d": Port("jacobi2d_omp", ("f32*", "f32*", "i32", "i32"), _pick("in", "out", "nx", "ny")),
    "softmax_rows": Port("softmax_rows_omp", ("f32*", "f32*", "i32", "i32"),
                         lambda a, case: (a["x"], a["y"], case.grid[0], a["cols"])),
    "histogram": Port("histogram_omp", ("u8*", "u32*", "i32"), _pick("data", "bins", "n")),
    "backprop_layerforward": Port("backprop_layerforward_omp", ("f32*", "f32*", "f32*", "i32", "i32"),
                                  lambda a, case: (a["input"], a["weights"], a["partial_sums"],
                                                   a["input"].size, a["hid"])),
    "nbody_step": Port("nbody_step_omp", ("f32*", "f32*", "f32*", "f32*", "i32", "f32", "f32"),
                       _pick("pos", "vel", "new_pos", "new_vel", "n", "dt", "eps2")),
    "prefix_scan": Port("prefix_scan_omp", ("f32*", "f32*", "f32*", "i32", "i32", "i32"),
                        lambda a, case: (a["in"], a["out"], a["block_sums"], a["n"],
                                         case.block[0], case.grid[0])),
    "spmv_csr": Port("spmv_csr_omp", ("i32", "i32*", "i32*", "f32*", "f32*", "f32*"),
                     _pick("nrows", "row_ptr", "col_idx", "vals", "x", "y")),
    "conv2d": Port("conv2d_omp", ("f32*", "f32*", "f32*", "i32", "i32"),
                   _pick("img", "mask", "out", "height", "width")),
    "layernorm": Port("layernorm_omp", ("f32*", "f32*", "f32*", "f32*", "i32", "i32", "f32"),
                      lambda a, case: (a["x"], a["gamma"], a["beta"], a["y"], case.grid[0], a["cols"],
                                       a["eps"])),
    "gemm": Port("gemm_omp", ("i32", "i32", "i32", "f32", "f32", "f32*", "f32*", "f32*", "i32", "i32"),
                 lambda a, case: (a["ni"], a["nj"], a["nk"], a["alpha"], a["beta"], a["a"], a["b"], a["c"],
                                  a["a"].size // int(a["ni"]), a["c"].size // int(a["ni"]))),
    "blackscholes": Port("blackscholes_omp", ("f32*", "f32*", "f32*", "f32*", "f32*", "f32", "f32", "i32"),
                         _pick("S", "X", "T", "call", "put", "R", "V", "n")),
}


def _c_function(port: Port) -> Callable[..., None]:
    fn = getattr(load_library(), port.symbol)
    fn.argtypes = [ctypes.c_void_p if p in _POINTERS else _SCALARS[p][0] for p in port.params]
    fn.restype = None
    return fn


def _c_values(port: Port, values: tuple[Any, ...]) -> list[Any]:
    """ctypes-ready values; a pointer argument must be a C-contiguous array of the right dtype,
    since C would otherwise read its bytes as something else."""
    out: list[Any] = []
    for kind, value in zip(port.params, values, strict=True):
        if kind in _POINTERS:
            if not (isinstance(value, np.ndarray) and value.dtype == _POINTERS[kind] and value.flags.c_contiguous):
                raise TypeError(f"{port.symbol}: expected a C-contiguous {np.dtype(_POINTERS[kind])} array "
                                f"for a {kind} parameter, got {getattr(value, 'dtype', type(value).__name__)}")
            out.append(value.ctypes.data)
        else:
            out.append(_SCALARS[kind][1](value))
    return out


def make_omp_variant(sample: Sample, case: Case) -> Runner:
    """Run ``sample`` at ``case`` with its hand-written OpenMP port."""
    port = PORTS.get(sample.name)
    if port is None:
        raise Skip(f"no hand-written OpenMP port of {sample.name}")
    fn = _c_function(port)
    return lambda args: fn(*_c_values(port, port.bind(args, case)))


def set_threads(threads: int) -> None:
    """Set libgomp's thread count for parallel regions started from this (the main) thread.

    ``OMP_NUM_THREADS`` (set by ``bench.run`` before anything loads libgomp) already does this;
    calling it again makes a library loaded later agree as well.
    """
    load_library().omp_set_num_threads(ctypes.c_int(threads))


def measure_stream(n: int, ntimes: int) -> tuple[float, float]:
    """STREAM triad on ``3 x n`` doubles: (best GB/s, best seconds)."""
    fn = load_library().stream_triad_gbs
    fn.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.POINTER(ctypes.c_double)]
    fn.restype = ctypes.c_double
    seconds = ctypes.c_double(0.0)
    gbs = fn(n, ntimes, ctypes.byref(seconds))
    if gbs < 0:
        raise MemoryError(f"STREAM: cannot allocate 3 x {n} doubles")
    return gbs, seconds.value
