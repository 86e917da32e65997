"""`torch.distributed` collectives called in traced code, recorded as functional collectives.

A collective is a graph node of the `_c10d_functional` ops followed at once by its `wait_tensor`,
as torch.compile records them: `dist.all_reduce(t)` (an in-place c10d call, returning None)
becomes `t.copy_(wait_tensor(all_reduce(t, "sum", group_name)))`, and the functional API
(`torch.distributed._functional_collectives.all_reduce`) its two nodes, returning the plain
result tensor where eager returns an `AsyncCollectiveTensor` of the same value. The process
group is resolved to its name while tracing: the default group is guarded by name and size (a
group made anew is another group), an explicit group object by identity.

What is not modelled runs eagerly at a graph break naming the call: `async_op=True` (a `Work`
handle), `barrier` and every other `torch.distributed` function, tensors that require grad (the
functional ops have no autograd formula), groups this rank is not a member of, and reduce ops
other than sum, product, min, max, avg. `get_rank()`, `get_world_size()` and `is_initialized()`
are answered while tracing and guarded; `is_available()` (how torch was built) is a constant.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ..errors import Unsupported
from .base import Variable
from .constants import ConstantVariable, constant
from .functions import HandledFunctionVariable, handler_registry
from .tensor import TensorVariable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

Handler = Callable[["Frame", dict[str, Any]], Variable]
_HANDLERS: dict[Any, Handler] = {}
_handler = handler_registry(_HANDLERS)

_REDUCE_OPS = ("sum", "product", "min", "max", "avg")


class CollectiveFunctionVariable(HandledFunctionVariable):
    """A `torch.distributed` function with a handler here; its arguments are bound by name to the
    function's own signature, defaults filled in."""

    def describe(self) -> str:
        return f"{self.fn.__module__}.{self.fn.__qualname__}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        try:
            bound = inspect.signature(self.fn).bind(*args, **kwargs)
        except TypeError as e:
            raise Unsupported(f"{self.describe()}() with these arguments: {e}") from None
        bound.apply_defaults()
        return _HANDLERS[self.fn](frame, dict(bound.arguments))

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.fn, "fn")


def lookup(value: Any) -> Variable | None:
    """The tracker of a modelled `torch.distributed` function, None for any other value."""
    if isinstance(value, types.FunctionType) and value in _HANDLERS:  # all are Python functions
        return CollectiveFunctionVariable(value)
    return None


def is_process_group(value: Any) -> bool:
    """A c10d process group: a constant of the trace, guarded by identity."""
    return _AVAILABLE and isinstance(value, dist.ProcessGroup)


class ReduceOpClassVariable(ConstantVariable):
    """`torch.distributed.ReduceOp`: its members (`ReduceOp.MAX`) are constants of the trace."""

    def getattr(self, frame: Frame, name: str) -> Variable:
        attr = getattr(self.value, name, None)
        if isinstance(attr, self.value.RedOpType):
            return constant(attr)
        return super().getattr(frame, name)


def is_reduce_op_class(value: Any) -> bool:
    return _AVAILABLE and value is dist.ReduceOp


def default_group_name() -> str | None:
    """The default process group's name (None before `init_process_group`): guarded, so a
    group created again after `destroy_process_group` is checked."""
    if not dist.is_initialized():
        return None
    return dist.distributed_c10d._get_default_group().group_name


# -- arguments ------------------------------------------------------------------------------------


def _value(arg: Any) -> Any:
    """A default (a Python value) or a constant tracker's value; anything else is refused."""
    if not isinstance(arg, Variable):
        return arg
    if arg.is_constant():
        return arg.as_constant()
    raise Unsupported(f"a collective's argument {arg.describe()} is not a constant of the trace")


def _group(frame: Frame, arg: Any, what: str) -> tuple[str, int]:
    """(name, size) of the group argument, guarded; this rank must belong to it."""
    group = _value(arg)
    if group is None:
        if not dist.is_initialized():
            raise Unsupported(f"{what} before torch.distributed.init_process_group")
        group = dist.distributed_c10d._get_default_group()
    elif isinstance(group, str):
        try:
            group = dist.distributed_c10d._resolve_process_group(group)
        except (KeyError, ValueError, RuntimeError) as e:
            raise Unsupported(f"{what} with group {group!r}: {e}") from None
    if not is_process_group(group):
        raise Unsupported(f"{what} with group={type(group).__qualname__} (a ProcessGroup or None is modelled)")
    _guard_default(frame, group)
    if dist.get_rank(group) < 0:
        raise Unsupported(f"{what} on a process group this rank is not a member of")
    return group.group_name, group.size()


