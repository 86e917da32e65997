"""Opcode handlers, one function per instruction, each registered for the Python versions it
applies to (`registry.py`).

`@op(name, ..., min_ver=, max_ver=, eager=)` adds one row per name: the handler executes the
instruction symbolically (it takes (frame, instruction) and mutates the frame); `eager`, for an
instruction that can break the graph, writes the Python that runs it for real at the break
(`break_rendering.py`). Rows without `min_ver` start at the oldest supported version, rows without
`max_ver` apply to every later one. An instruction whose behaviour changed between versions has
one row per behaviour. The table for the running interpreter is built once.
"""

from __future__ import annotations

import dis
import importlib.util
import operator
import sys
import types
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, TypeVar

from .. import process_state
from ..bytecode.resume import NULL_STACK_ENTRY, VALUE_STACK_ENTRY
from ..errors import Unsupported
from ..variables import operators
from ..variables.base import NULL, GuardedOnUseConstant, NullVariable, Variable, constant
from ..variables.builder import wrap
from ..variables.builtins import BuiltinVariable
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
from ..variables.tensor import TensorMethodVariable, TensorVariable
from .break_rendering import BreakSite, Rendered, Rendering, Slot, result
from .exceptions import TracedException, exception_value, matches
from .registry import Handler, OpcodeRegistry, running_version

if TYPE_CHECKING:
    from .frame import Frame

H = TypeVar("H")
REGISTRY = OpcodeRegistry()
op = REGISTRY.register


@cache
def handlers_for_running_python() -> dict[str, Handler]:
    """opname -> handler on the running Python (the interpreter's dispatch table)."""
    return REGISTRY.handlers(running_version())


@cache
def renderings_for_running_python() -> dict[str, Rendering]:
    """opname -> eager rendering of the instructions that can break the graph on the running Python."""
    return REGISTRY.renderings(running_version())


_RUNNING_TABLES = (handlers_for_running_python, renderings_for_running_python)


def _clear_running_tables() -> None:
    for table in _RUNNING_TABLES:
        table.cache_clear()


# derived from the registry alone: a reset keeps them (built again on their next use if cleared)
process_state.register(
    "interpreter.opcode_tables",
    _clear_running_tables,
    lambda: sum(table.cache_info().currsize for table in _RUNNING_TABLES),
    memo=True,
)


# -- eager renderings shared by several opcodes -------------------------------------------------


def _assigns(template: str, pops: int) -> Rendering:
    """`___r = <template>`: the instruction consumes the top `pops` entries (`{0}` is the deepest
    of them) and pushes its result; `{argval}` is the instruction's argument value."""

    def render(site: BreakSite, inst: dis.Instruction) -> Rendered:
        expr = template.format(*site.values[len(site.values) - pops :], argval=inst.argval)
        return [f"___r = {expr}"], [(None, site.next_offset, [*site.rest(pops), result()])]

    return render


def _performs(template: str, pops: int) -> Rendering:
    """A statement consuming the top `pops` entries (`{0}` the deepest) and pushing nothing."""

    def render(site: BreakSite, inst: dis.Instruction) -> Rendered:
        line = template.format(*site.values[len(site.values) - pops :], argval=inst.argval)
        return [line], [(None, site.next_offset, site.rest(pops))]

    return render


def _jumps_if(test: str) -> Rendering:
    """A conditional jump popping its operand (`{0}`): the resume at the target when `test` holds."""

    def render(site: BreakSite, inst: dis.Instruction) -> Rendered:
        line = f"___c = {test.format(site.values[-1])}"
        return [line], [("___c", inst.argval, site.rest(1)), (None, site.next_offset, site.rest(1))]

    return render


# -- no-ops -------------------------------------------------------------------------------------


@op("NOP", "RESUME", "CACHE", "EXTENDED_ARG", "MAKE_CELL", "COPY_FREE_VARS")
@op("PRECALL", max_ver=(3, 11))
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


@op("LOAD_FAST")
@op("LOAD_FAST_CHECK", min_ver=(3, 12))
def _load_fast(f: Frame, inst: dis.Instruction) -> None:
    f.push(f.load_local(inst.argval))


@op("LOAD_FAST_AND_CLEAR", min_ver=(3, 12))
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


