"""Resume functions: continuing an original function's bytecode from the middle.

At a graph break the transformed code runs the unsupported instruction eagerly and then calls a
*resume function* that carries on where the original bytecode left off. The resume function's
code is the original code with a new entry: it takes the saved value stack and the live locals
as positional arguments, rebuilds the frame state and jumps to the break offset. Everything after
the jump is the original bytecode, untouched, so line numbers, exception handlers and nested
code stay exactly the original's.

Layout of a resume code object made by `build_resume_code`::

    COPY_FREE_VARS n           # if there are free variables
    MAKE_CELL c ...            # every original cellvar (a live one is an argument: the
                               #   argument's value becomes the cell's content)
    RETURN_GENERATOR, POP_TOP  # for a generator's code (the resume code makes a generator)
    RESUME 0
    <prologue_extra>           # stack-neutral instructions from the caller
    LOAD_FAST __stack0 ...     # one per stack entry, in order (PUSH_NULL for NULL_STACK_ENTRY,
                               #   GET_ITER after ITERATOR_FROM_TUPLE, the `with` entry after
                               #   REENTERED_CONTEXT, a constant for a LastiStackEntry); each
                               #   argument slot is cleared once pushed
                               #   so the frame does not keep the value alive longer than the
                               #   stack would
    JUMP_FORWARD <offset>
    <original instructions, without their MAKE_CELL/COPY_FREE_VARS/RESUME prefix>

Because the original exception table comes along, resuming inside a try/with body works as
long as the stack holds what the original frame had there (for a with block: the `__exit__`
callable at its depth). A resume may also start at a handler's first instruction, with the
exception on top of the stack; that exception must have been raised (3.11 passes its traceback
to `__exit__` without a NULL check). Resuming inside a running `except`/`finally` body works
when each PUSH_EXC_INFO entry of the stack is a `HANDLED_EXCEPTION` slot: the caller passes the
exception that handler handles, and the prologue enters it for real (LOAD_FAST, PUSH_EXC_INFO,
POP_TOP), so the thread's "exception being handled" is that exception (bare `raise`,
`sys.exc_info()`, chaining) and the entry below it is the one POP_EXCEPT must restore.
"""

from __future__ import annotations

import dis
import inspect
import sys
import types
from collections.abc import Sequence
from dataclasses import dataclass

import bytecode as _bc
from bytecode.instr import InstrLocation

from .assemble import assemble, disassemble, instruction_positions
from .instructions import DecodedCode, ExceptionEntry, decoded
from .stackdepth import stack_depths

__all__ = [
    "HANDLED_EXCEPTION",
    "PAIR_PARTS",
    "REENTERED_CONTEXT",
    "ITERATOR_FROM_TUPLE",
    "LastiStackEntry",
    "NULL_STACK_ENTRY",
    "build_resume_code",
    "describe_handler",
    "enclosing_with_statements",
    "only_with_blocks",
    "with_statement_start",
    "resume_code_name",
    "stack_arg_name",
]


