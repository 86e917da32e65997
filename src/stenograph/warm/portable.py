"""Carrying compiled entries to another process or machine: build once, load in serving.

`save_artifacts()` bundles every persisted entry this process compiled, installed or looked at
(frontend and backend alike: guards, generated code, resume functions' entries, compiled graphs)
into bytes; `load_artifacts(...)` in another process hands them to its persisted cache, which
uses them exactly as entries found in a cache folder: each is checked on the live frame before it
runs. A machine of another kind (another GPU, other versions) simply compiles.
"""

from __future__ import annotations

import os
import pathlib

from .. import config
from ..errors import StenographError
from .store import bundle, load_bundle, store_for


def save_artifacts(path: str | os.PathLike | None = None) -> bytes:
    """The entries this process compiled or used with the persisted cache on, as bytes (also
    written to `path` when given). The cache must have been on while compiling
    (`config.cache_dir` or `STENOGRAPH_CACHE_DIR`)."""
    stores = [store_for(config.cache_dir)] if config.cache_dir is not None else []
    blob = bundle([*stores, store_for(None)])
    if path is not None:
        pathlib.Path(path).write_bytes(blob)
    return blob


def load_artifacts(data: bytes | str | os.PathLike) -> int:
    """Hand the entries of a `save_artifacts()` bundle (bytes, or a file holding them) to this
    process's persisted cache; returns how many. Raises `StenographError` for anything else."""
    blob = data if isinstance(data, (bytes, bytearray)) else pathlib.Path(data).read_bytes()
    try:
        return load_bundle(bytes(blob))
    except ValueError as e:
        raise StenographError(f"stenograph.load_artifacts: {e}") from e