def _store_global_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    return [f"{site.globals_expr()}[{inst.argval!r}] = {site.values[-1]}"], [(None, site.next_offset, site.rest(1))]


@op("STORE_GLOBAL", eager=_store_global_eager)
def _store_global(f: Frame, inst: dis.Instruction) -> None:
    value = f.pop()
    f.output.side_effects.global_written(f.f_globals, inst.argval, value)
    f.output.global_cache[(id(f.f_globals), inst.argval)] = value


@op("LOAD_DEREF")
@op("LOAD_CLASSDEREF", max_ver=(3, 11))
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


def _loads_attr(pushes_null: Callable[[dis.Instruction], bool]) -> Rendering:
    """`___r = obj.name`, pushing a NULL below the result where the instruction does."""

    def render(site: BreakSite, inst: dis.Instruction) -> Rendered:
        new = [*site.rest(1), Slot(NULL_STACK_ENTRY), result()] if pushes_null(inst) else [*site.rest(1), result()]
        return [f"___r = {site.values[-1]}.{inst.argval}"], [(None, site.next_offset, new)]

    return render


@op("LOAD_ATTR", min_ver=(3, 12), eager=_loads_attr(lambda inst: bool(inst.arg & 1)))
def _load_attr_312(f: Frame, inst: dis.Instruction) -> None:
    obj = f.pop()
    if inst.arg & 1:
        f.push(NULL)
    f.push(obj.getattr(f, inst.argval))


@op("LOAD_ATTR", max_ver=(3, 11), eager=_loads_attr(lambda inst: False))
def _load_attr_311(f: Frame, inst: dis.Instruction) -> None:
    f.push(f.pop().getattr(f, inst.argval))


@op("LOAD_METHOD", max_ver=(3, 11), eager=_loads_attr(lambda inst: True))
def _load_method(f: Frame, inst: dis.Instruction) -> None:
    obj = f.pop()
    f.push(NULL)
    f.push(obj.getattr(f, inst.argval))


@op("STORE_ATTR", eager=_performs("{1}.{argval} = {0}", 2))
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
    f.pop().delattr(f, inst.argval)


@op("LOAD_SUPER_ATTR", min_ver=(3, 12))
def _load_super_attr(f: Frame, inst: dis.Instruction) -> None:
    obj = f.pop()
    cls = f.pop()
    f.pop()  # the global `super`
    attr = SuperVariable(cls.as_constant(), obj).getattr(f, inst.argval)
    if inst.arg & 1:
        f.push(NULL)
    f.push(attr)


@op("BINARY_SUBSCR", eager=_assigns("{0}[{1}]", 2))
def _binary_subscr(f: Frame, inst: dis.Instruction) -> None:
    key = f.pop()
    container = f.pop()
    f.push(container.getitem(f, key))


@op("BINARY_SLICE", min_ver=(3, 12), eager=_assigns("{0}[{1}:{2}]", 3))
def _binary_slice(f: Frame, inst: dis.Instruction) -> None:
    end, start = f.pop(), f.pop()
    container = f.pop()
    f.push(container.getitem(f, _make_slice([start, end])))


@op("STORE_SUBSCR", eager=_performs("{1}[{2}] = {0}", 3))
def _store_subscr(f: Frame, inst: dis.Instruction) -> None:
    key = f.pop()
    container = f.pop()
    value = f.pop()
    _setitem(f, container, key, value)


@op("STORE_SLICE", min_ver=(3, 12), eager=_performs("{1}[{2}:{3}] = {0}", 4))
def _store_slice(f: Frame, inst: dis.Instruction) -> None:
    end, start = f.pop(), f.pop()
    container = f.pop()
    value = f.pop()
    _setitem(f, container, _make_slice([start, end]), value)


def _setitem(f: Frame, container: Variable, key: Variable, value: Variable) -> None:
    container.setitem(f, key, value)  # a tensor records it in the graph


@op("DELETE_SUBSCR", eager=_performs("del {0}[{1}]", 2))
def _delete_subscr(f: Frame, inst: dis.Instruction) -> None:
    key = f.pop()
    container = f.pop()
    container.delitem(f, key)


