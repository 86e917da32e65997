"""Native guard checks (guards/native_checks.cpp): they answer as the Python checks they replace.

Each table builds one guard set twice, with `config.native_guards` True and False, and asks both
guard functions about the same values. The compile tests show the fused module checks still
recompile when a hook is added, `training` flips or `forward` is overridden on the instance.
Tests that need the extension skip where the machine cannot build it (no compiler, no Python.h,
STENOGRAPH_NATIVE_GUARDS=0) and fail where a build here fails.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

import stenograph
from stenograph import config
from stenograph import entry as entries
from stenograph.errors import InvalidConfig, NativeGuardsUnavailable
from stenograph.guards import native
from stenograph.guards.guard_set import GuardSet
from stenograph.guards.sources import AttrSource, GlobalSource, ItemSource, LocalSource, ModuleMemberSource
from stenograph.module_hooks import HOOK_TABLES


@pytest.fixture(scope="module")
def extension():
    if config.native_guards is False:
        pytest.skip("native guard checks turned off (STENOGRAPH_NATIVE_GUARDS=0)")
    try:
        return native.load()
    except native.Unavailable as e:
        if e.environment:
            pytest.skip(f"native guard checks cannot be built here: {e}")
        raise


def _one_argument(x):
    return x


def both_guards(fill: Callable[[GuardSet], None]) -> tuple[Callable, Callable]:
    """The guard function of one guard set, built native and built Python (one parameter, x)."""
    return both_guards_of(fill, "___tensor", "___module")


def both_guards_of(fill: Callable[[GuardSet], None], *natives: str) -> tuple[Callable, Callable]:
    """As `both_guards`, the native one calling one of the native checks named `natives`."""
    built = []
    for setting in (True, False):
        guards = GuardSet()
        fill(guards)
        with config.patch(native_guards=setting):
            built.append(guards.build(_one_argument.__code__, None, "test"))
    native_guard, python_guard = built
    assert any(name in native_guard.__stenograph_source__ for name in natives)
    assert not any(f"___{kind}" in python_guard.__stenograph_source__ for kind in ("tensor", "module", "root"))
    return native_guard, python_guard


def agree(native_guard: Callable, python_guard: Callable, value: Any) -> bool:
    answer = native_guard(value)
    assert answer is python_guard(value), f"native {answer} != Python for {value!r:.80}"
    return answer


class MyTensor(torch.Tensor):
    pass


X = SimpleNamespace(source=LocalSource("x"))


def tensor_guards(example: torch.Tensor, fake: Any = None) -> tuple[Callable, Callable]:
    return both_guards(lambda guards: guards.tensor_match(X.source, example, fake))


def test_tensor_check_agrees_with_python_on_variations(extension):
    base = torch.randn(3, 4)
    native_guard, python_guard = tensor_guards(base)
    expected = [
        (base, True),
        (base.clone(), True),
        (torch.zeros(3, 4), True),
        (base.double(), False),
        (base.to(torch.float16), False),
        (torch.randn(4, 3), False),
        (torch.randn(3, 4, 1), False),
        (torch.randn(3), False),
        (torch.randn(4, 3).t(), False),  # same sizes, other strides
        (torch.randn(3, 8)[:, ::2], False),
        (base.clone().requires_grad_(), False),
        (nn.Parameter(base.clone()), False),
        (nn.Parameter(base.clone(), requires_grad=False), False),
        (base.as_subclass(MyTensor), False),
        (torch.empty(3, 4, device="meta"), False),
        (base.to_sparse(), False),
        (None, False),
        (3, False),
        ("x", False),
        ([base], False),
        (base.numpy(), False),
    ]
    for value, answer in expected:
        assert agree(native_guard, python_guard, value) is answer, value


def test_tensor_check_of_a_parameter_and_of_a_meta_tensor(extension):
    weight = nn.Parameter(torch.randn(2, 5))
    native_guard, python_guard = tensor_guards(weight)
    for value, answer in [
        (weight, True),
        (nn.Parameter(torch.zeros(2, 5)), True),
        (weight.detach(), False),  # a Tensor, not a Parameter
        (nn.Parameter(torch.zeros(2, 5), requires_grad=False), False),
        (nn.Parameter(torch.zeros(5, 2)), False),
    ]:
        assert agree(native_guard, python_guard, value) is answer
    meta = torch.empty(2, 3, device="meta")
    native_guard, python_guard = tensor_guards(meta)
    assert agree(native_guard, python_guard, torch.empty(2, 3, device="meta")) is True
    assert agree(native_guard, python_guard, torch.empty(2, 3)) is False
    assert agree(native_guard, python_guard, torch.empty(3, 2, device="meta")) is False


def test_sizes_left_to_shape_guards_are_not_checked(extension):
    # a fake whose first size (and the stride it makes) is symbolic: only the rest is checked
    fake = SimpleNamespace(shape=("s0", 4), stride=lambda: (4, 1))
    native_guard, python_guard = tensor_guards(torch.randn(3, 4), fake)
    for value, answer in [
        (torch.randn(3, 4), True),
        (torch.randn(9, 4), True),
        (torch.randn(9, 5), False),
        (torch.randn(9, 4, 1), False),
        (torch.randn(4, 9).t(), False),  # stride 1 in dimension 0 (4 is checked)
    ]:
        assert agree(native_guard, python_guard, value) is answer
    symbolic_stride = SimpleNamespace(shape=("s0", "s1"), stride=lambda: ("s1", 1))
    native_guard, python_guard = tensor_guards(torch.randn(3, 4), symbolic_stride)
    assert agree(native_guard, python_guard, torch.randn(7, 2)) is True
    assert agree(native_guard, python_guard, torch.randn(2, 7).t()) is False


def test_tensor_check_under_a_torch_function_mode_asks_python(extension):
    """The Python check's `v.dtype` goes through an active torch-function mode; so does the
    native check's answer (it hands the value to the Python form)."""
    seen = []

    class Spy(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    base = torch.randn(2, 2)
    native_guard, python_guard = tensor_guards(base)
    with Spy():
        assert agree(native_guard, python_guard, base) is True
        assert agree(native_guard, python_guard, base.double()) is False
    assert seen  # both consulted the mode


def module_guards(module: nn.Module, *, hooks: bool = True, forward: bool = True, flags: tuple = ("training",)):
    """A module's type check with the attribute checks a call of it adds."""
    source = LocalSource("x")

    def fill(guards: GuardSet) -> None:
        guards.type_match(source, module)
        if hooks:
            for table in HOOK_TABLES:
                guards.falsy(AttrSource(source, table), "no module hooks")
        if forward:
            guards.key_absent(AttrSource(source, "__dict__"), "forward", "forward not overridden")
        for flag in flags:
            guards.constant_match(AttrSource(source, flag), getattr(module, flag))

    return both_guards(fill)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.inplace = False

    def forward(self, x):
        return self.fc(x)


def test_module_check_agrees_with_python_on_variations(extension):
    block = Block()
    native_guard, python_guard = module_guards(block, flags=("training", "inplace"))
    assert agree(native_guard, python_guard, block) is True
    assert agree(native_guard, python_guard, Block()) is True
    for value in (nn.Linear(2, 2), None, 3, torch.randn(2)):
        assert agree(native_guard, python_guard, value) is False
    changes = [
        lambda b: b.register_forward_hook(lambda *a: None),
        lambda b: b.register_forward_pre_hook(lambda *a: None),
        lambda b: b.register_full_backward_hook(lambda *a: None),
        lambda b: b.register_full_backward_pre_hook(lambda *a: None),
        lambda b: b.eval(),
        lambda b: setattr(b, "inplace", True),
        lambda b: setattr(b, "forward", lambda x: x),
        lambda b: delattr(b, "training"),  # then Module.__getattr__ raises: the check fails
        lambda b: b.__dict__.pop("_forward_hooks"),
    ]
    for change in changes:
        changed = Block()
        change(changed)
        assert agree(native_guard, python_guard, changed) is False


def test_module_check_follows_changes_to_the_class(extension):
    """The native check reads instance dicts directly only while the class is as it was built
    against; a property shadowing an instance attribute (or any class change) makes it ask
    `getattr`, as Python does."""

    class Local(nn.Module):
        def forward(self, x):
            return x

    module = Local()
    native_guard, python_guard = module_guards(module)
    assert agree(native_guard, python_guard, module) is True
    Local.training = property(lambda self: False)
    try:
        assert agree(native_guard, python_guard, module) is False
    finally:
        del Local.training
    assert agree(native_guard, python_guard, module) is True
    Local.counter = 1  # an unrelated change: the answer stays
    assert agree(native_guard, python_guard, module) is True


def test_module_check_for_only_some_of_the_checks(extension):
    linear = nn.Linear(2, 2)
    for options in ({"hooks": False}, {"forward": False}, {"flags": ()}, {"hooks": False, "forward": False}):
        native_guard, python_guard = module_guards(linear, **options)
        assert agree(native_guard, python_guard, linear) is True
        assert agree(native_guard, python_guard, nn.Linear(2, 2).eval()) is (options.get("flags") == ())


def member_guards(module: nn.Module) -> tuple[Callable, Callable]:
    """A convolution's type check with the checks a call of it adds on its members: constant
    attributes (type and value), `is` / `is not` flags, its parameters (a tensor check, `bias is
    None`) and the keys of its module table."""
    source = LocalSource("x")

    def fill(guards: GuardSet) -> None:
        guards.type_match(source, module)
        for name in ("stride", "padding", "dilation", "groups", "padding_mode"):
            guards.constant_match(AttrSource(source, name), getattr(module, name))
        guards.not_identical(AttrSource(source, "transposed"), None)
        guards.constant_match(AttrSource(source, "scale"), module.scale)
        guards.tensor_match(ModuleMemberSource(source, "_parameters", "weight"), module.weight)
        guards.constant_match(ModuleMemberSource(source, "_parameters", "bias"), None)
        guards.dict_keys_match(AttrSource(source, "_modules"), module._modules)

    return both_guards(fill)


def scaled_conv() -> nn.Conv2d:
    conv = nn.Conv2d(2, 4, 3, bias=False)
    conv.scale = 0.5
    conv.act = nn.ReLU()
    return conv


class _OrderedParameters(dict):
    """A parameter table of another dict type: item reads go through `__getitem__`."""


def test_module_check_of_members_agrees_with_python(extension):
    conv = scaled_conv()
    native_guard, python_guard = member_guards(conv)
    assert "_parameters" not in native_guard.__stenograph_source__  # read inside the native check
    assert agree(native_guard, python_guard, conv) is True
    assert agree(native_guard, python_guard, scaled_conv()) is True
    changes = {
        "stride": lambda c: setattr(c, "stride", (2, 2)),
        "stride as a list": lambda c: setattr(c, "stride", [1, 1]),
        "padding_mode": lambda c: setattr(c, "padding_mode", "reflect"),
        "groups as a float": lambda c: setattr(c, "groups", 1.0),
        "scale": lambda c: setattr(c, "scale", 0.25),
        "scale as an int": lambda c: setattr(c, "scale", 1),
        "transposed None": lambda c: setattr(c, "transposed", None),
        "bias set": lambda c: setattr(c, "bias", nn.Parameter(torch.zeros(4))),
        "weight reshaped": lambda c: setattr(c, "weight", nn.Parameter(torch.zeros(4, 2, 1, 1))),
        "weight as a tensor": lambda c: c._parameters.__setitem__("weight", torch.zeros(4, 2, 3, 3)),
        "weight frozen": lambda c: c.weight.requires_grad_(False),
        "weight removed": lambda c: c._parameters.pop("weight"),
        "another submodule": lambda c: setattr(c, "extra", nn.Identity()),
        "submodules reordered": lambda c: c._modules.update(act=c._modules.pop("act"), first=None),
        "no module table": lambda c: c.__dict__.pop("_modules"),
    }
    for what, change in changes.items():
        changed = scaled_conv()
        change(changed)
        assert agree(native_guard, python_guard, changed) is False, what
    other_tables = scaled_conv()
    other_tables._parameters = _OrderedParameters(other_tables._parameters)
    assert agree(native_guard, python_guard, other_tables) is True
    other_tables._parameters.pop("weight")
    assert agree(native_guard, python_guard, other_tables) is False
    other_tables = scaled_conv()
    other_tables._modules = _OrderedParameters(other_tables._modules)  # the keys' type is checked
    assert agree(native_guard, python_guard, other_tables) is False


def test_module_check_of_members_follows_the_class(extension):
    """A class attribute shadowing a checked member makes the native check ask `getattr`."""

    class Local(nn.Conv2d):
        pass

    conv = Local(2, 4, 3, bias=False)
    conv.scale = 0.5
    conv.act = nn.ReLU()
    native_guard, python_guard = member_guards(conv)
    assert agree(native_guard, python_guard, conv) is True
    Local.stride = property(lambda self: (3, 3))
    try:
        assert agree(native_guard, python_guard, conv) is False
    finally:
        del Local.stride
    assert agree(native_guard, python_guard, conv) is True


def _helper(x):
    return x + 1


class _Marker:
    pass


def test_root_check_of_globals_agrees_with_python(extension):
    """Checks on names of a globals dict: identity (weakly held and not), type, a function's code."""
    space = {"__name__": "space", "helper": _helper, "marker": _Marker, "flag": True, "limit": 3}

    def fill(guards: GuardSet) -> None:
        guards.type_match(GlobalSource("helper", space), _helper)
        guards.code_match(GlobalSource("helper", space), _helper)
        guards.id_match(GlobalSource("marker", space), _Marker)
        guards.constant_match(GlobalSource("flag", space), True)
        guards.constant_match(GlobalSource("limit", space), 3)

    native_guard, python_guard = both_guards_of(fill, "___root")
    assert agree(native_guard, python_guard, None) is True
    assert native_guard.__stenograph_source__.count("___root") == 1
    changes = {
        "helper replaced": ("helper", lambda x: x),
        "helper not a function": ("helper", len),
        "marker replaced": ("marker", type("_Marker", (), {})),
        "flag off": ("flag", False),
        "limit as a float": ("limit", 3.0),
        "limit changed": ("limit", 4),
    }
    for what, (name, value) in changes.items():
        saved = space[name]
        space[name] = value
        try:
            assert agree(native_guard, python_guard, None) is False, what
        finally:
            space[name] = saved
    del space["marker"]
    assert agree(native_guard, python_guard, None) is False


def _make_counter(start):
    def counter(step=1, *, scale=2):
        return start + step * scale

    return counter


class _Holder:
    def method(self):
        return self


def test_root_check_reads_function_method_and_cell_slots_as_python(extension):
    """A function's code, defaults, keyword defaults, closure and globals, a cell's contents and a
    bound method's function and self, read from the objects' fields, agree with Python's lookup,
    also for an empty cell, a function without defaults and a value of another type."""
    holder = _Holder()
    space = {"__name__": "space", "counter": _make_counter(5), "bound": holder.method, "plain": _helper}

    def fill(guards: GuardSet) -> None:
        counter, bound, plain = (GlobalSource(name, space) for name in ("counter", "bound", "plain"))
        guards.type_match(counter, space["counter"])
        guards.code_match(counter, space["counter"])
        guards.constant_match(ItemSource(AttrSource(counter, "__defaults__"), 0), 1)
        guards.constant_match(ItemSource(AttrSource(counter, "__kwdefaults__"), "scale"), 2)
        cell = ItemSource(AttrSource(counter, "__closure__"), 0)
        guards.constant_match(AttrSource(cell, "cell_contents"), 5)
        guards.id_match(AttrSource(counter, "__globals__"), space["counter"].__globals__)
        guards.id_match(AttrSource(bound, "__func__"), _Holder.method)
        guards.id_match(AttrSource(bound, "__self__"), holder)
        guards.constant_match(AttrSource(plain, "__defaults__"), None)

    native_guard, python_guard = both_guards_of(fill, "___root")
    assert agree(native_guard, python_guard, None) is True
    counter = space["counter"]
    changes = {
        "defaults": lambda: setattr(counter, "__defaults__", (3,)),
        "keyword defaults": lambda: setattr(counter, "__kwdefaults__", {"scale": 4}),
        "cell contents": lambda: setattr(counter.__closure__[0], "cell_contents", 6),
        "empty cell": lambda: delattr(counter.__closure__[0], "cell_contents"),
        "another function": lambda: space.__setitem__("counter", _make_counter(6)),
        "not a function": lambda: space.__setitem__("counter", SimpleNamespace(__defaults__=(1,))),
        "method of another object": lambda: space.__setitem__("bound", _Holder().method),
        "plain gets defaults": lambda: setattr(_helper, "__defaults__", (1,)),
    }
    for what, change in changes.items():
        saved = dict(space), counter.__defaults__, counter.__kwdefaults__, counter.__closure__[0].cell_contents
        change()
        try:
            assert agree(native_guard, python_guard, None) is False, what
        finally:
            space.update(saved[0])
            counter.__defaults__, counter.__kwdefaults__ = saved[1], saved[2]
            counter.__closure__[0].cell_contents = saved[3]
            _helper.__defaults__ = None
        assert agree(native_guard, python_guard, None) is True, what


def test_module_check_of_missing_attributes_agrees_with_python(extension):
    """`getattr(m, name, default)` that found nothing: natively, as Module.__getattr__ looks."""
    conv = scaled_conv()
    source = LocalSource("x")

    def fill(guards: GuardSet) -> None:
        guards.type_match(source, conv)
        guards.attribute_absent(source, conv, "gate")

    native_guard, python_guard = both_guards_of(fill, "___module")
    assert agree(native_guard, python_guard, conv) is True
    for where in ("__dict__", "_parameters", "_buffers", "_modules"):
        changed = scaled_conv()
        getattr(changed, where)["gate"] = nn.Identity() if where == "_modules" else torch.zeros(1)
        assert agree(native_guard, python_guard, changed) is False, where
    nn.Conv2d.gate = None
    try:
        assert agree(native_guard, python_guard, scaled_conv()) is False
    finally:
        del nn.Conv2d.gate
    assert agree(native_guard, python_guard, scaled_conv()) is True


def test_type_check_alone_stays_python(extension):
    guards = GuardSet()
    guards.type_match(LocalSource("x"), nn.Linear(1, 1))
    with config.patch(native_guards=True):
        fn = guards.build(_one_argument.__code__, None, "test")
    assert "___module" not in fn.__stenograph_source__ and "type(x) is" in fn.__stenograph_source__


def test_tensor_subclass_checks_stay_python(extension):
    guards = GuardSet()
    guards.tensor_match(LocalSource("x"), torch.randn(2).as_subclass(MyTensor))
    with config.patch(native_guards=True):
        fn = guards.build(_one_argument.__code__, None, "test")
    assert "___tensor" not in fn.__stenograph_source__


# -- through compile: recompiles, reasons, guard source ----------------------------------------


@pytest.fixture(params=[True, False], ids=["native", "python"])
def guards_setting(request):
    if request.param:
        request.getfixturevalue("extension")
    with config.patch(native_guards=request.param):
        yield request.param


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(torch.relu(self.fc(x)))


def test_module_changes_recompile(guards_setting, cnt):
    net = Net().eval()
    compiled = stenograph.compile(net, backend=cnt)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), net(x))
    call_until_remembered(compiled, x)
    assert cnt.frame_count == 1

    handle = net.fc.register_forward_hook(lambda mod, args, out: out * 2)
    torch.testing.assert_close(compiled(x), net(x))
    assert cnt.frame_count == 2
    handle.remove()

    call_until_remembered(compiled, x)
    net.drop.train()  # dropout on: compare its effect through a seeded run
    torch.manual_seed(1)
    out = compiled(x)
    torch.manual_seed(1)
    torch.testing.assert_close(out, net(x))
    assert cnt.frame_count == 3
    net.drop.eval()

    call_until_remembered(compiled, x)
    net.fc.forward = lambda inp: inp + 100.0
    torch.testing.assert_close(compiled(x), net(x))
    assert cnt.frame_count == 4
    del net.fc.forward
    compiled(x)  # the first entry fits again
    assert cnt.frame_count == 4


