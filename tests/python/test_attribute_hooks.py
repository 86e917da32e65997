"""Attribute hooks written in Python on objects passed in (and made in the frame): property
setters and deleters, descriptors with `__get__`/`__set__`/`__delete__`, and classes with their
own `__setattr__` that also compute reads (alias configs, attribute dicts). Their code is inlined:
writes are replayed on the real object after the graph, and reads inside the trace see them."""

from __future__ import annotations

import types

import pytest
import torch

import stenograph

from ._support import check, t

# -- properties with setters and deleters --------------------------------------------------------


class _Temperature:
    def __init__(self, celsius=20.0):
        self._celsius = celsius

    @property
    def fahrenheit(self):
        return self._celsius * 9 / 5 + 32

    @fahrenheit.setter
    def fahrenheit(self, value):
        self._celsius = (value - 32) * 5 / 9

    @fahrenheit.deleter
    def fahrenheit(self):
        del self._celsius

    @property
    def frozen(self):
        return 1


def _set_property(x, temp):
    temp.fahrenheit = 212.0
    return x * temp.fahrenheit, temp._celsius


def test_property_setter_on_an_argument(cnt):
    results = check(_set_property, lambda i: (t(3, seed=i), _Temperature()), cnt)
    assert results[0][1] == 100.0


class _Scaled:
    def __init__(self):
        self._scale = None

    @property
    def scale(self):
        return self._scale

    @scale.setter
    def scale(self, value):
        self._scale = value * 2


def _set_tensor_through_property(x, holder):
    holder.scale = x.sum()
    return x * holder.scale


# check() reads `.grad` of every tensor in the arguments, the stored one (not a leaf) included
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
def test_property_setter_storing_a_graph_value(cnt):
    check(_set_tensor_through_property, lambda i: (t(3, seed=i, grad=True), _Scaled()), cnt, grads=True)


def _delete_property(x, temp):
    del temp.fahrenheit
    return x + 1, hasattr(temp, "_celsius")


def test_property_deleter_on_an_argument(cnt):
    results = check(_delete_property, lambda i: (t(3, seed=i), _Temperature()), cnt)
    assert results[0][1] is False


def _set_and_print(x, temp):
    y = x + 1
    temp.fahrenheit = 50.0
    print("celsius", temp._celsius)
    return y * temp.fahrenheit


def test_property_setter_before_a_print(cnt, capsys):
    # the write is replayed before the print runs at its break, so it sees it, as eagerly
    check(_set_and_print, lambda i: (t(3, seed=i), _Temperature()), cnt, capsys, graphs=2)


def test_property_setter_guards(cnt):
    fn = stenograph.compile(_set_property, backend=cnt)
    for _ in range(2):
        fn(t(3), _Temperature())
    assert cnt.frame_count == 1  # identical inputs: no recompile

    class Kelvin(_Temperature):  # another class: its own compile
        pass

    fn(t(3), Kelvin())
    assert cnt.frame_count == 2

    setter = _Temperature.fahrenheit

    def halve(self, value):
        self._celsius = value / 2

    try:
        _Temperature.fahrenheit = setter.setter(halve)  # a replaced property recompiles
        out, celsius = fn(t(3), _Temperature())
        assert celsius == 106.0 and cnt.frame_count == 3
    finally:
        _Temperature.fahrenheit = setter


def _set_read_only(x, temp):
    y = x + 1
    temp.frozen = 2
    return y


def test_property_without_setter_raises_eagers_error(cnt):
    fn = stenograph.compile(_set_read_only, backend=cnt)
    with pytest.raises(AttributeError) as eager:
        _set_read_only(t(3), _Temperature())
    with pytest.raises(AttributeError) as compiled:
        fn(t(3), _Temperature())
    assert str(compiled.value) == str(eager.value)
    assert cnt.frame_count == 1  # `x + 1`; the write runs eagerly
    with pytest.raises(stenograph.errors.Unsupported, match="property 'frozen' of _Temperature has no Python fset"):
        stenograph.compile(_set_read_only, backend="eager", fullgraph=True)(t(3), _Temperature())


