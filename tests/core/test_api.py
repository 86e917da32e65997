"""Public API surface of the capture core: entry points, backends, config, bad input."""

from __future__ import annotations

import uuid

import pytest
import torch
from helpers import assert_same
from torch import nn

import stenograph
from stenograph.errors import InvalidBackend, InvalidConfig, StenographError, Unsupported


def _double_plus_one(x):
    return x * 2 + 1


def _prints(x):
    print("api-debug", x.shape)
    return x + 1


# ---------------------------------------------------------------------------------------------
# entry points


def test_compile_passes_positional_and_keyword_arguments(cnt):
    """compile(): positional and keyword arguments reach the function unchanged."""

    def fn(x, y, *, scale=1.0, shift=0):
        return (x + y) * scale + shift

    compiled = stenograph.compile(fn, backend=cnt)
    x, y = torch.randn(3), torch.randn(3)
    assert_same(compiled(x, y, scale=2.5, shift=1), fn(x, y, scale=2.5, shift=1))
    assert_same(compiled(x, y=y), fn(x, y=y))
    assert cnt.frame_count == 2


def test_compile_with_options_returns_decorator(cnt):
    """compile(backend=..., fullgraph=True) without a model is a decorator."""
    decorator = stenograph.compile(backend=cnt, fullgraph=True)
    compiled = decorator(_double_plus_one)
    x = torch.randn(4)
    assert_same(compiled(x), _double_plus_one(x))
    assert cnt.frame_count == 1


def test_compile_disable_true_runs_eagerly(cnt):
    """compile(..., disable=True) runs the function eagerly and hands no graph to the backend."""
    compiled = stenograph.compile(_double_plus_one, backend=cnt, disable=True)
    x = torch.randn(4)
    assert_same(compiled(x), _double_plus_one(x))
    assert cnt.frame_count == 0


@pytest.mark.parametrize("variable", ["STENOGRAPH_DISABLE", "TORCHDYNAMO_DISABLE", "TORCH_COMPILE_DISABLE"])
def test_disabling_environment_variable_leaves_the_target_unchanged(cnt, monkeypatch, variable):
    """A compile() made while the environment says so (torch's names too) is a no-op."""
    monkeypatch.setenv(variable, "1")
    assert stenograph.compile(_double_plus_one, backend=cnt) is _double_plus_one
    monkeypatch.setenv(variable, "0")
    compiled = stenograph.compile(_double_plus_one, backend=cnt)
    x = torch.randn(4)
    assert_same(compiled(x), _double_plus_one(x))
    assert cnt.frame_count == 1


def test_optimize_decorator(cnt):
    """optimize(backend) used as a decorator compiles the function."""
    compiled = stenograph.optimize(cnt)(_double_plus_one)
    x = torch.randn(4)
    assert_same(compiled(x), _double_plus_one(x))
    assert_same(compiled(x), _double_plus_one(x))
    assert cnt.frame_count == 1


def test_optimize_nopython_raises_unsupported(cnt):
    """optimize(backend, nopython=True) behaves like fullgraph=True: print raises Unsupported."""
    compiled = stenograph.optimize(cnt, nopython=True)(_prints)
    with pytest.raises(Unsupported) as excinfo:
        compiled(torch.randn(2))
    assert "print" in str(excinfo.value)


def test_compiled_module_wrapper_behaves_like_the_module(cnt):
    """The module wrapper exposes submodules as attributes, the same parameters, the original
    state_dict keys, and passes train()/eval() to every submodule."""
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    compiled = stenograph.compile(model, backend=cnt)
    assert getattr(compiled, "0") is model[0]
    params_c, params_m = list(compiled.parameters()), list(model.parameters())
    assert len(params_c) == len(params_m) == 4
    assert all(a is b for a, b in zip(params_c, params_m))
    assert list(compiled.state_dict()) == list(model.state_dict())
    compiled.eval()
    assert not model.training and not model[0].training
    compiled.train()
    assert model.training and model[2].training
    x = torch.randn(5, 4)
    assert_same(compiled(x), model(x))
    assert cnt.frame_count == 1


