"""The emulator's view of launch arguments: arrays and scalars apart (see ``polypy.launch``)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from polypy.launch import bind_arguments as _bind
from polypy.ir import nodes as n
from polypy.ir.types import PointerType


def bind_arguments(kernel: n.Kernel, args: Mapping[str, Any] | Sequence[Any]
                   ) -> tuple[dict[str, np.ndarray], dict[str, np.generic]]:
    """(arrays of pointer parameters, scalars of scalar parameters), by IR parameter name."""
    values = _bind(kernel, args)
    arrays = {p.name: values[p.name] for p in kernel.params if isinstance(p.ptype, PointerType)}
    scalars = {p.name: values[p.name] for p in kernel.params if not isinstance(p.ptype, PointerType)}
    return arrays, scalars
