"""Which dimensions and ints are dynamic: `dynamic=`, `mark_dynamic`, automatic dynamic, and the
sources and values torch's compiler settings name (`named_sources`).

Automatic dynamic (`config.automatic_dynamic_shapes`): the first compilation of a frame is
static; each compilation records, per input source, the sizes and int/float values it saw. When
a later compilation sees a different size in some dimension (or a different number), exactly that
dimension (or number) becomes symbolic from then on, so further values reuse the graph. Numbers
are tracked wherever they are read from (arguments, globals, closure cells, object attributes),
unless `config.specialize_int` / `config.specialize_float` keep them constants.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import DimDynamic

from .. import config
from ..guards.sources import FixedObjectSource, ItemSource, ModuleMemberSource, Source
from .named_sources import dynamic_source, dynamic_value, unbacked_source

_DYNAMIC_ATTR = "_stenograph_dynamic_dims"
_MAYBE_DYNAMIC_ATTR = "_stenograph_maybe_dynamic_dims"
_STATIC_ATTR = "_stenograph_static_dims"
# The marks torch._dynamo's `mark_dynamic`, `maybe_mark_dynamic`, `mark_unbacked` and `mark_static`
# leave on a tensor: programs written for torch.compile call those, and stenograph honours them
# as its own (a dimension marked unbacked is an unbacked symbol from the first call; one marked
# strict is a backed symbol, as torch makes it, which it is an error to specialise).
_TORCH_DYNAMIC_RANGES = "_dynamo_dynamic_range"  # {_DimRange(dim, min, max)}
_TORCH_DYNAMIC = "_dynamo_dynamic_indices"
_TORCH_MAYBE_DYNAMIC = "_dynamo_weak_dynamic_indices"
_TORCH_UNBACKED = "_dynamo_unbacked_indices"
_TORCH_STRICT_UNBACKED = "_dynamo_strict_unbacked_indices"
_TORCH_STATIC = "_dynamo_static_indices"


def _dims(t: torch.Tensor, dim: int | list[int] | tuple[int, ...]) -> list[int]:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a tensor, got {type(t).__qualname__}")
    dims = [dim] if isinstance(dim, int) else list(dim)
    for d in dims:
        if not isinstance(d, int) or not -t.dim() <= d < t.dim():
            raise IndexError(f"dimension {d!r} out of range for a tensor of {t.dim()} dimensions")
    return [d % t.dim() for d in dims]


def mark_dynamic(t: torch.Tensor, dim: int | list[int], *, min: int | None = None, max: int | None = None) -> None:  # noqa: A002
    """Compile `t`'s dimension(s) `dim` as symbolic from the first call (with optional bounds)."""
    marks = getattr(t, _DYNAMIC_ATTR, None) or {}
    for d in _dims(t, dim):
        marks[d] = (min, max)
    setattr(t, _DYNAMIC_ATTR, marks)


def maybe_mark_dynamic(t: torch.Tensor, dim: int | list[int]) -> None:
    """Like mark_dynamic, but the dimension may still be specialised if the code needs it."""
    marks = set(getattr(t, _MAYBE_DYNAMIC_ATTR, ()) or ())
    marks.update(_dims(t, dim))
    setattr(t, _MAYBE_DYNAMIC_ATTR, marks)


def mark_static(t: Any, dim: int | list[int] | None = None) -> Any:
    """Never make `t`'s dimension(s) `dim` (all when None) symbolic. On an `nn.Module` class (as a
    class decorator), torch's promise that its instances' int attributes stay constants: it is
    returned as it is, since stenograph keeps every module's int attributes constant (guarded
    per instance)."""
    if isinstance(t, type) and issubclass(t, torch.nn.Module):
        return t
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"mark_static expects a tensor or an nn.Module class, got {type(t).__qualname__}")
    dims = list(range(t.dim())) if dim is None else _dims(t, dim)
    marks = set(getattr(t, _STATIC_ATTR, ()) or ())
    marks.update(dims)
    setattr(t, _STATIC_ATTR, marks)


def marked_bounds(t: torch.Tensor) -> dict[int, tuple[int | None, int | None]]:
    """The dimensions of `t` marked dynamic (by stenograph's or torch's `mark_dynamic`, or
    torch's strict `mark_unbacked`), with their (min, max): specialising one is an error."""
    marked = _torch_marks(t, _TORCH_DYNAMIC) | _torch_marks(t, _TORCH_STRICT_UNBACKED)
    bounds: dict[int, tuple[int | None, int | None]] = dict.fromkeys(marked, (None, None))
    for dim_range in getattr(t, _TORCH_DYNAMIC_RANGES, None) or ():
        if -t.dim() <= dim_range.dim < t.dim():  # torch keeps a negative dimension as given
            bounds[dim_range.dim % t.dim()] = (dim_range.min, dim_range.max)
    bounds.update(getattr(t, _DYNAMIC_ATTR, None) or {})
    return bounds


