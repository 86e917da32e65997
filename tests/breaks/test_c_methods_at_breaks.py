"""A C method loaded before a graph break (`log.append(print(x) or x)`: `log.append` sits on the
stack while `print` runs eagerly; likewise a tensor's `x.add` or a string's `",".join`) reaches
the resume function as a new bound-method object every call. It is guarded as its owner's method
by name, so identical calls reuse the compiled code instead of compiling again each time (a guard
on the method object's identity died with it after every call)."""

import pytest
import torch

import stenograph
from stenograph.testing import CompileCounter, CompileCounterWithBackend


def _append_after_print(x, log):
    y = x + 1
    log.append(print("logging") or y * 2)
    return y.sin(), log


def _dict_update_after_print(x, table):
    table.update(print("updating") or {"k": x.cos()})
    return x + 1, table


def _set_add_after_print(x, seen):
    seen.add(print("adding") or 3)
    return x * 2, seen


def _tensor_method_after_print(x, unused):
    return x.add(print("adding") or 1), unused


def _str_join_after_print(x, sep):
    return x * 2, sep.join(["a", str(print("joining"))])


@pytest.mark.parametrize(
    "fn, make_container",
    [
        (_append_after_print, list),
        (_dict_update_after_print, dict),
        (_set_add_after_print, set),
        (_tensor_method_after_print, tuple),
        (_str_join_after_print, lambda: ","),
    ],
)
def test_identical_calls_compile_once(fn, make_container, capsys, compiles):
    cnt = CompileCounter()
    compiled = stenograph.compile(fn, backend=cnt)
    for i in range(4):
        x = torch.full((3,), float(i))
        expected = fn(x, make_container())
        eager_printed = capsys.readouterr().out
        got = compiled(x, make_container())
        assert capsys.readouterr().out == eager_printed
        torch.testing.assert_close(got[0], expected[0])
        if isinstance(expected[1], (set, str)):
            assert got[1] == expected[1]
        else:
            torch.testing.assert_close(got[1], expected[1])
        if i == 0:
            after_first = cnt.frame_count, len(compiles)
    assert (cnt.frame_count, len(compiles)) == after_first


def test_a_different_container_type_recompiles(capsys):
    """The method's owner is guarded too: a list then a deque (whose append is another method)."""
    import collections

    cnt = CompileCounter()
    compiled = stenograph.compile(_append_after_print, backend=cnt)
    x = torch.ones(3)
    compiled(x, [])
    first = cnt.frame_count
    out, log = compiled(x, collections.deque())
    assert isinstance(log, collections.deque) and len(log) == 1
    torch.testing.assert_close(log[0], (x + 1) * 2)
    assert cnt.frame_count > first


class _Holder:
    """Holds a method object binding a C function (as a pybind11 class's methods are)."""


def _bound_c_function_after_print(x, holder):
    y = x + 1
    r = holder.method(print("calling") or y)  # the method object is on the stack while print runs
    return r * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_method_binding_a_c_function_is_called_at_a_break_and_guarded_by_its_function(backend, capsys):
    """`types.MethodType(torch.add, b)`: its `__func__` is no Python function, so it cannot be
    inlined. Loading it is fine and calling it is a graph break; the code after the break still
    compiles. Another binding of the same function (another `__self__`) is called as it is,
    without recompiling; a binding of another function recompiles."""
    import types
    import warnings

    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_bound_c_function_after_print, backend=cnt)
    holder = _Holder()
    x = torch.arange(3.0)
    b1, b2 = torch.full((3,), 2.0), torch.full((3,), 5.0)
    cases = [(torch.add, b1, "first"), (torch.add, b1, "same"), (torch.add, b2, "same"), (torch.mul, b2, "more")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no frame may give up and run eagerly
        for fn, bound, compiles in cases:
            holder.method = types.MethodType(fn, bound)
            before = cnt.frame_count
            got = compiled(x, holder)
            assert capsys.readouterr().out == "calling\n"
            torch.testing.assert_close(got, fn(bound, x + 1) * 2)
            assert (cnt.frame_count > before) == (compiles != "same"), (fn, compiles)
    assert cnt.op_count >= 2  # the add before the break and the mul after it are both compiled


def _pybind_method_after_print(x, file_check):
    y = x + 1
    file_check.check(str(print("checking") or "needle"))
    return y * 2


def test_a_pybind_method_on_the_stack_at_a_break_leaves_the_rest_compiled(capsys):
    """A pybind11 class's method (`torch._C.FileCheck.check`, whose `__func__` is a C function)
    loaded before a break: the resume function takes it, calls it eagerly and compiles the
    rest; identical calls compile nothing more."""
    import warnings

    cnt = CompileCounter()
    compiled = stenograph.compile(_pybind_method_after_print, backend=cnt)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(3):
            x = torch.full((2,), float(i))
            file_check = torch._C.FileCheck()
            got = compiled(x, file_check)
            assert capsys.readouterr().out == "checking\n"
            torch.testing.assert_close(got, (x + 1) * 2)
            file_check.run("a needle here")  # the check was recorded on the object passed
            with pytest.raises(RuntimeError):
                file_check.run("nothing")
            if i == 0:
                first = cnt.frame_count
    assert cnt.frame_count == first
    assert cnt.op_count >= 2


def _pybind_method_call(x, file_check):
    y = x + 1
    file_check.check("needle")
    return y * 2


def test_a_pybind_method_call_is_one_graph_break_at_the_call(cnt):
    """Reading a pybind11 method off its object is traced (binding it runs nothing); the call is
    the one graph break, and the graphs before and after it compile."""
    explanation = stenograph.explain(_pybind_method_call)(torch.ones(2), torch._C.FileCheck())
    assert explanation.graph_break_count == 1
    assert "method FileCheck.check is implemented in C" in explanation.break_reasons[0].reason
    compiled = stenograph.compile(_pybind_method_call, backend=cnt)
    for i in range(2):
        file_check = torch._C.FileCheck()
        torch.testing.assert_close(
            compiled(torch.full((2,), float(i)), file_check), (torch.full((2,), float(i)) + 1) * 2
        )
        file_check.run("the needle")
    assert cnt.frame_count == 2
