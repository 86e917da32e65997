"""`set_stance`: as a call, a context manager and a decorator; what each stance does to cached
calls, misses, resume functions and recompiles; `force_backend`; refused inputs."""

from __future__ import annotations

import pytest
import torch
from helpers import assert_same

import stenograph
from stenograph import stance
from stenograph.testing import CompileCounter, CompileCounterWithBackend


@pytest.fixture(autouse=True)
def default_stance():
    """The stance is process-wide and survives reset(), as torch's: each test ends in default."""
    yield
    stance.swap(stance.Stance())


def _double(x):
    return x * 2 + 1


def _printing(x):
    y = x.sin()
    print("between graphs")
    return y.cos()


class RunCounter(CompileCounter):
    """Counts graphs compiled, and calls of the compiled graphs (`runs`)."""

    def __init__(self) -> None:
        super().__init__()
        self.runs = 0

    def __call__(self, gm, example_inputs):
        forward = super().__call__(gm, example_inputs)

        def run(*args):
            self.runs += 1
            return forward(*args)

        return run


def test_force_eager_ignores_cached_code_and_compiles_nothing(capsys):
    cnt = RunCounter()
    compiled = stenograph.compile(_printing, backend=cnt)
    x = torch.randn(3)
    assert_same(compiled(x), _printing(x))
    assert (cnt.frame_count, cnt.runs) == (2, 2)  # the graph before the print and the resume function's
    other = torch.randn(2, 2)
    capsys.readouterr()
    with stenograph.set_stance("force_eager"):
        assert_same(compiled(x), _printing(x))  # cached entries accept x, but are set aside
        assert_same(compiled(other), _printing(other))  # a miss: no compile
    assert (cnt.frame_count, cnt.runs) == (2, 2)
    assert capsys.readouterr().out.count("between graphs") == 4
    compiled(x)  # default again: the cached code runs
    assert (cnt.frame_count, cnt.runs) == (2, 4)


def test_as_a_function_call_the_stance_holds_until_changed(cnt):
    compiled = stenograph.compile(_double, backend=cnt)
    stenograph.set_stance("force_eager")
    assert stance.current.stance.name == "force_eager"
    compiled(torch.randn(3))
    assert cnt.frame_count == 0
    stenograph.set_stance("default")
    compiled(torch.randn(3))
    assert cnt.frame_count == 1


def test_as_a_decorator_the_stance_holds_while_the_function_runs(cnt):
    compiled = stenograph.compile(_double, backend=cnt)

    @stenograph.compiler.set_stance("force_eager")
    def run_eagerly(x):
        assert stance.current.stance.name == "force_eager"
        return compiled(x)

    assert stance.current.stance.name == "default"  # decorating does not change the stance
    x = torch.randn(3)
    assert_same(run_eagerly(x), _double(x))
    assert cnt.frame_count == 0 and stance.current.stance.name == "default"
    assert run_eagerly.__name__ == "run_eagerly"


def test_the_decorator_unwinds_nested_and_failing_calls():
    @stenograph.set_stance("eager_on_recompile")
    def inner():
        return stance.current.stance.name

    @stenograph.set_stance("force_eager")
    def outer(fail):
        seen = [stance.current.stance.name, inner(), stance.current.stance.name]
        if fail:
            raise KeyError("boom")
        return seen

    assert outer(False) == ["force_eager", "eager_on_recompile", "force_eager"]
    with pytest.raises(KeyError):
        outer(True)
    assert stance.current.stance.name == "default"


def test_eager_on_recompile_runs_cached_code_and_never_compiles(capsys):
    cnt = RunCounter()
    compiled = stenograph.compile(_printing, backend=cnt)
    x = torch.randn(3)
    compiled(x)
    assert (cnt.frame_count, cnt.runs) == (2, 2)
    with stenograph.set_stance("eager_on_recompile"):
        assert_same(compiled(x), _printing(x))  # both graphs run from the cache
        assert cnt.runs == 4
        other = torch.randn(4, dtype=torch.float64)
        assert_same(compiled(other), _printing(other))  # a guard fails: eager, no compile
        fresh = stenograph.compile(_double, backend=cnt)
        assert_same(fresh(x), _double(x))  # never compiled: eager as well
    assert (cnt.frame_count, cnt.runs) == (2, 4)
    compiled(other)  # the default stance compiles the miss
    assert cnt.frame_count == 4
    capsys.readouterr()


def test_fail_on_recompile_raises_naming_the_failed_guard(cnt):
    compiled = stenograph.compile(_double, backend=cnt)
    x = torch.randn(3)
    compiled(x)
    with stenograph.set_stance("fail_on_recompile"):
        y = torch.randn(3)
        assert_same(compiled(y), _double(y))  # guards pass: fine
        with pytest.raises(stenograph.RecompileError) as info:
            compiled(torch.randn(3, dtype=torch.float64))
    message = str(info.value)
    assert "_double" in message and "'fail_on_recompile'" in message
    assert "entry 0" in message and "torch.float64" in message and "L['x']" in message
    assert isinstance(info.value, RuntimeError)  # torch raises RuntimeError
    assert cnt.frame_count == 1