# -- descriptors with their own __get__ / __set__ / __delete__ -----------------------------------


class _Positive:
    """The validator of Python's descriptor guide."""

    def __set_name__(self, owner, name):
        self.private = "_" + name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return getattr(obj, self.private)

    def __set__(self, obj, value):
        if value <= 0:
            raise ValueError(f"{self.private[1:]} must be positive")
        setattr(obj, self.private, value)

    def __delete__(self, obj):
        delattr(obj, self.private)


class _Layer:
    width = _Positive()

    def __init__(self, width):
        self.width = width


def _descriptor_on_an_argument(x, layer):
    layer.width = layer.width * 2
    try:
        layer.width = -1
    except ValueError as e:
        message = str(e)
    return x * layer.width, message


def test_descriptor_set_and_get_on_an_argument(cnt):
    check(_descriptor_on_an_argument, lambda i: (t(3, seed=i), _Layer(3)), cnt)


def _descriptor_on_a_new_object(x):
    layer = _Layer(2)
    layer.width += 1
    return x * layer.width, layer


def test_descriptor_on_an_object_made_in_the_frame(cnt):
    results = check(_descriptor_on_a_new_object, lambda i: (t(3, seed=i),), cnt)
    assert results[0][1].width == 3


def _descriptor_delete(x, layer):
    del layer.width
    return x + 1, hasattr(layer, "_width")


def test_descriptor_delete_on_an_argument(cnt):
    check(_descriptor_delete, lambda i: (t(3, seed=i), _Layer(3)), cnt)


def test_descriptor_guards(cnt):
    fn = stenograph.compile(_descriptor_on_an_argument, backend=cnt)
    for _ in range(2):
        fn(t(3), _Layer(3))
    assert cnt.frame_count == 1
    fn(t(3), _Layer(4))  # the value read through the descriptor is guarded
    assert cnt.frame_count == 2
    original = _Layer.__dict__["width"]
    try:
        replacement = _Positive()
        replacement.private = "_other"
        _Layer.width = replacement  # another descriptor object: recompiles
        layer = _Layer(5)
        out, _ = fn(t(3), layer)
        torch.testing.assert_close(out, t(3) * 10)
        assert layer._other == 10 and cnt.frame_count == 3
    finally:
        _Layer.width = original


class _Doubling:
    """A data descriptor with only `__set__`: it writes the instance `__dict__`, and reads find
    the dict entry (no `__get__` to answer first)."""

    def __set__(self, obj, value):
        obj.__dict__["field"] += value * 2


class _Counter:
    field = _Doubling()

    def __init__(self):
        self.__dict__["field"] = 0


def _setter_writing_the_instance_dict(x, counter):
    counter.field = 10
    return x + counter.field, dict(vars(counter))


def test_descriptor_setter_writing_the_instance_dict(cnt):
    results = check(_setter_writing_the_instance_dict, lambda i: (t(3, seed=i), _Counter()), cnt)
    assert results[0][1] == {"field": 20}


class _Scaled:
    """A data descriptor with a getter: it answers reads before the instance `__dict__`."""

    def __get__(self, obj, cls=None):
        return self if obj is None else obj.__dict__["v"] * 10

    def __set__(self, obj, value):
        obj.__dict__["v"] = value + 1


class _Holder:
    v = _Scaled()


def _instance_dict_under_a_getter(x, holder):
    holder.v = 3
    holder.__dict__["v"] = 7  # stored as is; the read still goes through the getter
    y = x * holder.v
    del holder.__dict__["v"]
    holder.__dict__["v"] = 2
    return y + holder.v, dict(vars(holder))


def test_instance_dict_writes_under_a_data_descriptor(cnt):
    results = check(_instance_dict_under_a_getter, lambda i: (t(3, seed=i), _Holder()), cnt)
    assert results[0][1] == {"v": 2}
    torch.testing.assert_close(results[0][0], t(3, seed=0) * 70 + 20)


