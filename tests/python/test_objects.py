"""Objects: user classes made in the frame, dataclasses, namedtuples, enums, module configs and
module containers. Objects created in the frame and returned come back as real objects."""

from __future__ import annotations

import dataclasses
import enum
from collections import namedtuple
from typing import NamedTuple

import torch
from torch import nn

import stenograph

from ._support import check, t


class _Acc:
    def __init__(self, start, name="acc"):
        self.total = start
        self.name = name
        self.steps = []

    def add(self, v):
        self.total = self.total + v
        self.steps.append(len(self.steps))
        return self


def _make_object(x):
    acc = _Acc(x)
    acc.add(x).add(x * 2)
    acc.extra = "set later"
    return acc.total, acc


def test_user_class_instantiated_in_the_frame_comes_back_as_a_real_object(cnt):
    (_, acc), _ = check(_make_object, lambda i: (t(3, seed=i),), cnt)
    assert isinstance(acc, _Acc) and acc.steps == [0, 1] and acc.extra == "set later"


def _object_not_returned(x):
    acc = _Acc(x, name="tmp")
    for _ in range(3):
        acc.add(1.0)
    return acc.total * len(acc.steps), acc.name


def test_user_object_used_only_inside_the_frame(cnt):
    check(_object_not_returned, lambda i: (t(3, seed=i),), cnt)


@dataclasses.dataclass
class _Output:
    logits: torch.Tensor
    loss: torch.Tensor | None = None
    hidden: list = dataclasses.field(default_factory=list)
    tag: str = "out"


def _make_dataclass(x):
    out = _Output(logits=x * 2)
    out.hidden.append(x + 1)
    if out.loss is None:
        out.loss = out.logits.sum()
    return out


def test_dataclass_constructed_and_returned(cnt):
    (out, _) = check(_make_dataclass, lambda i: (t(3, seed=i, grad=True),), cnt, grads=True)
    assert isinstance(out, _Output)


@dataclasses.dataclass(frozen=True)
class _Config:
    width: int = 4
    depth: int = 2
    act: str = "relu"


def _frozen_dataclass(x, cfg):
    local = _Config(width=cfg.width * 2)
    y = x
    for _ in range(cfg.depth):
        y = torch.relu(y) if cfg.act == "relu" else torch.tanh(y)
    return y * local.width, dataclasses.replace(local, depth=5), local == _Config(8)


def test_frozen_dataclass_config_read_and_built(cnt):
    check(_frozen_dataclass, lambda i: (t(3, seed=i), _Config()), cnt)


_Pair = namedtuple("_Pair", ["first", "second"])


class _Typed(NamedTuple):
    value: torch.Tensor
    count: int = 1


def _namedtuples(x, pair):
    p = _Pair(x, second=x * 2)
    q = _Typed(pair.first + p.second)
    a, b = p
    r = q._replace(count=3)
    return _Pair(a + b, r.value * r.count), q, p._asdict(), pair.second + p[1], len(p)


def test_namedtuples_built_unpacked_and_returned(cnt):
    check(_namedtuples, lambda i: (t(3, seed=i), _Pair(t(3, seed=i + 1), t(3, seed=i + 2))), cnt)


class _Mode(enum.Enum):
    TRAIN = "train"
    EVAL = "eval"


def _enums(x, mode):
    scales = {_Mode.TRAIN: 2.0, _Mode.EVAL: 0.5}
    if mode is _Mode.TRAIN:
        x = x + 1
    if mode == _Mode.EVAL and mode.value == "eval":
        x = x - 1
    return x * scales[mode], mode.name, _Mode("train")


def test_enums(cnt):
    check(_enums, lambda i: (t(3, seed=i), _Mode.TRAIN), cnt)


class _Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.fc = nn.Linear(cfg.width, cfg.width)
        self.use_residual = True

    def forward(self, x):
        y = self.fc(x)
        if self.cfg.act == "relu":
            y = torch.relu(y)
        if self.training:
            y = y * 0.5
        return x + y if self.use_residual else y


class _Net(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layers = nn.ModuleList([_Block(cfg) for _ in range(cfg.depth)])
        self.heads = nn.ModuleDict({"a": nn.Linear(cfg.width, 2), "b": nn.Linear(cfg.width, 3)})
        self.seq = nn.Sequential(nn.Linear(cfg.width, cfg.width), nn.Tanh())
        self.scales = nn.ParameterList([nn.Parameter(torch.ones(cfg.width) * (i + 1)) for i in range(2)])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x) * self.scales[i % len(self.scales)]
        for layer in self.layers[1:]:
            x = layer(x)
        x = self.seq(x) + self.seq[0](x)
        for p in self.scales:
            x = x + p
        outs = {name: head(x) for name, head in self.heads.items()}
        outs["a2"] = self.heads["a"](x)
        return outs, len(self.layers), "b" in self.heads


def test_module_containers_config_objects_and_training_flag(cnt):
    model = _Net(_Config(width=4, depth=3))
    check(lambda x: model(x), lambda i: (t(2, 4, seed=i, grad=True),), cnt, grads=True)


def test_module_in_eval_mode(cnt):
    model = _Net(_Config(width=4, depth=2)).eval()
    check(lambda x: model(x), lambda i: (t(2, 4, seed=i),), cnt)


def _isinstance_and_class_attrs(x, obj):
    made = _Acc(x)
    checks = (isinstance(made, _Acc), isinstance(obj, _Shape2), isinstance(made, (int, _Acc)), type(made) is _Acc)
    return x * obj.unit, checks, _Shape2.unit


class _Shape2:
    unit = 3.0


def test_isinstance_and_class_attributes(cnt):
    check(_isinstance_and_class_attrs, lambda i: (t(3, seed=i), _Shape2()), cnt)


def _object_stored_in_input_list(x, out):
    out.append(_Acc(x * 2, name="stored"))
    return x


def test_new_object_stored_into_an_input_list(cnt):
    check(_object_stored_in_input_list, lambda i: (t(3, seed=i), []), cnt)


class _Plain:
    pass


def test_weakref_slot_of_an_object_made_in_the_frame_is_empty(cnt):
    def fn(x):
        obj = _Plain()
        return (torch.cos(x) if obj.__weakref__ else torch.sin(x)), obj.__weakref__ is None

    check(fn, lambda i: (t(3, seed=i),), cnt)


class _Counted:
    def __init__(self, v=3):
        self.v = v + self.__dict__.get("extra", 0)


def _new_with_extra(cls, *args):
    made = object.__new__(cls)
    made.extra = 1
    return made


def _recompiles_once_changed(cnt, fn, change):
    compiled = stenograph.compile(fn, backend=cnt)
    torch.testing.assert_close(compiled(torch.ones(2)), fn(torch.ones(2)))
    change()
    torch.testing.assert_close(compiled(torch.ones(2)), fn(torch.ones(2)))
    assert cnt.frame_count == 2


def test_a_new_given_to_a_class_after_compiling_recompiles(cnt):
    """`cls(...)` of a class using object's `__new__` guards that it still does: one given to the
    class afterwards changes what eager makes (it was not guarded)."""

    class Counted(_Counted):
        pass

    def change():
        Counted.__new__ = staticmethod(_new_with_extra)

    _recompiles_once_changed(cnt, lambda x: x * Counted().v, change)


def test_an_init_given_to_a_class_after_compiling_recompiles(cnt):
    class Plain:
        pass

    def change():
        Plain.__init__ = lambda self: setattr(self, "v", 5)

    _recompiles_once_changed(cnt, lambda x: x * getattr(Plain(), "v", 1), change)
