"""Python semantics kept under compilation: errors Python raises, object identity, effects.

Each test runs a function eagerly and compiled (backends eager and aot_eager) on fresh arguments
and compares what a user sees: the result or the exception raised (type, message, args), printed
output and the arguments' state afterwards. Graph counts are exact; each fix also has a guard
test (a changed input compiles again or runs eagerly, an identical call compiles nothing).
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from helpers import assert_same

import stenograph
from stenograph.testing import CompileCounterWithBackend

BACKENDS = ["eager", "aot_eager"]


def _outcome(fn: Callable, args: Sequence[Any]) -> tuple[Any, Any, str]:
    """(result, (exception type, str, args) or None, printed text)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            return fn(*args), None, printed.getvalue()
        except Exception as e:  # the program's own error is part of what is compared
            return None, (type(e), str(e), e.args), printed.getvalue()


def compare(fn: Callable, make_args: Callable[[int], Sequence[Any]], backend: str, calls: int = 2) -> Any:
    """Compiled `fn` against eager on `calls` fresh argument sets; returns the counting backend."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(fn, backend=cnt)
    for i in range(calls):
        args_e, args_c = list(make_args(i)), list(make_args(i))
        expected, error_e, printed_e = _outcome(fn, args_e)
        actual, error_c, printed_c = _outcome(compiled, args_c)
        assert error_c == error_e, f"call {i}: raised {error_c}, eager raised {error_e}"
        assert printed_c == printed_e, f"call {i}: printed {printed_c!r}, eager {printed_e!r}"
        assert_same(actual, expected, f"call {i}: result")
        assert_same(args_c, args_e, f"call {i}: arguments afterwards")
    return cnt


def ones(i: int) -> torch.Tensor:
    return torch.ones(3) * (i + 1)


# -- 1. Python's own errors ----------------------------------------------------------------------


def _zip_strict(x, a, b):
    return [p for p in zip(a, b, strict=True)], x + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_zip_strict_of_equal_lengths_stays_one_graph(backend):
    cnt = compare(_zip_strict, lambda i: (ones(i), [1, 2, 3], [4, 5, 6]), backend, calls=3)
    assert cnt.frame_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_zip_strict_length_mismatch_raises_like_eager(backend):
    """The ValueError (CPython's own message) is raised by the frame run eagerly, loudly."""
    with pytest.warns(stenograph.StenographWarning, match="ValueError"):
        cnt = compare(_zip_strict, lambda i: (ones(i), [1, 2, 3], [1, 2]), backend)
    assert cnt.frame_count == 0


def _zip_strict_caught(x, a, b):
    out = []
    try:
        for p, q in zip(a, b, strict=True):
            out.append(p + q)
    except ValueError as e:
        return x - 1, out, e.args
    return x + 1, out, ()


@pytest.mark.parametrize("backend", BACKENDS)
def test_zip_strict_error_caught_in_the_function(backend):
    """Caught inside the function, the error is traced: the items before it are seen, one graph
    per length combination; an identical call compiles nothing."""
    lengths = [(3, 2), (3, 2), (2, 3), (2, 2)]
    cnt = compare(
        _zip_strict_caught, lambda i: (ones(i), list(range(lengths[i][0])), list(range(lengths[i][1]))), backend, 4
    )
    assert cnt.frame_count == 3


def _unknown_builtin_keyword(x, a):
    return sorted(a, key=None, reversed=True), x


def test_a_builtin_keyword_not_modelled_is_not_ignored():
    """`reversed=` is not a keyword of sorted(): the call breaks the graph and raises eagerly."""
    cnt = compare(_unknown_builtin_keyword, lambda i: (ones(i), [3, 1, 2]), "eager")
    assert cnt.frame_count == 0


def _grow_dict(x, d):
    for k in d:
        d[k + 1] = 1
    return x + 1


def _grow_set(x, s):
    for k in s:
        s.add(k + 1)
    return x + 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, arg", [(_grow_dict, {1: 1}), (_grow_set, {1})], ids=["dict", "set"])
def test_container_changing_size_during_iteration_raises(backend, fn, arg):
    with pytest.warns(stenograph.StenographWarning, match="RuntimeError"):
        cnt = compare(fn, lambda i: (ones(i), type(arg)(arg)), backend)
    assert cnt.frame_count == 0


def _grow_dict_caught(x, d):
    seen = []
    try:
        for k, v in d.items():
            seen.append(v)
            d[k * 10] = v
    except RuntimeError as e:
        return x + len(seen), seen, str(e)
    return x, seen, ""


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_size_change_caught_in_the_function(backend):
    cnt = compare(_grow_dict_caught, lambda i: (ones(i), {1: i, 2: 5}), backend, calls=3)
    assert cnt.frame_count == 1


def _dict_values_live(x, d):
    out = []
    for _, v in d.items():
        d["b"] = v * 100  # same size: allowed, and a later item shows the new value
        out.append(v)
    return x + 1, out


@pytest.mark.parametrize("backend", BACKENDS)
def test_dict_items_read_live_values(backend):
    cnt = compare(_dict_values_live, lambda i: (ones(i), {"a": 1, "b": 2}), backend, calls=3)
    assert cnt.frame_count == 1
    cnt = compare(_dict_values_live, lambda i: (ones(i), {"a": 1, "b": 2, "c": i}), backend, calls=2)
    assert cnt.frame_count == 2  # a new value of "c" is a new guard


def _list_live(x, items):
    it = iter(items)
    first = next(it)
    items.append(9)
    rev = []
    for k in reversed(items):
        rev.append(k)
        if len(items) < 5:
            items.insert(0, 7)
    for k in items:
        if k < 3:
            items.append(k + 3)
    return x + first, list(it), rev, items


@pytest.mark.parametrize("backend", BACKENDS)
def test_lists_changed_during_iteration_behave_like_eager(backend):
    cnt = compare(_list_live, lambda i: (ones(i), [1, 2]), backend, calls=3)
    assert cnt.frame_count == 1
    cnt = compare(_list_live, lambda i: (ones(i), [1, 2 + i]), backend, calls=2)
    assert cnt.frame_count == 2


# -- 2. in-place operations return their receiver -------------------------------------------------


def _inplace_identity(x, y):
    a = x.add_(1)
    b = torch.add(x, 1, out=x)
    c = x.mul_(2).sub_(1)
    x += 1
    z = torch.zeros(3)
    d = z.add_(y)
    v, i = torch.empty(3), torch.empty(3, dtype=torch.long)
    r = torch.max(y.view(1, 3), 0, out=(v, i))
    return a is x, b is x, c is x, d is z, r[0] is v, r[1] is i, x, z, v


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_methods_and_out_return_the_same_object(backend):
    cnt = compare(_inplace_identity, lambda i: (ones(i), ones(i + 1)), backend, calls=3)
    assert cnt.frame_count == 1


def _returns_inplace(x):
    return x.add_(1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_returned_inplace_result_is_the_input(backend):
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_returns_inplace, backend=cnt)
    x = ones(0)
    assert compiled(x) is x
    assert compiled(x) is x
    assert torch.equal(x, ones(0) + 2)
    assert cnt.frame_count == 1
    compiled(torch.ones(2, 2))  # a new shape compiles again
    assert cnt.frame_count == 2


# -- 3. effects kept: closures of methods, generators dropped unfinished ------------------------


def _logger_class():
    log = []
    scale = [2]

    class Logger:
        def go(self, v):
            log.append(v.sum())
            return v * scale[0] + len(log)

    return Logger(), log, scale


@pytest.mark.parametrize("backend", BACKENDS)
def test_method_appending_to_a_list_of_its_class_closure(backend):
    """The list lives in a closure cell of a method found on the object's class (no path from the
    frame to the function): each call appends, and the method reads the new length."""
    obj, log, _ = _logger_class()
    eager_obj, eager_log, _ = _logger_class()
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(lambda x, o: o.go(x), backend=cnt)
    for i in range(3):
        assert_same(compiled(ones(i), obj), eager_obj.go(ones(i)), f"call {i}")
        assert_same(log, eager_log, f"call {i}: log")
    assert len(log) == 3
    assert cnt.frame_count == 3  # the length of the list is guarded: each call sees a new one


def _scaler_class():
    scale = [2]

    class Scaler:
        def go(self, v):
            return v * scale[0]

    return Scaler(), scale


@pytest.mark.parametrize("backend", BACKENDS)
def test_closure_value_of_a_method_is_guarded(backend):
    """A new value in the method's closure compiles again; the same value does not."""
    obj, scale = _scaler_class()
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(lambda x, o: o.go(x), backend=cnt)
    assert torch.equal(compiled(ones(0), obj), ones(0) * 2)
    assert torch.equal(compiled(ones(0), obj), ones(0) * 2)
    assert cnt.frame_count == 1
    scale[0] = 5
    assert torch.equal(compiled(ones(0), obj), ones(0) * 5)
    assert torch.equal(compiled(ones(0), obj), ones(0) * 5)
    assert cnt.frame_count == 2


_events: list = []


def _guarded_gen(n):
    try:
        for i in range(n):  # noqa: UP028 (a plain loop, beside the `yield from` one below)
            yield i
    finally:
        _events.append("finally")


def _guarded_gen_run_for_real(n):
    try:
        yield from range(n)
    finally:
        _events.append("finally")


def _plain_gen(n):
    # a loop, not `yield from`: on 3.12 a generator suspended in `yield from` has a handler that
    # closes the inner iterator, which counts as cleanup (the frame then runs eagerly)
    for i in range(n):  # noqa: UP028 - see above
        yield i


def _break_out_of_generator(x):
    _events.clear()
    for i in _guarded_gen(5):
        if i == 1:
            break
    return x + 1, list(_events)


def _generator_dropped(x):
    _events.clear()
    g = _guarded_gen(3)
    first = next(g)
    del g
    return x + first, list(_events)


def _break_out_of_untraced_generator(x):
    _events.clear()
    for i in _guarded_gen_run_for_real(5):
        if i == 1:
            break
    return x + 1, list(_events)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn, why",
    [
        (_break_out_of_generator, "generator _guarded_gen is left suspended"),
        (_generator_dropped, "generator _guarded_gen is left suspended"),
        # `yield from` is traced too: the same generator left suspended inside its `try`
        (_break_out_of_untraced_generator, "generator _guarded_gen_run_for_real is left suspended"),
    ],
)
def test_generator_dropped_inside_try_runs_its_finally(backend, fn, why):
    """The `finally` runs when the generator is dropped, before the function reads `_events`: the
    frame runs eagerly, with a warning naming the generator."""
    with pytest.warns(stenograph.StenographWarning, match=why):
        cnt = compare(fn, lambda i: (ones(i),), backend, calls=3)
    assert cnt.frame_count == 0


