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

import torch

from .. import config
from ..bytecode.fingerprint import code_fingerprint
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
