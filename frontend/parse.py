"""A ``.cu``/``.c`` file -> GPU-form ``polypy.ir.Module``: the passes nvcc makes over it (host,
and device where the file names ``__CUDA_ARCH__``: ``frontend.device_pass``), each parsed by
libclang with the kernel template instances it needs named, and built by
``frontend.module.ModuleBuilder``."""
from __future__ import annotations

import clang.cindex as ci

from polypy.ir import nodes as n
from polypy.sources import read_source
from polypy.stack import on_big_stack

from frontend.clang_setup import parse_translation_unit, top_cursors
from frontend.device_pass import device_defines, join_passes, names_cuda_arch, views_differ
from frontend.host_templates import explicit_class_members
from frontend.kernel_values import DeviceSources
from frontend.launch_tokens import explicit_instantiations, respace_launches
from frontend.module import INSTANCE_PREFIX, ModuleBuilder


def language_of(path: str) -> str:
    return "c" if path.endswith(".c") else "cuda"


@on_big_stack
def parse_file(path: str, *, text: str | None = None, defines: dict[str, str] | None = None,
               include_dirs: tuple[str, ...] = (), instantiate: tuple[str, ...] = (), part: bool = False,
               device_sources: tuple[str, ...] = ()) -> n.Module:
    """Parse a ``.cu``/``.c`` file into GPU-form IR (no optimization yet).

    Runs on ``polypy.stack``'s big stack; kernels nested deeper than ``polypy.ir.depth`` allows
    are refused.

    Kernel templates become kernels where host code launches them, where the file instantiates
    them explicitly (``template __global__ void k<128, float>(...);``), and for every entry of
    ``instantiate`` (``"k<128, float>"``).

    ``part``: the file is one part of a program built by separate compilation (``translate -c``):
    it has host code (its kernels' host stubs) even when it defines kernels alone.
    ``device_sources``: other files of the program whose device functions this file's kernels
    call (declared here, defined there: nvcc -rdc=true); they are inlined from those files.
    """
    language = language_of(path)
    if language == "cuda":
        text = respace_launches(path, text)
    module, tu = _parse_pass(path, language, text, defines, include_dirs, instantiate, part, device_sources)
    if language == "cuda" and names_cuda_arch(tu, path, text):
        device = device_defines(defines)
        if device is not None:
            on_device = _parse_pass(path, language, text, device, include_dirs, instantiate, part, device_sources)[0]
            if module.host is not None and views_differ(module, on_device):  # host code against the device pass
                module = _parse_pass(path, language, text, defines, include_dirs, instantiate, part, device_sources,
                                     {k.name: k for k in on_device.kernels})[0]
            module = join_passes(module, on_device)
    return module


def _parse_pass(path: str, language: str, text: str | None, defines: dict[str, str] | None,
                include_dirs: tuple[str, ...], instantiate: tuple[str, ...],
                part: bool = False, device_sources: tuple[str, ...] = (),
                device_view: dict[str, n.Kernel] | None = None) -> tuple[n.Module, ci.TranslationUnit]:
    """One pass of nvcc's over the file (see ``frontend.device_pass``): the module and the unit.
    ``device_view``: the device pass's kernels, which the host program is built against."""
    elsewhere = DeviceSources(device_sources, defines, include_dirs)
    tu = parse_translation_unit(path, language, text=text, defines=defines, include_dirs=include_dirs)
    wanted = list(instantiate) + (explicit_instantiations(tu, path, text) if language == "cuda" else [])
    members = explicit_class_members(top_cursors(tu), path) if language == "cuda" else []
    if wanted or members:
        # Name each instance in code appended to the file: clang instantiates it, and the
        # reference leads to the instance's body. Appending keeps every line number valid.
        original = text if text is not None else read_source(path)
        refs = "".join(f"\nstatic void* {INSTANCE_PREFIX}{i} = (void*)&{spec};" for i, spec in enumerate(wanted))
        refs += "".join(f"\nstatic auto {INSTANCE_PREFIX}m{i} = &{spec};" for i, spec in enumerate(members))
        tu = parse_translation_unit(path, language, text=original + "\n" + refs + "\n", defines=defines,
                                    include_dirs=include_dirs)
        return ModuleBuilder(tu, path, language, text, original=original, part=part, elsewhere=elsewhere,
                              device_view=device_view).build(), tu
    return ModuleBuilder(tu, path, language, text, part=part, elsewhere=elsewhere, device_view=device_view).build(), tu
