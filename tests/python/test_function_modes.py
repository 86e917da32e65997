"""TorchFunctionModes: handlers traced where eager calls them, the stack guarded, and the stack
changes the frame makes (`with Mode():`, push/pop, `set_default_device`) replayed.

Every test compares with eager: results, what the mode saw (the functions it was called with, in
order), printed output, gradients, and the stack left behind. Graph counts are torch.compile's
where they are compared (torch traces modes' handlers too).
"""

from __future__ import annotations

import re

import helpers
import pytest
import torch
import torch._dynamo
from torch.overrides import (
    BaseTorchFunctionMode,
    TorchFunctionMode,
    _get_current_function_mode_stack,
    _len_torch_function_stack,
    _pop_torch_function_stack,
    _push_on_torch_function_stack,
)

import stenograph
from stenograph.errors import NoFramesCompiled
from stenograph.testing import CompileCounterWithBackend

BACKENDS = ["eager", "aot_eager"]


@pytest.fixture(autouse=True)
def _empty_stack():
    yield
    while _len_torch_function_stack():
        _pop_torch_function_stack()
    torch.set_default_device(None)
    torch._dynamo.reset()


class Recorder(TorchFunctionMode):
    """Records the name of each function eager hands it, then calls it."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append(getattr(func, "__name__", "?"))
        return func(*args, **(kwargs or {}))


class ZeroAdd(BaseTorchFunctionMode):
    """Answers torch.add itself."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.add:
            return torch.zeros(2, 2)
        return super().__torch_function__(func, types, args, kwargs or {})


class DoubleMul(BaseTorchFunctionMode):
    """Doubles what torch.mul gives (a handler that computes on the result)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs)
        return out * 2 if func is torch.mul else out


class Counter(TorchFunctionMode):
    def __init__(self) -> None:
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def _many_operations(x):
    y = x + 1
    y = y * x.shape[0]
    z = y[0] + y.sum()
    y[1] = 3.0
    w = -y
    return torch.sin(w).relu() + z, x.dtype, x.size(1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_handler_sees_each_operation_as_eager_shows_it(backend):
    """Torch functions, tensor methods, operators, indexing and attribute reads each reach the
    handler with the function eager passes, in eager's order; the graph does not call it again."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_many_operations, backend=cnt, fullgraph=True)
    x = torch.randn(3, 4)
    with Recorder() as eager_mode:
        expected = _many_operations(x)
    for _ in range(2):
        with Recorder() as mode:
            result = compiled(x)
        assert mode.seen == eager_mode.seen and len(mode.seen) == 13
        torch.testing.assert_close(result[0], expected[0])
        assert result[1:] == expected[1:]
    assert cnt.frame_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_handler_answering_for_a_function_is_traced(backend):
    cnt = CompileCounterWithBackend(backend)

    def fn(x):
        return torch.add(x, 3) + torch.mul(x, 2)

    compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)
    x = torch.ones(2, 2)
    for mode in (ZeroAdd, DoubleMul):
        with mode():
            torch.testing.assert_close(compiled(x), fn(x))
    torch.testing.assert_close(compiled(x), fn(x))  # no mode: compiled again, as eager computes it
    assert cnt.frame_count == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_mode_stack_is_guarded(backend):
    """torch.compile's counts: a new class or order of modes recompiles, a new instance of one
    class does not; code compiled with no mode does not run under one (nor the reverse)."""
    cnt = CompileCounterWithBackend(backend)

    def fn(x):
        return torch.add(x, 1)

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.ones(2, 2)
    torch.testing.assert_close(compiled(x), x + 1)
    with ZeroAdd():
        torch.testing.assert_close(compiled(x), torch.zeros(2, 2))
    with ZeroAdd(), DoubleMul():
        compiled(x)
    with DoubleMul(), ZeroAdd():
        compiled(x)
    with ZeroAdd():
        torch.testing.assert_close(compiled(x), torch.zeros(2, 2))
    torch.testing.assert_close(compiled(x), x + 1)
    assert cnt.frame_count == 4
    assert cnt.frame_count == helpers.count_torch_graphs(fn, lambda f: [_under(modes, f, x) for modes in _STACKS])


_STACKS = [(), (ZeroAdd,), (ZeroAdd, DoubleMul), (DoubleMul, ZeroAdd), (ZeroAdd,), ()]


def _under(modes, f, x):
    with ModeStack(modes):
        return f(x)


class ModeStack:
    def __init__(self, classes) -> None:
        self.modes = [cls() for cls in classes]

    def __enter__(self):
        for mode in self.modes:
            mode.__enter__()

    def __exit__(self, *exc):
        for mode in reversed(self.modes):
            mode.__exit__(*exc)


