"""Value-stack depth at each instruction, computed by flow analysis over `dis.stack_effect`.

The resume-function builder uses it to check that the stack a caller hands over has exactly the
shape the original code has at the resume offset (a wrong count would corrupt the frame rather
than fail loudly), and the interpreter can use it to cross-check its own symbolic stack.
`dis.stack_effect` knows each version's opcodes, so the analysis itself is version-neutral; the
depths are those of the running frame, so the two places where `dis` reports the compiler's
bookkeeping instead (RETURN_GENERATOR, and 3.11's PRECALL/CALL split) are corrected.
"""

from __future__ import annotations

import dis
import types
from collections.abc import Mapping

from .instructions import DecodedCode, Instr, decoded

__all__ = ["stack_depths"]

# Instructions after which control never falls through to the next instruction.
_UNCONDITIONAL_JUMPS = frozenset(
    dis.opmap[name]
    for name in ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP")
    if name in dis.opmap
)
_TERMINATORS = frozenset(
    dis.opmap[name] for name in ("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE") if name in dis.opmap
)

_RETURN_GENERATOR = dis.opmap.get("RETURN_GENERATOR")
# 3.11 only: `dis` charges a call's pops half to PRECALL (-oparg) and half to CALL (-1), but at
# run time PRECALL leaves the stack as it is and CALL pops everything.
_PRECALL = dis.opmap.get("PRECALL")
_CALL = dis.opmap["CALL"] if _PRECALL is not None else None


def _effect(instr: Instr, *, jump: bool) -> int:
    if instr.opcode == _RETURN_GENERATOR:
        # `dis` says 0, but the frame is resumed by the first send() with the sent value pushed
        # (the POP_TOP that follows discards it).
        return 1
    if instr.opcode == _PRECALL:
        return 0
    if instr.opcode == _CALL:
        return -(instr.arg + 1)
    arg = instr.arg if instr.opcode >= dis.HAVE_ARGUMENT else None
    return dis.stack_effect(instr.opcode, arg, jump=jump)


def stack_depths(code: types.CodeType | DecodedCode) -> Mapping[int, int]:
    """Offset -> stack depth just before that instruction runs, for every reachable instruction.

    Exception handlers are entered with the table's depth plus the pushed exception (and the
    pushed `lasti` where the entry asks for it). Raises ValueError if two paths reach an
    instruction with different depths, which valid CPython bytecode never does. Computed once
    per code object (kept with its `DecodedCode`).
    """
    dec = code if isinstance(code, DecodedCode) else decoded(code)
    cached = dec.derived.get("stack_depths")
    if cached is None:
        cached = dec.derived["stack_depths"] = types.MappingProxyType(_compute(dec))
    return cached


def _compute(dec: DecodedCode) -> dict[int, int]:
    instrs = dec.instructions
    if not instrs:
        return {}
    depth_at: dict[int, int] = {}  # instruction index -> depth
    work: list[tuple[int, int]] = []
    seeded_handlers: set[int] = set()

    def reach(index: int, depth: int) -> None:
        known = depth_at.get(index)
        if known is None:
            depth_at[index] = depth
            work.append((index, depth))
        elif known != depth:
            raise ValueError(f"{dec.name}: offset {instrs[index].offset} reached with stack depth {known} and {depth}")

    reach(0, 0)
    while work:
        index, depth = work.pop()
        instr = instrs[index]
        entry = dec.handler_at(instr.offset)
        if entry is not None and entry.target not in seeded_handlers:
            seeded_handlers.add(entry.target)
            reach(dec.index_of_offset[entry.target], entry.depth + 1 + int(entry.lasti))
        if instr.target is not None:
            reach(dec.index_of_offset[instr.target], depth + _effect(instr, jump=True))
        if instr.opcode in _UNCONDITIONAL_JUMPS or instr.opcode in _TERMINATORS:
            continue
        if index + 1 < len(instrs):
            reach(index + 1, depth + _effect(instr, jump=False))
    return {instrs[i].offset: d for i, d in depth_at.items()}