def remembered_trees(kind: str = "ModuleCheck") -> list[bool]:
    """For each ModuleCheck (or RootCheck, `kind`) a cache entry's guard function calls: whether
    it remembers what it read."""
    return [
        check.remembered
        for cache in entries.all_caches()
        for entry in cache.entries
        for check in entry.guard.__globals__.values()
        if type(check).__name__ == kind
    ]


def call_until_remembered(compiled: Callable, *args: Any) -> None:
    """Calls `compiled` until its module tree or its roots are remembered where they are (native
    checks on Python 3.12+), so that the change a test makes next meets the remembered path."""
    for _ in range(3):
        compiled(*args)
    if config.native_guards and native.load().REMEMBERS_TREES:
        assert any(remembered_trees() + remembered_trees("RootCheck"))


def each_change_recompiles_once(compiled: Callable, net: nn.Module, x: torch.Tensor, changes: list, cnt) -> None:
    """After each change the compiled module follows eager with one more compile, and a second
    call compiles nothing. Each change is made after calls that let the tree be remembered."""
    for count, change in enumerate(changes, start=cnt.frame_count + 1):
        call_until_remembered(compiled, x)
        change()
        torch.testing.assert_close(compiled(x), net(x))
        assert cnt.frame_count == count
        compiled(x)
        assert cnt.frame_count == count


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        return self.bn(self.conv(x))


