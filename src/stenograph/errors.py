"""Exceptions raised by stenograph.

Every error stenograph raises on purpose derives from `StenographError`, so users can catch one
class. `Unsupported` is raised while tracing when the interpreter meets something it cannot put in
a graph; outside `fullgraph=True` it never reaches the user (the frame runs eagerly instead).
"""

from __future__ import annotations

import enum
import types

from torch.fx.experimental.symbolic_shapes import ConstraintViolationError


class StenographError(RuntimeError):
    """Base class of every error stenograph raises on purpose: a RuntimeError, as torch.compile's
    errors are (code catching RuntimeError around a compiled call sees them)."""


class BreakKind(enum.Enum):
    """What a graph break met, as code branches on it and users filter by it (`Unsupported.kind`,
    `events.GraphBreak.kind`, `explain()`'s `BreakReason.kind`); the reason text is for people."""

    UNSUPPORTED = "unsupported"  # anything not named below
    UNTRACED_CALL = "untraced call"  # print, a stenograph.disable'd function, an untraced library
    DATA_DEPENDENT = "data-dependent"  # a Python value or decision from tensor data (.item(), `if t`)
    MISSING_ATTRIBUTE = "missing attribute"  # the object lacks it: hasattr() is False, getattr() defaults
    GENERATOR = "generator"  # a generator or coroutine that cannot be traced: it runs eagerly
    # an eager call differentiating with create_graph=True: the graph before the break runs as
    # captured, since a backend's backward may not be differentiable again
    TWICE_DIFFERENTIABLE = "twice differentiable"
    EXPLICIT = "explicit"  # stenograph.graph_break()


class Unsupported(StenographError):
    """Tracing met something it cannot capture.

    `break_index` (internal) is the index of the compiled frame's instruction that was running,
    where a graph break can be placed; inlined calls report their call site.

    `reason` is the short cause ("call to print"), `location` is "file:line" in the user's code,
    `source_line` the text of that line and `hint` what the user can do about it. `kind` says
    what was met, for code (a `BreakKind`; the reason is for people).
    """

    def __init__(
        self,
        reason: str,
        *,
        location: str = "",
        source_line: str = "",
        hint: str = "",
        user_stack: list | None = None,
        instruction: str = "",
        kind: BreakKind = BreakKind.UNSUPPORTED,
    ) -> None:
        self.reason = reason
        self.kind = kind
        self.instruction = instruction
        self.break_index: int | None = None
        # (internal) the generator whose body raised it: that generator is then run for real
        self.generator_code = None
        # (internal) the call at the break runs as plain Python, not compiled as a frame of its
        # own: what the callee meets must run eagerly as a whole (an optimizer step whose checks
        # torch skips under a compiler), where a break inside it would only move further in
        self.eager_callee = False
        # (internal) the break sits inside a loop of the frame, which is then skipped: it runs
        # eagerly with its callees compiled, a graph break as torch.compile takes it (no warning)
        self.in_loop = False
        # (internal) a loop around the break is no reason to skip the frame: the instruction is
        # expected to raise (an exception the frame does not catch, an operation failing on fake
        # tensors), so no pass resumes after it, or its call is compiled as a frame of its own
        # (past the inline depth), which skipping would give up on
        self.breaks_inside_loops = False
        # (internal) no break can be placed: the frame runs eagerly as a whole (`skip_frame()`)
        self.whole_frame = False
        # (internal) the frame's code after the break runs as plain Python, no resume function
        # compiled (`step_unsupported()`)
        self.rest_eager = False
        # whether the `error_on_graph_break` setting where it was raised makes it an error (None:
        # raised outside a traced instruction; the setting of the compile then decides)
        self.error_on_break: bool | None = None
        # (internal) the traced frames it passed through, innermost first: each frame's code, the
        # index of its running instruction and whether its caller can be resumed after it
        # (`Frame.resumable`), for a nested graph break (`config.nested_graph_breaks`)
        self.frame_path: list[tuple[types.CodeType, int, bool]] = []
        self.location = location
        self.source_line = source_line
        self.hint = hint
        self.user_stack = user_stack or []
        super().__init__(reason)

    def __str__(self) -> str:
        parts = [self.reason]
        if self.location:
            parts.append(f"  at {self.location}")
        if self.source_line:
            parts.append(f"    {self.source_line.strip()}")
        # the inlined calls that led there, innermost first (the first entry is `location`)
        for filename, line, name, text in self.user_stack[1:]:
            parts.append(f"  called from {name} at {filename}:{line}")
            if text:
                parts.append(f"    {text.strip()}")
        if self.hint:
            parts.append(f"  hint: {self.hint}")
        return "\n".join(parts)


