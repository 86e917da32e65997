"""`substitute_in_graph`: a Python function traced in place of one stenograph cannot trace (a C
function), while eager calls keep running the original; folding through constant arguments;
the signature check and refused registrations."""

from __future__ import annotations

import operator

import pytest
import torch

import stenograph
from stenograph import marks
from stenograph.errors import Unsupported

from ._support import check, t


@pytest.fixture(autouse=True)
def restore_substitutes():
    """Substitutes survive reset() by design (a user setting): drop the tests' own afterwards."""
    before = dict(marks._substitutes)
    yield
    marks._substitutes.clear()
    marks._substitutes.update(before)


def _register_index_of():
    @stenograph.substitute_in_graph(operator.indexOf)
    def index_of(a, b, /):
        if not stenograph.is_compiling():
            raise AssertionError("the substitute ran eagerly")  # eager calls run the C function
        for i, item in enumerate(a):
            if item is b or item == b:
                return i
        raise ValueError("sequence.index(x): x not in sequence")

    return index_of


def _scaled_by_position(x, items, wanted):
    return x * operator.indexOf(items, wanted)


def test_a_c_function_unknown_to_the_tracer_breaks_without_a_substitute(cnt):
    with pytest.raises(Unsupported, match="indexOf is implemented in C"):
        stenograph.compile(_scaled_by_position, backend=cnt, fullgraph=True)(t(3), [1, 2, 3], 3)


def test_the_substitute_is_traced_in_place_of_the_c_function(cnt):
    _register_index_of()
    check(_scaled_by_position, lambda i: (t(3, seed=i, grad=True), [4, 5, 6], 6), cnt, calls=2, grads=True, peer=False)
    assert cnt.op_count == 1  # the loop ran while tracing: only the multiplication is left


def test_what_the_decorator_returns_calls_the_original_eagerly_and_is_traced_too(cnt):
    index_of = _register_index_of()
    assert index_of([7, 8, 9], 9) == 2  # the C function ran (the substitute would have raised)
    assert index_of.__name__ == "index_of"

    def f(x, items):
        return x + index_of(items, 8)

    check(f, lambda i: (t(2, seed=i), [7, 8, 9]), cnt, calls=2, peer=False)


def test_list_contents_are_guarded_so_other_lists_recompile(cnt):
    _register_index_of()
    compiled = stenograph.compile(_scaled_by_position, backend=cnt)
    x = t(3)
    assert torch.equal(compiled(x, [1, 2, 3], 3), x * 2)
    assert torch.equal(compiled(x, [3, 2, 1], 3), x * 0)
    assert cnt.frame_count == 2


def test_an_exception_the_substitute_raises_is_caught_as_in_eager(cnt):
    _register_index_of()

    def f(x, items):
        try:
            return x * operator.indexOf(items, 99)
        except ValueError as e:
            return x - len(str(e))

    check(f, lambda i: (t(3, seed=i), [1, 2]), cnt, calls=2, peer=False)


def _slow_norm(values):
    """A Python function the tracer could trace, standing in for a C function: `calls` shows
    whether it ran while tracing."""
    _slow_norm.calls += 1
    return sum(v * v for v in values) ** 0.5


_slow_norm.calls = 0


def test_constant_arguments_fold_through_the_original_when_allowed(cnt):
    @stenograph.substitute_in_graph(_slow_norm, can_constant_fold_through=True)
    def norm(values):
        return sum(v * v for v in values) ** 0.5

    def f(x, a, b):
        return x / _slow_norm((a, b))

    _slow_norm.calls = 0
    compiled = stenograph.compile(f, backend=cnt)
    x = t(3)
    torch.testing.assert_close(compiled(x, 3, 4), x / 5.0)
    assert _slow_norm.calls == 1  # called once, while tracing, and its result folded
    compiled(x, 3, 4)
    assert _slow_norm.calls == 1 and cnt.frame_count == 1
    torch.testing.assert_close(compiled(x, 6, 8), x / 10.0)  # other constants: recompiled, not reused
    assert cnt.frame_count == 2


def test_without_folding_the_substitute_is_traced_even_on_constants(cnt):
    traced = []

    @stenograph.substitute_in_graph(_slow_norm)
    def norm(values):
        traced.append(len(values))
        return sum(v * v for v in values) ** 0.5

    _slow_norm.calls = 0
    x = t(3)
    torch.testing.assert_close(stenograph.compile(lambda x: x / _slow_norm((3, 4)), backend=cnt)(x), x / 5.0)
    assert _slow_norm.calls == 0 and traced == [2]


