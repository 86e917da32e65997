"""A dict read from the frame, its keys guarded only as far as the trace used them.

torch.compile guards what a trace read of a dict: `d[k]`, `d.get(k)` and `k in d` rest on the
presence (or absence) of `k` and the value read, not on the other keys; the whole key list only
once the dict is used whole. Guarding the whole list from the start would recompile a function
reading `d["a"]` each time an unused key came or went.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported
from ..guards.sources import ItemSource, Source
from .base import Variable
from .constants import constant
from .containers import DictVariable, SequenceVariable, dict_key
from .trace_rules import is_dict_key_constant, is_literal

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

# the methods that look one key up, with the number of arguments each takes
_LOOKUPS = {"get": (1, 2), "__getitem__": (1, 1), "__contains__": (1, 1)}


def key_looked_up_alone(key: Any) -> bool:
    """Keys whose lookup is guarded by the key alone: compared by value, or a class or function
    (hashed by identity; a tuple of them). A dict keyed by other objects hashed by identity (an
    nn.Module) has its whole key list guarded, as torch.compile guards their order."""
    if type(key) is tuple:
        return all(key_looked_up_alone(k) for k in key)
    if isinstance(key, (type, types.FunctionType, types.BuiltinFunctionType)):
        return is_dict_key_constant(key)
    return is_literal(key)


class FrameDictVariable(DictVariable):
    """A dict or OrderedDict read from the frame whose keys are all `key_looked_up_alone`. A key
    looked up has its presence or absence guarded, and its value is read through `d[key]`
    (guarded where used, as any value). The first use of the dict whole (its length, truth,
    iteration, views, comparison, copy, a change to replay, deep copy...) reads `items`: the
    keys guarded in order and every value read, the values looked up before kept, so
    `DictVariable` goes on as for any dict. Changes are made to the whole dict only: they are
    replayed whole after the graph."""

    def __init__(self, value: dict, source: Source, frame: Frame) -> None:
        super().__init__({}, source, python_class=type(value))
        self.value = value
        self.frame_of = frame.root_reference()  # `items` reads the values without a frame of its own
        self.looked_up: dict[Any, Variable] = {}  # the values read so far, by key
        self.whole: dict[Any, Variable] | None = None  # every entry, once the dict was used whole

    @property  # type: ignore[override]
    def items(self) -> dict[Any, Variable]:
        if self.whole is None:
            frame = self.frame_of()
            assert frame is not None, "read after its trace ended"
            frame.output.guards.dict_keys_match(self.source, self.value)
            self.whole = {key: self._value_of(frame, key) for key in self.value}
        return self.whole

    @items.setter
    def items(self, items: dict[Any, Variable]) -> None:
        self.whole = items

    def describe(self) -> str:
        assert self.source is not None
        return f"{self.python_class.__name__} {self.source.name()}"  # (its length would read it whole)

    def known_values(self) -> list[Variable]:
        return list((self.looked_up if self.whole is None else self.whole).values())

    def _value_of(self, frame: Frame, key: Any) -> Variable:
        value = self.looked_up.get(key)
        if value is None:
            value = self.looked_up[key] = frame.wrap(self.value[key], ItemSource(self.source, key))
            if _reaches(value, self):
                raise Unsupported(f"a {self.python_class.__name__} that holds itself")
        return value

    def entry(self, frame: Frame, key: Variable) -> Variable | None:
        """The value under `key`, None when there is none; before the dict is used whole, the
        key's presence or absence is guarded (another key uses the dict whole)."""
        k = dict_key(key, frame)
        if self.whole is not None or not key_looked_up_alone(k):
            return self.items.get(k)
        assert self.source is not None
        if k in self.value:
            frame.output.guards.key_present(self.source, k, f"{self.source.name()} holds {k!r}")
            return self._value_of(frame, k)
        frame.output.guards.key_absent(self.source, k, f"{self.source.name()} lacks {k!r}")
        return None

    def contains(self, frame: Frame, item: Variable) -> bool | None:
        return self.entry(frame, item) is not None

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        found = self.entry(frame, key)
        return found if found is not None else self.missing(frame, key)

    def _changed(self, frame: Frame, what: str) -> None:
        self.items  # noqa: B018 (guards the keys: the change is replayed on the whole dict)
        super()._changed(frame, what)

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        low, high = _LOOKUPS.get(name, (-1, -1))
        if not low <= len(args) <= high or kwargs:
            return super().call_method(frame, name, args, kwargs)
        if name == "__contains__":
            return constant(self.contains(frame, args[0]))
        found = self.entry(frame, args[0])
        if found is not None:
            return found
        if name == "get":
            return args[1] if len(args) > 1 else constant(None)
        return self.missing(frame, args[0])


def _reaches(var: Variable, target: Variable) -> bool:
    """Whether `target` is `var` or among the items of the lists, tuples and dicts within it (a
    container holding itself: walks over its tracker would not end)."""
    seen: set[int] = set()
    pending = [var]
    while pending:
        current = pending.pop()
        if current is target:
            return True
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, SequenceVariable):
            pending.extend(current.items)
        elif isinstance(current, DictVariable):
            pending.extend(current.known_values())
    return False