def test_fail_on_recompile_also_refuses_a_first_compile_as_torch_does(cnt):
    compiled = stenograph.compile(_double, backend=cnt)
    peer = torch.compile(_double, backend="eager")
    with stenograph.set_stance("fail_on_recompile"):
        with pytest.raises(stenograph.RecompileError, match="no compiled entry yet"):
            compiled(torch.randn(3))
    with torch.compiler.set_stance("fail_on_recompile"), pytest.raises(RuntimeError, match="fail_on_recompile"):
        peer(torch.randn(3))
    assert cnt.frame_count == 0


def test_fail_on_recompile_covers_resume_functions(cnt, capsys):
    compiled = stenograph.compile(_printing, backend=cnt)
    compiled(torch.randn(3))
    with stenograph.set_stance("fail_on_recompile"):
        compiled(torch.randn(3))  # the resume function is cached too
        with pytest.raises(stenograph.RecompileError):
            compiled(torch.randn(5))
    assert cnt.frame_count == 2
    capsys.readouterr()


def test_wrong_arguments_raise_pythons_type_error_under_fail_on_recompile():
    compiled = stenograph.compile(_double, backend="eager")
    with stenograph.set_stance("fail_on_recompile"), pytest.raises(TypeError, match="positional argument"):
        compiled(torch.randn(3), 2)


def test_force_backend_compiles_and_runs_with_that_backend(cnt):
    compiled = stenograph.compile(_double, backend=cnt)
    forced = CompileCounter()
    x = torch.randn(3)
    compiled(x)
    with stenograph.set_stance(force_backend=forced):
        assert_same(compiled(x), _double(x))
        assert_same(compiled(x), _double(x))  # its own cache: compiled once
    assert (cnt.frame_count, forced.frame_count) == (1, 1)
    compiled(x)
    assert cnt.frame_count == 1  # the function's own entries are still there
    with stenograph.set_stance(force_backend="eager"):
        assert_same(compiled(x), _double(x))