class FullgraphBreak(Unsupported):
    """A graph break inside a function compiled with `fullgraph=True` that compiled code calls:
    an error whatever the caller's own fullgraph, as torch.compile raises it (the function was
    promised to be one graph)."""


class BackendCompilerFailed(StenographError):
    """The backend raised while compiling a captured graph."""

    def __init__(self, backend_name: str, cause: BaseException) -> None:
        self.backend_name = backend_name
        self.cause = cause
        super().__init__(f"backend {backend_name!r} raised {type(cause).__name__}: {cause}")


class InvalidBackend(StenographError, ValueError):
    """An unknown backend name or a backend object that is not callable."""


class InvalidConfig(StenographError, AttributeError):
    """An unknown config key or a value of the wrong type."""


class NativeGuardsUnavailable(StenographError, RuntimeError):
    """`config.native_guards` is True but the native guard checks cannot be built or loaded here.

    Raised to the caller (not turned into an eager fallback): the setting is the user's.
    """


class RecompileError(StenographError, RuntimeError):
    """A compiled function would compile under `set_stance("fail_on_recompile")`, or would
    compile again while `config.error_on_recompile` is set.

    Raised to the caller, naming the function and why no compiled entry accepted the call.
    """


class FailOnRecompileLimitHit(StenographError, RuntimeError):
    """A function reached `config.recompile_limit` while `config.fail_on_recompile_limit_hit`
    is set (torch's switch of that name: a hard error instead of running eagerly from then on)."""


class NoFramesCompiled(StenographError, RuntimeError):
    """A `fullgraph=True` call compiled nothing: its frame was skipped (`config.disable`, a
    TorchDispatchMode that must see every operator) and no compiled frame ran inside it. The
    message lists each frame skipped and why, in torch's words."""


class NestedTrace(StenographError, RuntimeError):
    """`torch.fx.symbolic_trace` called a compiled function (`config.error_on_nested_fx_trace`):
    FX would record the compiled code's calls, not the function's operations."""


class UserError(StenographError, RuntimeError):
    """Valid Python that stenograph can only compile or export if the user changes it (what
    torch.compile raises `torch._dynamo.exc.UserError` for): the message says what to change."""


class TorchRuntimeError(Unsupported, RuntimeError):
    """A tensor operation failed on the trace's fake tensors, so it would fail when run (what
    torch.compile raises `torch._dynamo.exc.TorchRuntimeError` for: `float()` of a tensor of two
    elements, mismatched shapes). An `Unsupported` too: outside `fullgraph=True` the operation
    runs eagerly at a graph break, and raises there as it would without stenograph."""


class ForbiddenCall(StenographError, AssertionError):
    """Compiled code calls a callable marked `forbid_in_graph` (torch's mark too, which
    `set_stance` carries): raised to the caller, an `AssertionError` as torch.compile's, never a
    graph break, whatever `config.suppress_errors` says (the mark is the user's assertion)."""


class SideEffectsNotReplayed(StenographError, RuntimeError):
    """The trace changed outside objects while `config.replay_side_effects` is off and
    `config.side_effect_replay_policy` is "error": raised to the caller (torch.compile's
    `RuntimeError` and text), whatever `config.suppress_errors` says."""


class InternalError(StenographError, RuntimeError):
    """stenograph itself failed while compiling (a bug to report; torch's equivalent is
    `torch._dynamo.exc.InternalTorchDynamoError`). With `config.suppress_errors` the frame runs
    eagerly instead."""


class ConstraintViolation(UserError, ConstraintViolationError, ValueError):
    """A tensor's size lies outside the range `mark_dynamic(t, dim, min=, max=)` declared for it,
    or the code specialises a dimension marked dynamic.

    Raised to the caller (not turned into an eager fallback): the declaration is the user's. Also
    a `torch.fx.experimental.symbolic_shapes.ConstraintViolationError`, the class programs written
    for torch.compile catch.
    """


class TraceAgain(StenographError):
    """(internal) The trace changed the program's real state in a way the graph so far did not
    see (a lazy module materialised its parameters, as its first eager call would): trace the
    frame again from its start, which now sees the new state."""
