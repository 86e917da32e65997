"""Regressions found by the object-model fuzzer (tests/fuzz/object_model.py, FINDINGS F17-F18)
and the attribute paths it needed traced (`vars(obj)`, `obj.__dict__.update`).

Each compares the compiled function with eager (results and the objects' state afterwards) on
several calls, the later ones with the object changed, and counts the graphs: a changed object
recompiles where the trace relied on its state.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from helpers import assert_same

import stenograph
from stenograph.testing import CompileCounterWithBackend

BACKENDS = ["eager", "aot_eager"]


class Slots:
    __slots__ = ("a", "t")

    def __init__(self, a, t):
        self.a = a
        self.t = t


def _drop_slot(x, o):
    try:
        delattr(o, "a")
    except AttributeError:
        return x - 1
    return x + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_deleting_a_slot_of_an_argument_inside_try(backend):
    """F17: the slot was taken for missing (no `__dict__` to look in), the trace raised
    AttributeError, the `except` caught it and the delete never happened."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_drop_slot, backend=cnt)
    x = torch.ones(2)
    eager_obj, compiled_obj = Slots(3, x), Slots(3, x)
    for _ in range(2):  # set, then unset by the first call: the guard on the slot recompiles
        assert_same(compiled(x, compiled_obj), _drop_slot(x, eager_obj))
        assert hasattr(compiled_obj, "a") == hasattr(eager_obj, "a")
    assert not hasattr(compiled_obj, "a")
    assert cnt.frame_count == 2
    compiled_obj.a = eager_obj.a = 5  # set again: the first entry runs
    assert_same(compiled(x, compiled_obj), _drop_slot(x, eager_obj))
    assert not hasattr(compiled_obj, "a") and cnt.frame_count == 2


def _made_then_dropped(x):
    o = Slots(5, x)
    stenograph.graph_break()  # o reaches the resume function as an argument
    try:
        del o.a
    except AttributeError:
        pass
    return o


@pytest.mark.parametrize("backend", BACKENDS)
def test_deleting_a_slot_after_a_graph_break(backend):
    """F17 as the fuzzer found it: the object made before a break, its slot deleted after."""
    compiled = stenograph.compile(_made_then_dropped, backend=backend)
    x = torch.ones(2)
    with stenograph.config.patch(suppress_errors=False):
        assert not hasattr(compiled(x), "a") and not hasattr(_made_then_dropped(x), "a")


class Field:
    """A data descriptor keeping its value in the instance dict under `_f_<name>`."""

    def __set_name__(self, owner, name):
        self.key = "_f_" + name

    def __get__(self, obj, objtype=None):
        return self if obj is None else obj.__dict__.get(self.key, 0)

    def __set__(self, obj, value):
        obj.__dict__[self.key] = value

    def __delete__(self, obj):
        if self.key not in obj.__dict__:
            raise AttributeError(self.key)
        del obj.__dict__[self.key]


class Desc:
    a = Field()

    def __init__(self, a):
        self.a = a


def _drop_field(x, o):
    try:
        del o.a
    except AttributeError:
        return x - 1
    return x + o.a


@pytest.mark.parametrize("backend", BACKENDS)
def test_key_in_instance_dict_is_guarded(backend):
    """F18: `key in obj.__dict__` (a descriptor's `__delete__`) read the key's presence without a
    guard; the next call, with the key gone, reused the graph and the replayed delete raised."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_drop_field, backend=cnt)
    x = torch.ones(2)
    eager_obj, compiled_obj = Desc(3), Desc(3)
    for _ in range(3):
        assert_same(compiled(x, compiled_obj), _drop_field(x, eager_obj))
        assert vars(compiled_obj) == vars(eager_obj)
    assert cnt.frame_count == 2  # key present, key absent


class Plain:
    k = 3

    def __init__(self, a):
        self.a = a


def _through_vars(x, o):
    d = vars(o)
    n = d.get("a", -1) + ("b" in vars(o))
    vars(o)["b"] = n
    return x * n + o.b


@pytest.mark.parametrize("backend", BACKENDS)
def test_vars_reads_and_writes_the_instance_dict(backend):
    """`vars(obj)` is `obj.__dict__`: traced (it ran the frame eagerly), reads guarded."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_through_vars, backend=cnt)
    x = torch.ones(2)
    eager_obj, compiled_obj = Plain(2), Plain(2)
    with stenograph.config.patch(suppress_errors=False):
        for _ in range(3):
            assert_same(compiled(x, compiled_obj), _through_vars(x, eager_obj))
            assert vars(compiled_obj) == vars(eager_obj)
    assert cnt.frame_count == 2  # without b, then with it (its value is only returned)


