"""Opcode handlers, one function per instruction, collected into per-version tables.

`COMMON` holds handlers whose semantics are the same on 3.11 and 3.12; `ONLY_311` and `ONLY_312`
hold the instructions that exist (or behave differently) on one version. The table for the
running interpreter is built once. Handlers take (frame, instruction) and mutate the frame.
"""

from __future__ import annotations

import dis
import importlib.util
import operator
import sys
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, TypeVar

from ..errors import Unsupported
from ..variables import operators
from ..variables.base import NULL, GuardedOnUseConstant, NullVariable, Variable, constant
from ..variables.builder import wrap
from ..variables.cells import Cell, CellVariable
from ..variables.containers import (
    DictVariable,
    IteratorVariable,
    ListVariable,
    SetVariable,
    SliceVariable,
    TupleVariable,
    dict_key,
    iterate,
)
from ..variables.contexts import GradModeContextVariable
from ..variables.functions import NestedFunctionVariable
from ..variables.generators import Yielded
from ..variables.instances import SuperVariable, UserClassVariable
from ..variables.tensor import TensorVariable
from .exceptions import TracedException, exception_value, matches

if TYPE_CHECKING:
    from .frame import Frame

Handler = Callable[["Frame", dis.Instruction], None]
H = TypeVar("H")
COMMON: dict[str, Handler] = {}
ONLY_311: dict[str, Handler] = {}
ONLY_312: dict[str, Handler] = {}


def op(*names: str, table: dict[str, Handler] = COMMON) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for name in names:
            table[name] = fn
        return fn

    return register


@cache
def handlers_for_running_python() -> dict[str, Handler]:
    version = sys.version_info[:2]
    if version == (3, 11):
        return {**COMMON, **ONLY_311}
    if version == (3, 12):
        return {**COMMON, **ONLY_312}
    raise Unsupported(f"Python {version[0]}.{version[1]} is not supported yet (3.11 and 3.12 are)")


# -- no-ops -------------------------------------------------------------------------------------


@op("NOP", "RESUME", "CACHE", "EXTENDED_ARG", "PRECALL", "MAKE_CELL", "COPY_FREE_VARS")
def _nop(f: Frame, inst: dis.Instruction) -> None:
    return None


# -- stack --------------------------------------------------------------------------------------


@op("POP_TOP")
def _pop_top(f: Frame, inst: dis.Instruction) -> None:
    f.pop()


@op("PUSH_NULL")
def _push_null(f: Frame, inst: dis.Instruction) -> None:
    f.push(NULL)


@op("COPY")
def _copy(f: Frame, inst: dis.Instruction) -> None:
    f.push(f.stack[-inst.arg])


@op("SWAP")
def _swap(f: Frame, inst: dis.Instruction) -> None:
    f.stack[-1], f.stack[-inst.arg] = f.stack[-inst.arg], f.stack[-1]


# -- loads and stores ---------------------------------------------------------------------------


@op("LOAD_CONST")
def _load_const(f: Frame, inst: dis.Instruction) -> None:
    f.push(constant(inst.argval))


@op("LOAD_FAST", "LOAD_FAST_CHECK")
def _load_fast(f: Frame, inst: dis.Instruction) -> None:
    f.push(f.load_local(inst.argval))


@op("LOAD_FAST_AND_CLEAR", table=ONLY_312)
def _load_fast_and_clear(f: Frame, inst: dis.Instruction) -> None:
    if inst.argval in f.locals:
        value = f.load_local(inst.argval)
        del f.locals[inst.argval]
        f.push(value)
    else:
        f.push(NULL)


@op("STORE_FAST")
def _store_fast(f: Frame, inst: dis.Instruction) -> None:
    value = f.pop()
    if isinstance(value, NullVariable):
        f.locals.pop(inst.argval, None)  # restoring an unbound comprehension variable (3.12)
    else:
        f.locals[inst.argval] = value


@op("DELETE_FAST")
def _delete_fast(f: Frame, inst: dis.Instruction) -> None:
    f.locals.pop(inst.argval, None)


@op("LOAD_GLOBAL")
def _load_global(f: Frame, inst: dis.Instruction) -> None:
    if inst.arg & 1:
        f.push(NULL)
    f.push(f.load_global(inst.argval))


