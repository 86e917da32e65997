"""`warnings.warn` run eagerly at a graph break, reported where eager Python reports it.

At a break the call runs inside the generated transformed function, so `warnings.warn` would name
that code as the warning's location and keep its "shown once" registry in the generated code's
globals: the warning would point at stenograph and could be shown again for every compiled entry.
The break writer calls `warn_at` instead, with the user's file, line and module globals for the
breaking instruction, so the text, the location and the once-per-location registry are eager's.
"""

from __future__ import annotations

import os
import sys
import types
import warnings
from typing import Any

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _is_stenograph_frame(frame: types.FrameType) -> bool:
    filename = frame.f_code.co_filename
    return filename.startswith("<stenograph") or filename.startswith(_PACKAGE_DIR)


def warn_at(
    filename: str,
    lineno: int,
    module_globals: dict[str, Any],
    message: Any,
    category: type[Warning] | None = None,
    stacklevel: int = 1,
    source: Any = None,
) -> None:
    """`warnings.warn(message, category, stacklevel, source)` as called from `filename:lineno`.

    `stacklevel` 1 names that line. A higher level names a caller: the frames above the generated
    code that are not stenograph's own, counted as eager counts them (a caller that is itself
    compiled code is named by its generated code).
    """
    if isinstance(message, Warning):
        category = type(message)
    elif category is None:
        category = UserWarning
    if not (isinstance(category, type) and issubclass(category, Warning)):
        raise TypeError(f"category must be a Warning subclass, not '{type(category).__name__}'")
    if stacklevel > 1:
        frame: types.FrameType | None = sys._getframe(2)  # the caller of the generated code
        level = 1
        while frame is not None:
            if not _is_stenograph_frame(frame):
                level += 1
                if level == stacklevel:
                    break
            frame = frame.f_back
        if frame is None:
            filename, lineno, module_globals = "sys", 1, sys.__dict__
        else:
            filename, lineno, module_globals = frame.f_code.co_filename, frame.f_lineno, frame.f_globals
    registry = module_globals.setdefault("__warningregistry__", {})
    module = module_globals.get("__name__", "<string>")
    warnings.warn_explicit(
        message, category, filename, lineno, module, registry, module_globals=module_globals, source=source
    )
