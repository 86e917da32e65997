"""`stenograph.export(fn)(*args)`: one graph module with the function's signature and its guards,
as `torch._dynamo.export` gives; every needed graph break named when there is no single graph."""

from __future__ import annotations

import copy
import functools
import inspect

import pytest
import torch
from helpers import assert_same, line_of
from torch import nn

import stenograph
from stenograph import entry
from stenograph.errors import Unsupported

SCALE = torch.tensor([2.0, 3.0, 4.0])


def _shaped(x, y, n=2):
    return torch.relu(x) * n + y.sum(), [x.shape[0]], {"mean": x.mean()}


def test_graph_module_takes_the_arguments_and_returns_eager_result(cnt):
    x, y = torch.randn(3), torch.randn(2)
    result = stenograph.export(_shaped)(x, y)
    gm, guards = result  # a named pair, as torch's ExportResult
    assert isinstance(gm, torch.fx.GraphModule) and result.graph_module is gm and result.guards is guards
    assert_same(gm(x, y), _shaped(x, y))
    x2, y2 = torch.randn(3), torch.randn(2)
    assert_same(gm(x2, y2), _shaped(x2, y2))  # new values, same shapes: the graph still fits
    assert_same(gm(x2, y=y2), _shaped(x2, y2))  # keyword arguments bind to the placeholders
    # as torch._dynamo.export's: one placeholder per pytree leaf of the call's (args, kwargs)
    assert [n.name for n in gm.graph.find_nodes(op="placeholder")] == ["arg0", "arg1"]
    assert gm._in_spec == torch.utils._pytree.tree_flatten(((x, y), {}))[1]
    assert cnt.frame_count == 0  # nothing was compiled
    assert not [c for c in entry.all_caches() if c.code is _shaped.__code__]


def test_guards_say_which_calls_the_graph_fits():
    x, y = torch.randn(3), torch.randn(2)
    _, guards = stenograph.export(_shaped, assume_static_by_default=True)(x, y)
    texts = list(guards)
    assert len(guards) == len(texts) > 0
    assert any("L['x']" in t and "size=[3]" in t for t in texts), texts
    assert any("L['n'] == 2" in t for t in texts), texts
    assert guards.check(torch.randn(3), torch.randn(2))
    assert not guards.check(torch.randn(4), torch.randn(2))  # another shape
    assert not guards.check(x, y, n=3)  # n was specialised
    assert not guards.check(x.double(), y)
    assert "L['y']" in str(guards)
    assert guards.failure(x, y) is None
    assert "L['n'] == 2" in guards.failure(x, y, n=3)
    assert "size=[3]" in guards.failure(torch.randn(4), y)


def test_mark_dynamic_gives_a_graph_for_every_size():
    def f(x):
        return x.reshape(-1, 2).sum(0) * x.shape[0]

    x = torch.randn(6)
    stenograph.mark_dynamic(x, 0)
    gm, guards = stenograph.export(f)(x)
    for size in (6, 8, 10):
        other = torch.randn(size)
        assert guards.check(other)
        assert_same(gm(other), f(other))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.norm = nn.BatchNorm1d(4)
        self.plain = torch.ones(4)  # a tensor attribute, neither parameter nor buffer

    def forward(self, x, scale=1.0):
        return self.norm(self.fc(x)) * scale + self.plain


def test_module_parameters_and_buffers_are_attributes_of_the_graph_module():
    model = Block()
    reference = copy.deepcopy(model)
    x = torch.randn(5, 3)
    gm, guards = stenograph.export(model)(x)
    assert [n.name for n in gm.graph.find_nodes(op="placeholder")] == ["arg0"]  # scale: its default
    assert gm.get_parameter("fc.weight") is model.fc.weight
    assert gm.get_buffer("norm.running_mean") is model.norm.running_mean
    assert set(model.state_dict()) <= set(gm.state_dict())
    # training BatchNorm: running stats updated in place as eager does, on the module's own tensors
    out = gm(x)
    expected = reference(x)
    assert_same(out, expected)
    assert_same(model.norm.running_mean, reference.norm.running_mean)
    # gradients reach the module's parameters
    out.sum().backward()
    expected.sum().backward()
    assert_same(model.fc.weight.grad, reference.fc.weight.grad)
    assert guards.check(torch.randn(5, 3))