@op("BUILD_SLICE")
def _build_slice(f: Frame, inst: dis.Instruction) -> None:
    f.push(_make_slice(f.popn(inst.arg)))


def _make_slice(parts: list[Variable]) -> Variable:
    if all(p.is_constant() for p in parts):
        return constant(slice(*[p.as_constant() for p in parts]))
    return SliceVariable(parts)


# -- operators ----------------------------------------------------------------------------------


def _operator_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    """`___r = op(a, b)` with the operator function of BINARY_OP or COMPARE_OP bound by name."""
    fn = operators.BINARY_OPS[inst.arg] if inst.opname == "BINARY_OP" else operators.COMPARE_OPS[inst.argval]
    name = site.bind(fn, "op")
    values = site.values
    return [f"___r = {name}({values[-2]}, {values[-1]})"], [(None, site.next_offset, [*site.rest(2), result()])]


@op("BINARY_OP", eager=_operator_eager)
def _binary_op(f: Frame, inst: dis.Instruction) -> None:
    b = f.pop()
    a = f.pop()
    f.push(operators.binary(f, operators.BINARY_OPS[inst.arg], a, b))


@op("COMPARE_OP", eager=_operator_eager)
def _compare_op(f: Frame, inst: dis.Instruction) -> None:
    b = f.pop()
    a = f.pop()
    f.push(operators.binary(f, operators.COMPARE_OPS[inst.argval], a, b))


def _is_or_contains_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    word = {"IS_OP": "is", "CONTAINS_OP": "in"}[inst.opname]
    test = f"not {word}" if inst.opname == "CONTAINS_OP" and inst.arg else f"{word} not" if inst.arg else word
    values = site.values
    return [f"___r = {values[-2]} {test} {values[-1]}"], [(None, site.next_offset, [*site.rest(2), result()])]


@op("IS_OP", eager=_is_or_contains_eager)
def _is_op(f: Frame, inst: dis.Instruction) -> None:
    b = f.pop()
    a = f.pop()
    same = operators.is_same(f, a, b)
    f.push(constant(same != bool(inst.arg)))


@op("CONTAINS_OP", eager=_is_or_contains_eager)
def _contains_op(f: Frame, inst: dis.Instruction) -> None:
    container = f.pop()
    item = f.pop()
    f.push(constant(operators.contains(f, item, container) != bool(inst.arg)))


@op("UNARY_NEGATIVE", eager=_assigns("-{0}", 1))
def _unary_negative(f: Frame, inst: dis.Instruction) -> None:
    f.push(operators.unary(f, operator.neg, f.pop()))


@op("UNARY_POSITIVE", max_ver=(3, 11), eager=_assigns("+{0}", 1))
def _unary_positive(f: Frame, inst: dis.Instruction) -> None:
    f.push(operators.unary(f, operator.pos, f.pop()))


@op("UNARY_INVERT", eager=_assigns("~{0}", 1))
def _unary_invert(f: Frame, inst: dis.Instruction) -> None:
    f.push(operators.unary(f, operator.invert, f.pop()))


@op("UNARY_NOT", eager=_assigns("not {0}", 1))
def _unary_not(f: Frame, inst: dis.Instruction) -> None:
    f.push(operators.unary(f, operator.not_, f.pop()))


@op("CALL_INTRINSIC_1", min_ver=(3, 12))
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


@op("LIST_TO_TUPLE", max_ver=(3, 11))
def _list_to_tuple(f: Frame, inst: dis.Instruction) -> None:
    f.push(TupleVariable(f.pop().unpack(f)))


def _unpack_sequence_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    names = [f"___r{i}" for i in range(inst.arg)]
    lines = [f"{', '.join(names)}{',' if inst.arg == 1 else ''} = {site.values[-1]}"]
    return lines, [(None, site.next_offset, [*site.rest(1), *[Slot(VALUE_STACK_ENTRY, n) for n in reversed(names)]])]


@op("UNPACK_SEQUENCE", eager=_unpack_sequence_eager)
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


def _format_value_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    values = site.values
    has_spec = bool(inst.arg & 0x04)
    value = values[-2] if has_spec else values[-1]
    conversion = {0: "{0}", 1: "str({0})", 2: "repr({0})", 3: "ascii({0})"}[inst.arg & 0x03]
    spec = values[-1] if has_spec else "''"
    popped = 2 if has_spec else 1
    line = f"___r = format({conversion.format(value)}, {spec})"
    return [line], [(None, site.next_offset, [*site.rest(popped), result()])]


