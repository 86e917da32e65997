"""`class` statements inside the traced function (LOAD_BUILD_CLASS, then a call of `__build_class__`).

A class body that only declares (constants, methods, `property`/`staticmethod`/`classmethod`) runs
no user code when it executes, so the class is built once, for real, while tracing, and the trace
goes on with it as a known class: its instances are objects made in the frame, its methods are
inlined. Every call of the compiled code then uses that one class where eager Python makes a new
one per call (as torch.compile does when it traces class statements): code comparing the classes
of two calls' objects can tell.

The body may read the function's variables (`size = n`, methods closing over `n`): the class is
built with new cells holding their values now, which must be constants (guarded: another value
recompiles and builds another class; a number made symbolic is specialised) or, for a method's
closure, classes too. A method reads its
cell when it runs, so a variable a method closes over must keep its value for the rest of the
call (assigned once, not in a loop, never by a nested function) and belong to the traced frames
(the cell of an enclosing function's closure is shared with code outside). A body that could run
user code, or another variable, is a graph break at the statement, where Python builds the class.
"""

from __future__ import annotations

import builtins
import types
from typing import TYPE_CHECKING

from ..bytecode.instructions import decoded
from ..errors import Unsupported
from .base import Variable
from .cells import LazyValue
from .class_lookup import MISSING
from .functions import NestedFunctionVariable
from .symbolic import SymNodeVariable
from .trace_rules import is_literal
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
        # the enclosing function's variables (3.11; 3.12+ after LOAD_LOCALS); their values are
        # checked by `_closure_cells`
        "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF", "LOAD_DEREF",
    }
)  # fmt: skip
_DEREF_LOADS = frozenset({"LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF", "LOAD_DEREF"})
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
        if inst.opname == "STORE_DEREF" and inst.argval in code.co_freevars:
            raise Unsupported(f"class body of {code.co_qualname} assigns the enclosing function's {inst.argval!r}")
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
    if body.defaults or body.kwdefaults:
        raise Unsupported(f"class body of {body.code.co_qualname} has defaults")
    name = args[1].as_constant()
    if kwargs or not all(a.is_constant() and isinstance(a.as_constant(), type) for a in args[2:]):
        raise Unsupported(f"class {name} with keywords or bases not known while tracing")
    for base in (a.as_constant() for a in args[2:]):
        # creating the class would run user code: a metaclass, `__init_subclass__` of a base
        hook = next((k for k in base.__mro__ if "__init_subclass__" in k.__dict__), object)
        if type(base) is not type or hook is not object:
            raise Unsupported(f"class {name}: its base {base.__qualname__} runs code when subclassed")
    _refuse_active_body(body.code, body.globals_dict)
    closure = _closure_cells(frame, body) if body.closure else None
    fn = types.FunctionType(body.code, body.globals_dict, body.code.co_name, None, closure)
    try:
        cls = builtins.__build_class__(fn, *[a.as_constant() for a in args[1:]])
    except Exception as e:  # e.g. a constant called (`x = n()`): the statement raises when it runs
        raise Unsupported(f"class {name}: building it raised {type(e).__name__}: {e}") from e
    return class_variable(cls)


def _closure_cells(frame: Frame, body: NestedFunctionVariable) -> tuple[types.CellType, ...]:
    """New cells for the class body's closure, holding the values the function's variables have
    now (see the module docstring for what is accepted); reading them installs their guards."""
    code = body.code
    qualname = code.co_qualname
    read_by_body = {inst.argval for inst in decoded(code).instructions if inst.opname in _DEREF_LOADS}
    read_by_methods = _free_variables_of_nested(code)
    cells = []
    for name, cell in zip(code.co_freevars, body.closure or ()):
        if cell.contents is None:
            raise Unsupported(f"class body of {qualname} reads {name!r} before it is assigned")
        if isinstance(cell.contents, LazyValue):
            cell.contents = frame.wrap(cell.contents.value, cell.contents.source)
        var = cell.contents
        value = _constant_value(var)
        if name in read_by_body and not is_literal(value):
            raise Unsupported(f"class body of {qualname} reads {name!r}, which is not a constant ({var.describe()})")
        if name in read_by_methods:
            if not (is_literal(value) or isinstance(value, type)):
                raise Unsupported(f"a method of {qualname} reads {name!r}, which is not a constant ({var.describe()})")
            if cell.real is not None or not cell.copy_is_safe():
                raise Unsupported(
                    f"a method of {qualname} reads {name!r}, which is assigned again or shared with code "
                    "outside the compiled function: the class built once cannot share its cell"
                )
        cells.append(types.CellType(value))
    return tuple(cells)


def _constant_value(var: Variable) -> object:
    """The constant `var` stands for, its guard installed (a symbolic number is specialised to
    its value, as any use of it as a Python value does); MISSING when it is none."""
    if isinstance(var, SymNodeVariable) or var.is_constant():
        return var.as_constant()
    return MISSING


def _free_variables_of_nested(code: types.CodeType) -> set[str]:
    """The names of `code`'s free variables that functions defined in it (methods) close over."""
    found: set[str] = set()
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= set(const.co_freevars) & set(code.co_freevars)
            found |= _free_variables_of_nested(const) & set(code.co_freevars)
    return found
