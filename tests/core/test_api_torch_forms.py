"""torch._dynamo's API forms a port relies on, with torch's behaviour: `optimize`'s arguments and
its use as a context manager, `disable` of modules and classes, `compile` of classes, and the
exception classes matching `torch._dynamo.exc`'s."""

from __future__ import annotations

import copy
import pickle
import re

import pytest
import torch
from helpers import assert_same, torch_peer

import stenograph
from stenograph import errors
from stenograph.testing import CompileCounter


def _product(x, y, k):
    return (x + 1) * (y + 1) * k


# ---------------------------------------------------------------------------------------------
# optimize(...)


def test_guard_fail_fn_gets_torchs_guard_fail_on_a_recompile():
    """Called once per recompile with GuardFail(reason, orig_code), the reason prefixed by the
    failed entry's compile id, as torch calls it (torch's own reason text differs)."""
    failures: list[stenograph.GuardFail] = []
    compiled = stenograph.optimize("eager", nopython=True, guard_fail_fn=failures.append)(_product)
    x, y = torch.ones(2), torch.ones(2)
    compiled(x, y, 3)
    compiled(x, y, 3)
    assert failures == []
    compiled(torch.ones(3), torch.ones(3), 3)
    assert len(failures) == 1
    assert failures[0].orig_code is _product.__code__
    assert re.match(r"\d+/0: L\['x'\]: .*size=\[2\]", failures[0].reason)  # entry 0 of frame N
    # what differs, also in torch.compile's words
    assert failures[0].reason.endswith("tensor 'x' size mismatch at index 0. expected 2, actual 3")
    compiled(torch.ones(3, dtype=torch.float64), torch.ones(3), 3)
    assert "tensor 'x' dtype mismatch. expected torch.float32, actual torch.float64" in failures[1].reason

    torch_failures: list = []
    torch_peer(
        lambda: [
            torch._dynamo.optimize("eager", nopython=True, guard_fail_fn=torch_failures.append)(_product)(*a)
            for a in ((x, y, 3), (torch.ones(3), torch.ones(3), 3))
        ]
    )
    assert len(torch_failures) == 1 and torch_failures[0].orig_code is _product.__code__


def test_guard_fail_fn_covers_the_frames_it_compiled_only():
    """Resume functions of the decorated function report too; the same function compiled
    without the hook does not."""
    failures: list = []

    def f(x):
        x = x + 1
        stenograph.graph_break()
        return x * 2

    hooked = stenograph.optimize("eager", guard_fail_fn=failures.append)(f)
    plain = stenograph.optimize("eager")(f)
    for n in (2, 3):
        plain(torch.ones(n))
    assert failures == []
    for n in (2, 3):
        hooked(torch.ones(n))
    assert len(failures) == 2  # the function and its resume function
    assert {failure.orig_code.co_name for failure in failures} >= {"f"}


def test_guard_export_fn_gets_each_graphs_guards():
    exported: list[stenograph.ExportGuards] = []
    compiled = stenograph.optimize("eager", guard_export_fn=exported.append)(_product)
    x = torch.ones(2)
    compiled(x, x, 3)
    assert len(exported) == 1
    assert "L['k'] == 3" in list(exported[0])
    assert exported[0].check(x, x, 3) and not exported[0].check(x, x, 4)
    assert exported[0].failure(x, x, 4) == "L['k'] == 3 (got 4)"


def test_a_failing_hook_is_a_warning():
    def broken(failure):
        raise ValueError("hook bug")

    compiled = stenograph.optimize("eager", guard_fail_fn=broken)(lambda x: x + 1)
    compiled(torch.ones(2))
    with pytest.warns(stenograph.StenographWarning, match="ValueError: hook bug"):
        assert_same(compiled(torch.ones(3)), torch.full((3,), 2.0))


