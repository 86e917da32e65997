"""Graph breaks inside a running `except`/`finally` handler, inside `@contextmanager` and user
`with` blocks, and exceptions leaving the compiled frame: each is a graph break at that point
with the rest of the frame resumed and captured, never the whole frame run eagerly.

Inside a handler, the resume function enters the handled exception again (PUSH_EXC_INFO in its
prologue), so `sys.exc_info()`, a bare `raise` and exception chaining behave as in eager. torch
2.13 runs these frames eagerly (0 graphs), so the counts are stenograph's own."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
import warnings

import pytest
import torch
from helpers import assert_same

import stenograph

from ._support import assert_matches_eager


def _compiled(fn, cnt):
    with warnings.catch_warnings():
        warnings.simplefilter("error", stenograph.StenographWarning)  # no frame may run eagerly
        return stenograph.compile(fn, backend=cnt)


def _run_checked(fn, cnt, capsys, make_args, calls=3):
    compiled = _compiled(fn, cnt)
    with warnings.catch_warnings():
        warnings.simplefilter("error", stenograph.StenographWarning)
        return assert_matches_eager(fn, compiled, make_args, capsys, calls=calls)


def _in_handler(x, log):
    y = x + 1
    try:
        raise KeyError("k")
    except KeyError as e:
        print("caught", repr(e))
        log.append(sys.exc_info()[1] is e)
        y = y * 2
    log.append(sys.exc_info()[1])
    return y - 1, log


def test_break_inside_an_except_body_resumes_inside_the_handler(cnt, capsys):
    _run_checked(_in_handler, cnt, capsys, lambda i: (torch.full((3,), float(i)), []))
    # before the break, and in the handler after it up to the return (compiled once, reused;
    # `sys.exc_info()` is traced, no longer a break of its own)
    assert cnt.frame_count == 2
    explained = stenograph.explain(_in_handler)(torch.ones(3), [])
    assert [r.reason for r in explained.break_reasons][:1] == ["call to print"]


def _nested_handlers(x, log):
    try:
        raise ValueError("outer")
    except ValueError:
        try:
            raise KeyError("inner")
        except KeyError:
            print("inner")
            log.append(repr(sys.exc_info()[1]))
            x = x * 3
        log.append(repr(sys.exc_info()[1]))
        print("outer again")
        x = x + 1
    log.append(sys.exc_info()[1])
    return x, log


def test_breaks_inside_nested_handlers_restore_each_handled_exception(cnt, capsys):
    _run_checked(_nested_handlers, cnt, capsys, lambda i: (torch.full((2,), float(i)), []))


def _reraise_after_break(x):
    try:
        raise ValueError("bad")
    except ValueError:
        print("logging")
        x = x * 2
        raise


def test_bare_raise_after_a_break_in_the_handler(cnt, capsys):
    compiled = _compiled(_reraise_after_break, cnt)
    with pytest.raises(ValueError, match="bad"):
        compiled(torch.ones(2))
    assert capsys.readouterr().out == "logging\n"


def _raise_from_handler(x, log):
    try:
        {}["missing"]
    except KeyError:
        print("translating")
        log.append(x + 1)
        raise RuntimeError("translated")  # noqa: B904 (implicitly chained to the KeyError, as tested)


def _nested_raise(x, log):
    try:
        raise ValueError("a")
    except ValueError:
        try:
            raise KeyError("b")
        except KeyError as k:
            print("inner", repr(k.__context__), repr(sys.exc_info()[1].__context__))
            log.append(x + 1)
            raise RuntimeError("c")  # noqa: B904 (implicitly chained to the KeyError, as tested)


def _raise_from_caught(x, log):
    try:
        {}["m"]
    except KeyError as k:
        print("handling")
        log.append(x * 2)
        raise RuntimeError("c") from k


def _raise_from_none(x, log):
    try:
        raise ValueError("v")
    except ValueError:
        print("handling")
        log.append(x * 2)
        raise RuntimeError("c") from None


def _returns_caught(x, log):
    try:
        {}["m"]
    except KeyError as k:
        log.append(x - 1)
        return k


def _chain(e):
    """Each exception of the chain printing walks: type, args, cause, context, suppression."""
    links = []
    while e is not None and len(links) < 8:
        links.append((type(e), e.args, type(e.__cause__), type(e.__context__), e.__suppress_context__))
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return links


def _printed_chain(e):
    """The chain as `traceback` prints it, without the tracebacks: each exception's line and the
    sentences joining them."""
    text = "".join(traceback.format_exception(e))
    return [line for line in text.splitlines() if line and not line.startswith((" ", "Traceback"))]


def _user_frames(e):
    """The exception's own traceback as printed, without the frames of stenograph's package
    (between the caller and the user's function sit its wrapper and trampoline) and without the
    markers under part of a line (generated code shows the user's line whole)."""
    package = os.path.dirname(stenograph.__file__)
    frames = [f for f in traceback.extract_tb(e.__traceback__) if package not in f.filename]
    lines = "".join(traceback.format_list(frames)).splitlines()
    return [line for line in lines if line.strip(" ^~")]


@pytest.mark.parametrize("while_handling", [False, True], ids=["plain-call", "called-in-except"])
@pytest.mark.parametrize(
    "fn", [_raise_from_handler, _nested_raise, _raise_from_caught, _raise_from_none, _returns_caught]
)
def test_exceptions_raised_in_resumed_handlers_chain_as_eagerly(cnt, capsys, fn, while_handling):
    """An exception raised (or returned) in a handler the resume function continues: its
    `__context__`, `__cause__` and `__suppress_context__` down the chain, the printed chain and
    the user's frames in the traceback of the one raised out of the function equal eager's, also
    when the function is called while its caller handles another exception (which then ends the
    chain, as eagerly). Exceptions raised and caught inside graphs are rebuilt objects, whose
    tracebacks hold no frames (the printed chain shows them without their traceback lines)."""
    compiled = _compiled(fn, cnt)

    def run(f):
        log = []
        try:
            if while_handling:
                try:
                    raise OSError("the caller's")
                except OSError:
                    result = f(torch.ones(2), log)
            else:
                result = f(torch.ones(2), log)
        except RuntimeError as e:
            result = e
        return result, log, capsys.readouterr().out

    for _ in range(2):
        expected, eager_log, eager_out = run(fn)
        actual, compiled_log, compiled_out = run(compiled)
        assert compiled_out == eager_out
        assert_same(compiled_log, eager_log)
        assert _chain(actual) == _chain(expected)
        assert _printed_chain(actual) == _printed_chain(expected)
        if isinstance(expected, RuntimeError):  # raised out of the function (the returned one is rebuilt)
            assert _user_frames(actual) == _user_frames(expected)
    assert sys.exc_info() == (None, None, None)
    assert cnt.frame_count >= 1


def _exc_info_in_eager_part(x):
    try:
        raise IndexError("i")
    except IndexError:
        seen = sys.exc_info()[1]  # a graph break (sys.exc_info is C): run where the handler is
        return x + 1, repr(seen)


def test_the_eager_instruction_sees_the_handled_exception(cnt, capsys):
    _run_checked(_exc_info_in_eager_part, cnt, capsys, lambda i: (torch.ones(2) * i,))


def _in_finally_on_exception(x, log):
    try:
        try:
            raise ValueError("v")
        finally:
            print("cleanup")
            log.append(x * 2)
    except ValueError:
        log.append("caught")
    return x + 1


def test_break_inside_a_finally_body_run_for_an_exception(cnt, capsys):
    _run_checked(_in_finally_on_exception, cnt, capsys, lambda i: (torch.ones(2) * i, []))


@contextlib.contextmanager
def _scoped(log, tag):
    log.append(f"enter {tag}")
    try:
        yield tag
    finally:
        log.append(f"exit {tag}")


def _in_contextmanager(x, log):
    y = x + 1
    with _scoped(log, "a") as tag:
        print("inside", tag)
        y = y * 2
    return y - 1, log


def test_break_inside_a_contextmanager_block(cnt, capsys):
    _run_checked(_in_contextmanager, cnt, capsys, lambda i: (torch.ones(2) * i, []))
    explained = stenograph.explain(_in_contextmanager)(torch.ones(2), [])
    assert explained.graph_count == 3  # before the `with`, in the block, after it
    assert "enclosing `with` statement" in explained.break_reasons[0].reason


@contextlib.contextmanager
def _bare(log, tag):
    log.append(f"enter {tag}")
    yield tag
    log.append(f"exit {tag}")  # skipped where the block raises, as eagerly


def _in_bare_contextmanager(x, log, fail):
    y = x + 1
    with _bare(log, "c") as tag:
        print("inside", tag)
        y = y * 2
        if fail:
            raise KeyError("k")
    return y - 1, log


@pytest.mark.parametrize("fail", [False, True])
def test_break_inside_a_bare_yield_contextmanager_block_stays_inside_it(cnt, capsys, fail):
    def fn(x, log):
        try:
            return _in_bare_contextmanager(x, log, fail)
        except KeyError:
            return x, log

    _run_checked(fn, cnt, capsys, lambda i: (torch.ones(2) * i, []))
    explained = stenograph.explain(_in_bare_contextmanager)(torch.ones(2), [], False)
    # its generator, suspended at the `yield`, is handed on: the break is the print's (then
    # `__exit__`'s next() of the real generator)
    assert [r.reason for r in explained.break_reasons] == ["call to print", "next() on generator object"]


def _exception_through_contextmanager(x, log):
    try:
        with _scoped(log, "b"):
            print("about to fail")
            raise KeyError("inside")
    except KeyError as e:
        log.append(repr(e))
    return x * 2, log


def test_exception_through_a_contextmanager_block_after_a_break(cnt, capsys):
    _run_checked(_exception_through_contextmanager, cnt, capsys, lambda i: (torch.ones(2) * i, []))


class _Recorder:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append(("exit", exc[0]))
        return False


def _in_user_with(x, log):
    y = x + 1
    with _Recorder(log):
        print("inside")
        y = y * 2
    return y - 1, log


def test_break_inside_a_user_with_block(cnt, capsys):
    _run_checked(_in_user_with, cnt, capsys, lambda i: (torch.ones(2) * i, []))
    assert stenograph.explain(_in_user_with)(torch.ones(2), []).graph_count == 2


def _leaves(x, n):
    y = x + 1
    if n > 2:
        raise ValueError(f"n={n}")
    return y


def test_exception_leaving_the_frame_is_a_break_with_the_graph_before_it(cnt):
    compiled = _compiled(_leaves, cnt)
    with pytest.raises(ValueError, match="n=3"):
        compiled(torch.ones(2), 3)
    assert cnt.frame_count == 1  # `x + 1` was captured; the raise ran eagerly
    torch.testing.assert_close(compiled(torch.ones(2), 1), torch.full((2,), 2.0))


def _leaves_from_inlined(x, d):
    y = x * 2
    return y + _lookup(d, "missing")


def _lookup(d, key):
    return d[key]


def test_exception_leaving_from_an_inlined_call(cnt):
    compiled = _compiled(_leaves_from_inlined, cnt)
    for _ in range(2):
        with pytest.raises(KeyError, match="missing"):
            compiled(torch.ones(2), {"a": 1})
    torch.testing.assert_close(compiled(torch.ones(2), {"missing": 1}), torch.full((2,), 3.0))


def test_a_handler_break_guards_still_recompile(cnt, capsys):
    compiled = _compiled(_in_handler, cnt)
    compiled(torch.ones(3), [])
    compiled(torch.ones(3), [])
    first = cnt.frame_count
    compiled(torch.ones(4), [])
    assert cnt.frame_count > first
