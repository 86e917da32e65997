"""`torch.func.functional_call(module, tensors, args, kwargs)`: the module run with some of its
parameters and buffers replaced by the tensors given (meta-learning, ensembles, `torch.func`).

torch swaps the tensors into the module, calls it and swaps them back. The trace does the same
without touching the module: while the call is traced, reading any parameter or buffer that was
replaced (through an attribute, `parameters()`, `_parameters`, a tied alias) gives the tensor that
replaces it (`OutputGraph.tensor_overrides`, keyed by the real tensor's id). A name that does not
name a parameter or buffer, `strict=True` whose keys do not match, or tied weights with
`tie_weights=False` or with two different tensors run the call eagerly at a graph break.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch
from torch.nn.utils import parametrize

from ..errors import Unsupported
from ..guards.sources import ModuleMemberSource
from .base import Variable
from .frame_objects import NNModuleVariable
from .higher_order import HigherOrderVariable
from .tensor import TensorVariable

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame

_SIGNATURE = inspect.signature(torch.func.functional_call)


class FunctionalCallVariable(HigherOrderVariable):
    """`torch.func.functional_call`."""

    function = staticmethod(torch.func.functional_call)

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        try:
            bound = _SIGNATURE.bind(*args, **kwargs)
        except TypeError as e:
            raise Unsupported(f"torch.func.functional_call() called with {e}") from None
        given = bound.arguments
        module = given["module"]
        if not isinstance(module, NNModuleVariable) or module.source is None:
            raise Unsupported(f"torch.func.functional_call() of {module.describe()} (a module read from the frame)")
        options = {}
        for name in ("tie_weights", "strict"):
            option = given.get(name)
            if option is None:
                options[name] = _SIGNATURE.parameters[name].default
            elif option.is_constant() and isinstance(option.as_constant(), bool):
                options[name] = option.as_constant()
            else:
                raise Unsupported(f"torch.func.functional_call({name}=...) not a constant bool")
        if any(parametrize.is_parametrized(m) for m in module.value_object.modules()):  # itself included
            raise Unsupported("torch.func.functional_call() of a module with parametrizations")
        replacements = _replacements(frame, given["parameter_and_buffer_dicts"])
        call_args = _call_arguments(frame, given.get("args"))
        call_kwargs = _keyword_arguments(frame, given.get("kwargs"))
        overrides = _overrides(module, replacements, **options)
        with _overriding(frame, overrides):
            return module.call(frame, call_args, call_kwargs)


def _replacements(frame: Frame, dicts: Variable) -> dict[str, TensorVariable]:
    """The names and tensors of the dict, or of the tuple or list of dicts, given."""
    if issubclass(dicts.python_type(), dict):
        parts = [dicts]
    elif dicts.python_type() in (tuple, list):
        parts = dicts.unpack(frame)
    else:
        raise Unsupported(f"torch.func.functional_call() given {dicts.describe()} as its tensors")
    found: dict[str, TensorVariable] = {}
    for part in parts:
        if not issubclass(part.python_type(), dict):
            raise Unsupported(f"torch.func.functional_call() given {part.describe()} among its dicts")
        for item in part.call_method(frame, "items", [], {}).unpack(frame):
            key, value = item.unpack(frame)
            name = key.as_constant() if key.is_constant() else None
            if not isinstance(name, str) or not isinstance(value, TensorVariable):
                raise Unsupported(f"torch.func.functional_call() given {key.describe()}: {value.describe()}")
            if name in found:
                raise Unsupported(f"torch.func.functional_call() given {name!r} twice")  # torch raises
            found[name] = value
    return found


def _call_arguments(frame: Frame, given: Variable | None) -> list[Variable]:
    """`args`: a tuple of the module's arguments, or one argument (None: no arguments)."""
    if given is None or (given.is_constant() and given.as_constant() is None):
        return []
    if given.python_type() is tuple:
        return given.unpack(frame)
    return [given]


def _keyword_arguments(frame: Frame, given: Variable | None) -> dict[str, Variable]:
    if given is None or (given.is_constant() and given.as_constant() is None):
        return {}
    if not issubclass(given.python_type(), dict):
        raise Unsupported(f"torch.func.functional_call(kwargs={given.describe()})")
    keywords = {}
    for item in given.call_method(frame, "items", [], {}).unpack(frame):
        key, value = item.unpack(frame)
        if not (key.is_constant() and isinstance(key.as_constant(), str)):
            raise Unsupported(f"torch.func.functional_call() keyword {key.describe()}")
        keywords[key.as_constant()] = value
    return keywords


def _overrides(
    module: NNModuleVariable, replacements: dict[str, TensorVariable], *, tie_weights: bool, strict: bool
) -> dict[int, tuple[TensorVariable, Source]]:
    """By the id of each real tensor replaced: its replacement and where the name reaches it."""
    root = module.value_object
    assert module.source is not None
    members = {name: tensor for name, tensor in _members(root)}
    if strict and set(members) != set(replacements):
        raise Unsupported("torch.func.functional_call(strict=True) whose names are not the module's")
    overrides: dict[int, tuple[TensorVariable, Source]] = {}
    for name, replacement in replacements.items():
        real = members.get(name)
        if real is None:
            raise Unsupported(f"torch.func.functional_call() names {name!r}, not a parameter or buffer of the module")
        known = overrides.get(id(real))
        if known is not None and known[0] is not replacement:
            raise Unsupported(f"torch.func.functional_call() gives tied {name!r} two tensors")
        overrides[id(real)] = (replacement, _member_source(module.source, root, name))
    aliased = len({id(tensor) for tensor in members.values()}) < len(members)
    if aliased and not tie_weights:
        raise Unsupported("torch.func.functional_call(tie_weights=False) of a module with tied weights")
    return overrides


def _member_source(source: Source, root: torch.nn.Module, name: str) -> Source:
    """Where module reads find the parameter or buffer `name` ("block.0.weight"), as they read it."""
    *path, last = name.split(".")
    owner = root
    for part in path:
        source = ModuleMemberSource(source, "_modules", part)
        owner = owner._modules[part]
    table = "_parameters" if last in owner._parameters else "_buffers"
    return ModuleMemberSource(source, table, last)


def _members(root: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """Every parameter and buffer by each name that reaches it (tied ones under every name)."""
    yield from root.named_parameters(remove_duplicate=False)
    yield from root.named_buffers(remove_duplicate=False)


@contextlib.contextmanager
def _overriding(frame: Frame, overrides: dict[int, tuple[TensorVariable, Source]]) -> Iterator[None]:
    output = frame.output
    outer = output.tensor_overrides
    output.tensor_overrides = {**outer, **overrides}
    try:
        yield
    finally:
        output.tensor_overrides = outer
