"""AOTAutograd asking for float inputs to be specialised (`TensorifyScalarRestartAnalysis`).

A Python float argument that changes between calls becomes a SymFloat graph input. torch's
tensorify-python-scalars pass, run inside AOTAutograd (so by `aot_eager` and `inductor`), turns
float math into tensor math only for floats that reach the graph as a 0-d tensor read with
`.item()`; any other SymFloat makes it raise `TensorifyScalarRestartAnalysis`, its request to trace
the frame again with those floats as constants. The compiler answers the request by retracing
with the floats specialised (as torch.compile does), so the exception never reaches the user.

The pass also records the symbols' names in a process-wide set that torch.compile clears after
each of its own compiles; this module restores that set after every backend call, so one
stenograph compile never changes how a later one (or a torch.compile) behaves.
"""

from __future__ import annotations

import contextlib
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


@contextlib.contextmanager
def float_restart_requests(float_sources: list[Source]) -> Iterator[None]:
    """Around a backend call: turn the pass's restart request into `SpecialiseFloats`.

    The pass restarts only for SymFloat inputs, so without `float_sources` there is nothing to do.
    """
    if not float_sources:
        yield
        return
    # Imported here: torch._dynamo is heavy; AOTAutograd has loaded it by the time the pass runs.
    from torch._dynamo.exc import TensorifyScalarRestartAnalysis
    from torch._dynamo.symbolic_convert import TensorifyState

    recorded = set(TensorifyState.force_specializations)
    try:
        yield
    except TensorifyScalarRestartAnalysis as restart:
        raise SpecialiseFloats(float_sources) from restart
    finally:
        TensorifyState.force_specializations.clear()
        TensorifyState.force_specializations.update(recorded)
