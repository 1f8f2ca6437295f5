"""PyTorch integration: compiled kernels and their synthesized gradients as autograd functions.

::

    import torch, polypy, polypy.torch
    mod = polypy.compile("samples/layernorm.cu", defines={"REAL": "double"})
    layernorm = polypy.torch.function(
        mod.layernorm,
        inputs=["x", "gamma", "beta"],            # tensors passed in, in this order
        outputs={"y": "x"},                       # allocated by the wrapper: the shape of x
        params={"cols": lambda x: x.shape[-1], "eps": 1e-5},
        grid=lambda x: x.numel() // x.shape[-1], block=128)
    y = layernorm(x, gamma, beta)                 # y.grad_fn is set: y.sum().backward() runs layernorm_grad
    polypy.torch.launch(mod.layernorm)[grid, block](x, gamma, beta, y, cols, 1e-5)   # in place, no autograd

Every kernel parameter is exactly one of: an *input* (a tensor passed to the function, or a
number / one-element tensor for a scalar parameter), an *output* (a pointer parameter the
wrapper allocates, zero-filled, and returns), both (an in/out buffer such as saxpy's ``y``: the
kernel runs on a copy of the input tensor, which is never modified, and the copy is returned),
or a *param* (a constant, or a callable of the inputs: sizes, ``eps``). ``zero_outputs=False``
leaves allocated outputs uninitialized, for kernels that write every element. ``grid``, ``block``,
``shmem``, output shapes and params may be callables; they are called with the inputs their
signature names (``lambda x: x.shape[0]``; ``**kw`` receives them all).

Tensors are used without copies: a CPU tensor's memory is viewed as a NumPy array
(``tensor.detach().numpy()``) and the kernel reads and writes it in place. Each tensor must be
on the CPU, strided, and have exactly the element type of its parameter (``const float*`` takes
``torch.float32``); an input that is not contiguous is copied (``.contiguous()``), an ``out=``
tensor or a tensor given to ``launch`` that is not contiguous is an error. Problems are
``polypy.UserError`` naming the parameter; sizes are checked against the launch's footprint as
for every polypy launch.

Backward launches the reverse-mode gradient (``polypy.grad(kernel, wrt=...)``, compiled on the
first backward) with Enzyme's duplicated convention: zero shadows for the differentiable inputs,
the incoming gradients (copied: the kernel consumes its seeds) as the outputs' shadows, scratch
tensors for the outputs the wrapper allocates. The gradient is built with those outputs as
``scratch_outputs``: it leaves out the kernel's stores to each one it does not read back, and
such a scratch tensor is then neither written nor zeroed (kept per thread for the next backward
of the same shape; large new tensors: ``polypy.torch_alloc``). It returns the first-order
gradients of the inputs in ``wrt`` (default: every floating-point one) that need one.

PyTorch is imported when first needed; without it these functions raise ``TorchMissingError``
(``pip install -e '.[torch]'``). This module is driver level: it imports stages only inside
functions.
"""
from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from polypy.errors import InternalError, UserError
from polypy.ir import nodes as n
from polypy.ir.types import PointerType, ScalarType
from polypy.launch import holds_at_launch
from polypy.lowp import accessor_elem, is_bfloat16, is_half
from polypy import torch_alloc as fresh
from polypy.torch_autograd import autograd_function, is_float, overlaps, shadow_names

INSTALL_HINT = "pip install -e '.[torch]'"


class TorchMissingError(UserError, ImportError):
    """polypy.torch was used without PyTorch installed."""


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise TorchMissingError(f"polypy.torch needs PyTorch, which is not installed ({exc}): {INSTALL_HINT}") from None
    return torch


@functools.lru_cache(maxsize=None)
def _torch_dtype(np_dtype: np.dtype) -> Any:
    """The torch dtype with the memory layout of a NumPy dtype (a cache of the conversions)."""
    torch = _torch()
    return torch.from_numpy(np.zeros(0, dtype=np_dtype)).dtype


# --------------------------------------------------------------------------- tensors as arrays


def _what(kernel: n.Kernel, name: str) -> str:
    return f"argument {name!r} of kernel {kernel.name!r}"


