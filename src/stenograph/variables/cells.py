"""Closure cells and lazily wrapped values of a traced frame.

`LazyValue` is a real value of the compiled frame, wrapped (and guarded) only when the code reads
it; `Cell` is a closure cell while tracing; `CellVariable` is what LOAD_CLOSURE pushes, and
`RealCellVariable` an existing cell as the side-effect replay writes it. They live with the
trackers because trackers create and read them (nested functions, side effects); the
interpreter and the break writer use them too.
"""

from __future__ import annotations

import dis
import types
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import process_state
from .base import Variable

if TYPE_CHECKING:
    from ..guards.sources import Source
    from ..interpreter.frame import Frame


@dataclass
class LazyValue:
    """A real value of the root frame, wrapped (and guarded) only when the code reads it."""

    value: Any
    source: Source


class Cell:
    """A closure cell while tracing: holds a tracker, or a lazy real value.

    `real` is the cell object of an existing closure (None for cells made while tracing): a
    write to it is a side effect, replayed on the real cell after the graph.
    """

    def __init__(
        self, contents: Variable | LazyValue | None = None, real: Any = None, source: Source | None = None
    ) -> None:
        self.contents = contents
        self.real = real
        self.source = source
        self.root_index: int | None = None  # set for the compiled function's own closure
        self._ref: RealCellVariable | None = None
        # for a cell variable of a traced frame: (its code, its name), to decide whether a copy of
        # the cell may stand in for it in code rebuilt at a graph break (`copy_is_safe`)
        self.owner: tuple[types.CodeType, str] | None = None
        # a nested function closes over it (LOAD_CLOSURE ran): a graph break then shares it
        # with the resume function where a copy would not do (`graph.breaks`)
        self.captured = False

    def copy_is_safe(self) -> bool:
        """Whether a new cell holding the current value behaves like this one for the rest of
        the call: the variable is assigned at most once, not in a loop, never by a nested
        function, and (if assigned at all) already has its value."""
        if self.owner is None:
            return False
        stores = _cell_stores(*self.owner)
        if _is_parameter(*self.owner):
            return stores == 0  # bound by the call: any store assigns it again
        return stores == 0 or (stores == 1 and self.contents is not None)

    def write(self, frame: Frame, value: Variable) -> None:
        """STORE_DEREF: update the tracker; an existing cell also gets the write replayed."""
        self.contents = value
        if self.real is not None:
            if self._ref is None:
                self._ref = RealCellVariable(self, self.root_index)
            frame.output.side_effects.attribute_written(self._ref, "cell_contents", value)


_stores: weakref.WeakKeyDictionary[types.CodeType, dict[str, int]] = weakref.WeakKeyDictionary()
process_state.register_containers("variables.cell_stores", _stores, memo=True)


def _cell_stores(code: types.CodeType, name: str) -> int:
    """`_count_cell_stores`, remembered while `code` lives."""
    counts = _stores.get(code)
    if counts is None:
        counts = _stores[code] = {}
    if name not in counts:
        counts[name] = _count_cell_stores(code, name)
    return counts[name]


def _count_cell_stores(code: types.CodeType, name: str) -> int:
    """How many times cell variable `name` of `code` may be assigned: the count of its
    STORE_DEREF/DELETE_DEREF instructions, or 2 ("many") if one sits in a loop or in a nested
    function that shares the cell."""
    instructions = list(dis.get_instructions(code))
    loops = [(i.argval, i.offset) for i in instructions if i.opname.startswith("JUMP_BACKWARD")]
    stores = [i.offset for i in instructions if i.opname in ("STORE_DEREF", "DELETE_DEREF") and i.argval == name]
    if any(start <= offset <= end for offset in stores for start, end in loops):
        return 2
    if any(_nested_writes(const, name) for const in code.co_consts if isinstance(const, types.CodeType)):
        return 2
    return len(stores)


def _is_parameter(code: types.CodeType, name: str) -> bool:
    flags = code.co_flags
    count = code.co_argcount + code.co_kwonlyargcount + bool(flags & 0x04) + bool(flags & 0x08)
    return name in code.co_varnames[:count]


def _nested_writes(code: types.CodeType, name: str) -> bool:
    if name not in code.co_freevars:
        return False
    writes = any(i.opname in ("STORE_DEREF", "DELETE_DEREF") and i.argval == name for i in dis.get_instructions(code))
    return writes or any(_nested_writes(c, name) for c in code.co_consts if isinstance(c, types.CodeType))


class RealCellVariable(Variable):
    """An existing closure cell as the side-effect replay writes it: through its source, as
    the compiled function's own `___cells[i]`, or as the cell object itself."""

    def __init__(self, cell: Cell, root_index: int | None) -> None:
        self.cell = cell
        self.root_index = root_index
        self.source = cell.source

    def describe(self) -> str:
        return "closure cell"

    def reconstruct(self, rebuild: Any) -> str:
        if self.root_index is not None:
            return f"___cells[{self.root_index}]"
        return rebuild.writer.bind(self.cell.real, "cell")


class CellVariable(Variable):
    """What LOAD_CLOSURE pushes: a reference to a cell, for MAKE_FUNCTION's closure tuple."""

    def __init__(self, cell: Cell) -> None:
        self.cell = cell