def _guard_default(frame: Frame, group: Any) -> None:
    """The default group, however the trace reached it (None, `dist.group.WORLD`, which torch's
    namespace trust leaves unguarded), is guarded by name and size; another group object is
    guarded by identity through its source."""
    if group is not dist.distributed_c10d._get_default_group():
        return
    guards = frame.output.guards
    guards.state_query(default_group_name, "stenograph default_group_name", group.group_name)
    guards.state_query(dist.get_world_size, "torch.distributed.get_world_size", group.size())


def _reduce_op(arg: Any, what: str) -> str:
    """The functional ops' name of a `dist.ReduceOp` (or of the string the functional API takes)."""
    op = _value(arg)
    name = op.lower() if isinstance(op, str) else getattr(op, "name", str(op)).lower()
    if name not in _REDUCE_OPS:
        raise Unsupported(f"{what} with reduce op {op!r} (modelled: {', '.join(_REDUCE_OPS)})")
    return name


def _tensor(arg: Any, what: str) -> TensorVariable:
    if not isinstance(arg, TensorVariable):
        raise Unsupported(f"{what} of a {arg.describe() if isinstance(arg, Variable) else type(arg).__name__}")
    if arg.fake.requires_grad and torch.is_grad_enabled():
        raise Unsupported(f"{what} of a tensor that requires grad (functional collectives have no autograd formula)")
    return arg


def _operands(frame: Frame, bound: dict[str, Any], what: str, *tensors: str) -> tuple[list[TensorVariable], str, int]:
    """The named tensor arguments, and the group's name and size; an in-place call must be
    synchronous."""
    if _value(bound.get("async_op", False)):
        raise Unsupported(f"{what}(async_op=True): the Work handle it returns is not modelled")
    name, size = _group(frame, bound["group"], what)
    return [_tensor(bound[key], what) for key in tensors], name, size


def _first_dim(bound: dict[str, Any], key: str, what: str) -> None:
    """The functional gather and scatter along dim 0 (other dims reshuffle chunks around it)."""
    if _value(bound[key]) != 0:
        raise Unsupported(f"{what} with {key} other than 0")


def _record(frame: Frame, op: Any, args: list[Variable], what: str) -> TensorVariable:
    """`wait_tensor(op(*args))`: the collective and its wait, one after the other."""
    issued = frame.output.call("call_function", op, args, {}, what)
    return frame.output.call("call_function", _ops.wait_tensor.default, [issued], {}, "wait_tensor()")


def _copy_into(frame: Frame, target: TensorVariable, result: Variable) -> Variable:
    target.call_method(frame, "copy_", [result], {})
    return constant(None)


def _gathered_size(target: TensorVariable, source: TensorVariable, size: int, what: str) -> None:
    """Eager raises on mismatched output sizes; a trace must not record a copy that broadcasts."""
    if target.fake.shape[0] != source.fake.shape[0] * size or target.fake.shape[1:] != source.fake.shape[1:]:
        raise Unsupported(f"{what}: output of shape {tuple(target.fake.shape)} does not fit the collective's result")


def _newer(module: Any, name: str) -> list[Any]:
    """`module.name` where this torch has it (the `*_single` spellings are newer than 2.11)."""
    return [getattr(module, name)] if hasattr(module, name) else []


@_handler(torch.distributed.is_available)
def _is_available(frame: Frame, bound: dict[str, Any]) -> Variable:
    return constant(torch.distributed.is_available())  # how torch was built: fixed for the process


# -- in-place c10d calls --------------------------------------------------------------------------