def _check_tensor(kernel: n.Kernel, name: str, ptype: PointerType | None, t: Any, *, copy_ok: bool) -> Any:
    """``t`` checked for a pointer parameter: a CPU, strided tensor of exactly the element type
    (``ptype`` None: any; the binder checks it), contiguous (copied when ``copy_ok``, an error
    otherwise). Returns the tensor to use."""
    torch = _torch()
    want = _torch_dtype(ptype.elem.dtype) if ptype is not None else t.dtype
    if not isinstance(t, torch.Tensor):
        raise UserError(f"{_what(kernel, name)} ({ptype}) must be a torch.Tensor of {want}, got {type(t).__name__}",
                        kernel.loc)
    if t.device.type != "cpu":
        raise UserError(f"{_what(kernel, name)} is on device {t.device}; polypy runs kernels on the CPU "
                        f"(pass {name}.cpu())", kernel.loc)
    if t.layout != torch.strided:
        raise UserError(f"{_what(kernel, name)} has layout {t.layout}; polypy needs a dense (strided) tensor "
                        f"(pass {name}.to_dense())", kernel.loc)
    if ptype is not None and t.dtype in (torch.float16, torch.bfloat16) and want == torch.uint16:
        # __half / __nv_bfloat16 memory is its bits (polypy.lowp): the tensor viewed as them
        ctype = next((sp.ctype for sp in kernel.source_params if sp.name == name), "")
        elem = accessor_elem(ctype)  # or a packed accessor of c10::Half / c10::BFloat16: its data
        if ((is_half(ctype) or elem == "half") and t.dtype == torch.float16) or \
                ((is_bfloat16(ctype) or elem == "bfloat16") and t.dtype == torch.bfloat16):
            t = t.view(torch.uint16)
    if t.dtype != want:
        raise UserError(f"{_what(kernel, name)} ({ptype}) must have dtype {want}, got {t.dtype} "
                        f"(pass {name}.to({want}))", kernel.loc)
    if not t.is_contiguous():
        if not copy_ok:
            raise UserError(f"{_what(kernel, name)} is not contiguous (strides {tuple(t.stride())} for shape "
                            f"{tuple(t.shape)}); the kernel writes it in place, so pass a contiguous tensor "
                            f"({name}.contiguous())", kernel.loc)
        t = t.contiguous()
    return t


def _array(t: Any) -> np.ndarray:
    """The tensor's memory as a NumPy array (no copy)."""
    return t.detach().numpy()


# --------------------------------------------------------------------------- launch without autograd


def launch(kernel: Any) -> _TorchLauncher:
    """``polypy.torch.launch(mod.K)[grid, block](...)``: launch a compiled kernel (or a gradient
    from ``polypy.grad``) on torch tensors, in place, like ``mod.K[grid, block](...)`` on NumPy
    arrays. No autograd: a tensor the kernel may write must not require grad (use ``function``)."""
    _torch()
    if not hasattr(kernel, "__getitem__") or not hasattr(kernel, "gpu"):
        raise UserError("polypy.torch.launch takes a compiled kernel (mod.<kernel> of polypy.compile(...)) or "
                        f"a gradient from polypy.grad, got {type(kernel).__name__}")
    return _TorchLauncher(kernel)


class _TorchLauncher:
    def __init__(self, kernel: Any):
        self.kernel = kernel

    @property
    def _signature(self) -> n.Kernel:
        k = self.kernel
        return k.signature if hasattr(k, "signature") else k.compiled.signature

    def __getitem__(self, config: Any) -> Callable[..., None]:
        launch_ = self.kernel[config]
        kernel = self._signature
        params = kernel.params

        def run(*args: Any, **kwargs: Any) -> None:
            torch = _torch()
            if args and kwargs:
                raise UserError(f"pass the arguments of kernel {kernel.name!r} either all by position or all by name",
                                kernel.loc)
            if not kwargs and len(args) != len(params):
                # a struct passed whole (or a wrong count, which the binder reports)
                launch_(*[_array(_check_tensor(kernel, f"#{i}", None, a, copy_ok=False))
                          if isinstance(a, torch.Tensor) else a for i, a in enumerate(args)])
                return
            items = kwargs.items() if kwargs else zip([p.name for p in params], args)
            converted: dict[str, Any] = {}
            for name, value in items:
                p = kernel.param(name)
                if isinstance(value, torch.Tensor) and p is not None and isinstance(p.ptype, PointerType):
                    t = _check_tensor(kernel, name, p.ptype, value, copy_ok=False)
                    if not p.ptype.const and t.requires_grad and torch.is_grad_enabled():
                        raise UserError(f"{_what(kernel, name)} requires grad and the kernel may write it; "
                                        "polypy.torch.launch does not record autograd history (use "
                                        "polypy.torch.function, or torch.no_grad())", kernel.loc)
                    value = _array(t)
                elif isinstance(value, torch.Tensor):
                    value = value.detach().cpu().numpy()  # a scalar (or struct member) given as a tensor
                converted[name] = value
            launch_(**converted)

        return run