def _generators_finished_or_without_cleanup(x):
    _events.clear()
    total = sum(_guarded_gen(3))  # runs to the end: its finally runs inside the trace
    for i in _plain_gen(5):  # dropped unfinished, but closing it runs nothing
        if i == 2:
            break
    return x + total + i, list(_events)


@pytest.mark.parametrize("backend", BACKENDS)
def test_generators_finished_or_without_cleanup_stay_in_the_graph(backend):
    shapes = [(3,), (3,), (2, 2)]
    cnt = compare(_generators_finished_or_without_cleanup, lambda i: (torch.ones(shapes[i]),), backend, calls=3)
    assert cnt.frame_count == 2  # the second call compiles nothing, the new shape compiles again


# -- 4. the audit: Python semantics of builtins, operators and exceptions -------------------------


class _Meta(type):
    def __instancecheck__(cls, instance):
        return True


class _AnythingGoes(metaclass=_Meta):
    pass


def _instancecheck(x):
    return isinstance(x, _AnythingGoes), isinstance(3, (_AnythingGoes, str)), x + 1


class _Parity:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, _Parity) and self.v % 2 == other.v % 2

    def __hash__(self):
        return self.v % 2


def _user_keys(x, d):
    return d.get(_Parity(3)), _Parity(1) in d, x + 1


