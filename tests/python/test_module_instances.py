"""Instances of one nn.Module class share compiled code.

A module reached from the frame is guarded by its class, not its identity; its parameters and
buffers are graph inputs, and what the trace read of it (attributes, members, hooks, the training
flag, the shape of its tree) is guarded where it was read. So 200 blocks of one class compile
once, and an instance that differs in anything the trace relied on compiles again.
"""

import copy

import helpers
import pytest
import torch
from torch import nn

import stenograph
from stenograph.testing import CompileCounterWithBackend

BACKENDS = ["eager", "aot_eager"]


class Block(nn.Module):
    def __init__(self, scale: float = 2.0, width: int = 4) -> None:
        super().__init__()
        self.lin = nn.Linear(4, width)
        self.register_buffer("shift", torch.randn(width))
        self.scale = scale

    def forward(self, x):
        return torch.relu(self.lin(x)) * self.scale + self.shift


class Node(nn.Module):
    """One level of a chain: `child` is the next level, or None at the leaf."""

    def __init__(self, depth: int) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.child = Node(depth - 1) if depth > 1 else None

    def forward(self, x):
        x = torch.tanh(self.lin(x))
        if self.child is not None:
            x = self.child(x)
        return x


def _run_and_compare(compiled, reference, module, *args):
    """Call compiled and eager, compare results, then backward both and compare gradients."""
    out, expected = compiled(*args), reference(*args)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    expected.sum().backward()
    for (name, p), (_, q) in zip(module.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=lambda m, name=name: f"{name}: {m}")
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_200_instances_of_one_class_compile_one_graph(backend):
    cnt = CompileCounterWithBackend(backend)
    blocks = [Block() for _ in range(200)]
    references = copy.deepcopy(blocks)
    compiled = [stenograph.compile(b, backend=cnt) for b in blocks]
    x = torch.randn(3, 4)
    for c, b, r in zip(compiled, blocks, references):
        _run_and_compare(c, r, b, x)
    assert cnt.frame_count == 1
    for c, r in zip(compiled, references):
        torch.testing.assert_close(c(x), r(x))
    assert cnt.frame_count == 1
    graph = cnt.graphs[0]
    # weight, bias and buffer are inputs of the graph, not constants baked into it
    assert len(helpers.placeholders(graph)) == 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_module_tree_100_deep_compiles_once_per_kind_of_level(backend):
    """The chain is deeper than `config.inline_depth_limit` (64), so each level's call of its
    child is a graph break and every level runs its own frame; all levels share 3 graphs: the
    root (its input needs no grad), the inner levels, and the leaf (whose `child` is a plain
    None attribute, not a submodule)."""
    cnt = CompileCounterWithBackend(backend)
    root = Node(100)
    reference = copy.deepcopy(root)
    compiled = stenograph.compile(root, backend=cnt)
    x = torch.randn(2, 4)
    _run_and_compare(compiled, reference, root, x)
    assert cnt.frame_count == 3
    torch.testing.assert_close(compiled(x), reference(x))
    assert cnt.frame_count == 3


def test_50_trees_of_one_shape_share_one_graph(cnt):
    trees = [Node(5) for _ in range(50)]
    references = copy.deepcopy(trees)
    x = torch.randn(2, 4)
    for tree, reference in zip(trees, references):
        _run_and_compare(stenograph.compile(tree, backend=cnt), reference, tree, x)
    assert cnt.frame_count == 1


def test_distinct_linears_called_from_one_function_share_one_graph(cnt):
    layers = [nn.Linear(4, 4) for _ in range(20)]

    def f(layer, x):
        return layer(x) * 2

    compiled = stenograph.compile(f, backend=cnt)
    x = torch.randn(3, 4)
    for layer in layers:
        torch.testing.assert_close(compiled(layer, x), f(layer, x))
    assert cnt.frame_count == 1

    def run(fn):
        for layer in layers:
            fn(layer, x)

    assert helpers.count_torch_graphs(f, run) == 1


# -- an instance that differs in what the trace read compiles again ------------------------------


def _two_instances_check(cnt, first, second, *args):
    """`second` differs from `first` in something the trace read: it gets its own graph, each
    gets eager's result, and calling both again compiles nothing."""
    stenograph.reset()
    cnt.clear()
    f_first, f_second = copy.deepcopy(first), copy.deepcopy(second)
    c_first = stenograph.compile(first, backend=cnt)
    c_second = stenograph.compile(second, backend=cnt)
    torch.testing.assert_close(c_first(*args), f_first(*args))
    assert cnt.frame_count == 1
    torch.testing.assert_close(c_second(*args), f_second(*args))
    assert cnt.frame_count == 2
    torch.testing.assert_close(c_first(*args), f_first(*args))
    torch.testing.assert_close(c_second(*args), f_second(*args))
    assert cnt.frame_count == 2


def test_attribute_value_read_by_the_trace_is_guarded(cnt):
    _two_instances_check(cnt, Block(scale=2.0), Block(scale=3.0), torch.randn(3, 4))


def test_parameter_shape_is_guarded(cnt):
    _two_instances_check(cnt, Block(width=4), Block(width=6), torch.randn(3, 4))