def _vars_of_slots(x, o):
    try:
        vars(o)
    except TypeError as e:
        return x - len(str(e))
    return x


def test_vars_of_an_object_without_dict_raises_type_error():
    compiled = stenograph.compile(_vars_of_slots, backend="eager")
    x = torch.ones(2)
    with stenograph.config.patch(suppress_errors=False):
        assert_same(compiled(x, Slots(1, x)), _vars_of_slots(x, Slots(1, x)))
        assert_same(compiled(x, Plain(1)), _vars_of_slots(x, Plain(1)))


def _update_dict(x, o):
    o.__dict__.update({"a": o.a + 1, "t": x * 2}, k=7)
    return x + o.a + o.k, o.t


@pytest.mark.parametrize("backend", BACKENDS)
def test_instance_dict_update(backend):
    """`obj.__dict__.update(...)`: each item written as `obj.__dict__[key] = value`; the class
    attribute `k` is shadowed afterwards, as eagerly."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_update_dict, backend=cnt)
    x = torch.ones(2)
    eager_obj, compiled_obj = Plain(1), Plain(1)
    with stenograph.config.patch(suppress_errors=False):
        for _ in range(2):
            assert_same(compiled(x, compiled_obj), _update_dict(x, eager_obj))
            assert_same(vars(compiled_obj), vars(eager_obj))
    assert cnt.frame_count == 2  # a == 1, then a == 2


class Open:
    pass


def _open(present):
    o = Open()
    if present:
        o.tag = "multi"
    return o


def _slots(present):
    o = Slots(1, None)
    if not present:
        del o.a
    return o


def _set_then_delete(x, o, name):
    setattr(o, name, "single")
    n = 2 if getattr(o, name) == "single" else 3
    delattr(o, name)
    return x * n + hasattr(o, name)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("make", "name"), [(_open, "tag"), (_slots, "a")], ids=["dict", "slots"])
def test_attribute_set_then_deleted(backend, make, name):
    """F19: an attribute the object did not have, set then deleted by the trace: the replayed
    `del` raised AttributeError where eager returns (it is deleted only where it exists).
    F20: a slot the trace deleted still read as set (`hasattr` True)."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_set_then_delete, backend=cnt)
    x = torch.ones(2)
    with stenograph.config.patch(suppress_errors=False):
        for present in (False, False, True):
            eager_obj, compiled_obj = make(present), make(present)
            assert_same(compiled(x, compiled_obj, name), _set_then_delete(x, eager_obj, name))
            assert not hasattr(compiled_obj, name) and not hasattr(eager_obj, name)
    assert cnt.frame_count == 1  # the write comes first: the trace relies on nothing it found


class Shadowing:
    k = 3


def _unshadow(x, o):
    o.k = 5
    n = o.k
    del o.k
    return x * n + o.k  # the class attribute again


@pytest.mark.parametrize("backend", BACKENDS)
def test_instance_attribute_set_then_deleted_reveals_the_class_attribute(backend, monkeypatch):
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_unshadow, backend=cnt)
    x = torch.ones(2)
    with stenograph.config.patch(suppress_errors=False):
        for _ in range(2):
            eager_obj, compiled_obj = Shadowing(), Shadowing()
            assert_same(compiled(x, compiled_obj), _unshadow(x, eager_obj))
            assert vars(compiled_obj) == vars(eager_obj) == {}
        monkeypatch.setattr(Shadowing, "k", 4)  # the class attribute read is guarded
        assert_same(compiled(x, Shadowing()), _unshadow(x, Shadowing()))
    assert cnt.frame_count == 2


def test_set_then_delete_through_a_module_attribute():
    """F19 as the fuzzer found it: a config reached as `m.cfg`, an object that outlives calls."""
    m, reference = torch.nn.Module(), torch.nn.Module()
    m.cfg, reference.cfg = _open(False), _open(False)

    def forward(x, mod):
        if getattr(mod.cfg, "tag", None) is None:
            mod.cfg.tag = "single"
        n = 2 if mod.cfg.tag == "single" else 3
        try:
            del mod.cfg.tag
        except AttributeError:
            n += 10
        return x * n

    compiled = stenograph.compile(forward, backend="eager")
    with stenograph.config.patch(suppress_errors=False):
        for _ in range(3):
            assert_same(compiled(torch.ones(2), m), forward(torch.ones(2), reference))
            assert vars(m.cfg) == vars(reference.cfg) == {}