def test_compiled_module_wrapper_has_the_original_length_and_truth(cnt):
    empty = [nn.ModuleList(), nn.Sequential(), nn.ModuleDict()]
    assert [bool(stenograph.compile(m, backend=cnt)) for m in empty] == [False, False, False]
    assert len(stenograph.compile(nn.ModuleList([nn.ReLU(), nn.ReLU()]), backend=cnt)) == 2
    linear = stenograph.compile(nn.Linear(1, 1), backend=cnt)
    assert bool(linear)  # no length: true, as the module is (torch.compile's wrapper raises TypeError)
    with pytest.raises(TypeError, match="has no len"):
        len(linear)


def test_compiled_submodule_is_listed_with_its_original_under_one_name(cnt):
    """A walk from a parent (what FSDP2's root does to find its blocks' state) meets the wrapper
    and then the original, both under the original's name; parameter names and state_dict keys
    are the original's."""
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    plain = [(name, type(m)) for name, m in model.named_modules()]
    layer = model[0]
    model[0] = stenograph.compile(layer, backend=cnt)
    assert [(n, m) for n, m in model.named_modules()][:3] == [("", model), ("0", model[0]), ("0", layer)]
    assert [(name, type(m)) for name, m in model.named_modules() if m is not model[0]] == plain
    assert list(model[0].modules()) == [model[0], layer]
    assert [n for n, _ in model.named_parameters()] == ["0.weight", "0.bias"]
    assert list(model.state_dict()) == ["0.weight", "0.bias"]


class _Tagged:
    """A mixin put in front of a module's class, as FSDP2's fully_shard does."""


def test_replacing_the_class_of_a_compiled_module_changes_the_wrapper_only(cnt):
    """`module.__class__ = ...` (fully_shard's conversion) is the wrapper's own: the original
    keeps its class, and the wrapper still delegates and runs compiled."""
    layer = nn.Linear(4, 4)
    compiled = stenograph.compile(layer, backend=cnt)
    compiled.__class__ = type("TaggedOptimizedModule", (_Tagged, type(compiled)), {})
    assert isinstance(compiled, _Tagged) and isinstance(compiled, stenograph.OptimizedModule)
    assert type(layer) is nn.Linear and compiled.weight is layer.weight
    x = torch.randn(2, 4)
    assert_same(compiled(x), layer(x))
    assert cnt.frame_count == 1


def test_hooks_registered_on_the_wrapper_run_around_the_compiled_forward(cnt):
    """FSDP2 registers its unshard/reshard hooks on the module it converts (the wrapper)."""
    layer = nn.Linear(4, 4)
    compiled = stenograph.compile(layer, backend=cnt)
    calls = []
    compiled.register_forward_pre_hook(lambda mod, args: calls.append("pre"))
    compiled.register_forward_hook(lambda mod, args, out: out * 2)
    x = torch.randn(2, 4)
    assert_same(compiled(x), layer(x) * 2)
    assert calls == ["pre"] and cnt.frame_count == 1
    assert not layer._forward_hooks and not layer._forward_pre_hooks


def test_is_compiling_true_while_tracing_false_outside(cnt):
    """is_compiling() is False in eager code and True in the traced code (one graph)."""

    def fn(x):
        if stenograph.is_compiling():
            return x + 1
        return x - 1

    assert stenograph.is_compiling() is False
    x = torch.randn(3)
    assert_same(stenograph.compile(fn, backend=cnt, fullgraph=True)(x), x + 1)
    assert cnt.frame_count == 1
    assert_same(fn(x), x - 1)


# ---------------------------------------------------------------------------------------------
# backends


def test_backend_by_name_eager():
    """backend="eager" by name traces the function and runs the captured graph."""

    def fn(x):
        return x * 2 + (1 if stenograph.is_compiling() else 100)

    compiled = stenograph.compile(fn, backend="eager", fullgraph=True)
    x = torch.randn(4)
    assert_same(compiled(x), x * 2 + 1)
    assert_same(fn(x), x * 2 + 100)


def test_compile_counter_with_backend():
    """testing.CompileCounterWithBackend("eager") counts graphs and runs them."""
    from stenograph.testing import CompileCounterWithBackend

    counter = CompileCounterWithBackend("eager")
    compiled = stenograph.compile(_double_plus_one, backend=counter)
    x = torch.randn(4)
    assert_same(compiled(x), _double_plus_one(x))
    assert counter.frame_count == 1


