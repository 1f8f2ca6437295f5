"""The kernels of PolyBench/GPU and Rodinia that ``bench/grad_real.py`` differentiates.

Nothing of the suites is in this repository: each row only *describes* a kernel -- the .cu file
it lives in (relative to a checkout), the ``-D`` values it is compiled with, its integer
arguments and its launch shape as functions of one size ``s``, the launch the program itself
makes for that size (the grid and block expressions of its host code, read by hand from the
checkout). Arrays are sized from the launch's footprint (``CompiledKernel.footprint``, isl),
except where an index is loaded from memory (``arrays``). ``real``: the macro that switches the
element type (PolyBench's ``DATA_TYPE``); ``source64``: the program's own double-precision
version (Rodinia's cfd, ``euler3d_double.cu``). Rodinia's other kernels are written in ``float``
(srad_v1's ``fp`` is defined unconditionally) and are measured in float32 only.

Sizes: ``size`` is the timed size (smaller than the programs' defaults -- 4096x4096 matrices --
so the table takes minutes on a loaded machine); ``check`` is the size of the finite-difference
check.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

Dim3 = tuple[int, int, int]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclasses.dataclass(frozen=True)
class RealKernel:
    """One kernel of a real program, launched the way the program launches it."""

    suite: str  # "polybench" | "rodinia"
    program: str
    source: str  # path inside the checkout
    kernel: str
    defines: Callable[[int], dict[str, int]]
    ints: Callable[[int], dict[str, int]]
    launch: Callable[[int], tuple[Dim3, Dim3]]
    size: int
    check: int
    real: str | None = None
    # extents of arrays whose footprint isl cannot bound exactly (indices loaded from memory)
    arrays: Callable[[int], dict[str, int]] | None = None
    # contents of integer arrays, and of float arrays that need a physical range:
    # name -> (rng, size, n elements) -> array
    fill: dict[str, Callable[[np.random.Generator, int, int], np.ndarray]] = dataclasses.field(default_factory=dict)
    # the same kernel in the program's double-precision source, where it has one
    source64: str | None = None
    # whether the source's directory is on the include path (<...> included from there); kmeans'
    # directory has a unistd.h of its own that must not hide the system's, as in its build
    include_own_dir: bool = True
    # written in double only (particlefilter's ex_particle_CUDA_float_seq.cu, despite its name)
    double_only: bool = False

    @property
    def name(self) -> str:
        return f"{self.program}/{self.kernel}"

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The element types it is timed in: both where the program has a type switch or a
        double-precision version."""
        if self.double_only:
            return ("float64",)
        return ("float32", "float64") if self.real is not None or self.source64 is not None else ("float32",)

    def source_for(self, dtype: str) -> str:
        return self.source64 if dtype == "float64" and self.source64 is not None else self.source


def _pb(program: str, source: str, kernel: str, sizes: Callable[[int], dict[str, int]],
        ints: Callable[[int], dict[str, int]], launch: Callable[[int], tuple[Dim3, Dim3]], size: int,
        check: int, *, old_style: bool = False) -> RealKernel:
    """A PolyBench/GPU kernel of ``CUDA/<program>``. ``-DN=1`` switches the header's size table
    off (as ``bench/real_programs_polybench.py`` does) unless the program's size macro is N itself."""
    def defines(s: int) -> dict[str, int]:
        return sizes(s) if old_style else {"N": 1, **sizes(s)}
    return RealKernel("polybench", program, f"CUDA/{program}/{source}", kernel, defines, ints, launch, size, check,
                      real="DATA_TYPE")


def _grid2(nx: int, ny: int, bx: int = 32, by: int = 8) -> tuple[Dim3, Dim3]:
    return (cdiv(nx, bx), cdiv(ny, by), 1), (bx, by, 1)


def _grid1(nx: int, bx: int = 256) -> tuple[Dim3, Dim3]:
    return (cdiv(nx, bx), 1, 1), (bx, 1, 1)


def _sq(*names: str) -> Callable[[int], dict[str, int]]:
    return lambda s: {k: s for k in names}


