"""Profiler blocks in compiled code, traced while no profiler records: `with
torch.profiler.record_function(name):` and `with torch.profiler.profile():` (or
`torch.autograd.profiler.profile()`).

A range only shows in a profiler's trace; with none recording, entering and leaving it has no
effect a program can see, so the block is traced as if the `with` were absent (torch.optim's
`step` runs inside one). Whether a profiler records is guarded: starting one recompiles, and the
range is then made and entered eagerly at a graph break, so it appears in the trace as in eager.
(torch.compile drops such ranges whether or not a profiler records.)

A profiler opened inside the compiled function is traced away too, as torch.compile does: its
block adds nothing to the graph, so a graph break inside it leaves one graph on each side. Its
options must only choose what it records (a callback, a schedule or an observer would be skipped
with it: the call then runs eagerly at a graph break, and the block with it). What it would have
recorded does not exist, so reading anything of the profiler object (`p.events()`, returning
it) runs the frame eagerly instead. Inside its block, `torch.autograd._profiler_enabled()`
answers True as in eager, also in the resume function of a graph break inside the block, which
gets `resumed_profile_exit` as the block's `__exit__`. Code run eagerly at such a break runs with
no profiler (as under torch.compile); a profiler started outside the compiled function records
the compiled graphs' kernels as usual.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import torch

from ..errors import Unsupported
from .base import Variable
from .constants import constant

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

_profiler_enabled = torch._C._autograd._profiler_enabled

# the options of each profiler class that only choose what it records (`enabled=False` makes the
# block do nothing at all); other options run code of their own or warn when the profiler is made
_RECORDING_OPTIONS = {
    torch.profiler.profile: frozenset(
        {"activities", "record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules", "acc_events"}
    ),
    torch.autograd.profiler.profile: frozenset(
        {"enabled", "record_shapes", "profile_memory", "with_stack", "with_flops", "with_modules", "acc_events"}
    ),
}


def is_record_function_class(value: Any) -> bool:
    return value is torch.autograd.profiler.record_function


def is_profile_class(value: Any) -> bool:
    return value in _RECORDING_OPTIONS


def _refuse_while_recording(frame: Frame, what: str) -> None:
    """A profiler records: the block is made and entered eagerly. Otherwise that is guarded."""
    if _profiler_enabled():
        raise Unsupported(f"{what} while a profiler records: it is made and entered eagerly")
    frame.output.guards.state_query(_profiler_enabled, "torch._C._autograd._profiler_enabled", False)


def make_record_function(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`record_function(name, args=None)` called while tracing."""
    _refuse_while_recording(frame, "record_function")
    plain = [a.as_constant() for a in args]
    plain_kwargs = {k: v.as_constant() for k, v in kwargs.items()}
    return RecordFunctionVariable(plain, plain_kwargs)