def test_user_eq_and_hash_on_dict_keys_run_eagerly():
    """Keys whose class defines __eq__/__hash__ in Python are not modelled: loud eager run."""
    with pytest.warns(stenograph.StenographWarning, match="non-constant keys"):
        cnt = compare(_user_keys, lambda i: (ones(i), {_Parity(1): "odd", _Parity(2): "even"}), "eager")
    assert cnt.frame_count == 0


def _equal_keys(x):
    d = {1: "a", 1.0: "b", True: "c"}  # noqa: F601 (equal keys are the point)
    s = {0, 0.0, False}  # noqa: B033
    return d, s, x + 1


def _sorted_min_max(x, items):
    return (
        sorted(items, key=lambda v: -v, reverse=True),
        sorted(items, reverse=True),
        sorted([(1, "b"), (1, "a"), (0, "c")], key=lambda p: p[0], reverse=True),
        min(items, default=-1),
        max([], default=7),
        max(items, key=lambda v: -v),
        min([3, 1, 1.0, -1], key=abs),
        max(1, 3, 2),
        x,
    )


def _empty_max(x):
    try:
        return max([]), x
    except ValueError as e:
        return e.args, x + 1


def _enumerate_setdefault_pop(x, d, items):
    a = d.setdefault("k", [])
    a.append(1)
    counted = list(enumerate(items, start=5)), list(enumerate(items, -2))
    return counted, d.pop("zz", 9), d.pop("k"), d.setdefault("q"), d, x


