"""Old and new value of a failed guard, for the `recompiles` log, the trace and the report.

A recompile reason is the failing check's text (the guarded, old value) followed by
` (got <new value>)` when the check reads one value (guards/guard_set.py writes it); global-state
and shape-relation checks carry no value.
"""

from __future__ import annotations

from dataclasses import dataclass

_GOT = " (got "


@dataclass
class GuardFailure:
    """`check`: the failed check (old value); `new_value`: what the call passed, if known."""

    check: str
    new_value: str | None

    @classmethod
    def parse(cls, reason: str) -> GuardFailure:
        check, got, rest = reason.rpartition(_GOT)
        if not got or not rest.endswith(")"):
            return cls(reason, None)
        return cls(check, rest[:-1])
