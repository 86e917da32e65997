"""Values model code reads from its environment mid-forward, seen in HuggingFace models:
`os.environ` lookups, `torch.finfo`/`torch.iinfo` limits, `torch.no_grad()` used as a decorator,
and `is None` on a tuple or list. Each is captured in the graph's frame and guarded: a changed
fact (environment variable, dtype, None in place of the tuple) compiles anew."""

from __future__ import annotations

import gc
import os
import weakref

import pytest
import torch

import stenograph

from ._support import check, t

_FLAG = "STENOGRAPH_TEST_MODEL_FLAG"

# -- os.environ ---------------------------------------------------------------------------------


def _environ_get(x):
    if os.environ.get(_FLAG, "0") == "1":
        return x + 1
    return x - 1


def _environ_item_and_in(x):
    if _FLAG in os.environ:
        return x * float(os.environ[_FLAG])
    try:
        return x + len(os.environ[_FLAG])
    except KeyError:
        return x * 0


def test_environ_get_is_read_at_trace_time(cnt, monkeypatch):
    monkeypatch.delenv(_FLAG, raising=False)
    check(_environ_get, lambda i: (t(3, seed=i),), cnt)


def test_environ_item_and_membership(cnt, monkeypatch):
    monkeypatch.setenv(_FLAG, "3")
    check(_environ_item_and_in, lambda i: (t(3, seed=i),), cnt)


def test_environ_missing_key_raises_key_error_in_the_traced_program(cnt, monkeypatch):
    monkeypatch.delenv(_FLAG, raising=False)
    check(_environ_item_and_in, lambda i: (t(3, seed=i),), cnt)


def test_changed_environment_variable_recompiles(cnt, monkeypatch):
    monkeypatch.delenv(_FLAG, raising=False)
    fn = stenograph.compile(_environ_get, backend=cnt)
    x = t(3)
    torch.testing.assert_close(fn(x), x - 1)
    torch.testing.assert_close(fn(x), x - 1)
    assert cnt.frame_count == 1
    monkeypatch.setenv(_FLAG, "1")
    torch.testing.assert_close(fn(x), x + 1)
    assert cnt.frame_count == 2
    monkeypatch.setenv(_FLAG, "0")  # set, to another value: the first entry's answer, new guard
    torch.testing.assert_close(fn(x), x - 1)
    assert cnt.frame_count == 3
    monkeypatch.delenv(_FLAG)
    torch.testing.assert_close(fn(x), x - 1)
    assert cnt.frame_count == 3


def _environ_write(x):
    os.environ[_FLAG] = "written"
    return x + 1


def test_environ_write_runs_eagerly_at_a_break(cnt, monkeypatch):
    monkeypatch.delenv(_FLAG, raising=False)
    fn = stenograph.compile(_environ_write, backend=cnt)
    x = t(3)
    torch.testing.assert_close(fn(x), x + 1)
    assert os.environ[_FLAG] == "written"


# -- torch.finfo / torch.iinfo ------------------------------------------------------------------


def _masked_min(x):
    return x.masked_fill(x > 0, torch.finfo(x.dtype).min) + torch.finfo(x.dtype).eps


def _int_limits(x):
    info = torch.iinfo(torch.int64)
    return x.clamp(max=info.max), info.bits, torch.finfo().tiny


def _finfo_of_int_dtype(x):
    try:
        torch.finfo(torch.int32)
    except TypeError:
        return x + 1
    return x


def _finfo_argument(x, info):
    return x.clamp(min=info.min / 2)


def test_finfo_of_a_tensor_dtype(cnt):
    check(_masked_min, lambda i: (t(3, 4, seed=i),), cnt)


def test_iinfo_and_default_dtype_finfo(cnt):
    check(_int_limits, lambda i: (t(3, seed=i),), cnt)


def test_finfo_of_an_integer_dtype_raises_type_error(cnt):
    # (torch.compile itself fails here with an internal error, so it is not run as the peer)
    fn = stenograph.compile(_finfo_of_int_dtype, backend=cnt)
    x = t(3)
    torch.testing.assert_close(fn(x), x + 1)
    torch.testing.assert_close(fn(x), x + 1)
    assert cnt.frame_count == 1


