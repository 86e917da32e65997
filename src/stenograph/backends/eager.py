"""The `eager` backends: run the captured graph as it is.

Why they exist: they isolate capture from compilation. If a program misbehaves under `eager`, the
bug is in graph capture (guards, graph breaks, side effects), not in a compiler. `eager_noexcept`
(torch.compile's backend of that name) also checks that the graph itself never raises: an
exception from running it is turned into a `StenographError` naming the graph, so a test that
expects none notices one that eager code would have caught and handled.

Its artifact (artifacts.py) is the graph itself (`_graph_pickle.py`): loading builds the same
GraphModule and returns its `forward`, so a loaded graph runs exactly as a compiled one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import StenographError
from ._graph_pickle import dumps_graph, loads_graph
from .artifacts import NotPersistable, declined

if TYPE_CHECKING:
    import torch.fx

__all__ = ["eager", "eager_noexcept", "load_artifact"]


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
