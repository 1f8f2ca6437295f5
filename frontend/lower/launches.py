"""Kernel launches from device code (CUDA dynamic parallelism) and the device runtime calls
around them: they become the IR's ``Launch`` statement (see ``polypy.ir.nodes.Launch`` and
docs/dynamic_parallelism.md).

``child<<<grid, block, shmem, stream>>>(args)`` in a kernel or device function: the arguments
are evaluated now (by value); the child is a kernel of this file (a recursive kernel launching
itself is a launch, not a call). What a child may receive is what polypy can hand over exactly:
scalars, and pointers into the parent's pointer parameters (global memory) of the child's
element type. CUDA forbids pointers to shared or local memory as launch arguments; records by
value and pointers of other kinds are refused with a located error naming the argument.

The stream argument only decides *when* the child runs relative to the grid's other launches:
polypy runs every child after the launching grid has completed, in launch order (one schedule
CUDA allows for any streams), and ``cudaStreamTailLaunch`` children after all the others, so a
stream's value is not needed; the named streams are recognised from their spelling as the
CUDA headers define them (a cast of 3 or 4 to ``cudaStream_t``).

Device runtime calls (``polypy_device.h`` declares them for device code):
``cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)`` and ``cudaStreamDestroy(s)`` give
``cudaSuccess`` (a device stream must be non-blocking: other flags give
``cudaErrorInvalidValue``); ``cudaGetLastError``/``cudaPeekAtLastError`` read the thread's last
launch error (a per-thread local, as CUDA keeps it per thread); ``cudaDeviceSynchronize`` in
device code was removed in CUDA 12 and is refused, as are the low-level launch API
(``cudaGetParameterBuffer``, ``cudaLaunchDevice``) and ``cudaMalloc``/``cudaFree`` in device code.
"""
from __future__ import annotations

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.ir.types import I32, I64, U32, U64

from frontend import ctypes_map as tm
from frontend.arith import convert
from frontend.clang_setup import evaluate
from frontend.lower.context import CK, function_body, is_kernel_decl
from frontend.lower.helpers import strip
from frontend.values import Aggregate, Pointer

# cudaError_t values the device runtime gives (driver_types.h of the CUDA toolkit).
CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_INVALID_CONFIGURATION = 9
CUDA_STREAM_NON_BLOCKING = 1

DEVICE_RUNTIME_CALLS = ("cudaStreamCreateWithFlags", "cudaStreamDestroy", "cudaGetLastError", "cudaPeekAtLastError",
                        "cudaDeviceSynchronize", "cudaGetParameterBuffer", "cudaGetParameterBufferV2",
                        "cudaLaunchDevice", "cudaLaunchDeviceV2", "cudaMalloc", "cudaFree", "cudaStreamCreate",
                        "cudaStreamSynchronize", "cudaEventRecord", "cudaStreamWaitEvent")
_REFUSED = {
    "cudaDeviceSynchronize": "cudaDeviceSynchronize in device code (waiting for child grids) was removed in CUDA 12 "
                             "and is not supported: a parent grid never waits for its children; launch the work that "
                             "needs the children's results as another child (or from the host)",
    "cudaStreamSynchronize": "cudaStreamSynchronize is not available in device code",
    "cudaStreamCreate": "a device stream must be created with cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)",
    "cudaGetParameterBuffer": "the low-level device launch API (cudaGetParameterBuffer, cudaLaunchDevice) is not "
                              "supported: launch with kernel<<<...>>>(...) (dynamic parallelism)",
    "cudaMalloc": "cudaMalloc in device code (the device heap) is not supported",
    "cudaFree": "cudaFree in device code (the device heap) is not supported",
    "cudaEventRecord": "events in device code are not supported",
    "cudaStreamWaitEvent": "events in device code are not supported",
}
_REFUSED["cudaGetParameterBufferV2"] = _REFUSED["cudaLaunchDevice"] = _REFUSED["cudaLaunchDeviceV2"] = \
    _REFUSED["cudaGetParameterBuffer"]


def is_device_runtime_call(name: str, fn: ci.Cursor) -> bool:
    return name in DEVICE_RUNTIME_CALLS and function_body(fn.get_definition() or fn) is None


def last_error(b) -> str:
    """The thread's last launch error (an i32 local declared at the kernel's top once used)."""
    if b.launch_error is None:
        b.launch_error = b.names.fresh("cuda_last_error")
    return b.launch_error