def _maybe_dynamic_marks(t: torch.Tensor) -> set[int]:
    """Dimensions of `t` dynamic from the first call that the code may still specialise."""
    return set(getattr(t, _MAYBE_DYNAMIC_ATTR, ()) or ()) | _torch_marks(t, _TORCH_MAYBE_DYNAMIC)


def _static_marks(t: torch.Tensor) -> set[int]:
    return set(getattr(t, _STATIC_ATTR, ()) or ()) | _torch_marks(t, _TORCH_STATIC)


def _torch_marks(t: torch.Tensor, attribute: str) -> set[int]:
    """The dimensions one of torch's marks names, normalised as stenograph's own marks are
    (torch keeps a negative index as given)."""
    return {d % t.dim() for d in getattr(t, attribute, None) or () if isinstance(d, int) and -t.dim() <= d < t.dim()}


def may_be_dynamic(source: Source, is_tensor: bool) -> bool:
    """Parameters and buffers stay static. Numbers may go dynamic wherever they are read from:
    arguments, globals, closure cells, attributes of objects, class attributes (`Registry.count
    += 1` changes one on every call); an int attribute of an nn.Module only under
    `config.allow_unspec_int_on_nn_module`, by automatic dynamic (`DynamicPolicy.int_is_dynamic`),
    and a constant otherwise, as torch.compile's default. A tensor the compiled code holds itself
    (`FixedObjectSource`: an `assume_constant_result` value) is always that one object: static
    too."""
    if is_tensor:
        if isinstance(source, FixedObjectSource):
            return False
        return not (isinstance(source, ModuleMemberSource) and source.table in ("_parameters", "_buffers"))
    return True


