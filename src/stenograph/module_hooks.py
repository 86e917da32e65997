"""Which hooks an nn.Module call would run: compiled forwards are only used where there are none
(or where stenograph runs them itself around the compiled forward)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

HOOK_TABLES = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def has_module_hooks(module: torch.nn.Module) -> bool:
    """Hooks registered on this module itself."""
    return any(getattr(module, table, None) for table in HOOK_TABLES)


def has_backward_hooks(module: torch.nn.Module) -> bool:
    """Full backward hooks, which wrap a module call in autograd nodes of their own."""
    return bool(module._backward_hooks or module._backward_pre_hooks)


def global_hook_ids() -> tuple[tuple[int, ...], ...]:
    """Which global module hooks are registered (handle ids are never reused, so the same ids
    mean the same hooks): guarded by every trace that runs them or relies on there being none."""
    hooks = torch.nn.modules.module
    return tuple(
        tuple(table)
        for table in (
            hooks._global_forward_pre_hooks,
            hooks._global_forward_hooks,
            hooks._global_forward_hooks_with_kwargs,
            hooks._global_backward_pre_hooks,
            hooks._global_backward_hooks,
        )
    )


def has_global_hooks() -> bool:
    """Any global module hook (the answer every trace without them is guarded on)."""
    hooks = torch.nn.modules.module
    return bool(
        hooks._global_forward_pre_hooks
        or hooks._global_forward_hooks
        or hooks._global_backward_pre_hooks
        or hooks._global_backward_hooks
    )


def has_global_forward_hooks() -> bool:
    """Hooks registered for every module (`register_module_forward_hook` and friends)."""
    hooks = torch.nn.modules.module
    return bool(hooks._global_forward_hooks or hooks._global_forward_pre_hooks or hooks._global_backward_hooks)


def has_registration_hooks() -> bool:
    """Global hooks run when a module, buffer or parameter is registered on any module."""
    hooks = torch.nn.modules.module
    return bool(
        hooks._global_module_registration_hooks
        or hooks._global_buffer_registration_hooks
        or hooks._global_parameter_registration_hooks
    )


def call_with_hooks(mod: torch.nn.Module, forward: Callable, args: tuple, kwargs: dict) -> Any:
    """`mod(*args, **kwargs)` with `forward(mod, ...)` (a compiled forward) in place of its own:
    the module's forward pre-hooks and hooks run eagerly around it, as `nn.Module.__call__` runs
    them (FSDP2's unshard and reshard are such hooks). Full backward hooks need `__call__`'s own
    path: such a module is called as it is."""
    if mod._backward_hooks or mod._backward_pre_hooks:
        return mod(*args, **kwargs)
    for hook_id, hook in list(mod._forward_pre_hooks.items()):
        if hook_id in mod._forward_pre_hooks_with_kwargs:
            result = hook(mod, args, kwargs)
            if result is not None:
                args, kwargs = result
        else:
            result = hook(mod, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    output = forward(mod, *args, **kwargs)
    for hook_id, hook in list(mod._forward_hooks.items()):
        if hook_id in mod._forward_hooks_with_kwargs:
            result = hook(mod, args, kwargs, output)
        else:
            result = hook(mod, args, output)
        if result is not None:
            output = result
    return output