def test_compile_counter_clear(cnt):
    """CompileCounter records graphs and ops and clear() resets them."""
    compiled = stenograph.compile(_double_plus_one, backend=cnt)
    compiled(torch.randn(4))
    assert cnt.frame_count == 1 and cnt.op_count == 2 and len(cnt.graphs) == 1
    assert isinstance(cnt.graphs[0], torch.fx.GraphModule)
    cnt.clear()
    assert cnt.frame_count == 0 and cnt.op_count == 0 and cnt.graphs == []


def test_list_backends():
    """list_backends() lists inductor; eager is registered (possibly under a debug tag)."""
    assert "inductor" in stenograph.list_backends()
    assert "eager" in stenograph.list_backends(exclude_tags=())


def test_register_backend_by_name():
    """A backend registered by name is listed and used when compiling with that name."""
    name = f"core_test_backend_{uuid.uuid4().hex[:8]}"
    seen = []

    def my_backend(gm, example_inputs):
        seen.append((gm, list(example_inputs)))
        return gm.forward

    stenograph.register_backend(name=name)(my_backend)
    assert name in stenograph.list_backends()
    x = torch.randn(4)
    assert_same(stenograph.compile(_double_plus_one, backend=name)(x), _double_plus_one(x))
    assert len(seen) == 1
    gm, example_inputs = seen[0]
    assert isinstance(gm, torch.fx.GraphModule)
    assert len(example_inputs) == 1 and example_inputs[0].shape == (4,)


# ---------------------------------------------------------------------------------------------
# bad input


def test_unknown_backend_name_explicit_call():
    """An unknown backend name raises InvalidBackend (a ValueError) listing known names."""
    with pytest.raises(InvalidBackend) as excinfo:
        stenograph.compile(_double_plus_one, backend="nonexistent")(torch.randn(2))
    assert isinstance(excinfo.value, ValueError)
    message = str(excinfo.value)
    assert "nonexistent" in message
    assert "inductor" in message


def test_unknown_backend_name_decorator_form():
    """The decorator form with an unknown backend name raises InvalidBackend too."""
    with pytest.raises(InvalidBackend) as excinfo:
        stenograph.compile(backend="nonexistent")(_double_plus_one)(torch.randn(2))
    assert "inductor" in str(excinfo.value)


def test_non_callable_model_is_rejected():
    """compile(42) gives a clear error naming the type instead of failing later obscurely."""
    with pytest.raises((TypeError, StenographError)) as excinfo:
        stenograph.compile(42, backend="eager")(torch.randn(2))
    assert "int" in str(excinfo.value)


def test_unknown_config_key():
    """config.patch(nonexistent=1) raises InvalidConfig; so do reads of unknown settings."""
    with pytest.raises(InvalidConfig):
        with stenograph.config.patch(nonexistent=1):
            pass
    with pytest.raises(InvalidConfig):
        _ = stenograph.config.nonexistent


def test_unknown_mode_lists_valid_modes():
    """mode="bogus" raises an error that lists the valid modes."""
    with pytest.raises((ValueError, RuntimeError, StenographError)) as excinfo:
        stenograph.compile(_double_plus_one, mode="bogus")(torch.randn(2))
    message = str(excinfo.value)
    assert "bogus" in message
    for mode in ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"):
        assert mode in message, mode


# ---------------------------------------------------------------------------------------------
# config


def test_config_recompile_limit_default_and_alias():
    """recompile_limit defaults to 8 and cache_size_limit reads and patches the same setting."""
    assert stenograph.config.recompile_limit == 8
    assert stenograph.config.cache_size_limit == 8
    with stenograph.config.patch(cache_size_limit=3):
        assert stenograph.config.recompile_limit == 3
    assert stenograph.config.recompile_limit == 8


def test_config_patch_as_decorator():
    """config.patch(...) works as a decorator and restores the value afterwards."""

    @stenograph.config.patch(recompile_limit=2)
    def read():
        return stenograph.config.recompile_limit

    assert read() == 2
    assert stenograph.config.recompile_limit == 8