@op("FORMAT_VALUE", max_ver=(3, 12), eager=_format_value_eager)
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


@op("KW_NAMES", max_ver=(3, 12))
def _kw_names(f: Frame, inst: dis.Instruction) -> None:
    f.kw_names = f.code.co_consts[inst.arg]


def _reads_number_from_data(callee: Variable, args: list[Variable]) -> bool:
    """`t.item()`, `t.tolist()`, `int(t)`, `float(t)`: the call's result is Python numbers read
    from a tensor, new on every call."""
    if isinstance(callee, TensorMethodVariable):
        return callee.name in ("item", "tolist") and not args
    if isinstance(callee, BuiltinVariable) and callee.fn in (int, float):
        return len(args) == 1 and isinstance(args[0], TensorVariable)
    return False


def _call_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    stack, values = site.frame.stack, site.values
    argc = inst.arg
    first, second = stack[-argc - 2], stack[-argc - 1]
    args = values[len(values) - argc :]
    if isinstance(first, NullVariable):
        fn = site.callable_expr(second)
        dynamic = _reads_number_from_data(second, stack[len(stack) - argc :])
    else:
        fn = site.callable_expr(first)
        args = [values[-argc - 1], *args]
        dynamic = _reads_number_from_data(first, stack[len(stack) - argc - 1 :])
    kw_names = site.frame.kw_names
    if kw_names:
        positional, keywords = args[: len(args) - len(kw_names)], args[len(args) - len(kw_names) :]
        args = positional + [f"{k}={v}" for k, v in zip(kw_names, keywords)]
    return [f"___r = {fn}({', '.join(args)})"], [(None, site.next_offset, [*site.rest(argc + 2), result(dynamic)])]


@op("CALL", eager=_call_eager)
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


def _call_function_ex_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    values, slots = site.values, site.slots
    has_kwargs = inst.arg & 1
    n = 2 + has_kwargs
    fn = site.callable_expr(site.frame.stack[-n])
    call_args = f"*{values[-n + 1]}" + (f", **{values[-1]}" if has_kwargs else "")
    below_null = len(slots) > n and slots[-n - 1].kind is NULL_STACK_ENTRY
    return [f"___r = {fn}({call_args})"], [(None, site.next_offset, [*site.rest(n + below_null), result()])]


@op("CALL_FUNCTION_EX", eager=_call_function_ex_eager)
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


@op("RETURN_CONST", min_ver=(3, 12))
def _return_const(f: Frame, inst: dis.Instruction) -> None:
    f.return_value = constant(inst.argval)


# -- control flow -------------------------------------------------------------------------------


