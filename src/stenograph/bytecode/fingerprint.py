"""A code object's fingerprint: a digest of everything in it that running or tracing it depends on.

Equal in every process for the same source text in the same file, and different for equal code
objects of two files (CPython's code equality leaves the file out). The warm-start folder files
entries under it (`warm/`); a nested break's chain names its links by it (`graph/resume.py`).
"""

from __future__ import annotations

import hashlib
import types
from typing import Any

from .. import process_state
from ..code_tables import CodeTable

_fingerprints: CodeTable[str] = CodeTable()
process_state.register_containers("bytecode.fingerprints", _fingerprints, memo=True)


def code_fingerprint(code: types.CodeType) -> str:
    """A digest of everything in `code` that running or tracing it depends on, nested code
    objects included; equal in every process for the same source text in the same file."""
    found = _fingerprints.get(code)
    if found is None:
        digest = hashlib.sha256()
        _feed_code(digest, code)
        found = _fingerprints[code] = digest.hexdigest()[:32]
    return found


def _feed_code(digest: Any, code: types.CodeType) -> None:
    for part in (
        code.co_qualname,
        code.co_filename,
        code.co_firstlineno,
        code.co_argcount,
        code.co_posonlyargcount,
        code.co_kwonlyargcount,
        code.co_flags,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
    ):
        digest.update(repr(part).encode())
        digest.update(b"\x00")
    digest.update(code.co_code)
    digest.update(code.co_linetable)
    digest.update(code.co_exceptiontable)
    for const in code.co_consts:
        digest.update(_constant_text(const).encode())
        digest.update(b"\x00")


def _constant_text(const: Any) -> str:
    """A constant as text that is the same in every process: nested code by its fingerprint,
    a frozenset's members sorted (their order follows string hashing, which each process
    salts anew)."""
    if isinstance(const, types.CodeType):
        return "code:" + code_fingerprint(const)
    if type(const) is tuple:
        return "(" + ",".join(_constant_text(c) for c in const) + ")"
    if type(const) is frozenset:
        return "{" + ",".join(sorted(_constant_text(c) for c in const)) + "}"
    return f"{type(const).__qualname__}:{const!r}"
