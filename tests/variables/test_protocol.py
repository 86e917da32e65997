"""The tracker protocol: every operation is declared on `Variable`, with a default that refuses
(Unsupported naming the tracker) or answers "cannot" (None / False), and callers use the declared
methods instead of probing trackers for optional ones."""

from __future__ import annotations

import ast
import operator
from pathlib import Path
from typing import Any

import pytest

import stenograph
from stenograph.errors import Unsupported
from stenograph.variables.base import Variable
from stenograph.variables.constants import ConstantVariable, IteratorVariable, constant
from stenograph.variables.containers import (
    DictVariable,
    ListIteratorVariable,
    ListVariable,
    SetVariable,
    SizeVariable,
    TupleVariable,
    iterate,
)

# operations that refuse by default: (method, arguments after the tracker)
REFUSING = {
    "python_type": (),
    "as_constant": (),
    "getattr": (None, "weight"),
    "setattr": (None, "weight", constant(1)),
    "delattr": (None, "weight"),
    "call": (None, [], {}),
    "call_method": (None, "forward", [], {}),
    "getitem": (None, constant(0)),
    "setitem": (None, constant(0), constant(1)),
    "delitem": (None, constant(0)),
    "truth": (None,),
    "length": (None,),
    "unpack": (None,),
    "next": (None,),
    "reconstruct": (None,),
}
# queries whose default answer is "cannot" / "no"
QUERIES = {
    "is_constant": ((), False),
    "made_while_tracing": ((), False),
    "in_graph": ((), False),
    "contains": ((None, constant(1)), None),
    "binary_op": ((None, operator.add, operator.add, constant(1)), None),
    "unary_op": ((None, operator.neg), None),
    "get_iter": ((None,), None),
    "replay_mutation": (("target", str, str), None),
}
PROTOCOL = [*REFUSING, *QUERIES, "describe", "value_object", "attrs", "source"]


class Opaque(Variable):
    """A tracker that supports nothing."""

    def describe(self) -> str:
        return "opaque thing 42"


@pytest.mark.parametrize("name", PROTOCOL)
def test_base_declares_the_protocol(name: str) -> None:
    assert name in vars(Variable), f"Variable does not declare {name}"


@pytest.mark.parametrize("name", PROTOCOL)
def test_the_docstring_maps_the_protocol(name: str) -> None:
    assert f"`{name}" in Variable.__doc__


@pytest.mark.parametrize("name", sorted(REFUSING))
def test_defaults_refuse_with_the_description(name: str) -> None:
    with pytest.raises(Unsupported) as info:
        getattr(Opaque(), name)(*REFUSING[name])
    assert "opaque thing 42" in str(info.value)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_query_defaults_answer_cannot(name: str) -> None:
    args, answer = QUERIES[name]
    assert getattr(Opaque(), name)(*args) is answer


def test_identity_defaults() -> None:
    assert Opaque().value_object is None
    assert Opaque().attrs is None
    assert Opaque().source is None
    assert Variable().describe() == "Variable"


class FakeCodegen:
    """The part of `graph.codegen.Reconstructor` that trackers call."""

    def __init__(self) -> None:
        self.built: list[Variable] = []

    def expr(self, var: Variable) -> str:
        return var.reconstruct(self)

    def constant(self, value: Any) -> str:
        return repr(value)

    def graph_value(self, node: Any) -> str:
        return f"out[{node}]"

    def build_once(self, var: Variable, render) -> str:
        self.built.append(render())
        return "built"


def test_reconstruct_of_constants_and_sequences() -> None:
    codegen = FakeCodegen()
    assert constant(3).reconstruct(codegen) == "3"
    assert TupleVariable([constant(1), constant("a")]).reconstruct(codegen) == "(1, 'a', )"
    assert SizeVariable([constant(2)]).reconstruct(codegen) == "___Size((2, ))"
    items = ListVariable([constant(1)])
    assert items.reconstruct(codegen) == "built" and codegen.built == ["[1]"]
    assert DictVariable({"k": constant(2)}).reconstruct(codegen) == "built" and codegen.built[1] == "{'k': 2}"
    iterator = IteratorVariable([constant(1), constant(2)])
    iterator.index = 1
    assert iterator.reconstruct(codegen) == "built" and codegen.built[2] == "iter((2, ))"  # (one iterator)


def test_containers_answer_their_queries() -> None:
    made = ListVariable([constant(1)])
    assert made.made_while_tracing() and isinstance(made.get_iter(None), ListIteratorVariable)
    read = ListVariable([], source=object())  # type: ignore[arg-type]
    assert not read.made_while_tracing()
    table = DictVariable({"a": constant(1)})
    assert table.contains(None, constant("a")) is True
    assert table.contains(None, constant("b")) is False
    iterator = IteratorVariable([])
    assert iterator.get_iter(None) is iterator
    assert SetVariable({}).made_while_tracing()


def test_a_value_without_an_iterator_of_its_own_is_iterated_over_its_items() -> None:
    """`get_iter` answers None by default: `iterate` then walks what `unpack` gives, once."""
    items = [constant(1), constant(2)]

    class Unpacked(Opaque):
        def unpack(self, frame: Any) -> list[Variable]:
            return items

    iterator = iterate(None, Unpacked())  # type: ignore[arg-type]
    assert type(iterator) is IteratorVariable and iterator.items is items


def test_replay_mutation_renders_new_contents() -> None:
    pinned: list[str] = []

    def pin(text: str) -> str:
        pinned.append(text)
        return "v"

    def expr(var: Variable) -> str:
        return var.reconstruct(FakeCodegen())

    assert ListVariable([constant(1)]).replay_mutation("L", expr, pin) == "L[:] = v"
    assert DictVariable({"k": constant(2)}).replay_mutation("D", expr, pin) == "D.clear(); D.update(v)"
    assert pinned == ["[1]", "{'k': 2}"]
    assert ConstantVariable(1).replay_mutation("C", expr, pin) is None


_PROBED = {name for name in PROTOCOL if name not in ("source", "describe")}


def test_no_module_probes_trackers_for_protocol_operations() -> None:
    """`getattr(var, "reconstruct", None)` / `hasattr(var, "setitem")`: the protocol declares
    these on every tracker, so a probe is always a mistake."""
    root = Path(stenograph.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id not in ("getattr", "hasattr") or len(node.args) < 2:
                continue
            name = node.args[1]
            if isinstance(name, ast.Constant) and name.value in _PROBED:
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.func.id}(..., {name.value!r})")
    assert not found, found
