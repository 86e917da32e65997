"""`match` statements: class, mapping, sequence, literal and `**rest` patterns, traced into one graph
(MATCH_CLASS, MATCH_MAPPING, MATCH_SEQUENCE, MATCH_KEYS, GET_LEN), guarded on what they read, and
run eagerly at a graph break inside them."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

import stenograph

from ._support import check, t


class Point:
    __match_args__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b


@dataclasses.dataclass
class Box:
    x: torch.Tensor
    scale: int


def _by_class(p):
    match p:
        case Point(a, b=2):
            return a * 2
        case Point(a, b):
            return a + b
        case Box(x, scale=s) if s > 1:
            return x * s
        case Box(x=x):
            return x - 1
        case int(n):
            return n
        case _:
            return p * 1


@pytest.mark.parametrize(
    "make",
    [
        lambda i: (Point(t(3, seed=i), 2),),
        lambda i: (Point(t(3, seed=i), 5),),
        lambda i: (Box(t(3, seed=i), 3),),
        lambda i: (Box(t(3, seed=i), 1),),
        lambda i: (t(3, seed=i),),
    ],
    ids=["point-b2", "point", "box-guard", "box", "tensor"],
)
def test_class_patterns_positional_and_keyword(cnt, make):
    check(_by_class, make, cnt)


def test_class_pattern_guards_recompile_on_a_different_class_or_value(cnt):
    compiled = stenograph.compile(_by_class, backend=cnt)
    x = t(3)
    torch.testing.assert_close(compiled(Point(x, 2)), x * 2)
    torch.testing.assert_close(compiled(Point(x, 2)), x * 2)
    assert cnt.frame_count == 1
    torch.testing.assert_close(compiled(Point(x, 7)), x + 7)
    assert cnt.frame_count == 2
    torch.testing.assert_close(compiled(Box(x, 4)), x * 4)
    assert cnt.frame_count == 3


def test_match_args_changed_on_the_class_recompiles(cnt):
    class Pair:
        __match_args__ = ("u", "v")

        def __init__(self, u, v):
            self.u, self.v = u, v

    def fn(p):
        match p:
            case Pair(first, second):
                return first - second
        return None

    compiled = stenograph.compile(fn, backend=cnt)
    a, b = t(3, seed=1), t(3, seed=2)
    torch.testing.assert_close(compiled(Pair(a, b)), a - b)
    Pair.__match_args__ = ("v", "u")
    torch.testing.assert_close(compiled(Pair(a, b)), b - a)
    assert cnt.frame_count == 2


def _by_mapping(d):
    match d:
        case {"kind": "add", "v": v}:
            return v + 1
        case {"kind": "mul", "v": v, **rest}:
            return v * 2, rest
        case {}:
            return "empty-or-other"
    return None


@pytest.mark.parametrize(
    "make",
    [
        lambda i: ({"kind": "add", "v": t(3, seed=i)},),
        lambda i: ({"kind": "mul", "v": t(3, seed=i), "extra": 1, "w": t(2, seed=i)},),
        lambda i: ({"other": 1},),
        lambda i: ([1, 2],),
    ],
    ids=["add", "mul-rest", "other", "not-a-mapping"],
)
def test_mapping_patterns_with_rest(cnt, make):
    check(_by_mapping, make, cnt, graphs=int("v" in make(0)[0]))


def test_mapping_pattern_recompiles_when_a_key_appears(cnt):
    compiled = stenograph.compile(_by_mapping, backend=cnt)
    x = t(3)
    assert compiled({"kind": "mul"}) == "empty-or-other"
    assert compiled({"kind": "mul"}) == "empty-or-other"
    assert cnt.frame_count == 0  # no tensor work: nothing handed to the backend
    out, rest = compiled({"kind": "mul", "v": x})
    torch.testing.assert_close(out, x * 2)
    assert rest == {}
    assert cnt.frame_count == 1


def _by_sequence(xs):
    match xs:
        case []:
            return "empty"
        case [a]:
            return a + 1
        case [a, b, *rest]:
            return a * b + len(rest), rest
        case (a, *_):
            return a


@pytest.mark.parametrize(
    "make",
    [
        lambda i: ([],),
        lambda i: ([t(3, seed=i)],),
        lambda i: ([t(3, seed=i), t(3, seed=i + 1), 4, 5],),
        lambda i: ((t(3, seed=i), t(3, seed=i + 1)),),
        lambda i: ("ab",),
    ],
    ids=["empty", "one", "star", "tuple", "str-is-not-a-sequence"],
)
def test_sequence_patterns(cnt, make):
    check(_by_sequence, make, cnt, graphs=0 if isinstance(make(0)[0], str) or not make(0)[0] else 1)


def test_sequence_pattern_recompiles_on_a_new_length(cnt):
    compiled = stenograph.compile(_by_sequence, backend=cnt)
    x = t(3)
    torch.testing.assert_close(compiled([x]), x + 1)
    torch.testing.assert_close(compiled([x]), x + 1)
    assert cnt.frame_count == 1
    out, rest = compiled([x, x, 1])
    torch.testing.assert_close(out, x * x + 1)
    assert rest == [1]
    assert cnt.frame_count == 2


def test_match_on_a_string_argument_and_literals(cnt):
    def fn(x, mode, n):
        match mode, n:
            case ("a" | "b", 0):
                return x + 1
            case (str() as s, int(k)) if k > 1:
                return x * k, s
            case _:
                return x

    check(fn, lambda i: (t(3, seed=i), "b", 0), cnt)
    cnt.clear()
    check(fn, lambda i: (t(3, seed=i), "z", 3), cnt)


def test_graph_break_inside_a_case_body(cnt, capsys):
    def fn(p):
        match p:
            case Point(a, b):
                print("point")
                return a * b
        return p

    check(fn, lambda i: (Point(t(3, seed=i), 3),), cnt, capsys, graphs=1)


class _Meta(type):
    def __instancecheck__(cls, obj):
        _checks.append(os.getpid())  # `os` is run, not traced: the check cannot be decided in the trace
        return hasattr(obj, "v")


_checks: list[int] = []


class Duck(metaclass=_Meta):
    __match_args__ = ("v",)


class _HasV:
    def __init__(self, v):
        self.v = v


def test_match_class_the_trace_cannot_decide_is_a_graph_break_there(cnt):
    """A metaclass `__instancecheck__` the trace cannot finish (it calls into `os`): MATCH_CLASS
    runs eagerly at a graph break, the code before and after it is captured."""

    def fn(x, o):
        y = x + 1
        match o:
            case Duck(v):
                return y * v
        return y - 1

    compiled = stenograph.compile(fn, backend=cnt)
    for i in range(2):
        torch.testing.assert_close(compiled(t(3, seed=i), _HasV(3)), fn(t(3, seed=i), _HasV(3)))
    torch.testing.assert_close(compiled(t(3), object()), fn(t(3), object()))
    assert cnt.frame_count == 3  # before the break; after it, on each branch (torch.compile: eager)
    explained = stenograph.explain(fn)(t(3), _HasV(3))
    (reason,) = explained.break_reasons
    assert "getpid" in reason.reason and reason.user_stack[-1][3].strip() == "case Duck(v):"


def test_match_class_errors_are_the_programs(cnt):
    class NoArgs:
        pass

    def fn(x, o):
        try:
            match o:
                case NoArgs(v):
                    return v
        except TypeError as e:
            return x + 1, str(e)
        return x

    compiled = stenograph.compile(fn, backend=cnt)
    x = t(3)
    out, text = compiled(x, NoArgs())
    torch.testing.assert_close(out, x + 1)
    assert text == fn(x, NoArgs())[1] == "NoArgs() accepts 0 positional sub-patterns (1 given)"
    compiled(x, NoArgs())
    assert cnt.frame_count == 1  # torch.compile runs this frame eagerly (0 graphs)