def test_compiled_function_and_module_are_exported_from_their_originals(cnt):
    model = nn.Linear(3, 2)
    x = torch.randn(2, 3)
    gm, _ = stenograph.export(stenograph.compile(model, backend=cnt))(x)
    assert_same(gm(x), model(x))
    gm, _ = stenograph.export(stenograph.compile(_shaped, backend=cnt))(x[0], x[1])
    assert_same(gm(x[0], x[1]), _shaped(x[0], x[1]))
    assert cnt.frame_count == 0


def test_arguments_inside_containers_and_globals_and_closures():
    offset = torch.tensor([1.0, -1.0, 0.5])

    def f(pair, options):
        return pair[0] * SCALE + pair[1] * options["w"] + offset

    args = ([torch.randn(3), torch.randn(3)], {"w": torch.randn(3)})
    gm, guards = stenograph.export(f)(*args)
    assert_same(gm(*args), f(*args))
    fresh = ([torch.randn(3), torch.randn(3)], {"w": torch.randn(3)})
    assert_same(gm(*fresh), f(*fresh))  # read from the new containers on each call
    assert guards.check(*fresh)  # the closure's cells are passed to the guard
    assert not guards.check([torch.randn(3)], {"w": torch.randn(3)})
    assert len(gm.graph.find_nodes(op="get_attr")) == 2  # SCALE and offset, held as constants


def _breaks_twice(x):
    x = x + 1
    print("exported?")
    if x.sum().item() > 0:
        return x * 2
    return x


def test_graph_breaks_raise_unsupported_naming_every_one(capsys):
    x = torch.ones(3)
    with pytest.raises(Unsupported) as info:
        stenograph.export(_breaks_twice)(x)
    message = str(info.value)
    assert "2 graph break(s)" in message
    assert "print" in message and ".item()" in message
    assert f"{__file__}:{line_of(_breaks_twice, 'print(')}" in message
    assert f"{__file__}:{line_of(_breaks_twice, '.item()')}" in message
    assert len(info.value.break_reasons) == 2
    assert info.value.location == f"{__file__}:{line_of(_breaks_twice, 'print(')}"
    assert capsys.readouterr().out == "exported?\n"  # run once to find the breaks
    assert not [c for c in entry.all_caches() if c.code is _breaks_twice.__code__]


def test_what_a_graph_cannot_do_is_refused_clearly():
    log = []

    def appends(x):
        log.append(1)
        return x + 1

    with pytest.raises(Unsupported, match="changes Python objects outside it"):
        stenograph.export(appends)(torch.randn(2))

    class Box:
        def __init__(self, t):
            self.t = t

    def boxes(x):
        return Box(x + 1)

    with pytest.raises(Unsupported, match="an exported graph returns tensors"):
        stenograph.export(boxes)(torch.randn(2))

    def guarded(x):
        try:
            yield x + 1
        finally:
            log.append("closed")  # eagerly when the frame drops it; a graph cannot

    def drops(x):
        return next(guarded(x)) * 2

    with pytest.raises(Unsupported, match="left suspended inside a try/with block"):
        stenograph.export(drops)(torch.randn(2))


def test_bad_input_gets_clear_errors():
    with pytest.raises(TypeError, match="needs a Python function or nn.Module"):
        stenograph.export(42)
    with pytest.raises(TypeError, match="needs a Python function or nn.Module"):
        stenograph.export(torch.sin)
    x, y = torch.randn(3), torch.randn(2)
    with pytest.warns(FutureWarning, match=r"use export\(f\)\(\*args, \*\*kwargs\)"):
        gm, _ = stenograph.export(_shaped, x, y)  # torch's older call form: warns, then exports
    assert_same(gm(x, y), _shaped(x, y))
    with pytest.warns(FutureWarning, match=r"use explain\(f\)"):
        assert stenograph.explain(_shaped, x, y).graph_count == 1


def test_same_interface_as_torch_dynamo_export():
    """Both give (graph_module, guards) whose graph module maps the arguments to eager's result."""
    model = Block().eval()
    x = torch.randn(5, 3)
    theirs, _ = torch._dynamo.export(model)(x)
    ours, guards = stenograph.export(model)(x)
    other = torch.randn(5, 3)
    assert_same(ours(other), theirs(other))
    assert_same(ours(other), model(other))
    assert guards.check(other)
    assert sorted(n for n, _ in ours.named_parameters()) == sorted(n for n, _ in model.named_parameters())


