"""`collections.deque`, `defaultdict` and `Counter`: the list and dict trackers with the behaviour
their C (or `__missing__`) implementation adds.

A deque is a list tracker with a `maxlen` and operations at both ends; a defaultdict and a Counter
are dict trackers whose missing keys are answered by the default factory (inserted) or by 0 (not
inserted). Made in the frame or read from it (guarded like lists and dicts: type, length or keys,
`maxlen`, `default_factory`), their changes are replayed on the real objects after the graph like
those of any list or dict the frame changes.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported
from .base import Variable
from .constants import IteratorVariable, constant
from .containers import DictVariable, ListVariable, SequenceVariable, TupleVariable, dict_key, key_error, sort_items
from .exceptions import raise_new

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame


class DequeVariable(ListVariable):
    """A `collections.deque`: list operations, `maxlen` trimming and the left-end methods."""

    python_class = collections.deque

    def __init__(self, items: list[Variable], source: Source | None = None, maxlen: int | None = None) -> None:
        super().__init__(items, source)
        self.maxlen = maxlen
        self._trim(right=True)

    def describe(self) -> str:
        return f"deque of {len(self.items)}"

    def as_constant(self) -> Any:
        return collections.deque((item.as_constant() for item in self.items), self.maxlen)

    def clone(self, items: list[Variable]) -> SequenceVariable:
        return DequeVariable(items, maxlen=self.maxlen)

    def _trim(self, *, right: bool) -> None:
        """Drop items from the far end once `maxlen` is exceeded (`right`: items were added there)."""
        if self.maxlen is not None and len(self.items) > self.maxlen:
            if right:
                del self.items[: len(self.items) - self.maxlen]
            else:
                del self.items[self.maxlen :]

    def getitem(self, frame: Frame, key: Variable) -> Variable:
        if key.is_constant() and isinstance(key.as_constant(), slice):
            raise raise_new(frame, TypeError, "sequence index must be integer, not 'slice'")
        return super().getitem(frame, key)

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name == "maxlen":
            return constant(self.maxlen)
        return super().getattr(frame, name)

    def reconstruct(self, codegen: Any) -> str:
        deque = codegen.writer.bind(collections.deque, "deque")
        return codegen.build_once(
            self, lambda: f"{deque}([{', '.join(codegen.expr(i) for i in self.items)}], {self.maxlen!r})"
        )

    def replay_mutation(self, target: str, expr: Callable[[Variable], str], pin: Callable[[str], str]) -> str | None:
        items = pin(f"[{', '.join(expr(i) for i in self.items)}]")
        return f"{target}.clear(); {target}.extend({items})"

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if kwargs:
            raise Unsupported(f"deque.{name}() with keyword arguments")
        if name in ("append", "extend", "insert"):
            if name == "insert" and self.maxlen is not None and len(self.items) >= self.maxlen:
                raise raise_new(frame, IndexError, "deque already at its maximum size")
            result = super().call_method(frame, name, args, kwargs)
            self._trim(right=True)
            return result
        if name == "appendleft" and len(args) == 1:
            self._mutable(frame, "deque.appendleft")
            self.items.insert(0, args[0])
            self._trim(right=False)
            return constant(None)
        if name == "extendleft" and len(args) == 1:
            if isinstance(args[0], IteratorVariable):  # each item put in front as it comes, as CPython
                self._mutable(frame, "deque.extendleft")
                while (item := args[0].next(frame)) is not None:
                    self.items.insert(0, item)
                    self._trim(right=False)
                return constant(None)
            new = args[0].unpack(frame)
            self._mutable(frame, "deque.extendleft")
            self.items[:0] = reversed(new)
            self._trim(right=False)
            return constant(None)
        if name == "popleft" and not args:
            if not self.items:
                raise raise_new(frame, IndexError, "pop from an empty deque")
            self._mutable(frame, "deque.popleft")
            return self.items.pop(0)
        if name == "pop" and not args and not self.items:
            raise raise_new(frame, IndexError, "pop from an empty deque")
        if name == "rotate" and len(args) <= 1:
            steps = args[0].as_constant() if args else 1
            if self.items:
                self._mutable(frame, "deque.rotate")
                steps %= len(self.items)
                self.items[:] = self.items[len(self.items) - steps :] + self.items[: len(self.items) - steps]
            return constant(None)
        if name == "copy" and not args:
            return self.clone(list(self.items))
        if name in ("pop", "clear", "remove", "reverse", "index", "count", "__len__", "__getitem__"):
            return super().call_method(frame, name, args, kwargs)
        raise Unsupported(f"method {name!r} of {self.describe()}")


class DefaultDictVariable(DictVariable):
    """A `collections.defaultdict`: a missing key read by `d[k]` gets `default_factory()`."""

    def __init__(self, items: dict[Any, Variable], factory: Variable, source: Source | None = None) -> None:
        super().__init__(items, source, python_class=collections.defaultdict)
        self.factory = factory

    def missing(self, frame: Frame, key: Variable) -> Variable:
        if self.factory.is_constant() and self.factory.as_constant() is None:
            raise key_error(frame, dict_key(key, frame))
        value = self.factory.call(frame, [], {})
        self.setitem(frame, key, value)
        return value

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name == "default_factory":
            return self.factory
        return super().getattr(frame, name)

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "copy" and not args:
            return DefaultDictVariable(self.items, self.factory)
        return super().call_method(frame, name, args, kwargs)

    def reconstruct(self, codegen: Any) -> str:
        cls = codegen.writer.bind(collections.defaultdict, "defaultdict")
        return codegen.build_once(self, lambda: f"{cls}({codegen.expr(self.factory)}, {self._literal(codegen)})")


class CounterVariable(DictVariable):
    """A `collections.Counter`: missing keys count 0 (and are not inserted), `update` adds."""

    def __init__(self, items: dict[Any, Variable], source: Source | None = None) -> None:
        super().__init__(items, source, python_class=collections.Counter)

    def missing(self, frame: Frame, key: Variable) -> Variable:
        return constant(0)

    def count(self, frame: Frame, source: Variable, sign: int) -> None:
        """`update` (sign 1) or `subtract` (-1) with a mapping of counts or an iterable of keys."""
        if isinstance(source, DictVariable):
            pairs = list(zip(source.key_trackers(), source.items.values()))
        else:
            pairs = [(k, constant(1)) for k in source.unpack(frame)]
        if pairs:
            frame.output.side_effects.container_changed(self)
        for key, amount in pairs:
            current = self.items.get(dict_key(key, frame), constant(0))
            if not (current.is_constant() and amount.is_constant()):
                raise Unsupported("Counter counts that are not constants")
            self.items[dict_key(key, frame)] = constant(current.as_constant() + sign * amount.as_constant())

    def binary_op(self, frame: Frame, op: Any, plain: Any, other: Variable) -> Variable | None:
        raise Unsupported(f"operator {op.__name__} on {self.describe()} (Counter arithmetic is not modelled)")

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name in ("update", "subtract") and len(args) <= 1:
            sign = 1 if name == "update" else -1
            for source in [*args, DictVariable(dict(kwargs))]:
                self.count(frame, source, sign)
            return constant(None)
        if name == "most_common" and len(args) <= 1 and not kwargs:
            n = args[0].as_constant() if args else None
            pairs = [TupleVariable([k, v]) for k, v in zip(self.key_trackers(), self.items.values())]
            by_count = {"key": _SecondItem(), "reverse": constant(True)}
            ordered = sort_items(frame, pairs, by_count)
            return ListVariable(ordered if n is None else ordered[: max(n, 0)])
        if name == "total" and not args and not kwargs:
            if not all(v.is_constant() for v in self.items.values()):
                raise Unsupported("Counter.total() of counts that are not constants")
            return constant(sum(v.as_constant() for v in self.items.values()))
        if name == "elements" and not args and not kwargs:
            counts = [v.as_constant() for v in self.items.values()]
            return IteratorVariable([key for key, n in zip(self.key_trackers(), counts) for _ in range(max(n, 0))])
        if name == "copy" and not args:
            return CounterVariable(self.items)
        return super().call_method(frame, name, args, kwargs)


class _SecondItem(Variable):
    """`key=operator.itemgetter(1)` for `most_common`'s sort, as a tracker."""

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return args[0].getitem(frame, constant(1))


def new_deque(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`collections.deque(iterable=(), maxlen=None)`."""
    if len(args) > 2 or set(kwargs) - {"iterable", "maxlen"}:
        raise Unsupported("deque() with arguments other than iterable and maxlen")
    iterable = args[0] if args else kwargs.get("iterable")
    maxlen = args[1] if len(args) > 1 else kwargs.get("maxlen", constant(None))
    limit = maxlen.as_constant()
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise raise_new(frame, ValueError, "maxlen must be non-negative")
    return DequeVariable(iterable.unpack(frame) if iterable is not None else [], maxlen=limit)


def new_defaultdict(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`collections.defaultdict(default_factory=None, *args, **kwargs)`."""
    factory = args[0] if args else constant(None)
    result = DefaultDictVariable({}, factory)
    if len(args) > 1 or kwargs:
        result.call_method(frame, "update", args[1:], kwargs)
    return result


def new_counter(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`collections.Counter(iterable_or_mapping=None, **kwargs)`."""
    result = CounterVariable({})
    result.call_method(frame, "update", args, kwargs)
    return result