class Holder:
    pass


def _scale_attribute(x, o):
    o.a = 1
    o.t.mul_(0.5)  # o.t expanded: eager raises here, after `o.a = 1`
    return x + o.t


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_write_into_an_expanded_tensor_raises_as_eager(backend):
    """F21: eager raises RuntimeError (elements sharing memory) after the earlier writes; aot_eager
    failed compiling (BackendCompilerFailed) and eager lost `o.a = 1` (the graph raised before the
    writes were replayed). The call breaks the graph; a dense tensor next time compiles it."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_scale_attribute, backend=cnt)
    x = torch.ones(2, 3)
    with stenograph.config.patch(suppress_errors=False):
        for fn in (_scale_attribute, compiled):
            o = Holder()
            o.t = torch.arange(3.0).expand(2, 3)
            with pytest.raises(RuntimeError, match="single memory location"):
                fn(x, o)
            assert o.a == 1
        eager_obj, compiled_obj = Holder(), Holder()
        eager_obj.t, compiled_obj.t = torch.ones(2, 3), torch.ones(2, 3)
        assert_same(compiled(x, compiled_obj), _scale_attribute(x, eager_obj))
        assert_same(compiled_obj.t, eager_obj.t)
    assert cnt.frame_count == 1  # before the break no tensor op (no graph); then the whole function


class Box:
    def __init__(self):
        self.t = torch.zeros(2)


def _through_the_dict(x, o, d):
    d["t"] = x * 3
    return x + o.t


def _through_the_object(x, o, d):
    o.t = x * 3
    return x + d["t"]


def _dict_kept_across_a_break(x, o):
    d = o.__dict__
    stenograph.graph_break()
    d["t"] = x * 3
    return x + o.t


def _bound_pop_at_a_break(x, o):
    o.__dict__.pop("t", None)  # `.pop` breaks the graph: the resume function gets the bound method
    return x + getattr(o, "t", x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_through_the_dict, _through_the_object])
def test_instance_dict_passed_beside_its_object(backend, fn):
    """F22: `o.__dict__` read from the frame as a plain dict and `o` read as an object had two
    trackers, each blind to the other's changes. Same object: the graph breaks (or the frame runs
    eagerly); distinct ones are guarded to stay distinct, so aliasing them later recompiles."""
    compiled = stenograph.compile(fn, backend=backend)
    x = torch.ones(2)
    for alias in (False, True, False, True):
        eager_obj, compiled_obj = Box(), Box()
        eager_dict = eager_obj.__dict__ if alias else {"t": torch.zeros(2)}
        compiled_dict = compiled_obj.__dict__ if alias else {"t": torch.zeros(2)}
        with stenograph.config.patch(suppress_errors=False), warnings.catch_warnings():
            warnings.simplefilter("ignore", stenograph.StenographWarning)  # the aliased `h` runs eagerly
            assert_same(compiled(x, compiled_obj, compiled_dict), fn(x, eager_obj, eager_dict))
        assert_same(compiled_obj.t, eager_obj.t)
        assert_same(compiled_dict, eager_dict)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_dict_kept_across_a_break, _bound_pop_at_a_break])
def test_instance_dict_reaching_a_resume_function(backend, fn):
    """F22 as the fuzzer found it (seed 10086): after a graph break the resume function gets the
    object's `__dict__` (a local, or the bound `pop` of it) beside the object itself."""
    compiled = stenograph.compile(fn, backend=backend)
    x = torch.ones(2)
    with stenograph.config.patch(suppress_errors=False):
        for _ in range(2):
            eager_obj, compiled_obj = Box(), Box()
            assert_same(compiled(x, compiled_obj), fn(x, eager_obj))
            assert_same(vars(compiled_obj), vars(eager_obj))


class AliasConfig:
    """HF PretrainedConfig's aliasing: `size` is read and written as `a`."""

    attribute_map = {"size": "a"}

    def __init__(self, a):
        self.a = a

    def __setattr__(self, key, value):
        key = super().__getattribute__("attribute_map").get(key, key)
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map":
            key = super().__getattribute__("attribute_map").get(key, key)
        return super().__getattribute__(key)


