"""The opcode registry: one row per opcode and range of Python versions.

A row says: on Python versions `min_ver` to `max_ver` (both included; `max_ver=None` is open
ended), the instruction `opname` is executed symbolically by `handler`, and, if the instruction
can break the graph, run eagerly at the break by what `eager` writes (`break_rendering.py`). Rows
of one opcode must not overlap, so for any version an opcode has at most one row; a behaviour that
changed between versions is two rows, not a version check inside a handler.

The table of the running interpreter (opname -> handler, and opname -> rendering) is built once;
the interpreter's dispatch is then a plain dict lookup per instruction, as before rows existed.

Adding a Python version: add it to `SUPPORTED`, close the rows of opcodes it removed or changed
(`max_ver`) and register rows for the new or changed ones (`min_ver`), all in `opcodes.py`.
"""

from __future__ import annotations

import dis
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import Unsupported

if TYPE_CHECKING:
    from .break_rendering import Rendering
    from .frame import Frame

Handler = Callable[["Frame", dis.Instruction], None]
Version = tuple[int, int]

#: The Python versions the interpreter runs on, oldest first.
SUPPORTED: tuple[Version, ...] = ((3, 11), (3, 12), (3, 13), (3, 14), (3, 15))
OLDEST: Version = SUPPORTED[0]


@dataclass(frozen=True, slots=True)
class Row:
    """One registration: `opname` on versions `min_ver` to `max_ver` (inclusive; None: no end)."""

    opname: str
    handler: Handler
    min_ver: Version = OLDEST
    max_ver: Version | None = None
    eager: Rendering | None = None

    def applies_to(self, version: Version) -> bool:
        return self.min_ver <= version and (self.max_ver is None or version <= self.max_ver)

    def overlaps(self, other: Row) -> bool:
        """Some version is covered by both rows (only meaningful for rows of one opname)."""
        starts_before_other_ends = other.max_ver is None or self.min_ver <= other.max_ver
        other_starts_before_end = self.max_ver is None or other.min_ver <= self.max_ver
        return starts_before_other_ends and other_starts_before_end

    def describe(self) -> str:
        end = "" if self.max_ver is None else f"{self.max_ver[0]}.{self.max_ver[1]}"
        return f"{self.opname} [{self.min_ver[0]}.{self.min_ver[1]}-{end}] -> {self.handler.__qualname__}"


class OpcodeRegistry:
    """The rows of every opcode, and the per-version tables built from them."""

    def __init__(self) -> None:
        self.rows: dict[str, list[Row]] = {}

    def register(
        self,
        *opnames: str,
        min_ver: Version = OLDEST,
        max_ver: Version | None = None,
        eager: Rendering | None = None,
    ) -> Callable[[Handler], Handler]:
        """Decorator: one row per name in `opnames`, sharing the handler, range and rendering."""

        def register(handler: Handler) -> Handler:
            for name in opnames:
                self.add(Row(name, handler, min_ver, max_ver, eager))
            return handler

        return register

    def add(self, row: Row) -> None:
        if row.max_ver is not None and row.max_ver < row.min_ver:
            raise ValueError(f"empty version range: {row.describe()}")
        rows = self.rows.setdefault(row.opname, [])
        for other in rows:
            if row.overlaps(other):
                raise ValueError(f"overlapping registrations: {other.describe()} and {row.describe()}")
        rows.append(row)

    def row(self, opname: str, version: Version) -> Row | None:
        """The row of `opname` on `version`, or None."""
        for row in self.rows.get(opname, ()):
            if row.applies_to(version):
                return row
        return None

    def table(self, version: Version) -> dict[str, Row]:
        """opname -> row for every opcode with a row on `version`."""
        found = {}
        for opname in self.rows:
            row = self.row(opname, version)
            if row is not None:
                found[opname] = row
        return found

    def handlers(self, version: Version) -> dict[str, Handler]:
        return {name: row.handler for name, row in self.table(version).items()}

    def renderings(self, version: Version) -> dict[str, Rendering]:
        """opname -> eager rendering of the opcodes that can break the graph on `version`."""
        return {name: row.eager for name, row in self.table(version).items() if row.eager is not None}


def running_version() -> Version:
    """The running Python's (major, minor); Unsupported if the interpreter has no table for it."""
    version = sys.version_info[:2]
    if version not in SUPPORTED:
        names = [f"{v[0]}.{v[1]}" for v in SUPPORTED]
        listed = f"{', '.join(names[:-1])} and {names[-1]}"
        raise Unsupported(f"Python {version[0]}.{version[1]} is not supported yet ({listed} are)")
    return version
