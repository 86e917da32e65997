"""Fake tensors and the shape environment (DESIGN decision 6).

One `FakeTensorMode` with a `ShapeEnv` per traced frame. An input dimension chosen to be dynamic
gets a symbol (`s0`) instead of its size; ops on fakes then compute symbolic sizes, and every
decision taken on a symbol (`if x.shape[0] > 1`, broadcasting two sizes together) is recorded by
the ShapeEnv as a guard. Static dimensions stay plain ints and are checked by the tensor guards.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.utils._python_dispatch as python_dispatch
from torch._guards import GuardSource
from torch._guards import Source as TorchSource
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
)
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    GuardOnDataDependentSymNode,
    ShapeEnv,
    StatelessSymbolicContext,
    SubclassSymbolicContext,
)

from .. import config
from ..guards.sources import AttrSource, Source

DATA_DEPENDENT_ERRORS = (DataDependentOutputException, DynamicOutputShapeException, GuardOnDataDependentSymNode)


@dataclasses.dataclass(frozen=True)
class ShapeSource(TorchSource):
    """Adapts one of our sources to the `torch._guards.Source` interface the ShapeEnv uses to
    name symbols and to report which input a guard is about."""

    source: Source

    @property
    def _name_template(self) -> str:
        return self.source.name()

    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL

    def reconstruct(self, codegen: Any) -> None:
        raise NotImplementedError("stenograph sources are rendered by stenograph")


def _share_fake_mode_rules() -> None:
    """torch keys the rules of higher-order operators for a mode by its exact class: give
    `TracingFakeMode` FakeTensorMode's (operators register theirs as their modules load, so this
    runs for every new mode)."""
    for operator in list(torch._ops._higher_order_ops.values()):
        table = operator.python_key_table
        if FakeTensorMode in table and TracingFakeMode not in table:
            table[TracingFakeMode] = table[FakeTensorMode]


def new_fake_mode() -> FakeTensorMode:
    # ops whose output size depends on tensor data (nonzero, x[mask]) raise
    # DynamicOutputShapeException unless config.capture_dynamic_output_shape_ops: a graph break
    shape_env = ShapeEnv(allow_dynamic_output_shape_ops=config.capture_dynamic_output_shape_ops)
    _share_fake_mode_rules()
    return TracingFakeMode(allow_non_fake_inputs=False, shape_env=shape_env)


_FAKE_KEY = torch._C._TorchDispatchModeKey.FAKE
# the flags torch's TorchDispatchMode keeps in its module while a mode is entered
_MODE_FLAGS = tuple(
    name
    for name in (
        "_is_in_torch_dispatch_mode",
        "_is_in_non_infra_torch_dispatch_mode",
        "_is_in_any_mode_without_ignore_compile_internals",
    )
    if hasattr(python_dispatch, name)
)
_FLAG_STACKS = (
    "old_dispatch_mode_flags",
    "old_non_infra_dispatch_mode_flags",
    "old_without_ignore_compile_internals_dispatch_mode_flags",
)


class TracingFakeMode(FakeTensorMode):
    """The fake mode of one trace, entered and left whole.

    An interrupt (Ctrl-C, an exception a signal handler raises) can land between any two
    lines of torch's `FakeTensorMode.__enter__`/`__exit__`, which run for every op traced
    (torch's own dispatch enters the mode again). Left half-exited, the mode stays set in the
    thread's dispatch state, and the C++ dispatcher that called into Python then fails to
    restore the mode it set aside: it aborts the process ("trying to set the current
    FakeTensorMode, but one already exists"). So each entry notes the state it starts from, and
    an exception escaping torch's code puts that state back before it propagates."""

    # an interrupt raised inside torch's dispatch, which C++ may turn into another error (a
    # binary operator's TypeError): `raise_interrupt` raises it again where the trace sees one
    interrupt: BaseException | None = None

    def __enter__(self) -> TracingFakeMode:
        state = _dispatch_state(self)
        try:
            super().__enter__()
            self._entered_from.append(state)
        except BaseException as e:
            self._interrupted(state, e)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        state = self._entered_from.pop()
        try:
            super().__exit__(*exc)
        except BaseException as e:
            self._interrupted(state, e)
            raise

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        # torch's dispatcher sets this mode aside to call here and puts it back when the call
        # returns or raises; a decomposition runs under `with self:`, and an interrupt that
        # leaves that entered (one landing on a call inside `__enter__`) makes the put-back
        # fail inside a C++ destructor, which aborts the process
        state = _dispatch_state(self)
        try:
            return super().__torch_dispatch__(func, types, args, {} if kwargs is None else kwargs)
        except BaseException as e:
            self._interrupted(state, e)
            raise

    def _interrupted(self, state: tuple, error: BaseException) -> None:
        _restore_dispatch_state(self, state)
        if not isinstance(error, Exception):
            self.interrupt = error

    def raise_interrupt(self) -> None:
        """Raise the interrupt that landed in the mode's entry or exit, if one did."""
        interrupt, self.interrupt = self.interrupt, None
        if interrupt is not None:
            raise interrupt

    @property
    def _entered_from(self) -> list[tuple]:
        found = self.__dict__.get("_stenograph_entered_from")
        if found is None:
            found = self.__dict__["_stenograph_entered_from"] = []
        return found


def _dispatch_state(mode: FakeTensorMode) -> tuple:
    """What entering `mode` changes: its enter stack and flag stacks' depths, the thread's fake
    mode and lifting flag, torch's module-level mode flags."""
    stacks = tuple(len(getattr(mode, name, ())) for name in _FLAG_STACKS)
    flags = tuple(getattr(python_dispatch, name) for name in _MODE_FLAGS)
    fake = torch._C._get_dispatch_mode(_FAKE_KEY)
    return (len(mode.enter_stack), stacks, fake, torch._C._only_lift_cpu_tensors(), flags)


def _restore_dispatch_state(mode: FakeTensorMode, state: tuple) -> None:
    depth, stacks, fake, lift_cpu, flags = state
    # the thread's dispatch state first, before anything can allocate: a collection now may
    # free a frame whose dispatch guard puts a mode back, which must find the slot empty
    if torch._C._get_dispatch_mode(_FAKE_KEY) is not fake:
        torch._C._unset_dispatch_mode(_FAKE_KEY)
        if fake is not None:
            torch._C._set_dispatch_mode(fake)
    torch._C._set_only_lift_cpu_tensors(lift_cpu)
    del mode.enter_stack[depth:]
    for name, length in zip(_FLAG_STACKS, stacks):
        stack = getattr(mode, name, ())  # a deque
        while len(stack) > length:
            stack.pop()
    for name, value in zip(_MODE_FLAGS, flags):
        setattr(python_dispatch, name, value)
    if "_is_in_any_mode_without_ignore_compile_internals" in _MODE_FLAGS:
        python_dispatch.set_is_in_mode_without_ignore_compile_internals(flags[-1])


def fakeify(
    mode: FakeTensorMode,
    tensor: torch.Tensor,
    source: Source,
    dynamic_dims: list[DimDynamic] | None = None,
    dynamic_strides: list[bool] | None = None,
) -> torch.Tensor:
    """The fake twin of a real input tensor; `dynamic_dims[i]` says how dimension i enters
    (static, a symbol, an unbacked symbol), `dynamic_strides[i]` makes its stride symbolic
    (others follow from the sizes)."""
    dims = dynamic_dims or [DimDynamic.STATIC] * tensor.dim()
    if all(d is DimDynamic.STATIC for d in dims) and not any(dynamic_strides or ()):
        return mode.from_tensor(tensor, static_shapes=True)
    context = _context(tensor, source, dims, dynamic_strides)
    return mode.from_tensor(tensor, source=ShapeSource(source), symbolic_context=context)


def _context(
    tensor: torch.Tensor, source: Source, sizes: list[DimDynamic], dynamic_strides: list[bool] | None = None
) -> StatelessSymbolicContext:
    """Which sizes of `tensor` are symbolic. A traceable wrapper subclass (`__tensor_flatten__`)
    takes torch's subclass context, naming its inner tensors' own, all of whose sizes are symbolic
    (their shapes need not follow the outer one's)."""
    if not python_dispatch.is_traceable_wrapper_subclass(tensor):
        if not any(dynamic_strides or ()):
            return StatelessSymbolicContext(dynamic_sizes=sizes)
        strides = [DimDynamic.DYNAMIC if d else DimDynamic.INFER_STRIDE for d in dynamic_strides or ()]
        return StatelessSymbolicContext(dynamic_sizes=sizes, dynamic_strides=strides)
    inner = {}
    for name in tensor.__tensor_flatten__()[0]:
        part = getattr(tensor, name)
        inner[name] = _context(part, AttrSource(source, name), [DimDynamic.DYNAMIC] * part.dim())
    return SubclassSymbolicContext(
        dynamic_sizes=sizes,
        tensor_source=ShapeSource(source),
        shape_env_to_source_to_symbol_cache={},
        inner_contexts=inner,
    )


def symbolic_number(
    mode: FakeTensorMode, value: int | float, source: Source, *, unbacked: bool = False
) -> torch.SymInt | torch.SymFloat:
    """A symbolic Python int or float input (an argument that changed between calls); `unbacked`:
    an int whose value the trace may not read (its decisions are data-dependent, nothing guards it
    but its being a size)."""
    shape_env = mode.shape_env
    assert shape_env is not None
    wrapped = ShapeSource(source)
    if type(value) is int:
        kind = DimDynamic.UNBACKED if unbacked else DimDynamic.DYNAMIC
        return shape_env.create_unspecified_symint_and_symbol(value, wrapped, kind)
    symbol = shape_env.create_unspecified_symbol(value, wrapped, DimDynamic.DYNAMIC)
    return shape_env.create_symfloatnode(symbol, hint=value, source=wrapped)


def is_symbolic(value: Any) -> bool:
    return isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool))


def specialised_size(size: int | torch.SymInt) -> int | None:
    """A size as the int it is now, its value guarded by the ShapeEnv where it is symbolic; None
    for a data-dependent (unbacked) size, which has no value to guard."""
    try:
        return int(size)
    except GuardOnDataDependentSymNode:
        return None


def input_symbols(fake: Any) -> set:
    """The free symbols of an input's fake value: a tensor's sizes, strides and storage offset, a
    symbolic number's own."""
    if isinstance(fake, torch.Tensor):
        values: tuple = (*fake.shape, *fake.stride(), fake.storage_offset())
    else:
        values = (fake,)
    return set().union(*(v.node.expr.free_symbols for v in values if is_symbolic(v)))


def has_symbols(tensor: torch.Tensor) -> bool:
    return any(is_symbolic(s) for s in tensor.shape) or any(is_symbolic(s) for s in tensor.stride())