def test_dynamic_true_makes_every_size_and_int_symbolic():
    def f(x, n):
        return x.reshape(2, -1).sum(1) * n

    gm, guards = stenograph.export(f, dynamic=True)(torch.randn(6), 3)
    for size, n in ((6, 3), (10, 4), (4, 5)):
        x = torch.randn(size)
        assert guards.check(x, n)
        assert_same(gm(x, n), f(x, n))
    assert not guards.check(torch.randn(5), 3)  # odd sizes cannot be reshaped to 2 rows
    with pytest.raises(TypeError, match="None, True or False"):
        stenograph.export(f, dynamic="yes")


# ---------------------------------------------------------------------------------------------
# torch._dynamo.export's other arguments (torch 2.13's behaviour is the contract)


def _pair_sum(xs, y, *, z=1):
    return xs[0] + xs[1] * y + z


def test_same_signature_false_takes_the_flat_graph_inputs_as_torchs():
    """Without the signature rewrite the graph takes what it reads from the arguments, flattened
    in the order it reads them, and returns a flat tuple: called as torch's is."""
    xs, y = [torch.randn(3), torch.randn(3)], torch.randn(3)
    for aten_graph in (False, True):
        gm, _ = stenograph.export(_pair_sum, same_signature=False, aten_graph=aten_graph)(xs, y, z=2)
        theirs, _ = torch._dynamo.export(_pair_sum, same_signature=False, aten_graph=aten_graph)(xs, y, z=2)
        names = [n.name for n in gm.graph.find_nodes(op="placeholder")]
        assert names == ["l_xs_0_", "l_xs_1_", "l_y_"]  # torch's names too (its ATen graph renames them)
        assert len(names) == len(theirs.graph.find_nodes(op="placeholder"))
        flat = (*xs, y)
        assert_same(gm(*flat), (_pair_sum(xs, y, z=2),))
        assert_same(gm(*flat), theirs(*flat))
    gm, _ = stenograph.export(_pair_sum)(xs, y, z=2)
    assert_same(gm(xs, y, z=2), _pair_sum(xs, y, z=2))  # the default: called as the function is


def test_tracing_mode_and_assume_static_by_default():
    """torch's export: sizes symbolic with assume_static_by_default=False (ints stay constants),
    static in the "fake" and "real" tracing modes."""

    def f(x, n):
        return x * n

    x = torch.randn(4)
    _, guards = stenograph.export(f, assume_static_by_default=False)(x, 2)
    assert guards.check(torch.randn(7), 2) and not guards.check(torch.randn(7), 3)
    for mode in ("fake", "real"):
        _, guards = stenograph.export(f, tracing_mode=mode, aten_graph=True)(x, 2)
        assert not guards.check(torch.randn(7), 2)
    gm, guards = stenograph.export(f, tracing_mode="symbolic")(x, 2)
    assert guards.check(torch.randn(7), 2) and not guards.check(torch.randn(7), 3)  # the default, as torch's
    assert not guards.check(torch.randn(1), 2)  # sizes 0 and 1 are specialised
    longer = torch.randn(7)
    assert_same(gm(longer, 2), f(longer, 2))  # the graph fits other sizes
    with pytest.raises(ValueError, match="takes symbolic, fake, real"):
        stenograph.export(f, tracing_mode="concrete")
    with pytest.raises(TypeError, match="assume_static_by_default= or dynamic=/dynamic_shapes=, not both"):
        stenograph.export(f, dynamic=True, assume_static_by_default=False)
    with pytest.raises(TypeError, match="specialize_float: float arguments are specialised"):
        stenograph.export(f, specialize_float=False)


def test_sizes_are_symbolic_by_default_as_torch_dynamo_export():
    """torch._dynamo.export's default (`assume_static_by_default=False`): the graph serves other
    sizes, computed from them, and its guards accept them; ints and floats are specialised."""

    def grow(x):
        return x.new_zeros(x.shape[0] * 2) + x.sum()

    def trim(x):
        return x[: x.shape[0] - 1]

    def flag(x, scale=0.5):
        return x.sum() * scale + torch.scalar_tensor(x.shape[0] > 4)

    for fn in (grow, trim, flag):
        for aten in (False, True):
            gm, guards = stenograph.export(fn, aten_graph=aten)(torch.ones(6, 4))
            for shape in ((8, 4), (3, 4), (6, 7)):
                other = torch.randn(shape)
                assert guards.check(other), (fn.__name__, shape)
                assert_same(gm(other), fn(other))
    _, guards = stenograph.export(flag)(torch.ones(6, 4), 0.5)
    assert guards.check(torch.ones(3, 4), 0.5) and not guards.check(torch.ones(3, 4), 2.0)