@op("STORE_GLOBAL")
def _store_global(f: Frame, inst: dis.Instruction) -> None:
    value = f.pop()
    f.output.side_effects.global_written(f.f_globals, inst.argval, value)
    f.output.global_cache[(id(f.f_globals), inst.argval)] = value


@op("LOAD_DEREF", "LOAD_CLASSDEREF")
def _load_deref(f: Frame, inst: dis.Instruction) -> None:
    f.push(f.load_cell(inst.argval))


@op("STORE_DEREF")
def _store_deref(f: Frame, inst: dis.Instruction) -> None:
    cell = f.cells.get(inst.argval)
    if cell is None:
        f.cells[inst.argval] = cell = Cell()
        cell.owner = (f.code, inst.argval)
    cell.write(f, f.pop())


@op("DELETE_DEREF")
def _delete_deref(f: Frame, inst: dis.Instruction) -> None:
    cell = f.cells.get(inst.argval)
    if cell is None or cell.real is not None:
        raise Unsupported(f"deleting closure variable {inst.argval!r}")
    cell.contents = None


@op("LOAD_CLOSURE")
def _load_closure(f: Frame, inst: dis.Instruction) -> None:
    cell = f.cells.get(inst.argval)
    if cell is None:
        f.cells[inst.argval] = cell = Cell()
        cell.owner = (f.code, inst.argval)
    f.push(CellVariable(cell))


@op("LOAD_ATTR", table=ONLY_312)
def _load_attr_312(f: Frame, inst: dis.Instruction) -> None:
    obj = f.pop()
    if inst.arg & 1:
        f.push(NULL)
    f.push(obj.getattr(f, inst.argval))


@op("LOAD_ATTR", table=ONLY_311)
def _load_attr_311(f: Frame, inst: dis.Instruction) -> None:
    f.push(f.pop().getattr(f, inst.argval))


@op("LOAD_METHOD", table=ONLY_311)
def _load_method(f: Frame, inst: dis.Instruction) -> None:
    obj = f.pop()
    f.push(NULL)
    f.push(obj.getattr(f, inst.argval))


@op("STORE_ATTR")
def _store_attr(f: Frame, inst: dis.Instruction) -> None:
    obj = f.pop()
    value = f.pop()
    obj.setattr(f, inst.argval, value)


@op("IMPORT_NAME")
def _import_name(f: Frame, inst: dis.Instruction) -> None:
    """`import m` of a module that is already imported: no code runs, so it is just a lookup."""
    fromlist = f.pop().as_constant()
    level = f.pop().as_constant()
    name = inst.argval
    absolute = importlib.util.resolve_name("." * level + name, f.f_globals.get("__package__")) if level else name
    if absolute not in sys.modules:
        raise Unsupported(f"import of {absolute}, which is not imported yet (importing runs its code)")
    module = sys.modules[absolute] if fromlist or level else sys.modules[absolute.partition(".")[0]]
    f.push(wrap(f, module, None))


@op("IMPORT_FROM")
def _import_from(f: Frame, inst: dis.Instruction) -> None:
    f.push(f.stack[-1].getattr(f, inst.argval))


@op("DELETE_ATTR")
def _delete_attr(f: Frame, inst: dis.Instruction) -> None:
    obj = f.pop()
    delattr_ = getattr(obj, "delattr", None)
    if delattr_ is None:
        raise Unsupported(f"deleting attribute {inst.argval!r} of {obj.describe()}")
    delattr_(f, inst.argval)


@op("LOAD_SUPER_ATTR", table=ONLY_312)
def _load_super_attr(f: Frame, inst: dis.Instruction) -> None:
    obj = f.pop()
    cls = f.pop()
    f.pop()  # the global `super`
    attr = SuperVariable(cls.as_constant(), obj).getattr(f, inst.argval)
    if inst.arg & 1:
        f.push(NULL)
    f.push(attr)


@op("BINARY_SUBSCR")
def _binary_subscr(f: Frame, inst: dis.Instruction) -> None:
    key = f.pop()
    container = f.pop()
    f.push(container.getitem(f, key))


