"""Forward hooks and pre-hooks of submodules called inside a compiled frame.

nn.Module's own call path is inlined when the module (or every module, through the global
tables) has forward hooks, so the hooks run in its order and what they return replaces the
inputs or the output as in eager; the hook tables are guarded by their keys, so registering or
removing a hook compiles again. torch.compile also gives one graph for each of these.
"""

import helpers
import pytest
import torch
from torch import nn

import stenograph

from ._support import check, t


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.act = nn.Tanh()

    def forward(self, x, scale=1.0):
        return self.act(self.lin(x) * scale).sum()


def _hooked(register) -> Net:
    torch.manual_seed(1)
    net = Net()
    register(net.lin)
    return net


HOOKS = {
    "pre_hook_replaces_input": lambda m: m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,)),
    "pre_hook_returns_a_bare_tensor": lambda m: m.register_forward_pre_hook(lambda mod, args: args[0] + 1),
    "pre_hook_returns_none": lambda m: m.register_forward_pre_hook(lambda mod, args: None),
    "hook_replaces_output": lambda m: m.register_forward_hook(lambda mod, args, out: out - args[0]),
    "hook_returns_none": lambda m: m.register_forward_hook(lambda mod, args, out: None),
    "pre_hook_with_kwargs": lambda m: m.register_forward_pre_hook(
        lambda mod, args, kwargs: ((args[0] * 3,), kwargs), with_kwargs=True
    ),
    "hook_with_kwargs": lambda m: m.register_forward_hook(
        lambda mod, args, kwargs, out: out * len(kwargs) + 1, with_kwargs=True
    ),
    "prepended_hook_runs_first": lambda m: (
        m.register_forward_hook(lambda mod, args, out: out * 2),
        m.register_forward_hook(lambda mod, args, out: out + 1, prepend=True),
    ),
}


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_submodule_hook_is_inlined(cnt, name):
    net = _hooked(HOOKS[name])
    check(net, lambda i: (t(2, 4, seed=i, grad=True),), cnt, grads=True)


def test_hook_that_prints_breaks_where_it_prints(cnt, capsys):
    """The hooked call is made at the break: its hooks run eagerly around its own compiled
    forward (the Linear's graph), then the code after it: 2 graphs, as torch.compile gives."""
    net = _hooked(lambda m: m.register_forward_hook(lambda mod, args, out: print("out", out.shape)))
    # torch 2.11's torch.compile gives 1 graph here (measured on the GPU machine), 2.13's gives 2
    newer_torch = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 13)
    check(net, lambda i: (t(2, 4, seed=i),), cnt, capsys, graphs=2, torch_graphs=2, peer=newer_torch)


def test_hook_with_state_of_its_own(cnt):
    calls = []

    def hook(mod, args, out):
        calls.append(len(calls))
        return out * len(calls)

    net = _hooked(lambda m: m.register_forward_hook(hook))
    compiled = stenograph.compile(net, backend=cnt)
    x = t(2, 4)
    expected = [net(x) for _ in range(3)]
    calls.clear()
    actual = [compiled(x) for _ in range(3)]
    helpers.assert_same(actual, expected)
    assert calls == [0, 1, 2]


def test_registering_and_removing_hooks_recompiles(cnt):
    net = _hooked(lambda m: None)
    compiled = stenograph.compile(net, backend=cnt)
    x = t(2, 4)
    torch.testing.assert_close(compiled(x), net(x))
    torch.testing.assert_close(compiled(x), net(x))
    assert cnt.frame_count == 1
    handle = net.lin.register_forward_hook(lambda mod, args, out: out * 5)
    torch.testing.assert_close(compiled(x), net(x))
    torch.testing.assert_close(compiled(x), net(x))
    assert cnt.frame_count == 2
    second = net.lin.register_forward_pre_hook(lambda mod, args: (args[0] - 1,))
    torch.testing.assert_close(compiled(x), net(x))
    assert cnt.frame_count == 3
    second.remove()
    handle.remove()
    torch.testing.assert_close(compiled(x), net(x))  # the entry without hooks fits again
    assert cnt.frame_count == 3
    replaced = net.lin.register_forward_hook(lambda mod, args, out: out * 7)  # a new handle id
    torch.testing.assert_close(compiled(x), net(x))
    assert cnt.frame_count == 4
    replaced.remove()


@pytest.mark.parametrize("kind", ["pre", "post", "post_with_kwargs"])
def test_global_hooks_are_inlined_and_guarded(cnt, kind):
    register = nn.modules.module
    net = _hooked(lambda m: None)

    def step(x):
        return net(x) * 2

    compiled = stenograph.compile(step, backend=cnt)
    x = t(2, 4)
    torch.testing.assert_close(compiled(x), step(x))
    seen: list[str] = []

    def record(mod, *rest):
        seen.append(type(mod).__name__)
        return None if kind == "pre" else rest[-1] * 2

    if kind == "pre":
        handle = register.register_module_forward_pre_hook(record)
    else:
        handle = register.register_module_forward_hook(record, with_kwargs=kind == "post_with_kwargs")
    try:
        expected = step(x)
        eager_seen = list(seen)
        seen.clear()
        actual = compiled(x)
        torch.testing.assert_close(actual, expected)
        assert seen == eager_seen  # appended while tracing is replayed once per call
        seen.clear()  # (the list's length is guarded)
        torch.testing.assert_close(compiled(x), expected)
        assert seen == eager_seen
    finally:
        handle.remove()
        # (torch's handle leaves the id in the with_kwargs table; torch.compile then warns)
        register._global_forward_hooks_with_kwargs.pop(handle.id, None)
    assert cnt.frame_count == 2
    torch.testing.assert_close(compiled(x), step(x))
    assert cnt.frame_count == 2  # back to the first entry


def test_full_backward_hook_runs_with_correct_gradients(cnt):
    grads_seen = []
    net = _hooked(lambda m: m.register_full_backward_hook(lambda mod, gin, gout: grads_seen.append(gout[0].clone())))

    def run(model):
        grads_seen.clear()
        x = t(2, 4, grad=True)
        model(x).backward()
        return x.grad, list(grads_seen)

    expected = run(net)
    actual = run(stenograph.compile(net, backend=cnt))
    helpers.assert_same(actual, expected)
