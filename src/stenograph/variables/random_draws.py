"""Python's `random` module called in a traced frame: each number drawn is a graph input.

`random.random()`, `random.uniform(a, b)`, `random.randint(a, b)` and the module's other
functions that return one number draw from the module's shared generator. In compiled code each
such call becomes an input of the graph that the transformed function draws afresh on every run,
before the graph, in the order the frame made them: nothing else the compiled code runs draws
from that generator in between, so the values are those the eager frame would draw, and a seeded
program gets the same numbers (as torch.compile gives them).

A value enters the graph as a 0-d tensor read with `.item()`, an unbacked number: anything the
trace would decide on it (a branch, a size, a list index) is data-dependent and breaks the graph
there, so no guard ever reads a value that changes on every call. While tracing, example values
come from a copy of the generator's state, so tracing draws nothing. Calls with non-constant
arguments, other generators (`random.Random(seed)` objects), `seed`/`shuffle`/`choice`/`sample`,
draws inside speculated code (an `autograd.Function`'s forward, a `cond` branch: a Python effect
there) and export keep the graph break.
"""

from __future__ import annotations

import random
import types
from typing import TYPE_CHECKING, Any

import torch

from ..errors import Unsupported
from ..guards.sources import FreshCallSource, ItemSource
from ..marks import is_exporting
from .base import Variable
from .functions import HandledFunctionVariable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

# the module-level functions of `random` that return one number (bound methods of its shared
# generator); `getrandbits` is limited to what an int64 holds
_DRAWS = frozenset({
    "random", "uniform", "randint", "randrange", "getrandbits", "gauss", "normalvariate", "lognormvariate",
    "expovariate", "vonmisesvariate", "gammavariate", "betavariate", "paretovariate", "weibullvariate",
    "triangular", "binomialvariate",
})  # fmt: skip
_INT64 = (-(2**63), 2**63 - 1)


def lookup(value: Any) -> Variable | None:
    """The tracker of one of `random`'s number-drawing functions, None for any other value (only
    methods are asked for attributes: a user object's `__getattr__` must not run)."""
    if not isinstance(value, (types.MethodType, types.BuiltinMethodType)):
        return None
    if value.__self__ is random._inst and value.__name__ in _DRAWS:  # type: ignore[attr-defined]
        return RandomDrawVariable(value)
    return None


class RandomDrawVariable(HandledFunctionVariable):
    """`random.<name>` of the module's shared generator."""

    def describe(self) -> str:
        return f"random.{self.fn.__name__}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        name = self.fn.__name__
        if is_exporting():
            raise Unsupported(f"{self.describe()}() in export (a drawn number cannot be an exported graph's input)")
        if not all(a.is_constant() for a in [*args, *kwargs.values()]):
            raise Unsupported(f"{self.describe()}() with arguments that are not constants")
        values = [a.as_constant() for a in args]
        keywords = {k: v.as_constant() for k, v in kwargs.items()}
        output = frame.output
        draws = output.random_draws
        if draws is None:
            draws = output.random_draws = RandomDraws()
        example = draws.example(name, values, keywords)
        if isinstance(example, int) and not _int64_results(name, [*values, *keywords.values()]):
            raise Unsupported(f"{self.describe()}() drawing numbers wider than 64 bits")
        dtype = torch.float64 if isinstance(example, float) else torch.int64
        index = draws.add(name, values, keywords, dtype)
        source = ItemSource(FreshCallSource(draws, "random_draws"), index)
        tensor = output.fresh_tensor_input(torch.tensor(example, dtype=dtype), source)
        output.side_effects.random_drawn()
        return output.call("call_method", "item", [tensor], {}, f"{self.describe()}()")

    def reconstruct(self, rebuild: Any) -> str:
        return rebuild.writer.bind(self.fn, "fn")


def _int64_results(name: str, arguments: list) -> bool:
    """Whether every int the draw can give fits an int64: `randint`, `randrange` and
    `binomialvariate` give numbers between their arguments (and 0), `getrandbits(k)` below 2**k."""
    if name == "getrandbits":
        return arguments[0] <= 63
    return all(_INT64[0] <= a <= _INT64[1] for a in arguments if isinstance(a, int))


class RandomDraws:
    """The draws one trace recorded (name, arguments, keywords, dtype); called by the compiled
    code, it makes them on the shared generator and gives each value as a 0-d tensor."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list, dict, torch.dtype]] = []
        self._copy: random.Random | None = None  # the trace's examples: a copy of the generator

    def example(self, name: str, args: list, kwargs: dict) -> Any:
        """What the next draw will give, taken from a copy of the generator's state as it was at
        the trace's first draw."""
        if self._copy is None:
            self._copy = random.Random()
            self._copy.setstate(random.getstate())
        try:
            return getattr(self._copy, name)(*args, **kwargs)
        except (TypeError, ValueError) as e:
            raise Unsupported(f"random.{name}() with these arguments raises {type(e).__name__}: {e}") from None

    def add(self, name: str, args: list, kwargs: dict, dtype: torch.dtype) -> int:
        self.calls.append((name, args, kwargs, dtype))
        return len(self.calls) - 1

    def __call__(self) -> tuple[torch.Tensor, ...]:
        shared = random._inst  # type: ignore[attr-defined]
        return tuple(torch.tensor(getattr(shared, n)(*a, **k), dtype=d) for n, a, k, d in self.calls)

    def __getstate__(self) -> dict[str, Any]:
        return {"calls": self.calls, "_copy": None}  # a warm-start record keeps what to draw
