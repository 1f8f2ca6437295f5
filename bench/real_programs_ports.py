"""Plain OpenMP ports of PolyBench/GPU's programs (``bench/omp_polybench/NAME.c``, issue 37), for
``python -m bench.real_programs polybench PATH --omp``.

Each port is our own C program: the arrays set up as the PolyBench/GPU program sets them up (its
header's sizes and -D switches, float, row-major), the computation of the program's *serial* CPU
version with ``#pragma omp parallel for`` on each nest's outer parallel loop (see
``bench/omp_polybench/port.h``). It prints its time ("OpenMP port time in seconds: S") and, given a
file name, writes what the CUDA program copies back from the device (rank, extents, float32
values per array, in the program's order).

The check: the translated program runs with ``POLYPY_TRACE_COPIES`` (polypy's runtime writes every
device-to-host copy as text), the port at the same sizes; array by array, the values the program's
own ``compareResults`` compares must agree by PolyBench's ``percentDiff`` within the program's
``PERCENT_DIFF_ERROR_THRESHOLD`` (the port's value taking the place of the CPU value).

Nothing here runs a program: ``bench/real_programs.py`` does, with the commands made here.
"""
from __future__ import annotations

import dataclasses
import pathlib
import re
from typing import Sequence

import numpy as np

PORTS_DIR = pathlib.Path(__file__).resolve().parent / "omp_polybench"
TIME_LINE = re.compile(r"OpenMP port time in seconds:\s*(?P<s>[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)")
_TRACE_HEAD = re.compile(rb"device-to-host copy of (\d+) ([a-z ]+)\n")
# percentDiff's guard (polybenchUtilFuncts.h): values below this in magnitude on both sides agree,
# and SMALL_FLOAT_VAL keeps a zero reference from dividing by zero
_BOTH_SMALL = 0.01
_SMALL_FLOAT_VAL = np.float32(1e-8)


@dataclasses.dataclass(frozen=True)
class PortSpec:
    """``threshold``: the program's PERCENT_DIFF_ERROR_THRESHOLD (percent). ``interior``: the
    program compares only the points off the array's border (its convolutions). ``sizes``:
    whether the program's -D size flags reach its computation (JACOBI2D's .cu fixes N and TSTEPS
    after its header, so they do not, and its port keeps the same fixed sizes)."""

    threshold: float
    interior: bool = False
    sizes: bool = True


PORTS: dict[str, PortSpec] = {
    "2DCONV": PortSpec(0.05, interior=True),
    "2MM": PortSpec(0.05),
    "3DCONV": PortSpec(0.5, interior=True),
    "3MM": PortSpec(0.05),
    "ADI": PortSpec(2.5),
    "ATAX": PortSpec(0.5),
    "BICG": PortSpec(0.5),
    "CORR": PortSpec(1.05),
    "COVAR": PortSpec(1.05),
    "DOITGEN": PortSpec(0.05),
    "FDTD-2D": PortSpec(10.05),
    "GEMM": PortSpec(0.05),
    "GEMVER": PortSpec(0.05),
    "GESUMMV": PortSpec(0.05),
    "GRAMSCHM": PortSpec(0.05),
    "JACOBI1D": PortSpec(0.05),
    "JACOBI2D": PortSpec(0.05, sizes=False),
    "LU": PortSpec(0.05),
    "MVT": PortSpec(0.05),
    "SYR2K": PortSpec(0.05),
    "SYRK": PortSpec(0.05),
}


def port_flags(name: str, program_flags: Sequence[str]) -> list[str]:
    """The -D size flags of the program's build that the port takes (not -DPOLYBENCH_TIME and the
    like, which only switch the program's own timer; none for a program whose sizes are fixed)."""
    if not PORTS[name].sizes:
        return []
    return [f for f in program_flags if re.fullmatch(r"-D[A-Z_0-9]+=[0-9]+", f)]


def compile_command(name: str, program_flags: Sequence[str], out: pathlib.Path, cc: str,
                    cflags: Sequence[str]) -> list[str]:
    """The command that builds port ``name`` as executable ``out``, with the compiler flags the
    translated programs get, and floating-point contraction off, as polypy's emitted files have it
    (their ``#pragma``): no multiply-add fused behind the program's back, in either (ADI at its
    default size drifted past its 2.5 percent at one of 1,048,576 values with it on)."""
    source = PORTS_DIR / f"{name}.c"
    return [cc, *cflags, "-ffp-contract=off", *port_flags(name, program_flags), f"-I{PORTS_DIR}", str(source),
            "-o", str(out), "-lm"]


