"""`builder.wrap`'s table: the order of its entries (which is semantics) and single entries, run on
a stand-in frame that records the guards they install."""

from __future__ import annotations

import enum
import functools
import inspect
import re
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import stenograph
from stenograph.guards.sources import LocalSource
from stenograph.variables import builder
from stenograph.variables.builder import WRAP_RULES, SourceNeeded, Wrapping, wrap

ORDER = [
    "forbidden",
    "special_callable",
    "tensor",
    "numpy_array",
    "numpy_scalar",
    "immutable_object",
    "size",
    "global_context",
    "dynamic_number",
    "guarded_on_use",
    "literal",
    "module",
    "optimizer",
    "python_module",
    "process_group",
    "library_function",
    "builtin",
    "graph_op",
    "tensor_method",
    "class",
    "function",
    "method",
    "partial",
    "cached_function",
    "namedtuple",
    "known_container",
    "sequence",
    "set_of_fixed_members",
    "set_of_tensors",
    "weakref",
    "weak_container",
    "module_globals",
    "frame_dict",
    "dict",
    "mapping_proxy",
    "sequence_iterator",
    "count_passed_in",
    "deque",
    "environ",
    "autograd_node",
    "typing_marker",
    "field_get",
    "bound_c_method",
    "c_callable",
]


class Guards:
    """Records the guards installed, as (kind, source name)."""

    def __init__(self) -> None:
        self.installed: list[tuple[str, str]] = []

    def __getattr__(self, kind: str) -> Any:
        return lambda source, *rest: self.installed.append((kind, source.name()))


def _frame() -> Any:
    output = SimpleNamespace(
        guards=Guards(),
        policy=None,
        known_container=lambda value, source: None,
        register_container=lambda value, var: var,
    )
    return SimpleNamespace(output=output)


def _entry(name: str) -> Any:
    return next(rule for rule in WRAP_RULES if rule.name == name)


def _build(name: str, value: Any, source: Any = None) -> Any:
    rule = _entry(name)
    assert rule.when(value, source)
    frame = _frame()
    return rule.build(Wrapping(frame, value, source)), frame.output.guards.installed


class Color(enum.Enum):
    RED = 1


def test_the_table_keeps_its_order() -> None:
    assert [rule.name for rule in WRAP_RULES] == ORDER


def test_every_entry_is_a_short_function() -> None:
    for rule in WRAP_RULES:
        assert len(inspect.getsource(rule.build).splitlines()) <= 25, rule.name


def test_a_marked_callable_comes_before_its_kind() -> None:
    """`is_compiling` is a plain function, but its entry answers first: folded to True."""
    var = wrap(_frame(), stenograph.is_compiling, None)
    assert type(var).__name__ == "FoldedCallVariable"


def test_special_callable_passes_ordinary_functions_on() -> None:
    assert _build("special_callable", len)[0] is None


def test_tensor_needs_a_source() -> None:
    with pytest.raises(SourceNeeded):
        _build("tensor", torch.zeros(1))


@pytest.mark.parametrize("value", [Color.RED, re.compile("a+"), re.match("a", "ab")])
def test_immutable_objects_are_constants_guarded_by_identity(value: Any) -> None:
    var, guards = _build("immutable_object", value, LocalSource("c"))
    assert var.as_constant() is value
    assert guards == [("id_match", "L['c']")]


def test_size_is_guarded_on_its_value() -> None:
    var, guards = _build("size", torch.Size([2, 3]), LocalSource("s"))
    assert var.as_constant() == torch.Size([2, 3])
    assert guards == [("constant_match", "L['s']")]


def test_a_number_from_the_frame_is_guarded_when_used() -> None:
    var, guards = _build("guarded_on_use", 3, LocalSource("n"))
    assert guards == []
    assert var.as_constant() == 3
    assert guards == [("constant_match", "L['n']")]


def test_a_literal_without_source_is_the_shared_constant() -> None:
    var, guards = _build("literal", 3)
    assert var is wrap(_frame(), 3, None) and guards == []


def test_library_function_passes_what_no_table_models() -> None:
    assert _build("library_function", object())[0] is None


def test_partial_is_read_through_its_parts() -> None:
    var, guards = _build("partial", functools.partial(max, 1), LocalSource("p"))
    assert [kind for kind, _ in guards] == ["type_match", "length_match", "dict_keys_match", "id_match"]
    assert var.args[0].as_constant() == 1


def test_an_object_no_entry_answers_is_a_user_object() -> None:
    thing = SimpleNamespace(a=1)
    var = wrap(_frame(), thing, LocalSource("x"))
    assert type(var).__name__ == "UserObjectVariable" and var.value_object is thing


class Stepper:
    def step(self) -> None: ...


def test_an_object_without_source_needs_one_unless_inert() -> None:
    with pytest.raises(SourceNeeded):
        wrap(_frame(), Stepper(), None)
    inert = SimpleNamespace(a=1)  # no methods of its own: a sentinel-like record
    assert wrap(_frame(), inert, None).as_constant() is inert


def test_the_table_is_only_filled_by_its_decorator() -> None:
    assert all(rule.build is getattr(builder, "_" + rule.name) for rule in WRAP_RULES)