def test_module_member_changes_recompile(guards_setting, cnt):
    """Constants read off modules, parameters and optional parameters are guarded natively as
    in Python: each change recompiles and the result follows eager."""
    net = ConvNet().eval()
    compiled = stenograph.compile(net, backend=cnt)
    x = torch.randn(1, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), net(x))
        compiled(x)
        assert cnt.frame_count == 1
        changes = [
            lambda: setattr(net.conv, "stride", (2, 2)),
            lambda: setattr(net.conv, "padding", (0, 0)),
            lambda: setattr(net.bn, "eps", 0.5),
            lambda: setattr(net.conv, "bias", None),
            lambda: setattr(net.bn, "running_mean", torch.zeros(8)[::2]),  # another stride
            lambda: setattr(net.conv, "weight", nn.Parameter(torch.randn(4, 3, 1, 1))),
        ]
        each_change_recompiles_once(compiled, net, x, changes, cnt)


class Tree(nn.Module):
    """Three levels of modules: the root, two ConvNets, their convolutions and norms."""

    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.Sequential(ConvNet(), ConvNet())
        self.stages[1].conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return self.stages(x)


def test_module_tree_is_checked_by_one_native_call(guards_setting, cnt):
    net = Tree().eval()
    compiled = stenograph.compile(net, backend=cnt)
    x = torch.randn(1, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), net(x))
        if guards_setting:
            source = stenograph.inspect(compiled).entries[0].guard_source
            assert source.count("(___module") == 1 and "_modules[" not in source
            assert "# type(L['self'].stages.1.bn) is BatchNorm2d;" in source  # each module's checks listed
        changes = [
            lambda: net.stages[1].bn.register_forward_hook(lambda mod, args, out: out + 1),
            lambda: net.stages[0].bn.train(),
            lambda: setattr(net.stages[1].conv, "weight", nn.Parameter(torch.randn(4, 4, 1, 1))),
            lambda: setattr(net.stages[0], "bn", nn.Identity()),
            lambda: net.stages.append(nn.ReLU()),
        ]
        each_change_recompiles_once(compiled, net, x, changes, cnt)