def _formatting(x, f):
    return (
        "{} {}".format(x.shape, x.shape[0]),  # noqa: UP032 (str.format is what is tested)
        "%s" % (x.shape,),  # noqa: UP031
        repr(x.size()),
        f"{f!r:>10}|{f:.3f}|{f!s}|{f:+e}|{x.shape!r}|{x.dtype}|{3:05d}|{'ab'!a}|{f=}",
        x + 1,
    )


def _numbers(x, a, b, s):
    return (
        divmod(a, b),
        round(a / 7, 2),
        (round(2.5), round(3.5), round(-0.5), round(1234.5, -2), round(a)),
        (int(s), float(s + ".5"), int("0x1f", 16), int("  12 "), float("-inf")),
        (2**a, (2**63) * a, a * 10**30 // 7, -(2**64) % 1000),
        (a // b, a % b, -a // b, -a % b, a // -b, a % -b, 7.5 // -2, 7.5 % -2, -7.5 % 2),
        (-0.0 + 0.0, 0.0 * -1, str(-0.0), math.copysign(1.0, -0.0 * a), math.copysign(1.0, 0.0 * b)),
        x,
    )


def _errors_caught(x, s, items):
    caught = []
    for attempt in (lambda: int(s), lambda: 1 / 0, lambda: items[10], lambda: "abc".index("z"), lambda: {}["k"]):
        try:
            attempt()
        except (ValueError, ZeroDivisionError, IndexError, KeyError) as e:
            caught.append((type(e).__name__, e.args, str(e)))
    return x + len(caught), caught


class _WithArgs(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)
        self.a = a


def _raise_with_args(v):
    raise _WithArgs("bad", v)


def _inlined_raise_caught(x, v):
    try:
        _raise_with_args(v)
    except _WithArgs as e:
        return x + 1, e.args, e.a, str(e), repr(e)


def _inlined_raise_uncaught(x, v):
    _raise_with_args(v)
    return x


_CASES = {
    # name: (function, arguments of call i, graphs over 2 calls)
    "instancecheck": (_instancecheck, lambda i: (ones(i),), 1),  # isinstance() breaks the graph
    "equal_keys": (_equal_keys, lambda i: (ones(i),), 1),
    "sorted_min_max": (_sorted_min_max, lambda i: (ones(i), [3, 1, 2, 5]), 0),
    "empty_max": (_empty_max, lambda i: (ones(i),), 1),
    "enumerate_setdefault_pop": (_enumerate_setdefault_pop, lambda i: (ones(i), {"a": 1}, ["p", "q"]), 0),
    "formatting": (_formatting, lambda i: (ones(i), 1.5), 1),
    "numbers": (_numbers, lambda i: (ones(i), 17, -5, "10"), 0),
    "errors_caught": (_errors_caught, lambda i: (ones(i), "abc", [1]), 1),
    "inlined_raise_caught": (_inlined_raise_caught, lambda i: (ones(i), 4), 1),
    "inlined_raise_uncaught": (_inlined_raise_uncaught, lambda i: (ones(i), 4), 0),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(_CASES))
def test_python_semantics_match_eager(backend, case):
    fn, make_args, graphs = _CASES[case]
    cnt = compare(fn, make_args, backend)
    assert cnt.frame_count == graphs


@pytest.mark.parametrize("backend", BACKENDS)
def test_errors_caught_recompile_when_the_input_no_longer_raises(backend):
    texts = ["abc", "abc", "12"]
    cnt = compare(_errors_caught, lambda i: (ones(i), texts[i], [1]), backend, calls=3)
    assert cnt.frame_count == 2


def _lazy_builtins(x, d, items):
    called = []

    def double(v):
        called.append(v)
        return v * 2

    m = map(double, [1, 2, 3])
    first = next(m)
    seen_after_first = list(called)
    values = []
    for i, (_, v) in enumerate(d.items()):
        d["b"] = 50  # enumerate reads the dict as the loop goes
        values.append((i, v))
    sums = []
    for a, b in zip(items, [10, 20, 30, 40]):
        if len(items) < 4:
            items.append(a)
        sums.append(a + b)
    kept = list(filter(lambda v: v > 1, items)), list(filter(None, [0, 1, 2]))
    return x + first, seen_after_first, list(m), values, sums, kept


@pytest.mark.parametrize("backend", BACKENDS)
def test_map_filter_zip_enumerate_are_lazy(backend):
    cnt = compare(_lazy_builtins, lambda i: (ones(i), {"a": 1, "b": 2}, [1, 2]), backend, calls=2)
    assert cnt.frame_count == 1
    cnt = compare(_lazy_builtins, lambda i: (ones(i), {"a": 1, "b": 2}, [1, 2 + i]), backend, calls=2)
    assert cnt.frame_count == 2  # a new list item compiles again


def _map_across_break(x):
    it = map(lambda v: v * 2, [1, 2])
    first = next(it)
    print("break")
    return x + first, list(it)


def test_map_live_at_a_graph_break_is_rebuilt():
    """The rest of a map() live at a break is a map again: its function runs when the code after
    the break pulls the items, in eager's order (the frame ran eagerly before)."""
    cnt = compare(_map_across_break, lambda i: (ones(i),), "eager")
    assert cnt.frame_count == 1  # before the print; nothing is left after it but the map's items


_WORDS = ["apple", "banana", "cherry", "date", "elder", "fig", "grape", "kiwi", "lemon", "mango"]


def _set_orders(x, s):
    a = set(_WORDS[:6])
    b = {w for w in _WORDS[3:]}
    c, d, e = a | b, a & b, a - b
    a |= {"zz", "yy"}
    a -= {"apple"}
    g = frozenset(_WORDS[:4]) | a
    seen = [w for w in s]  # the caller's set, unchanged so far: its own order
    s.add("new1")
    s.discard(_WORDS[0])
    return x + len(seen), list(a), list(b), list(c), list(d), list(e), list(g), seen


@pytest.mark.parametrize("backend", BACKENDS)
def test_sets_of_strings_iterate_in_eager_order(backend):
    """String hashes are random per process: a set's order depends on its table's history, which
    the trace replays with real set operations. The caller's set keeps its order after the call."""
    cnt = compare(lambda x, s: (_set_orders(x, s), list(s)), lambda i: (ones(i), set(_WORDS[2:7])), backend, 2)
    assert cnt.frame_count == 1


def _iterate_changed_input_set(x, s):
    s.add("new")
    return x + 1, list(s)


def test_iterating_a_changed_input_set_breaks():
    """After a change, an input set's order depends on its table's history, unknown to the trace:
    the iteration runs eagerly (graph break) and the result is eager's."""
    cnt = compare(_iterate_changed_input_set, lambda i: (ones(i), set(_WORDS)), "eager")
    assert cnt.frame_count == 1


class _NoSuperInit(Exception):
    def __init__(self, msg):
        self.msg = msg


def _exception_fields(x):
    out = []
    try:
        raise _NoSuperInit("boom")
    except _NoSuperInit as e:
        out.append((e.args, str(e), e.msg))
    try:
        try:
            raise ValueError("inner")
        except ValueError as e:
            raise TypeError("outer") from e
    except TypeError as e:
        out.append((str(e.__cause__), e.__suppress_context__, str(e.__context__)))
    try:
        try:
            {}["k"]
        except KeyError:
            raise RuntimeError("while handling") from None
    except RuntimeError as e:
        out.append((e.__cause__, e.__suppress_context__, repr(e.__context__)))
    try:
        try:
            raise ValueError("first")
        except ValueError:
            raise IndexError("second")  # noqa: B904 (implicit chaining is the point)
    except IndexError as e:
        out.append((str(e.__context__), e.__cause__, e.__suppress_context__))
    try:
        raise StopIteration(5)
    except StopIteration as e:
        out.append((e.value, e.args))
    return x + len(out), out


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_args_cause_and_context(backend):
    cnt = compare(_exception_fields, lambda i: (ones(i),), backend)
    assert cnt.frame_count == 1


class _Accumulator:
    def add(self, v, store=[]):  # noqa: B006 (the shared mutable default is the point)
        store.append(v)
        return len(store)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mutable_default_of_a_method_changes_every_call(backend):
    """The default list lives on the function found through the class (no path from the frame):
    each call appends to the real list and reads its new length."""
    default = _Accumulator.add.__defaults__[0]
    default.clear()
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(lambda x, a: x + a.add(1), backend=cnt)
    results = [compiled(ones(0), _Accumulator()) for _ in range(3)]
    assert [r[0].item() for r in results] == [2.0, 3.0, 4.0]
    assert default == [1, 1, 1]
    assert cnt.frame_count == 3  # its length is guarded: each call sees a new one


def _list_errors(x, items):
    caught = []

    def assign():
        items[10] = 0

    def delete():
        del items[-10]

    for attempt in (
        lambda: [].pop(),
        lambda: items.pop(10),
        lambda: items.remove(42),
        lambda: items.index(42),
        lambda: (1, 2).index(3),
        assign,
        delete,
    ):
        try:
            attempt()
        except (IndexError, ValueError) as e:
            caught.append((type(e).__name__, str(e)))
    items[::2] = [7, 8]
    try:
        items[::2] = [1]
    except ValueError as e:
        caught.append(str(e))
    return x + len(caught), caught, items


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_method_errors_are_the_programs(backend):
    """CPython's own error (type and message) reaches the program's except, in the graph."""
    cnt = compare(_list_errors, lambda i: (ones(i), [3, 1, 2]), backend)
    assert cnt.frame_count == 1


def _python_type_errors(x):
    caught = []
    for attempt in (lambda: len(5), lambda: abs("a"), lambda: range(1.5), lambda: {[1]: 2}, lambda: {[1]}):
        try:
            attempt()
        except TypeError as e:
            caught.append(str(e))
    return x + len(caught), caught


@pytest.mark.parametrize("backend", BACKENDS)
def test_type_errors_on_constants_and_unhashable_keys(backend):
    """An unhashable key raises CPython's TypeError in the traced program, which its `except`
    catches: one graph, nothing run eagerly."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", stenograph.StenographWarning)
        cnt = compare(_python_type_errors, lambda i: (ones(i),), backend)
    assert cnt.frame_count == 1 and cnt.op_count == 1


@stenograph.disable
def _raises_eagerly(n):
    raise ValueError("bad value", n)


def _str_of_raised(x, n):
    try:
        _raises_eagerly(n)  # a graph break: the real ValueError reaches the resumed code
    except ValueError as e:
        return x + 1, str(e), repr(e), e.args


@pytest.mark.parametrize("backend", BACKENDS)
def test_str_and_repr_of_a_real_exception(backend):
    """The text of an exception raised by the eager part is read with its type and args guarded:
    the same args reuse the graph, new ones compile again."""
    values = [1, 1, 2]
    cnt = compare(_str_of_raised, lambda i: (ones(i), values[i]), backend, calls=3)
    assert cnt.frame_count == 2