def test_config_monkeypatched_and_restored():
    """pytest's monkeypatch (9.2+ deletes what it found missing from a module's __dict__): the
    setting reads the patched value, and undoing the patch restores the default."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stenograph.config, "recompile_limit", 3)
        assert stenograph.config.recompile_limit == 3
    assert stenograph.config.recompile_limit == 8
    with pytest.raises(InvalidConfig):
        del stenograph.config.no_such_setting


def _adds(x, a):
    return x + a


def test_call_with_wrong_arguments_raises_and_keeps_compiling(cnt):
    """A call Python refuses (a missing argument) raises its TypeError and compiles nothing; the
    function is not given up: later calls compile and run as usual, with no warning."""
    compiled = stenograph.compile(_adds, backend=cnt)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'a'"):
        compiled(torch.ones(2))
    assert cnt.frame_count == 0
    torch.testing.assert_close(compiled(torch.ones(2), 2), torch.full((2,), 3.0))
    torch.testing.assert_close(compiled(torch.ones(2), 2), torch.full((2,), 3.0))
    assert cnt.frame_count == 1


def test_compile_a_c_function(cnt):
    """torch.sin and torch.cos compiled directly: one graph each, eager results, name kept."""
    x = torch.randn(4)
    sin = stenograph.compile(torch.sin, backend=cnt)
    cos = stenograph.compile(torch.cos, backend=cnt)
    torch.testing.assert_close(sin(x), torch.sin(x))
    torch.testing.assert_close(cos(x), torch.cos(x))
    assert cnt.frame_count == 2
    assert sin.__name__ == "sin"


def _two_args(x, y=1):
    return x + y


def test_wrong_arguments_name_the_users_function():
    compiled = stenograph.compile(_two_args, backend="eager")
    compiled(torch.ones(2))  # an entry exists: its guard is what binds the next calls' arguments
    with pytest.raises(TypeError, match=r"^_two_args\(\) takes from 1 to 2 positional arguments"):
        compiled(torch.ones(2), 2, 3)
    with pytest.raises(TypeError, match=r"^_two_args\(\) got an unexpected keyword argument 'z'"):
        compiled(torch.ones(2), z=1)


def test_stenographs_errors_are_runtime_errors(cnt):
    """As torch.compile's are: code catching RuntimeError around a compiled call sees a backend
    failure or a refused construct under fullgraph."""

    def failing_backend(gm, example_inputs):
        raise ValueError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        stenograph.compile(lambda x: x + 1, backend=failing_backend, fullgraph=True)(torch.ones(2))
    with pytest.raises(RuntimeError, match="graph_break"):
        stenograph.compile(lambda x: stenograph.graph_break() or x, backend=cnt, fullgraph=True)(torch.ones(2))
    assert issubclass(stenograph.StenographError, RuntimeError)
    assert issubclass(stenograph.Unsupported, RuntimeError)


def test_jit_trace_of_a_compiled_function_is_refused(cnt):
    """As torch.compile's: under torch.jit.trace sizes are tensors (it was an internal error,
    hidden by running eagerly)."""
    compiled = stenograph.compile(lambda x: x + 1, backend=cnt, dynamic=True)
    with pytest.raises(RuntimeError, match="torch.jit.trace of a function stenograph compiles"):
        torch.jit.trace(compiled, torch.randn(3))
    assert cnt.frame_count == 0


class _Scriptable(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x).relu()


class _HoldsAScriptModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.scripted = torch.jit.script(_Scriptable())

    def forward(self, x):
        return self.scripted(x) + 1


@pytest.mark.parametrize("make", [torch.jit.script, lambda m: torch.jit.freeze(torch.jit.script(m.eval()))])
def test_compiling_a_torchscript_module_is_refused_by_name(make):
    """As torch.compile refuses it (a RuntimeError); it was an AttributeError from inside."""
    scripted = make(_Scriptable())
    with pytest.raises(RuntimeError, match="does not support compiling torch.jit.script .* neither does stenograph"):
        stenograph.compile(scripted, backend="eager")


def test_a_torchscript_submodule_runs_eagerly_at_a_break(cnt):
    """Its call is a graph break; the frame's other operations are compiled (it was an
    AttributeError: the class's `forward` of a script module cannot be read from the class)."""
    model, x = _HoldsAScriptModule(), torch.randn(2, 3, requires_grad=True)
    out = stenograph.compile(model, backend=cnt)(x)
    assert_same(out, model(x))
    assert cnt.frame_count == 1
    out.sum().backward()
    assert model.scripted.lin.weight.grad is not None
    with pytest.raises(Unsupported, match="ScriptMethod"):
        stenograph.compile(_HoldsAScriptModule(), backend="eager", fullgraph=True)(x)
