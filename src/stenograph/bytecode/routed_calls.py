"""Routed calls: a copy of a code object whose every explicit call first hands its callable to a
*router*, which returns what is called instead.

A frame stenograph gives up on (a graph break inside a loop, an unsupported construct) runs
eagerly, but the functions and modules it calls are compiled as frames of their own, as
torch.compile's C hook compiles the callees of a frame it skips. Without a C hook the frame's
own code must do the routing: before each call instruction the callable is brought to the top of
the stack, passed through the router (a constant of the copy) and put back. The router returns
the callable unchanged for what it does not compile.

What the copy changes, per Python version, so that the callable sits at a known depth:

- 3.11 and 3.12 call `[NULL or method, callable or self, args...]`: which layout a method load
  (`LOAD_METHOD`, `LOAD_ATTR`/`LOAD_SUPER_ATTR` with the method bit) gives is decided when it
  runs, so those loads become attribute loads followed by a NULL below the bound method; every
  call then has its callable right below its arguments.
- 3.13 and later call `[callable, NULL or self, args...]`: the callable is always below the
  self-or-NULL slot, methods included, and nothing else changes.

Calls the interpreter makes implicitly (`with`'s `__enter__`, operators, iteration) are not
routed. Nested code objects (inner functions, lambdas) are left as they are: calling one from
the copy routes the function made from it.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import bytecode as _bc

from .assemble import assemble, disassemble

__all__ = ["route_calls"]

_SPLIT_METHODS = sys.version_info < (3, 13)  # method loads may put the callable one slot higher
_PRECALL = sys.version_info < (3, 12)  # 3.11 routes before PRECALL (CALL follows it)
_KWARGS_SLOT_ALWAYS = sys.version_info >= (3, 14)  # CALL_FUNCTION_EX has a kwargs-or-NULL slot


def route_calls(code: types.CodeType, router: Any) -> types.CodeType:
    """A copy of `code` that calls `router(callable)` before each explicit call and calls what
    it returns. Names, line numbers, exception handlers and nested code stay the original's."""
    bc = disassemble(code)
    out: list[Any] = []
    for item in bc:
        if not isinstance(item, _bc.Instr):
            out.append(item)
            continue
        if _SPLIT_METHODS and _loads_method(item):
            out.extend(_attribute_load(item))
            continue
        depth = _callable_depth(item, out[-1] if out else None)
        if depth is None:
            out.append(item)
            continue
        # 3.11/3.12's KW_NAMES sets the names the next call reads: the router's call goes first
        names = out.pop() if out and isinstance(out[-1], _bc.Instr) and out[-1].name == "KW_NAMES" else None
        out.extend(_route(depth, router, item.location))
        if names is not None:
            out.append(names)
        out.append(item)
    bc.clear()
    bc.extend(out)
    # routing a call holds two entries more than the call (the router and a NULL); the bound is
    # given, as the `bytecode` package's own walk of resume code (its prologue jumps into a `with`
    # block) can find a negative depth on 3.12
    return assemble(bc, stacksize=code.co_stacksize + 2)


def _loads_method(instr: _bc.Instr) -> bool:
    if instr.name == "LOAD_METHOD":
        return True
    # 3.12: (method bit, ..., name); 3.11's LOAD_ATTR takes the name alone
    return instr.name in ("LOAD_ATTR", "LOAD_SUPER_ATTR") and isinstance(instr.arg, tuple) and instr.arg[0]


def _attribute_load(instr: _bc.Instr) -> list[_bc.Instr]:
    """The plain attribute load of a method load, with the NULL a non-method call has below."""
    loc = instr.location
    if instr.name == "LOAD_METHOD":
        load = _bc.Instr("LOAD_ATTR", instr.arg, location=loc)
    else:
        load = _bc.Instr(instr.name, (False, *instr.arg[1:]), location=loc)
    return [load, _bc.Instr("PUSH_NULL", location=loc), _bc.Instr("SWAP", 2, location=loc)]


def _callable_depth(instr: _bc.Instr, previous: Any) -> int | None:
    """How deep below the top of the stack the callable of call instruction `instr` is (1: on
    top); None for an instruction that is not a call routed here. `previous`: the item before."""
    below_self = 0 if _SPLIT_METHODS else 1  # 3.13+: the self-or-NULL slot sits above it
    if instr.name == ("PRECALL" if _PRECALL else "CALL"):
        if _PRECALL and instr.arg == 0 and isinstance(previous, _bc.Instr) and previous.name == "GET_ITER":
            # 3.11 calls a comprehension's function as [function, iterator] with no NULL: the
            # function sits in the method slot, the iterator (its one argument) in self's
            return 2
        return instr.arg + 1 + below_self
    if instr.name == "CALL_KW":  # 3.13+: the keyword names tuple is on top
        return instr.arg + 3
    if instr.name == "CALL_FUNCTION_EX":
        kwargs = 1 if _KWARGS_SLOT_ALWAYS else instr.arg & 1
        return 2 + kwargs + below_self
    return None


def _route(depth: int, router: Any, loc: Any) -> list[_bc.Instr]:
    """Replace the stack item `depth` deep by `router(item)`, leaving the others in place."""

    def i(name: str, arg: Any = _bc.UNSET) -> _bc.Instr:
        return _bc.Instr(name, arg, location=loc)

    if _SPLIT_METHODS:  # [NULL, router, callable]
        call = [i("PUSH_NULL"), i("SWAP", 2), i("LOAD_CONST", router), i("SWAP", 2)]
        call += [i("PRECALL", 1), i("CALL", 1)] if _PRECALL else [i("CALL", 1)]
    else:  # [router, NULL, callable]
        call = [i("LOAD_CONST", router), i("SWAP", 2), i("PUSH_NULL"), i("SWAP", 2), i("CALL", 1)]
    if depth == 1:
        return call
    return [i("SWAP", depth), *call, i("SWAP", depth)]
