"""Operations whose result dtype the default dtype decides, recorded so that they state it.

A trace that switches the default dtype (`torch.set_default_dtype`, `torch_flags`) records the
setter as a node, which the plain graph runs where the code ran it. A backend that retraces the
graph (AOTAutograd, `export(aten_graph=True)`) runs the setter while it retraces but keeps only
ATen operations, and those read the default dtype again when the compiled graph runs: the one at
the graph's entry (guarded), not the switched one, so `torch.ones(2)` would make float32 where
eager makes float64, and so would `int_tensor * 2.5`. So an operation traced while the default
differs from the graph's entry's, whose fake result has another dtype when run again under the
entry's default, is recorded in a form whose dtype no default changes:

- with `dtype=` the dtype it made (factories: `torch.ones`, `torch.full`, `torch.arange`, ...);
- with its Python float and complex numbers as 0-dim tensors of the default's dtype (`x * 2.5`
  as `x * torch.tensor(2.5, dtype=torch.float64)`): type promotion ranks such a tensor as it ranks
  the number, and the kernel reads the number in that dtype anyway. Only for float32 and float64
  defaults: under float16 a kernel keeps the number in float32, which a half tensor would round.

Any other (`int_tensor.sqrt()`, a number the op only takes as a Python scalar) is a graph break,
and runs eagerly in the switched default. `torch.tensor` of constant data needs neither: a
retracing backend makes it a constant while it retraces, after the setter ran.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.utils._pytree as pytree

from .. import torch_flags
from ..errors import Unsupported
from ..variables.constants import constant

if TYPE_CHECKING:
    from ..variables.base import Variable

# the default dtypes whose numbers a 0-dim tensor holds exactly as the kernel reads them
_EXACT_SCALAR_DEFAULTS = (torch.float32, torch.float64)

# the operation's fake result for other arguments, leaving no trace of the run
FakeRun = Callable[[list["Variable"], dict[str, "Variable"]], Any]


def pinned_arguments(
    entry: torch.dtype,
    target: Any,
    args: list[Variable],
    kwargs: dict[str, Variable],
    fake: Any,
    run: FakeRun,
    make_scalar: Callable[[complex | float, torch.dtype], Variable],
) -> tuple[list[Variable], dict[str, Variable]] | None:
    """The arguments that state the dtype of `fake` (the result of the operation traced under the
    current default dtype), for an operation whose result the default decides; None where it does
    not (or the default is the graph's `entry` one). `make_scalar` records a 0-dim tensor."""
    now = torch.get_default_dtype()
    if now == entry or target is torch.tensor and _constant(args, kwargs):
        return None
    taken = {id(getattr(v, "fake", None)) for v in [*args, *kwargs.values()]}
    made = [t for t in _tensors(fake) if id(t) not in taken]  # not an in-place op's own argument
    if not any(t.dtype in (now, now.to_complex()) for t in made):
        return None
    if _same_dtypes(run, entry, args, kwargs, fake):
        return None
    if "dtype" not in kwargs and isinstance(fake, torch.Tensor):
        stated = {**kwargs, "dtype": constant(fake.dtype)}
        if _same_dtypes(run, entry, args, stated, fake):
            return args, stated
    if now in _EXACT_SCALAR_DEFAULTS and any(_is_number(v) for v in [*args, *kwargs.values()]):

        def held(var: Variable) -> Variable:
            if not _is_number(var):
                return var
            value = var.as_constant()
            return make_scalar(value, now.to_complex() if isinstance(value, complex) else now)

        held_args, held_kwargs = [held(a) for a in args], {k: held(v) for k, v in kwargs.items()}
        if _same_dtypes(run, entry, held_args, held_kwargs, fake):
            return held_args, held_kwargs
    raise Unsupported(
        f"{getattr(target, '__name__', target)}() makes a dtype that the default dtype decides "
        f"({now}, switched inside the graph), which a backend retracing the graph would not keep",
        hint="give the operation its dtype, or switch the default dtype outside the compiled function",
    )


def _constant(args: list[Variable], kwargs: dict[str, Variable]) -> bool:
    return all(v.is_constant() for v in [*args, *kwargs.values()])


def _is_number(var: Variable) -> bool:
    return var.is_constant() and type(var.as_constant()) in (float, complex)


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [leaf for leaf in pytree.tree_leaves(tree) if isinstance(leaf, torch.Tensor)]


def _same_dtypes(
    run: FakeRun, entry: torch.dtype, args: list[Variable], kwargs: dict[str, Variable], fake: Any
) -> bool:
    """Whether the operation, run again under the `entry` default, makes the dtypes of `fake`."""
    previous = torch.get_default_dtype()
    torch_flags.DEFAULT_DTYPE.write(entry)
    try:
        again = run(args, kwargs)
    except Exception:  # noqa: BLE001 - a form the operation does not take
        return False
    finally:
        torch_flags.DEFAULT_DTYPE.write(previous)
    return [t.dtype for t in _tensors(again)] == [t.dtype for t in _tensors(fake)]