def _scale(x):
    return x * 2


class Gated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        gate = getattr(self, "gate", None)
        y = _scale(self.fc(x))
        return y if gate is None else y * gate


def test_global_and_missing_attribute_changes_recompile(guards_setting, cnt):
    net = Gated()
    compiled = stenograph.compile(net, backend=cnt)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), net(x))
    compiled(x)
    assert cnt.frame_count == 1
    if guards_setting:
        source = stenograph.inspect(compiled).entries[0].guard_source
        assert "___root" in source and "has no attribute 'gate'" in source
    call_until_remembered(compiled, x)
    net.gate = 3.0
    torch.testing.assert_close(compiled(x), net(x))
    assert cnt.frame_count == 2
    del net.gate
    call_until_remembered(compiled, x)
    global _scale
    saved = _scale
    _scale = lambda x: x * 5  # noqa: E731 - rebinding the global the trace read
    try:
        torch.testing.assert_close(compiled(x), net(x))
        assert cnt.frame_count == 3
    finally:
        _scale = saved
    compiled(x)  # the first entry fits again
    assert cnt.frame_count == 3


class AliasConfig:
    """A configuration with a lookup of its own, as HuggingFace's: `width` reads `hidden`."""

    attribute_map = {"width": "hidden"}

    def __init__(self) -> None:
        self.hidden = 4
        self.scaled = True

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


