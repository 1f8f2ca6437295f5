"""Device printf and failed asserts in LLVM IR (``n.Print``, ``n.AssertFail``).

A ``Print`` is one call of the C library's ``dprintf`` on file descriptor 1: glibc formats the
call into one buffer and writes it with one ``write`` (whole, for outputs up to its buffer's
size), straight to the process's standard output, not through a ``FILE`` buffer that would hold
it past the launch. A failed assert writes CUDA's message the same way to descriptor 2 and stores
its source line in the module's ``polypy_device_assert`` word, which the launch reads
(``JitKernel.run``: it raises ``DeviceAssertError``, CUDA's ``cudaErrorAssert``)."""
from __future__ import annotations

from llvmlite import ir

from polypy.ir import nodes as n
from polypy.ir.printf import c_library_format, escape, fault_format, parse_format

from codegen.llvm.types import I8, I32, I64, PTR

ASSERT_WORD = "polypy_device_assert"


def _dprintf(llmod: ir.Module) -> ir.Function:
    fn = llmod.globals.get("dprintf")
    if fn is None:
        fn = ir.Function(llmod, ir.FunctionType(I32, [I32, PTR], var_arg=True), name="dprintf")
        fn.attributes.add("nounwind")
    return fn


def _string(llmod: ir.Module, text: str) -> ir.GlobalVariable:
    data = bytearray(text.encode("utf-8") + b"\0")
    ty = ir.ArrayType(ir.IntType(8), len(data))
    g = ir.GlobalVariable(llmod, ty, name=llmod.get_unique_name("polypy.fmt"))
    g.global_constant = True
    g.linkage = "private"
    g.unnamed_addr = True
    g.initializer = ir.Constant(ty, data)
    return g


def assert_word(llmod: ir.Module) -> ir.GlobalVariable:
    g = llmod.globals.get(ASSERT_WORD)
    if g is None:
        g = ir.GlobalVariable(llmod, I32, name=ASSERT_WORD)
        g.initializer = ir.Constant(I32, 0)
    return g


def emit_print(cx, s: n.Print) -> None:
    """One ``dprintf``; a ``%s`` of a character array (``s.strings``) passes a stack copy of its
    bytes ending with a 0 byte."""
    args = [cx.expr(a) for a in s.args]  # i32, i64 or double: C's promoted variadic types
    if s.strings:
        values = iter(args)
        lengths = iter(s.strings)
        passed: list[ir.Value] = []
        for spec in parse_format(s.format, allow_strings=True):
            if spec.conv != "s":
                passed += [next(values) for _ in spec.arg_types()]
                continue
            length = next(lengths)
            buf = cx.entry_alloca(ir.ArrayType(I8, length + 1), "polypy.str")
            for i in range(length + 1):
                byte = cx.builder.trunc(next(values), I8) if i < length else ir.Constant(I8, 0)
                cx.builder.store(byte, cx.builder.gep(buf, [ir.Constant(I64, i)], inbounds=True, source_etype=I8))
            passed.append(buf)
        args = passed
    cx.builder.call(_dprintf(cx.llmod), [ir.Constant(I32, 1), _string(cx.llmod, c_library_format(s.format))] + args)


def fault_key(s: n.AssertFail) -> int:
    """What a failed assert (its line) or a misaligned access (its line, bit 30 set) leaves in
    the module's assert word."""
    return s.line | (1 << 30) if s.fault == "misaligned" else s.line


def emit_assert_fail(cx, s: n.AssertFail) -> None:
    where = [cx.expr(w) for w in s.where]
    cx.builder.call(_dprintf(cx.llmod), [ir.Constant(I32, 2), _string(cx.llmod, fault_format(s, escape))] + where)
    cx.builder.store_atomic(ir.Constant(I32, fault_key(s)), assert_word(cx.llmod), "seq_cst", 4)


__all__ = ["ASSERT_WORD", "assert_word", "emit_assert_fail", "emit_print", "fault_key"]
