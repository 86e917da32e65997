"""Values the graph computes (`GraphValueVariable`: a tensor or a symbolic number, its fx node and
fake value), and the tracker for symbolic Python numbers: SymInt / SymFloat / SymBool values.

Symbolic numbers come from dynamic sizes (`x.shape[0]` of a dynamic dimension) and from int arguments made
dynamic. Arithmetic on them is recorded as graph nodes; a Python decision on one (`if n > 0`,
`range(n)`) asks the ShapeEnv for its value, which records a guard, so the entry is only reused
where the decision would come out the same.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from ..errors import BreakKind, Unsupported
from .base import Variable

if TYPE_CHECKING:
    import torch.fx

    from ..guards.sources import Source
    from ..interpreter.frame import Frame


class GraphValueVariable(Variable):
    """A value the graph computes: `node` computes it, `fake` is its value while tracing (a fake
    tensor, or a SymInt / SymFloat / SymBool)."""

    def __init__(self, node: torch.fx.Node, fake: Any, source: Source | None = None) -> None:
        self.node = node
        self.fake = fake
        self.source = source

    def in_graph(self) -> bool:
        return True

    def is_tensor(self) -> bool:
        """Whether the value is a tensor (an object, whose identity is its node) rather than a
        symbolic number."""
        return False

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.graph_value(self.node)

    def literal_index(self) -> int | None:
        """The integer a 0-d integer tensor holds where its value is known while tracing (made
        from a literal, `torch.tensor(1)`, and not changed since: fake tensors keep such a
        constant and drop it on an in-place change), for `seq[t]`; None otherwise."""
        known = getattr(self.fake, "constant", None)
        if not self.is_tensor() or known is None or self.fake.dim() != 0:
            return None
        dtype = self.fake.dtype
        return None if dtype.is_floating_point or dtype.is_complex or dtype is torch.bool else int(known.item())


class SymNodeVariable(GraphValueVariable):
    def python_type(self) -> type:
        if isinstance(self.fake, torch.SymBool):
            return bool
        return float if isinstance(self.fake, torch.SymFloat) else int

    def describe(self) -> str:
        return f"symbolic {self.python_type().__name__} {self.node.name} ({self.fake})"

    def as_constant(self) -> Any:
        """Specialise: the value now, with a guard that it stays this value."""
        return self._decide(self.python_type(), "using it as a Python value")

    def truth(self, frame: Frame) -> bool:
        return self._decide(bool, "a branch on it")

    def unary_op(self, frame: Frame, op: Any) -> Variable | None:
        if op is operator.not_:
            return None  # `operators.unary` answers it by truth, which asks the ShapeEnv
        return frame.output.call("call_function", op, [self], {}, f"operator {op.__name__}")

    def _decide(self, kind: type, what: str) -> Any:
        try:
            return kind(self.fake)
        except GuardOnDataDependentSymNode as e:
            raise Unsupported(
                f"{what} depends on tensor data ({self.node.name} comes from .item() or a data-dependent size)",
                hint="keep the decision in tensor ops (torch.where), or move it out of the compiled function",
                kind=BreakKind.DATA_DEPENDENT,
            ) from e

    def unpack(self, frame: Frame) -> list[Variable]:
        raise Unsupported(f"iteration over {self.describe()}")

    def getattr(self, frame: Frame, name: str) -> Variable:
        kind = self.python_type()
        if not name.startswith("_") and hasattr(kind, name):
            # `m.is_integer()`, `n.bit_length()`, `m.as_integer_ratio()`: the public methods of
            # int and float are pure; asked of the value, which is specialised (guarded)
            return frame.wrap(self.as_constant(), None).getattr(frame, name)
        if not hasattr(kind, name):  # `hasattr(n, "__torch_function__")` answers False, as of any int
            raise Unsupported(f"{self.describe()} has no attribute {name!r}", kind=BreakKind.MISSING_ATTRIBUTE)
        raise Unsupported(f"attribute {name!r} of {self.describe()}")


def is_number(var: Variable, kind: type) -> bool:
    """An int (`kind` int) or a float (`kind` float), constant or symbolic: exactly that type, so
    that a symbolic result has the type the real one has (bools excluded: max(True, 1) answers
    True, not 1)."""
    if isinstance(var, SymNodeVariable):
        return var.python_type() is kind
    return var.is_constant() and type(var.as_constant()) is kind


def index_value(key: Variable, indexed: str) -> Any:
    """What `seq[key]` indexes `seq` (described by `indexed`) with: a constant; a symbolic int,
    specialised (guarded to this value) as eager reads it; a 0-d integer tensor whose value is
    known while tracing (`literal_index`). Anything else is Unsupported."""
    if key.is_constant() or isinstance(key, SymNodeVariable):
        return key.as_constant()
    if isinstance(key, GraphValueVariable) and (known := key.literal_index()) is not None:
        return known
    raise Unsupported(f"indexing {indexed} with {key.describe()}")