def make_profile(frame: Frame, cls: type, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`torch.profiler.profile(...)` / `torch.autograd.profiler.profile(...)` called while tracing."""
    name = f"{cls.__module__}.profile()"
    options = dict(zip(("enabled",), args)) if cls is torch.autograd.profiler.profile else {}
    if len(args) > len(options):
        raise Unsupported(f"{name} with positional arguments")
    options |= kwargs
    for option, var in options.items():
        if option not in _RECORDING_OPTIONS[cls]:
            raise Unsupported(f"{name} with {option}=: the profiler is made and entered eagerly")
        if not _harmless_option(frame, option, var):
            raise Unsupported(f"{name} with {option}={var.describe()}: the profiler is made and entered eagerly")
    _refuse_while_recording(frame, name)
    enabled = options.get("enabled")
    return ProfileVariable(cls, enabled is None or bool(enabled.as_constant()))


def _harmless_option(frame: Frame, option: str, var: Variable) -> bool:
    """A flag given as a bool, or `activities` naming activities this build supports (eager fails
    on none, and warns on others)."""
    if option != "activities":
        return var.is_constant() and isinstance(var.as_constant(), bool)
    try:
        activities = var.unpack(frame)
    except Unsupported:
        return False
    supported = torch.profiler.supported_activities()
    kinds = [a.value_object for a in activities]
    return bool(kinds) and all(isinstance(k, torch.profiler.ProfilerActivity) and k in supported for k in kinds)


def inside_profile(frame: Frame) -> bool:
    """Whether a profiler block traced away is open where `frame` runs (the `__exit__` of its
    `with` on the stack of this frame or of a caller): eager would answer that a profiler records."""
    current: Frame | None = frame
    while current is not None:
        if any(isinstance(v, ProfileExitVariable) and v.open for v in current.stack):
            return True
        current = current.parent
    return False


def resumed_profile_exit(*exc_info: object) -> None:
    """The `__exit__` of a profiler block traced away, which a graph break inside the block hands
    to the resume function: leaving the block does nothing, and the resume function's trace knows
    from it that the block is still open."""


def _escape(what: str) -> Unsupported:
    """The profiler object itself is needed: the frame runs eagerly, the profiler with it."""
    refusal = Unsupported(
        f"{what}: a profiler opened in the compiled function is traced away, so what it records does not exist",
        hint="torch.compile runs such a frame eagerly too; profile around the compiled function instead",
    )
    refusal.whole_frame = True
    return refusal


class ProfileVariable(Variable):
    """A profiler made in the frame and not recording (guarded), traced away: only its `with`
    block is modelled. `records`: it would record when entered (not `enabled=False`)."""

    def __init__(self, cls: type, records: bool) -> None:
        self.cls = cls
        self.records = records

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"{self.cls.__module__}.profile()"

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name == "__enter__":
            return _ProfileEnter(self)
        if name == "__exit__":
            return ProfileExitVariable(self)
        raise _escape(f"reading {name!r} of {self.describe()}")

    def reconstruct(self, rebuild: Any) -> str:
        raise _escape(f"{self.describe()} used outside the compiled graph")


class _ProfileEnter(Variable):
    """`__enter__` of a traced-away profiler, called by its `with` statement (whose `__exit__` is
    then on the stack): it returns the profiler (None where not enabled)."""

    def __init__(self, context: ProfileVariable) -> None:
        self.context = context

    def describe(self) -> str:
        return f"{self.context.describe()}.__enter__"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        exits = [v for v in frame.stack if isinstance(v, ProfileExitVariable) and v.context is self.context]
        if not exits:
            raise _escape(f"{self.describe()}() called outside a `with` statement")
        if not self.context.records:
            return constant(None)
        if inside_profile(frame):
            raise _escape(f"{self.context.describe()} opened inside another profiler's block")
        exits[-1].open = True
        return self.context


class ProfileExitVariable(Variable):
    """`__exit__` of a traced-away profiler; `open` while its block is (between the `with`'s
    `__enter__` and the call of this). Without a context, the one a resume function got
    (`resumed_profile_exit`): its block is open."""

    def __init__(self, context: ProfileVariable | None) -> None:
        self.context = context
        self.open = context is None

    def describe(self) -> str:
        return f"{self.context.describe() if self.context else 'a resumed profiler block'}.__exit__"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        self.open = False
        recorded = self.context is not None and self.context.records
        # what eager's `__exit__` returns: False from an enabled autograd profiler, else None
        return constant(False if recorded and self.context.cls is torch.autograd.profiler.profile else None)

    def reconstruct(self, rebuild: Any) -> str:
        """At a graph break inside the block: the marker that keeps it open in the resume function,
        or, for a block that records nothing or was left already, a null context's `__exit__`."""
        if self.open:
            return rebuild.writer.bind(resumed_profile_exit, "fn")
        null = rebuild.writer.bind(contextlib.nullcontext, "cls")
        return f"{null}().__exit__"


class RecordFunctionVariable(Variable):
    """A profiler range not yet entered; entering and leaving it are no-ops."""

    def __init__(self, args: list[Any], kwargs: dict[str, Any]) -> None:
        self.args = args
        self.kwargs = kwargs

    def python_type(self) -> type:
        return torch.autograd.profiler.record_function

    def describe(self) -> str:
        return f"record_function{tuple(self.args)}"

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name in ("__enter__", "__exit__"):
            return _RangeMethod(self, name)
        raise Unsupported(f"attribute {name!r} of {self.describe()}")

    def reconstruct(self, rebuild: Any) -> str:
        """The object as `with ... as r` binds it, live at a graph break: an equal range, not entered."""
        cls = rebuild.writer.bind(torch.autograd.profiler.record_function, "cls")
        arguments = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{cls}({', '.join(arguments)})"


class _RangeMethod(Variable):
    """`__enter__` (returns the range) or `__exit__` (does not suppress) of a range."""

    def __init__(self, context: RecordFunctionVariable, name: str) -> None:
        self.context = context
        self.name = name

    def describe(self) -> str:
        return f"{self.context.describe()}.{self.name}"

    def call(self, frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return self.context if self.name == "__enter__" else constant(False)

    def reconstruct(self, rebuild: Any) -> str:
        """The `__exit__` on the stack at a graph break inside the block: the range was never
        entered, so the eager code leaves a null context."""
        null = rebuild.writer.bind(contextlib.nullcontext, "cls")
        return f"{null}().{self.name}"
