"""Keeping stenograph's own frames off the user's recursion limit.

A compiled call path has frames of stenograph's between the user's: the entry wrapper that a graph
break calls a user function through, `Continue.run` and the resume function's dispatcher, a
closure caller, the miss path. Each level of a recursion through compiled code would otherwise
spend two to four of Python's recursion limit where eager spends one, so `RecursionError` came at
a half or a quarter of eager's depth. Instead, each such frame raises the limit by the frames it
adds while its call runs (`lift`) and lowers it again afterwards (`lower`), relative to the value
then current, so a `sys.setrecursionlimit` of the user's inside the call is kept.

Only the paths that nest (a call made by compiled code, a graph break's continuation, the miss
path) do this; the entry wrapper that user code calls first stays as cheap as it was: it costs
one frame per call from eager code, not per level.

The limit is process-wide, so while one thread is deep in compiled recursion, other threads see
a limit raised by up to `MAX_LIFT` frames (CPython has no per-thread limit). Each change is one
atomic read-modify-write of the limit (a chain of C iterators: no thread switch between reading
and writing it), so threads never lose each other's adjustments and the limit returns to its
value once no compiled call is running.

The raise is bounded: on Python 3.11 a frame that stenograph calls with `f(*args)` also uses C
stack, and a limit raised without bound would let infinite recursion overflow it (a crash instead
of `RecursionError`). At most `MAX_LIFT` frames are added in all (one compile's headroom besides);
past that, levels cost their frames as before. Python 3.12 protects the C stack by a separate
limit of its own.
"""

from __future__ import annotations

import itertools
import operator
import sys
from collections.abc import Iterator

# frames added to the limit at most, all threads together. With the default limit (1000) a
# recursion through graph breaks needs about three per level; with a high one, 3.11's C stack
# (about 25,000 C-level Python calls in 8 MiB) must still outlast the limit
MAX_LIFT = 6000
# on 3.11, no lift takes the limit past this many frames: a user's limit near it (eager code
# recurses to 20,000 without C stack) leaves compiled recursion its own limit, unraised, rather
# than a lift the C stack cannot hold (a crash seen at 20,000 + a lift)
C_STACK_FRAMES = 20_000
_C_STACK_BOUND = sys.version_info < (3, 12)  # 3.12+ limits the C stack itself
# frames a compile may use beyond the limit (the tracer, fake tensors and the backend are deep
# Python), so a miss deep in a recursion compiles instead of failing in the tracer
COMPILE_HEADROOM = 1500

_lifted = [0]  # frames added now, all threads
_owed = [0]  # frames added whose lowering Python refused (at the limit); settled by the next lower
_in_compile = [False]  # a compile's headroom is added


def _shifter(k: int) -> Iterator[None]:
    """An endless iterator whose every `next` runs `setrecursionlimit(getrecursionlimit() + k)`
    in C, with no eval-loop check (so no thread switch) between the read and the write."""
    get = sys.getrecursionlimit
    return map(sys.setrecursionlimit, map(operator.add, iter(get, None), itertools.repeat(k)))


# Made up front: every call below may fail at the limit itself (a builtin's call counts as a
# level), so each is inside `try`, and the state changes after it are plain stores.
_SHIFT = {k: _shifter(k) for k in (1, 2, -1, -2, COMPILE_HEADROOM, -COMPILE_HEADROOM)}


def lift(k: int) -> int:
    """Raise the limit by `k` frames (1 or 2; 0 if that would pass `MAX_LIFT` or
    `C_STACK_FRAMES`, or at the limit itself). Returns what to `lower`."""
    if _lifted[0] + k > MAX_LIFT:
        return 0
    try:
        if _C_STACK_BOUND and sys.getrecursionlimit() + k > C_STACK_FRAMES:
            return 0
        next(_SHIFT[k])
    except RecursionError:
        return 0
    _lifted[0] += k  # no call in between: atomic under the GIL
    return k


def lower(k: int) -> None:
    """Undo `lift(k)`. At the limit itself (a `RecursionError` unwinding through a finally) Python
    refuses even this call's builtin; the amount is owed and the next `lower` up the stack pays."""
    _lifted[0] -= k
    try:
        next(_SHIFT[-k])
    except RecursionError:
        _owed[0] += k
        return
    if _owed[0]:
        _pay()


def _pay() -> None:
    owed = _owed[0]
    _owed[0] = 0
    try:
        next(_shifter(-owed))
    except (RecursionError, ValueError):  # ValueError: the user set a limit below what we owe
        _owed[0] += owed


def compile_headroom() -> None:
    """Raise the limit for a compile (the caller is an outermost miss, holding the compile lock).
    The raise and its record (`_in_compile`) are one line, with no call of Python code between:
    an exception a trace function raises at a line event (a KeyboardInterrupt) lands before or
    after both, never between, so `lower_headroom` in the caller's `finally` knows what to undo."""
    try:  # `setrecursionlimit` returns None: the store follows the raise with no call between
        _in_compile[0] = next(_SHIFT[COMPILE_HEADROOM]) is None
    except RecursionError:  # at the limit itself: no headroom
        return


def lower_headroom() -> None:
    """Undo `compile_headroom()` if it took effect (same one-line discipline)."""
    if not _in_compile[0]:
        return
    # written out, not a call of a shared helper: at the limit itself that call would be refused
    # outside any `try`, leaving the limit raised
    try:
        _in_compile[0] = next(_SHIFT[-COMPILE_HEADROOM]) is not None
    except RecursionError:
        _in_compile[0] = False
        _owed[0] += COMPILE_HEADROOM
        return
    if _owed[0]:
        _pay()


def lifted() -> int:
    """Frames currently added to the limit (for tests and diagnostics)."""
    return _lifted[0] + _owed[0] + (COMPILE_HEADROOM if _in_compile[0] else 0)