def test_force_backend_applies_to_modules_and_their_graph_breaks(cnt, capsys):
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    compiled = stenograph.compile(model, backend=cnt)
    printing = stenograph.compile(_printing, backend=cnt)
    forced = CompileCounter()
    x = torch.randn(2, 3)
    with stenograph.set_stance(force_backend=forced):
        assert_same(compiled(x), model(x))
        assert_same(printing(x), _printing(x))
    assert cnt.frame_count == 0 and forced.frame_count == 3  # the module, and both sides of the break
    capsys.readouterr()


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("bogus",), {}, ValueError, "unknown stance 'bogus'; the stances are default, force_eager"),
        ((_double,), {}, TypeError, r"takes a stance name \(str\), got function"),
        (("force_eager",), {"force_backend": "eager"}, RuntimeError, "needs the 'default' stance"),
        ((), {"force_backend": "no_such_backend"}, stenograph.errors.InvalidBackend, "unknown backend"),
        (
            (),
            {"skip_guard_eval_unsafe": True},
            NotImplementedError,
            r"unsafe=True\) is not implemented",
        ),
    ],
)
def test_bad_stances_are_refused_and_change_nothing(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        stenograph.set_stance(*args, **kwargs)
    assert stance.current.stance == stance.Stance()


def test_decorating_something_not_callable_is_refused():
    with pytest.raises(TypeError, match="decorates a callable, got int"):
        stenograph.set_stance("force_eager")(3)
    assert stance.current.stance == stance.Stance()


def test_setting_the_stance_in_a_compiled_call_run_eagerly_is_refused(cnt):
    """A frame `skip_frame()` leaves eager is still inside the compiled call (torch's frame
    callback is set): a stance change there raises, as torch's, and compiles nothing."""

    def f(x):
        torch._dynamo.skip_frame()
        stenograph.set_stance("force_eager")  # this frame runs eagerly: so does the call
        return x + 1

    with pytest.raises(RuntimeError, match="set_stance in a torch.compile region.*called inside compiled code"):
        stenograph.compile(f, backend=cnt)(torch.randn(2))
    assert stance.current.stance == stance.Stance() and cnt.frame_count == 0


def test_a_disabled_function_called_from_compiled_code_may_change_the_stance(cnt):
    """Inside a disabled function no compiled call is in progress (torch unsets its frame
    callback there): the stance may change, and the change holds for what that function calls."""
    seen = []

    def plus_one(x):
        return x + 1

    compiled_plus_one = stenograph.compile(plus_one, backend=cnt)

    @stenograph.disable
    def eagerly(x):
        with stenograph.set_stance("force_eager"):
            seen.append(stance.current.stance.name)
            y = compiled_plus_one(x)  # runs eagerly: nothing compiles
        seen.append(stance.current.stance.name)
        return y

    def f(x):
        y = x * 2
        return eagerly(y) + 1  # a graph break: `eagerly` runs between the two graphs

    x = torch.randn(2)
    torch.testing.assert_close(stenograph.compile(f, backend=cnt)(x), x * 2 + 2)
    assert seen == ["force_eager", "default"] and cnt.frame_count == 2  # f's two graphs only


def test_a_compiled_call_made_under_force_eager_may_change_the_stance(cnt):
    """Under `force_eager` a compiled function runs as plain Python (torch leaves its frame
    callback unset): the stance may change inside it, as in torch."""

    def f(x):
        stenograph.set_stance("default")
        return x + 1

    stenograph.set_stance("force_eager")
    try:
        x = torch.randn(2)
        torch.testing.assert_close(stenograph.compile(f, backend=cnt)(x), x + 1)
        assert stance.current.stance == stance.Stance() and cnt.frame_count == 0
    finally:
        stenograph.set_stance("default")


def _decorated_callee(x):
    return _eager_plus_one(x)


@stenograph.set_stance("force_eager")
def _eager_plus_one(x):
    return x + 1


def _with_block(x):
    with stenograph.set_stance("force_eager"):
        return x + 1


def _torch_setter(x):
    torch._dynamo.eval_frame._set_stance("force_eager")
    return x + 1


@pytest.mark.parametrize("suppress_errors", [False, True])
@pytest.mark.parametrize("fn", [_decorated_callee, _with_block, _eager_plus_one, _torch_setter])
def test_tracing_a_stance_change_is_an_error_as_in_torch(fn, suppress_errors):
    """set_stance is marked forbid_in_graph (torch's setter too): tracing it raises
    AssertionError to the caller, whatever suppress_errors says, and compiles nothing."""
    cnt = CompileCounter()
    compiled = stenograph.compile(fn, backend=cnt)
    with stenograph.config.patch(suppress_errors=suppress_errors):
        for _ in range(2):  # no eager fallback is cached for the second call
            with pytest.raises(AssertionError, match="Attempt to trace forbidden callable"):
                compiled(torch.ones(3))
    assert cnt.frame_count == 0
    assert stance.current.stance == stance.Stance()


def test_the_stance_is_read_on_each_call_not_when_compiling(cnt):
    """Entries compiled under one stance keep working under another: the stance is not
    guarded and changes no compiled code."""
    compiled = stenograph.compile(_double, backend=cnt)
    with stenograph.set_stance("force_eager"):
        compiled(torch.randn(3))
    x = torch.randn(3)
    assert_same(compiled(x), _double(x))
    with stenograph.set_stance("fail_on_recompile"):
        assert_same(compiled(x), _double(x))
    assert cnt.frame_count == 1


def test_eager_then_compile_runs_the_first_call_eagerly_and_compiles_what_changed_dynamic():
    """torch's stance: the first call of a function runs eagerly; the second compiles with the
    sizes (and ints) that differ from the first symbolic, also inside lists and dicts, so a
    third call with other sizes reuses that entry."""
    cnt = CompileCounter()

    @stenograph.compile(backend=cnt)
    def fn(n, y, z):
        return n * y * z[0]

    with stenograph.set_stance("eager_then_compile"):
        for i in (1, 2, 3):
            args = (i, torch.randn(i), {0: torch.randn(i)})
            assert_same(fn(*args), args[0] * args[1] * args[2][0])
            assert cnt.frame_count == (0 if i == 1 else 1)
    placeholders = [n for n in cnt.graphs[0].graph.nodes if n.op == "placeholder"]
    assert any(isinstance(n.meta["example_value"], torch.SymInt) for n in placeholders)


def test_aot_eager_then_compile_compiles_the_first_call_with_aot_eager_then_the_own_backend(monkeypatch):
    """torch's stance: the first call compiles with `aot_eager` (its entry serves later calls
    its guards pass); a miss compiles with the function's backend, the sizes that changed
    symbolic; gradients as eager's."""
    import stenograph.entry as entry_module

    own = CompileCounter()
    first = CompileCounterWithBackend("aot_eager")
    looked_up: list[str] = []

    def lookup(name):
        looked_up.append(name)
        return first

    monkeypatch.setattr(entry_module, "lookup_backend", lookup)

    def fn(x, w):
        return (x * w).sin().sum()

    compiled = stenograph.compile(fn, backend=own)
    with stenograph.set_stance("aot_eager_then_compile"):
        for size in (3, 3, 4, 5):
            x = torch.randn(size, requires_grad=True)
            w = torch.randn(size, requires_grad=True)
            got = compiled(x, w)
            got.backward()
            x2, w2 = x.detach().requires_grad_(), w.detach().requires_grad_()
            expected = fn(x2, w2)
            expected.backward()
            assert_same(got, expected)
            assert_same(x.grad, x2.grad)
            assert_same(w.grad, w2.grad)
    assert looked_up == ["aot_eager"] and first.frame_count == 1  # the first call only
    assert own.frame_count == 1  # the size-4 call; size 5 reuses its symbolic entry
    placeholders = [n.meta["example_value"] for n in own.graphs[0].graph.nodes if n.op == "placeholder"]
    assert any(isinstance(d, torch.SymInt) for value in placeholders for d in getattr(value, "shape", ()))
