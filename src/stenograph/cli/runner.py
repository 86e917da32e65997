"""`stenograph run script.py [args]`: run an unmodified script with `torch.compile` routed to
stenograph, and write the HTML report when it exits.

Only `torch.compile` is replaced, and only while the script runs (stenograph never calls it).
Every compilation is recorded, and calls of compiled code are timed: that costs a clock read per
call, here only.
"""

from __future__ import annotations

import functools
import os
import runpy
import sys
import traceback
from typing import Any

import torch

from .. import api
from ..observability import progress, structured_trace
from ..report import html, recorder


def run_script(script: str, args: list[str], report_path: str) -> int:
    """Run `script` as `__main__` with `args`; returns its exit status. The report is written
    even when the script raises or exits early."""
    if not os.path.isfile(script):
        print(f"stenograph run: no such script: {script}", file=sys.stderr)
        return 2
    already_recording = recorder.active() is not None  # STENOGRAPH_TRACE records too
    rec = recorder.start(time_calls=True)
    rec.session.title = f"stenograph run {os.path.basename(script)}"
    rec.session.command = " ".join(["stenograph run", script, *args])
    status = progress.start_on_terminal()
    saved_argv, saved_path, original = sys.argv, list(sys.path), torch.compile
    torch.compile = _routed_compile  # type: ignore[assignment]
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = _exit_status(e.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        torch.compile = original
        sys.argv, sys.path[:] = saved_argv, saved_path
        if status is not None:
            status.stop()
        if not already_recording:
            recorder.stop()
        written = html.write(rec.session, report_path)
        print(f"stenograph: report written to {written}", file=sys.stderr)
        trace = structured_trace.trace_path()
        if trace is not None:
            print(f"stenograph: structured trace (for tlparse) at {trace}", file=sys.stderr)
    return code


@functools.wraps(api.compile)
def _routed_compile(*args: Any, **kwargs: Any) -> Any:
    return api.compile(*args, **kwargs)


def _exit_status(code: Any) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