class _StackMarker:
    """A named singleton describing how one stack slot is rebuilt (see the constants below)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self) -> str:
        return self._name


#: Marks a stack slot that holds C NULL (pushed by PUSH_NULL, LOAD_GLOBAL/LOAD_ATTR with the
#: NULL bit, ...). The resume prologue pushes NULL there and takes no argument for it.
NULL_STACK_ENTRY = _StackMarker("NULL_STACK_ENTRY")

#: Marks a stack slot that holds an iterator the caller passes as a *tuple* of the values still
#: to come (a traced iterator has no real counterpart to pass); the prologue pushes `iter(arg)`.
ITERATOR_FROM_TUPLE = _StackMarker("ITERATOR_FROM_TUPLE")

#: Marks the stack slot PUSH_EXC_INFO leaves under the exception a running handler handles (the
#: exception handled before). The caller passes the handled exception; the prologue enters it
#: with PUSH_EXC_INFO, which leaves the real previous one in the slot.
HANDLED_EXCEPTION = _StackMarker("HANDLED_EXCEPTION")

#: Marks the stack slot of a `with` block's `__exit__` whose context (inference mode, autocast)
#: the caller left before the call, and that the resume function enters again: the caller
#: passes the context manager, and the prologue enters it as the `with` statement does, which
#: leaves its `__exit__` in the slot (from 3.14 `__exit__` and its self, filling the NULL slot
#: that follows).
REENTERED_CONTEXT = _StackMarker("REENTERED_CONTEXT")

#: Marks a stack slot that holds a plain value, passed as an argument (any object that is not
#: one of the other markers or a `LastiStackEntry` means the same to `build_resume_code`).
VALUE_STACK_ENTRY = _StackMarker("VALUE_STACK_ENTRY")


@dataclass(frozen=True)
class LastiStackEntry:
    """A stack slot holding the `lasti` an exception handler was entered with (entries with
    `lasti=True` push it under the exception), for the original instruction at `offset`.

    RERAISE jumps back to that instruction to find the next handler, so the value must be the
    instruction's position in the *resume* code; the prologue pushes it as a constant and the
    slot takes no argument.
    """

    offset: int


#: How one stack slot at a graph break reaches its resume function, as `build_resume_code` reads
#: it: `VALUE_STACK_ENTRY`, `NULL_STACK_ENTRY`, `ITERATOR_FROM_TUPLE`, `HANDLED_EXCEPTION`,
#: `REENTERED_CONTEXT` or `LastiStackEntry(offset)`.
SlotKind = _StackMarker | LastiStackEntry


def takes_argument(kind: SlotKind) -> bool:
    """Whether a slot of this kind is passed to the resume function (NULL and lasti are pushed)."""
    return kind in (VALUE_STACK_ENTRY, ITERATOR_FROM_TUPLE, HANDLED_EXCEPTION, REENTERED_CONTEXT)


_PY312 = sys.version_info >= (3, 12)


def _get_iter_pushes() -> int:
    op = dis.opmap["GET_ITER"]
    return 1 + dis.stack_effect(op, 0 if op >= dis.HAVE_ARGUMENT else None)


# From 3.15 GET_ITER pushes the iterator and an index or NULL: an ITERATOR_FROM_TUPLE slot is
# then followed by a NULL slot, which the prologue's GET_ITER fills.
_GET_ITER_PUSHES_TWO = _get_iter_pushes() == 2

# From 3.14 a `with` block keeps two entries for its `__exit__` (the method and its self)
_EXIT_TAKES_TWO = "BEFORE_WITH" not in dis.opmap

# Flags of code that cannot be resumed (a generator's can: its resume code is a generator too).
_COROUTINE_FLAGS = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
# A generator's frame-setup prefix also makes the generator (RETURN_GENERATOR, POP_TOP).
_PREFIX_OPNAMES = frozenset({"MAKE_CELL", "COPY_FREE_VARS", "RETURN_GENERATOR", "POP_TOP", "RESUME", "NOP"})

# Loads that do not check for an unbound local (3.12+), and their checked replacements.
_UNCHECKED_LOADS = frozenset({"LOAD_FAST", "LOAD_FAST_BORROW"})

# Exception-table regions a resume may start in: protected bodies, whose handler has not run.
_RESUMABLE_REGIONS = frozenset(
    {
        "try/except block",
        "try/except* block",
        "try/finally block",
        "with block",
        "inlined comprehension",
        "generator body",
        "yield from",
    }
)

# Regions of a running `except`/`finally` body: resumable with HANDLED_EXCEPTION slots.
_HANDLER_BODIES = frozenset({"except/finally handler", "`except ... as name` handler"})

# Line number marking instructions whose final offset must be found after assembly.
_MARK_LINE = 1 << 28


def stack_arg_name(slot: int) -> str:
    """Name of the resume function's argument for value-stack slot `slot` (0 = bottom)."""
    return f"__stack{slot}"


def resume_code_name(code: types.CodeType, offset: int) -> str:
    """`co_name` of the resume code for `code` at `offset`."""
    return f"__resume_at_{offset}_{code.co_name}"


def _takes_argument(slot: object) -> bool:
    return slot is not NULL_STACK_ENTRY and not isinstance(slot, LastiStackEntry)


