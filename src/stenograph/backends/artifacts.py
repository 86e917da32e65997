"""What a backend compiled, as bytes that a new process loads without compiling again.

Why: a warm start (issue 28) stores, per code object, the frontend's output and the backend's
compiled graph, so that a second process neither traces nor compiles. This module is the backend
half: `compile_with_artifact(backend, gm, example_inputs)` compiles as `backend(gm,
example_inputs)` does and also returns the bytes; `load_artifact(data)` rebuilds an equivalent
callable from them in any process with the same versions, or raises `ArtifactError`, which the
caller treats as a cache miss.

A backend can be stored only if it says how: its callable carries `stenograph_artifacts`, an
object with

* `identity: str`: the backend and its options; artifacts of different identities never stand
  in for each other (`load_artifact(data, backend=...)` checks it);
* `loader: str`: "module:function", importable in a new process; `function(payload) -> callable`;
* `compile_with_artifact(gm, example_inputs) -> (callable, payload: bytes | None)`: compiles as
  the backend does, and returns None when this graph cannot be stored;
* optionally `loads_with: tuple[str, ...]`, modules its loader and what it loads import
  (AOTAutograd's and Inductor's take seconds): `prepare_loading` imports them when compiling is
  set up, before the first call;
* optionally `warm_up()`, called then too: starts what a load will need and can run beside the
  first call's other work (Inductor hashes Triton's sources in a thread).

The built-in `eager`, `aot_eager` and `inductor` (every mode) carry one; `cudagraphs` and custom
callables do not, so they are compiled as usual and cached only in memory, unless they declare
one as above. How each built-in stores its result is told in `eager.py`, `aot_eager.py` and
`_inductor_artifacts.py`.

The bytes: a magic line, a JSON header (the versions and devices the payload depends on, the
identity and loader), the payload, and a SHA-256 of all that. `load_artifact` refuses bytes that
are cut short, changed, or made under another Python, torch, stenograph backend code, platform or
device (a GPU of another kind) before it imports anything the bytes name. The payload is a pickle:
load only artifacts that this user's own processes wrote.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import json
import logging
import pathlib
import platform
import struct
import sys
from collections.abc import Callable
from typing import Any, Protocol

import torch

from ..errors import StenographError

__all__ = [
    "ArtifactCodec",
    "ArtifactError",
    "NotPersistable",
    "backend_identity",
    "compile_with_artifact",
    "composite_artifact",
    "declined",
    "load_artifact",
    "prepare_loading",
]

log = logging.getLogger("stenograph.artifacts")

_MAGIC = b"stenograph backend artifact\n"
_FORMAT = 1
_LENGTH = struct.Struct(">Q")
_DIGEST_SIZE = hashlib.sha256().digest_size


class ArtifactError(StenographError):
    """The bytes cannot be loaded here: not an artifact, corrupt or cut short, or made under other
    versions, devices or another backend. `reason` says which."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class NotPersistable(Exception):
    """A compiled graph cannot be stored (the message says why); it stays usable in memory."""


class ArtifactCodec(Protocol):
    """What a backend's `stenograph_artifacts` provides (see the module docstring)."""

    identity: str
    loader: str

    def compile_with_artifact(
        self, gm: torch.fx.GraphModule, example_inputs: list[Any]
    ) -> tuple[Callable[..., Any], bytes | None]: ...


def declined(identity: str, reason: object) -> None:
    """Record why a compiled graph was not stored (the log of "stenograph.artifacts")."""
    log.info("%s: compiled graph not stored: %s", identity, reason)


def _resolve(backend: Any) -> Any:
    if isinstance(backend, str):
        from .registry import lookup_backend  # a cycle: the registry imports the backends, they this module

        return lookup_backend(backend)
    return backend


