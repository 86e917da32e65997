"""Which hooks an nn.Module call would run: compiled forwards are only used where there are none
(or where stenograph runs them itself around the compiled forward)."""

from __future__ import annotations

import torch

HOOK_TABLES = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def has_module_hooks(module: torch.nn.Module) -> bool:
    """Hooks registered on this module itself."""
    return any(getattr(module, table, None) for table in HOOK_TABLES)


def has_global_forward_hooks() -> bool:
    """Hooks registered for every module (`register_module_forward_hook` and friends)."""
    hooks = torch.nn.modules.module
    return bool(hooks._global_forward_hooks or hooks._global_forward_pre_hooks or hooks._global_backward_hooks)
