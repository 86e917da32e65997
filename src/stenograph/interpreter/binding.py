"""Binding call arguments (trackers) to a code object's parameters, as CPython does."""

from __future__ import annotations

import inspect
import types

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
