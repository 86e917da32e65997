"""Triton's and torch's source hashes, remembered per machine.

Inductor's cache hits need two hashes of installed sources, each computed once per process:
Triton's (`triton_key`: every file of its compiler, backends and language, and its 100+ MB
library; 0.35-0.40 s on an H200 host), the key of every Triton kernel it loads from its cache,
and torch's (`torch_key`: every module of torch; 0.10-0.21 s), the key of Inductor's in-process
kernel cache. A warm process would pay both before its first kernel loads.

Once computed they are written to Inductor's cache folder under a digest of the `stat` of every
file either hash could read (path, size, modification and change times, inode: reinstalling or
editing a file changes its change time, which no tool sets back) and of the versions. A later
process finds them by that digest in a few tens of milliseconds and gives them to the functions
that keep them: `torch_key.set` (torch's prefetchable cache) and, for Triton's, whose cache has
no setter, a function returning the remembered value in place of `triton.runtime.cache.triton_key`
and Inductor's alias of it, the two names its callers look up when they call. A value that is
missing, unreadable or of the wrong form is computed as before; a value is only ever used under
the digest of the installation it was computed on.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import json
import os
import sys
import types
from typing import Any

import torch
from torch._inductor.codecache import torch_key
from torch._inductor.runtime import triton_compat
from torch._inductor.runtime.cache_dir_utils import cache_dir

# the files the hashes read: modules (sources and extensions), and torch's two extras
_READ_SUFFIXES = (*importlib.machinery.all_suffixes(), ".cpp", ".ld")


def remember_or_compute(triton: types.ModuleType, triton_cache: types.ModuleType) -> None:
    """Give torch's and Triton's source hashes their remembered values, or compute them and
    remember them for the next process. `triton` is the package, `triton_cache` its
    `triton.runtime.cache` module."""
    path = os.path.join(cache_dir(), "stenograph-source-digests", _installation_digest(triton) + ".json")
    remembered = _read(path)
    if remembered is not None and _give(remembered, triton_cache):
        return
    values = {"triton_key": triton_cache.triton_key(), "torch_key": torch_key().hex()}
    _write(path, values)


def _installation_digest(triton: types.ModuleType) -> str:
    """A digest of the versions and of the `stat` of every file under torch and Triton that
    their source hashes could read."""
    digest = hashlib.sha256(repr((sys.version, torch.__version__, triton.__version__)).encode())
    for package in (torch, triton):
        for entry in _stats(os.path.dirname(package.__file__)):
            digest.update(entry.encode())
    return digest.hexdigest()


def _stats(folder: str) -> list[str]:
    found: list[str] = []
    pending = [folder]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        pending.append(entry.path)
                elif entry.name.endswith(_READ_SUFFIXES):
                    st = entry.stat()
                    found.append(f"{entry.path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}")
    found.sort()
    return found


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as file:
            values = json.load(file)
    except (OSError, ValueError):
        return None
    if not (isinstance(values, dict) and all(isinstance(values.get(k), str) for k in ("triton_key", "torch_key"))):
        return None
    return values


def _give(values: dict[str, Any], triton_cache: types.ModuleType) -> bool:
    """Hand the remembered values over; False where torch's hash takes none (an older torch, or
    one computed already) or Triton's is not the cached function expected."""
    try:
        torch_value = bytes.fromhex(values["torch_key"])
    except ValueError:
        return False
    computed = triton_cache.triton_key
    if not isinstance(computed, functools._lru_cache_wrapper) or not hasattr(torch_key, "set"):
        return False
    try:
        torch_key.set(torch_value)
    except RuntimeError:  # computed in this process already
        pass
    triton_value = values["triton_key"]

    @functools.wraps(computed)
    def triton_key() -> str:
        return triton_value

    triton_cache.triton_key = triton_key
    if getattr(triton_compat, "triton_key", None) is computed:
        triton_compat.triton_key = triton_key
    return True


def _write(path: str, values: dict[str, Any]) -> None:
    """Written whole or not at all (a temporary file renamed), so readers never see half."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(values, file)
        os.replace(temporary, path)
    except OSError:  # a read-only cache folder: computed again next time
        return