def device_runtime_call(b, name: str, args: list[ci.Cursor], c: ci.Cursor, discard: bool) -> n.Expr | None:
    loc = b.loc(c)
    if name in _REFUSED:
        raise b.error(_REFUSED[name], c)
    if name in ("cudaGetLastError", "cudaPeekAtLastError"):
        err = last_error(b)
        value = b.temp(I32, n.Var(err, I32, loc=loc), "cuda_error", c)
        if name == "cudaGetLastError":
            b.emit(n.Assign(err, n.Const(CUDA_SUCCESS, I32), loc=loc))
        return None if discard else n.Var(value.name, I32, loc=loc)
    if name == "cudaStreamCreateWithFlags":
        if len(args) != 2:
            raise b.error("cudaStreamCreateWithFlags takes a stream's address and flags", c)
        # The stream's value plays no part (see the module docstring): ``&s`` is not evaluated.
        flags = convert(b.scalar(args[1]), U32)
        ok = n.Binary("eq", flags, n.Const(CUDA_STREAM_NON_BLOCKING, U32), loc=loc)
        status = n.Select(ok, n.Const(CUDA_SUCCESS, I32), n.Const(CUDA_ERROR_INVALID_VALUE, I32), loc=loc)
        result = b.temp(I32, status, "cuda_error", c)
        err = last_error(b)
        b.emit(n.If(ok, (), (n.Assign(err, n.Var(result.name, I32), loc=loc),), loc=loc))
        return None if discard else n.Var(result.name, I32, loc=loc)
    if name == "cudaStreamDestroy":
        return None if discard else n.Const(CUDA_SUCCESS, I32)
    raise b.error(f"'{name}' is not supported in device code", c)


def named_stream(cfg: ci.Cursor | None) -> str:
    """``tail`` / ``fire_and_forget`` for CUDA's named streams (``(cudaStream_t)0x3`` and ``0x4``),
    else ``stream``."""
    if cfg is None:
        return "stream"
    e = strip(cfg)
    while e.kind in (CK.CSTYLE_CAST_EXPR, CK.UNEXPOSED_EXPR, CK.PAREN_EXPR, CK.CXX_STATIC_CAST_EXPR,
                     CK.CXX_REINTERPRET_CAST_EXPR) and list(e.get_children()):
        inner = list(e.get_children())[-1]
        if inner.kind == CK.INTEGER_LITERAL:
            value = evaluate(inner)
            return {3: "tail", 4: "fire_and_forget"}.get(int(value) if value is not None else -1, "stream")
        e = inner
    return "stream"


def _is_default(arg: ci.Cursor) -> bool:
    return arg.location.file is None and not list(arg.get_children())


def _extents(b, cfg: ci.Cursor, what: str) -> tuple[n.Expr, ...]:
    """A ``dim3`` (or integer) launch configuration value as its x, y, z extents (u32)."""
    v = b.expr(cfg)
    if isinstance(v, Aggregate):
        try:
            return tuple(convert(v.fields[f], U32) for f in (".x", ".y", ".z"))  # type: ignore[arg-type]
        except (KeyError, AttributeError):
            pass
    elif isinstance(v, n.Expr) and v.type.is_int:
        return convert(v, U32), n.Const(1, U32), n.Const(1, U32)
    raise b.error(f"the launch's {what} must be a dim3 or an integer", cfg)