def build_resume_code(
    code: types.CodeType,
    offset: int,
    stack: int | Sequence[object],
    live_locals: Sequence[str],
    *,
    prologue_extra: Sequence[_bc.Instr] = (),
    cells_as_freevars: bool = False,
) -> types.CodeType:
    """Code that continues `code` at `offset` with the given stack and live locals.

    `stack` describes the value stack at `offset` exactly as the interpreter sees it, bottom
    first: a count (every slot is a value), or one entry per slot: `NULL_STACK_ENTRY` (C NULL),
    `ITERATOR_FROM_TUPLE` (an iterator, passed as a tuple of its remaining values; on 3.15+
    followed by the `NULL_STACK_ENTRY` a loop keeps beside it), `LastiStackEntry(offset)` (a
    handler's lasti), anything else a plain value. The new code's positional arguments are
    `stack_arg_name(i)` for each slot `i` that takes one (NULL and lasti slots do not), then
    `live_locals` by their original names; other locals start unbound.

    Free variables stay free variables (build the function with the original closure). Cell
    variables are recreated: a live one is passed as its *value* and stored into a fresh cell.
    With `cells_as_freevars=True` the original cellvars become free variables instead
    (`co_freevars` = original cellvars + original freevars): pass the frame's cell objects in
    the closure so closures created before the break keep sharing them; cellvars may then not
    be listed in `live_locals`.

    `prologue_extra` (stack-neutral `bytecode.Instr`s) runs after RESUME, before the stack is
    rebuilt.

    For a generator's code the resume code is a generator function's: the call returns the
    generator, and its first `next()` rebuilds the frame and runs on from `offset` (at a
    YIELD_VALUE, with the value it yields on top of the stack: suspended there once it yields).

    Raises NotImplementedError for coroutines, module or class bodies and offsets
    inside a running exception handler (an except/finally body without `HANDLED_EXCEPTION`
    slots, or a with block's exit path; a handler's first instruction is fine); ValueError for a
    stack that does not match the original stack depth at `offset` or unknown/invalid local names.
    """
    dec = decoded(code)
    index = _resume_index(code, dec, offset)
    slots = _normalize_stack(stack)
    lasti_offsets = _check_stack(dec, index, offset, slots)
    stack_args = [stack_arg_name(i) for i, s in enumerate(slots) if _takes_argument(s)]
    _check_locals(code, live_locals, stack_args, cells_as_freevars)
    argnames = [*stack_args, *live_locals]

    original = _marked_body(code, dec, index, lasti_offsets)
    body, cellvars, freevars = _adapted_body(original.body, code, argnames, cells_as_freevars)
    target = dec.instructions[index]
    at_target = InstrLocation(target.lineno if target.lineno is not None else code.co_firstlineno, None, None, None)
    pushes, lasti_loads = _stack_pushes(slots, at_target, original.mark_of)
    prologue = [
        *_frame_setup(code, cellvars, freevars),
        *prologue_extra,
        *pushes,
        _bc.Instr("JUMP_FORWARD", original.jump_in, location=at_target),
    ]
    new = _resume_bytecode(code, prologue + body, argnames, cellvars, freevars)
    stacksize = _stack_bound(code, slots)
    if not original.marks:
        return _identifier_names(assemble(new, stacksize=stacksize))
    return _identifier_names(_assemble_with_lasti(new, original.marks, lasti_loads, stacksize))


def _identifier_names(code: types.CodeType) -> types.CodeType:
    """`code` with each local whose name is not an identifier renamed (pytest's assertion
    rewriting makes locals such as `@py_assert0`): as a parameter of the resume function, such a
    name would make its signature unreadable (`inspect.signature` raises). Locals are read by
    index, so only the names change."""
    names = code.co_varnames
    if all(name.isidentifier() for name in names):
        return code
    taken = set(names)
    cells = set(code.co_cellvars) | set(code.co_freevars)  # (named in two tables: left as they are)
    renamed = []
    for i, name in enumerate(names):
        if not name.isidentifier() and name not in cells:
            name = f"___local{i}_" + "".join(c if c.isalnum() or c == "_" else "_" for c in name)
            while name in taken:
                name += "_"
            taken.add(name)
        renamed.append(name)
    return code.replace(co_varnames=tuple(renamed))


def _resume_index(code: types.CodeType, dec: DecodedCode, offset: int) -> int:
    """The index of the instruction at `offset`, where a resume may start: in the body of a
    function or generator that is not a coroutine."""
    qualname = code.co_qualname
    generator = code.co_flags & inspect.CO_GENERATOR
    if code.co_flags & _COROUTINE_FLAGS or not generator and any(i.opname == "RETURN_GENERATOR" for i in dec):
        raise NotImplementedError(
            f"build_resume_code: {qualname} is a coroutine; resuming coroutine frames is not supported"
        )
    if not code.co_flags & inspect.CO_OPTIMIZED:
        raise NotImplementedError(
            f"build_resume_code: {qualname} is a module or class body (no fast locals); only "
            f"function bodies can be resumed"
        )
    index = dec.index_of_offset.get(offset)
    if index is None:
        raise ValueError(f"build_resume_code: no instruction at offset {offset} of {qualname}")
    first_body = _first_body_index(dec)
    if index < first_body:
        raise ValueError(
            f"build_resume_code: offset {offset} of {qualname} is in the frame-setup prefix "
            f"(before RESUME); resume at or after offset {dec.instructions[first_body].offset}"
        )
    return index


def _check_stack(dec: DecodedCode, index: int, offset: int, slots: list[object]) -> list[int]:
    """Check that `slots` can be the stack at instruction `index`: a resumable exception region,
    the original's depth there, lasti entries naming instructions of the body. Returns those
    instructions' offsets, sorted."""
    target = dec.instructions[index]
    _check_exception_region(dec, target.offset, offset, HANDLED_EXCEPTION in slots)
    expected = stack_depths(dec).get(target.offset)
    if expected is None:
        raise ValueError(f"build_resume_code: offset {offset} of {dec.name} is unreachable")
    if len(slots) != expected:
        raise ValueError(
            f"build_resume_code: the stack at offset {offset} of {dec.name} has {expected} entries, got {len(slots)}"
        )
    lasti_offsets = sorted({s.offset for s in slots if isinstance(s, LastiStackEntry)})
    first_body = _first_body_index(dec)
    for lasti in lasti_offsets:
        if lasti not in dec.index_of_offset or dec.index_of_offset[lasti] < first_body:
            raise ValueError(f"build_resume_code: LastiStackEntry({lasti}) is not an instruction of {dec.name}")
    return lasti_offsets


