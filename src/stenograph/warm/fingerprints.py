"""What a persisted entry must match to be used: the code it was compiled from, and the world.

A cache entry written by another process is only a candidate. Its key says everything that can
change the result without showing in its guards: the code object itself (bytecode, constants,
names, line table, file), the versions of Python, torch and stenograph, the backend and its
options, and the settings that change tracing. The guards then check the rest on the live frame.
"""

from __future__ import annotations

import hashlib
import pathlib
import sys
import types
from typing import Any

import torch

from .. import config, process_state
from ..code_tables import CodeTable
from ..shapes import named_sources

# the settings that change what a trace produces (the others change logging, checks or limits)
TRACING_SETTINGS = (
    "assume_static_by_default",
    "automatic_dynamic_shapes",
    "specialize_int",
    "specialize_float",
    "replay_side_effects",
    "capture_scalar_outputs",
    "capture_dynamic_output_shape_ops",
    "optimize_ddp",
    "inline_depth_limit",
    "mark_static_inputs",
    "cudagraph_call_marks",
    "cuda_graphs_for_inference",
    "allow_unspec_int_on_nn_module",
    "automatic_dynamic_shapes_mark_as",
)

_fingerprints: CodeTable[str] = CodeTable()
process_state.register_containers("warm.fingerprints", _fingerprints, memo=True)


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


def _package_digest() -> str:
    """stenograph's own sources: a development tree changes without a version bump."""
    digest = hashlib.sha256()
    root = pathlib.Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")) + sorted(root.rglob("*.cpp")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


_PACKAGE_DIGEST: list[str] = []


def environment_key() -> tuple:
    """The versions a persisted entry was compiled under: Python (and its bytecode), torch, and
    stenograph's sources."""
    if not _PACKAGE_DIGEST:
        _PACKAGE_DIGEST.append(_package_digest())
    return (sys.version, sys.implementation.cache_tag, torch.__version__, _PACKAGE_DIGEST[0])


def settings_key() -> tuple:
    """The tracing settings now (part of every lookup's key: `config.patch` may change them),
    torch's settings naming dynamic sources included."""
    return tuple((name, getattr(config, name)) for name in TRACING_SETTINGS) + named_sources.settings()


def entry_key(code: types.CodeType, backend_key: str, dynamic: bool | None) -> str:
    """Where entries of `code` compiled with this backend, these settings and this world live."""
    digest = hashlib.sha256()
    for part in (code_fingerprint(code), backend_key, dynamic, environment_key(), settings_key()):
        digest.update(repr(part).encode())
        digest.update(b"\x00")
    return digest.hexdigest()[:40]
