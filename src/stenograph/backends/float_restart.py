"""AOTAutograd asking for float inputs to be specialised (`TensorifyScalarRestartAnalysis`).

A Python float argument that changes between calls becomes a SymFloat graph input. torch's
tensorify-python-scalars pass, run inside AOTAutograd (so by `aot_eager` and `inductor`), turns
float math into tensor math only for floats that reach the graph as a 0-d tensor read with
`.item()`; any other SymFloat makes it raise `TensorifyScalarRestartAnalysis`, its request to trace
the frame again with those floats as constants. The compiler answers the request by retracing
with the floats specialised (as torch.compile does), so the exception never reaches the user.

The pass also records the symbols' names in a process-wide set that torch.compile clears after
each of its own compiles; this module restores that set after each backend call that had float
inputs, so one stenograph compile never changes how a later one (or a torch.compile) behaves.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from ..errors import StenographError
from ..guards.sources import Source

__all__ = ["SpecialiseFloats", "float_restart_requests"]


class SpecialiseFloats(StenographError):
    """(internal) Trace the frame again with these float inputs as constants."""

    def __init__(self, sources: list[Source]) -> None:
        self.sources = sources
        names = ", ".join(s.name() for s in sources)
        super().__init__(f"the backend asked for float inputs to be specialised: {names}")


def _forced_specialisations() -> set[str] | None:
    """torch's process-wide set of float symbols to specialise; None while torch._dynamo, which
    holds it, is not loaded (importing it costs seconds, and a backend that needs it loads it)."""
    module = sys.modules.get("torch._dynamo.symbolic_convert")
    return None if module is None else module.TensorifyState.force_specializations


def _is_restart_request(error: BaseException) -> bool:
    module = sys.modules.get("torch._dynamo.exc")
    return module is not None and isinstance(error, module.TensorifyScalarRestartAnalysis)


@contextlib.contextmanager
def float_restart_requests(float_sources: list[Source]) -> Iterator[None]:
    """Around a backend call: turn the pass's restart request into `SpecialiseFloats`.

    The pass restarts only for SymFloat inputs, so without `float_sources` there is nothing to do.
    """
    if not float_sources:
        yield
        return
    before = _forced_specialisations()
    recorded = set(before) if before is not None else set()
    try:
        yield
    except Exception as error:
        if _is_restart_request(error):
            raise SpecialiseFloats(float_sources) from error
        raise
    finally:
        after = _forced_specialisations()
        if after is not None:
            after.clear()
            after.update(recorded)