@pytest.mark.parametrize("backend", BACKENDS)
def test_state_the_handler_reads_is_guarded_and_its_writes_replayed(backend):
    cnt = CompileCounterWithBackend(backend)

    def fn(x):
        return x.sin() + 1

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.randn(3)
    with Counter() as mode:
        compiled(x)
        assert mode.count == 2  # sin, add: as eager counts them
        compiled(x)  # its count is 2 now, not 0: traced again
        assert mode.count == 4
    with Counter() as mode:
        compiled(x)  # a new mode at 0: the first entry
        assert mode.count == 2
    assert cnt.frame_count == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_function_state_is_guarded(backend):
    """Under `DisableTorchFunction` modes are not consulted: an entry traced with the handler
    does not run there."""
    cnt = CompileCounterWithBackend(backend)

    def fn(x):
        return torch.add(x, 3)

    compiled = stenograph.compile(fn, backend=cnt)
    x = torch.ones(2, 2)
    with ZeroAdd():
        with torch._C.DisableTorchFunctionSubclass():
            torch.testing.assert_close(compiled(x), torch.zeros(2, 2))
        with torch._C.DisableTorchFunction():
            torch.testing.assert_close(compiled(x), x + 3)
    assert cnt.frame_count == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_handlers_pass_calls_down(backend):
    """Inside a handler its own mode is off the stack: its calls reach the mode below."""

    def fn(x):
        return torch.mul(x, 3) + torch.add(x, 1)

    compiled = stenograph.compile(fn, backend=backend, fullgraph=True)
    x = torch.ones(2, 2)
    with Recorder() as outer, DoubleMul():
        expected = fn(x)
    with Recorder() as outer_compiled, DoubleMul():
        result = compiled(x)
    torch.testing.assert_close(result, expected)
    assert outer_compiled.seen == outer.seen == ["mul", "mul", "add", "add"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_through_a_handler(backend):
    def fn(w):
        return torch.mul(w, w).sum()

    grads = []
    for f in (fn, stenograph.compile(fn, backend=backend)):
        w = torch.ones(3, requires_grad=True)
        with DoubleMul():
            out = f(w)
        out.backward()
        grads.append((out.detach(), w.grad))
    torch.testing.assert_close(grads[0], grads[1])


class Printer(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        print("call", getattr(func, "__name__", "?"))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_break_inside_a_handler_runs_it_eagerly(backend, capsys):
    """`print` in the handler breaks the graph at the operation that called it, which runs
    eagerly under the mode."""

    def fn(x):
        return (x + 1).sin() * 2

    cnt = CompileCounterWithBackend(backend)
    x = torch.randn(3)
    with Printer():
        expected = fn(x)
    eager_out = capsys.readouterr().out
    with Printer():
        result = stenograph.compile(fn, backend=cnt)(x)
    assert capsys.readouterr().out == eager_out == "call add\ncall sin\ncall mul\n"
    torch.testing.assert_close(result, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_len_under_a_handler_breaks_and_is_seen(backend):
    def fn(x):
        return len(x) + x.sum()

    x = torch.randn(3, 4)
    with Recorder() as eager_mode:
        expected = fn(x)
    with Recorder() as mode:
        result = stenograph.compile(fn, backend=backend)(x)
    assert mode.seen == eager_mode.seen == ["__len__", "sum", "add"]
    torch.testing.assert_close(result, expected)


def _factories_and_attributes(x):
    positions = torch.arange(x.shape[1], device=x.device) + 0
    empty = torch.tensor([], dtype=x.dtype)
    return torch.cat([empty, (x + positions).flatten()]), x.to(x.device)


@pytest.mark.parametrize("backend", BACKENDS)
def test_factories_and_attributes_fake_tensors_answer_themselves(backend):
    """Factories (which torch's overridable-function lists leave out) reach the handler, and so
    does `x.device`, which a fake tensor answers with a getter of its own."""
    x = torch.randn(2, 3)
    with Recorder() as eager_mode:
        expected = _factories_and_attributes(x)
    with Recorder() as mode:
        result = stenograph.compile(_factories_and_attributes, backend=backend, fullgraph=True)(x)
    assert mode.seen == eager_mode.seen
    assert eager_mode.seen[:4] == ["__get__", "__get__", "arange", "add"] and "tensor" in eager_mode.seen
    torch.testing.assert_close(result, expected)


def test_a_transformer_under_a_recording_mode():
    """HF BERT and GPT-2 (tiny): the handler sees eager's calls, in order, in one graph."""
    transformers = pytest.importorskip("transformers")
    bert = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=100
    )
    gpt2 = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100, bos_token_id=0, eos_token_id=0)
    for model in (transformers.BertModel(bert).eval(), transformers.GPT2Model(gpt2).eval()):
        tokens = torch.randint(0, 100, (1, 8))
        cnt = stenograph.testing.CompileCounter()
        compiled = stenograph.compile(model, backend=cnt)
        with torch.no_grad():
            with Recorder() as eager_mode:
                expected = model(tokens).last_hidden_state
            for _ in range(2):
                with Recorder() as mode:
                    result = compiled(tokens).last_hidden_state
                assert mode.seen == eager_mode.seen and len(mode.seen) > 70
                torch.testing.assert_close(result, expected)
        assert cnt.frame_count == 1


def _library_functions_and_builtins(x, lin):
    a = torch.nn.functional.relu(x)
    b = torch.split(a, 2)
    c = torch.nn.functional.dropout(a, 0.0, training=False)
    d = torch.norm(c)
    e = lin(x)
    return a, b, c, d, e, abs(x), max(x.sum(), x.mean()), x.sum() in [x.mean()]


@pytest.mark.parametrize("backend", BACKENDS)
def test_library_functions_and_builtins_are_seen_as_eager_shows_them(backend):
    """torch's Python functions hand the handler themselves (`F.relu`, a module's `F.linear`);
    builtins over tensors (`abs`, `max`, `in`) call tensor dunders eagerly: they break the graph
    and run under the mode."""
    x, lin = torch.randn(4, 4), torch.nn.Linear(4, 4)
    with Recorder() as eager_mode:
        expected = _library_functions_and_builtins(x, lin)
    with Recorder() as mode:
        result = stenograph.compile(_library_functions_and_builtins, backend=backend)(x, lin)
    assert mode.seen == eager_mode.seen
    assert eager_mode.seen[:5] == ["relu", "split", "dropout", "norm", "linear"]
    assert "__bool__" in eager_mode.seen and "__eq__" in eager_mode.seen
    torch.testing.assert_close(result, expected)


def _iterates_and_sets_grad(x, g):
    rows = [row * 2 for row in x]
    x.grad = g
    return rows


def test_iteration_and_tensor_property_writes_under_a_handler():
    x, g = torch.randn(2, 3, requires_grad=True), torch.ones(2, 3)
    with Recorder() as eager_mode:
        expected = _iterates_and_sets_grad(x, g)
    x.grad = None
    with Recorder() as mode:
        result = stenograph.compile(_iterates_and_sets_grad, backend="eager")(x, g)
    assert mode.seen == eager_mode.seen and "__set__" in mode.seen
    torch.testing.assert_close(result, expected)
    assert x.grad is g


def _mode_in_frame(x, y):
    with ZeroAdd():
        o = torch.add(x, 3)
    return torch.add(o, y)


def _mode_in_frame_with_break(x, y):
    with DoubleMul():
        a = torch.mul(x, y)
        stenograph.graph_break()
        b = torch.mul(a, y)
    return torch.mul(b, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_mode_entered_in_the_frame(backend):
    x, y = torch.ones(2, 2) + 1, torch.ones(2, 2) + 2
    cnt = CompileCounterWithBackend(backend)
    torch.testing.assert_close(stenograph.compile(_mode_in_frame, backend=cnt, fullgraph=True)(x, y), y)
    assert cnt.frame_count == 1
    torch.testing.assert_close(stenograph.compile(_mode_in_frame_with_break, backend=backend)(x, y), x * y * y * 4)
    assert _len_torch_function_stack() == 0


def _pushes(x, m):
    _push_on_torch_function_stack(m)
    return torch.mul(x, 3) + _len_torch_function_stack()


def _pops(x):
    m = _pop_torch_function_stack()
    return torch.mul(x, 3), m


def _pops_and_pushes_back_around_a_break(x):
    m = _pop_torch_function_stack()
    stenograph.graph_break()
    _push_on_torch_function_stack(m)
    return torch.mul(x, 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stack_changes_in_the_frame_are_replayed(backend):
    x = torch.ones(2)
    base, doubler = BaseTorchFunctionMode(), DoubleMul()
    _push_on_torch_function_stack(base)
    out = stenograph.compile(_pushes, backend=backend, fullgraph=True)(x, doubler)
    torch.testing.assert_close(out, torch.full((2,), 8.0))  # 3 * 2 (the pushed mode) + 2 modes
    assert _get_current_function_mode_stack() == [base, doubler]
    _pop_torch_function_stack()
    out, popped = stenograph.compile(_pops, backend=backend, fullgraph=True)(x)
    assert popped is base and _len_torch_function_stack() == 0
    torch.testing.assert_close(out, x * 3)
    _push_on_torch_function_stack(doubler)
    out = stenograph.compile(_pops_and_pushes_back_around_a_break, backend=backend)(x)
    torch.testing.assert_close(out, x * 6)
    assert _get_current_function_mode_stack() == [doubler]


def test_popping_an_empty_stack_raises_as_eager():
    with pytest.raises(RuntimeError, match="empty"):
        stenograph.compile(_pops, backend="eager")(torch.ones(2))
    stenograph.reset()
    with pytest.raises(stenograph.errors.Unsupported, match="empty torch function mode stack"):
        stenograph.compile(_pops, backend="eager", fullgraph=True)(torch.ones(2))


def _sets_default_device(x):
    torch.set_default_device("meta")
    return torch.ones(2), x + 1


def _clears_default_device(x):
    torch.set_default_device(None)
    return torch.ones(2), x + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_set_default_device_in_the_frame(backend):
    """Factories after it make tensors on the new device (the graph runs before the change is
    replayed, so it gives them the device); the stack is left as eager leaves it."""
    x = torch.ones(2)
    ones, _ = stenograph.compile(_sets_default_device, backend=backend, fullgraph=True)(x)
    assert ones.device == torch.device("meta") and torch.get_default_device() == torch.device("meta")
    stack = _get_current_function_mode_stack()
    assert len(stack) == 1 and type(stack[0]).__name__ == "DeviceContext"
    clears = stenograph.compile(_clears_default_device, backend=backend, fullgraph=True)
    ones, plus = clears(torch.ones(2, device="cpu"))
    assert ones.device == torch.device("cpu") and plus.device == torch.device("cpu")
    assert _len_torch_function_stack() == 0


def test_a_device_context_above_a_handler_runs_eagerly():
    """The trace does not follow a device context above a handler mode (it would change a
    factory's arguments before the handler sees them): the frame runs eagerly, as eager."""

    def fn(x):
        return torch.ones(2) + x

    x = torch.ones(2)
    context = torch.utils._device.DeviceContext(torch.device("cpu"))
    with Recorder() as mode:
        _push_on_torch_function_stack(context)
        result = stenograph.compile(fn, backend="eager")(x)
        try:
            stenograph.compile(fn, backend="eager", fullgraph=True)(x)
        except NoFramesCompiled as e:
            error = e
        _pop_torch_function_stack()
    assert mode.seen == ["ones", "add", "ones", "add"]
    assert "device context is above" in str(error)
    torch.testing.assert_close(result, torch.full((2,), 2.0))


def _factory(x):
    return torch.ones(2).device, x * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_device_context_is_traced_and_guarded(backend):
    """`torch.device(...)` and `set_default_device` are torch-function modes the trace follows:
    factories make tensors on their device; a frame compiled under one device does not run under
    another (or under none)."""
    cnt = stenograph.testing.CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_factory, backend=cnt)
    x = torch.ones(2)
    assert compiled(x)[0] == torch.device("cpu")
    with torch.device("meta"):
        assert compiled(x)[0] == _factory(x)[0] == torch.device("meta")
    assert cnt.frame_count == 2
    torch.set_default_device("meta")
    try:
        assert compiled(x)[0] == torch.device("meta")  # the same device: the same entry
    finally:
        torch.set_default_device(None)
    assert compiled(x)[0] == torch.device("cpu")
    assert cnt.frame_count == 2


def _adds_and_counts_modes(x):
    return torch.add(x, 1), torch._C._len_torch_function_stack()


def test_an_inert_function_mode_is_traced_and_guarded(cnt):
    """A mode whose handler is `BaseTorchFunctionMode`'s own only calls each function: the trace
    follows it (one graph under fullgraph, as torch.compile's); its presence is guarded."""
    compiled = stenograph.compile(_adds_and_counts_modes, backend=cnt, fullgraph=True)
    x = torch.ones(2)
    assert compiled(x)[1] == 0
    with torch.overrides.BaseTorchFunctionMode():
        result, depth = compiled(x)
        assert depth == 1 and torch.equal(result, x + 1)
    assert compiled(x)[1] == 0
    assert cnt.frame_count == 2


class DeclinesAdd(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.add:
            return NotImplemented
        return func(*args, **(kwargs or {}))


def test_a_handler_answering_not_implemented_raises_as_eager():
    def fn(x):
        return torch.add(x, 1) * 2

    errors = []
    for f in (fn, stenograph.compile(fn, backend="eager")):
        with DeclinesAdd(), pytest.raises(TypeError, match="NotImplemented") as raised:
            f(torch.ones(2))
        errors.append(re.sub(r"0x[0-9a-f]+", "0x", str(raised.value)))  # the mode's address
    assert errors[0] == errors[1]
