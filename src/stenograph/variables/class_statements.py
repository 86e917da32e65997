"""`class` statements inside the traced function (LOAD_BUILD_CLASS, then a call of `__build_class__`).

A class body that only declares (constants, methods, `property`/`staticmethod`/`classmethod`) runs
no user code when it executes, so the class is built once, for real, while tracing, and the trace
goes on with it as a known class: its instances are objects made in the frame, its methods are
inlined. Every call of the compiled code then uses that one class where eager Python makes a new
one per call (as torch.compile does when it traces class statements): code comparing the classes
of two calls' objects can tell. A body that could run user code or reads the frame's variables
(a closure) is a graph break at the statement, where Python builds the class.
"""

from __future__ import annotations

import builtins
import types
from typing import TYPE_CHECKING

from ..bytecode.instructions import decoded
from ..errors import Unsupported
from .base import Variable
from .functions import NestedFunctionVariable
from .user_classes import class_variable

if TYPE_CHECKING:
    from ..interpreter.frame import Frame

# instructions of a body that only binds names to constants, functions and decorated functions
_DECLARATIVE = frozenset(
    {
        "RESUME", "NOP", "CACHE", "EXTENDED_ARG", "MAKE_CELL", "COPY_FREE_VARS", "LOAD_NAME", "STORE_NAME",
        "LOAD_CONST", "RETURN_CONST", "BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "BUILD_MAP", "BUILD_CONST_KEY_MAP",
        "LIST_EXTEND", "SET_UPDATE", "LIST_TO_TUPLE", "MAKE_FUNCTION", "LOAD_CLOSURE", "COPY", "SWAP", "POP_TOP",
        "RETURN_VALUE", "PUSH_NULL", "PRECALL", "CALL", "LOAD_ATTR", "LOAD_METHOD", "KW_NAMES",
        # 3.13+: a method's defaults are set after MAKE_FUNCTION, `__class__`'s cell is loaded by
        # LOAD_FAST(_BORROW); 3.14+: constants, and the namespace kept in the body's own cell
        # `__classdict__` (a body with a closure is refused before this list is read)
        "SET_FUNCTION_ATTRIBUTE", "LOAD_FAST", "LOAD_FAST_BORROW", "LOAD_SMALL_INT", "LOAD_COMMON_CONSTANT",
        "LOAD_LOCALS", "STORE_DEREF",
    }
)  # fmt: skip
# the only callables such a body may call: the builtin decorators, and a property's own decorators
_DECORATORS = frozenset({"property", "staticmethod", "classmethod"})
_PROPERTY_DECORATORS = frozenset({"setter", "getter", "deleter"})


def _refuse_active_body(code: types.CodeType, f_globals: dict) -> None:
    """Unsupported unless running `code` (a class body) can only bind names: no instruction outside
    `_DECLARATIVE`, and every call is of a builtin decorator or of `prop.setter`-style ones."""
    instructions = decoded(code).instructions
    stored: set[str] = set()
    for i, inst in enumerate(instructions):
        if inst.opname not in _DECLARATIVE:
            raise Unsupported(f"class body of {code.co_qualname} runs {inst.opname}, which may run code")
        if inst.opname == "STORE_NAME":
            stored.add(inst.argval)
        elif inst.opname == "LOAD_NAME" and inst.argval != "__name__":
            following = instructions[i + 1] if i + 1 < len(instructions) else None
            if inst.argval in stored:
                is_property_decorator = (
                    following is not None
                    and following.opname in ("LOAD_ATTR", "LOAD_METHOD")
                    and following.argval in _PROPERTY_DECORATORS
                )
                if not (is_property_decorator or (following is not None and following.opname == "STORE_NAME")):
                    raise Unsupported(f"class body of {code.co_qualname} uses {inst.argval!r} beyond a decorator")
            elif inst.argval not in _DECORATORS or inst.argval in f_globals:
                raise Unsupported(f"class body of {code.co_qualname} reads the name {inst.argval!r}")
        elif inst.opname in ("LOAD_ATTR", "LOAD_METHOD") and inst.argval not in _PROPERTY_DECORATORS:
            raise Unsupported(f"class body of {code.co_qualname} reads attribute {inst.argval!r}")


def build_class(frame: Frame, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """`__build_class__(body, name, *bases, **keywords)` for a declarative body: the class, built now."""
    if len(args) < 2 or not isinstance(args[0], NestedFunctionVariable) or not args[1].is_constant():
        raise Unsupported("__build_class__ with arguments other than a class body, a name and bases")
    body = args[0]
    if body.closure or body.defaults or body.kwdefaults:
        raise Unsupported(f"class body of {body.code.co_qualname} reads variables of the enclosing function")
    name = args[1].as_constant()
    if kwargs or not all(a.is_constant() and isinstance(a.as_constant(), type) for a in args[2:]):
        raise Unsupported(f"class {name} with keywords or bases not known while tracing")
    for base in (a.as_constant() for a in args[2:]):
        # creating the class would run user code: a metaclass, `__init_subclass__` of a base
        hook = next((k for k in base.__mro__ if "__init_subclass__" in k.__dict__), object)
        if type(base) is not type or hook is not object:
            raise Unsupported(f"class {name}: its base {base.__qualname__} runs code when subclassed")
    _refuse_active_body(body.code, body.globals_dict)
    fn = types.FunctionType(body.code, body.globals_dict, body.code.co_name)
    cls = builtins.__build_class__(fn, *[a.as_constant() for a in args[1:]])
    return class_variable(cls)