@dataclass
class _OriginalBody:
    """The original instructions after the frame-setup prefix, with the label the prologue jumps
    to, and the instructions that lasti constants point at marked: each has a line number of its
    own (`_MARK_LINE` up) until assembly shows where it landed."""

    body: list
    jump_in: _bc.Label
    marks: dict[int, InstrLocation]  # mark line -> the instruction's real location
    mark_of: dict[int, int]  # original offset -> mark line


def _marked_body(code: types.CodeType, dec: DecodedCode, index: int, lasti_offsets: list[int]) -> _OriginalBody:
    """The original body, marked where the prologue jumps in and where each lasti points."""
    bc = disassemble(code)
    positions = instruction_positions(bc, code)
    items = list(bc)
    marks: dict[int, InstrLocation] = {}
    mark_of: dict[int, int] = {}
    for k, lasti in enumerate(lasti_offsets):
        instr = items[positions[dec.at(lasti).offset]]
        mark_of[lasti] = _MARK_LINE + k
        marks[_MARK_LINE + k] = instr.location
        instr.location = InstrLocation(_MARK_LINE + k, None, None, None)
    jump_in = _bc.Label()
    items.insert(positions[dec.instructions[_jump_in_index(dec, index)].offset], jump_in)
    return _OriginalBody(_strip_prefix(items), jump_in, marks, mark_of)


def _adapted_body(
    body: list, code: types.CodeType, argnames: list[str], cells_as_freevars: bool
) -> tuple[list, list[str], list[str]]:
    """The original body as the resume entry runs it, with the resume code's cellvars and
    freevars: cell loads named as cells (as free variables with `cells_as_freevars`), a
    zero-argument `super()` made explicit, pair instructions split, loads of locals that may be
    unbound checked."""
    body = _cell_loads_named(body, code)
    cellvars = list(code.co_cellvars)
    freevars = list(code.co_freevars)
    if cells_as_freevars:
        freevars = cellvars + freevars
        cellvars = []
        body = [_cell_to_free(item) for item in body]
    if "__class__" in code.co_freevars and code.co_argcount > 0:
        first: str | _bc.CellVar | _bc.FreeVar = code.co_varnames[0]
        if first in code.co_cellvars:
            first = _bc.FreeVar(first) if cells_as_freevars else _bc.CellVar(first)
        body = _explicit_super_calls(body, first)
    body = _split_pairs(body)
    if _PY312:
        body = _checked_loads(body, set(argnames))
    return body, cellvars, freevars


def _frame_setup(code: types.CodeType, cellvars: list[str], freevars: list[str]) -> list[_bc.Instr]:
    """The resume code's own prefix: copy the closure, make the cells, make the generator (for
    a generator's code: the call returns it, and the prologue runs on its first `next()`),
    RESUME."""
    at_def = InstrLocation(code.co_firstlineno, None, None, None)
    setup: list[_bc.Instr] = []
    if freevars:
        setup.append(_bc.Instr("COPY_FREE_VARS", len(freevars), location=at_def))
    setup.extend(_bc.Instr("MAKE_CELL", _bc.CellVar(c), location=at_def) for c in cellvars)
    if code.co_flags & inspect.CO_GENERATOR:
        setup += [_bc.Instr("RETURN_GENERATOR", location=at_def), _bc.Instr("POP_TOP", location=at_def)]
    setup.append(_bc.Instr("RESUME", 0, location=at_def))
    return setup


def _stack_pushes(
    slots: list[object], location: InstrLocation, mark_of: dict[int, int]
) -> tuple[list[_bc.Instr], list[tuple[_bc.Instr, int]]]:
    """The instructions rebuilding the stack from the arguments, and the lasti constant loads
    among them with the mark of the instruction each must point at."""
    pushes: list[_bc.Instr] = []
    lasti_loads: list[tuple[_bc.Instr, int]] = []
    for i, slot in enumerate(slots):
        if slot is NULL_STACK_ENTRY and _GET_ITER_PUSHES_TWO and i > 0 and slots[i - 1] is ITERATOR_FROM_TUPLE:
            continue  # pushed by the iterator's GET_ITER
        if slot is NULL_STACK_ENTRY and _EXIT_TAKES_TWO and i > 0 and slots[i - 1] is REENTERED_CONTEXT:
            continue  # the `__exit__`'s self, pushed by the `with` entry
        if slot is NULL_STACK_ENTRY:
            pushes.append(_bc.Instr("PUSH_NULL", location=location))
        elif isinstance(slot, LastiStackEntry):
            load = _bc.Instr("LOAD_CONST", 0, location=location)
            lasti_loads.append((load, mark_of[slot.offset]))
            pushes.append(load)
        else:
            pushes.extend(_push_and_clear(stack_arg_name(i), location))
            if slot is ITERATOR_FROM_TUPLE:
                pushes.append(_bc.Instr("GET_ITER", location=location))
            elif slot is HANDLED_EXCEPTION:
                pushes.append(_bc.Instr("PUSH_EXC_INFO", location=location))
                pushes.append(_bc.Instr("POP_TOP", location=location))
            elif slot is REENTERED_CONTEXT:
                pushes.extend(_enter_with(location))
    return pushes, lasti_loads