def _read_alias(x, cfg):
    return x * cfg.size


@pytest.mark.parametrize("backend", BACKENDS)
def test_alias_read_while_the_dict_holds_the_alias_name(backend):
    """F23: `vars(cfg)["size"] = 6` puts the alias name itself in the instance dict; the class's
    lookup still answers `cfg.a`, but the trace took the dict entry for the read."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_read_alias, backend=cnt)
    x = torch.ones(2)
    cfg = AliasConfig(2)
    vars(cfg)["size"] = 6
    with stenograph.config.patch(suppress_errors=False):
        assert_same(compiled(x, cfg), _read_alias(x, cfg))  # x * 2
        cfg.a = 3  # the real read is guarded
        assert_same(compiled(x, cfg), _read_alias(x, cfg))
    assert cnt.frame_count == 2


class Tagged:
    def __init__(self):
        self.tag = "multi"


G_TAGGED = Tagged()


def _has_tag(x):
    return x + hasattr(G_TAGGED, "tag"), getattr(G_TAGGED, "tag", None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_presence_of_a_string_attribute_is_guarded(backend, monkeypatch):
    """F24: `hasattr(o, "tag")` with `o.tag` a string: the value was to be guarded once used, and
    `hasattr` does not use it, so deleting `tag` between calls reused the answer True."""
    monkeypatch.setattr(G_TAGGED, "tag", "multi")
    compiled = stenograph.compile(_has_tag, backend=backend)
    x = torch.ones(2)
    with stenograph.config.patch(suppress_errors=False):
        assert_same(compiled(x), _has_tag(x))
        del G_TAGGED.tag
        assert_same(compiled(x), _has_tag(x))
        G_TAGGED.tag = "single"
        assert_same(compiled(x), _has_tag(x))


def _delete_then_set(x, o):
    del o.tag
    o.tag = "multi"
    return x + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_attribute_deleted_then_set_moves_to_the_end_of_the_dict(backend):
    """F25: eagerly `del o.tag; o.tag = v` moves `tag` to the end of `o.__dict__`; the replay kept
    only the last change, a set, which leaves the key where it was."""

    def tagged():
        made = Tagged()
        made.other = 1
        return made

    for eager_obj, compiled_obj in _calls_on_fresh_objects(_delete_then_set, tagged, backend):
        assert list(vars(compiled_obj)) == list(vars(eager_obj)) == ["other", "tag"]


def _calls_on_fresh_objects(fn, make, backend):
    """`fn(x, obj)` compiled and eager, twice, each call on an object of its own from `make`,
    results compared: yields (eager's object, the compiled call's) after each."""
    compiled = stenograph.compile(fn, backend=backend)
    x = torch.ones(2)
    with stenograph.config.patch(suppress_errors=False):
        for _ in range(2):
            eager_obj, compiled_obj = make(), make()
            assert_same(compiled(x, compiled_obj), fn(x, eager_obj))
            yield eager_obj, compiled_obj


class _WithClassK:
    k = 3

    def __init__(self):
        self.a = 1


def _write_k_tag_k(x, o):
    o.k = o.k  # the class's value, now in the instance dict
    vars(o)["tag"] = "multi"
    vars(o)["k"] = x.shape[0]
    return x + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_attribute_written_again_keeps_its_first_place_in_the_dict(backend):
    """F27: a name written, another written, then the first again: eagerly the first keeps its
    place in `o.__dict__`; the replay set the names in the order of their last writes."""
    for eager_obj, compiled_obj in _calls_on_fresh_objects(_write_k_tag_k, _WithClassK, backend):
        assert list(vars(compiled_obj)) == list(vars(eager_obj)) == ["a", "k", "tag"]


class Cached:
    """A caching non-data descriptor (`functools.cached_property`-like): the first read stores
    the value in the instance dict, which shadows the descriptor afterwards."""

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        value = "lazy" + str(obj.a)
        obj.__dict__[self.name] = value
        return value


class Lazy:
    tag = Cached()

    def __init__(self, a):
        self.a = a

    def bump(self):
        self.a = self.a + 1
        return self.a


def _bump_then_tag(x, o):
    acc = x + o.bump()
    return acc, getattr(o, "tag", None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_guards_do_not_run_a_caching_descriptor(backend):
    """F26: the cached entry was guarded as `o.tag`; with the entry deleted between calls,
    checking that guard ran the descriptor for real, which cached a value computed before the
    call's `bump()` (eager computes it after)."""
    compiled = stenograph.compile(_bump_then_tag, backend=backend)
    x = torch.ones(2)
    eager_obj, compiled_obj = Lazy(0), Lazy(0)
    with stenograph.config.patch(suppress_errors=False):
        for call in range(4):
            if call == 2:
                del eager_obj.tag, compiled_obj.tag
            assert_same(compiled(x, compiled_obj), _bump_then_tag(x, eager_obj))
            assert vars(compiled_obj) == vars(eager_obj)