def _instance_dict_of_a_new_object(x):
    holder = _Holder()
    holder.v = 4
    holder.__dict__["v"] += 1
    return x + holder.v, holder


def test_instance_dict_writes_under_a_data_descriptor_on_a_new_object(cnt):
    results = check(_instance_dict_of_a_new_object, lambda i: (t(3, seed=i),), cnt)
    assert vars(results[0][1]) == {"v": 6}


def test_descriptor_setter_writing_the_instance_dict_guards(cnt):
    fn = stenograph.compile(_setter_writing_the_instance_dict, backend=cnt)
    counter = _Counter()
    fn(t(3), counter)
    fn(t(3), counter)  # the dict now holds 20, then 40: the value read is guarded
    assert counter.field == 40 and cnt.frame_count == 2
    fresh = _Counter()
    fn(t(3), fresh)  # holds 0 again: the first entry serves
    assert fresh.field == 20 and cnt.frame_count == 2


def _field_descriptor_get(descriptor, obj):
    return descriptor.__get__(obj)


@pytest.mark.parametrize(
    ("descriptor", "make"),
    [(torch.Tensor.shape, lambda: torch.ones(2, 3)), (torch.Tensor.dtype, lambda: torch.ones(2))],
)
def test_c_field_descriptor_get(cnt, descriptor, make):
    compiled = stenograph.compile(_field_descriptor_get, backend=cnt, fullgraph=True)
    assert compiled(descriptor, make()) == _field_descriptor_get(descriptor, make())
    assert compiled(descriptor, make()) == _field_descriptor_get(descriptor, make())
    assert cnt.frame_count == 0  # no tensor operation: nothing to compile, nothing recompiled


class _Slotted:
    __slots__ = ("a",)


def test_slot_descriptor_get_and_guards(cnt):
    compiled = stenograph.compile(_field_descriptor_get, backend=cnt, fullgraph=True)
    obj = _Slotted()
    obj.a = 3
    assert compiled(_Slotted.a, obj) == 3
    obj.a = 4
    assert compiled(_Slotted.a, obj) == 4  # the slot's value is guarded
    assert compiled(torch.Tensor.shape, torch.ones(2)) == torch.Size([2])  # another descriptor


def test_c_field_descriptor_on_the_wrong_type_raises_eagers_error():
    compiled = stenograph.compile(_field_descriptor_get, backend="eager")
    with pytest.raises(TypeError, match="doesn't apply to a '_Slotted' object"):
        compiled(torch.Tensor.shape, _Slotted())


# -- classes with their own __setattr__ and computed reads, passed in ----------------------------


class _AliasedConfig:
    """A HuggingFace-style config: aliases mapped on writes and reads."""

    attribute_map = {"hidden_size": "d_model"}

    def __init__(self):
        self.d_model = 4
        self.layers = 2

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


def _alias_writes_and_reads(x, cfg):
    cfg.hidden_size = cfg.hidden_size * 2
    cfg.layers = cfg.layers + 1
    return x * cfg.d_model + cfg.hidden_size * cfg.layers


def test_alias_config_written_and_read(cnt):
    check(_alias_writes_and_reads, lambda i: (t(3, seed=i), _AliasedConfig()), cnt)


class _AttrConfig:
    """Attributes kept in a dict of their own (an attribute-dict config)."""

    def __init__(self, **values):
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, key):
        try:
            return self._values[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key, value):
        self._values[key] = value

    def __delattr__(self, key):
        del self._values[key]


def _attr_config_writes_and_reads(x, cfg):
    cfg.scale = cfg.scale + 1
    cfg.bias = x.mean()
    del cfg.unused
    has = hasattr(cfg, "unused"), hasattr(cfg, "scale")
    return x * cfg.scale + cfg.bias + getattr(cfg, "shift", 0.5), has