def _resume_bytecode(
    code: types.CodeType, instructions: list, argnames: list[str], cellvars: list[str], freevars: list[str]
) -> _bc.Bytecode:
    """The resume code before assembly: `argnames` positional, the flags of a plain function."""
    new = _bc.Bytecode(instructions)
    # named like the original, so tracebacks through it read like eager ones; the registry of
    # resume code (graph/resume.py) keeps the distinguishing `resume_code_name` for logs
    new.name = code.co_name
    new.qualname = code.co_qualname
    new.filename = code.co_filename
    new.first_lineno = code.co_firstlineno
    new.docstring = None
    new.argnames = argnames
    new.argcount = len(argnames)
    new.posonlyargcount = 0
    new.kwonlyargcount = 0
    new.cellvars = cellvars
    new.freevars = freevars
    flags = _bc.CompilerFlags(code.co_flags)
    flags &= ~(_bc.CompilerFlags.VARARGS | _bc.CompilerFlags.VARKEYWORDS)
    if freevars:
        flags |= _bc.CompilerFlags.NESTED
    new.flags = flags
    return new


def _stack_bound(code: types.CodeType, slots: list[object]) -> int:
    """The resume code's stack size. The `bytecode` package's own walk starts past the TryBegin
    of a region the prologue jumps into and can get handler depths wrong (nested try/with,
    running handlers); the bound is known: the original's depth plus the two entries an explicit
    `super(__class__, self)` adds, or the rebuilt stack plus the two entries a prologue's
    PUSH_EXC_INFO or `with` entry briefly adds."""
    return max(code.co_stacksize, len(slots)) + 2


def _assemble_with_lasti(
    new: _bc.Bytecode,
    marks: dict[int, InstrLocation],
    lasti_loads: list[tuple[_bc.Instr, int]],
    stacksize: int,
) -> types.CodeType:
    """Assemble, find where the marked instructions landed, then fill in the lasti constants
    and restore the instructions' real locations (a constant's value cannot move code, but it
    is checked)."""
    first = assemble(new, stacksize=stacksize)
    landed = _marked_offsets(first)
    for load, mark in lasti_loads:
        load.arg = landed[mark] // 2  # lasti counts code units
    for item in new:
        if isinstance(item, _bc.Instr) and item.location is not None and item.location.lineno in marks:
            item.location = marks[item.location.lineno]
    final = assemble(new, stacksize=stacksize)
    if [i.offset for i in decoded(final)] != [i.offset for i in decoded(first)]:
        raise AssertionError(f"{final.co_name}: instructions moved when the lasti constants were filled in")
    return final


def _marked_offsets(code: types.CodeType) -> dict[int, int]:
    found: dict[int, int] = {}
    for unit, (lineno, *_rest) in enumerate(code.co_positions()):
        if lineno is not None and lineno >= _MARK_LINE and lineno not in found:
            found[lineno] = unit * 2
    return found


def _check_exception_region(dec: DecodedCode, at: int, offset: int, handling: bool) -> None:
    entry = dec.handler_at(at)
    if entry is None:
        return
    construct = describe_handler(dec, entry)
    if construct in _RESUMABLE_REGIONS or handling and construct in _HANDLER_BODIES:
        return
    if any(e.target == at for e in dec.exception_entries):
        return  # a handler's first instruction: the handler has not started yet
    raise NotImplementedError(
        f"build_resume_code: offset {offset} of {dec.name} is inside a running {construct} "
        f"(exception table entry {entry.start}-{entry.end} -> {entry.target}); resuming inside an "
        f"exception handler is not supported"
    )


def describe_handler(dec: DecodedCode, entry: ExceptionEntry) -> str:
    """A human name for the construct whose exception-table entry is `entry`.

    Read off the handler's first instructions, the way the compiler lays them out; used for
    error messages, so an unusual layout falls back to a generic name.
    """
    start = dec.index_of_offset.get(entry.target)
    if start is None:
        return "try block"
    head = [i.opname for i in dec.instructions[start : start + 6]]
    if "WITH_EXCEPT_START" in head:
        return "with block"
    if head[:1] == ["PUSH_EXC_INFO"]:
        if "CHECK_EXC_MATCH" in head:
            return "try/except block"
        if "CHECK_EG_MATCH" in head:
            return "try/except* block"
        return "try/finally block"
    if entry.lasti and head[:2] == ["COPY", "POP_EXCEPT"]:
        return "except/finally handler"
    if head[:3] in (["LOAD_CONST", "STORE_FAST", "DELETE_FAST"], ["LOAD_COMMON_CONSTANT", "STORE_FAST", "DELETE_FAST"]):
        return "`except ... as name` handler"
    if head[:1] == ["SWAP"] and ("STORE_FAST" in head or "POP_TOP" in head):
        return "inlined comprehension"
    if head[:1] == ["CALL_INTRINSIC_1"] and dec.instructions[start].argrepr == "INTRINSIC_STOPITERATION_ERROR":
        return "generator body"  # 3.12+: a StopIteration leaving it becomes a RuntimeError
    if head[:1] == ["CLEANUP_THROW"]:
        return "yield from"  # 3.12+: the YIELD_VALUE of a delegation, for what is thrown in
    return "exception handler cleanup region"