# --------------------------------------------------------------------------- autograd functions


def function(kernel: Any, *, inputs: Sequence[str], outputs: Mapping[str, Any] | Sequence[str],
             grid: Any, block: Any, params: Mapping[str, Any] | None = None, shmem: Any = 0,
             wrt: Sequence[str] | None = None, grad_options: Mapping[str, Any] | None = None,
             zero_outputs: bool = True) -> KernelFunction:
    """A compiled kernel as a differentiable PyTorch function (see the module docstring).

    ``inputs``: the parameters passed as arguments, in call order. ``outputs``: parameter name
    -> shape (a tuple, an int, an input's name for its shape, or a callable of the inputs),
    or a list of names of in/out parameters (also in ``inputs``). ``params``: every other
    parameter -> a value or a callable of the inputs. ``grid``/``block``/``shmem``: values or
    callables of the inputs. ``wrt``: the inputs to differentiate (default: every
    floating-point one). ``grad_options``: passed to ``polypy.grad``. ``zero_outputs``: False
    leaves the outputs the wrapper allocates uninitialized (``torch.empty``, as PyTorch's own
    operators do), which saves a pass over memory where the kernel writes every element.
    """
    _torch()
    return KernelFunction(kernel, inputs=inputs, outputs=outputs, grid=grid, block=block, params=params,
                          shmem=shmem, wrt=wrt, grad_options=grad_options, zero_outputs=zero_outputs)


class _Derived:
    """A value given as a constant or as a callable of some of the inputs (by parameter name)."""

    def __init__(self, value: Any, inputs: Sequence[str], what: str):
        self.value = value
        self.names: tuple[str, ...] | None = None  # the inputs to pass; None: all of them
        self.is_callable = callable(value)
        if not self.is_callable:
            return
        try:
            sig = inspect.signature(value)
        except (TypeError, ValueError):
            return
        names = []
        for q in sig.parameters.values():
            if q.kind == q.VAR_KEYWORD:
                return
            if q.kind == q.VAR_POSITIONAL or q.kind == q.POSITIONAL_ONLY:
                raise UserError(f"{what}: a callable of the inputs takes them by name (lambda x: ...), "
                                f"not *{q.name} or positional-only")
            if q.name in inputs:
                names.append(q.name)
            elif q.default is q.empty:
                raise UserError(f"{what}: the callable asks for {q.name!r}, which is not an input "
                                f"(inputs: {', '.join(inputs)})")
        self.names = tuple(names)

    def __call__(self, values: Mapping[str, Any]) -> Any:
        if not self.is_callable:
            return self.value
        if self.names is None:
            return self.value(**values)
        return self.value(**{k: values[k] for k in self.names})


def _shape(value: Any, what: str) -> tuple[int, ...]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (value,)
    try:
        shape = tuple(int(d) for d in value)
    except TypeError:
        raise UserError(f"{what} must be a shape (an int or a tuple of ints), got {value!r}") from None
    if any(d < 0 for d in shape):
        raise UserError(f"{what} has a negative dimension: {shape}")
    return shape