class DynamicPolicy:
    """Decides, per input, what is symbolic; one per frame cache (so per code object)."""

    def __init__(
        self,
        dynamic: bool | None,
        from_data: set[str] | None = None,
        declared: dict[str, dict[int, tuple[int | None, int | None]]] | None = None,
    ) -> None:
        self.dynamic = dynamic  # compile(dynamic=...): None automatic, True all, False never
        # dimensions declared dynamic by source name, with bounds, as `mark_dynamic` declares them
        # on the tensor (export's `dynamic_shapes=`, which must not mark the caller's tensors)
        self.declared = declared or {}
        # numbers read from tensor data (a resume function's `.item()` result), and the items of
        # such lists: dynamic from the start, since their value changes from call to call
        self.from_data = from_data if from_data is not None else set()
        self.sizes: dict[str, list[int | None]] = {}  # source name -> sizes (None: dynamic)
        self.strides: dict[str, list[int | None]] = {}  # source name -> strides (None: dynamic)
        self.ints: dict[str, int | float | None] = {}  # source name -> value (None: dynamic)
        # float arguments the backend asked to see as constants (see backends/float_restart.py)
        self.specialised: set[str] = set()
        # while set, sizes and ints that would be unbacked are backed symbols: the compile
        # of a call that breaks what an unbacked trace took for granted (shapes/guards.py)
        self.backed_only = False

    def tensor_dims(self, source: Source, t: torch.Tensor) -> list[DimDynamic]:
        """How each dimension of input `t` (reached by `source`) enters this trace: static, a
        symbol, or an unbacked symbol. Those torch's compiler settings name (`named_sources`) are
        symbolic whatever `dynamic=` says, unless `mark_static` marks them."""
        name = source.name()
        static = _static_marks(t)
        bounded = set(self.bounds(name, t))
        marked = bounded | _maybe_dynamic_marks(t)
        shape = list(t.shape)
        # sizes made dynamic as if they had changed: torch's automatic dynamic, which
        # `automatic_dynamic_shapes_mark_as` makes unbacked
        changed = [dynamic_source(source, d) or dynamic_value(size) for d, size in enumerate(shape)]
        listed = [unbacked_source(source, d) for d in range(len(shape))]
        if self.dynamic is None:
            seen = self._seen_sizes(name, shape)
            changed = [c or seen[d] is None for d, c in enumerate(changed)]
            marked |= {d for d in range(len(shape)) if not config.assume_static_by_default}
        elif self.dynamic is True:
            marked |= set(range(len(shape)))
        else:
            marked = set()
        unbacked = {d for d in range(len(shape)) if listed[d]}
        if self.dynamic is not False:
            unbacked |= _torch_marks(t, _TORCH_UNBACKED)
        if config.automatic_dynamic_shapes_mark_as == "unbacked":
            # a dimension `mark_dynamic` bounds keeps its backed symbol (its range is guarded)
            unbacked |= {d for d in range(len(shape)) if changed[d] and d not in bounded}
        return [
            DimDynamic.STATIC
            if d in static or not (changed[d] or d in marked or d in unbacked)
            else DimDynamic.UNBACKED
            if d in unbacked and not self.backed_only
            else DimDynamic.DYNAMIC
            for d in range(len(shape))
        ]

    def _seen_sizes(self, name: str, shape: list[int]) -> list[int | None]:
        """The sizes compiles saw for input `name` (None: one that changed, under automatic
        dynamic shapes), this one's taken in; a change of rank starts again."""
        seen = self.sizes.get(name)
        if seen is None or len(seen) != len(shape):
            self.sizes[name] = list(shape)
            return self.sizes[name]
        if config.automatic_dynamic_shapes:
            for d, size in enumerate(shape):
                if seen[d] is not None and seen[d] != size:
                    seen[d] = None
        return seen

    def stride_dims(self, name: str, t: torch.Tensor) -> list[bool]:
        """Which strides of input `t` are symbolic: those that changed between calls (automatic
        dynamic shapes, as torch.compile's: a view of a tensor of another width recompiles once,
        not per width); otherwise strides follow from the sizes."""
        if self.dynamic is not None or not config.automatic_dynamic_shapes or t.layout is not torch.strided:
            return [False] * t.dim()
        stride = list(t.stride())
        seen = self.strides.get(name)
        if seen is None or len(seen) != len(stride):
            self.strides[name] = stride
            return [False] * t.dim()
        for d, value in enumerate(stride):
            if seen[d] is not None and seen[d] != value:
                seen[d] = None
        return [s is None for s in seen]

    def bounds(self, name: str, t: torch.Tensor) -> dict[int, tuple[int | None, int | None]]:
        """The dimensions of input `t` (reached by source `name`) declared dynamic, and their
        (min, max): marked on the tensor, or declared for its source."""
        return {**marked_bounds(t), **self.declared.get(name, {})}

    def int_is_dynamic(self, name: str, value: int | float, *, automatic_only: bool = False) -> bool:
        """Whether an int or float argument is symbolic in this trace (NaN and infinities never
        are: a shape environment reasons about finite numbers only). `automatic_only`: an int
        attribute of an nn.Module (`self.step`) under `config.allow_unspec_int_on_nn_module`,
        symbolic once it has changed between calls, as torch.compile's, whatever `dynamic=`."""
        if self.dynamic is False or name in self.specialised:
            return False
        if config.specialize_int if type(value) is int else config.specialize_float:
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.dynamic is True and not automatic_only:
            return True
        if self.from_data and self._read_from_data(name):
            return True
        if name not in self.ints:
            # a number where an earlier call passed a tensor has changed already: dynamic at
            # once under automatic dynamic shapes, as torch.compile takes a changed kind
            changed_kind = config.automatic_dynamic_shapes and name in self.sizes
            self.ints[name] = None if changed_kind else value
        elif config.automatic_dynamic_shapes and self.ints[name] is not None and self.ints[name] != value:
            self.ints[name] = None
        return self.ints[name] is None or not config.assume_static_by_default

    def int_unbacked(self, source: Source, value: int | float) -> bool:
        """Whether a symbolic int input is an unbacked symbol: `unbacked_sources` lists it, or
        automatic dynamic made it symbolic under `automatic_dynamic_shapes_mark_as="unbacked"`.
        Never a negative int (torch takes an unbacked int as a size, at least 0, and guards so),
        nor one the `dynamic_sources`/`dynamic_values` settings name (those are backed, as torch's)."""
        if self.backed_only or type(value) is not int or value < 0 or dynamic_source(source) or dynamic_value(value):
            return False
        name = source.name()
        automatic = name in self.ints and self.ints[name] is None
        return unbacked_source(source) or (automatic and config.automatic_dynamic_shapes_mark_as == "unbacked")

    def observe(self, source: Source, value: Any, depth: int = 3) -> None:
        """Take `value`, reached by `source`, as a compile's input would be taken (its sizes, or
        its value for an int or float), and the items of lists, tuples and dicts in it: what the
        next compile compares with (`set_stance("eager_then_compile")`'s first call)."""
        if isinstance(value, torch.Tensor):
            self.tensor_dims(source, value)
        elif type(value) in (int, float):
            self.int_is_dynamic(source.name(), value)
        elif depth and type(value) in (list, tuple, dict):
            for key, item in value.items() if type(value) is dict else enumerate(value):
                if type(key) in (int, str):
                    self.observe(ItemSource(source, key), item, depth - 1)

    def specialise(self, names: list[str]) -> bool:
        """Make these arguments constants from now on; False when all of them already were."""
        new = set(names) - self.specialised
        self.specialised |= new
        return bool(new)

    def _read_from_data(self, name: str) -> bool:
        root = name.split("[", 2)
        return len(root) > 1 and f"{root[0]}[{root[1]}" in self.from_data

    def describe(self) -> dict[str, Any]:
        dims = {k: [i for i, s in enumerate(v) if s is None] for k, v in self.sizes.items()}
        return {
            "dynamic dims": {k: v for k, v in dims.items() if v},
            "dynamic ints": [k for k, v in self.ints.items() if v is None],
        }
