"""Objects model code handles mid-forward, seen in HuggingFace models: configs deep-copied and
changed (`copy.deepcopy(self.config)`), tables keyed by classes and typing markers, outputs that
are dict subclasses read from the frame (`ModelOutput.keys()`), and classes with their own
`__getattribute__` instantiated in the frame. Each is compared with eager and guarded."""

from __future__ import annotations

import collections
import copy
import typing

import pytest
import torch

import stenograph

from ._support import check, t

# -- copy.deepcopy ------------------------------------------------------------------------------


class _Config:
    def __init__(self, scale=2.0):
        self.scale = scale
        self.names = ["a", "b"]
        self.table = {"k": 1, 2: (3, 4)}
        self.alias = self.names
        self.dtype = torch.float32


def _copy_and_change(x, cfg):
    c = copy.deepcopy(cfg)
    c.scale = c.scale + 1
    c.names.append("c")
    return x * c.scale + len(c.names) + len(cfg.names), c.alias is c.names, c is not cfg, c


def test_deepcopy_of_a_config_argument(cnt):
    (out,) = check(_copy_and_change, lambda i: (t(3, seed=i), _Config()), cnt, calls=1)
    copied = out[3]
    assert type(copied) is _Config and copied.names == ["a", "b", "c"] and copied.alias is copied.names


def _copy_scale(x, cfg):
    return x * copy.deepcopy(cfg).scale


def test_deepcopy_reads_are_guarded(cnt):
    fn = stenograph.compile(_copy_scale, backend=cnt)
    x = t(3)
    for scale, graphs in ((2.0, 1), (2.0, 1), (5.0, 2)):
        cfg = _Config(scale)
        torch.testing.assert_close(fn(x, cfg), x * scale)
        assert cnt.frame_count == graphs


def _copy_new_object(x):
    cfg = _Config(3.0)
    twin = copy.deepcopy(cfg)
    twin.names.append("z")
    return x * twin.scale, cfg.names, twin.names


def test_deepcopy_of_an_object_made_in_the_frame(cnt):
    check(_copy_new_object, lambda i: (t(3, seed=i),), cnt)


class _OwnCopy(_Config):
    def __deepcopy__(self, memo):
        return _Config(self.scale * 10)


def test_deepcopy_with_the_class_own_protocol_runs_at_a_break(cnt):
    fn = stenograph.compile(_copy_scale, backend=cnt)
    x = t(3)
    torch.testing.assert_close(fn(x, _OwnCopy(2.0)), x * 20.0)
    torch.testing.assert_close(fn(x, _OwnCopy(2.0)), x * 20.0)


def _copy_tensor_list(x):
    items = copy.deepcopy([x, 1])
    return items[0] + items[1]


def test_deepcopy_of_a_tensor_breaks_and_matches_eager(cnt):
    fn = stenograph.compile(_copy_tensor_list, backend=cnt)
    x = t(3)
    torch.testing.assert_close(fn(x), x + 1)


# -- dicts keyed by classes and typing markers ----------------------------------------------------

_VALIDATORS = {int: 1.0, str: 2.0, typing.Union: 3.0, list: 4.0}


def _by_type(x, value):
    return x * _VALIDATORS.get(type(value), 0.0) + _VALIDATORS[typing.Union]


@pytest.mark.parametrize("value", [3, "s", 2.5])
def test_dict_keyed_by_classes(cnt, value):
    check(_by_type, lambda i: (t(3, seed=i), value), cnt)


def test_dict_keyed_by_classes_guards_its_keys(cnt):
    fn = stenograph.compile(_by_type, backend=cnt)
    x = t(3)
    torch.testing.assert_close(fn(x, 2.5), _by_type(x, 2.5))
    _VALIDATORS[float] = 9.0
    try:
        torch.testing.assert_close(fn(x, 2.5), _by_type(x, 2.5))
        assert cnt.frame_count == 2
    finally:
        del _VALIDATORS[float]


# -- dict subclasses from the frame (ModelOutput) ------------------------------------------------


class _Output(collections.OrderedDict):
    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


def _read_output(x, out):
    total = x
    for key, value in out.items():
        total = total + value * len(key)
    return total + out[0] + out["b"], list(out.keys()), len(out), "a" in out, out.get("c", 1)


def test_dict_subclass_argument_keys_items_and_indexing(cnt):
    check(_read_output, lambda i: (t(3, seed=i), _Output(a=t(3, seed=5), b=t(3, seed=6))), cnt)