def test_the_signature_must_match_unless_the_check_is_skipped():
    with pytest.raises(TypeError, match=r"index_of\(seq, item\) does not take the parameters of indexOf\(a, b, /\)"):

        @stenograph.substitute_in_graph(operator.indexOf)
        def index_of(seq, item):
            return 0

    with pytest.raises(TypeError, match="does not take the parameters"):

        @stenograph.substitute_in_graph(operator.indexOf)
        def index_of_with_default(a, b=0, /):
            return 0

    @stenograph.substitute_in_graph(operator.indexOf, skip_signature_check=True)
    def index_of_any(a, b):
        return 0

    assert index_of_any([1], 1) == 0


def test_star_args_on_either_side_match_any_signature():
    @stenograph.substitute_in_graph(operator.countOf)
    def count_of(*args, **kwargs):
        return 0

    assert count_of([1, 1], 1) == 2  # eagerly the original


def test_refused_registrations():
    with pytest.raises(TypeError, match="expects a function, got int"):
        stenograph.substitute_in_graph(3)
    with pytest.raises(TypeError, match="decorates a Python function, got builtin_function_or_method"):
        stenograph.substitute_in_graph(operator.indexOf)(operator.countOf)
    _register_index_of()
    with pytest.raises(ValueError, match="already has a substitute: .*index_of"):
        _register_index_of()


def _breaking_sum():
    """A function the tracer cannot trace (compiled code breaks at its call), new for each test:
    torch keeps a registration for the process, and refuses a second one."""

    def breaking_sum(values):
        stenograph.graph_break()
        return sum(values)

    return breaking_sum


def _torchs_substitute_of_a_breaking_sum():
    """What torch's `substitute_in_graph` returns for a new breaking sum (one registration each)."""

    @torch._dynamo.substitute_in_graph(_breaking_sum())
    def summed(values):
        total = 0
        for v in values:
            total = total + v
        return total

    return summed


def test_a_function_from_torchs_substitute_in_graph_traces_torchs_substitute(cnt):
    """torch's decorator returns a function calling the original; stenograph traces the
    substitute torch registered for it, so no break is left (`fullgraph=True` compiles)."""

    summed = _torchs_substitute_of_a_breaking_sum()

    def f(x, a, b):
        return x * summed((a, b))

    x = t(3)
    compiled = stenograph.compile(f, backend=cnt, fullgraph=True)
    torch.testing.assert_close(compiled(x, 2, 5), f(x, 2, 5))
    assert cnt.frame_count == 1 and cnt.op_count == 1  # the sum folded while tracing
    compiled(x, 2, 5)
    assert cnt.frame_count == 1
    torch.testing.assert_close(compiled(x, 1, 1), x * 2)  # constants are guarded: recompiled
    assert cnt.frame_count == 2
    cnt.clear()
    check(lambda x: x + summed([x, x]), lambda i: (t(3, seed=i, grad=True),), cnt, grads=True)


def test_torchs_substitute_may_be_folded_through_constant_arguments(cnt):
    calls = []

    def slow_norm(values):
        calls.append(values)
        return sum(v * v for v in values) ** 0.5

    @torch._dynamo.substitute_in_graph(slow_norm, can_constant_fold_through=True)
    def norm(values):
        raise AssertionError("folded: not traced")

    x = t(3)
    torch.testing.assert_close(stenograph.compile(lambda x: x / norm((3, 4)), backend=cnt, fullgraph=True)(x), x / 5.0)
    assert calls == [(3, 4)]  # the original, called once while tracing


def test_a_c_function_compiled_directly_never_fails_under_fullgraph(cnt):
    """torch.compile has no frame of a C function to trace: it runs it. stenograph compiles a
    call of it, and one it cannot trace runs eagerly (no graph), `fullgraph=True` or not; one
    it can is a graph."""
    index_of = stenograph.compile(operator.indexOf, backend=cnt, fullgraph=True)
    assert index_of([1, 2, 3, 4, 5], 3) == 2
    with pytest.raises(ValueError, match="not in sequence"):
        index_of([1, 2], 7)
    assert cnt.frame_count == 0
    x = t(4)
    torch.testing.assert_close(stenograph.compile(torch.sin, backend=cnt, fullgraph=True)(x), torch.sin(x))
    assert cnt.frame_count == 1


def test_torchs_substitute_compiled_directly_traces_the_substitute(cnt):
    summed = _torchs_substitute_of_a_breaking_sum()

    x = t(3)
    compiled = stenograph.compile(summed, backend=cnt, fullgraph=True)
    torch.testing.assert_close(compiled([x, x]), x + x)
    assert cnt.frame_count == 1 and cnt.op_count == 2  # one graph: the substitute's two additions