# How a `with` statement enters its block, the last instruction first: BEFORE_WITH up to 3.13;
# from 3.14 `COPY 1; LOAD_SPECIAL __exit__; SWAP 2; SWAP 3; LOAD_SPECIAL __enter__; CALL 0`.
_WITH_ENTRIES = (("BEFORE_WITH",), ("CALL", "LOAD_SPECIAL", "SWAP", "SWAP", "LOAD_SPECIAL", "COPY"))


def with_statement_start(dec: DecodedCode, body: int) -> int | None:
    """The index of the first instruction entering the `with` block whose body starts at
    instruction `body`, or None if the instructions before it do not enter a `with` block."""
    for entry in _WITH_ENTRIES:
        start = body - len(entry)
        if start >= 0 and [i.opname for i in reversed(dec.instructions[start:body])] == list(entry):
            return start
    return None


def only_with_blocks(code: types.CodeType, offset: int) -> bool:
    """Whether the instruction at `offset` in `code` lies in no `try` or `except` block: in
    none at all, or in `with` blocks only. Followed out through each handler: a `with` block's
    own handler may lie in a `try` block."""
    dec = decoded(code)
    first = True
    for _ in range(len(dec.exception_entries) + 1):
        entry = next((e for e in dec.exception_entries if e.start <= offset < e.end), None)
        if entry is None:
            return True
        kind = describe_handler(dec, entry)
        if kind != "with block" and (first or kind != "except/finally handler"):
            return False
        first = False
        offset = entry.target
    return False


def enclosing_with_statements(code: types.CodeType, offset: int) -> list[int]:
    """Offsets of the instructions entering (calling `__enter__`: BEFORE_WITH, or 3.14's CALL) the
    `with` blocks whose bodies contain `offset`, innermost first. A body is the span of the
    exception-table entries that lead to its `with` handler (the flattened table splits it around
    nested blocks); it starts right after that instruction."""
    dec = decoded(code)
    spans: dict[int, tuple[int, int]] = {}
    for entry in dec.exception_entries:
        if describe_handler(dec, entry) != "with block":
            continue
        start, end = spans.get(entry.target, (entry.start, entry.end))
        spans[entry.target] = (min(start, entry.start), max(end, entry.end))
    found = []
    for start, end in spans.values():
        index = dec.index_of_offset.get(start)
        if index and with_statement_start(dec, index) is not None and start <= offset < end:
            found.append((end - start, dec.instructions[index - 1].offset))
    return [before_with for _, before_with in sorted(found)]


def _first_body_index(dec: DecodedCode) -> int:
    for instr in dec.instructions:
        if instr.opname == "RESUME":
            return instr.index + 1
        if instr.opname not in _PREFIX_OPNAMES:
            break
    raise ValueError(f"{dec.name}: no RESUME in the frame-setup prefix")


def _jump_in_index(dec: DecodedCode, index: int) -> int:
    """The instruction the prologue jumps to for a resume at instruction `index`.

    KW_NAMES (3.11, 3.12) hands its names to the next CALL through interpreter state, not the
    stack, so a resume between KW_NAMES and its CALL must run KW_NAMES again; on 3.11 the same
    holds for PRECALL before CALL. Both are stack-neutral and fall through, so starting at
    them is equivalent to starting at the call with the names set.
    """
    instrs = dec.instructions
    if instrs[index].opname == "CALL" and index > 0 and instrs[index - 1].opname == "PRECALL":
        index -= 1
    if index > 0 and instrs[index - 1].opname == "KW_NAMES":
        index -= 1
    return index


def _normalize_stack(stack: int | Sequence[object]) -> list[object]:
    if isinstance(stack, int):
        if stack < 0:
            raise ValueError(f"stack size must be >= 0, got {stack}")
        return [None] * stack
    return list(stack)


