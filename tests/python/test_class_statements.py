"""`class` statements inside the compiled function: a declarative body is built once while tracing
and its class used like any user class (one graph, as torch.compile with
`enable_trace_load_build_class`); a body reading the function's variables is built with their
values (constants, guarded); a body that could run code is a graph break at the statement."""

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


def _closing_over(x, k, n):
    y = x + 1

    class Adder:
        size = n  # read when the class is built
        pair = (n, "units")

        def apply(self, t):
            return t + k * self.size  # closes over the function's variable

    return Adder().apply(y) * 2, Adder.pair, Adder.__qualname__


def test_a_body_reading_the_frame_is_built_with_its_values(cnt):
    # eager Python builds a new class per call; the trace builds one per (k, n) it compiles for.
    # torch.compile breaks at the statement, and its resume function recompiles for every new class
    check(_closing_over, lambda i: (t(3, seed=i), 2, 3), cnt, torch_graphs=3)


def test_a_body_reading_the_frame_guards_the_values(cnt):
    compiled = stenograph.compile(_closing_over, backend=cnt)
    x = t(3)
    for _ in range(2):
        torch.testing.assert_close(compiled(x, 2, 3)[0], _closing_over(x, 2, 3)[0])
    assert cnt.frame_count == 1  # identical inputs: the class built while tracing serves both
    for k, n in ((5, 3), (2, 7), (5, 7)):
        out, pair, _ = compiled(x, k, n)
        torch.testing.assert_close(out, _closing_over(x, k, n)[0])
        assert pair == (n, "units")
    # a new k recompiles; the next new value makes the int symbolic, which the class body
    # specialises (a compile per value, as torch.compile specialises what a class statement reads)
    assert cnt.frame_count == 4


def _returns_instance(x, k):
    class Box:
        def scaled(self, t):
            return t * k

    box = Box()
    return box.scaled(x), box


def test_an_instance_of_a_closure_class_escapes(cnt):
    compiled = stenograph.compile(_returns_instance, backend=cnt)
    out, box = compiled(t(3), 4)
    torch.testing.assert_close(out, t(3) * 4)
    torch.testing.assert_close(box.scaled(t(3)), t(3) * 4)  # its method works outside, with k
    assert type(box).__qualname__ == "_returns_instance.<locals>.Box"
    assert cnt.frame_count == 1


def _reassigned(x, k):
    class Late:
        def get(self):
            return k

    k = k + 1  # the method reads the cell when it runs: sees 4 here
    return x * Late().get()


def _tensor_closure(x):
    w = x * 2

    class Uses:
        def apply(self, t):
            return t + w

    return Uses().apply(x)


def test_a_method_closing_over_a_tensor_breaks_at_the_statement(cnt):
    compiled = stenograph.compile(_tensor_closure, backend=cnt)
    for i in range(2):
        torch.testing.assert_close(compiled(t(3, seed=i)), _tensor_closure(t(3, seed=i)))
    explained = stenograph.explain(_tensor_closure)(t(3))
    assert any("'w', which is not a constant" in r.reason for r in explained.break_reasons)


def _calls_and_count(fn, make_args, cnt, calls=3):
    """Compiled `fn` against eager on `calls` identical-shape calls; the frames compiled after
    each call (a class statement that breaks must not recompile on every call)."""
    compiled = stenograph.compile(fn, backend=cnt)
    counts = []
    for i in range(calls):
        torch.testing.assert_close(compiled(*make_args(i)), fn(*make_args(i)))
        counts.append(cnt.frame_count)
    return counts


def test_a_method_closing_over_a_variable_assigned_later_breaks_at_the_statement(cnt):
    # as a lambda doing so: the class's cell must be the frame's own (late binding), so the class
    # is built at a break, sharing the frame's cells, and the rest of the frame runs as Python
    assert _calls_and_count(_reassigned, lambda i: (t(3, seed=i), 3), cnt) == [0, 0, 0]  # nothing before it
    explained = stenograph.explain(_reassigned)(t(3), 3)
    assert any("reads 'k', which is assigned again" in r.reason for r in explained.break_reasons)


def _assigns_nonlocal(x, k):
    y = x + 1

    class Writes:
        nonlocal k
        k = 10

    return y * k


def test_a_body_assigning_the_functions_variable_breaks_at_the_statement(cnt):
    # the body shares `k` with the frame: built at the break, the frame's cells shared
    assert _calls_and_count(_assigns_nonlocal, lambda i: (t(3, seed=i), 2), cnt) == [1, 1, 1]
    explained = stenograph.explain(_assigns_nonlocal)(t(3), 2)
    assert any("assigns the enclosing function's 'k'" in r.reason for r in explained.break_reasons)


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
    # the graph before the statement only: the class, new each call, never reaches a guard
    assert cnt.frame_count == 1


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


def _make_outer(factor):
    def fn(x):
        class Sized:
            size = factor  # a cell of the enclosing function's closure, read once

        return x * Sized.size

    return fn


def test_a_body_reading_an_enclosing_closure_is_guarded_on_its_value(cnt):
    first, second = _make_outer(2), _make_outer(3)
    compiled_first = stenograph.compile(first, backend=cnt)
    compiled_second = stenograph.compile(second, backend=cnt)
    for _ in range(2):
        torch.testing.assert_close(compiled_first(t(3)), t(3) * 2)
    assert cnt.frame_count == 1
    torch.testing.assert_close(compiled_second(t(3)), t(3) * 3)  # same code, another value
    assert cnt.frame_count == 2


def _in_a_loop(x):
    classes = []
    for n in range(3):

        class Step:
            size = n

        classes.append(Step)
    return x * sum(c.size for c in classes), classes[0] is not classes[1]


def test_a_class_statement_in_a_loop_builds_a_class_per_iteration(cnt):
    # torch.compile breaks at the statement inside the loop and runs the frame eagerly
    check(_in_a_loop, lambda i: (t(3, seed=i),), cnt, torch_graphs=0)


def _noisy_helper(x):
    x = x * 3

    class Noisy:
        print("building")
        k = 2

    return x + Noisy.k


def _calls_noisy_helper(x):
    y = x + 1
    z = _noisy_helper(y)
    return z.sin() * 2


def test_a_breaking_class_statement_in_a_callee_leaves_the_callers_rest_compiled(cnt, capsys):
    """The callee runs its rest as plain Python; the caller's code after the call is still a
    graph: 3 graphs, and identical calls compile nothing more."""
    compiled = stenograph.compile(_calls_noisy_helper, backend=cnt)
    for i in range(3):
        torch.testing.assert_close(compiled(t(3, seed=i)), _calls_noisy_helper(t(3, seed=i)))
        assert cnt.frame_count == 3
    assert capsys.readouterr().out == "building\n" * 6