def test_config_with_its_own_lookup_is_guarded_through_its_instance_dict(guards_setting, cnt):
    """What the class's `__getattribute__` read through `object`'s lookup is guarded in the
    instance dict as `object` finds it, without running the class's lookup again."""

    def f(x, cfg):
        return x * cfg.width if cfg.scaled else x - 1

    compiled = stenograph.compile(f, backend=cnt)
    cfg, x = AliasConfig(), torch.randn(3)
    torch.testing.assert_close(compiled(x, cfg), f(x, cfg))
    compiled(x, AliasConfig())
    assert cnt.frame_count == 1
    source = stenograph.inspect(compiled).entries[0].guard_source
    assert ".__dict__[" not in source and "(cfg, '__dict__')" in source  # object.__getattribute__
    for count, change in enumerate([lambda c: setattr(c, "hidden", 5), lambda c: setattr(c, "scaled", False)], 2):
        changed = AliasConfig()
        change(changed)
        torch.testing.assert_close(compiled(x, changed), f(x, changed))
        assert cnt.frame_count == count


class Configured(nn.Module):
    """Reads a configuration with a lookup of its own, whose values are guarded in its instance
    dict (dict entries a remembered tree does not re-read)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.cfg = AliasConfig()

    def forward(self, x):
        return self.fc(x) * self.cfg.width if self.cfg.scaled else self.fc(x)


def _store_many(cfg: AliasConfig, name: str, value: Any) -> None:
    """Stores through one `STORE_ATTR` run often enough for CPython to specialize it."""
    for _ in range(64):
        if name == "hidden":
            cfg.hidden = value
        else:
            cfg.scaled = value


def test_remembered_tree_sees_a_configuration_changed_in_place(guards_setting, cnt):
    net = Configured()
    compiled = stenograph.compile(net, backend=cnt)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), net(x))
    each_change_recompiles_once(
        compiled,
        net,
        x,
        [lambda: _store_many(net.cfg, "hidden", 5), lambda: _store_many(net.cfg, "scaled", False)],
        cnt,
    )


def test_in_place_changes_of_a_parameter_recompile(guards_setting, cnt):
    """The same Parameter objects with another dtype (`p.data = ...`) or requires_grad: each
    parameter's metadata is checked on every call, not only its identity."""
    lin = nn.Linear(4, 4)
    compiled = stenograph.compile(lin, backend=cnt)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), lin(x))
    call_until_remembered(compiled, x)
    weight = lin.weight
    lin.weight.requires_grad_(False)
    compiled(x).sum().backward()
    assert cnt.frame_count == 2 and weight.grad is None and lin.bias.grad is not None
    lin.zero_grad(set_to_none=True)
    call_until_remembered(compiled, x)
    lin.weight.data = lin.weight.data.double()
    lin.bias.data = lin.bias.data.double()
    assert lin.weight is weight
    torch.testing.assert_close(compiled(x.double()), lin(x.double()))
    assert cnt.frame_count == 3


