"""AOTAutograd results that can be stored, for the artifacts of `aot_eager` and `inductor`.

Why AOTAutograd's own cache entry: what AOTAutograd returns is more than the forward and backward
graphs. Runtime wrappers around them apply input mutations, rebuild outputs that alias inputs or
each other, detach, handle RNG state and subclasses; they are built from metadata
(`ViewAndMutationMeta`) computed while tracing. Its cache entry (`BundledAOTAutogradResult`, the
one torch's precompile stores) holds exactly that metadata and the compiled graphs, and
`deserialize_bundled_cache_entry` rebuilds the same wrappers from it without tracing, as a cache
hit does. Rebuilding them by hand would copy AOTAutograd's logic and drift from it.

AOTAutograd makes that entry only while its cache is on, in "bundled" form (the compiled graphs
inside the entry, not referenced by key), with the backward compiled right away rather than at the
first backward call (`bundling()`; this is what `torch._inductor.standalone_compile` sets). The
compilers must return an `OutputCode`: `GraphCode` is one for a graph run as it is (`aot_eager`).
Inductor's are its own `CompiledFxGraph`s.

`bypass_autograd_cache_key` lets a graph whose cache key cannot be computed (a call AOTAutograd
does not know to be safe to cache) still get an entry, under a random key that no lookup finds.
Where the cache is off (`enable_autograd_cache`, or `recompute_regions.py` for a graph with
checkpoint regions, whose key would not tell them apart), nothing is stored: turning it on would
let a lookup return another graph's entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch._functorch.config as functorch_config
import torch.fx
from torch._functorch._aot_autograd.aot_autograd_result import deserialize_bundled_cache_entry
from torch._functorch._aot_autograd.schemas import SerializableAOTDispatchCompiler
from torch._inductor.output_code import OutputCode

from ._graph_pickle import dumps_graph, loads_graph
from .artifacts import NotPersistable

__all__ = ["GraphCode", "bundled_entry", "bundling", "config_digest", "dumps_entry", "graph_code_compiler", "rebuild"]

_REQUIRED = {"bundled_autograd_cache": True, "force_non_lazy_backward_lowering": True}
_OPTIONAL = {"bypass_autograd_cache_key": True}


class GraphCode(OutputCode):
    """A forward or backward graph that AOTAutograd runs as it is, storable in its cache entry.

    It pickles as the graph itself (`_graph_pickle.py`); AOTAutograd calls it with one list of
    inputs (`_boxed_call`, an instance attribute: AOTAutograd's wrappers copy the instance's dict).
    """

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__()
        self.gm = gm
        self._forward = gm.forward
        self._boxed_call = True
        # nothing is compiled: AOTAutograd's cache sums this into the time a hit saved, and
        # torch 2.15 fails on a hit whose time is None (OutputCode's default)
        self._time_taken_ns = 0

    def __call__(self, inputs: list[Any]) -> Any:
        return self._forward(*inputs)

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        return _load_graph_code, (dumps_graph(self.gm),)

    def __copy__(self) -> GraphCode:
        return GraphCode(self.gm)

    def __deepcopy__(self, memo: dict[int, Any]) -> GraphCode:
        # the graph is never changed once compiled: copies (AOTAutograd keeps one to store again)
        # may share it
        return GraphCode(self.gm)

    def prepare_for_serialization(self) -> None:
        """Nothing to drop: pickling stores the graph."""

    def post_compile(self, example_inputs: Any, constants: Any, graph_kwargs: Any) -> None:
        """Nothing to redo after loading: the graph runs as it is."""

    def set_triton_bundle(self, triton_bundle: Any) -> None:
        """No Triton kernels here."""


def _load_graph_code(data: bytes) -> GraphCode:
    return GraphCode(loads_graph(data))


def graph_code_compiler() -> SerializableAOTDispatchCompiler:
    """A forward/backward compiler for `aot_module_simplified` whose results AOTAutograd stores."""
    return SerializableAOTDispatchCompiler(GraphCode, lambda gm, example_inputs: GraphCode(gm))


@contextlib.contextmanager
def bundling(cache_key_tag: str | None = None) -> Iterator[None]:
    """Settings under which AOTAutograd makes a self-contained, storable entry.

    `cache_key_tag` is added to AOTAutograd's cache key: its key does not cover the compilers or the
    partitioner, so results of other compilers must not be found under the same key.
    """
    missing = [name for name in _REQUIRED if not hasattr(functorch_config, name)]
    if missing:
        raise NotPersistable(f"this AOTAutograd has no {', '.join(missing)} setting")
    patches = {**_REQUIRED, **{k: v for k, v in _OPTIONAL.items() if hasattr(functorch_config, k)}}
    with contextlib.ExitStack() as stack:
        stack.enter_context(functorch_config.patch(patches))
        if cache_key_tag is not None:
            tag = f"{torch.compiler.config.cache_key_tag}|{cache_key_tag}"
            stack.enter_context(torch.compiler.config.patch(cache_key_tag=tag))
        yield


def bundled_entry(compiled: Callable[..., Any]) -> Any:
    """AOTAutograd's self-contained cache entry for what `aot_module_simplified` returned."""
    serialize = getattr(compiled, "serialize", None)
    entry = serialize() if serialize is not None else None
    if entry is None:
        if torch.compiler.config.force_disable_caches or not functorch_config.enable_autograd_cache:
            raise NotPersistable("AOTAutograd's cache is off (force_disable_caches or enable_autograd_cache)")
        raise NotPersistable("AOTAutograd made no cache entry for this graph")
    if type(entry).__name__ != "BundledAOTAutogradResult":
        raise NotPersistable(f"AOTAutograd's entry is a {type(entry).__name__}, which refers to other caches")
    return entry


def dumps_entry(entry: Any) -> bytes:
    """The entry as bytes (pickle, as AOTAutograd's cache stores it)."""
    try:
        return pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
    except NotPersistable:
        raise
    except Exception as exc:
        raise NotPersistable(f"AOTAutograd's entry does not pickle: {type(exc).__name__}: {exc}") from exc


def rebuild(entry: Any) -> Callable[..., Any]:
    """The callable AOTAutograd returned when it compiled `entry`, rebuilt without compiling."""
    return deserialize_bundled_cache_entry(entry)


def config_digest() -> str:
    """A digest of AOTAutograd's settings under `bundling()`: its runtime wrappers read some of
    them when they are built, so an entry is loaded only under the settings it was made with."""
    with bundling():
        settings = functorch_config.save_config_portable()
    return hashlib.sha256(repr(sorted(settings.items())).encode()).hexdigest()[:20]
