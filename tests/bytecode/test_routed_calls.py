"""Routed calls: the copy of a code object that passes each callable through a router first.

Each program runs twice, as written and as the routed copy, with a router that records what it
was handed: results, exceptions and tracebacks must be the original's, and every explicit call
must have been routed (methods, keyword and star calls, `super()`, calls inside handlers).
"""

from __future__ import annotations

import traceback
import types

import pytest

from stenograph.bytecode.routed_calls import route_calls


class Recorder:
    def __init__(self, replace: dict | None = None) -> None:
        self.seen: list[str] = []
        self.replace = replace or {}

    def __call__(self, callee):
        self.seen.append(getattr(callee, "__name__", type(callee).__name__))
        return self.replace.get(callee, callee)


def routed(fn, router):
    code = route_calls(fn.__code__, router)
    copy = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy


def plus(a, k=0):
    return a + k


class Base:
    def twice(self, x):
        return x * 2


class Child(Base):
    def add(self, b, *, k=0):
        return b + k

    def twice(self, x):
        return super().twice(x) + 1


def every_call_form(a, *rest, **named):
    total = plus(a)  # a global function
    total += Child().add(a, k=1)  # a method with a keyword argument
    total += plus(*rest, **named)  # star arguments
    total += Child().twice(3)  # a method whose body calls super()
    try:
        [].pop()
    except IndexError as e:
        total += len(str(e))  # calls inside a handler
    for i in range(2):
        total += abs(-i)
    return total


def test_results_and_routed_callables_are_the_originals():
    router = Recorder()
    assert routed(every_call_form, router)(1, 2, k=3) == every_call_form(1, 2, k=3)
    assert router.seen == ["plus", "Child", "add", "plus", "Child", "twice", "pop", "str", "len", "range", "abs", "abs"]


def test_a_method_body_with_super_keeps_its_class_cell():
    router = Recorder()
    twice = routed(Child.twice, router)
    assert twice(Child(), 5) == Child().twice(5) == 11
    assert "twice" in router.seen


def test_what_the_router_returns_is_called():
    def doubled(a, k=0):
        return 2 * (a + k)

    router = Recorder({plus: doubled})
    assert routed(every_call_form, router)(1, 2, k=3) == every_call_form(1, 2, k=3) + 1 + 5


def test_a_closure_and_defaults_are_kept():
    offset = 10

    def inner(x, scale=2, *, extra=1):
        return plus(x * scale + offset, extra)

    router = Recorder()
    assert routed(inner, router)(1) == inner(1) == 13
    assert router.seen == ["plus"]


def test_exceptions_and_their_lines_are_the_originals():
    def fails(x):
        y = plus(x)
        return y / 0

    with pytest.raises(ZeroDivisionError) as original:
        fails(1)
    with pytest.raises(ZeroDivisionError) as copy:
        routed(fails, Recorder())(1)
    line = traceback.extract_tb(original.tb)[-1]
    copied = traceback.extract_tb(copy.tb)[-1]
    assert (copied.lineno, copied.line) == (line.lineno, line.line)


def test_nested_code_is_left_as_it_is():
    def outer(xs):
        return [plus(x) for x in xs] + [sorted(xs, key=lambda v: -v)[0]]

    router = Recorder()
    assert routed(outer, router)([1, 2]) == outer([1, 2])
    # the lambda's and (before 3.12) the comprehension's own calls are not routed
    assert "sorted" in router.seen and "<lambda>" not in router.seen
