"""Typed contracts between the compiler and what reads its results (issue 12, item 5).

Graph breaks carry a `BreakKind` (code and users branch on it, the reason is for people), a frame
that runs eagerly publishes an `EagerCause`, a recompile carries the failed guard as a
`GuardFailure` (check text and new value), resume slots are typed values, and guard templates are
written only inside `GuardSet`.
"""

from __future__ import annotations

import pathlib
import warnings

import pytest
import torch

import stenograph
from stenograph import BreakKind, events
from stenograph.bytecode.resume_code import (
    ITERATOR_FROM_TUPLE,
    NULL_STACK_ENTRY,
    VALUE_STACK_ENTRY,
    LastiStackEntry,
    takes_argument,
)
from stenograph.events import EagerCause
from stenograph.guards.failures import GuardFailure
from stenograph.report.model import failure_cause, failure_type


class _Events:
    """Collects the published events of one kind while active."""

    def __init__(self, kind: type) -> None:
        self.kind = kind
        self.seen: list = []

    def __call__(self, event: events.CompileEvent) -> None:
        if isinstance(event, self.kind):
            self.seen.append(event)

    def __enter__(self) -> list:
        events.subscribe(self)
        return self.seen

    def __exit__(self, *exc: object) -> None:
        events.unsubscribe(self)


def _break_kinds(fn, *args) -> list[BreakKind]:
    return [reason.kind for reason in stenograph.explain(fn)(*args).break_reasons]


# -- break kinds --------------------------------------------------------------------------------


def _prints(x):
    y = x.sin()
    print("value", y.sum())
    return y + 1


def _item_branch(x):
    if x.sum().item() > 0:
        return x + 1
    return x - 1


def _truth(x):
    if x.sum():
        return x + 1
    return x - 1


def _explicit(x):
    y = x + 1
    stenograph.graph_break()
    return y * 2


def _printing_generator(x):
    for i in range(2):
        print(i)
        yield x * i


def _uses_generator(x):
    y = x.cos()
    total = x
    for item in _printing_generator(y):
        total = total + item
    return total


def test_print_is_an_untraced_call(capsys):
    assert _break_kinds(_prints, torch.ones(3)) == [BreakKind.UNTRACED_CALL]


def test_item_and_tensor_truth_are_data_dependent():
    assert _break_kinds(_item_branch, torch.ones(3)) == [BreakKind.DATA_DEPENDENT]
    assert _break_kinds(_truth, torch.ones(3)) == [BreakKind.DATA_DEPENDENT]


def test_item_with_captured_scalars_breaks_data_dependent_at_the_decision():
    with stenograph.config.patch(capture_scalar_outputs=True):
        assert _break_kinds(_item_branch, torch.ones(3)) == [BreakKind.DATA_DEPENDENT]


def test_explicit_graph_break():
    assert _break_kinds(_explicit, torch.ones(3)) == [BreakKind.EXPLICIT]


async def _async_numbers():
    yield 1


def _makes_async_generator(x):
    y = x + 1
    numbers = _async_numbers()
    return y * 2, type(numbers).__name__


def test_generator_with_a_break_in_its_body_breaks_at_it(capsys):
    """The generator is unstarted when its body first breaks: the break is the print in its
    body, and the loop then steps the rebuilt generator eagerly."""
    kinds = _break_kinds(_uses_generator, torch.ones(3))
    assert kinds[0] is BreakKind.UNTRACED_CALL, kinds


def test_an_async_generator_call_is_a_generator_break():
    assert _break_kinds(_makes_async_generator, torch.ones(3)) == [BreakKind.GENERATOR]


def test_graph_break_event_carries_the_kind(capsys):
    with _Events(events.GraphBreak) as seen:
        stenograph.compile(_prints, backend="eager")(torch.ones(3))
    assert [(e.kind, e.reason) for e in seen] == [(BreakKind.UNTRACED_CALL, "call to print")]


def test_unsupported_defaults_to_the_general_kind():
    assert stenograph.Unsupported("something").kind is BreakKind.UNSUPPORTED
    assert stenograph.Unsupported("x", kind=BreakKind.GENERATOR).kind is BreakKind.GENERATOR