def polybench() -> list[RealKernel]:
    """PolyBench/GPU: every kernel of ``CUDA/`` (DOITGEN does not build there, see
    ``bench/real_programs_polybench.py``), launched as its host code launches it."""
    rows: list[RealKernel] = []
    add = rows.append
    add(_pb("2DCONV", "2DConvolution.cu", "convolution2D_kernel", _sq("NI", "NJ"),
            lambda s: {"ni": s, "nj": s}, lambda s: _grid2(s, s), 1024, 24))
    for k in ("mm2_kernel1", "mm2_kernel2"):
        add(_pb("2MM", "2mm.cu", k, _sq("NI", "NJ", "NK", "NL"),
                lambda s: {"ni": s, "nj": s, "nk": s, "nl": s}, lambda s: _grid2(s, s), 128, 12))
    add(_pb("3DCONV", "3DConvolution.cu", "convolution3D_kernel", _sq("NI", "NJ", "NK"),
            lambda s: {"ni": s, "nj": s, "nk": s, "i": s // 2}, lambda s: _grid2(s, s), 256, 12))
    for k in ("mm3_kernel1", "mm3_kernel2", "mm3_kernel3"):
        add(_pb("3MM", "3mm.cu", k, _sq("NI", "NJ", "NK", "NL", "NM"),
                lambda s: {"ni": s, "nj": s, "nk": s, "nl": s, "nm": s}, lambda s: _grid2(s, s), 128, 12))
    for k in ("adi_kernel1", "adi_kernel2", "adi_kernel3", "adi_kernel4", "adi_kernel5", "adi_kernel6"):
        add(_pb("ADI", "adi.cu", k, lambda s: {"N": s, "TSTEPS": 1},
                lambda s, k=k: {"n": s, **({"i1": s // 2} if k in ("adi_kernel4", "adi_kernel6") else {})},
                lambda s: ((1, 1, 1), (256, 1, 1)), 256, 16, old_style=True))
    for k in ("atax_kernel1", "atax_kernel2"):
        add(_pb("ATAX", "atax.cu", k, _sq("NX", "NY"), lambda s: {"nx": s, "ny": s}, lambda s: _grid1(s), 1024, 20))
    for k in ("bicg_kernel1", "bicg_kernel2"):
        add(_pb("BICG", "bicg.cu", k, _sq("NX", "NY"), lambda s: {"nx": s, "ny": s}, lambda s: _grid1(s), 1024, 20))
    corr = {"mean_kernel": lambda s: _grid1(s), "std_kernel": lambda s: _grid1(s),
            "reduce_kernel": lambda s: _grid2(s, s), "corr_kernel": lambda s: _grid1(s)}
    for k, launch in corr.items():
        add(_pb("CORR", "correlation.cu", k, lambda s: {"N": s, "M": s}, lambda s: {"m": s, "n": s}, launch, 256, 12,
                old_style=True))
    # the program's grid for reduce_kernel divides N by the block's x extent (32), not its y (8)
    covar = {"mean_kernel": lambda s: _grid1(s), "reduce_kernel": lambda s: ((cdiv(s, 32), cdiv(s, 32), 1), (32, 8, 1)),
             "covar_kernel": lambda s: _grid1(s)}
    for k, launch in covar.items():
        add(_pb("COVAR", "covariance.cu", k, lambda s: {"N": s, "M": s}, lambda s: {"m": s, "n": s}, launch, 256, 12,
                old_style=True))
    for k in ("fdtd_step1_kernel", "fdtd_step2_kernel", "fdtd_step3_kernel"):
        add(_pb("FDTD-2D", "fdtd2d.cu", k, lambda s: {"NX": s, "NY": s, "TMAX": 2},
                lambda s: {"nx": s, "ny": s, "t": 1}, lambda s: _grid2(s, s), 1024, 20))
    add(_pb("GEMM", "gemm.cu", "gemm_kernel", _sq("NI", "NJ", "NK"), lambda s: {"ni": s, "nj": s, "nk": s},
            lambda s: _grid2(s, s), 128, 12))
    gemver = {"gemver_kernel1": lambda s: _grid2(s, s, 32, 8), "gemver_kernel2": lambda s: _grid1(s),
              "gemver_kernel3": lambda s: _grid1(s)}
    for k, launch in gemver.items():
        add(_pb("GEMVER", "gemver.cu", k, lambda s: {"N": s}, lambda s: {"n": s}, launch, 1024, 20, old_style=True))
    add(_pb("GESUMMV", "gesummv.cu", "gesummv_kernel", lambda s: {"N": s}, lambda s: {"n": s},
            lambda s: _grid1(s), 1024, 20, old_style=True))
    gram = {"gramschmidt_kernel1": lambda s: ((1, 1, 1), (256, 1, 1)),
            "gramschmidt_kernel2": lambda s: _grid1(s), "gramschmidt_kernel3": lambda s: _grid1(s)}
    for k, launch in gram.items():
        add(_pb("GRAMSCHM", "gramschmidt.cu", k, _sq("NI", "NJ"), lambda s: {"ni": s, "nj": s, "k": s // 4},
                launch, 256, 12))
    for k in ("runJacobiCUDA_kernel1", "runJacobiCUDA_kernel2"):
        add(_pb("JACOBI1D", "jacobi1D.cu", k, lambda s: {"N": s, "TSTEPS": 1}, lambda s: {"n": s},
                lambda s: _grid1(s), 1 << 16, 40, old_style=True))
        # jacobi2D.cu defines N 1000 itself, after its header: the rows are 1000 long whatever -DN
        # says, so the timed size is n = 1000 (the check runs n = 20 rows of that length)
        add(_pb("JACOBI2D", "jacobi2D.cu", k, lambda s: {"N": s, "TSTEPS": 1}, lambda s: {"n": s},
                lambda s: _grid2(s, s), 1000, 20, old_style=True))
    for k in ("lu_kernel1", "lu_kernel2"):
        add(_pb("LU", "lu.cu", k, lambda s: {"N": s}, lambda s: {"n": s, "k": s // 4},
                lambda s, k=k: ((1, 1, 1), (256, 1, 1)) if k == "lu_kernel1" else ((1, 1, 1), (32, 8, 1)), 256, 16,
                old_style=True))
    for k in ("mvt_kernel1", "mvt_kernel2"):
        add(_pb("MVT", "mvt.cu", k, lambda s: {"N": s}, lambda s: {"n": s}, lambda s: _grid1(s), 1024, 20,
                old_style=True))
    add(_pb("SYR2K", "syr2k.cu", "syr2k_kernel", _sq("NI", "NJ"), lambda s: {"ni": s, "nj": s},
            lambda s: _grid2(s, s), 128, 12))
    add(_pb("SYRK", "syrk.cu", "syrk_kernel", _sq("NI", "NJ"), lambda s: {"ni": s, "nj": s},
            lambda s: _grid2(s, s), 128, 12))
    return rows


def _rod(program: str, source: str, kernel: str, ints, launch, size: int, check: int, *, defines=None,
         arrays=None, fill=None, source64: str | None = None, include_own_dir: bool = True,
         double_only: bool = False) -> RealKernel:
    return RealKernel("rodinia", program, f"cuda/{source}", kernel, defines or (lambda s: {}), ints, launch, size,
                      check, arrays=arrays, fill=fill or {}, source64=source64 and f"cuda/{source64}",
                      include_own_dir=include_own_dir, double_only=double_only)


def _neighbours(rng: np.random.Generator, s: int, count: int) -> np.ndarray:
    """cfd's elements_surrounding_elements: element indices, a few -1 (far field) and -2 (wall)."""
    out = rng.integers(0, s, size=count).astype(np.int32)
    special = rng.random(count)
    out[special < 0.05] = -1
    out[(special >= 0.05) & (special < 0.1)] = -2
    return out


def _cfd_variables(rng: np.random.Generator, s: int, count: int) -> np.ndarray:
    """cfd's conserved variables ``variables[i + v * nelr]``: density, momentum (x, y, z) and
    energy such that the pressure stays positive (else sqrt gives NaN, as it would on the GPU)."""
    nelr = count // 5
    out = np.empty(count, dtype=np.float64)
    out[:nelr] = rng.uniform(0.8, 1.2, nelr)
    out[nelr:4 * nelr] = rng.uniform(-0.2, 0.2, 3 * nelr)
    out[4 * nelr:] = rng.uniform(2.0, 3.0, count - 4 * nelr)
    return out


def _neighbour_rows(count: int, step: int) -> np.ndarray:
    """srad_v1's iN / iS / jW / jE: the index of the row (column) ``step`` away, clamped at the edges."""
    return np.clip(np.arange(count) + step, 0, count - 1).astype(np.int32)


# particlefilter (run: -x 128 -y 128 -z 10 -np N): a 128 x 128 x 10 video, a disk of radius 5
# (69 offsets), frame k = 1; ceil(N / 512) blocks of threads_per_block (512)
_PF_ONES, _PF_VIDEO = 69, 128 * 128 * 10


def _pf_launch(s: int) -> tuple[Dim3, Dim3]:
    return (cdiv(s, 512), 1, 1), (512, 1, 1)


def _particlefilter() -> list[RealKernel]:
    src = "particlefilter/ex_particle_CUDA_float_seq.cu"
    arrays = lambda s: {"arrayX": s, "arrayY": s, "xj": s, "yj": s, "CDF": s, "u": s, "weights": s,  # noqa: E731
                        "likelihood": s, "seed": s, "partial_sums": cdiv(s, 512), "ind": s * _PF_ONES,
                        "objxy": 2 * _PF_ONES, "I": _PF_VIDEO}
    fill = {"CDF": lambda rng, s, count: np.cumsum(rng.uniform(0.5, 1.5, count)) / (1.5 * count),  # ascending
            "u": lambda rng, s, count: rng.uniform(0.0, 1.0, count),
            "seed": lambda rng, s, count: rng.integers(1, 1 << 20, count),
            "ind": lambda rng, s, count: np.zeros(count),
            "objxy": lambda rng, s, count: rng.integers(-4, 5, count),
            "I": lambda rng, s, count: rng.integers(0, 256, count)}
    ints = {"find_index_kernel": lambda s: {"Nparticles": s},
            "normalize_weights_kernel": lambda s: {"Nparticles": s},
            "sum_kernel": lambda s: {"Nparticles": s},
            "likelihood_kernel": lambda s: {"Nparticles": s, "countOnes": _PF_ONES, "max_size": _PF_VIDEO, "k": 1,
                                            "IszY": 128, "Nfr": 10}}
    # normalize_weights_kernel's thread 0 reads every block's weights[x] (cdfCalc) and writes u[0], which
    # every block then reads: with more than one block the program races between blocks (its result
    # depends on the blocks' order), so it is checked on one block (500 particles) and timed as launched
    return [_rod("particlefilter", src, k, f, _pf_launch, 4096, 500 if k == "normalize_weights_kernel" else 600,
                 arrays=arrays, fill=fill, double_only=True)
            for k, f in ints.items()]


def rodinia() -> list[RealKernel]:
    """Rodinia's kernels with floating-point arguments whose programs polypy translates."""
    rows: list[RealKernel] = []
    add = rows.append
    bp_launch = lambda s: ((1, s // 16, 1), (16, 16, 1))  # noqa: E731  grid(1, num_blocks), threads(16, 16)
    add(_rod("backprop", "backprop/backprop_cuda.cu", "bpnn_layerforward_CUDA", lambda s: {"in": s, "hid": 16},
             bp_launch, 1 << 14, 32))
    add(_rod("backprop", "backprop/backprop_cuda.cu", "bpnn_adjust_weights_cuda", lambda s: {"in": s, "hid": 16},
             bp_launch, 1 << 14, 32))
    cfd_launch = lambda s: ((s // 192, 1, 1), (192, 1, 1))  # noqa: E731  Dg(nelr / 192), Db(192)
    cfd = {"source64": "cfd/euler3d_double.cu"}
    add(_rod("cfd", "cfd/euler3d.cu", "cuda_initialize_variables", lambda s: {"nelr": s}, cfd_launch, 192 * 256, 192,
             arrays=lambda s: {"variables": 5 * s}, **cfd))
    add(_rod("cfd", "cfd/euler3d.cu", "cuda_compute_step_factor", lambda s: {"nelr": s}, cfd_launch, 192 * 256, 192,
             fill={"variables": _cfd_variables}, **cfd))
    add(_rod("cfd", "cfd/euler3d.cu", "cuda_compute_flux", lambda s: {"nelr": s}, cfd_launch, 192 * 128, 192,
             arrays=lambda s: {"elements_surrounding_elements": 4 * s, "normals": 12 * s, "variables": 5 * s,
                               "fluxes": 5 * s},
             fill={"elements_surrounding_elements": _neighbours, "variables": _cfd_variables}, **cfd))
    add(_rod("cfd", "cfd/euler3d.cu", "cuda_time_step", lambda s: {"j": 1, "nelr": s}, cfd_launch, 192 * 256, 192,
             **cfd))

    def hotspot_launch(s: int) -> tuple[Dim3, Dim3]:
        small = 16 - 2  # BLOCK_SIZE - pyramid_height * EXPAND_RATE, pyramid height 1
        return (cdiv(s, small), cdiv(s, small), 1), (16, 16, 1)
    add(_rod("hotspot", "hotspot/hotspot.cu", "calculate_temp",
             lambda s: {"iteration": 1, "grid_cols": s, "grid_rows": s, "border_cols": 1, "border_rows": 1},
             hotspot_launch, 512, 20))
    add(_rod("hotspot3D", "hotspot3D/3D.cu", "hotspotOpt1", lambda s: {"nx": s, "ny": s, "nz": 8},
             lambda s: ((s // 64, s // 4, 1), (64, 4, 1)), 256, 64,
             arrays=lambda s: {"p": s * s * 8, "tIn": s * s * 8, "tOut": s * s * 8}))
    # srad_v1: main.cu includes every kernel; one launch of cdiv(Ne, 512) blocks of NUMBER_THREADS (512)
    # for an Nr x Nc image (Ne = Nr Nc); reduce's first round (no = Ne, mul = 1) as the program runs it
    v1_launch = lambda s: ((cdiv(s * s, 512), 1, 1), (512, 1, 1))  # noqa: E731
    v1_arrays = lambda s: {"d_I": s * s, "d_sums": s * s, "d_sums2": s * s, "d_c": s * s,  # noqa: E731
                           **{f"d_d{d}": s * s for d in "NSEW"}, **{f"d_{a}": s for a in ("iN", "iS", "jE", "jW")}}
    v1_fill = {"d_iN": lambda rng, s, count: _neighbour_rows(count, -1),
               "d_iS": lambda rng, s, count: _neighbour_rows(count, 1),
               "d_jW": lambda rng, s, count: _neighbour_rows(count, -1),
               "d_jE": lambda rng, s, count: _neighbour_rows(count, 1)}
    v1_ints = {"extract": lambda s: {"d_Ne": s * s}, "prepare": lambda s: {"d_Ne": s * s},
               "reduce": lambda s: {"d_Ne": s * s, "d_no": s * s, "d_mul": 1},
               "srad": lambda s: {"d_Nr": s, "d_Nc": s, "d_Ne": s * s},
               "srad2": lambda s: {"d_Nr": s, "d_Nc": s, "d_Ne": s * s}, "compress": lambda s: {"d_Ne": s * s}}
    for k, ints in v1_ints.items():
        add(_rod("srad_v1", "srad/srad_v1/main.cu", k, ints, v1_launch, 512, 24, arrays=v1_arrays, fill=v1_fill))
    for k in ("srad_cuda_1", "srad_cuda_2"):
        add(_rod("srad_v2", "srad/srad_v2/srad.cu", k, lambda s: {"cols": s, "rows": s},
                 lambda s: ((s // 16, s // 16, 1), (16, 16, 1)), 512, 32))
    def kmeans_launch(s: int) -> tuple[Dim3, Dim3]:
        per_dim = math.isqrt(cdiv(s, 256) - 1) + 1  # num_blocks_perdim: the square grid covering the points
        return (per_dim * per_dim, 1, 1), (256, 1, 1)
    add(_rod("kmeans", "kmeans/kmeans_cuda.cu", "invert_mapping", lambda s: {"npoints": s, "nfeatures": 34},
             kmeans_launch, 1 << 16, 100, arrays=lambda s: {"input": 34 * s, "output": 34 * s},
             include_own_dir=False))
    rows.extend(_particlefilter())
    add(_rod("nn", "nn/nn_cuda.cu", "euclid", lambda s: {"numRecords": s}, lambda s: _grid1(s), 1 << 18, 100))
    add(_rod("gaussian", "gaussian/gaussian.cu", "Fan1", lambda s: {"Size": s, "t": 0},
             lambda s: ((cdiv(s, 512), 1, 1), (512, 1, 1)), 1024, 16))
    add(_rod("gaussian", "gaussian/gaussian.cu", "Fan2", lambda s: {"Size": s, "j1": 1, "t": 0},
             lambda s: ((cdiv(s, 4), cdiv(s, 4), 1), (4, 4, 1)), 1024, 16))
    add(_rod("lud", "lud/cuda/lud_kernel.cu", "lud_diagonal", lambda s: {"matrix_dim": s, "offset": 0},
             lambda s: ((1, 1, 1), (16, 1, 1)), 512, 32))
    add(_rod("lud", "lud/cuda/lud_kernel.cu", "lud_perimeter", lambda s: {"matrix_dim": s, "offset": 0},
             lambda s: ((s // 16 - 1, 1, 1), (32, 1, 1)), 512, 48))
    add(_rod("lud", "lud/cuda/lud_kernel.cu", "lud_internal", lambda s: {"matrix_dim": s, "offset": 0},
             lambda s: ((s // 16 - 1, s // 16 - 1, 1), (16, 16, 1)), 512, 48))
    return rows


def all_kernels() -> list[RealKernel]:
    return polybench() + rodinia()