@op("BINARY_SLICE", table=ONLY_312)
def _binary_slice(f: Frame, inst: dis.Instruction) -> None:
    end, start = f.pop(), f.pop()
    container = f.pop()
    f.push(container.getitem(f, _make_slice([start, end])))


@op("STORE_SUBSCR")
def _store_subscr(f: Frame, inst: dis.Instruction) -> None:
    key = f.pop()
    container = f.pop()
    value = f.pop()
    _setitem(f, container, key, value)


@op("STORE_SLICE", table=ONLY_312)
def _store_slice(f: Frame, inst: dis.Instruction) -> None:
    end, start = f.pop(), f.pop()
    container = f.pop()
    value = f.pop()
    _setitem(f, container, _make_slice([start, end]), value)


def _setitem(f: Frame, container: Variable, key: Variable, value: Variable) -> None:
    if isinstance(container, TensorVariable):
        f.output.call("call_function", operator.setitem, [container, key, value], {}, "tensor item assignment")
        return
    setitem = getattr(container, "setitem", None)
    if setitem is None:
        raise Unsupported(f"item assignment on {container.describe()}")
    setitem(f, key, value)


@op("DELETE_SUBSCR")
def _delete_subscr(f: Frame, inst: dis.Instruction) -> None:
    key = f.pop()
    container = f.pop()
    delitem = getattr(container, "delitem", None)
    if delitem is None:
        raise Unsupported(f"item deletion on {container.describe()}")
    delitem(f, key)


@op("BUILD_SLICE")
def _build_slice(f: Frame, inst: dis.Instruction) -> None:
    f.push(_make_slice(f.popn(inst.arg)))


def _make_slice(parts: list[Variable]) -> Variable:
    if all(p.is_constant() for p in parts):
        return constant(slice(*[p.as_constant() for p in parts]))
    return SliceVariable(parts)


# -- operators ----------------------------------------------------------------------------------


@op("BINARY_OP")
def _binary_op(f: Frame, inst: dis.Instruction) -> None:
    b = f.pop()
    a = f.pop()
    f.push(operators.binary(f, operators.BINARY_OPS[inst.arg], a, b))


@op("COMPARE_OP")
def _compare_op(f: Frame, inst: dis.Instruction) -> None:
    b = f.pop()
    a = f.pop()
    f.push(operators.binary(f, operators.COMPARE_OPS[inst.argval], a, b))


@op("IS_OP")
def _is_op(f: Frame, inst: dis.Instruction) -> None:
    b = f.pop()
    a = f.pop()
    same = operators.is_same(f, a, b)
    f.push(constant(same != bool(inst.arg)))


@op("CONTAINS_OP")
def _contains_op(f: Frame, inst: dis.Instruction) -> None:
    container = f.pop()
    item = f.pop()
    f.push(constant(operators.contains(f, item, container) != bool(inst.arg)))


_UNARY = {
    "UNARY_NEGATIVE": operator.neg,
    "UNARY_POSITIVE": operator.pos,
    "UNARY_INVERT": operator.invert,
    "UNARY_NOT": operator.not_,
}


@op(*_UNARY)
def _unary(f: Frame, inst: dis.Instruction) -> None:
    f.push(operators.unary(f, _UNARY[inst.opname], f.pop()))


@op("CALL_INTRINSIC_1", table=ONLY_312)
def _call_intrinsic_1(f: Frame, inst: dis.Instruction) -> None:
    if inst.argval == "INTRINSIC_UNARY_POSITIVE" or inst.arg == 5:
        f.push(operators.unary(f, operator.pos, f.pop()))
    elif inst.argval == "INTRINSIC_LIST_TO_TUPLE" or inst.arg == 6:
        f.push(TupleVariable(f.pop().unpack(f)))
    elif inst.argval == "INTRINSIC_STOPITERATION_ERROR" or inst.arg == 3:
        raise TracedException(f.pop())  # a generator's StopIteration guard: re-raise as is
    else:
        raise Unsupported(f"CALL_INTRINSIC_1 {inst.argrepr}")


# -- containers ---------------------------------------------------------------------------------


@op("BUILD_TUPLE")
def _build_tuple(f: Frame, inst: dis.Instruction) -> None:
    f.push(TupleVariable(f.popn(inst.arg)))


