"""Instances of classes whose metaclass defines its own `__call__` in Python (singletons,
registries, counters): the metaclass's `__call__` is inlined, and its `super().__call__()` and
`cls.__new__(cls)` make the object as `type.__call__` does. Compared with eager: results, the
objects' state and the metaclass's registry after each call."""

from __future__ import annotations

import abc

import torch

import stenograph

from ._support import check, t


class Singleton(type):
    instances: dict = {}

    def __call__(cls, *args, **kwargs):
        if cls not in cls.instances:
            cls.instances[cls] = super().__call__(*args, **kwargs)
        return cls.instances[cls]


class Scale(metaclass=Singleton):
    def __init__(self, factor):
        self.factor = factor


def test_a_singleton_made_in_the_frame_is_registered_once(cnt):
    def fn(x):
        s = Scale(3)
        return x * s.factor, type(s).__name__

    Singleton.instances.clear()
    compiled = stenograph.compile(fn, backend=cnt)
    first = compiled(t(2))
    made = Singleton.instances[Scale]
    assert made.factor == 3 and first[1] == "Scale"
    torch.testing.assert_close(first[0], t(2) * 3)
    # the next call finds it registered: another branch of the metaclass, compiled again
    made.factor = 5
    torch.testing.assert_close(compiled(t(2))[0], fn(t(2))[0])
    assert Singleton.instances == {Scale: made}
    assert cnt.frame_count == 2
    compiled(t(2))
    assert cnt.frame_count == 2
    Singleton.instances.clear()


class Tagging(type):
    def __call__(cls, *args, **kwargs):
        obj = super().__call__(*args, **kwargs)
        obj.made_by = cls.__name__
        return obj


class Tagged(metaclass=Tagging):
    def __init__(self, v):
        self.v = v


def test_a_metaclass_call_that_sets_attributes_after_init(cnt):
    def fn(x):
        obj = Tagged(4)
        return x * obj.v, obj.made_by

    # torch.compile 2.13 runs this frame eagerly (0 graphs)
    check(fn, lambda i: (t(3, seed=i),), cnt, peer=False)


def test_replacing_the_metaclass_call_recompiles(cnt):
    class Doubling(type):
        def __call__(cls, v):
            return super().__call__(2 * v)

    class Box(metaclass=Doubling):
        def __init__(self, v):
            self.v = v

    def fn(x):
        return x * Box(3).v

    compiled = stenograph.compile(fn, backend=cnt)
    torch.testing.assert_close(compiled(t(2)), t(2) * 6)
    original = Doubling.__call__

    def tripling(cls, v):
        return original(cls, v * 1.5)

    Doubling.__call__ = tripling
    torch.testing.assert_close(compiled(t(2)), fn(t(2)))
    torch.testing.assert_close(compiled(t(2)), t(2) * 9)
    assert cnt.frame_count == 2


class ProxyingMeta(abc.ABCMeta, torch.fx._symbolic_trace.ProxyableClassMeta):
    """torch.fx's metaclass (its `__call__` makes the object with `cls.__new__(cls)` and calls
    `cls.__init__`), beside ABCMeta, as torch's test_support_bases has it."""


class Streamable(abc.ABC):  # noqa: B024
    pass


class Stream(Streamable, metaclass=ProxyingMeta):
    def __init__(self, k=1):
        self.k = k


def test_torch_fx_proxyable_class_meta(cnt):
    def fn(x):
        obj = Stream(3)
        return type(obj).__bases__, x * obj.k

    # its `__call__` logs through `logging` (is_fx_tracing's warning): a graph break there,
    # before the graph's one operation, where torch.compile drops the log call
    check(fn, lambda i: (t(2, seed=i),), cnt, graphs=1, peer=False)


def test_a_new_given_to_the_class_recompiles_the_metaclass_call(cnt):
    class Explicit(type):
        def __call__(cls, *args):
            obj = cls.__new__(cls)
            obj.__init__(*args)
            return obj

    class Item(metaclass=Explicit):
        def __init__(self, v):
            self.v = v + self.__dict__.get("extra", 0)

    def fn(x):
        return x * Item(3).v

    compiled = stenograph.compile(fn, backend=cnt)
    torch.testing.assert_close(compiled(t(2)), t(2) * 3)

    def new(cls):
        made = object.__new__(cls)
        made.extra = 1
        return made

    Item.__new__ = staticmethod(new)
    torch.testing.assert_close(compiled(t(2)), t(2) * 4)
    assert cnt.frame_count == 2
