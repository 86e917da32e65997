"""`mode=` and `options=` of `stenograph.compile`, turned into Inductor config patches.

Why this mirrors torch.compile instead of keeping our own table: a mode is nothing but a named set
of `torch._inductor.config` changes, and the set changes between PyTorch releases. Asking Inductor
(`torch._inductor.list_mode_options`) keeps stenograph's modes identical to torch.compile's on
whatever torch is installed. For torch 2.13 the table is:

| mode                         | Inductor config patches                                      |
|------------------------------|--------------------------------------------------------------|
| None / "default"             | {}                                                           |
| "reduce-overhead"            | triton.cudagraphs=True                                       |
| "max-autotune-no-cudagraphs" | max_autotune=True, coordinate_descent_tuning=True            |
| "max-autotune"               | max_autotune=True, triton.cudagraphs=True,                   |
|                              | coordinate_descent_tuning=True                               |
| "lite" (torch >= 2.12)       | fallback_by_default=True, selective_decompose=True, ...      |

`options` are validated against `torch._inductor.config` (name and type) here, at the user's
`compile()` call, because an unknown key would otherwise surface deep inside Inductor at the first
call of the compiled function. Inductor is imported inside the functions, not at module level, so
importing this module stays cheap.
"""

from __future__ import annotations

import difflib
import typing
from typing import Any

from ..errors import InvalidBackend

__all__ = ["BOTH_MODE_AND_OPTIONS", "resolve_mode", "valid_modes"]

#: Same wording as torch.compile, so users searching the message find the same answers.
BOTH_MODE_AND_OPTIONS = "Either mode or options can be specified, but both can't be specified at the same time."


def _mode_table(dynamic: bool | None = None) -> dict[str, dict[str, Any]]:
    # slow optional import (torch._inductor / AOTAutograd): loaded on first use
    from torch._inductor import list_mode_options

    table = dict(list_mode_options(None, dynamic))
    table.setdefault("default", {})
    return table


def valid_modes() -> list[str]:
    """The mode names the installed Inductor knows, "default" first, the rest sorted."""
    names = set(_mode_table())
    names.discard("default")
    return ["default", *sorted(names)]


def _check_option(key: Any, value: Any, current: dict[str, Any]) -> str:
    """Validate one `options` entry against torch._inductor.config; return its canonical name."""
    # slow optional import (torch._inductor / AOTAutograd): loaded on first use
    from torch._inductor import config

    if not isinstance(key, str):
        raise InvalidBackend(f"Inductor option names must be str, got {type(key).__name__}: {key!r}")
    name = key.replace("-", "_")  # torch.compile accepts "max-autotune" spellings of keys too
    if name not in current:
        close = difflib.get_close_matches(name, list(current), n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise InvalidBackend(
            f"unknown Inductor option {key!r}.{hint} Valid options are the names in torch._inductor.list_options()."
        )
    expected = config.get_type(name)
    # Subscripted generics (list[str], dict[...], Optional[...]) cannot be isinstance-checked.
    if isinstance(expected, type) and typing.get_origin(expected) is None:
        ok = isinstance(value, expected) or (expected is float and type(value) is int)
        if not ok:
            raise InvalidBackend(
                f"Inductor option {key!r} must be {expected.__name__}, got {type(value).__name__} ({value!r})"
            )
    return name


def resolve_mode(
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    *,
    dynamic: bool | None = None,
) -> dict[str, Any]:
    """Inductor config patches for a `mode` name or an `options` dict (never both).

    Returns a fresh dict `{config_name: value}` suitable for
    `compile_fx(..., config_patches=...)`. Raises `InvalidBackend` for both given, an unknown mode
    (the message lists the valid ones), an unknown option name or a value of the wrong type.
    """
    if mode is not None and options is not None:
        raise InvalidBackend(BOTH_MODE_AND_OPTIONS)
    if options is not None:
        if not isinstance(options, dict):
            raise InvalidBackend(f"options must be a dict, got {type(options).__name__}")
        # slow optional import (torch._inductor / AOTAutograd): loaded on first use
        from torch._inductor import config

        current = config.get_config_copy()
        return {_check_option(k, v, current): v for k, v in options.items()}
    if mode is None:
        mode = "default"
    if not isinstance(mode, str):
        raise InvalidBackend(f"mode must be a str or None, got {type(mode).__name__}: {mode!r}")
    table = _mode_table(dynamic)
    if mode not in table:
        close = difflib.get_close_matches(mode, list(table), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise InvalidBackend(f"unknown mode {mode!r}.{hint} Valid modes: {', '.join(valid_modes())} (or None).")
    return dict(table[mode])
