"""Reading and writing code objects: decoding for the interpreter, assembly, resume functions.

* `instructions` — `decode`/`decoded`: version-neutral instruction records, offset map and
  exception table of a code object (cached per code object).
* `stackdepth` — `stack_depths`: the value-stack depth before each instruction.
* `assemble` — `disassemble`/`assemble`/`roundtrip`: editable bytecode and back, on top of the
  `bytecode` package (with the fixes it needs, see that module).
* `linetable` — a conforming encoder for 3.11+ location tables (used by `assemble`).
* `resume` — `build_resume_code`: code that continues a function at a given offset.
"""

from .assemble import AbstractBytecode, assemble, disassemble, instruction_positions, roundtrip
from .instructions import (
    JUMP_OPCODES,
    DecodedCode,
    ExceptionEntry,
    Instr,
    decode,
    decoded,
    exception_entries,
    jump_target,
)
from .resume_code import (
    ITERATOR_FROM_TUPLE,
    NULL_STACK_ENTRY,
    VALUE_STACK_ENTRY,
    LastiStackEntry,
    SlotKind,
    build_resume_code,
    describe_handler,
    resume_code_name,
    stack_arg_name,
)
from .stackdepth import stack_depths

__all__ = [
    "AbstractBytecode",
    "DecodedCode",
    "ExceptionEntry",
    "ITERATOR_FROM_TUPLE",
    "Instr",
    "JUMP_OPCODES",
    "LastiStackEntry",
    "NULL_STACK_ENTRY",
    "SlotKind",
    "VALUE_STACK_ENTRY",
    "assemble",
    "build_resume_code",
    "decode",
    "decoded",
    "describe_handler",
    "disassemble",
    "exception_entries",
    "instruction_positions",
    "jump_target",
    "resume_code_name",
    "roundtrip",
    "stack_arg_name",
    "stack_depths",
]
