"""Control flow: branches, loops with break/continue/else, while loops, try/except/finally with
exceptions raised and caught inside the traced region, assert, and `with` blocks."""

from __future__ import annotations

import contextlib

import pytest
import torch

import stenograph

from ._support import check, t


def _branches(x, mode, n):
    if mode == "a":
        x = x + 1
    elif mode == "b":
        x = x - 1
    else:
        x = x * 0
    if x.shape[0] > 2 and n:
        x = x * 2
    y = x if n > 3 else -x
    return y, "small" if n < 2 else "big"


def test_if_elif_else_and_conditional_expressions(cnt):
    check(_branches, lambda i: (t(3, seed=i), "b", 5), cnt)


def _loops(x):
    out = x
    for i in range(10):
        if i % 2:
            continue
        if i > 6:
            break
        out = out + i
    else:
        out = out * 100
    for j in range(2):
        for k in range(3):
            if k == 2:
                break
            out = out + j * k
    else:
        out = out - 1
    return out


def test_for_loops_with_break_continue_and_else(cnt):
    check(_loops, lambda i: (t(3, seed=i),), cnt)


def _while(x, steps):
    i = 0
    while i < steps:
        x = x * 2
        i += 1
    while True:
        i -= 1
        if i == 0:
            break
    n = 5
    while n:
        n -= 1
        if n == 2:
            continue
        x = x + n
    return x, i


def test_while_loops_with_constant_conditions(cnt):
    check(_while, lambda i: (t(3, seed=i), 3), cnt)


class _Bad(ValueError):
    pass


def _raises(v):
    if v > 1:
        raise _Bad(f"too big: {v}")
    return v


def _try_except(x):
    out = x
    try:
        out = out + 1
        raise ValueError("boom")
    except ValueError as e:
        out = out * len(e.args[0])
    try:
        _raises(5)
    except (KeyError, _Bad):
        out = out - 1
    try:
        {"a": 1}["b"]
    except KeyError:
        out = out + 10
    try:
        out = out + 1
    except Exception:
        out = out * 0
    else:
        out = out + 2
    finally:
        out = out * 3
    try:
        try:
            raise _Bad("inner")
        finally:
            out = out + 100
    except ValueError as e:
        msg = str(e)
    return out, msg


def test_try_except_else_finally_raised_and_caught_inside(cnt):
    check(_try_except, lambda i: (t(3, seed=i),), cnt)


def _assert(x, n):
    assert n > 0, "n must be positive"
    assert isinstance(x, torch.Tensor)
    return x * n


def test_assert_that_holds(cnt):
    check(_assert, lambda i: (t(3, seed=i), 2), cnt)


def _grad_modes(x):
    with torch.no_grad():
        a = x * 2
    with torch.enable_grad():
        b = x * 3
    with torch.set_grad_enabled(False):
        c = x * 4
    with torch.inference_mode():
        d = x + 1
    return a + b + c, d.requires_grad, b


def test_with_no_grad_enable_grad_set_grad_enabled_inference_mode(cnt):
    check(_grad_modes, lambda i: (t(3, seed=i, grad=True),), cnt, grads=True)


def _switches_in_a_row(param, y):
    prev = torch.is_grad_enabled()
    try:
        torch.set_grad_enabled(False)
        torch.set_grad_enabled(True)
        torch.set_grad_enabled(False)
        param.add_(y)
    finally:
        torch.set_grad_enabled(prev)
    return param * 1


def test_grad_mode_switches_with_nothing_between_are_one_node(cnt):
    # torch.compile's own test: False, True, False in a row switch once; with the switch back
    # and the update, three operations in one graph, as in torch.compile's
    check(_switches_in_a_row, lambda i: (torch.nn.Parameter(t(4, seed=i)), t(4, seed=i + 1)), cnt)
    graph = cnt.graphs[0].graph
    switches = [n.args for n in graph.nodes if n.target is torch._C._set_grad_enabled]
    assert switches == [(False,), (True,)]
    with torch.no_grad():  # from no-grad, the three switches in a row cancel out
        param, eager_param = (torch.nn.Parameter(t(4)) for _ in range(2))
        out = stenograph.compile(_switches_in_a_row, backend="eager")(param, t(4, seed=1))
        torch.testing.assert_close(out, _switches_in_a_row(eager_param, t(4, seed=1)))
        assert not torch.is_grad_enabled() and not out.requires_grad


def _indexing_without_grad(x, index):
    with torch.no_grad():
        y = torch.ones(3)[index] + x
    return y


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_an_error_inside_a_no_grad_block_of_the_graph_leaves_grad_mode_on(backend):
    """An index out of range raises where the graph runs, past its switch to no-grad: the
    block's exit turns grad mode back on in eager, and the compiled call sets the mode the
    traced code leaves (`torch_flags`) when its graph raises."""
    compiled = stenograph.compile(_indexing_without_grad, backend=backend)
    x = t(1, grad=True)
    assert not compiled(x, torch.tensor([1])).requires_grad
    for run in (_indexing_without_grad, compiled):
        with pytest.raises(IndexError):
            run(x, torch.tensor([7]))
        assert torch.is_grad_enabled()


def _autocast(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
    return y, y.dtype, (x @ w).dtype


def test_with_autocast(cnt):
    check(_autocast, lambda i: (t(4, 4, seed=i), t(4, 4, seed=i + 1)), cnt)


class _Scope:
    def __init__(self, log):
        self.log = log
        self.depth = 0

    def __enter__(self):
        self.depth += 1
        self.log.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        self.depth -= 1
        self.log.append("exit" if kind is None else "exit:" + kind.__name__)
        return kind is KeyError


def _user_context(x, log):
    scope = _Scope(log)
    with scope as s:
        x = x * (s.depth + 1)
    with scope:
        {}["missing"]
    return x, scope.depth


def test_user_context_managers_including_a_suppressed_exception(cnt):
    check(_user_context, lambda i: (t(3, seed=i), []), cnt)


@contextlib.contextmanager
def _tagged(log, tag):
    log.append("open " + tag)
    yield tag.upper()
    log.append("close " + tag)


def _contextmanager_decorator(x, log):
    with _tagged(log, "a") as name:
        x = x * len(name)
    return x


def test_contextlib_contextmanager(cnt):
    check(_contextmanager_decorator, lambda i: (t(3, seed=i), []), cnt)


class _Failure(Exception):
    pass


def _raises_with_args(x):
    raise _Failure("bad", 3)


def _returns_caught(x):
    try:
        raise ValueError("a", 2)
    except ValueError as e:
        return x + 1, e


def test_rebuilt_exceptions_keep_their_args():
    compiled = stenograph.compile(_raises_with_args, backend="eager")
    with pytest.raises(_Failure) as info:
        compiled(torch.ones(1))
    assert info.value.args == ("bad", 3) and str(info.value) == "('bad', 3)"
    _, caught = stenograph.compile(_returns_caught, backend="eager")(torch.ones(1))
    assert type(caught) is ValueError and caught.args == ("a", 2)