def test_optimize_nopython_error_on_graph_break_and_disable():
    def breaks(x):
        stenograph.graph_break()
        return x + 1

    for kwargs in ({"nopython": True}, {"error_on_graph_break": True}):
        with pytest.raises(errors.Unsupported):
            stenograph.optimize("eager", **kwargs)(breaks)(torch.ones(2))
    assert stenograph.optimize("eager", disable=True)(breaks) is breaks
    with pytest.raises(errors.Unsupported):
        stenograph.optimize_assert("eager")(breaks)(torch.ones(2))


def test_optimize_refuses_torchs_arguments_it_lacks_saying_what_instead():
    with pytest.raises(TypeError, match="package.*no compiled code between processes"):
        stenograph.optimize("eager", package=object())
    with pytest.raises(TypeError, match="guard_filter_fn.*must be callable"):
        stenograph.optimize("eager", guard_filter_fn=3)
    with pytest.raises(TypeError, match="save_config: not an argument of torch._dynamo.optimize"):
        stenograph.optimize("eager", save_config=False)


def test_optimize_takes_a_guard_filter_fn():
    def fn(x, y):
        return x + y

    compiled = stenograph.optimize("eager", guard_filter_fn=lambda entries: [e.name != "y" for e in entries])(fn)
    compiled(torch.ones(2), 1.0)
    # y's guard dropped: the entry is reused for another float, with the value it was traced with
    torch.testing.assert_close(compiled(torch.ones(2), 2.0), torch.full((2,), 2.0))


def test_optimize_as_a_context_manager_raises_as_torchs():
    with pytest.raises(RuntimeError, match="is used with a context manager"):
        with stenograph.optimize("eager"):
            pass
    with stenograph.config.patch(raise_on_ctx_manager_usage=False):
        with pytest.raises(NotImplementedError, match="frame-evaluation hook"):
            with stenograph.optimize("eager"):
                pass
    with stenograph.optimize("eager", disable=True):  # torch's null decorator is a null context too
        pass


# ---------------------------------------------------------------------------------------------
# disable(module), disable(class), compile(class)


class _Inner(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer0 = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.layer0(torch.sigmoid(x))


class _Outer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer0 = _Inner()
        self.layer1 = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.layer1(self.layer0(torch.sin(x)))


def _doubling_hook(module, args):
    return (args[0].sigmoid(),)


def _targets(gm: torch.fx.GraphModule) -> set:
    return {node.target for node in gm.graph.nodes}


def test_disabled_module_runs_eagerly_with_its_hooks_inside_compiled_code():
    """torch's test: a disabled submodule (with a forward pre-hook) is a graph break; neither its
    forward nor its hook is in a graph."""
    model = _Outer()
    model.layer0.register_forward_pre_hook(_doubling_hook)
    reference = copy.deepcopy(model)
    model.layer0 = stenograph.disable(model.layer0)
    assert isinstance(model.layer0, stenograph.DisabledModule)
    cnt = CompileCounter()
    x = torch.randn(4)
    assert_same(stenograph.compile(model, backend=cnt)(x), reference(x))
    assert cnt.frame_count == 2
    assert torch.sin in _targets(cnt.graphs[0])
    assert all(torch.sigmoid not in _targets(gm) for gm in cnt.graphs)


def test_disabled_module_keeps_the_modules_state_and_attributes():
    model = _Outer()
    keys = list(model.state_dict())
    parameters = list(model.parameters())
    inner = model.layer0
    model.layer0 = stenograph.disable(model.layer0, reason="kept eager")
    assert list(model.state_dict()) == keys
    assert list(model.parameters()) == parameters
    assert model.layer0.layer0 is inner.layer0
    model.layer0.scale = 3
    assert inner.scale == 3
    x = torch.randn(4)
    assert_same(model.layer0(x), inner(x))
    for copied in (pickle.loads(pickle.dumps(model.layer0)), copy.deepcopy(model.layer0)):
        assert isinstance(copied, stenograph.DisabledModule)
        assert_same(copied(x), inner(x))
    assert stenograph.compile(model.layer0) is model.layer0  # disabled stays disabled


def test_disable_on_a_class_makes_its_instances_calls_eager():
    @stenograph.disable
    class Scaled(torch.nn.Module):
        def forward(self, x):
            return x * 2

    assert isinstance(Scaled, type)  # changed in place, still the class
    module = Scaled()
    assert stenograph.marks.is_disabled(type(module).__call__)
    assert_same(module(torch.ones(2)), torch.full((2,), 2.0))

    class NotCallable:
        pass

    with pytest.raises(TypeError, match="instances are not callable"):
        stenograph.disable(NotCallable)


def test_a_disabled_module_class_runs_eagerly_inside_compiled_code():
    """Its instances' calls break, their forward and hooks run as they are (not traced into,
    nor compiled as frames of their own at the break): `is_compiling()` is False in them."""
    cnt = CompileCounter()

    @stenograph.disable
    class Inner(torch.nn.Module):
        def forward(self, x):
            return x * 100 if stenograph.is_compiling() else x + 1

    class Outer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x.sin()) * 2

    model = Outer()
    model.inner.register_forward_pre_hook(_doubling_hook)
    x = torch.randn(3)
    assert_same(stenograph.compile(model, backend=cnt)(x), model(x))
    assert_same(stenograph.compile(lambda m, x: m(x) * 3, backend=cnt)(Inner(), x), (x + 1) * 3)
    assert cnt.frame_count == 3  # `sin` before the call and `* 2` after it; `* 3` after the lambda's


