"""`class` statements inside the compiled function: a declarative body is built once while tracing
and its class used like any user class (one graph, as torch.compile with
`enable_trace_load_build_class`); a body that could run code is a graph break at the statement."""

from __future__ import annotations

import torch

import stenograph

from ._support import check, t


def _scale(x, k):
    class Scale:
        factor = 2
        names = ["a", "b"]

        def __init__(self, k):
            self.k = k

        def __call__(self, t):
            return t * self.k * self.factor

        @property
        def double(self):
            return self.k * 2

        @double.setter
        def double(self, v):
            self.k = v // 2

        @staticmethod
        def offset(a=1):
            return a

        @classmethod
        def make(cls, k):
            return cls(k)

    s = Scale.make(k)
    s.double = 8
    return s(x) + s.offset() + s.double, isinstance(s, Scale), Scale.names


def test_class_statement_with_methods_properties_and_decorators(cnt):
    # torch.compile graph-breaks at the class statement by default, and its resume function
    # recompiles for the new class of every call
    check(_scale, lambda i: (t(3, seed=i), 3), cnt, torch_graphs=2)


def test_class_statement_guards_still_apply_to_the_frame(cnt):
    compiled = stenograph.compile(_scale, backend=cnt)
    x = t(3)
    for _ in range(2):
        out, is_instance, names = compiled(x, 3)
        torch.testing.assert_close(out, _scale(x, 3)[0])
    assert cnt.frame_count == 1
    torch.testing.assert_close(compiled(t(4), 3)[0], _scale(t(4), 3)[0])
    assert cnt.frame_count == 2


def test_class_with_a_base_and_super(cnt):
    class Base:
        def __init__(self, k):
            self.k = k

        def apply(self, x):
            return x + self.k

    def fn(x):
        class Child(Base):
            def __init__(self, k):
                super().__init__(k + 1)

            def apply(self, x):
                return super().apply(x) * 2

        return Child(1).apply(x)

    check(fn, lambda i: (t(3, seed=i),), cnt, torch_graphs=2)


def test_instances_of_a_local_class_escape_as_real_objects(cnt):
    def fn(x):
        class Holder:
            def __init__(self, v):
                self.v = v

        return Holder(x * 2)

    compiled = stenograph.compile(fn, backend=cnt)
    x = t(3)
    out = compiled(x)
    assert type(out).__name__ == "Holder" and type(out).__qualname__ == fn(x).__class__.__qualname__
    torch.testing.assert_close(out.v, x * 2)
    assert cnt.frame_count == 1


def test_a_body_reading_the_frame_is_a_graph_break_at_the_statement(cnt, capsys):
    def fn(x, k):
        y = x + 1

        class Adder:
            def apply(self, t):
                return t + k  # closes over the function's variable

        return Adder().apply(y) * 2

    compiled = stenograph.compile(fn, backend=cnt)
    for i in range(2):
        torch.testing.assert_close(compiled(t(3, seed=i), 2), fn(t(3, seed=i), 2))
    explained = stenograph.explain(fn)(t(3), 2)
    assert any("reads variables of the enclosing function" in r.reason for r in explained.break_reasons)


def test_a_body_that_runs_code_is_a_graph_break(cnt, capsys):
    def fn(x):
        y = x + 1

        class Noisy:
            print("building")
            k = 3

        return y * Noisy.k

    compiled = stenograph.compile(fn, backend=cnt)
    capsys.readouterr()
    for i in range(2):
        expected = fn(t(3, seed=i))
        printed = capsys.readouterr().out
        torch.testing.assert_close(compiled(t(3, seed=i)), expected)
        assert capsys.readouterr().out == printed == "building\n"
    explained = stenograph.explain(fn)(t(3))
    assert any("class body of" in r.reason for r in explained.break_reasons)


class _Registering:
    registered: list = []

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _Registering.registered.append(cls.__name__)


def test_a_base_running_code_when_subclassed_is_a_graph_break(cnt):
    def fn(x):
        y = x + 1

        class Plugin(_Registering):
            k = 2

        return y * Plugin.k

    compiled = stenograph.compile(fn, backend=cnt)
    _Registering.registered.clear()
    for i in range(2):
        torch.testing.assert_close(compiled(t(3, seed=i)), fn(t(3, seed=i)))
    assert _Registering.registered == ["Plugin"] * 4  # once per call, compiled as eager
    explained = stenograph.explain(fn)(t(3))
    assert any("runs code when subclassed" in r.reason for r in explained.break_reasons)