def _double(x):
    return x * 2


def _triple(x):
    return x * 3


class MyConv(nn.Conv2d):
    pass


class OffsetConv(MyConv):
    def forward(self, x):
        return super().forward(x) + 1


class Scaled(nn.Module):
    """Reads a list item, calls a function held as an attribute, and has a convolution whose
    class is its own (so that the test can change the class)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = MyConv(3, 4, 3, padding=1)
        self.scales = [2.0]
        self.act = _double

    def forward(self, x):
        return self.act(self.conv(x)) * self.scales[0]


def test_remembered_tree_sees_what_no_dict_watcher_sees(guards_setting, cnt):
    """Changes that leave every dict as it was: a list changed in place, a function's
    `__code__`, an instance dict replaced, a class attribute shadowing an instance attribute,
    `__class__`. Each is made while the tree is remembered and recompiles."""
    net = Scaled().eval()
    compiled = stenograph.compile(net, backend=cnt)
    x = torch.randn(1, 3, 6, 6)
    saved_code = _double.__code__

    replaced = []  # the old instance dict kept alive: no event tells of its replacement

    def replace_dict() -> None:
        replaced.append(net.conv.__dict__)
        net.conv.__dict__ = dict(net.conv.__dict__, padding=(0, 0))

    def shadow_stride() -> None:
        MyConv.stride = property(lambda self: (2, 2))

    def recode() -> None:
        _double.__code__ = _triple.__code__

    try:
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), net(x))
            changes = [
                lambda: net.scales.__setitem__(0, 3.0),
                recode,
                replace_dict,
                shadow_stride,
                lambda: setattr(net.conv, "__class__", OffsetConv),
            ]
            each_change_recompiles_once(compiled, net, x, changes, cnt)
    finally:
        _double.__code__ = saved_code
        if "stride" in MyConv.__dict__:
            del MyConv.stride


_ROOTS_PROGRAM = """
def offset(x, amount=1.0):
    return x + amount

