"""Decoding code objects into instruction records the symbolic interpreter can walk.

`dis` already knows every version's encoding (caches, EXTENDED_ARG, relative jumps), so decoding is
built on it; this module only turns its output into one stable, version-neutral record (`Instr`)
and adds what the interpreter needs on every step: an offset -> index map, the exception table and
the jump target of each jump.

Version notes (3.11, 3.12; written so that 3.13+ only adds opcodes):

* CACHE entries are never listed. EXTENDED_ARG prefixes are folded away: `dis` already puts the
  full argument on the instruction that follows them, and `index_of_offset` maps the prefix's
  offset to that instruction, so a jump or handler that targets the prefix lands on the real one.
* `Instr.target` is `dis`'s jump target. On 3.12 `FOR_ITER` reports the `END_FOR` after the loop
  as its target (at run time an exhausted iterator skips that `END_FOR`); the interpreter's
  per-version handler decides what to do with it, this layer does not second-guess `dis`.
* The exception table is parsed from `co_exceptiontable` here (the format is documented in
  CPython's `Objects/exception_handling_notes.txt`) rather than through a private `dis` helper.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import dis
import types
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from .. import process_state

__all__ = [
    "DecodedCode",
    "ExceptionEntry",
    "Instr",
    "JUMP_OPCODES",
    "decode",
    "decoded",
    "exception_entries",
    "jump_target",
]

#: Opcodes whose argument is a jump target (relative or absolute, whatever the version).
JUMP_OPCODES: frozenset[int] = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)

_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]


@dataclass(frozen=True, slots=True)
class Instr:
    """One decoded instruction (never CACHE or EXTENDED_ARG).

    `arg` is the full argument (EXTENDED_ARG prefixes folded in), `argval` its resolved value
    (a name, a constant, a jump target offset, ...). `lineno` is the source line the instruction
    belongs to (None for compiler-generated cleanup code); `starts_line` says whether it is the
    first instruction of that line. `target` is the jump target offset of jump instructions,
    None otherwise. `index` is the instruction's position in its `DecodedCode.instructions`.
    """

    opname: str
    opcode: int
    arg: int | None
    argval: object
    argrepr: str
    offset: int
    index: int
    lineno: int | None
    starts_line: bool
    positions: dis.Positions | None
    is_jump_target: bool
    target: int | None = None

    @property
    def is_jump(self) -> bool:
        return self.target is not None

    def __repr__(self) -> str:
        arg = f" {self.argrepr}" if self.argrepr else ""
        return f"<Instr {self.offset}: {self.opname}{arg}>"


@dataclass(frozen=True, slots=True)
class ExceptionEntry:
    """One row of a 3.11+ exception table.

    Instructions at offsets `start <= offset < end` that raise jump to `target` after the value
    stack is cut down to `depth` entries; if `lasti` is true the offset of the raising
    instruction is pushed first, then the exception.
    """

    start: int
    end: int
    target: int
    depth: int
    lasti: bool

    def covers(self, offset: int) -> bool:
        return self.start <= offset < self.end


def jump_target(instr: Instr | dis.Instruction) -> int | None:
    """The offset a jump instruction goes to (taken branch), or None for a non-jump.

    Accepts both our `Instr` and a raw `dis.Instruction`, so callers working with either get the
    same answer.
    """
    if isinstance(instr, Instr):
        return instr.target
    if instr.opcode in JUMP_OPCODES:
        return instr.argval
    return None


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    # 6 bits of value per byte, most significant chunk first; bit 6 means "more bytes follow".
    byte = data[pos]
    value = byte & 63
    pos += 1
    while byte & 64:
        byte = data[pos]
        value = (value << 6) | (byte & 63)
        pos += 1
    return value, pos


def exception_entries(code: types.CodeType) -> list[ExceptionEntry]:
    """The exception table of `code`, decoded; offsets are in bytes like `dis` offsets."""
    data = code.co_exceptiontable
    entries = []
    pos = 0
    while pos < len(data):
        start, pos = _read_varint(data, pos)
        length, pos = _read_varint(data, pos)
        target, pos = _read_varint(data, pos)
        depth_lasti, pos = _read_varint(data, pos)
        entries.append(
            ExceptionEntry(
                start=start * 2,
                end=(start + length) * 2,
                target=target * 2,
                depth=depth_lasti >> 1,
                lasti=bool(depth_lasti & 1),
            )
        )
    return entries


def _records(code: types.CodeType) -> tuple[list[Instr], dict[int, int]]:
    raw = list(dis.get_instructions(code))
    # Offsets of EXTENDED_ARG prefixes, resolved to the offset of the instruction they prefix.
    prefix_owner: dict[int, int] = {}
    pending: list[int] = []
    for ins in raw:
        if ins.opcode == _EXTENDED_ARG:
            pending.append(ins.offset)
            continue
        for off in pending:
            prefix_owner[off] = ins.offset
        pending.clear()

    instrs: list[Instr] = []
    index_of_offset: dict[int, int] = {}
    targeted_prefix = False
    for ins in raw:
        if ins.opcode == _EXTENDED_ARG:
            targeted_prefix = targeted_prefix or ins.is_jump_target
            continue
        target = jump_target(ins)
        if target is not None:
            target = prefix_owner.get(target, target)
        positions = getattr(ins, "positions", None)
        lineno = positions.lineno if positions is not None else None
        index = len(instrs)
        instrs.append(
            Instr(
                opname=ins.opname,
                opcode=ins.opcode,
                arg=ins.arg,
                argval=target if target is not None else ins.argval,
                argrepr=ins.argrepr,
                offset=ins.offset,
                index=index,
                lineno=lineno,
                # int line (3.11, 3.12) or bool (3.13+)
                starts_line=ins.starts_line is not None and ins.starts_line is not False,
                positions=positions,
                is_jump_target=ins.is_jump_target or targeted_prefix,
                target=target,
            )
        )
        index_of_offset[ins.offset] = index
        targeted_prefix = False
    for prefix, owner in prefix_owner.items():
        index_of_offset[prefix] = index_of_offset[owner]
    return instrs, index_of_offset


def decode(code: types.CodeType) -> list[Instr]:
    """The instructions of `code` in order (a fresh list; see `decoded` for the cached form)."""
    return list(decoded(code).instructions)


class DecodedCode:
    """Everything the interpreter looks up per instruction, computed once per code object.

    Holds no reference to the code object itself, so caching it does not keep code alive.
    """

    __slots__ = (
        "name",
        "instructions",
        "index_of_offset",
        "exception_entries",
        "derived",
        "_entry_starts",
        "__weakref__",
    )

    def __init__(self, code: types.CodeType) -> None:
        instrs, index_of_offset = _records(code)
        self.name: str = code.co_qualname
        self.instructions: tuple[Instr, ...] = tuple(instrs)
        #: offset -> index into `instructions` (EXTENDED_ARG offsets map to the prefixed instr)
        self.index_of_offset: Mapping[int, int] = types.MappingProxyType(index_of_offset)
        self.exception_entries: tuple[ExceptionEntry, ...] = tuple(
            sorted(exception_entries(code), key=lambda e: e.start)
        )
        #: analyses other modules compute once per code object (e.g. stack depths), by name
        self.derived: dict[str, object] = {}
        self._entry_starts = [e.start for e in self.exception_entries]

    def at(self, offset: int) -> Instr:
        """The instruction at `offset` (KeyError if no instruction starts there)."""
        return self.instructions[self.index_of_offset[offset]]

    def next(self, instr: Instr) -> Instr | None:
        """The instruction after `instr` in code order (its fall-through successor)."""
        i = instr.index + 1
        return self.instructions[i] if i < len(self.instructions) else None

    def handler_at(self, offset: int) -> ExceptionEntry | None:
        """The exception-table entry covering `offset`, if any.

        CPython flattens nested try blocks into non-overlapping ranges, so at most one entry
        covers any offset and it is the innermost handler.
        """
        i = bisect.bisect_right(self._entry_starts, offset) - 1
        if i >= 0 and self.exception_entries[i].covers(offset):
            return self.exception_entries[i]
        return None

    def __iter__(self) -> Iterator[Instr]:
        return iter(self.instructions)

    def __len__(self) -> int:
        return len(self.instructions)

    def __repr__(self) -> str:
        return f"<DecodedCode {self.name}: {len(self.instructions)} instructions>"


class _DecodeCache:
    """Identity-keyed, size-bounded LRU cache of `DecodedCode`, dropped when the code dies.

    Keyed by identity, not equality: code objects compare equal by content, and an entry must
    belong to exactly the object it was computed for. Weakref callbacks only record the dead
    key; the purge happens on the next lookup, never inside a garbage-collection callback.

    No lock: each dict and list operation below is atomic under the GIL, and what two threads
    can interleave is harmless (a code decoded twice, an entry already gone). A lock held here
    could be left held for good by an exception a trace function raises at the wrong moment
    (a KeyboardInterrupt), and every later compile of the process would wait on it.
    """

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._entries: collections.OrderedDict[int, tuple[weakref.ref, DecodedCode]] = collections.OrderedDict()
        self._dead: list[tuple[int, weakref.ref]] = []

    def _purge(self) -> None:
        while self._dead:
            try:
                key, ref = self._dead.pop()
            except IndexError:  # emptied by another thread meanwhile
                return
            current = self._entries.get(key)
            if current is not None and current[0] is ref:
                self._entries.pop(key, None)

    def get(self, code: types.CodeType) -> DecodedCode:
        key = id(code)
        self._purge()
        hit = self._entries.get(key)
        if hit is not None and hit[0]() is code:
            with contextlib.suppress(KeyError):  # evicted by another thread meanwhile
                self._entries.move_to_end(key)
            return hit[1]
        result = DecodedCode(code)
        dead = self._dead
        ref = weakref.ref(code, lambda r, key=key: dead.append((key, r)))
        self._entries[key] = (ref, result)
        with contextlib.suppress(KeyError):
            self._entries.move_to_end(key)
        while len(self._entries) > self.maxsize:
            try:
                self._entries.popitem(last=False)
            except KeyError:
                break
        return result

    def clear(self) -> None:
        self._entries.clear()
        self._dead.clear()

    def __len__(self) -> int:
        self._purge()
        return len(self._entries)


_cache = _DecodeCache(maxsize=2048)
process_state.register_containers("bytecode.decoded", _cache, memo=True)


def decoded(code: types.CodeType) -> DecodedCode:
    """The cached `DecodedCode` of `code` (decoded on first use)."""
    return _cache.get(code)