def test_dict_subclass_argument_keys_are_guarded(cnt):
    fn = stenograph.compile(_read_output, backend=cnt)
    x = t(3)
    for out, graphs in ((_Output(a=x, b=x), 1), (_Output(a=x, b=x), 1), (_Output(b=x, a=x), 2)):
        torch.testing.assert_close(fn(x, out)[0], _read_output(x, out)[0])
        assert cnt.frame_count == graphs


# -- __getattribute__ on objects made in the frame ----------------------------------------------


class _Aliased:
    aliases = {"layers": "num_layers"}

    def __init__(self, n):
        self.layers = n

    def __setattr__(self, key, value):
        key = super().__getattribute__("aliases").get(key, key)
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "aliases" and key in super().__getattribute__("aliases"):
            key = super().__getattribute__("aliases")[key]
        return super().__getattribute__(key)


def _aliased(x):
    cfg = _Aliased(3)
    cfg.layers = cfg.layers + 1
    return x * cfg.layers, cfg.num_layers, cfg


def test_class_with_its_own_getattribute_made_in_the_frame(cnt):
    (out,) = check(_aliased, lambda i: (t(3, seed=i),), cnt, calls=1)
    assert out[2].num_layers == 4 and "layers" not in vars(out[2])


# -- functions as values: truth and class --------------------------------------------------------


def _double(v):
    return v * 2


_HANDLERS = {"double": _double}


def _dispatch(x, name):
    if handler := _HANDLERS.get(name):
        return handler(x), handler.__class__.__name__, bool(lambda: 0)
    return x, type(None).__name__, False


@pytest.mark.parametrize("name", ["double", "missing"])
def test_function_truth_and_class(cnt, name):
    check(_dispatch, lambda i: (t(3, seed=i), name), cnt, graphs=1 if name == "double" else 0)


# -- a class's own __setattr__ on objects passed in ----------------------------------------------


class _Validated:
    aliases = {"layers": "num_layers"}

    def __init__(self):
        self.num_layers = 2

    def __setattr__(self, key, value):
        if not isinstance(value, int):
            raise TypeError(f"{key} must be an int")
        key = self.aliases.get(key, key)
        super().__setattr__(key, value)


def _set_through_hook(x, cfg):
    cfg.layers = cfg.num_layers + 1
    cfg.depth = 7
    return x * cfg.num_layers + cfg.depth


def test_setattr_through_a_python_setattr_on_an_argument(cnt):
    check(_set_through_hook, lambda i: (t(3, seed=i), _Validated()), cnt, calls=1)


def _set_bad_type(x, cfg):
    try:
        cfg.layers = "three"
    except TypeError:
        return x - 1
    return x


def test_python_setattr_raising_is_caught_in_the_traced_program(cnt):
    check(_set_bad_type, lambda i: (t(3, seed=i), _Validated()), cnt)


class _Computed(_Validated):
    def __getattribute__(self, key):
        return super().__getattribute__(self.aliases.get(key, key) if key != "aliases" else key)


def test_setattr_on_a_class_that_also_computes_reads_is_traced(cnt):
    # both hooks inlined: the reads after the writes see them (tests/python/test_attribute_hooks.py)
    check(_set_through_hook, lambda i: (t(3, seed=i), _Computed()), cnt, calls=1)


# -- __slots__ classes made in the frame ---------------------------------------------------------


class _Slotted:
    __slots__ = ("scale", "name")

    def __init__(self, scale):
        self.scale = scale


def _slotted(x):
    obj = _Slotted(2.0)
    has_name = hasattr(obj, "name")
    obj.name = "set"
    try:
        obj.other = 1
    except AttributeError:
        refused = True
    return x * obj.scale, has_name, obj.name, refused


def test_slots_class_made_in_the_frame(cnt):
    check(_slotted, lambda i: (t(3, seed=i),), cnt)


def _returns_slotted(x):
    obj = _Slotted(x * 2)
    obj.name = "made"
    return obj


def test_slots_object_leaving_the_frame_is_rebuilt(cnt):
    fn = stenograph.compile(_returns_slotted, backend=cnt)
    x = t(3)
    out = fn(x)
    assert type(out) is _Slotted and out.name == "made"
    torch.testing.assert_close(out.scale, x * 2)
    assert cnt.frame_count == 1


def _copy_defaultdict(x):
    table = collections.defaultdict(list)
    table["a"].append(1)
    twin = copy.deepcopy(table)
    twin["b"].append(2)
    return x + len(twin), sorted(twin), sorted(table)


def test_deepcopy_of_a_defaultdict_keeps_its_factory(cnt):
    fn = stenograph.compile(_copy_defaultdict, backend=cnt)
    x = t(3)
    out, expected = fn(x), _copy_defaultdict(x)
    torch.testing.assert_close(out[0], expected[0])
    assert out[1:] == expected[1:]