def offset_twice(x, amount=1.0):
    return x + 2 * amount

def make_scaler(factor):
    def scale(x):
        return x * factor

    def set_factor(value):
        nonlocal factor
        factor = value

    return scale, set_factor

scale, set_factor = make_scaler(2.0)

class Base:
    shift = 1.0

class Op(Base):
    def apply(x):
        return x - 1

def f(x):
    return Op.apply(scale(offset(x))) + Op.shift
"""


def test_remembered_roots_see_changes_to_functions_cells_and_classes(guards_setting, cnt):
    """What a RootCheck remembers holds while no dict changes, no function's code or defaults
    are set, each closure cell read holds what it held, and each class read from keeps its
    version tag. Each change below leaves every dict alone and recompiles: a function's
    `__defaults__` and `__code__`, a cell's contents, a class attribute and a base class's."""
    namespace: dict[str, Any] = {}
    exec(compile(_ROOTS_PROGRAM, "<roots program>", "exec"), namespace)  # noqa: S102 - fresh objects per run
    f, op = namespace["f"], namespace["Op"]
    compiled = stenograph.compile(f, backend=cnt)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), f(x))
    if guards_setting:
        call_until_remembered(compiled, x)
        assert all(remembered_trees("RootCheck")) == bool(native.load().REMEMBERS_TREES)
    changes = [
        lambda: setattr(namespace["offset"], "__defaults__", (5.0,)),
        lambda: setattr(namespace["offset"], "__code__", namespace["offset_twice"].__code__),
        lambda: namespace["set_factor"](3.0),
        lambda: setattr(op, "apply", lambda x: x + 7),
        lambda: setattr(namespace["Base"], "shift", 2.0),
    ]
    each_change_recompiles_once(compiled, f, x, changes, cnt)


def test_remembered_class_attribute_sees_its_metaclass_change(extension):
    """A class attribute is remembered with the class's and its metaclass's version tags: a
    data descriptor of the same name added to the metaclass takes precedence, and is seen."""

    class Meta(type):
        pass

    class Op(metaclass=Meta):
        def apply(self):
            return 1

    apply = Op.apply
    check = extension.RootCheck(Op, (((("apply", 0),), None, "is", apply),))
    for _ in range(3):
        assert check()
    assert check.remembered == bool(extension.REMEMBERS_TREES)
    Meta.apply = property(lambda cls: None)
    assert not check()
    del Meta.apply
    assert check()


def test_a_tree_is_remembered_after_a_quiet_call_and_forgotten_on_a_change(extension, cnt):
    """Python 3.12+: the second guard call with nothing changed in between remembers the tree; a
    change to any watched dict, guarded or not, sends the next call through the full check. On
    3.11 (no dict watchers) every call is the full check."""
    assert extension.REMEMBERS_TREES is (sys.version_info >= (3, 12))
    net = ConvNet().eval()
    x = torch.randn(1, 3, 8, 8)
    with config.patch(native_guards=True), torch.no_grad():
        compiled = stenograph.compile(net, backend=cnt)
        torch.testing.assert_close(compiled(x), net(x))  # compiles: no guard call yet
        states = []
        for _ in range(3):
            compiled(x)
            states.append(any(remembered_trees()))
        net.bn.note = "an attribute no guard reads"
        for _ in range(2):
            torch.testing.assert_close(compiled(x), net(x))
            states.append(any(remembered_trees()))
    expected = [False, True, True, False, True] if extension.REMEMBERS_TREES else [False] * 5
    assert states == expected
    assert cnt.frame_count == 1


def test_tensor_changes_recompile(guards_setting, cnt):
    def f(x, w):
        return x @ w

    compiled = stenograph.compile(f, backend=cnt, dynamic=False)
    x, w = torch.randn(2, 3), torch.randn(3, 3)
    compiled(x, w)
    compiled(x.clone(), w.clone())
    assert cnt.frame_count == 1
    for args in [
        (x.double(), w.double()),
        (x, w.t()),
        (x, w.clone().requires_grad_()),
        (x, nn.Parameter(w.clone())),
    ]:
        before = cnt.frame_count
        torch.testing.assert_close(compiled(*args), f(*args))
        assert cnt.frame_count == before + 1


def test_recompile_reasons_do_not_depend_on_the_setting(extension):
    def f(x):
        return x + 1

    def reasons(setting: bool) -> dict[str, list[str]]:
        stenograph.reset()
        with config.patch(native_guards=setting):
            compiled = stenograph.compile(f, backend="eager", dynamic=False)
            compiled(torch.randn(2))
            compiled(torch.randn(2, dtype=torch.float64))
            compiled(torch.randn(2).requires_grad_())
            compiled(torch.randn(3))
        return stenograph.inspect(compiled).recompile_reasons

    found = reasons(True)
    assert found == reasons(False)
    assert len(next(iter(found.values()))) == 3


def test_guard_source_shows_native_calls_with_their_checks(extension):
    def f(x):
        return x * 2

    with config.patch(native_guards=True):
        compiled = stenograph.compile(f, backend="eager")
        compiled(torch.randn(3))
    source = stenograph.inspect(compiled).entries[0].guard_source
    assert "if not (___tensor" in source
    assert "# L['x']: Tensor torch.float32 cpu size=[3] stride=[1] requires_grad=False" in source


# -- the setting and the loader ------------------------------------------------------------------


def test_setting_takes_auto_none_and_bools_only():
    for value in ("auto", None, True, False):
        with config.patch(native_guards=value):
            assert config.native_guards is value or config.native_guards == value
    for value in ("yes", 1, 0, "on"):
        with pytest.raises(InvalidConfig, match="native_guards must be one of"):
            config.native_guards = value


def test_setting_false_builds_python_guards_without_loading(monkeypatch, cnt):
    def refuse() -> None:
        raise AssertionError("the extension must not be loaded")

    monkeypatch.setattr(native, "load", refuse)
    with config.patch(native_guards=False):
        compiled = stenograph.compile(lambda x: x + 1, backend=cnt)
        compiled(torch.randn(2))
    assert "___tensor" not in stenograph.inspect(compiled).entries[0].guard_source


@pytest.fixture
def unbuildable(monkeypatch, tmp_path):
    """A process whose extension was never loaded, in an empty cache, on a machine that cannot
    build it."""

    def missing() -> None:
        raise native.Unavailable("no C++ compiler (a stand-in)", environment=True)

    monkeypatch.setattr(native._Loaded, "module", None)
    monkeypatch.setattr(native._Loaded, "failure", None)
    monkeypatch.setenv(native.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(native, "_check_environment", missing)


def test_environment_check_names_what_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    with pytest.raises(native.Unavailable, match="no Python.h|no C\\+\\+ compiler") as info:
        native._check_environment()
    assert info.value.environment


def test_auto_falls_back_to_python_guards_with_one_log_line(unbuildable, caplog, cnt):
    def f(x):
        return x - 1

    with caplog.at_level(logging.INFO, logger="stenograph.guards"), config.patch(native_guards="auto"):
        compiled = stenograph.compile(f, backend=cnt)
        x = torch.randn(2)
        torch.testing.assert_close(compiled(x), f(x))
        stenograph.compile(lambda x: x * 3, backend=cnt)(torch.randn(2))
    lines = [r.getMessage() for r in caplog.records if "native guard checks unavailable" in r.getMessage()]
    assert len(lines) == 1 and "no C++ compiler" in lines[0]
    assert "___tensor" not in stenograph.inspect(compiled).entries[0].guard_source
    assert cnt.frame_count == 2


def test_required_raises_a_clear_error(unbuildable):
    with config.patch(native_guards=True):
        compiled = stenograph.compile(lambda x: x + 1, backend="eager")
        with pytest.raises(NativeGuardsUnavailable, match="native_guards is True.*no C\\+\\+ compiler"):
            compiled(torch.randn(2))


def test_environment_variable_sets_the_default():
    script = "import stenograph; print(repr(stenograph.config.native_guards))"
    answers = {}
    for text in ("0", "bogus"):
        env = {**os.environ, "STENOGRAPH_NATIVE_GUARDS": text, "PYTHONPATH": os.pathsep.join(sys.path)}
        run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
        answers[text] = run.stdout.strip() if run.returncode == 0 else run.stderr.strip().splitlines()[-1]
    assert answers["0"] == "False"
    assert "STENOGRAPH_NATIVE_GUARDS='bogus': expected auto, 1 or 0" in answers["bogus"]


@pytest.mark.slow
def test_parallel_processes_build_once(extension, tmp_path):
    """Two processes starting on an empty cache: one builds, the other waits and imports."""
    script = textwrap.dedent(
        """
        import logging, sys, torch, stenograph
        logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
        with stenograph.config.patch(native_guards=True):
            compiled = stenograph.compile(lambda x: x + 1, backend="eager")
            compiled(torch.randn(2))
        print("native" if "___tensor" in stenograph.inspect(compiled).entries[0].guard_source else "python")
        """
    )
    env = {**os.environ, native.CACHE_ENV: str(tmp_path), "PYTHONPATH": os.pathsep.join(sys.path)}
    runs = [
        subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outputs = [run.communicate()[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0]
    assert all(out.strip().endswith("native") for out in outputs)
    assert sum("built native guard checks" in out for out in outputs) == 1
    libraries = [p for p in tmp_path.rglob("stenograph_native_*") if p.is_file()]
    assert len(libraries) == 1 and not list(tmp_path.rglob("build-*"))
