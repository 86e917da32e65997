"""The contract between an opcode's registered eager rendering and the graph-break writer.

At a graph break the transformed function rebuilds the frame's value stack as real values, runs
the breaking instruction eagerly as Python source, and calls the resume function(s) that carry on
after it (`graph/breaks.py`). What that source is depends on the opcode only, so each opcode that
can break carries it in its registration (`registry.Row.eager`, the rows are in `opcodes.py`).

A rendering is called as `rendering(site, inst)` and returns `(lines, continuations)`: the eager
lines (they may assign `___r`, the result, or `___c`, a condition), then one
`(condition, offset, stack)` per resume function to call: `condition` None is the unconditional
last one, `offset` is where it resumes (in the breaking frame's code) and `stack` the `Slot`s it
receives. `site` is what the break writer passes down: the frame at the break, its stack as slots
and as expressions, and the few writer services a rendering needs (binding objects into the
generated code's namespace, naming callables and the frame's globals).
"""

from __future__ import annotations

import dis
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..bytecode.resume_code import ITERATOR_FROM_TUPLE, VALUE_STACK_ENTRY, SlotKind

if TYPE_CHECKING:
    from ..variables.base import Variable
    from .frame import Frame


@dataclass
class Slot:
    """One value-stack entry of the frame at the break, as the resume function receives it."""

    # VALUE_STACK_ENTRY; NULL_STACK_ENTRY; ITERATOR_FROM_TUPLE (passed as a tuple, iterated by the
    # resume prologue); LastiStackEntry(offset) (a handler's lasti, pushed by the prologue)
    kind: SlotKind
    expr: str = ""
    dynamic: bool = False  # a number from tensor data: symbolic in the resume function
    # the `__exit__` of a grad-mode context entered again for the break (`BreakWriter`)
    context_exit: bool = False


def result(dynamic: bool = False) -> Slot:
    """The slot of the instruction's result, which the eager lines assign to `___r`."""
    return Slot(VALUE_STACK_ENTRY, "___r", dynamic)


Continuation = tuple[str | None, int | None, list[Slot]]
Rendered = tuple[list[str], list[Continuation]]


@dataclass
class BreakSite:
    """The breaking instruction's surroundings, as the break writer hands them to a rendering."""

    frame: Frame
    slots: list[Slot]
    next_offset: int | None  # the instruction after the breaking one (None: it is the last)
    # the expression calling `var` at the break (user functions through entry wrappers)
    callable_expr: Callable[[Variable], str]
    # a name in the generated code bound to an object (`bind(obj, hint)`)
    bind: Callable[[Any, str], str]
    # the generated code's namespace, for fixed helper names (`___MethodType`, `___END`)
    namespace: dict[str, Any]
    # the expression of the frame's globals dict in the generated code
    globals_expr: Callable[[], str]
    # the stack as expressions; a loop iterator travels as a tuple, the instruction needs an iterator
    values: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.values = [f"iter({s.expr})" if s.kind is ITERATOR_FROM_TUPLE else s.expr for s in self.slots]

    def rest(self, n: int) -> list[Slot]:
        """The stack without its top `n` entries (those the instruction consumes)."""
        return self.slots[: len(self.slots) - n]


Rendering = Callable[[BreakSite, dis.Instruction], Rendered]