if _AVAILABLE := torch.distributed.is_available():
    import torch.distributed as dist
    import torch.distributed._functional_collectives as functional

    _ops = torch.ops._c10d_functional

    @_handler(dist.all_reduce)
    def _all_reduce(frame: Frame, bound: dict[str, Any]) -> Variable:
        what = "torch.distributed.all_reduce"
        (tensor,), name, _ = _operands(frame, bound, what, "tensor")
        op = constant(_reduce_op(bound["op"], what))
        return _copy_into(frame, tensor, _record(frame, _ops.all_reduce.default, [tensor, op, constant(name)], what))

    @_handler(dist.all_gather_into_tensor, *_newer(dist, "all_gather_single"))
    def _all_gather_into_tensor(frame: Frame, bound: dict[str, Any]) -> Variable:
        what = "torch.distributed.all_gather_into_tensor"
        (out, inp), name, size = _operands(frame, bound, what, "output_tensor", "input_tensor")
        _gathered_size(out, inp, size, what)
        args = [inp, constant(size), constant(name)]
        return _copy_into(frame, out, _record(frame, _ops.all_gather_into_tensor.default, args, what))

    @_handler(dist.reduce_scatter_tensor, *_newer(dist, "reduce_scatter_single"))
    def _reduce_scatter_tensor(frame: Frame, bound: dict[str, Any]) -> Variable:
        what = "torch.distributed.reduce_scatter_tensor"
        (out, inp), name, size = _operands(frame, bound, what, "output", "input")
        _gathered_size(inp, out, size, what)
        args = [inp, constant(_reduce_op(bound["op"], what)), constant(size), constant(name)]
        return _copy_into(frame, out, _record(frame, _ops.reduce_scatter_tensor.default, args, what))

    @_handler(dist.broadcast)
    def _broadcast(frame: Frame, bound: dict[str, Any]) -> Variable:
        what = "torch.distributed.broadcast"
        (tensor,), name, _ = _operands(frame, bound, what, "tensor")
        src, group_src = _value(bound["src"]), _value(bound["group_src"])
        if group_src is None:
            if src is None:
                raise Unsupported(f"{what} without src or group_src")
            group = _value(bound["group"])
            group_src = src if group is None else dist.get_group_rank(group, src)
        args = [tensor, constant(group_src), constant(name)]
        return _copy_into(frame, tensor, _record(frame, _ops.broadcast.default, args, what))

    # -- the functional API -------------------------------------------------------------------------

    @_handler(functional.all_reduce)
    def _functional_all_reduce(frame: Frame, bound: dict[str, Any]) -> Variable:
        what = "torch.distributed._functional_collectives.all_reduce"
        (tensor,), name, _ = _operands(frame, bound, what, "self")
        op = constant(_reduce_op(bound["reduceOp"], what))
        return _record(frame, _ops.all_reduce.default, [tensor, op, constant(name)], what)

    @_handler(functional.all_gather_tensor, *_newer(functional, "all_gather_single"))
    def _functional_all_gather(frame: Frame, bound: dict[str, Any]) -> Variable:
        what = "torch.distributed._functional_collectives.all_gather_tensor"
        _first_dim(bound, "gather_dim", what)
        (tensor,), name, size = _operands(frame, bound, what, "self")
        return _record(frame, _ops.all_gather_into_tensor.default, [tensor, constant(size), constant(name)], what)

    @_handler(functional.reduce_scatter_tensor, *_newer(functional, "reduce_scatter_single"))
    def _functional_reduce_scatter(frame: Frame, bound: dict[str, Any]) -> Variable:
        what = "torch.distributed._functional_collectives.reduce_scatter_tensor"
        _first_dim(bound, "scatter_dim", what)
        (tensor,), name, size = _operands(frame, bound, what, "self")
        if tensor.fake.shape[0] % size:
            raise Unsupported(f"{what}: dim 0 of size {tensor.fake.shape[0]} is not divisible by {size}")
        args = [tensor, constant(_reduce_op(bound["reduceOp"], what)), constant(size), constant(name)]
        return _record(frame, _ops.reduce_scatter_tensor.default, args, what)

    @_handler(functional.broadcast)
    def _functional_broadcast(frame: Frame, bound: dict[str, Any]) -> Variable:
        what = "torch.distributed._functional_collectives.broadcast"
        (tensor,), name, _ = _operands(frame, bound, what, "self")
        return _record(frame, _ops.broadcast.default, [tensor, constant(_value(bound["src"])), constant(name)], what)

    @_handler(functional.wait_tensor)
    def _functional_wait(frame: Frame, bound: dict[str, Any]) -> Variable:
        return _tensor(bound["tensor"], "torch.distributed._functional_collectives.wait_tensor")

    # -- the process's place in the group -----------------------------------------------------------

    def _answered(reader: Callable[..., Any], name: str) -> Handler:
        def answer(frame: Frame, bound: dict[str, Any]) -> Variable:
            group = _value(bound.get("group"))
            if group is not None:
                if not is_process_group(group):
                    raise Unsupported(f"{name}(group={type(group).__qualname__})")
                _guard_default(frame, group)
                return constant(reader(group))
            if reader is not dist.is_initialized and not dist.is_initialized():
                raise Unsupported(f"{name}() before torch.distributed.init_process_group")
            value = reader()
            frame.output.guards.state_query(reader, name, value)
            return constant(value)

        return answer

    for _reader in (dist.get_rank, dist.get_world_size, dist.is_initialized):
        _handler(_reader)(_answered(_reader, f"torch.distributed.{_reader.__name__}"))
