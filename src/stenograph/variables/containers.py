"""Trackers for tuples, lists, dicts, torch.Size and iterators whose items are trackers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ..errors import Unsupported
from .base import ConstantVariable, Variable, constant

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame


class BoundMethodVariable(Variable):
    """`container.method` before the call: calling it runs the container's `call_method`."""

    def __init__(self, obj: Variable, name: str) -> None:
        self.obj = obj
        self.name = name

    def describe(self) -> str:
        return f"method {self.name} of {self.obj.describe()}"

    def call(self, tx: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return self.obj.call_method(tx, self.name, args, kwargs)

    def reconstruct(self, rebuild: Any) -> str:
        return f"{rebuild.expr(self.obj)}.{self.name}"

def _method_of(var: Variable, name: str) -> Variable:
    if not callable(getattr(var.python_type(), name, None)):
        raise Unsupported(f"{var.describe()} has no attribute {name!r}")
    return BoundMethodVariable(var, name)


class SequenceVariable(Variable):
    """Shared behaviour of tuple-like and list-like trackers."""

    python_class: type = tuple

    def __init__(self, items: list[Variable], source: Source | None = None) -> None:
        self.items = list(items)
        self.source = source

    def python_type(self) -> type:
        return self.python_class

    def describe(self) -> str:
        return f"{self.python_class.__name__} of {len(self.items)}"

    def is_constant(self) -> bool:
        return all(item.is_constant() for item in self.items)

    def as_constant(self) -> Any:
        return self.python_class(item.as_constant() for item in self.items)

    def unpack(self, tx: Frame) -> list[Variable]:
        return list(self.items)

    def length(self, tx: Frame) -> int:
        return len(self.items)

    def truth(self, tx: Frame) -> bool:
        return bool(self.items)

    def getitem(self, tx: Frame, key: Variable) -> Variable:
        index = key.as_constant() if key.is_constant() else None
        if isinstance(index, slice):
            return self.clone(self.items[index])
        if isinstance(index, int):
            try:
                return self.items[index]
            except IndexError:
                raise Unsupported(f"index {index} out of range for {self.describe()}") from None
        raise Unsupported(f"indexing {self.describe()} with {key.describe()}")

    def clone(self, items: list[Variable]) -> SequenceVariable:
        return type(self)(items)

    def getattr(self, tx: Frame, name: str) -> Variable:
        return _method_of(self, name)

    def call_method(self, tx: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "index" and not kwargs and len(args) == 1 and args[0].is_constant():
            wanted = args[0].as_constant()
            for i, item in enumerate(self.items):
                if item.is_constant() and item.as_constant() == wanted:
                    return constant(i)
        if name == "count" and not kwargs and len(args) == 1 and args[0].is_constant():
            wanted = args[0].as_constant()
            return constant(sum(1 for i in self.items if i.is_constant() and i.as_constant() == wanted))
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__len__" and not args:
            return constant(len(self.items))
        raise Unsupported(f"method {name!r} of {self.describe()}")


class TupleVariable(SequenceVariable):
    python_class = tuple


class SizeVariable(TupleVariable):
    """A `torch.Size`: a tuple of (for now static) ints."""

    python_class = torch.Size

    def describe(self) -> str:
        return f"torch.Size of {len(self.items)}"

    def clone(self, items: list[Variable]) -> SequenceVariable:
        return SizeVariable(items)

    def call_method(self, tx: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "numel" and not args and not kwargs and self.is_constant():
            return constant(self.as_constant().numel())
        return super().call_method(tx, name, args, kwargs)


class ListVariable(SequenceVariable):
    """A list created or read while tracing. Mutation is modelled for lists made in the frame."""

    python_class = list

    def clone(self, items: list[Variable]) -> SequenceVariable:
        return ListVariable(items)

    def _mutable(self, tx: Frame, what: str) -> None:
        if self.source is not None:
            raise Unsupported(
                f"{what} on a list that came from outside the compiled frame ({self.source.name()})",
                hint="mutating inputs is not replayed yet",
            )

    def call_method(self, tx: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "append" and len(args) == 1 and not kwargs:
            self._mutable(tx, "list.append")
            self.items.append(args[0])
            return constant(None)
        if name == "extend" and len(args) == 1 and not kwargs:
            self._mutable(tx, "list.extend")
            self.items.extend(args[0].unpack(tx))
            return constant(None)
        if name == "insert" and len(args) == 2 and args[0].is_constant():
            self._mutable(tx, "list.insert")
            self.items.insert(args[0].as_constant(), args[1])
            return constant(None)
        if name == "pop" and len(args) <= 1 and not kwargs:
            self._mutable(tx, "list.pop")
            index = args[0].as_constant() if args else -1
            return self.items.pop(index)
        if name == "copy" and not args:
            return ListVariable(self.items)
        if name == "reverse" and not args:
            self._mutable(tx, "list.reverse")
            self.items.reverse()
            return constant(None)
        return super().call_method(tx, name, args, kwargs)

    def setitem(self, tx: Frame, key: Variable, value: Variable) -> None:
        self._mutable(tx, "list item assignment")
        index = key.as_constant()
        if isinstance(index, slice):
            self.items[index] = value.unpack(tx)
        else:
            self.items[index] = value


class DictVariable(Variable):
    """A dict with constant keys and tracker values."""

    def __init__(self, items: dict[Any, Variable], source: Source | None = None) -> None:
        self.items = dict(items)
        self.source = source

    def python_type(self) -> type:
        return dict

    def describe(self) -> str:
        return f"dict of {len(self.items)}"

    def is_constant(self) -> bool:
        return all(v.is_constant() for v in self.items.values())

    def as_constant(self) -> Any:
        return {k: v.as_constant() for k, v in self.items.items()}

    def truth(self, tx: Frame) -> bool:
        return bool(self.items)

    def getattr(self, tx: Frame, name: str) -> Variable:
        return _method_of(self, name)

    def unpack(self, tx: Frame) -> list[Variable]:
        return [constant(k) if _is_literal(k) else ConstantVariable(k) for k in self.items]

    def length(self, tx: Frame) -> int:
        return len(self.items)

    def getitem(self, tx: Frame, key: Variable) -> Variable:
        k = key.as_constant()
        if k not in self.items:
            raise Unsupported(f"KeyError {k!r} in {self.describe()}")
        return self.items[k]

    def setitem(self, tx: Frame, key: Variable, value: Variable) -> None:
        if self.source is not None:
            tx.output.side_effects.container_mutated(self)
        self.items[key.as_constant()] = value

    def call_method(self, tx: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        keys = [constant(k) if _is_literal(k) else ConstantVariable(k) for k in self.items]
        if name == "items" and not args:
            return ListVariable([TupleVariable([k, v]) for k, v in zip(keys, self.items.values())])
        if name == "keys" and not args:
            return ListVariable(keys)
        if name == "values" and not args:
            return ListVariable(list(self.items.values()))
        if name in ("get", "__getitem__") and args and args[0].is_constant():
            k = args[0].as_constant()
            if k in self.items:
                return self.items[k]
            if name == "get":
                return args[1] if len(args) > 1 else constant(None)
            raise Unsupported(f"KeyError {k!r} in {self.describe()}")
        if name == "__contains__" and len(args) == 1:
            return constant(args[0].as_constant() in self.items)
        if name in ("update", "__setitem__", "pop", "setdefault"):
            if self.source is not None:
                tx.output.side_effects.container_mutated(self)
            if name == "update":
                other = args[0] if args else DictVariable({})
                if not isinstance(other, DictVariable):
                    raise Unsupported(f"dict.update with {other.describe()}")
                self.items.update(other.items)
                for k, v in kwargs.items():
                    self.items[k] = v
                return constant(None)
            if name == "__setitem__":
                self.setitem(tx, args[0], args[1])
                return constant(None)
            if name == "pop":
                k = args[0].as_constant()
                if k in self.items:
                    return self.items.pop(k)
                if len(args) > 1:
                    return args[1]
                raise Unsupported(f"KeyError {k!r} in {self.describe()}")
            k = args[0].as_constant()
            return self.items.setdefault(k, args[1] if len(args) > 1 else constant(None))
        if name == "copy" and not args:
            return DictVariable(self.items)
        raise Unsupported(f"method {name!r} of {self.describe()}")


class IteratorVariable(Variable):
    """An iterator over a known list of items (from GET_ITER on a tracked iterable)."""

    def __init__(self, items: list[Variable]) -> None:
        self.items = items
        self.index = 0

    def describe(self) -> str:
        return "iterator"

    def next(self) -> Variable | None:
        if self.index >= len(self.items):
            return None
        item = self.items[self.index]
        self.index += 1
        return item

    def unpack(self, tx: Frame) -> list[Variable]:
        rest = self.items[self.index :]
        self.index = len(self.items)
        return rest


def _is_literal(value: Any) -> bool:
    return isinstance(value, (bool, int, str)) or value is None


class SliceVariable(Variable):
    """A slice whose bounds are graph values (symbolic sizes), e.g. `x[: n // 2]`."""

    def __init__(self, parts: list[Variable]) -> None:
        self.parts = parts

    def python_type(self) -> type:
        return slice

    def describe(self) -> str:
        return "slice"

    def reconstruct(self, rebuild: Any) -> str:
        return f"slice({', '.join(rebuild.expr(p) for p in self.parts)})"