def device_launch(b, c: ci.Cursor, children: list[ci.Cursor], discard: bool) -> n.Expr | None:
    """``child<<<grid, block, shmem, stream>>>(args)`` in device code: a ``Launch``; its value (a
    ``cudaError_t``, which a ``<<<>>>`` expression does not have) is never used."""
    loc = b.loc(c)
    target = c.referenced
    if target is None or not is_kernel_decl(target):
        raise b.error("a launch from device code through a kernel pointer is not supported "
                      "(launch the kernel by its name)", c)
    definition = target.get_definition() or target
    if function_body(definition) is None:
        raise b.error(f"kernel '{target.spelling}' launched from device code is not defined in this file: "
                      "polypy translates launches from device code of the file's own kernels", c)
    config = next(ch for ch in children if ch.kind == CK.CALL_EXPR and
                  ch.spelling in ("__cudaPushCallConfiguration", "cudaConfigureCall"))
    cfg = list(config.get_children())[1:]
    grid = _extents(b, cfg[0], "grid")
    block = _extents(b, cfg[1], "block")
    shmem: n.Expr = n.Const(0, U64)
    if len(cfg) > 2 and not _is_default(cfg[2]):
        shmem = convert(b.scalar(cfg[2]), U64)
    stream = "stream"
    if len(cfg) > 3 and not _is_default(cfg[3]):
        stream = named_stream(cfg[3])  # the stream's value itself plays no part (module docstring)
    params = list(definition.get_arguments())
    actual = [a for a in children if a.kind.is_expression() and a is not config][1:]
    if len(actual) != len(params):
        raise b.error(f"launch of '{target.spelling}' with {len(actual)} arguments for {len(params)} parameters", c)
    args: list[n.Expr] = []
    pointers: list[str | None] = []
    for p, a in zip(params, actual):
        if _is_default(a):
            raise b.error("default arguments of kernels are not supported in launches", c)
        value, pointer = _argument(b, p, a)
        args.append(value)
        pointers.append(pointer)
    if b.ctx.kernel_named is None:
        raise b.error("kernel launches from device code are not supported here", c)
    name = b.ctx.kernel_named(definition)
    if b.ctx.textures.get(name):
        raise b.error(f"kernel '{target.spelling}' reads texture references; launching it from device code is "
                      "not supported", c)
    # An invalid configuration launches nothing and is the thread's last error (the runtime's
    # polypy_rt_launch_ok, the test of every launch).
    gx, gy, gz = grid
    bx, by, bz = block
    one, u64 = n.Const(1, U32), (lambda e: convert(e, U64))
    tests = [n.Binary("ge", e, one) for e in grid + block]
    tests += [n.Binary("le", gy, n.Const(65535, U32)), n.Binary("le", gz, n.Const(65535, U32)),
              n.Binary("le", bx, n.Const(1024, U32)), n.Binary("le", by, n.Const(1024, U32)),
              n.Binary("le", bz, n.Const(64, U32)),
              n.Binary("le", n.Binary("mul", n.Binary("mul", u64(bx), u64(by)), u64(bz)), n.Const(1024, U64))]
    ok = tests[0]
    for t in tests[1:]:
        ok = n.Binary("land", ok, t)
    launch = n.Launch(name, grid, block, shmem, tuple(args), tuple(pointers), stream, loc=loc)
    failed = n.Assign(last_error(b), n.Const(CUDA_ERROR_INVALID_CONFIGURATION, I32), loc=loc)
    b.emit(n.If(ok, (launch,), (failed,), loc=loc))
    return None


def _argument(b, p: ci.Cursor, a: ci.Cursor) -> tuple[n.Expr, str | None]:
    """One launch argument for the child's parameter ``p``: (value, None) for a scalar, (element
    offset, buffer) for a pointer into a pointer parameter of the kernel."""
    t = p.type
    name = p.spelling or "?"
    st = tm.scalar_type(t)
    if st is not None:
        return convert(b.scalar(a), st), None
    if tm.is_pointer(t) and not tm.is_pointer(tm.pointee(t)) and tm.scalar_type(tm.pointee(t)) is not None:
        v = b.expr(a)
        elem = tm.scalar_type(tm.pointee(t))
        if isinstance(v, Pointer) and v.record is None and v.stored is None and not v.prefix and \
                v.layout.is_scalar and v.layout.scalar == elem:
            param = _param_named(b, v.buffer)
            if param is not None:
                offset = convert(v.offset, I64) if v.offset is not None else n.Const(0, I64)
                return offset, v.buffer
            raise b.error(f"argument for '{name}' of a launch from device code does not point into one of the "
                          "kernel's pointer parameters (CUDA forbids pointers to shared and local memory; pointers "
                          "to __device__ arrays are not supported)", a)
        raise b.error(f"argument for '{name}' of a launch from device code: only a pointer into one of the "
                      f"kernel's pointer parameters, of the parameter's element type, is supported", a)
    raise b.error(f"parameter '{name}' of type '{t.spelling}' of a kernel launched from device code is not "
                  "supported (scalars and pointers to scalars are)", a)


def _param_named(b, buffer: str) -> n.Param | None:
    for p in b.params:
        if p.name == buffer:
            return p
    return None
