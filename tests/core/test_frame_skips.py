"""Frames run as they are where torch.compile skips them (`config.disable`, a TorchDispatchMode
that must see every operator), fullgraph's `NoFramesCompiled` when a call compiled nothing, user
modes set aside while compiling, and calls from another trace (FX, a custom op's kernel on fake
tensors). torch.compile is the peer where it behaves the same."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch.utils._python_dispatch import TorchDispatchMode

import stenograph
from stenograph.errors import NestedTrace, NoFramesCompiled
from stenograph.testing import CompileCounter

COMPILERS = [
    pytest.param(stenograph.compile, stenograph.config, id="stenograph"),
    pytest.param(torch.compile, torch._dynamo.config, id="torch"),
]


@pytest.fixture(autouse=True)
def _fresh_torch():
    yield
    torch._dynamo.reset()


class LoggingMode(TorchDispatchMode):
    """A mode that must see every operator eager runs."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


class QuietMode(LoggingMode):
    """A mode that asks compilers to leave it out of their internals."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True


def _add_sin(x):
    return (x + 1).sin()


@pytest.mark.parametrize(("compile_", "cfg"), COMPILERS)
def test_fullgraph_under_user_mode_raises(compile_, cfg):
    with LoggingMode(), pytest.raises(RuntimeError, match="non-infra torch dispatch mode present"):
        compile_(_add_sin, backend="eager", fullgraph=True)(torch.ones(3))


@pytest.mark.parametrize(("compile_", "cfg"), COMPILERS)
def test_fullgraph_under_disable_raises_naming_the_frame(compile_, cfg):
    with cfg.patch(disable=True), pytest.raises(RuntimeError) as caught:
        compile_(_add_sin, backend="eager", fullgraph=True)(torch.ones(3))
    code = _add_sin.__code__
    assert str(caught.value) == (
        "torch.compile with fullgraph=True found no compiled frames. Skipped frames:\n"
        f"  - _add_sin ({code.co_filename}:{code.co_firstlineno}): Dynamo tracing is disabled"
    )


def test_error_class_and_state_after_it():
    cnt = CompileCounter()
    fn = stenograph.compile(_add_sin, backend=cnt, fullgraph=True)
    with stenograph.config.patch(disable=True), pytest.raises(NoFramesCompiled):
        fn(torch.ones(3))
    assert cnt.frame_count == 0
    assert not stenograph.stance.current.bypass  # the watch ended: cached calls take the fast path
    x = torch.ones(3)
    assert torch.equal(fn(x), _add_sin(x))
    assert cnt.frame_count == 1


def test_user_mode_runs_eagerly_and_sees_every_op():
    cnt = CompileCounter()
    fn = stenograph.compile(_add_sin, backend=cnt)
    x = torch.ones(3)
    with LoggingMode() as mode:
        result = fn(x)
    assert torch.equal(result, _add_sin(x))
    assert mode.ops == ["aten.add.Tensor", "aten.sin.default"]
    assert cnt.frame_count == 0
    fn(x)  # no mode: compiles now
    with LoggingMode() as mode:  # the cached entry is not run under the mode either
        fn(x)
    assert mode.ops == ["aten.add.Tensor", "aten.sin.default"]
    assert cnt.frame_count == 1
    fn(x)  # the same call again: no compile
    assert cnt.frame_count == 1


def test_cached_fullgraph_under_user_mode_raises_as_torch():
    fn = stenograph.compile(_add_sin, backend="eager", fullgraph=True)
    fn(torch.ones(3))
    with LoggingMode(), pytest.raises(NoFramesCompiled, match="non-infra"):
        fn(torch.ones(3))


def test_disable_runs_cached_code():
    cnt = CompileCounter()
    fn = stenograph.compile(_add_sin, backend=cnt, fullgraph=True)
    fn(torch.ones(3))
    with stenograph.config.patch(disable=True):
        assert torch.equal(fn(torch.ones(3)), _add_sin(torch.ones(3)))  # an entry ran: no error
        with pytest.raises(NoFramesCompiled):
            fn(torch.ones(4, 4))  # a miss, skipped
    assert cnt.frame_count == 1


def test_cached_callee_counts_for_a_skipped_fullgraph_call():
    cnt = CompileCounter()
    inner = stenograph.compile(_add_sin, backend=cnt)
    inner(torch.ones(3))

    def outer(x):
        return inner(x) * 2

    fn = stenograph.compile(outer, backend=cnt, fullgraph=True)
    with stenograph.config.patch(disable=True):
        result = fn(torch.ones(3))  # its own frame skipped, inner's cached code ran: no error
    assert torch.equal(result, outer(torch.ones(3)))
    assert cnt.frame_count == 1


@pytest.mark.parametrize(("compile_", "cfg"), COMPILERS)
def test_compile_inside_dispatch_handler(compile_, cfg):
    """The outer call is skipped (a mode on the stack); inside the handler the mode has left the
    stack, so the compile made there compiles, and counts for the outer fullgraph call."""
    inner_cnt = torch._dynamo.testing.CompileCounter()

    class Yolo(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.add.Tensor:
                return compile_(torch.add, backend=inner_cnt, fullgraph=True)(args[0], args[1])
            return func(*args, **(kwargs or {}))

    x = torch.ones(5)
    with Yolo():
        result = compile_(lambda a, b: torch.add(a, b), backend="eager", fullgraph=True)(x, x)
    assert torch.equal(result, x + x)
    assert inner_cnt.frame_count == 1


@pytest.mark.parametrize(("compile_", "cfg"), COMPILERS)
def test_inline_torch_dispatch_off_skips_inside_the_handler(compile_, cfg):
    inner_cnt = torch._dynamo.testing.CompileCounter()

    class Yolo(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return compile_(lambda *a: func(*a), backend=inner_cnt)(*args)

    x = torch.ones(5)
    with cfg.patch(inline_torch_dispatch_torch_compile=False), Yolo():
        torch.add(x, x)
    assert inner_cnt.frame_count == 0


@pytest.mark.parametrize(("compile_", "cfg"), COMPILERS)
def test_mode_ignoring_compile_internals_sees_only_the_run(compile_, cfg):
    cnt = torch._dynamo.testing.CompileCounter()
    fn = compile_(_add_sin, backend=cnt, fullgraph=True)
    x = torch.ones(2, 2)
    with QuietMode() as mode:
        result = fn(x)
    assert torch.equal(result, _add_sin(x))
    assert mode.ops == ["aten.add.Tensor", "aten.sin.default"]  # the graph's run, not the trace
    assert cnt.frame_count == 1


@pytest.mark.parametrize(("compile_", "cfg"), COMPILERS)
def test_fx_trace_of_compiled_function_raises(compile_, cfg):
    def f(x):
        return x + x

    compiled = compile_(f, backend="eager")
    compiled(torch.ones(2))
    with pytest.raises(RuntimeError, match="Detected that you are using FX to symbolically trace"):
        torch.fx.symbolic_trace(compiled)


def test_fx_trace_of_compiled_function_with_setting_off_traces_the_original():
    def f(x):
        return x + x

    cnt = CompileCounter()
    compiled = stenograph.compile(f, backend=cnt)
    with pytest.raises(NestedTrace):
        torch.fx.symbolic_trace(compiled)
    with stenograph.config.patch(error_on_nested_fx_trace=False):
        gm = torch.fx.symbolic_trace(compiled)
    x = torch.ones(3)
    assert torch.equal(gm(x), f(x))
    assert cnt.frame_count == 0


@pytest.mark.parametrize(("compile_", "cfg"), COMPILERS)
def test_compile_of_an_operator_overload(compile_, cfg):
    x = torch.randn(3)
    assert torch.equal(compile_(torch.ops.aten.add.Tensor, backend="eager", fullgraph=True)(x, x), x + x)
    assert torch.equal(compile_(torch.ops.aten.add, backend="eager")(x, x), x + x)


@pytest.mark.parametrize(("compile_", "cfg"), COMPILERS)
def test_custom_op_kernel_calling_compile(compile_, cfg):
    inner_cnt = torch._dynamo.testing.CompileCounter()
    outer_cnt = torch._dynamo.testing.CompileCounter()
    with torch.library._scoped_library("stenoskip", "FRAGMENT") as lib:
        lib.define("foo(Tensor x) -> Tensor")
        lib.impl("foo", lambda x: compile_(lambda y: y.sin().cos(), backend=inner_cnt)(x), "CompositeExplicitAutograd")
        fn = compile_(lambda x: torch.ops.stenoskip.foo.default(x), backend=outer_cnt, fullgraph=True)
        x = torch.randn(3)
        for _ in range(2):
            assert torch.allclose(fn(x), x.sin().cos())
    assert outer_cnt.frame_count == 1  # the op is one node; its kernel compiles when it runs
    assert inner_cnt.frame_count == 1


def _define_bar(lib, name, compliant):
    tags = (torch.Tag.pt2_compliant_tag,) if compliant else ()
    torch.library.define(f"stenoskip::{name}", "(Tensor x) -> Tensor", lib=lib, tags=tags)
    torch.library.impl(f"stenoskip::{name}", "CompositeImplicitAutograd", torch.sin, lib=lib)


def test_only_pt2_compliant_ops():
    x = torch.randn(3)
    with torch.library._scoped_library("stenoskip", "FRAGMENT") as lib:
        _define_bar(lib, "good", True)
        _define_bar(lib, "bad", False)
        with stenograph.config.patch(only_allow_pt2_compliant_ops=True):
            good = stenograph.compile(lambda x: torch.ops.stenoskip.good(x), backend="eager", fullgraph=True)
            assert torch.equal(good(x), x.sin())
            for target in (torch.ops.stenoskip.bad, torch.ops.stenoskip.bad.default):
                bad = stenograph.compile(lambda x, t=target: t(x), backend="eager", fullgraph=True)
                with pytest.raises(stenograph.errors.Unsupported, match="not PT2 compliant"):
                    bad(x)
            cnt = CompileCounter()
            breaking = stenograph.compile(lambda x: torch.ops.stenoskip.bad(x + 1) * 2, backend=cnt)
            assert torch.equal(breaking(x), (x + 1).sin() * 2)  # a graph break: two graphs around it
            assert cnt.frame_count == 2
        # the setting off: the same op is one node
        cnt = CompileCounter()
        assert torch.equal(stenograph.compile(lambda x: torch.ops.stenoskip.bad(x), backend=cnt)(x), x.sin())
        assert cnt.frame_count == 1


def test_only_pt2_compliant_ops_resolves_the_packet():
    x = torch.randn(3)
    with torch.library._scoped_library("stenoskip", "FRAGMENT") as lib:
        lib.define("bar3.tensor(Tensor x) -> Tensor", tags=torch.Tag.pt2_compliant_tag)
        lib.define("bar3.int(Tensor x, int dim) -> Tensor")
        lib.impl("bar3.tensor", torch.sin, "CompositeImplicitAutograd")
        lib.impl("bar3.int", torch.sum, "CompositeImplicitAutograd")
        with stenograph.config.patch(only_allow_pt2_compliant_ops=True):
            f = stenograph.compile(lambda x: torch.ops.stenoskip.bar3(x), backend="eager", fullgraph=True)
            assert torch.equal(f(x), x.sin())
            g = stenograph.compile(lambda x: torch.ops.stenoskip.bar3(x, 0), backend="eager", fullgraph=True)
            with pytest.raises(stenograph.errors.Unsupported, match="resolves to the overload 'int'"):
                g(x)
            h = stenograph.compile(lambda x: torch.ops.stenoskip.bar3(x, x, x), backend="eager", fullgraph=True)
            with pytest.raises(stenograph.errors.Unsupported, match="failed to"):
                h(x)