def _check_locals(
    code: types.CodeType,
    live_locals: Sequence[str],
    stack_args: Sequence[str],
    cells_as_freevars: bool,
) -> None:
    where = f"build_resume_code ({code.co_qualname})"
    if len(set(live_locals)) != len(live_locals):
        raise ValueError(f"{where}: duplicate names in live_locals {list(live_locals)}")
    clash = set(stack_args) & (set(code.co_varnames) | set(code.co_cellvars))
    if clash:
        raise ValueError(f"{where}: the code already has locals named {sorted(clash)}")
    for name in live_locals:
        if name in code.co_freevars:
            raise ValueError(f"{where}: {name!r} is a free variable; it comes from the closure, not an argument")
        if name in code.co_cellvars:
            if cells_as_freevars:
                raise ValueError(
                    f"{where}: {name!r} is a cell variable, passed through the closure when cells_as_freevars=True"
                )
        elif name not in code.co_varnames:
            raise ValueError(f"{where}: {name!r} is not a local variable of the code")


def _strip_prefix(items: list) -> list:
    """Drop the original MAKE_CELL/COPY_FREE_VARS/RESUME prefix (the prologue replaces it),
    keeping a `try` region opened there (3.12's StopIteration guard of a generator's body)."""
    for i, item in enumerate(items):
        if isinstance(item, _bc.Instr):
            if item.name == "RESUME":
                return [t for t in items[:i] if isinstance(t, _bc.TryBegin)] + items[i + 1 :]
            if item.name not in _PREFIX_OPNAMES:
                break
    raise ValueError("no RESUME in the frame-setup prefix")


def _enter_with(location: InstrLocation) -> list[_bc.Instr]:
    """Enter the context manager on top of the stack as a `with` statement does and drop the
    `__enter__` result: BEFORE_WITH up to 3.13 (leaves `__exit__`), from 3.14 the LOAD_SPECIAL
    sequence (leaves `__exit__` and its self)."""
    steps: list[tuple] = [("BEFORE_WITH",)]
    if _EXIT_TAKES_TWO:
        from bytecode.instr import SpecialMethod  # bytecode >= 0.17, which 3.14+ requires

        exit_, enter = SpecialMethod.EXIT, SpecialMethod.ENTER
        steps = [("COPY", 1), ("LOAD_SPECIAL", exit_), ("SWAP", 2), ("SWAP", 3), ("LOAD_SPECIAL", enter), ("CALL", 0)]
    return [_bc.Instr(*step, location=location) for step in [*steps, ("POP_TOP",)]]


def _push_and_clear(name: str, location: InstrLocation) -> list[_bc.Instr]:
    if "LOAD_FAST_AND_CLEAR" in dis.opmap:
        return [_bc.Instr("LOAD_FAST_AND_CLEAR", name, location=location)]
    return [
        _bc.Instr("LOAD_FAST", name, location=location),
        _bc.Instr("DELETE_FAST", name, location=location),
    ]


_CELL_LOADS = frozenset({"LOAD_FAST", "LOAD_FAST_BORROW"})
# instructions naming a cell: the loads above, and the dereferences
_CELL_NAMING = _CELL_LOADS | {"LOAD_DEREF", "STORE_DEREF", "DELETE_DEREF", "LOAD_FROM_DICT_OR_DEREF"}


def _cell_loads_named(body: list, code: types.CodeType) -> list:
    """Name the cell of a local load that reads a cell's slot (3.13+ writes LOAD_CLOSURE that
    way), and of a dereference, as a CellVar / FreeVar.

    The `bytecode` package gives such an instruction the plain name when the cell is also an
    argument (3.14+ even for LOAD_DEREF); in a resume code the name may not be an argument any
    more, and a plain name would then read a fresh, unbound local instead of the cell (or, as a
    free variable's name, a local slot that holds no cell: a crash).
    """
    out: list = []
    for item in body:
        if isinstance(item, _bc.Instr) and item.name in _CELL_NAMING and isinstance(item.arg, str):
            if item.arg in code.co_cellvars:
                item = _bc.Instr(item.name, _bc.CellVar(item.arg), location=item.location)
            elif item.arg in code.co_freevars:
                item = _bc.Instr(item.name, _bc.FreeVar(item.arg), location=item.location)
        out.append(item)
    return out


def _cell_to_free(item: object) -> object:
    if isinstance(item, _bc.Instr) and isinstance(item.arg, _bc.CellVar):
        if item.name == "MAKE_CELL":
            return _bc.Instr("NOP", location=item.location)
        return _bc.Instr(item.name, _bc.FreeVar(item.arg.name), location=item.location)
    return item


