"""Side effects made before a break are visible to the eager code at the break, and after it.

The eager part must see the real objects already updated (list.append, dict writes, attribute
writes, globals, in-place tensor updates); what it changes must be seen by the resumed part; and
everything ends exactly as in eager. The eager code reads state through `__str__` methods called
by print (so nothing is folded at trace time) and through stenograph.disable'd probes.
"""

from __future__ import annotations

import torch
from helpers import assert_same, ops_of
from torch import nn

import stenograph


class _Box:
    """A plain object; print(box) reads its attributes eagerly, through __str__."""

    def __init__(self) -> None:
        self.count = 0
        self.tag = "new"

    def __str__(self) -> str:
        return f"Box(count={self.count}, tag={self.tag})"


class _ListView:
    """print(view) reads the wrapped list eagerly: its length and the types of its items."""

    def __init__(self, items: list) -> None:
        self.items = items

    def __str__(self) -> str:
        return f"{len(self.items)} items: " + ",".join(type(item).__name__ for item in self.items)


def _append_then_print(x, log, view):
    log.append("start")
    y = x * 2
    log.append(y)
    print(view)
    log.append("end")
    return y + 1


def test_list_append_before_break_is_visible_to_eager_print(cnt, capsys):
    """Two appends before the break are in the list when print reads it; the third comes after."""
    fn = stenograph.compile(_append_then_print, backend=cnt)
    for _ in range(3):
        x = torch.randn(3)
        log_e, log_c = [], []
        capsys.readouterr()
        out_e = _append_then_print(x, log_e, _ListView(log_e))
        eager_text = capsys.readouterr().out
        out_c = fn(x, log_c, _ListView(log_c))
        assert capsys.readouterr().out == eager_text == "2 items: str,Tensor\n"
        assert_same(out_c, out_e)
        assert_same(log_c, log_e)
    assert cnt.frame_count == 2


def _attr_writes_then_print(x, box):
    box.count = box.count + 1
    box.tag = "seen"
    y = x.sin()
    print(box)
    box.count = box.count + 10
    return y * box.count


def test_attribute_writes_before_break_are_visible_to_eager_print(cnt, capsys):
    """Attribute writes before the break are on the real object when the eager print reads it."""
    fn = stenograph.compile(_attr_writes_then_print, backend=cnt)
    box_e, box_c = _Box(), _Box()
    for _ in range(3):
        x = torch.randn(3)
        capsys.readouterr()
        out_e = _attr_writes_then_print(x, box_e)
        eager_text = capsys.readouterr().out
        out_c = fn(x, box_c)
        assert capsys.readouterr().out == eager_text
        assert_same(out_c, out_e)
        assert (box_c.count, box_c.tag) == (box_e.count, box_e.tag)
    assert eager_text == "Box(count=23, tag=seen)\n"
    assert box_c.count == 33


def _dict_write_then_print(x, d, view):
    d["a"] = x.sum()
    d["b"] = 2
    del d["old"]
    print(view)
    return x * d["b"]


def test_dict_writes_before_break_are_visible_to_eager_print(cnt, capsys):
    """Dict stores and deletes before the break are applied before print reads the dict."""

    class DictView:
        def __init__(self, d):
            self.d = d

        def __str__(self):
            return ",".join(sorted(self.d))

    fn = stenograph.compile(_dict_write_then_print, backend=cnt)
    for _ in range(2):
        x = torch.randn(4)
        d_e, d_c = {"old": 1}, {"old": 1}
        capsys.readouterr()
        out_e = _dict_write_then_print(x, d_e, DictView(d_e))
        eager_text = capsys.readouterr().out
        out_c = fn(x, d_c, DictView(d_c))
        assert capsys.readouterr().out == eager_text == "a,b\n"
        assert_same(out_c, out_e)
        assert_same(d_c, d_e)
    assert cnt.frame_count == 2


_COUNTER = 0


class _GlobalView:
    def __str__(self) -> str:
        return f"counter={_COUNTER}"


def _global_write_then_print(x):
    global _COUNTER
    _COUNTER += 1
    y = x + _COUNTER
    print(_GlobalView())
    return y