def test_parameter_requires_grad_is_guarded(cnt):
    frozen = Block()
    frozen.lin.weight.requires_grad_(False)
    _two_instances_check(cnt, Block(), frozen, torch.randn(3, 4))


def test_training_flag_is_guarded(cnt):
    class Drop(nn.Module):
        def forward(self, x):
            return x * 2 if self.training else x - 1

    _two_instances_check(cnt, Drop(), Drop().eval(), torch.randn(3))


def test_submodule_structure_is_guarded(cnt):
    class Wrap(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x) + 1

    _two_instances_check(cnt, Wrap(nn.Linear(4, 4)), Wrap(nn.Tanh()), torch.randn(3, 4))
    _two_instances_check(cnt, Node(2), Node(3), torch.randn(3, 4))


def test_sequential_length_is_guarded(cnt):
    class Stack(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.layers = nn.Sequential(*[nn.Linear(4, 4) for _ in range(n)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    _two_instances_check(cnt, Stack(2), Stack(3), torch.randn(3, 4))


def test_hooks_on_a_submodule_are_guarded(cnt):
    hooked = Block()
    hooked.lin.register_forward_hook(lambda mod, args, out: out * 10)
    _two_instances_check(cnt, Block(), hooked, torch.randn(3, 4))


def test_global_module_hook_registered_after_compiling_runs(cnt):
    block = Block()
    compiled = stenograph.compile(block, backend=cnt)
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(x), block(x))
    handle = nn.modules.module.register_module_forward_hook(lambda mod, args, out: out + 100)
    try:
        torch.testing.assert_close(compiled(x), block(x))
    finally:
        handle.remove()
    assert cnt.frame_count == 2  # the forward without the hook, then one with it inlined


def test_forward_replaced_on_one_instance_is_not_shared(cnt):
    layers = [nn.Linear(4, 4), nn.Linear(4, 4)]
    layers[1].forward = lambda x: x * 0 - 5

    def f(layer, x):
        return layer(x) + 1

    compiled = stenograph.compile(f, backend=cnt)
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(layers[0], x), f(layers[0], x))
    torch.testing.assert_close(compiled(layers[1], x), f(layers[1], x))
    assert cnt.frame_count == 2
    torch.testing.assert_close(compiled(layers[0], x), f(layers[0], x))
    torch.testing.assert_close(compiled(layers[1], x), f(layers[1], x))
    assert cnt.frame_count == 2


def test_shared_or_distinct_submodules_are_guarded(cnt):
    class Pair(nn.Module):
        def __init__(self, shared):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = self.a if shared else nn.Linear(4, 4)

        def forward(self, x):
            if self.a is self.b:
                return self.a(x)
            return self.a(x) + self.b(x) * 0 - 1

    _two_instances_check(cnt, Pair(shared=False), Pair(shared=True), torch.randn(3, 4))


def test_tied_or_untied_parameters_in_a_walk_are_guarded(cnt):
    class Walk(nn.Module):
        def __init__(self, tied):
            super().__init__()
            self.a = nn.Linear(4, 4, bias=False)
            self.b = nn.Linear(4, 4, bias=False)
            if tied:
                self.b.weight = self.a.weight

        def forward(self, x):
            total = x
            for p in self.parameters():
                total = total + p.sum()
            return total * len(list(self.named_modules()))

    _two_instances_check(cnt, Walk(tied=False), Walk(tied=True), torch.randn(3))


def test_children_walk_sees_a_module_where_none_was(cnt):
    class Slots(nn.Module):
        def __init__(self, filled):
            super().__init__()
            self.register_module("extra", nn.Tanh() if filled else None)
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            for child in self.children():
                x = child(x)
            return x

    _two_instances_check(cnt, Slots(filled=False), Slots(filled=True), torch.randn(3, 4))


# -- classes that change how a module is called or read ------------------------------------------


class Doubled(nn.Module):
    """Its own __call__ around nn.Module's."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) + 1

    def __call__(self, x):
        return super().__call__(x) * 2


def test_a_module_class_with_its_own_call_runs_it(cnt):
    module = Doubled()
    compiled = stenograph.compile(module, backend=cnt)
    x = torch.randn(3, 4)
    _run_and_compare(compiled, copy.deepcopy(module), module, x)
    torch.testing.assert_close(compiled(x), module(x))
    assert cnt.frame_count == 1


def test_a_submodule_with_its_own_call_runs_it(cnt):
    def f(layer, x):
        return layer(x) - 1

    compiled = stenograph.compile(f, backend=cnt)
    layers = [Doubled(), Doubled()]
    x = torch.randn(3, 4)
    for layer in layers:
        torch.testing.assert_close(compiled(layer, x), f(layer, x))
    assert cnt.frame_count == 1


def test_a_module_with_its_own_getattribute_is_read_for_real(cnt):
    class Answer(nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 1

        def __getattribute__(self, name):
            return 5 if name == "k" else super().__getattribute__(name)

        def forward(self, x):
            return x * self.k

    def f(module, x):
        return module(x) + 1

    x = torch.randn(3)
    torch.testing.assert_close(stenograph.compile(f, backend=cnt)(Answer(), x), f(Answer(), x))
    # the call breaks; forward breaks again reading `k`: `+ 1` and `x * k` are the graphs
    assert cnt.frame_count == 2


def test_a_module_with_its_own_getattr_is_read_for_real(cnt):
    class Renamed(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def __getattr__(self, name):
            if name == "lin":
                return torch.tanh
            return super().__getattr__(name)

        def forward(self, x):
            return self.lin(x)

    module = Renamed()
    x = torch.randn(3, 4)
    torch.testing.assert_close(stenograph.compile(module, backend=cnt)(x), module(x))
    assert cnt.frame_count == 1  # reading `lin` breaks; the call after it is the graph


# -- torch.nn modules without parameters created by the traced code -------------------------------


def test_loss_and_activation_modules_made_in_forward_are_traced(cnt):
    def f(x, y):
        loss_fct = nn.CrossEntropyLoss(ignore_index=1)
        act = nn.GELU(approximate="tanh")
        return loss_fct(act(x), y)

    compiled = stenograph.compile(f, backend=cnt)
    y = torch.tensor([0, 1, 2, 1])
    for seed in range(2):
        x = torch.randn(4, 3, generator=torch.Generator().manual_seed(seed), requires_grad=True)
        x_ref = x.detach().clone().requires_grad_(True)
        out, expected = compiled(x, y), f(x_ref, y)
        torch.testing.assert_close(out, expected)
        out.backward()
        expected.backward()
        torch.testing.assert_close(x.grad, x_ref.grad)
    assert cnt.frame_count == 1

    def run(fn):
        fn(torch.randn(4, 3), y)

    assert helpers.count_torch_graphs(f, run) == 1


def test_a_module_made_in_forward_crosses_a_break_as_a_new_equal_module(cnt, capsys):
    def f(x):
        act = nn.LeakyReLU(0.3)
        print("between")
        return act(x), act

    x = torch.randn(5)
    out, act = stenograph.compile(f, backend=cnt)(x)
    expected, _ = f(x)
    torch.testing.assert_close(out, expected)
    assert type(act) is nn.LeakyReLU and act.negative_slope == 0.3
    assert capsys.readouterr().out == "between\nbetween\n"
    assert cnt.frame_count == 1


def test_a_module_with_parameters_made_in_forward_runs_eagerly_with_the_same_rng(cnt):
    def f(x):
        return nn.Linear(3, 3)(x) + torch.rand(3)

    x = torch.randn(2, 3)
    torch.manual_seed(0)
    out = stenograph.compile(f, backend=cnt)(x)
    after = torch.rand(1)
    torch.manual_seed(0)
    torch.testing.assert_close(out, f(x))
    torch.testing.assert_close(after, torch.rand(1))
    assert cnt.frame_count == 1  # the call breaks; `+ torch.rand(3)` after it is the graph


def test_a_module_made_from_a_runtime_value_runs_eagerly(cnt):
    def f(x, slope):
        return nn.LeakyReLU(slope)(x) * 2

    x = torch.randn(5)
    compiled = stenograph.compile(f, backend=cnt)
    for slope in (0.1, 0.2):
        torch.testing.assert_close(compiled(x, slope), f(x, slope))
    # 0.1: one graph with the module made while tracing; 0.2 makes `slope` a symbolic input, so the
    # module cannot be made while tracing: a break at its creation, and `* 2` after it
    assert cnt.frame_count == 2


class _Deferring(nn.Module):
    """A wrapper whose own `__getattr__` defers to nn.Module's, then to the module it wraps (as
    PEFT-style wrappers do): parameters and attributes are found through it."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.register_parameter("a", nn.Parameter(torch.ones(4) * 2))

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "a_copy":
                return self.a
            return getattr(self.inner, name)

    def forward(self, x):
        return self.inner(x) * self.scale * self.a + self.weight.sum() * self.a_copy


def _deferring() -> _Deferring:
    torch.manual_seed(0)
    inner = nn.Linear(4, 4)
    inner.scale = 3.0
    return _Deferring(inner)


def test_module_with_its_own_getattr_matches_eager_with_gradients(cnt):
    eager, compiled_mod = _deferring(), _deferring()
    compiled = stenograph.compile(compiled_mod, backend=cnt, fullgraph=True)
    x = torch.randn(2, 4)
    helpers.assert_same(compiled(x), eager(x))
    eager(x).sum().backward()
    compiled(x).sum().backward()
    for (name, p), q in zip(eager.named_parameters(), compiled_mod.parameters()):
        helpers.assert_same(q.grad, p.grad, name)
    assert cnt.frame_count == 1


def test_attribute_found_through_own_getattr_is_guarded(cnt):
    mod = _deferring()
    compiled = stenograph.compile(mod, backend=cnt)
    x = torch.randn(2, 4)
    compiled(x)
    compiled(x)
    assert cnt.frame_count == 1
    mod.inner.scale = 5.0
    helpers.assert_same(compiled(x), mod(x))
    assert cnt.frame_count == 2
