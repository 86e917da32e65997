"""Turning code objects into editable instruction lists and back (assembly).

Built on the `bytecode` package (PyPI), which handles what is tedious and version-specific:
EXTENDED_ARG sizing of jumps, inline CACHE entries, the location (line) table, the exception
table encoding, localsplus layout of cell/free variables and the stack size. It was judged by
round-tripping every code object of several stdlib and torch modules on 3.11 and 3.12
(tests/bytecode/test_roundtrip*.py), which found two things to work around:

* Its location table is invalid for columns 128-255 (see `linetable`); `assemble` re-encodes
  the table from the positions it meant, with a conforming encoder.
* Its *recomputation* of exception-handler stack depths is wrong for some code on 3.11 and 3.12
  (handlers in asyncio's coroutines got depth 2 or 3 instead of 0 or 1, which corrupts the stack
  when the handler runs). `disassemble` therefore keeps the depths recorded
  in the original exception table (`conserve_exception_block_stackdepth=True`) and `assemble`
  only recomputes them when some `TryBegin` has none (code built from scratch).

Harmless differences it leaves (asserted as harmless by the tests): constants and names may be
re-ordered or unused ones dropped, non-argument locals may be re-ordered, adjacent line-table
ranges are merged, an exception range may start after an EXTENDED_ARG prefix instead of on it,
and on 3.12 the computed stack size can be one or two larger than CPython's.
"""

from __future__ import annotations

import types

import bytecode as _bc

from .instructions import decoded
from .linetable import relocate_line_table

__all__ = [
    "AbstractBytecode",
    "assemble",
    "disassemble",
    "instruction_positions",
    "roundtrip",
]

#: The editable form: a list of `bytecode.Instr`, `Label`, `TryBegin`, `TryEnd`, `SetLineno`.
AbstractBytecode = _bc.Bytecode


def disassemble(code: types.CodeType) -> AbstractBytecode:
    """`code` as an editable `bytecode.Bytecode`: jumps use labels, try ranges are TryBegin/TryEnd
    pairs that keep the original handler stack depths, and there are no CACHE/EXTENDED_ARG
    entries."""
    return _bc.Bytecode.from_code(code, conserve_exception_block_stackdepth=True)


def assemble(
    bc: AbstractBytecode,
    *,
    stacksize: int | None = None,
    compute_exception_depths: bool | None = None,
) -> types.CodeType:
    """Build a code object from `bc`.

    Handler stack depths are recomputed only if `compute_exception_depths` is true, or it is
    None and some `TryBegin` has no depth (see the module docstring for why not by default).
    `stacksize` defaults to the depth the `bytecode` package computes.
    """
    if compute_exception_depths is None:
        compute_exception_depths = any(
            isinstance(item, _bc.TryBegin) and not isinstance(item.stack_depth, int) for item in bc
        )
    code = bc.to_code(stacksize=stacksize, compute_exception_stack_depths=compute_exception_depths)
    return relocate_line_table(code)


def roundtrip(code: types.CodeType, *, recursive: bool = False) -> types.CodeType:
    """Disassemble and reassemble `code`: an equivalent, independently built code object.

    With `recursive`, nested code objects (inner functions, lambdas, comprehensions, class
    bodies) are round-tripped too; otherwise they are kept as they are.
    """
    bc = disassemble(code)
    if recursive:
        for item in bc:
            if isinstance(item, _bc.Instr) and isinstance(item.arg, types.CodeType):
                item.arg = roundtrip(item.arg, recursive=True)
    return assemble(bc)


def instruction_positions(bc: AbstractBytecode, code: types.CodeType) -> dict[int, int]:
    """Map each instruction offset of `code` to the index of the same instruction in `bc`.

    `bc` must come from `disassemble(code)` (before edits that add or remove instructions). The
    abstract form holds the decoded instructions in order, one for one, which this checks.
    """
    instrs = decoded(code).instructions
    positions: dict[int, int] = {}
    k = 0
    for index, item in enumerate(bc):
        if not isinstance(item, _bc.Instr):
            continue
        if k >= len(instrs) or instrs[k].opname != item.name:
            raise ValueError(
                f"{code.co_qualname}: abstract bytecode does not match the decoded instructions "
                f"at instruction {k} ({item.name})"
            )
        positions[instrs[k].offset] = index
        k += 1
    if k != len(instrs):
        raise ValueError(f"{code.co_qualname}: abstract bytecode is missing instructions")
    for offset, index in decoded(code).index_of_offset.items():
        # EXTENDED_ARG prefixes resolve to the instruction they prefix
        if offset not in positions:
            positions[offset] = positions[instrs[index].offset]
    return positions
