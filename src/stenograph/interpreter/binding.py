"""Binding call arguments (trackers) to a code object's parameters, as CPython does."""

from __future__ import annotations

import inspect
import types
from typing import Any

from ..errors import Unsupported
from ..variables.base import Variable
from ..variables.containers import DictVariable, TupleVariable


def bind_arguments(
    code: types.CodeType,
    args: list[Variable],
    kwargs: dict[str, Variable],
    defaults: tuple[Variable, ...],
    kwdefaults: dict[str, Variable],
    name: str,
) -> dict[str, Variable]:
    """Parameter name -> tracker, raising Unsupported where CPython would raise TypeError."""
    names = code.co_varnames
    n_pos = code.co_argcount
    n_kwonly = code.co_kwonlyargcount
    posonly = code.co_posonlyargcount
    positional_names = names[:n_pos]
    kwonly_names = names[n_pos : n_pos + n_kwonly]
    index = n_pos + n_kwonly
    varargs = names[index] if code.co_flags & inspect.CO_VARARGS else None
    if varargs:
        index += 1
    varkw = names[index] if code.co_flags & inspect.CO_VARKEYWORDS else None

    bound: dict[str, Variable] = {}
    for pname, value in zip(positional_names, args):
        bound[pname] = value
    extra = args[n_pos:]
    if extra:
        if varargs is None:
            raise Unsupported(f"{name}() takes {n_pos} positional arguments but {len(args)} were given")
    if varargs is not None:
        bound[varargs] = TupleVariable(list(extra))
    extra_kwargs: dict[str, Variable] = {}
    for key, value in kwargs.items():
        if key in positional_names[posonly:] or key in kwonly_names:
            if key in bound:
                raise Unsupported(f"{name}() got multiple values for argument {key!r}")
            bound[key] = value
        elif varkw is not None:
            extra_kwargs[key] = value
        else:
            raise Unsupported(f"{name}() got an unexpected keyword argument {key!r}")
    first_default = n_pos - len(defaults)
    for i, pname in enumerate(positional_names):
        if pname not in bound:
            if i >= first_default:
                bound[pname] = defaults[i - first_default]
            else:
                raise Unsupported(f"{name}() missing required argument {pname!r}")
    for pname in kwonly_names:
        if pname not in bound:
            if pname in kwdefaults:
                bound[pname] = kwdefaults[pname]
            else:
                raise Unsupported(f"{name}() missing required keyword-only argument {pname!r}")
    if varkw is not None:
        bound[varkw] = DictVariable(extra_kwargs)
    return bound


def binding_error(
    code: types.CodeType, n_defaults: int, kwdefault_names: list[str], n_args: int, kw_names: list[str]
) -> TypeError | None:
    """The TypeError CPython raises calling a function of `code` with `n_args` positional and
    `kw_names` keyword arguments (None if that call binds): a stub with the same parameters and
    names, and an empty body, called with `None`s."""
    names = code.co_varnames
    n_pos, n_kwonly, posonly = code.co_argcount, code.co_kwonlyargcount, code.co_posonlyargcount
    first_default = n_pos - n_defaults
    params = [f"{n}=None" if i >= first_default else n for i, n in enumerate(names[:n_pos])]
    if posonly:
        params.insert(posonly, "/")
    index = n_pos + n_kwonly
    if code.co_flags & inspect.CO_VARARGS:
        params.append("*" + names[index])
        index += 1
    elif n_kwonly:
        params.append("*")
    params += [f"{n}=None" if n in kwdefault_names else n for n in names[n_pos : n_pos + n_kwonly]]
    if code.co_flags & inspect.CO_VARKEYWORDS:
        params.append("**" + names[index])
    if not all(n.isidentifier() for n in names[: index + 1]):
        return None  # a comprehension's `.0`
    namespace: dict[str, Any] = {}
    exec(compile(f"def stub({', '.join(params)}): pass", "<stenograph binding>", "exec"), namespace)
    stub = namespace["stub"]
    stub.__name__, stub.__qualname__ = code.co_name, code.co_qualname  # what the message names
    try:
        stub(*[None] * n_args, **dict.fromkeys(kw_names))
    except TypeError as e:
        return e
    return None
