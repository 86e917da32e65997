"""Graph breaks inside comprehensions and generator expressions.

On Python 3.11 a comprehension is a function of its own, called with an iterator named `.0`: a
break inside it compiles that function as a frame, whose iterator argument must stay an iterator
and whose partly built list must keep what earlier iterations appended. On 3.12 comprehensions
are inlined into the enclosing function (PEP 709); the same tests cover that layout.
"""

from __future__ import annotations

import torch

import stenograph

from ._support import assert_matches_eager


def list_over_range(x):
    return [print("item", i) or x + i for i in range(3)]


def list_over_tensors(x, items):
    return [x * t for t in tuple(items) if print("keep", t.shape) is None]


def dict_and_set(x):
    table = {i: (print(i) or x * i) for i in range(3)}
    sizes = {print("size") or len(table) for _ in range(2)}
    return table, sizes


def generator_sum(x):
    return sum(print("term", i) or x * i for i in range(4))


def nested_with_closure(x):
    scale = 2
    return [[print(i, j) or x * scale + i + j for j in range(2)] for i in range(2)]


def consume(iterator):
    print("consuming")
    return [t + 1 for t in iterator]


def passes_an_iterator(x):
    return consume(iter([x, x * 2]))


def test_list_comprehension_over_a_range(capsys) -> None:
    compiled = stenograph.compile(list_over_range, backend="eager")
    assert_matches_eager(list_over_range, compiled, lambda i: (torch.full((2,), float(i)),), capsys)


def test_list_comprehension_over_tensors(capsys) -> None:
    compiled = stenograph.compile(list_over_tensors, backend="eager")

    def args(i):
        return torch.ones(2) * i, [torch.ones(2), torch.arange(2.0)]

    assert_matches_eager(list_over_tensors, compiled, args, capsys)


def test_dict_and_set_comprehensions(capsys) -> None:
    compiled = stenograph.compile(dict_and_set, backend="eager")
    assert_matches_eager(dict_and_set, compiled, lambda i: (torch.ones(3) + i,), capsys)


def test_generator_expression(capsys, recwarn) -> None:
    """A generator expression whose body breaks: the call consuming it (`sum`) is the break,
    run eagerly over the generator rebuilt before it started (its body runs there, as a real
    generator's), with eager's output and no warning."""
    compiled = stenograph.compile(generator_sum, backend="eager")
    assert_matches_eager(generator_sum, compiled, lambda i: (torch.ones(2) * i,), capsys)
    assert not [w for w in recwarn if "stenograph" in str(w.message)]


def test_nested_comprehensions_with_a_closure(capsys, recwarn) -> None:
    """The inner comprehension shares `i`, which the outer one assigns again. The break sits in
    the comprehensions' loops, so the frame that holds them (the comprehension's on 3.11, the
    function's where comprehensions are inlined) is skipped, as torch.compile skips it: no
    resume function has to rebuild the cell, no warning, eager's output."""
    compiled = stenograph.compile(nested_with_closure, backend="eager")
    assert_matches_eager(nested_with_closure, compiled, lambda i: (torch.ones(2) - i,), capsys)
    assert not [w for w in recwarn if "stenograph" in str(w.message)]


def test_iterator_argument_of_a_breaking_call(capsys) -> None:
    compiled = stenograph.compile(passes_an_iterator, backend="eager")
    assert_matches_eager(passes_an_iterator, compiled, lambda i: (torch.ones(2) * i,), capsys)


def test_comprehension_frames_compile_without_warnings(recwarn) -> None:
    """The comprehension's own frame compiles (its `.0` parameter is renamed in generated code)
    rather than falling back to eager with a warning."""
    stenograph.compile(list_over_range, backend="eager")(torch.ones(2))
    messages = [str(w.message) for w in recwarn if "stenograph" in str(w.message)]
    assert messages == []
