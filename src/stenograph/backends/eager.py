"""The `eager` backends: run the captured graph as it is.

Why they exist: they isolate capture from compilation. If a program misbehaves under `eager`, the
bug is in graph capture (guards, graph breaks, side effects), not in a compiler. `eager_noexcept`
(torch.compile's backend of that name) also checks that the graph itself never raises: an
exception from running it is turned into a `StenographError` naming the graph, so a test that
expects none notices one that eager code would have caught and handled. `eager_debug` runs the
graph under torch's `SchemaCheckMode`, so a custom operator that writes to or aliases an argument
its schema does not declare raises; `pre_dispatch_eager` runs the graph recorded again by
`make_fx(pre_dispatch=True)` (what export's pre-dispatch IR holds), for checking that recording.

Its artifact (artifacts.py) is the graph itself (`_graph_pickle.py`): loading builds the same
GraphModule and returns its `forward`, so a loaded graph runs exactly as a compiled one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.fx

from ..errors import StenographError
from ._graph_pickle import dumps_graph, loads_graph
from .artifacts import NotPersistable, declined

__all__ = ["eager", "eager_debug", "eager_noexcept", "load_artifact", "pre_dispatch_eager"]


def eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Return the graph's own `forward`; nothing is compiled."""
    return gm.forward


def eager_noexcept(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Run the graph as it is, raising `StenographError` (the graph's exception as its cause)
    if running it raises."""

    def run(*args: Any) -> Any:
        try:
            return gm(*args)
        except Exception as e:
            raise StenographError(f"unexpected exception when running the captured graph: {e!r}") from e

    return run


def eager_debug(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """Run the graph node by node under `SchemaCheckMode` (operators checked against their
    schemas' mutation and aliasing declarations)."""
    # a debugging backend's helper, imported when it is used
    from torch._subclasses.schema_check_mode import SchemaCheckMode

    def run(*args: Any) -> Any:
        with SchemaCheckMode():
            return torch.fx.Interpreter(gm).run(*args)

    return run


def pre_dispatch_eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """The graph recorded again before dispatch (ATen operators, autograd and grad-mode switches
    kept), run as it is."""
    # a debugging backend's helper, imported when it is used
    from torch.fx.experimental.proxy_tensor import make_fx

    def interpret(*args: Any) -> Any:
        return torch.fx.Interpreter(gm).run(*args)

    return make_fx(interpret, pre_dispatch=True)(*example_inputs)


class _Artifacts:
    """How `eager` stores what it compiled (the `stenograph_artifacts` protocol of artifacts.py)."""

    identity = "eager"
    loader = "stenograph.backends.eager:load_artifact"

    def compile_with_artifact(
        self, gm: torch.fx.GraphModule, example_inputs: list[Any]
    ) -> tuple[Callable[..., Any], bytes | None]:
        compiled = eager(gm, example_inputs)
        try:
            return compiled, dumps_graph(gm)
        except NotPersistable as reason:
            declined(self.identity, reason)
            return compiled, None


def load_artifact(payload: bytes) -> Callable[..., Any]:
    """The `forward` of the graph an `eager` artifact holds."""
    return loads_graph(payload).forward


eager.stenograph_artifacts = _Artifacts()  # type: ignore[attr-defined]