class _Plain:
    def __init__(self) -> None:
        self.present = 3


def test_missing_attributes_answer_hasattr_and_getattr_defaults(cnt):
    obj = _Plain()

    def fn(x):
        a = hasattr(obj, "absent")
        b = getattr(obj, "absent", 5)
        c = hasattr(x, "no_such_tensor_attribute")
        d = getattr(torch, "no_such_torch_member", 7)
        return x + a + b + c + d + obj.present

    compiled = stenograph.compile(fn, backend=cnt)
    assert torch.equal(compiled(torch.ones(2)), fn(torch.ones(2)))
    assert cnt.frame_count == 1
    obj.absent = 100  # the absence was guarded: a new entry sees it
    assert torch.equal(compiled(torch.ones(2)), fn(torch.ones(2)))
    assert cnt.frame_count == 2


def test_another_unsupported_attribute_read_still_breaks():
    def fn(x):
        # Tensor.grad of a computed tensor that requires grad (eager warns): a break, not a missing attribute
        return hasattr(x * 2, "grad")

    with pytest.warns(UserWarning, match="not a leaf"):  # eager's, from the eager read at the break
        assert _break_kinds(fn, torch.ones(2, requires_grad=True)) == [BreakKind.UNSUPPORTED]


# -- why a frame runs eagerly -----------------------------------------------------------------------


def _generator_function(x):
    yield x + 1


def test_a_generator_function_runs_eagerly_as_unsupported():
    with _Events(events.RunsEagerly) as seen, warnings.catch_warnings():
        warnings.simplefilter("ignore", stenograph.StenographWarning)
        list(stenograph.compile(_generator_function, backend="eager")(torch.ones(2)))
    (event,) = seen
    assert event.cause is EagerCause.UNSUPPORTED
    assert event.break_kind is BreakKind.GENERATOR
    assert "is a generator or coroutine function" in event.reason
    assert failure_type(event.cause) == "Unsupported"