@op("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
@op("JUMP", min_ver=(3, 12))
def _jump(f: Frame, inst: dis.Instruction) -> None:
    f.jump_to(inst.argval)


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


@op("POP_JUMP_IF_TRUE", min_ver=(3, 12), eager=_jumps_if("bool({0})"))
@op("POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE", max_ver=(3, 11), eager=_jumps_if("bool({0})"))
def _pop_jump_if_true(f: Frame, inst: dis.Instruction) -> None:
    if f.pop().truth(f):
        f.jump_to(inst.argval)


@op("POP_JUMP_IF_FALSE", min_ver=(3, 12), eager=_jumps_if("not {0}"))
@op("POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE", max_ver=(3, 11), eager=_jumps_if("not {0}"))
def _pop_jump_if_false(f: Frame, inst: dis.Instruction) -> None:
    if not f.pop().truth(f):
        f.jump_to(inst.argval)


@op("POP_JUMP_IF_NONE", min_ver=(3, 12), eager=_jumps_if("{0} is None"))
@op("POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE", max_ver=(3, 11), eager=_jumps_if("{0} is None"))
def _pop_jump_if_none(f: Frame, inst: dis.Instruction) -> None:
    if _is_none(f, f.pop()):
        f.jump_to(inst.argval)


@op("POP_JUMP_IF_NOT_NONE", min_ver=(3, 12), eager=_jumps_if("{0} is not None"))
@op(
    "POP_JUMP_FORWARD_IF_NOT_NONE",
    "POP_JUMP_BACKWARD_IF_NOT_NONE",
    max_ver=(3, 11),
    eager=_jumps_if("{0} is not None"),
)
def _pop_jump_if_not_none(f: Frame, inst: dis.Instruction) -> None:
    if not _is_none(f, f.pop()):
        f.jump_to(inst.argval)


def _jump_or_pop_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    test = "" if inst.opname == "JUMP_IF_TRUE_OR_POP" else "not "
    line = f"___c = {test}{site.values[-1]}"
    return [line], [("___c", inst.argval, site.slots), (None, site.next_offset, site.rest(1))]


@op("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP", max_ver=(3, 11), eager=_jump_or_pop_eager)
def _jump_or_pop(f: Frame, inst: dis.Instruction) -> None:
    value = f.stack[-1]
    if value.truth(f) == (inst.opname == "JUMP_IF_TRUE_OR_POP"):
        f.jump_to(inst.argval)
    else:
        f.pop()


@op("GET_ITER", eager=_assigns("iter({0})", 1))
def _get_iter(f: Frame, inst: dis.Instruction) -> None:
    f.push(iterate(f, f.pop()))


def _next_item(f: Frame) -> Variable | None:
    """FOR_ITER's step: the next item pushed (the item), or the exhausted iterator popped (None)."""
    iterator = f.stack[-1]
    if not isinstance(iterator, IteratorVariable):
        raise Unsupported(f"for loop over {iterator.describe()}")
    item = iterator.next(f)
    if item is not None:
        f.push(item)
        return item
    f.pop()
    return None


_END = object()  # what `next(it, ___END)` returns for an exhausted iterator at a break


def _for_iter_eager(skips_end_for: bool) -> Rendering:
    """`___r = next(it, ___END)`, resuming after the loop when the iterator is exhausted."""

    def render(site: BreakSite, inst: dis.Instruction) -> Rendered:
        exhausted = inst.argval
        if skips_end_for:
            index = site.frame.index_of_offset[exhausted]
            if site.frame.instructions[index].opname == "END_FOR":
                exhausted = site.frame.instructions[index + 1].offset
        site.namespace["___END"] = _END
        lines = [f"___r = next({site.values[-1]}, ___END)"]
        return lines, [("___r is ___END", exhausted, site.rest(1)), (None, site.next_offset, [*site.slots, result()])]

    return render


@op("FOR_ITER", max_ver=(3, 11), eager=_for_iter_eager(skips_end_for=False))
def _for_iter_311(f: Frame, inst: dis.Instruction) -> None:
    if _next_item(f) is None:
        f.jump_to(inst.argval)


@op("FOR_ITER", min_ver=(3, 12), eager=_for_iter_eager(skips_end_for=True))
def _for_iter_312(f: Frame, inst: dis.Instruction) -> None:
    """An exhausted iterator jumps to the END_FOR after the loop, and skips it."""
    if _next_item(f) is None:
        f.jump_to(inst.argval)
        if f.instructions[f.ip].opname == "END_FOR":
            f.ip += 1


@op("END_FOR", min_ver=(3, 12))
def _end_for(f: Frame, inst: dis.Instruction) -> None:
    f.popn(2)


def _before_with_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    lines = [f"___x = {site.values[-1]}", "___r = type(___x).__enter__(___x)"]
    exit_slot = Slot(VALUE_STACK_ENTRY, "___MethodType(type(___x).__exit__, ___x)")
    site.namespace["___MethodType"] = types.MethodType
    return lines, [(None, site.next_offset, [*site.rest(1), exit_slot, result()])]


@op("BEFORE_WITH", eager=_before_with_eager)
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
        raise Unsupported(f"`with` on {context.describe()}: {e.reason}", kind=e.kind) from e
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


def _raise_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    if inst.arg not in (1, 2):
        raise Unsupported(f"a graph break at {inst.opname} is not supported")
    cause = f" from {site.values[-1]}" if inst.arg == 2 else ""
    return [f"raise {site.values[-inst.arg]}{cause}"], []


@op("RAISE_VARARGS", eager=_raise_eager)
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
