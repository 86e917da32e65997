"""A failed guard, as the guard set reports it: for the `recompiles` log, the trace and the report.

`GuardSet.build_explainer` builds these; `GuardFailure.reason` is the one place that writes the
one-line recompile reason people read (the check, then ` (got <new value>)`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GuardFailure:
    """`check`: the failed check's text (the guarded, old value); `new_value`: what the call
    passed, when the check reads one value (global-state and shape-relation checks carry none)."""

    check: str
    new_value: str | None = None
    # for a tensor check, what differs, in the words of torch.compile's reasons ("tensor 'x' size
    # mismatch at index 0. expected 2, actual 3"), which tools and tests written for it look for
    mismatch: str | None = None

    @property
    def reason(self) -> str:
        """The recompile reason: the check's text, then the new value when there is one."""
        if self.new_value is None:
            return self.check
        text = f"{self.check} (got {self.new_value})"
        return text if self.mismatch is None else f"{text}: {self.mismatch}"