def test_attribute_dict_config_written_read_and_deleted(cnt):
    results = check(_attr_config_writes_and_reads, lambda i: (t(3, seed=i), _AttrConfig(scale=2, unused=None)), cnt)
    assert results[0][1] == (False, True)


def test_attribute_dict_config_guards(cnt):
    fn = stenograph.compile(_attr_config_writes_and_reads, backend=cnt)
    for _ in range(2):
        fn(t(3), _AttrConfig(scale=2, unused=None))
    assert cnt.frame_count == 1
    out, _ = fn(t(3), _AttrConfig(scale=2, unused=None, shift=1.5))  # another key: recompiles
    torch.testing.assert_close(out, t(3) * 3 + t(3).mean() + 1.5)
    assert cnt.frame_count == 2


class _EasyDict(dict):
    """A dict whose keys are also attributes (the `easydict` shape)."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key, value):
        self[key] = value


class _AttrDict(dict):
    __getattr__ = dict.__getitem__
    __setattr__ = dict.__setitem__
    __delattr__ = dict.__delitem__


def _dict_config(x, cfg):
    cfg.scale = cfg.scale * 3
    cfg.new = 1
    return x * cfg.scale + cfg.new + len(cfg)


# torch.compile cannot trace dict's C methods as an instance's hooks: it runs the frame eagerly
@pytest.mark.parametrize(("cls", "torch_graphs"), [(_EasyDict, 1), (_AttrDict, 0)])
def test_attribute_dicts_passed_in(cnt, cls, torch_graphs):
    check(_dict_config, lambda i: (t(3, seed=i), cls(scale=2, keep="yes")), cnt, torch_graphs=torch_graphs)


def _namespace(x, ns):
    ns.count = ns.count + 1
    ns.out = x * ns.count
    del ns.tmp
    return ns.out


def test_simple_namespace_passed_in(cnt):
    check(_namespace, lambda i: (t(3, seed=i), types.SimpleNamespace(count=1, tmp=0)), cnt)


class _Counting:
    """A `__setattr__` with an effect of its own: replaying must not run it a second time."""

    def __init__(self):
        object.__setattr__(self, "writes", 0)

    def __setattr__(self, key, value):
        object.__setattr__(self, "writes", self.writes + 1)
        object.__setattr__(self, key, value)

    def __getattr__(self, key):
        return f"default {key}"


def _counting(x, obj):
    obj.a = 1
    obj.b = obj.a + 1
    return x + obj.b, obj.missing


def test_setattr_hook_runs_once_per_write(cnt):
    results = check(_counting, lambda i: (t(3, seed=i), _Counting()), cnt)
    assert results[0][1] == "default missing"


class _ReadsItsDict(_AliasedConfig):
    """A lookup reading the instance `__dict__` itself (as transformers' configs do)."""

    def __getattribute__(self, key):
        extra = super().__getattribute__("__dict__").get("_extra")
        if extra is not None and key in extra:
            return extra[key]
        return super().__getattribute__(key)


def _through_the_dict(x, cfg):
    cfg.hidden_size = 6
    cfg.__dict__["_extra"] = {"bonus": 2}
    state = cfg.__dict__
    return x * cfg.d_model + cfg.bonus, "layers" in state, state.get("absent", -1)


def test_instance_dict_read_and_written_through_a_lookup(cnt):
    check(_through_the_dict, lambda i: (t(3, seed=i), _ReadsItsDict()), cnt)


def _config_written_in_forward(x, cfg):
    cfg.hidden_size = cfg.hidden_size * 2  # an alias of n_embd
    cfg.use_cache = False
    return x * cfg.n_embd + cfg.hidden_size


@pytest.mark.slow
def test_transformers_config_written_and_read(cnt):
    transformers = pytest.importorskip("transformers")
    check(_config_written_in_forward, lambda i: (t(3, seed=i), transformers.GPT2Config(n_embd=8)), cnt)