def test_compile_on_a_module_class_compiles_its_instances_calls():
    """As torch's: the class's `__call__` (nn.Module's) is compiled in place, so the forward and
    its hooks are one frame; subclasses inherit the compiled call; constructing is not compiled."""
    cnt = CompileCounter()

    @stenograph.compile(backend=cnt)
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.linear(x).relu()

    model = Model()
    assert cnt.frame_count == 0
    model.register_forward_pre_hook(_doubling_hook)
    x = torch.randn(4)
    assert_same(model(x), model.linear(x.sigmoid()).relu())
    assert cnt.frame_count == 1

    class Sub(Model):
        def forward(self, x):
            return x - 1

    assert_same(Sub()(x), x - 1)
    assert cnt.frame_count == 2
    assert torch.nn.Linear(4, 4)(x).shape == (4,)  # other modules' calls stay as they were
    assert cnt.frame_count == 2


def test_compile_on_a_callable_class_and_on_a_disabled_function():
    cnt = CompileCounter()

    @stenograph.compile(backend=cnt)
    class Adder:
        def __call__(self, x):
            return x + 1

    assert_same(Adder()(torch.ones(2)), torch.full((2,), 2.0))
    assert cnt.frame_count == 1

    def f(x):
        return x.cos()

    assert_same(stenograph.compile(stenograph.disable(f), backend=cnt)(torch.ones(2)), torch.ones(2).cos())
    assert cnt.frame_count == 1
    with pytest.raises(TypeError, match="needs a Python __call__"):
        stenograph.compile(type("Plain", (), {}))


# ---------------------------------------------------------------------------------------------
# exceptions


@pytest.mark.parametrize(
    ("ours", "bases"),
    [
        (errors.UserError, (errors.StenographError, RuntimeError)),
        (errors.ConstraintViolation, (errors.UserError, ValueError)),
        (errors.TorchRuntimeError, (errors.Unsupported, RuntimeError)),
        (errors.InternalError, (errors.StenographError, RuntimeError)),
        (errors.RecompileError, (errors.StenographError, RuntimeError)),
        (errors.FailOnRecompileLimitHit, (errors.StenographError,)),
    ],
)
def test_exception_classes_for_torchs(ours, bases):
    """torch._dynamo.exc's classes are RuntimeErrors: code catching those catches ours."""
    assert issubclass(ours, bases)
