"""The host target: its LLVM target machine, the O3 pipeline, object code.

Code is generated for the CPU running polypy (``get_host_cpu_name`` + its features: AVX2/AVX-512
where present), with the default O3 pipeline of LLVM's new pass manager, loop and SLP
vectorization on, and no fast-math: floating-point results are the exact IEEE results of the
IR's operations in order (no reassociation, no contraction into FMAs).
"""
from __future__ import annotations

import ctypes.util
import functools

import llvmlite
import llvmlite.binding as llvm

from polypy.errors import InternalError

OPT_LEVEL = 3


@functools.cache
def _initialize() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # The JIT resolves libm functions (tanhf, erff, expm1...) in the process; make sure libm is
    # loaded into it whatever the interpreter itself links.
    for lib in ("m", "c"):
        path = ctypes.util.find_library(lib)
        if path:
            try:
                llvm.load_library_permanently(path)
            except RuntimeError:
                pass


@functools.cache
def host() -> tuple[str, str, str]:
    """(triple, cpu name, feature string) of this machine."""
    _initialize()
    return llvm.get_process_triple(), llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()


def target_machine() -> llvm.TargetMachine:
    """A fresh target machine for the host (an execution engine takes ownership of its own)."""
    triple, cpu, features = host()
    target = llvm.Target.from_triple(triple)
    return target.create_target_machine(cpu=cpu, features=features, opt=OPT_LEVEL, jit=True)


@functools.cache
def data_layout() -> str:
    return str(target_machine().target_data)


def fingerprint() -> str:
    """Everything besides the LLVM IR that decides the object code (part of the cache key)."""
    triple, cpu, features = host()
    return "|".join([triple, cpu, features, f"llvmlite {llvmlite.__version__}",
                     "llvm " + ".".join(map(str, llvm.llvm_version_info)), f"O{OPT_LEVEL}", "vectorize", "no-fast-math"])


def parse(ir_text: str) -> llvm.ModuleRef:
    """LLVM's own reading and verification of the emitted IR (a failure is a polypy bug)."""
    _initialize()
    try:
        module = llvm.parse_assembly(ir_text)
        module.verify()
    except RuntimeError as err:
        raise InternalError(f"the LLVM backend emitted invalid LLVM IR: {err}") from None
    return module


def optimize(module: llvm.ModuleRef, tm: llvm.TargetMachine) -> None:
    """Run the O3 pipeline (loop + SLP vectorization, unrolling) on ``module`` in place."""
    pto = llvm.create_pipeline_tuning_options(speed_level=OPT_LEVEL)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pto.loop_interleaving = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)


def compile_to_object(ir_text: str) -> tuple[bytes, str]:
    """(object code, optimized LLVM IR text) of an LLVM IR module."""
    tm = target_machine()
    module = parse(ir_text)
    optimize(module, tm)
    return tm.emit_object(module), str(module)


def optimized_ir(ir_text: str) -> str:
    tm = target_machine()
    module = parse(ir_text)
    optimize(module, tm)
    return str(module)