def test_finfo_follows_the_dtype(cnt):
    fn = stenograph.compile(_masked_min, backend=cnt)
    for dtype, graphs in ((torch.float32, 1), (torch.float32, 1), (torch.float64, 2), (torch.float32, 2)):
        x = t(3, 4).to(dtype)
        torch.testing.assert_close(fn(x), _masked_min(x))
        assert cnt.frame_count == graphs


def test_finfo_argument_is_guarded_by_value(cnt):
    fn = stenograph.compile(_finfo_argument, backend=cnt)
    x = t(3) * 1e30
    for info, graphs in (
        (torch.finfo(torch.float32), 1),
        (torch.finfo(torch.float32), 1),
        (torch.finfo(torch.bfloat16), 2),
    ):
        torch.testing.assert_close(fn(x, info), _finfo_argument(x, info))
        assert cnt.frame_count == graphs


def test_default_dtype_finfo_follows_the_default_dtype(cnt):
    fn = stenograph.compile(_int_limits, backend=cnt)
    x = t(3)
    assert fn(x)[2] == torch.finfo(torch.float32).tiny
    torch.set_default_dtype(torch.float64)
    assert fn(x)[2] == torch.finfo(torch.float64).tiny
    assert cnt.frame_count == 2


# -- torch.no_grad() as a decorator -------------------------------------------------------------


@torch.no_grad()
def _frozen_scale(x):
    return x * 3


def _decorated_no_grad(x):
    return _frozen_scale(x) + x.sin()


def test_no_grad_decorator_makes_its_context_in_the_graph(cnt):
    (out,) = check(_decorated_no_grad, lambda i: (t(3, seed=i, grad=True),), cnt, grads=True, calls=1)
    assert out.requires_grad


# -- `is None` on containers --------------------------------------------------------------------


def _optional_pair(x, pair):
    if pair is None:
        return x + 1
    items = [x]
    if pair is not None and items is not None:
        return x + pair[0] * pair[1]
    return x


@pytest.mark.parametrize("first", ["tuple", "none"])
def test_is_none_on_a_tuple_or_list(cnt, first):
    pair = (t(3, seed=1), t(3, seed=2))
    calls = [pair, None] if first == "tuple" else [None, pair]
    fn = stenograph.compile(_optional_pair, backend=cnt)
    x = t(3)
    for i, arg in enumerate([*calls, *calls]):
        torch.testing.assert_close(fn(x, arg), _optional_pair(x, arg))
        assert cnt.frame_count == min(i + 1, 2)


def test_is_none_on_a_tuple_in_one_graph(cnt):
    check(_optional_pair, lambda i: (t(3, seed=i), (t(3, seed=i + 1), t(3, seed=i + 2))), cnt)


# -- id() ---------------------------------------------------------------------------------------


class _Config:
    def __init__(self, scale):
        self.scale = scale


def _memo_by_id(x, a, b):
    memo = {id(a): a.scale}
    return x * memo.get(id(b), -1.0)


def test_id_of_arguments_is_their_real_id_guarded_by_identity(cnt):
    fn = stenograph.compile(_memo_by_id, backend=cnt)
    x, a, b = t(3), _Config(2.0), _Config(3.0)
    for args, graphs in (((a, a), 1), ((a, a), 1), ((a, b), 2), ((b, b), 3), ((a, b), 3)):
        torch.testing.assert_close(fn(x, *args), _memo_by_id(x, *args))
        assert cnt.frame_count == graphs


class _Red:
    pass


class _Blue:
    pass


def _shifted_by_class_id(x, cls):
    return x + id(cls) % 1000


