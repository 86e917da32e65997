"""Encoding the 3.11+ location table (`co_linetable`) from per-code-unit positions.

Why this exists: the `bytecode` package (0.19.1) writes the "one line" entry form for columns up
to 255, but CPython only allows it below 128. CPython finds entry boundaries by the high bit of
each byte (`co_lines()`, and the line array 3.11 builds when tracing or profiling is on), so a
column byte >= 128 is read as the start of a new entry: the table then describes more code units
than the code has, and on 3.11 building the line array writes past its buffer (heap corruption
seen with `sys.setprofile` and `nn.MultiheadAttention.forward`). `co_positions()` decodes such a
table correctly, so `assemble` re-encodes the table from it with this conforming encoder.

Format (CPython `Objects/locations.md`): each entry covers 1-8 code units; its first byte is
`0x80 | code << 3 | (units - 1)`, followed by a payload whose bytes all have the high bit clear.
"""

from __future__ import annotations

import types
from collections.abc import Iterable

__all__ = ["encode_locations", "relocate_line_table", "line_table_is_valid"]

Position = tuple[int | None, int | None, int | None, int | None]

_NO_LOCATION = 15
_LONG = 14
_NO_COLUMN = 13
_ONE_LINE = 10  # + line delta (0, 1 or 2)


def _varint(value: int, out: bytearray) -> None:
    # 6 bits per byte, least significant chunk first, bit 6 = "more follows"
    while value >= 64:
        out.append(64 | (value & 63))
        value >>= 6
    out.append(value)


def _svarint(value: int, out: bytearray) -> None:
    _varint((-value << 1) | 1 if value < 0 else value << 1, out)


def _entry(out: bytearray, units: int, pos: Position, line: int) -> int:
    """Append one entry for `units` (1-8) code units at `pos`; return the new current line."""
    lineno, end_lineno, col, end_col = pos
    header = 0x80 | (units - 1)
    if lineno is None:
        out.append(header | _NO_LOCATION << 3)
        return line
    delta = lineno - line
    if end_lineno is None:
        end_lineno = lineno
    if col is None and end_col is None and end_lineno == lineno:
        out.append(header | _NO_COLUMN << 3)
        _svarint(delta, out)
    elif (
        col is not None
        and end_col is not None
        and end_lineno == lineno
        and delta == 0
        and col < 80
        and 0 <= end_col - col < 16
    ):
        out.append(header | (col >> 3) << 3)  # short form: code is col // 8
        out.append(((col & 7) << 4) | (end_col - col))
    elif (
        col is not None
        and end_col is not None
        and end_lineno == lineno
        and 0 <= delta < 3
        and col < 128
        and end_col < 128
    ):
        out.append(header | (_ONE_LINE + delta) << 3)
        out.append(col)
        out.append(end_col)
    else:
        out.append(header | _LONG << 3)
        _svarint(delta, out)
        _varint(max(end_lineno - lineno, 0), out)
        _varint(0 if col is None else col + 1, out)
        _varint(0 if end_col is None else end_col + 1, out)
    return lineno


def encode_locations(positions: Iterable[Position], first_lineno: int) -> bytes:
    """A location table for code whose code units (caches included) have `positions`."""
    out = bytearray()
    line = first_lineno
    run_pos: Position | None = None
    run = 0
    for pos in positions:
        pos = tuple(pos)
        if run and (pos != run_pos or run == 8):
            line = _entry(out, run, run_pos, line)
            run = 0
        run_pos = pos
        run += 1
    if run:
        _entry(out, run, run_pos, line)
    return bytes(out)


def relocate_line_table(code: types.CodeType) -> types.CodeType:
    """`code` with its location table re-encoded from its own `co_positions()`."""
    table = encode_locations(code.co_positions(), code.co_firstlineno)
    if table == code.co_linetable:
        return code
    return code.replace(co_linetable=table)


def line_table_is_valid(code: types.CodeType) -> bool:
    """True if `co_lines()` covers exactly the code's units, as CPython's line array needs."""
    covered = 0
    for start, end, _ in code.co_lines():
        if start != covered:
            return False
        covered = end
    return covered == len(code.co_code)