def test_global_write_before_break_is_visible_to_eager_print(cnt, capsys):
    """A global incremented before the break holds the new value when the eager code reads it."""
    global _COUNTER
    fn = stenograph.compile(_global_write_then_print, backend=cnt)
    _COUNTER = 0
    x = torch.randn(3)
    capsys.readouterr()
    expected = [(_global_write_then_print(x), capsys.readouterr().out) for _ in range(3)]
    _COUNTER = 0
    for out_e, text_e in expected:
        out_c = fn(x)
        assert capsys.readouterr().out == text_e
        assert_same(out_c, out_e)
    assert [text for _, text in expected] == ["counter=1\n", "counter=2\n", "counter=3\n"]
    assert _COUNTER == 3


def _inplace_then_print(x):
    x.add_(1)
    x.mul_(2)
    print("x now", x)
    return x.sum()


def test_in_place_tensor_update_before_break_is_visible_to_eager_print(cnt, capsys):
    """In-place updates of an input are applied to the real tensor before the eager print reads it."""
    fn = stenograph.compile(_inplace_then_print, backend=cnt)
    for _ in range(3):
        base = torch.randn(4)
        x_e, x_c = base.clone(), base.clone()
        capsys.readouterr()
        out_e = _inplace_then_print(x_e)
        eager_text = capsys.readouterr().out
        out_c = fn(x_c)
        assert capsys.readouterr().out == eager_text
        assert_same(out_c, out_e)
        torch.testing.assert_close(x_c, x_e)
    assert cnt.frame_count == 2


class _Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.calls = 0

    def __str__(self) -> str:
        return f"calls={self.calls}"

    def forward(self, x):
        self.calls = self.calls + 1
        y = self.fc(x)
        print(self)
        return y.relu()


def test_module_attribute_write_before_break_is_visible(cnt, capsys):
    """A module attribute counter incremented before the break is seen by the eager print."""
    model = _Counter()
    compiled = stenograph.compile(model, backend=cnt)
    x = torch.randn(2, 3)
    capsys.readouterr()
    for n in range(1, 4):
        out = compiled(x)
        assert capsys.readouterr().out == f"calls={n}\n"
        torch.testing.assert_close(out, model.fc(x).relu())
    assert model.calls == 3


def _make_mutator():
    @stenograph.disable
    def mutate(box, items):
        box.count = box.count * 100
        items.append("eager")

    return mutate


def _eager_mutation_seen_after_resume(x, box, items, mutate):
    items.append("traced")
    box.count = box.count + 1
    y = x * 2
    mutate(box, items)
    return y + box.count, len(items)


def test_eager_mutation_at_break_is_seen_by_the_resumed_part(cnt):
    """What the eager call changes (attribute, list) is read by the resumed part, not stale values."""
    mutate = _make_mutator()
    fn = stenograph.compile(_eager_mutation_seen_after_resume, backend=cnt)
    for start in (1, 1, 2):
        x = torch.randn(3)
        box_e, box_c = _Box(), _Box()
        box_e.count = box_c.count = start
        items_e, items_c = [], []
        expected = _eager_mutation_seen_after_resume(x, box_e, items_e, mutate)
        actual = fn(x, box_c, items_c, mutate)
        assert_same(actual, expected)
        assert items_c == items_e == ["traced", "eager"]
        assert box_c.count == box_e.count == (start + 1) * 100
    assert ops_of(cnt.graphs[0]) == ["mul"]


def _list_made_in_frame(x, box, mutate):
    acc = [x.sum()]
    mutate(box, acc)
    acc.append(x.mean())
    return acc, box.count


def test_list_created_in_frame_is_the_same_object_for_eager_code_and_resume(cnt):
    """A list made in the frame is passed to the eager call; its append is kept after resuming."""
    mutate = _make_mutator()
    fn = stenograph.compile(_list_made_in_frame, backend=cnt)
    for _ in range(2):
        x = torch.randn(5)
        acc_c, count_c = fn(x, _Box(), mutate)
        acc_e, count_e = _list_made_in_frame(x, _Box(), mutate)
        assert count_c == count_e == 0
        assert len(acc_c) == 3 and acc_c[1] == "eager"
        assert_same(acc_c, acc_e)
    assert cnt.frame_count == 2