def test_id_of_a_class_is_its_id_guarded_by_identity(cnt):
    """`id(cls)` of a class argument: its real id, and another class recompiles (torch.compile: the
    same, an identity guard)."""
    fn = stenograph.compile(_shifted_by_class_id, backend=cnt, fullgraph=True)
    x = t(3)
    for cls, graphs in ((_Red, 1), (_Red, 1), (_Blue, 2), (_Red, 2)):
        torch.testing.assert_close(fn(x, cls), _shifted_by_class_id(x, cls))
        assert cnt.frame_count == graphs


class _TwoBuffers(torch.nn.Module):
    """Picks a tensor attribute by comparing ids (torch's test_id_tensor)."""

    def __init__(self):
        super().__init__()
        self.first = torch.ones(2)
        self.second = torch.zeros(2)

    def forward(self, x, wanted):
        return x * (self.first if wanted == id(self.first) else self.second)


def test_id_of_a_tensor_read_from_the_frame_is_its_id_guarded_by_identity(cnt):
    """`id(t)` of an input tensor (a module attribute here) is the real tensor's id; another
    tensor in its place recompiles instead of answering with the old id, and the guard does not
    keep the old tensor alive."""
    model = _TwoBuffers()
    fn = stenograph.compile(model, backend=cnt, fullgraph=True)
    x = t(2)
    for wanted, graphs in ((id(model.first), 1), (id(model.second), 2), (id(model.first), 2)):
        torch.testing.assert_close(fn(x, wanted), model(x, wanted))
        assert cnt.frame_count == graphs
    old = weakref.ref(model.first)
    model.first = torch.full((2,), 3.0)
    torch.testing.assert_close(fn(x, id(model.first)), x * 3)
    assert cnt.frame_count == 3
    gc.collect()
    assert old() is None


def _id_of_new_objects(x):
    items, other = [x], [x]
    seen = {id(items): "items"}
    return x + len(seen), id(items) == id(other), id(items) in seen, seen.get(id(other), "none")


def test_id_of_objects_made_in_the_frame(cnt):
    check(_id_of_new_objects, lambda i: (t(3, seed=i),), cnt)


def _returns_id_of_new_object(x):
    items = [x]
    return x + 1, id(items)


def _id_keyed_by_new_object(x):
    items = [x]
    return {id(items): 1}, items


def test_id_of_a_new_object_as_a_key_of_a_returned_dict_runs_eagerly(cnt):
    """The key is the returned list's real id, as eagerly (the trace's own number came out)."""
    fn = stenograph.compile(_id_keyed_by_new_object, backend=cnt)
    with pytest.warns(stenograph.StenographWarning, match="id"):
        keyed, items = fn(t(3))
    assert id(items) in keyed
    with pytest.raises(stenograph.Unsupported, match="id"):
        stenograph.compile(_id_keyed_by_new_object, backend="eager", fullgraph=True)(t(3))


def test_id_of_a_new_object_leaving_the_frame_runs_eagerly(cnt):
    fn = stenograph.compile(_returns_id_of_new_object, backend=cnt)
    x = t(3)
    with pytest.warns(stenograph.StenographWarning, match="id"):
        out, number = fn(x)
    torch.testing.assert_close(out, x + 1)
    assert isinstance(number, int)


_REGISTRY = {"a": 1}
_SHARED = [0]


def _memo_by_container_ids(x, items):
    memo = {id(_REGISTRY): 1.0, id(items): 2.0}
    return x + memo[id(_REGISTRY)] + memo.get(id(_SHARED), 0.0), id(items) == id(_SHARED)


def test_id_of_a_list_or_dict_read_from_the_frame_is_its_id_guarded_by_identity(cnt):
    """`id()` of a dict global and of a list argument (torch's test_id_of_*_as_dict_key): their
    real ids; another list in the argument's place recompiles (it was a graph break)."""
    fn = stenograph.compile(_memo_by_container_ids, backend=cnt, fullgraph=True)
    x = t(3)
    first = [1]
    for items, graphs in ((first, 1), (first, 1), (_SHARED, 2), ([5], 3)):
        expected = x + (3.0 if items is _SHARED else 1.0)
        out, same = fn(x, items)
        torch.testing.assert_close(out, expected)
        assert same == (items is _SHARED)
        assert cnt.frame_count == graphs