class Three:
    def __init__(self, x):
        self.a = 1
        self.w = x
        self.items = [1]


def _whole_dict(x, o):
    keys = o.__dict__.keys()  # a live view: the writes below show through it
    o.c = 3
    del o.a
    o.a = 5
    o.items.append(2)
    total = x * len(o.__dict__) + sum(v for v in o.__dict__.values() if isinstance(v, torch.Tensor))
    return total, list(keys), dict(o.__dict__.items())["items"], sorted(o.__dict__.copy())


@pytest.mark.parametrize("backend", BACKENDS)
def test_instance_dict_used_whole(backend):
    """`len(obj.__dict__)`, its views and `copy()`: the real entries in their order under this
    trace's writes (a name deleted and set again moves last, as CPython's dict puts it), in one
    graph; gradients flow through the tensor values; keys and values guarded."""
    cnt = CompileCounterWithBackend(backend)
    compiled = stenograph.compile(_whole_dict, backend=cnt, fullgraph=True)
    for _ in range(2):
        x = torch.randn(2, requires_grad=True)
        w_e, w_c = torch.randn(2, requires_grad=True), torch.randn(2, requires_grad=True)
        with torch.no_grad():
            w_c.copy_(w_e)
        eager_obj, compiled_obj = Three(w_e), Three(w_c)
        expected, actual = _whole_dict(x, eager_obj), compiled(x, compiled_obj)
        assert_same(actual, expected)
        assert list(vars(compiled_obj)) == list(vars(eager_obj)) == ["w", "items", "c", "a"]
        expected[0].sum().backward()
        actual[0].sum().backward()
        assert_same(w_c.grad, w_e.grad)
    assert cnt.frame_count == 1
    extra_e, extra_c = Three(torch.ones(2)), Three(torch.ones(2))
    extra_e.b = extra_c.b = torch.ones(2)  # another key: recompiles
    assert_same(compiled(torch.ones(2), extra_c), _whole_dict(torch.ones(2), extra_e))
    assert cnt.frame_count == 2


def _iterate_dict(x, o, grow):
    seen = []
    try:
        for name in o.__dict__:
            seen.append(name)
            if grow:
                o.extra = 1  # the size changes: RuntimeError at the next step, as eagerly
            else:
                o.a = 7  # same size, same keys: iteration goes on
    except RuntimeError as e:
        seen.append(str(e))
    return x + len(seen), seen


@pytest.mark.parametrize("grow", [False, True])
def test_iterating_an_instance_dict_while_writing(grow):
    cnt = CompileCounterWithBackend("eager")
    compiled = stenograph.compile(_iterate_dict, backend=cnt)
    x = torch.ones(2)
    eager_obj, compiled_obj = Three(x), Three(x)
    assert_same(compiled(x, compiled_obj, grow), _iterate_dict(x, eager_obj, grow))
    assert vars(compiled_obj) == vars(eager_obj)
    assert cnt.frame_count == 1


class SlotsAndDict:
    __slots__ = ("s", "__dict__")

    def __init__(self):
        self.s = 1
        self.d = 2


def _slot_not_in_dict(x, o):
    o.s = 10  # a slot: not an entry of `__dict__`
    o.e = 3
    return x + len(o.__dict__), list(o.__dict__.items())


def test_instance_dict_leaves_out_slots():
    cnt = CompileCounterWithBackend("eager")
    compiled = stenograph.compile(_slot_not_in_dict, backend=cnt, fullgraph=True)
    x = torch.ones(2)
    eager_obj, compiled_obj = SlotsAndDict(), SlotsAndDict()
    assert_same(compiled(x, compiled_obj), _slot_not_in_dict(x, eager_obj))
    assert (compiled_obj.s, vars(compiled_obj)) == (eager_obj.s, vars(eager_obj))
