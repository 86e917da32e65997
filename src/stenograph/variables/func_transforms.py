"""`torch.vmap` / `torch.func.vmap` and `torch.func.grad` applied to a function in a traced frame.

The transformed function is traced with the frame's own interpreter into a graph of its own (per
sample for vmap: its inputs are the operands without their batch dimension), and the call becomes
one node applying the transform to that graph (`vmap_apply` / `grad_apply`, kept as `get_attr`
submodules), which AOTAutograd and Inductor trace through functorch as torch.compile's own
transform ops are traced. Tensors the function reads besides its arguments are passed in too (not
batched). What `higher_order.trace_body` refuses (Python effects, non-tensor results), keyword
arguments, and options other than the plain ones (`in_dims`, `out_dims`, `argnums` as constants;
no `has_aux`, `chunk_size` or `randomness`) raise `Unsupported`: the transform runs eagerly at a
graph break.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch._dispatch.python import enable_python_dispatcher

from ..errors import Unsupported
from .base import Variable
from .containers import TupleVariable
from .higher_order import HigherOrderVariable, close_bodies, trace_body
from .tensor import TensorVariable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame


def vmap_apply(body: Any, in_dims: Any, out_dims: Any, *args: Any) -> Any:
    """The graph's target for a vmapped body."""
    return torch.vmap(body, in_dims, out_dims)(*args)


def grad_apply(body: Any, argnums: Any, *args: Any) -> Any:
    """The graph's target for the gradient of a body."""
    return torch.func.grad(body, argnums)(*args)


def _constant_options(name: str, args: list[Variable], kwargs: dict[str, Variable], allowed: dict) -> dict:
    """The transform's options as constants, defaults filled in; anything else is refused."""
    options = dict(allowed)
    for key, value in [*zip(allowed, args), *kwargs.items()]:
        if key not in allowed or not value.is_constant():
            raise Unsupported(f"{name}() with option {key!r}")
        options[key] = value.as_constant()
    if len(args) > len(allowed):
        raise Unsupported(f"{name}() with {len(args) + 1} positional arguments")
    return options


class VmapVariable(HigherOrderVariable):
    """`torch.vmap` / `torch.func.vmap`, before the function is given."""

    function = staticmethod(torch.vmap)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not args:
            raise Unsupported("torch.vmap() without a function")
        options = _constant_options(
            "torch.vmap", args[1:], kwargs, {"in_dims": 0, "out_dims": 0, "randomness": "error"}
        )
        if options.pop("randomness") != "error":
            raise Unsupported("torch.vmap() with randomness")
        return TransformedVariable(self, "vmap", args[0], options)


class GradVariable(HigherOrderVariable):
    """`torch.func.grad`, before the function is given."""

    function = staticmethod(torch.func.grad)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not args:
            raise Unsupported("torch.func.grad() without a function")
        options = _constant_options("torch.func.grad", args[1:], kwargs, {"argnums": 0, "has_aux": False})
        if options.pop("has_aux"):
            raise Unsupported("torch.func.grad() with has_aux=True")
        return TransformedVariable(self, "grad", args[0], options)


class TransformedVariable(Variable):
    """`torch.vmap(fn)` / `torch.func.grad(fn)`: calling it traces `fn` and records the node."""

    def __init__(self, transform: Variable, kind: str, fn: Variable, options: dict) -> None:
        self.transform = transform
        self.kind = kind
        self.fn = fn
        self.options = options

    def describe(self) -> str:
        return f"torch.{self.kind}({self.fn.describe()})"

    def reconstruct(self, rebuild: Any) -> str:
        options = "".join(f", {key}={rebuild.constant(value)}" for key, value in self.options.items())
        return f"{rebuild.expr(self.transform)}({rebuild.expr(self.fn)}{options})"

    def _call_fn(self, frame: Frame, inner: list[Variable]) -> Variable:
        """The transformed function on the body's inputs, the trace marked as inside it."""
        frame.output.transform_bodies += 1
        try:
            return self.fn.call(frame, inner, {})
        finally:
            frame.output.transform_bodies -= 1

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if kwargs or not args or not all(isinstance(a, TensorVariable) for a in args):
            raise Unsupported(f"{self.describe()} called with arguments other than tensors")
        fakes = [a.fake for a in args]  # type: ignore[attr-defined]
        output = frame.output
        what = f"the function of {self.describe()}"
        if self.kind == "vmap":
            in_dims = self.options["in_dims"]
            dims = list(in_dims) if isinstance(in_dims, (tuple, list)) else [in_dims] * len(args)
            if len(dims) != len(args) or not all(d is None or isinstance(d, int) for d in dims):
                raise Unsupported(f"{self.describe()} with in_dims {in_dims!r}")
            with output.fake_mode:
                samples = [f if d is None else f.select(d, 0) for f, d in zip(fakes, dims)]
            body = trace_body(frame, lambda inner: self._call_fn(frame, inner), samples, what)
        else:
            body = trace_body(frame, lambda inner: self._call_fn(frame, inner), fakes, what, bare=True)
        (module,), free = close_bodies([body])
        fakes += [node.meta["example_value"] for node in free]
        if self.kind == "vmap":
            # tensors the function reads besides its arguments are the same for every sample
            target, options = vmap_apply, (tuple(dims) + (None,) * len(free), self.options["out_dims"])
        else:
            target, options = grad_apply, (self.options["argnums"],)
        try:
            with output.fake_mode, enable_python_dispatcher():
                fake = target(module, *options, *fakes)
        except Exception as e:
            raise Unsupported(f"{self.describe()} raised {type(e).__name__} while tracing: {e}") from e
        attr = output.add_submodule(module, f"{self.kind}_body")
        inputs = [*[a.node for a in args], *free]  # type: ignore[attr-defined]
        node = output.graph.create_node("call_function", target, (attr, *options, *inputs), {})
        result = output.wrap_result(node, fake, self.describe())
        if self.kind != "vmap":
            return result
        results = result.unpack(frame)
        items = _returned_inputs(module, results, args, dims, self.options["out_dims"])
        if body.single:
            return items[0]
        return result if all(a is b for a, b in zip(items, results)) else TupleVariable(items)


def _returned_inputs(
    body: Any, results: list[Variable], args: list[Variable], in_dims: list, out_dims: Any
) -> list[Variable]:
    """vmap's results, where the function returned one of its arguments as it is (after an
    in-place operation on it, `torch.vmap(torch.Tensor.acos_)(x)`) the argument itself: eagerly
    the result is that very tensor (`y is x`) when it comes out along the dimension it went in."""
    (returned,) = (node.args[0] for node in body.graph.nodes if node.op == "output")
    placeholders = [node for node in body.graph.nodes if node.op == "placeholder"]
    outs = list(out_dims) if isinstance(out_dims, (tuple, list)) else [out_dims] * len(results)
    items = list(results)
    for j, node in enumerate(returned if isinstance(returned, (tuple, list)) else [returned]):
        if node in placeholders[: len(args)] and j < len(items):
            i = placeholders.index(node)
            if in_dims[i] is not None and in_dims[i] == outs[j]:
                items[j] = args[i]
    return items
