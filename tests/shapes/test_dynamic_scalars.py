"""Automatic dynamic for Python numbers read from anywhere, and `specialize_int`/`specialize_float`.

An int or float that changes between calls, whether an argument, a global, a closure cell or an
attribute, is a constant in the first graph and symbolic from its first change on: one recompile,
then none, as torch.compile does. Ints that are attributes of an nn.Module stay constants (torch's
`allow_unspec_int_on_nn_module` is off), and the `specialize_*` settings keep every number a
constant. Each case counts torch.compile's graphs for the same calls.
"""

from collections.abc import Callable

import helpers
import pytest
import torch
from torch import nn

import stenograph
from stenograph.testing import CompileCounterWithBackend

SCALE = 1.5
COUNT = 2


class Box:
    def __init__(self, value):
        self.value = value


class Registry:
    step = 1


class Scaled(nn.Module):
    def __init__(self, scale, repeat) -> None:
        super().__init__()
        self.scale = scale
        self.repeat = repeat

    def forward(self, x):
        return x.repeat(self.repeat) * self.scale


def _run(cnt, fn: Callable, values, update: Callable, make_args: Callable) -> int:
    """Set each value in turn and call compiled and eager `fn`; returns torch.compile's count."""
    compiled = stenograph.compile(fn, backend=cnt)
    for v in values:
        update(v)
        args = make_args()
        helpers.assert_same(compiled(*args), fn(*args))

    def peer(torch_compiled):
        for v in values:
            update(v)
            torch_compiled(*make_args())

    return helpers.count_torch_graphs(fn, peer)


def _x():
    return (torch.arange(4.0),)


def _global_float(x):
    return x * SCALE + 1


def _global_int(x):
    return x.repeat(COUNT) + COUNT


def _set_global(name):
    def update(v):
        globals()[name] = v

    return update


CASES = {
    "global float": lambda: (_global_float, [1.5, 2.5, 3.5, 4.5], _set_global("SCALE")),
}


def _closure_case(values):
    scale = values[0]

    def fn(x):
        return x * scale - scale

    def update(v):
        nonlocal scale
        scale = v

    return fn, values, update


def _attribute_case(values):
    box = Box(values[0])

    def fn(x):
        return (x + box.value) * box.value

    def update(v):
        box.value = v

    return fn, values, update


def _class_attribute_case(values):
    def fn(x):
        return x + Registry.step

    def update(v):
        Registry.step = v

    return fn, values, update


CASES["closure float"] = lambda: _closure_case([0.5, 0.25, 0.75, 2.0])
CASES["closure int"] = lambda: _closure_case([3, 4, 5, 6])
CASES["object attribute float"] = lambda: _attribute_case([0.5, 0.25, 0.75, 2.0])
CASES["object attribute int"] = lambda: _attribute_case([3, 4, 5, 6])
CASES["class attribute int"] = lambda: _class_attribute_case([3, 4, 5, 6])


# torch.compile keeps ints read from a class reached from a global constants (one graph per value);
# stenograph follows them like any other number (ints reached from globals stay constants in both:
# `test_a_global_int_stays_a_constant`)
TORCH_GRAPHS = {"class attribute int": 4}


@pytest.fixture(autouse=True)
def _restore_globals():
    yield
    globals().update(SCALE=1.5, COUNT=2)
    Registry.step = 1


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_changing_number_goes_dynamic_after_one_change(cnt, case):
    fn, values, update = CASES[case]()
    peer = _run(cnt, fn, values, update, _x)
    assert cnt.frame_count == 2  # a constant, then symbolic from its first change
    if torch.__version__.startswith("2.13"):  # the peer's counts, measured with torch 2.13
        assert peer == TORCH_GRAPHS.get(case, 2)
    inputs = [p.meta["example_value"] for p in cnt.graphs[1].graph.nodes if p.op == "placeholder"]
    assert len([v for v in inputs if isinstance(v, (torch.SymInt, torch.SymFloat))]) == 1


@pytest.mark.parametrize("case", sorted(CASES))
def test_identical_values_do_not_recompile(cnt, case):
    fn, values, update = CASES[case]()
    _run(cnt, fn, [values[0]] * 3, update, _x)
    assert cnt.frame_count == 1


@pytest.mark.parametrize("setting, case", [("specialize_float", "global float"), ("specialize_int", "closure int")])
def test_specialize_settings_keep_numbers_constant(cnt, setting, case):
    fn, values, update = CASES[case]()
    compiled = stenograph.compile(fn, backend=cnt)
    with stenograph.config.patch(**{setting: True}):
        for v in values:
            update(v)
            helpers.assert_same(compiled(*_x()), fn(*_x()))
        assert cnt.frame_count == len(values)  # one entry per value
        update(values[1])
        compiled(*_x())
        assert cnt.frame_count == len(values)  # each guarded on its value


def test_module_float_attribute_goes_dynamic_but_int_attribute_stays_constant(cnt):
    model = Scaled(0.5, 2)

    def update_scale(v):
        model.scale = v

    assert _run(cnt, model, [0.5, 1.5, 2.5], update_scale, _x) == 2
    assert cnt.frame_count == 2
    cnt.clear()
    stenograph.reset()

    def update_repeat(v):
        model.repeat = v

    assert _run(cnt, model, [2, 3, 4], update_repeat, _x) == 3
    assert cnt.frame_count == 3


