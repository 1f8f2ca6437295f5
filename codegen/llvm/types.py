"""IR scalar types as LLVM and ctypes types.

Three views of one ``ScalarType``:

* register (``value_type``): what an expression evaluates to; ``bool`` is ``i1``;
* memory (``memory_type``): how a buffer element is laid out; ``bool`` is one byte (``i8``),
  like C's ``_Bool`` and NumPy's ``bool_``;
* ABI (``abi_type`` / ``ctype_of``): how a scalar kernel parameter crosses the ctypes call;
  ``bool`` travels as a byte too, so no calling-convention corner of ``i1`` is involved.

Signedness is not part of an LLVM integer type: the emitter picks ``sdiv``/``udiv``,
``icmp slt``/``ult``, ``sext``/``zext`` from the IR type.
"""
from __future__ import annotations

import ctypes

from llvmlite import ir

from polypy.ir.types import ScalarType

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()


def value_type(t: ScalarType) -> ir.Type:
    if t.is_bool:
        return I1
    if t.name == "f32":
        return F32
    if t.name == "f64":
        return F64
    return ir.IntType(t.bits)


def memory_type(t: ScalarType) -> ir.Type:
    return I8 if t.is_bool else value_type(t)


def abi_type(t: ScalarType) -> ir.Type:
    return memory_type(t)


def int_type_of_width(t: ScalarType) -> ir.IntType:
    """The integer type with the bits of ``t`` (for bit-level views of floats)."""
    return ir.IntType(8 if t.is_bool else t.bits)


_CTYPES = {
    "bool": ctypes.c_uint8, "i8": ctypes.c_int8, "u8": ctypes.c_uint8, "i16": ctypes.c_int16,
    "u16": ctypes.c_uint16, "i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64,
    "u64": ctypes.c_uint64, "f32": ctypes.c_float, "f64": ctypes.c_double,
}


def ctype_of(t: ScalarType) -> type:
    return _CTYPES[t.name]