def test_the_recompile_limit_is_its_own_cause(capsys):
    def fn(x, mode):
        return x + 1 if mode == "a" else x - 1

    stenograph.set_logs(recompiles=True)
    try:
        compiled = stenograph.compile(fn, backend="eager")
        with (
            _Events(events.RunsEagerly) as seen,
            stenograph.config.patch(recompile_limit=2),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore", stenograph.StenographWarning)
            for mode in "abcd":
                compiled(torch.ones(2), mode)
    finally:
        stenograph.set_logs()
    (event,) = seen
    assert event.cause is EagerCause.RECOMPILE_LIMIT and event.break_kind is None
    assert event.reason == "recompile limit (2) reached"
    assert failure_type(event.cause) == "RecompileLimitExceeded"
    assert failure_cause("RecompileLimitExceeded") is EagerCause.RECOMPILE_LIMIT
    assert "[stenograph.recompiles]" in capsys.readouterr().err.split("runs eagerly from now on")[0].splitlines()[-1]


def test_an_internal_error_is_its_own_cause(monkeypatch):
    from stenograph import entry

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(entry, "compile_frame", broken)

    def fn(x):
        return x + 1

    with (
        _Events(events.RunsEagerly) as seen,
        stenograph.config.patch(suppress_errors=True),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", stenograph.StenographWarning)
        stenograph.compile(fn, backend="eager")(torch.ones(2))
    (event,) = seen
    assert event.cause is EagerCause.INTERNAL_ERROR
    assert event.reason == "internal error RuntimeError: boom"
    assert failure_type(event.cause) == "InternalError"
    assert failure_cause("InternalError") is EagerCause.INTERNAL_ERROR


def test_a_backend_error_is_a_stenograph_error_cause():
    def failing_backend(gm, example_inputs):
        raise ValueError("no")

    def fn(x):
        return x + 1

    with (
        _Events(events.RunsEagerly) as seen,
        stenograph.config.patch(suppress_errors=True),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", stenograph.StenographWarning)
        stenograph.compile(fn, backend=failing_backend)(torch.ones(2))
    (event,) = seen
    assert event.cause is EagerCause.ERROR
    assert event.reason.startswith("BackendCompilerFailed: ")
    assert failure_type(event.cause) == "Unsupported"  # as torch.compile's trace names it


# -- guard failures -------------------------------------------------------------------------------


def _recompile_failures(fn, calls) -> list[GuardFailure]:
    compiled = stenograph.compile(fn, backend="eager")
    with _Events(events.Recompile) as seen:
        for args in calls:
            compiled(*args)
    return [event.failure for event in seen]


def test_a_recompile_carries_the_old_check_and_the_new_value():
    def fn(x, n):
        return x * n

    (failure,) = _recompile_failures(fn, [(torch.ones(2), 3), (torch.ones(2), 4)])
    assert failure == GuardFailure("L['n'] == 3", "4")
    assert failure.reason == "L['n'] == 3 (got 4)"


def test_a_tensor_recompile_names_the_new_metadata():
    def fn(x):
        return x + 1

    with stenograph.config.patch(automatic_dynamic_shapes=False):
        (failure,) = _recompile_failures(fn, [(torch.ones(2),), (torch.ones(2, dtype=torch.float64),)])
    assert failure.check.startswith("L['x']: Tensor torch.float32 cpu size=[2]")
    assert failure.new_value == "Tensor torch.float64 cpu size=[2] stride=[1] requires_grad=False"
    assert failure.mismatch == "tensor 'x' dtype mismatch. expected torch.float32, actual torch.float64"
    assert failure.reason == f"{failure.check} (got {failure.new_value}): {failure.mismatch}"


def test_a_global_state_recompile_has_no_new_value():
    def fn(x):
        return x + 1

    compiled = stenograph.compile(fn, backend="eager")
    compiled(torch.ones(2))
    with _Events(events.Recompile) as seen, torch.no_grad():
        compiled(torch.ones(2))
    (event,) = seen
    assert event.failure == GuardFailure("grad mode is enabled", None)
    assert event.reason == "grad mode is enabled"


def test_recompile_log_and_report_use_the_failure_fields(capsys):
    from stenograph.report import recorder

    def fn(x, n):
        return x * n

    rec = recorder.Recorder(time_calls=False).start()
    stenograph.set_logs(recompiles=True)
    try:
        compiled = stenograph.compile(fn, backend="eager")
        compiled(torch.ones(2), 3)
        compiled(torch.ones(2), 4)
    finally:
        stenograph.set_logs()
        rec.stop()
    text = capsys.readouterr().err
    assert "failed guard (old value): L['n'] == 3" in text
    assert "new value: 4" in text
    records = [c.recompile for f in rec.session.frames for c in f.compiles if c.recompile is not None]
    assert [(r.check, r.new_value) for r in records] == [("L['n'] == 3", "4")]


# -- resume slots and guard templates -------------------------------------------------------------


def test_slot_kinds_are_typed_values():
    assert takes_argument(VALUE_STACK_ENTRY) and takes_argument(ITERATOR_FROM_TUPLE)
    assert not takes_argument(NULL_STACK_ENTRY)
    assert not takes_argument(LastiStackEntry(12))
    assert LastiStackEntry(12) == LastiStackEntry(12)  # part of a resume function's cache key


def test_a_break_in_a_with_block_resumes_through_a_lasti_slot():
    class Ctx:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def fn(x):
        with Ctx():
            y = x + 1
            stenograph.graph_break()
            return y * 2

    assert torch.equal(stenograph.compile(fn, backend="eager")(torch.ones(2)), fn(torch.ones(2)))


def test_guard_templates_are_written_only_in_the_guard_set():
    package = pathlib.Path(stenograph.__file__).parent
    offenders = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.name != "guard_set.py" and "{{v}}" in path.read_text()
    ]
    assert offenders == []


def test_the_guard_set_has_no_public_raw_template_entry():
    from stenograph.guards.guard_set import GuardSet

    assert not hasattr(GuardSet, "add")