def test_allow_unspec_int_on_nn_module_makes_a_changed_module_int_dynamic(cnt):
    # torch's own test (test_modules.py, under the same patch): a constant, then symbolic
    model = Scaled(0.5, 2)

    def update_repeat(v):
        model.repeat = v

    with (
        stenograph.config.patch(allow_unspec_int_on_nn_module=True),
        torch._dynamo.config.patch(allow_unspec_int_on_nn_module=True),
    ):
        assert _run(cnt, model, [2, 3, 4, 5], update_repeat, _x) == 2
    assert cnt.frame_count == 2


def test_a_dynamic_number_changing_type_recompiles(cnt):
    fn, values, update = CASES["closure int"]()
    compiled = stenograph.compile(fn, backend=cnt)
    for v in [*values, 2.5, 3.5]:
        update(v)
        helpers.assert_same(compiled(*_x()), fn(*_x()))
    assert cnt.frame_count == 3  # constant 3, a symbolic int, a symbolic float


@pytest.mark.parametrize(
    "fn",
    [_global_int, lambda x: torch.zeros(COUNT, 2) + x[:COUNT].unsqueeze(1)],
    ids=["in arithmetic", "as a shape"],
)
def test_a_global_int_stays_a_constant(cnt, fn):
    # torch.compile specialises ints reached from globals (a module's settings), whatever
    # `dynamic=` says: one graph per value, each guarded on it (floats there go dynamic)
    peer = _run(cnt, fn, [2, 3, 4, 5, 3], _set_global("COUNT"), lambda: (torch.arange(8.0),))
    assert cnt.frame_count == 4
    if torch.__version__.startswith("2.13"):  # the peer's count, measured with torch 2.13
        assert peer == 4
    stenograph.reset()
    cnt.clear()
    compiled = stenograph.compile(fn, backend=cnt, dynamic=True)
    for value in (2, 3):
        _set_global("COUNT")(value)
        helpers.assert_same(compiled(torch.arange(8.0)), fn(torch.arange(8.0)))
    assert cnt.frame_count == 2


@pytest.mark.parametrize("case", ["closure float", "object attribute int", "global float"])
def test_dynamic_numbers_under_aot_eager(case):
    cnt = CompileCounterWithBackend("aot_eager")
    fn, values, update = CASES[case]()
    _run(cnt, fn, values, update, _x)
    assert cnt.frame_count == 2


def test_a_number_where_a_tensor_was_passed_is_dynamic_at_once(cnt):
    """An argument switching between a tensor and an int: the int is dynamic from its first
    compile (its kind changed), so a new int value reuses that entry: 3 compiles, as
    torch.compile."""

    def fn(x, y):
        return x * y

    compiled = stenograph.compile(fn, backend=cnt)
    calls = [(2, True), (3, 3), (4, True), (4, True), (5, 4), (5, 4), (6, True)]
    for n, y in calls:
        x = torch.randn(n)
        y = torch.randn(n) if y is True else y
        torch.testing.assert_close(compiled(x, y), fn(x, y))
    assert cnt.frame_count == 3


@pytest.mark.parametrize(("static", "compiles"), [(True, 4), (False, 2)])
def test_force_parameter_static_shapes(cnt, static, compiles):
    """Parameters passed as arguments: static sizes by default (a compile per size); with the
    setting off, automatic dynamic shapes apply to them as to other tensors."""
    w = torch.nn.Parameter(torch.randn(3, 2))

    def fn(x):
        return x @ w

    with stenograph.config.patch(force_parameter_static_shapes=static):
        compiled = stenograph.compile(fn, backend=cnt)
        for n in (1, 10, 11, 15, 15):
            x = torch.nn.Parameter(torch.randn(n, 3))
            torch.testing.assert_close(compiled(x), fn(x))
    assert cnt.frame_count == compiles


def test_hasattr_of_a_symbolic_number_answers_as_of_any_int(cnt):
    """A tensor then an int in one argument (the int dynamic at once): `is_tensor_like` asks
    `hasattr(n, "__torch_function__")`, which is False for any int."""

    def fn(x):
        if torch.overrides.is_tensor_like(x):
            return (x * 2,)
        return (torch.ones(3) + x, hasattr(x, "no_such_attribute"))

    compiled = stenograph.compile(fn, backend=cnt, fullgraph=True)
    for arg in (torch.randn(3), 4, 5):
        helpers.assert_same(compiled(arg), fn(arg))
    assert cnt.frame_count == 2


class _Conv(nn.Conv2d):
    def forward(self, x):
        return nn.functional.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


def test_a_module_tuple_attribute_stays_constant(cnt):
    # torch.compile's own test (test_user_defined_nn_module_dynamic): `self.stride` of three
    # modules is three graphs, not a symbolic stride after the first change (a tuple passed as
    # an argument is guarded item by item and its ints may go dynamic: tests/python/test_containers.py)
    x = torch.randn(1, 4, 16, 16)
    for stride in (1, 2, 3):
        torch.manual_seed(0)
        module = _Conv(4, 4, kernel_size=(2, 2), stride=(stride, stride))
        helpers.assert_same(stenograph.compile(module, backend=cnt, fullgraph=True)(x), module(x))
    assert cnt.frame_count == 3