def test_star_args_and_kwargs_are_exported_as_torchs():
    """`*args`/`**kwargs` beyond the named parameters: placeholders per leaf, the graph module's
    parameters named `{args}_{i}` and by keyword (torch._dynamo.export's names)."""

    def f(*args, **kw):
        return args[0] + kw["k"]

    def g(x, *rest, scale=2, **extra):
        return x * scale + rest[1] - extra["z"]

    class Star(nn.Module):
        def forward(self, *args):
            return args[0].sin() + args[1]

    a, b = torch.randn(2), torch.randn(2)
    gm, guards = stenograph.export(f)(a, k=b)
    assert list(inspect.signature(gm.forward).parameters) == ["args_0", "k"]
    assert_same(gm(b, k=a), f(b, k=a)) and guards.check(b, k=a)
    gm, _ = stenograph.export(g)(a, b, a, z=b)
    assert list(inspect.signature(gm.forward).parameters) == ["x", "rest_0", "rest_1", "z"]
    assert_same(gm(b, a, b, z=a), g(b, a, b, z=a))
    gm, _ = stenograph.export(Star())(a, b)
    assert_same(gm(b, a), Star()(b, a))


def test_nodes_carry_their_module_stack_and_source_function():
    """As torch._dynamo.export's: each operation names the module calls it was made in
    (`nn_module_stack`, outermost first) and what made it (`source_fn_stack`); parameters read as
    attributes name the modules holding them; placeholders carry their `val`, in both graphs."""

    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return torch.cos(self.lin(x)).relu() + 1

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Inner()

        def forward(self, x):
            return self.block(x) * 2

    for aten in (False, True):
        gm, _ = stenograph.export(Outer(), aten_graph=aten)(torch.randn(4, 4))
        ops = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
        assert ops and all(n.meta["source_fn_stack"] for n in ops)
        stacks = [list(n.meta["nn_module_stack"].values()) for n in ops]
        assert [("L['self'].block", Inner), ("L['self'].block.lin", nn.Linear)] in stacks
        assert [("L['self'].block", Inner)] in stacks and [] in stacks  # `* 2` is Outer's own
        weight = next(n for n in gm.graph.nodes if n.op == "get_attr" and n.target.endswith("weight"))
        assert list(weight.meta["nn_module_stack"].values())[-1] == ("L['self'].block.lin", nn.Linear)
        (placeholder,) = gm.graph.find_nodes(op="placeholder")
        assert placeholder.meta["val"].shape[1] == 4


def test_decorated_functions_and_methods_keep_their_signature():
    """A function or an nn.Module method wrapped by a `functools.wraps` decorator taking
    `*args, **kwargs`: the graph's parameters are the original's names, as torch's (the method
    was refused)."""

    def passing(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)

        return wrapper

    @passing
    def scaled(pos0, pos1=1.0, *rest, kw0, kw1=2.0, **more):
        return pos0 * pos1 + kw0 * kw1 + sum(rest) + sum(more.values())

    class Holder(nn.Module):
        @passing
        def method(self, pos0, *rest, kw0, **more):
            return pos0 + kw0 + sum(rest) + sum(more.values())

    a, b, c, d, e = (torch.randn(3) for _ in range(5))
    gm, _ = stenograph.export(scaled)(a, b, c, kw0=d, extra=e)
    assert list(inspect.signature(gm.forward).parameters) == ["pos0", "pos1", "rest_0", "kw0", "extra"]
    assert_same(gm(e, d, c, kw0=b, extra=a), scaled(e, d, c, kw0=b, extra=a))
    holder = Holder()
    gm, _ = stenograph.export(holder.method)(a, b, kw0=c, extra=d)
    assert list(inspect.signature(gm.forward).parameters) == ["pos0", "rest_0", "kw0", "extra"]
    assert_same(gm(d, c, kw0=b, extra=a), holder.method(d, c, kw0=b, extra=a))