def _explicit_super_calls(body: list, first_arg: str | _bc.CellVar | _bc.FreeVar) -> list:
    """Turn zero-argument `super()` into its explicit two-argument form.

    Zero-argument super() finds its instance as the frame's *first local*. In a resume function
    the first locals are the stack arguments (cleared once pushed), so it would find the wrong
    object or none. A bare `super()` call becomes `super(__class__, <first argument>)`; 3.12's
    LOAD_SUPER_ATTR (`super().attr`) already has both on the stack and only needs its
    "two-argument form" bit, which stops its unspecialized path from inspecting the frame.
    Assumes `super` is the builtin, as the zero-argument form itself does.
    """

    def is_instr(item: object, name: str, arg: object = None) -> bool:
        return isinstance(item, _bc.Instr) and item.name == name and (arg is None or item.arg == arg)

    out: list = []
    i = 0
    while i < len(body):
        item = body[i]
        i += 1
        if is_instr(item, "LOAD_SUPER_ATTR") and isinstance(item.arg, tuple):
            load_method, _, name = item.arg
            out.append(_bc.Instr(item.name, (load_method, True, name), location=item.location))
            continue
        out.append(item)
        if not (is_instr(item, "LOAD_GLOBAL") and _global_name(item.arg) == "super"):
            continue
        n = 2 if i < len(body) and is_instr(body[i], "PRECALL", 0) else 1  # PRECALL: 3.11
        if i + n > len(body) or not is_instr(body[i + n - 1], "CALL", 0):
            continue
        loc = body[i + n - 1].location
        out.append(_bc.Instr("LOAD_DEREF", _bc.FreeVar("__class__"), location=loc))
        if isinstance(first_arg, str):
            out.append(_bc.Instr("LOAD_FAST", first_arg, location=loc))
        else:
            out.append(_bc.Instr("LOAD_DEREF", first_arg, location=loc))
        out.extend(_bc.Instr(c.name, 2, location=c.location) for c in body[i : i + n])
        i += n
    return out


def _global_name(arg: object) -> object:
    # LOAD_GLOBAL's abstract argument is (push_null, name) on 3.11+
    return arg[-1] if isinstance(arg, tuple) else arg


#: The 3.13+ instructions that work on two locals, and the two single instructions each is.
PAIR_PARTS = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
    "LOAD_FAST_BORROW_LOAD_FAST_BORROW": ("LOAD_FAST_BORROW", "LOAD_FAST_BORROW"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
}


def _split_pairs(body: list) -> list:
    """Write each two-local instruction as its two single instructions.

    A pair holds both local indices in 4 bits each. The resume code puts its stack arguments
    first, which moves every local up, and the `bytecode` package splits a pair whose index no
    longer fits only for some opcodes (none of 3.14's borrowing pair) and lets an index of exactly
    16 through, which then reads the wrong local. Singles take any index.
    """
    out: list = []
    for item in body:
        parts = PAIR_PARTS.get(item.name) if isinstance(item, _bc.Instr) else None
        if parts is None:
            out.append(item)
        else:
            out.extend(_bc.Instr(part, name, location=item.location) for part, name in zip(parts, item.arg))
    return out


def _checked_loads(body: list, bound: set[str]) -> list:
    """Replace unchecked local loads (3.12+) of possibly unbound locals by LOAD_FAST_CHECK.

    The compiler proved those loads safe for the original entry; the resume entry starts with
    every local except the arguments unbound, and an unchecked load of an unbound local reads
    NULL (a crash) instead of raising UnboundLocalError. Pairs are split before this.
    """
    out: list = []
    for item in body:
        # (3.13+ may name a cell in a LOAD_FAST: such args are CellVar/FreeVar, left alone)
        if isinstance(item, _bc.Instr) and item.name in _UNCHECKED_LOADS and isinstance(item.arg, str):
            if item.arg not in bound:
                item = _bc.Instr("LOAD_FAST_CHECK", item.arg, location=item.location)
        out.append(item)
    return out


def _copies(original: str, resumed: str) -> bool:
    """Whether a resume code instruction `resumed` is a copy of an original `original`."""
    return resumed == original or (resumed == "LOAD_FAST_CHECK" and original in _UNCHECKED_LOADS)


def original_offsets(resume: types.CodeType, original: types.CodeType) -> dict[int, int] | None:
    """Map each instruction offset of `resume` (made by `build_resume_code` from `original`)
    back to the original instruction it copies, or None when they cannot be aligned.

    A resume function that meets a graph break of its own is resumed again from the *original*
    code at the mapped offset, so a loop with a break reuses one resume function per offset
    instead of nesting resume functions of resume functions. A two-local instruction is two
    instructions in the resume code (`_split_pairs`); both map to it.
    """
    new = decoded(resume).instructions
    old = decoded(original).instructions
    body = old[_first_body_index(decoded(original)) :]
    start = next((i + 1 for i, inst in enumerate(new) if inst.opname == "JUMP_FORWARD"), None)
    if start is None:
        return None
    mapping = {}
    mine = start
    for theirs in body:
        parts = PAIR_PARTS.get(theirs.opname, (theirs.opname,))
        copies = new[mine : mine + len(parts)]
        if len(copies) < len(parts) or not all(_copies(p, c.opname) for p, c in zip(parts, copies)):
            return None
        for inst in copies:
            mapping[inst.offset] = theirs.offset
        mine += len(parts)
    return mapping if mine == len(new) else None