@op("BUILD_LIST")
def _build_list(f: Frame, inst: dis.Instruction) -> None:
    f.push(ListVariable(f.popn(inst.arg)))


@op("BUILD_MAP")
def _build_map(f: Frame, inst: dis.Instruction) -> None:
    flat = f.popn(2 * inst.arg)
    f.push(DictVariable({dict_key(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}))


@op("BUILD_CONST_KEY_MAP")
def _build_const_key_map(f: Frame, inst: dis.Instruction) -> None:
    keys = f.pop().as_constant()
    values = f.popn(inst.arg)
    f.push(DictVariable(dict(zip(keys, values))))


@op("BUILD_SET")
def _build_set(f: Frame, inst: dis.Instruction) -> None:
    f.push(SetVariable.from_items(f, f.popn(inst.arg)))


@op("SET_ADD")
def _set_add(f: Frame, inst: dis.Instruction) -> None:
    value = f.pop()
    f.stack[-inst.arg].call_method(f, "add", [value], {})


@op("SET_UPDATE")
def _set_update(f: Frame, inst: dis.Instruction) -> None:
    value = f.pop()
    f.stack[-inst.arg].call_method(f, "update", [value], {})


def _building(f: Frame, depth: int, kind: type[H]) -> H:
    """The container a comprehension or display builds, `depth` entries down the stack.

    In a resume function it is an argument (the list built so far), so its changes go through the
    container's own methods, which record them as side effects to replay.
    """
    target = f.stack[-depth]
    if not isinstance(target, kind):
        raise Unsupported(f"{kind.__name__} expected {depth} entries down the stack, found {target.describe()}")
    return target


@op("LIST_APPEND")
def _list_append(f: Frame, inst: dis.Instruction) -> None:
    value = f.pop()
    _building(f, inst.arg, ListVariable).call_method(f, "append", [value], {})


@op("LIST_EXTEND")
def _list_extend(f: Frame, inst: dis.Instruction) -> None:
    value = f.pop()
    _building(f, inst.arg, ListVariable).call_method(f, "extend", [value], {})


@op("MAP_ADD")
def _map_add(f: Frame, inst: dis.Instruction) -> None:
    value = f.pop()
    key = f.pop()
    _building(f, inst.arg, DictVariable).setitem(f, key, value)


@op("DICT_UPDATE", "DICT_MERGE")
def _dict_update(f: Frame, inst: dis.Instruction) -> None:
    value = f.pop()
    target = _building(f, inst.arg, DictVariable)
    if not isinstance(value, DictVariable):
        raise Unsupported(f"** of {value.describe()}")
    target.call_method(f, "update", [value], {})


@op("LIST_TO_TUPLE", table=ONLY_311)
def _list_to_tuple(f: Frame, inst: dis.Instruction) -> None:
    f.push(TupleVariable(f.pop().unpack(f)))


@op("UNPACK_SEQUENCE")
def _unpack_sequence(f: Frame, inst: dis.Instruction) -> None:
    items = f.pop().unpack(f)
    if len(items) != inst.arg:
        raise Unsupported(f"unpacking {len(items)} values into {inst.arg} names")
    f.stack.extend(reversed(items))


@op("UNPACK_EX")
def _unpack_ex(f: Frame, inst: dis.Instruction) -> None:
    before, after = inst.arg & 0xFF, inst.arg >> 8
    items = f.pop().unpack(f)
    if len(items) < before + after:
        raise Unsupported(f"unpacking {len(items)} values into at least {before + after} names")
    star = ListVariable(items[before : len(items) - after])
    f.stack.extend(reversed([*items[:before], star, *items[len(items) - after :]]))


@op("FORMAT_VALUE")
def _format_value(f: Frame, inst: dis.Instruction) -> None:
    spec = f.pop().as_constant() if inst.arg & 0x04 else ""
    value = f.pop()
    if not value.is_constant():
        raise Unsupported(f"f-string formatting of {value.describe()}")
    v = value.as_constant()
    conversion = inst.arg & 0x03
    if conversion == 1:
        v = str(v)
    elif conversion == 2:
        v = repr(v)
    elif conversion == 3:
        v = ascii(v)
    f.push(constant(format(v, spec)))


@op("BUILD_STRING")
def _build_string(f: Frame, inst: dis.Instruction) -> None:
    f.push(constant("".join(p.as_constant() for p in f.popn(inst.arg))))


# -- calls --------------------------------------------------------------------------------------


@op("KW_NAMES")
def _kw_names(f: Frame, inst: dis.Instruction) -> None:
    f.kw_names = f.code.co_consts[inst.arg]


@op("CALL")
def _call(f: Frame, inst: dis.Instruction) -> None:
    argc = inst.arg
    args = f.popn(argc)
    second = f.pop()
    first = f.pop()
    if isinstance(first, NullVariable):
        fn = second
    else:
        fn, args = first, [second, *args]
    kwargs: dict[str, Variable] = {}
    if f.kw_names:
        n = len(f.kw_names)
        kwargs = dict(zip(f.kw_names, args[-n:]))
        args = args[:-n]
        f.kw_names = ()
    f.push(fn.call(f, args, kwargs))


@op("CALL_FUNCTION_EX")
def _call_function_ex(f: Frame, inst: dis.Instruction) -> None:
    kwargs_var = f.pop() if inst.arg & 1 else DictVariable({})
    args_var = f.pop()
    fn = f.pop()
    if f.stack and isinstance(f.stack[-1], NullVariable):
        f.pop()
    if not isinstance(kwargs_var, DictVariable):
        raise Unsupported(f"**kwargs of {kwargs_var.describe()}")
    if isinstance(args_var, NullVariable):
        args_var = TupleVariable([])
    f.push(fn.call(f, args_var.unpack(f), dict(kwargs_var.items)))


@op("MAKE_FUNCTION")
def _make_function(f: Frame, inst: dis.Instruction) -> None:
    code = f.pop().as_constant()
    closure = None
    if inst.arg & 0x08:
        cells = f.pop()
        assert isinstance(cells, TupleVariable)
        closure = tuple(c.cell for c in cells.items if isinstance(c, CellVariable))
    if inst.arg & 0x04:
        f.pop()  # annotations
    kwdefaults: dict[str, Variable] = {}
    if inst.arg & 0x02:
        kw = f.pop()
        assert isinstance(kw, DictVariable)
        kwdefaults = dict(kw.items)
    defaults: tuple[Variable, ...] = ()
    if inst.arg & 0x01:
        defaults = tuple(f.pop().unpack(f))
    f.push(NestedFunctionVariable(code, f.f_globals, defaults, kwdefaults, closure))


@op("RETURN_VALUE")
def _return_value(f: Frame, inst: dis.Instruction) -> None:
    f.return_value = f.pop()


@op("RETURN_CONST", table=ONLY_312)
def _return_const(f: Frame, inst: dis.Instruction) -> None:
    f.return_value = constant(inst.argval)


# -- control flow -------------------------------------------------------------------------------


@op("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP")
def _jump(f: Frame, inst: dis.Instruction) -> None:
    f.jump_to(inst.argval)


def _pop_jump(when: Callable[[Frame, Variable], bool]) -> Handler:
    def handler(f: Frame, inst: dis.Instruction) -> None:
        if when(f, f.pop()):
            f.jump_to(inst.argval)

    return handler


def _is_none(f: Frame, v: Variable) -> bool:
    """`v is None` for the jumps of `if x is None` (guarded like the `is` operator)."""
    if isinstance(v, GuardedOnUseConstant):
        # an int, float, str or bool argument: `is None` needs no guard on its value
        f.output.guards.not_identical(v.source, None)
        return False
    if v.is_constant():
        return v.as_constant() is None
    operators.guard_identity(f, v, constant(None), False)
    return False


for _prefix in ("POP_JUMP_IF_", "POP_JUMP_FORWARD_IF_", "POP_JUMP_BACKWARD_IF_"):
    COMMON[_prefix + "TRUE"] = _pop_jump(lambda f, v: v.truth(f))
    COMMON[_prefix + "FALSE"] = _pop_jump(lambda f, v: not v.truth(f))
    COMMON[_prefix + "NONE"] = _pop_jump(_is_none)
    COMMON[_prefix + "NOT_NONE"] = _pop_jump(lambda f, v: not _is_none(f, v))


@op("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP", table=ONLY_311)
def _jump_or_pop(f: Frame, inst: dis.Instruction) -> None:
    value = f.stack[-1]
    if value.truth(f) == (inst.opname == "JUMP_IF_TRUE_OR_POP"):
        f.jump_to(inst.argval)
    else:
        f.pop()


@op("GET_ITER")
def _get_iter(f: Frame, inst: dis.Instruction) -> None:
    f.push(iterate(f, f.pop()))


@op("FOR_ITER")
def _for_iter(f: Frame, inst: dis.Instruction) -> None:
    iterator = f.stack[-1]
    if not isinstance(iterator, IteratorVariable):
        raise Unsupported(f"for loop over {iterator.describe()}")
    item = iterator.next(f)
    if item is not None:
        f.push(item)
        return
    f.pop()
    f.jump_to(inst.argval)
    target = f.instructions[f.ip]
    if target.opname == "END_FOR":  # 3.12: exhausting the loop skips END_FOR
        f.ip += 1


@op("END_FOR", table=ONLY_312)
def _end_for(f: Frame, inst: dis.Instruction) -> None:
    f.popn(2)


@op("BEFORE_WITH")
def _before_with(f: Frame, inst: dis.Instruction) -> None:
    context = f.pop()
    if isinstance(context, GradModeContextVariable):
        f.push(context.enter(f))
        f.push(constant(None))
        return
    # a context manager written in Python: __enter__ and __exit__ are looked up on the class
    try:
        exit_method = context.getattr(f, "__exit__")
        enter_method = context.getattr(f, "__enter__")
    except Unsupported as e:
        raise Unsupported(f"`with` on {context.describe()}: {e.reason}") from e
    f.push(exit_method)
    f.push(enter_method.call(f, [], {}))


@op("WITH_EXCEPT_START")
def _with_except_start(f: Frame, inst: dis.Instruction) -> None:
    exit_method = f.stack[-4]
    value = f.stack[-1]
    f.push(exit_method.call(f, [UserClassVariable(value.python_type()), value, constant(None)], {}))


@op("LOAD_ASSERTION_ERROR")
def _load_assertion_error(f: Frame, inst: dis.Instruction) -> None:
    f.push(constant(AssertionError))


@op("RAISE_VARARGS")
def _raise(f: Frame, inst: dis.Instruction) -> None:
    if inst.arg == 0:
        frame: Frame | None = f
        while frame is not None and not frame.handled:
            frame = frame.parent
        if frame is None:
            raise Unsupported("bare raise outside an except block")
        raise TracedException(frame.handled[-1])
    cause = f.pop() if inst.arg == 2 else None
    exc = exception_value(f, f.pop())
    if cause is not None:  # `raise X from Y`
        if not (cause.is_constant() and cause.as_constant() is None):
            cause = exception_value(f, cause)
        exc.attrs.items["__cause__"] = cause
        exc.attrs.items["__suppress_context__"] = constant(True)
    raise TracedException(exc)


@op("RERAISE")
def _reraise(f: Frame, inst: dis.Instruction) -> None:
    raise TracedException(f.pop())


@op("PUSH_EXC_INFO")
def _push_exc_info(f: Frame, inst: dis.Instruction) -> None:
    value = f.pop()
    f.push(f.handled[-1] if f.handled else constant(None))
    f.handled.append(value)
    f.push(value)


@op("POP_EXCEPT")
def _pop_except(f: Frame, inst: dis.Instruction) -> None:
    f.pop()
    if f.handled:
        f.handled.pop()


@op("CHECK_EXC_MATCH")
def _check_exc_match(f: Frame, inst: dis.Instruction) -> None:
    match = f.pop()
    f.push(constant(matches(f.stack[-1], match)))


# -- generators ---------------------------------------------------------------------------------


@op("RETURN_GENERATOR")
def _return_generator(f: Frame, inst: dis.Instruction) -> None:
    f.push(constant(None))  # the generator already runs lazily: act as its first resume


@op("YIELD_VALUE")
def _yield_value(f: Frame, inst: dis.Instruction) -> None:
    value = f.pop()
    f.push(constant(None))  # what `next()` sends in when the generator resumes
    raise Yielded(value)
