"""Texture fetches in the IR: ``Call("texture", args, rtype)``.

A texture fetch (``tex2D<float4>(obj, x, y)`` and the other ``tex*`` functions of a texture object
or reference) is one call per component of the result, with the arguments ``TEXTURE_ARGS``::

    texture<f32>(obj, op, ix, x, y, z, layer, comp)

``obj`` is the texture object's 64-bit handle, ``op`` which function (``TEXTURE_OPS``), ``ix`` the
integer coordinate of ``tex1Dfetch``, ``x, y, z`` the coordinates of the others (0 where unused),
``layer`` the layer of layered and cubemap-layered fetches, ``comp`` the component (0-3) of the
result. The call is a pure function of its arguments within one launch: CUDA leaves a fetch of
memory written during the same launch undefined, so the texture's contents are constant for the
kernel, and the analyses may treat the fetch like a math function (read-only, no memory access they
need to see). Its value is defined by the runtime's ``polypy_tex_value`` (``polypy/runtime/parts/
texture_fetch.h``), which the C/C++ output of a whole program calls, and the emulator too under
``polypy run --emulate``; the LLVM backend, kernel libraries and the emulator outside a whole
program refuse texture fetches with a located error (docs/textures.md).
"""
from __future__ import annotations

from polypy.ir.types import F32, I8, I16, I32, U8, U16, U32, U64, ScalarType

TEXTURE = "texture"
TEXTURE_OPS = {"tex1Dfetch": 0, "tex1D": 1, "tex2D": 2, "tex3D": 3, "tex1DLayered": 4, "tex2DLayered": 5,
               "texCubemap": 6, "texCubemapLayered": 7}
TEXTURE_ARGS: tuple[ScalarType, ...] = (U64, I32, I32, F32, F32, F32, I32, I32)
TEXTURE_RESULTS: tuple[ScalarType, ...] = (F32, I32, U32, I16, U16, I8, U8)


def texture_signature_problem(args: tuple[ScalarType, ...], rtype: ScalarType) -> str | None:
    """What is wrong with a texture call of these argument types and result type, or None."""
    if len(args) != len(TEXTURE_ARGS):
        return f"texture takes {len(TEXTURE_ARGS)} arguments"
    for k, (got, want) in enumerate(zip(args, TEXTURE_ARGS)):
        if got != want:
            return f"argument {k} of texture is {got}, not {want}"
    if rtype not in TEXTURE_RESULTS:
        return f"texture has no result type {rtype}"
    return None


__all__ = ["TEXTURE", "TEXTURE_ARGS", "TEXTURE_OPS", "TEXTURE_RESULTS", "texture_signature_problem"]