class KernelFunction:
    """A compiled kernel as a differentiable PyTorch function; made by ``polypy.torch.function``.

    ``f(*inputs)`` (or by name) returns the output tensor, or a tuple in the order of
    ``outputs``. ``out=`` (a tensor, or a tuple of them in the order of ``outputs``, pure
    outputs only) makes the kernel write into the given tensors and return them; like PyTorch's
    own ``out=``, it does not record autograd history and is refused where a gradient is needed.
    """

    def __init__(self, kernel: Any, *, inputs: Sequence[str], outputs: Mapping[str, Any] | Sequence[str],
                 grid: Any, block: Any, params: Mapping[str, Any] | None = None, shmem: Any = 0,
                 wrt: Sequence[str] | None = None, grad_options: Mapping[str, Any] | None = None,
                 zero_outputs: bool = True):
        from polypy.driver.api import CompiledKernel

        if not isinstance(kernel, CompiledKernel):
            raise UserError("polypy.torch.function takes a compiled kernel (mod.<kernel> of polypy.compile(...)), "
                            f"got {type(kernel).__name__}")
        self.kernel = kernel
        sig = kernel.signature
        self.name = kernel.name
        if isinstance(inputs, str) or isinstance(outputs, str):
            raise UserError("inputs and outputs are lists of parameter names (a str is not)")
        self.inputs = tuple(inputs)
        out_specs = dict(outputs) if isinstance(outputs, Mapping) else {name: None for name in outputs}
        self.outputs = tuple(out_specs)
        params = dict(params or {})
        self._grad_options = dict(grad_options or {})
        self.zero_outputs = bool(zero_outputs)
        self._scratch_tensors = threading.local()  # the backward's scratch tensors, per thread
        c_params = [sp.name for sp in sig.source_params] or [p.name for p in sig.params]
        self._ptypes: dict[str, PointerType | ScalarType] = {}
        for name in c_params:
            p = sig.param(name)
            if p is not None:
                self._ptypes[name] = p.ptype

        def check_names(names: Sequence[str], what: str) -> None:
            seen = set()
            for name in names:
                if name not in c_params:
                    raise UserError(f"{what} names {name!r}, which is not a parameter of kernel {self.name!r} "
                                    f"(parameters: {', '.join(c_params)})", sig.loc)
                if name in seen:
                    raise UserError(f"{what} names {name!r} twice", sig.loc)
                seen.add(name)

        check_names(self.inputs, "inputs")
        check_names(self.outputs, "outputs")
        check_names(list(params), "params")
        for name in self.inputs:
            if name not in self._ptypes:
                raise UserError(f"input {name!r} of kernel {self.name!r} is a struct; pass it in params", sig.loc)
        for name in self.outputs:
            ptype = self._ptypes.get(name)
            if not isinstance(ptype, PointerType):
                raise UserError(f"output {name!r} of kernel {self.name!r} is not a pointer parameter ({ptype})", sig.loc)
            if ptype.const:
                raise UserError(f"output {name!r} of kernel {self.name!r} is a const pointer ({ptype}): the kernel "
                                "cannot write it", sig.loc)
        for name in params:
            if name in self.inputs or name in self.outputs:
                raise UserError(f"parameter {name!r} of kernel {self.name!r} is given both in params and as an "
                                "input or output", sig.loc)
        missing = [p for p in c_params if p not in self.inputs and p not in self.outputs and p not in params]
        if missing:
            raise UserError(f"kernel {self.name!r}: say what to pass for {', '.join(map(repr, missing))} "
                            "(inputs, outputs or params)", sig.loc)
        self.inouts = tuple(name for name in self.outputs if name in self.inputs)
        self._out_shapes: dict[str, _Derived | None] = {}
        for name, spec in out_specs.items():
            if name in self.inouts:
                if spec is not None:
                    raise UserError(f"in/out parameter {name!r} takes the shape of its input; give it no shape",
                                    sig.loc)
                self._out_shapes[name] = None
            elif spec is None:
                raise UserError(f"output {name!r} of kernel {self.name!r} needs a shape (a tuple, an input's "
                                "name or a callable of the inputs)", sig.loc)
            elif isinstance(spec, str):
                if spec not in self.inputs or not isinstance(self._ptypes[spec], PointerType):
                    raise UserError(f"the shape of output {name!r} names {spec!r}, which is not a tensor input",
                                    sig.loc)
                self._out_shapes[name] = _Derived(lambda _s=spec, **kw: tuple(kw[_s].shape), self.inputs,
                                                  f"shape of output {name!r}")
            else:
                self._out_shapes[name] = _Derived(spec, self.inputs, f"shape of output {name!r}")
        self._params = {name: _Derived(v, self.inputs, f"param {name!r}") for name, v in params.items()}
        self._grid = _Derived(grid, self.inputs, "grid")
        self._block = _Derived(block, self.inputs, "block")
        self._shmem = _Derived(shmem, self.inputs, "shmem")
        floats = [name for name in self.inputs if is_float(self._ptypes[name])]
        if wrt is None:
            self.wrt = tuple(floats)
        else:
            if isinstance(wrt, str):
                raise UserError("wrt is a list of input names (a str is not)")
            self.wrt = tuple(wrt)
            for name in self.wrt:
                if name not in self.inputs:
                    raise UserError(f"wrt names {name!r}, which is not an input (inputs: {', '.join(self.inputs)})",
                                    sig.loc)
                if name not in floats:
                    raise UserError(f"wrt names {name!r} ({self._ptypes[name]}): only floating-point inputs have "
                                    "gradients", sig.loc)
        self._gradient: Any = None
        self._shadow_of: dict[str, str] = {}
        self._untouched: set[str] = set()  # scratch outputs K_grad neither reads nor writes
        self._seed_read: set[str] = set()  # outputs whose seed K_grad reads and never writes
        self._seed_read_when: dict[str, n.Expr] = {}  # ... and those it only reads where a condition holds

    # ------------------------------------------------------------------ the gradient kernel

    @property
    def gradient(self) -> Any:
        """The reverse-mode gradient kernel (``polypy.grad``), compiled on first use."""
        if self._gradient is None:
            from autodiff.scratch import seed_read_when, untouched, writes
            from polypy.driver.gradients import grad

            active = list(self.wrt) + [name for name in self.inouts
                                       if name not in self.wrt and is_float(self._ptypes[name])]
            # the outputs the wrapper allocates are scratch in the backward: K_grad need not store them
            scratch = tuple(name for name in self.outputs if name not in self.inouts)
            g = grad(self.kernel, wrt=active, **{"scratch_outputs": scratch, **self._grad_options})
            self._shadow_of = shadow_names(self.kernel.signature, g.gpu)
            self._untouched = {name for name in scratch if untouched(g.gpu, name)}
            # outputs whose seed K_grad only reads (autodiff.scratch.drop_seed_zeroing): passed as they are
            kernels = [getattr(t, "gpu", None) for t in getattr(g, "taps", ())] + [g.gpu]
            self._seed_read = {primal for shadow, primal in self._shadow_of.items()
                               if primal in scratch and not any(k is None or writes(k, shadow) for k in kernels)}
            # ... and at the launches where a condition holds (autodiff.scratch.guard_seed_zeroing)
            self._seed_read_when = {primal: seed_read_when(g.gpu, shadow) for shadow, primal in self._shadow_of.items()
                                    if primal in scratch and not any(k is None or writes(k, shadow) for k in kernels[:-1])}
            self._gradient = g
        return self._gradient

    # ------------------------------------------------------------------ calling

    def __call__(self, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        torch = _torch()
        values = self._bind(args, kwargs)
        if out is not None:
            return self._forward_into(values, out)
        needs_grad = torch.is_grad_enabled() and any(
            isinstance(values[name], torch.Tensor) and values[name].requires_grad for name in self.wrt)
        if not needs_grad:
            outs, _ = self._forward(values)
            return outs[0] if len(outs) == 1 else tuple(outs)
        result = autograd_function().apply(self, *[values[name] for name in self.inputs])
        return result[0] if len(self.outputs) == 1 else result

    def _bind(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        if len(args) > len(self.inputs):
            raise UserError(f"{self.name} takes {len(self.inputs)} inputs ({', '.join(self.inputs)}), got {len(args)}")
        values = dict(zip(self.inputs, args))
        for key, value in kwargs.items():
            if key not in self.inputs:
                raise UserError(f"{self.name} has no input {key!r} (inputs: {', '.join(self.inputs)})")
            if key in values:
                raise UserError(f"{self.name}: input {key!r} given twice")
            values[key] = value
        missing = [name for name in self.inputs if name not in values]
        if missing:
            raise UserError(f"{self.name}: missing input {', '.join(map(repr, missing))}")
        return values

    def _prepare(self, values: Mapping[str, Any]) -> tuple[dict[str, Any], Any, dict[str, Any]]:
        """Checked inputs (tensors contiguous; scalars as numbers), the launch configuration and
        the params' values."""
        torch = _torch()
        sig = self.kernel.signature
        prepared: dict[str, Any] = {}
        for name in self.inputs:
            ptype = self._ptypes[name]
            v = values[name]
            if isinstance(ptype, PointerType):
                prepared[name] = _check_tensor(sig, name, ptype, v, copy_ok=True)
            elif isinstance(v, torch.Tensor):
                if v.numel() != 1:
                    raise UserError(f"{_what(sig, name)} ({ptype}) is a scalar: pass a number or a one-element "
                                    f"tensor, got a tensor of shape {tuple(v.shape)}", sig.loc)
                if v.device.type != "cpu":
                    raise UserError(f"{_what(sig, name)} is on device {v.device}; polypy runs kernels on the CPU "
                                    f"(pass {name}.cpu())", sig.loc)
                prepared[name] = v.detach().reshape(()).item()
            else:
                prepared[name] = v
        shown = {name: values[name] if not isinstance(self._ptypes[name], PointerType) else prepared[name]
                 for name in self.inputs}
        config = (self._grid(shown), self._block(shown), self._shmem(shown))
        params = {name: d(shown) for name, d in self._params.items()}
        return prepared, config, params

    def _output_shapes(self, values: Mapping[str, Any], prepared: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
        shown = {name: values[name] if not isinstance(self._ptypes[name], PointerType) else prepared[name]
                 for name in self.inputs}
        shapes = {}
        for name in self.outputs:
            d = self._out_shapes[name]
            shapes[name] = tuple(prepared[name].shape) if d is None else _shape(d(shown), f"shape of output {name!r}")
        return shapes

    def _launch_args(self, prepared: Mapping[str, Any], outs: Mapping[str, Any],
                     params: Mapping[str, Any]) -> dict[str, Any]:
        args: dict[str, Any] = {}
        for name in self.inputs:
            v = prepared[name]
            args[name] = _array(v) if isinstance(self._ptypes[name], PointerType) else v
        for name, t in outs.items():
            args[name] = _array(t)
        args.update(params)
        return args

    def _forward(self, values: Mapping[str, Any]) -> tuple[list[Any], dict]:
        torch = _torch()
        prepared, config, params = self._prepare(values)
        shapes = self._output_shapes(values, prepared)
        outs: dict[str, Any] = {}
        for name in self.outputs:
            if name in self.inouts:
                outs[name] = prepared[name].clone(memory_format=torch.contiguous_format)
            else:
                alloc = fresh.zeros if self.zero_outputs else fresh.empty  # huge pages if large
                outs[name] = alloc(shapes[name], _torch_dtype(self._ptypes[name].elem.dtype))
        self.kernel[config](**self._launch_args(prepared, outs, params))
        state = {"prepared": prepared, "config": config, "params": params, "shapes": shapes}
        return [outs[name] for name in self.outputs], state

    def _forward_into(self, values: Mapping[str, Any], out: Any) -> Any:
        torch = _torch()
        sig = self.kernel.signature
        single = isinstance(out, torch.Tensor)
        given = (out,) if single else tuple(out)
        pure = [name for name in self.outputs if name not in self.inouts]
        if self.inouts:
            raise UserError(f"{self.name}: out= is for pure outputs; {', '.join(self.inouts)} is an in/out "
                            "parameter (its input is copied and the copy returned)")
        if len(given) != len(pure):
            raise UserError(f"{self.name}: out= takes {len(pure)} tensor(s) ({', '.join(pure)}), got {len(given)}")
        if torch.is_grad_enabled() and any(isinstance(values[name], torch.Tensor) and values[name].requires_grad
                                           for name in self.wrt):
            raise UserError(f"{self.name}: out= does not record autograd history, and an input requires grad "
                            "(call it without out=, or under torch.no_grad())")
        prepared, config, params = self._prepare(values)
        shapes = self._output_shapes(values, prepared)
        outs = {}
        for name, t in zip(pure, given):
            t = _check_tensor(sig, name, self._ptypes[name], t, copy_ok=False)
            if tuple(t.shape) != shapes[name]:
                raise UserError(f"out= tensor for output {name!r} of {self.name} has shape {tuple(t.shape)}, "
                                f"expected {shapes[name]}", sig.loc)
            if t.requires_grad and torch.is_grad_enabled():
                raise UserError(f"out= tensor for output {name!r} of {self.name} requires grad; the kernel writes "
                                "it in place", sig.loc)
            outs[name] = t
        self.kernel[config](**self._launch_args(prepared, outs, params))
        return given[0] if single else given

    def _backward(self, state: dict, grad_outputs: Sequence[Any], needed: Mapping[str, bool]) -> dict[str, Any]:
        torch = _torch()
        g = self.gradient
        prepared, config, params, shapes = state["prepared"], state["config"], state["params"], state["shapes"]
        args: dict[str, Any] = {}
        grads: dict[str, Any] = {}
        seeds = dict(zip(self.outputs, grad_outputs))
        for name in self.inputs:
            ptype = self._ptypes[name]
            v = prepared[name]
            if not isinstance(ptype, PointerType):
                args[name] = v
            elif name in self.inouts:
                args[name] = _array(v.clone(memory_format=torch.contiguous_format))  # K_grad updates it
            else:
                args[name] = _array(v)
        for name in self.outputs:
            if name not in self.inouts:  # scratch: nobody reads it after K_grad (which may not even store it)
                t = self._scratch(("output", name), shapes[name], _torch_dtype(self._ptypes[name].elem.dtype))
                args[name] = _array(t.zero_() if self.zero_outputs and name not in self._untouched else t)
        args.update(params)
        for shadow, primal in self._shadow_of.items():
            ptype = self._ptypes[primal]
            dtype = _torch_dtype((ptype.elem if isinstance(ptype, PointerType) else ptype).dtype)
            if primal in seeds:
                seed = seeds[primal]
                if seed is None:
                    t = torch.zeros(shapes[primal], dtype=dtype)
                else:
                    if tuple(seed.shape) != shapes[primal]:
                        raise InternalError(f"gradient of output {primal!r} has shape {tuple(seed.shape)}, "
                                            f"expected {shapes[primal]}")
                    if primal in self.inputs:  # an in/out buffer: the result is its input's gradient
                        t = seed.detach().to(dtype=dtype).clone(memory_format=torch.contiguous_format)
                    elif self._reads_seed(primal, config, args) and seed.dtype == dtype and seed.is_contiguous() \
                            and not overlaps(seed, [v for v in prepared.values() if isinstance(v, torch.Tensor)]):
                        t = seed.detach()  # K_grad only reads it: no copy
                    else:  # K_grad consumes it
                        t = self._scratch(("seed", primal), shapes[primal], dtype).copy_(seed.detach())
            elif isinstance(ptype, PointerType):
                t = fresh.zeros(prepared[primal].shape, dtype)  # returned: new memory, huge pages if large
            else:
                t = torch.zeros(1, dtype=dtype)
            args[shadow] = _array(t)
            if primal in self.inputs and primal in self.wrt and needed.get(primal, False):
                grads[primal] = t
        g[config](**args)
        return grads


    def _reads_seed(self, primal: str, config: Any, args: Mapping[str, Any]) -> bool:
        """Whether ``K_grad``, launched with ``config`` and ``args``, only reads ``primal``'s seed."""
        when = self._seed_read_when.get(primal)
        return primal in self._seed_read or (when is not None and holds_at_launch(when, self.name, config, args))

    def _scratch(self, key: tuple[str, str], shape: tuple[int, ...], dtype: Any) -> Any:
        """A contiguous tensor for the backward's own use (an output ``K_grad`` rewrites, an
        output's seed it consumes), kept per thread and reused by the next backward of the same
        shape: a fresh tensor of many megabytes is new pages from the kernel at every call
        (page faults and zeroing cost as much as the gradient kernel, issue 38). Its contents
        are left from the last call: the caller overwrites or zeroes it."""
        torch = _torch()
        kept = self._scratch_tensors.__dict__.setdefault("tensors", {})
        t = kept.get(key)
        if t is None or tuple(t.shape) != tuple(shape) or t.dtype != dtype:
            t = torch.empty(shape, dtype=dtype)
            kept[key] = t
        return t


def __getattr__(name: str) -> Any:
    # ``polypy.torch.Function``: the autograd Function class (needs torch, so made on first access).
    if name == "Function":
        _torch()
        return autograd_function()
    if name in ("load", "load_inline", "kernels"):
        # Whole PyTorch extensions (polypy.torch_ext): torch.utils.cpp_extension's signatures.
        import polypy.torch_ext as extensions

        return getattr(extensions, name)
    raise AttributeError(f"module 'polypy.torch' has no attribute {name!r}")


__all__ = ["function", "kernels", "launch", "load", "load_inline", "KernelFunction", "TorchMissingError", "INSTALL_HINT"]
