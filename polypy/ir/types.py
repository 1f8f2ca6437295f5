"""Types of the polypy IR.

The IR is scalar: every value is a ``ScalarType`` (bool, sized integers, f32, f64).
Pointers only appear as kernel parameters (``PointerType``); everything the frontend
sees as an aggregate (``float4``, a struct passed by value) has been split into scalars.
"""
from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True, slots=True)
class ScalarType:
    """One of: bool, i8, u8, i16, u16, i32, u32, i64, u64, f32, f64."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in _SCALAR_INFO:
            raise ValueError(f"unknown scalar type {self.name!r}")

    @property
    def is_float(self) -> bool:
        return self.name in ("f32", "f64")

    @property
    def is_int(self) -> bool:
        return not self.is_float and self.name != "bool"

    @property
    def is_bool(self) -> bool:
        return self.name == "bool"

    @property
    def is_signed(self) -> bool:
        return self.name[0] in "if"

    @property
    def bits(self) -> int:
        return _SCALAR_INFO[self.name][0]

    @property
    def c_name(self) -> str:
        """The C spelling (``int``, ``unsigned int``, ``float``, ...)."""
        return _SCALAR_INFO[self.name][1]

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(_SCALAR_INFO[self.name][2])

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    def __str__(self) -> str:
        return self.name


_SCALAR_INFO: dict[str, tuple[int, str, str]] = {
    "bool": (1, "bool", "bool"),
    "i8": (8, "signed char", "int8"),
    "u8": (8, "unsigned char", "uint8"),
    "i16": (16, "short", "int16"),
    "u16": (16, "unsigned short", "uint16"),
    "i32": (32, "int", "int32"),
    "u32": (32, "unsigned int", "uint32"),
    "i64": (64, "long long", "int64"),
    "u64": (64, "unsigned long long", "uint64"),
    "f32": (32, "float", "float32"),
    "f64": (64, "double", "float64"),
}

BOOL = ScalarType("bool")
I8 = ScalarType("i8")
U8 = ScalarType("u8")
I16 = ScalarType("i16")
U16 = ScalarType("u16")
I32 = ScalarType("i32")
U32 = ScalarType("u32")
I64 = ScalarType("i64")
U64 = ScalarType("u64")
F32 = ScalarType("f32")
F64 = ScalarType("f64")

SCALAR_TYPES: dict[str, ScalarType] = {name: ScalarType(name) for name in _SCALAR_INFO}


@dataclasses.dataclass(frozen=True, slots=True)
class PointerType:
    """A pointer kernel parameter: a 1-D buffer of ``elem`` in global memory."""

    elem: ScalarType
    const: bool = False
    restrict: bool = False

    def __str__(self) -> str:
        quals = (" const" if self.const else "") + (" restrict" if self.restrict else "")
        return f"{self.elem}*{quals}"


Type = ScalarType | PointerType


def scalar_type_of_dtype(dtype: np.dtype) -> ScalarType:
    """The IR type whose NumPy dtype is ``dtype`` (raises KeyError if none)."""
    dtype = np.dtype(dtype)
    for st in SCALAR_TYPES.values():
        if st.dtype == dtype:
            return st
    raise KeyError(str(dtype))


def wrap_int(value: int, ty: ScalarType) -> int:
    """``value`` reduced to the range of integer type ``ty`` (two's complement wrap)."""
    bits = ty.bits
    value &= (1 << bits) - 1
    if ty.is_signed and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def normalize_value(value: int | float | bool, ty: ScalarType) -> int | float | bool:
    """``value`` as a constant of type ``ty`` holds it: wrapped, rounded to f32, or a bool."""
    if ty.is_bool:
        return bool(value)
    if ty.is_int:
        return wrap_int(int(value), ty)
    if ty.name == "f32":
        return float(np.float32(value))
    return float(value)