def port_seconds(stdout: str) -> float:
    m = TIME_LINE.search(stdout)
    if m is None:
        raise ValueError("the port printed no time")
    return float(m.group("s"))


def read_port_output(path: pathlib.Path) -> list[np.ndarray]:
    """The arrays a port wrote: per array an int32 rank, the int32 extents, the float32 values."""
    data = path.read_bytes()
    out, at = [], 0
    while at < len(data):
        rank = int(np.frombuffer(data, np.int32, 1, at)[0])
        if not 1 <= rank <= 3:
            raise ValueError(f"{path.name}: bad rank {rank} at byte {at}")
        shape = tuple(int(v) for v in np.frombuffer(data, np.int32, rank, at + 4))
        at += 4 * (rank + 1)
        count = int(np.prod(shape))
        out.append(np.frombuffer(data, np.float32, count, at).reshape(shape))
        at += 4 * count
    return out


def read_trace(path: pathlib.Path) -> list[np.ndarray]:
    """The device-to-host copies in a ``POLYPY_TRACE_COPIES`` file, each a flat float64 array. A
    copy traced as bytes (the destination is a pointer to rows, ``float (*)[NJ]``, as PolyBench's
    arrays are) is read back as the float32 values its bytes hold: every array a port compares is
    float."""
    data = path.read_bytes()
    heads = list(_TRACE_HEAD.finditer(data))
    out = []
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(data)
        values = np.fromstring(data[head.end():end], dtype=np.float64, sep=" ") if end > head.end() \
            else np.zeros(0)
        if values.size != int(head.group(1)):
            raise ValueError(f"{path.name}: copy #{i + 1} has {values.size} values, its line says {head.group(1)}")
        if head.group(2) == b"bytes":
            if values.size % 4:
                raise ValueError(f"{path.name}: copy #{i + 1} has {values.size} bytes, not whole floats")
            values = values.astype(np.uint8).view("<f4").astype(np.float64)
        out.append(values)
    return out


def percent_diff(reference: np.ndarray, value: np.ndarray) -> np.ndarray:
    """PolyBench's percentDiff element by element: 0 where both are below 0.01 in magnitude, else
    100 |reference - value| / |reference + 1e-8| (its absVal takes a float: computed in float32)."""
    ref = reference.astype(np.float32)
    val = value.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        diff = np.float32(100.0) * np.abs(np.abs(ref - val) / np.abs(ref + _SMALL_FLOAT_VAL))
    both_small = (np.abs(ref) < _BOTH_SMALL) & (np.abs(val) < _BOTH_SMALL)
    return np.where(both_small, np.float32(0.0), diff)


def compare_outputs(name: str, port: Sequence[np.ndarray], traced: Sequence[np.ndarray]) -> str | None:
    """None when every array the port wrote matches the program's copy of it within the program's
    threshold (where the program compares), else what differs. A NaN matches a NaN only
    (GRAMSCHM's first column is all zeros, and 0/0 makes the rest NaN in both; PolyBench's own
    ``percentDiff(...) > threshold`` lets any NaN pass)."""
    spec = PORTS[name]
    if len(port) != len(traced):
        return f"the port wrote {len(port)} arrays, the program copied {len(traced)} to the host"
    for i, (ours, theirs) in enumerate(zip(port, traced)):
        if ours.size != theirs.size:
            return f"array #{i + 1}: {ours.size} values in the port, {theirs.size} copied by the program"
        theirs = theirs.reshape(ours.shape)
        if spec.interior:
            inner = tuple(slice(1, n - 1) for n in ours.shape)
            ours, theirs = ours[inner], theirs[inner]
        bad = ~((percent_diff(ours, theirs) <= spec.threshold) | (np.isnan(ours) & np.isnan(theirs)))
        if bad.any():
            at = np.unravel_index(int(np.argmax(bad)), bad.shape)
            return (f"array #{i + 1}: {int(bad.sum())} of {bad.size} values differ by more than "
                    f"{spec.threshold:g} percent, first at {list(map(int, at))}: port {ours[at]:g}, "
                    f"polypy {theirs[at]:g}")
    return None