def backend_identity(backend: Any) -> str | None:
    """The identity of `backend`'s artifacts (a name or a compiler function), or None when it
    cannot store its results. A cache of artifacts keys on it."""
    codec = getattr(_resolve(backend), "stenograph_artifacts", None)
    return None if codec is None else codec.identity


def prepare_loading(backend: Any) -> None:
    """Import what loading `backend`'s artifacts imports (its codec's `loads_with`): a process
    that will load them pays those imports when it sets up compiling, as torch.compile pays its
    own, rather than inside the first call. The codec's `warm_up`, if it has one, runs first:
    what it starts in the background overlaps the imports."""
    codec = getattr(_resolve(backend), "stenograph_artifacts", None)
    warm_up = getattr(codec, "warm_up", None)
    if warm_up is not None:
        warm_up()
    for module in getattr(codec, "loads_with", ()):
        importlib.import_module(module)


@functools.cache
def _backend_code() -> str:
    """stenograph's version and a digest of this package's sources: the payloads pickle its
    classes and follow its code, which changes between commits of one version."""
    try:
        version = importlib.metadata.version("stenograph")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        version = "unreleased"
    digest = hashlib.sha256()
    for path in sorted(pathlib.Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"{version} {digest.hexdigest()[:20]}"


def _device_facts(devices: list[str]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for device in devices:
        if device.startswith("cuda"):
            index = torch.device(device).index or 0
            facts[device] = [torch.cuda.get_device_name(index), list(torch.cuda.get_device_capability(index))]
    return facts


def _environment(devices: list[str]) -> dict[str, Any]:
    """The versions and devices an artifact made here depends on."""
    return {
        "python": f"{sys.implementation.name} {platform.python_version()}",
        "platform": f"{sys.platform} {platform.machine()}",
        "torch": f"{torch.__version__} {torch.version.git_version} cuda={torch.version.cuda}",
        "stenograph": _backend_code(),
        "devices": _device_facts(devices),
    }


def _devices(example_inputs: list[Any]) -> list[str]:
    found = {str(x.device) for x in example_inputs if isinstance(x, torch.Tensor)}
    return sorted(d if d != "cuda" else "cuda:0" for d in found)


def compile_with_artifact(
    backend: Any, gm: torch.fx.GraphModule, example_inputs: list[Any]
) -> tuple[Callable[..., Any], bytes | None]:
    """Compile `gm` as `backend(gm, example_inputs)` does; also return bytes from which
    `load_artifact` rebuilds an equivalent callable in another process, or None when the backend
    or this graph cannot be stored (the reason is logged on "stenograph.artifacts")."""
    backend = _resolve(backend)
    codec: ArtifactCodec | None = getattr(backend, "stenograph_artifacts", None)
    refusal = _unpersistable_target(gm)
    if refusal is not None and codec is not None:
        compiled = backend(gm, example_inputs)
        declined(getattr(backend, "__name__", type(backend).__name__), refusal)
        return compiled, None
    if codec is None:
        compiled = backend(gm, example_inputs)
        declined(getattr(backend, "__name__", type(backend).__name__), "the backend declares no stenograph_artifacts")
        return compiled, None
    compiled, payload = codec.compile_with_artifact(gm, example_inputs)
    if payload is None:
        return compiled, None
    return compiled, _artifact(codec.identity, codec.loader, payload, example_inputs)


def _unpersistable_target(gm: torch.fx.GraphModule) -> str | None:
    """Why a node's target makes the graph unfit to store (a target saying so in its
    `not_persistable` text), or None."""
    for node in gm.graph.nodes:
        if node.op == "call_function":
            reason = getattr(node.target, "not_persistable", None)
            if isinstance(reason, str):
                return reason
    return None


def composite_artifact(backend: Any, loader: str, payload: bytes, example_inputs: list[Any]) -> bytes:
    """An artifact of `backend` whose payload `loader` reads: what the frontend made around
    artifacts of that backend (a graph compiled in pieces), checked on load as they are."""
    identity = backend_identity(backend)
    if identity is None:
        raise NotPersistable("the backend declares no stenograph_artifacts")
    return _artifact(identity, loader, payload, example_inputs)


def _artifact(identity: str, loader: str, payload: bytes, example_inputs: list[Any]) -> bytes:
    devices = _devices(example_inputs)
    header = {
        "format": _FORMAT,
        "identity": identity,
        "loader": loader,
        "device_types": devices,
        **_environment(devices),
    }
    return _pack(header, payload)


def _pack(header: dict[str, Any], payload: bytes) -> bytes:
    head = json.dumps(header, sort_keys=True).encode()
    body = _MAGIC + _LENGTH.pack(len(head)) + head + _LENGTH.pack(len(payload)) + payload
    return body + hashlib.sha256(body).digest()


def _unpack(data: bytes) -> tuple[dict[str, Any], bytes]:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ArtifactError(f"an artifact is bytes, not {type(data).__name__}")
    data = bytes(data)
    if not data.startswith(_MAGIC):
        raise ArtifactError("not a stenograph backend artifact (wrong magic)")
    if len(data) < len(_MAGIC) + 2 * _LENGTH.size + _DIGEST_SIZE:
        raise ArtifactError("artifact cut short")
    body, digest = data[:-_DIGEST_SIZE], data[-_DIGEST_SIZE:]
    if hashlib.sha256(body).digest() != digest:
        raise ArtifactError("artifact corrupt or cut short (checksum mismatch)")
    at = len(_MAGIC)
    (head_size,) = _LENGTH.unpack_from(body, at)
    at += _LENGTH.size
    try:
        header = json.loads(body[at : at + head_size])
    except ValueError as exc:
        raise ArtifactError(f"artifact header unreadable: {exc}") from exc
    at += head_size
    (payload_size,) = _LENGTH.unpack_from(body, at)
    at += _LENGTH.size
    if at + payload_size != len(body):
        raise ArtifactError("artifact length fields do not match its size")
    return header, body[at:]


def _check(header: dict[str, Any], backend: Any) -> None:
    if header.get("format") != _FORMAT:
        raise ArtifactError(f"artifact format {header.get('format')!r}, this stenograph reads {_FORMAT}")
    devices = header.get("device_types", [])
    if any(d.startswith("cuda") for d in devices) and not torch.cuda.is_available():
        raise ArtifactError(f"artifact made for {', '.join(devices)}, but CUDA is not available here")
    here = _environment(devices)
    for key, value in here.items():
        if header.get(key) != value:
            raise ArtifactError(f"artifact made under {key} {header.get(key)!r}, this process has {value!r}")
    if backend is not None:
        expected = backend_identity(backend)
        if expected != header.get("identity"):
            raise ArtifactError(f"artifact of backend {header.get('identity')!r}, expected {expected!r}")


def _loader(path: str) -> Callable[[bytes], Callable[..., Any]]:
    module_name, _, attribute = path.partition(":")
    try:
        loader: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            loader = getattr(loader, part)
    except Exception as exc:
        raise ArtifactError(f"artifact loader {path!r} cannot be imported: {type(exc).__name__}: {exc}") from exc
    return loader


def load_artifact(data: bytes, backend: Any = None) -> Callable[..., Any]:
    """Rebuild the callable that `compile_with_artifact` stored in `data`, compiling nothing.

    With `backend` (a name or compiler function), the artifact must also have been made by a
    backend of the same identity (same backend, same mode and options). Raises `ArtifactError`
    when the bytes cannot be used here, for whatever reason.
    """
    header, payload = _unpack(data)
    _check(header, backend)
    loader = _loader(str(header.get("loader")))
    try:
        return loader(payload)
    except ArtifactError:
        raise
    except Exception as exc:
        problem = f"{type(exc).__name__}: {exc}"
        raise ArtifactError(f"artifact of {header.get('identity')!r} failed to load: {problem}") from exc
