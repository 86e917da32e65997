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

import builtins
import dis
import importlib.util
import operator
import sys
import types
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, TypeVar

import torch

from .. import process_state
from ..bytecode.resume_code import NULL_STACK_ENTRY, VALUE_STACK_ENTRY
from ..errors import Unsupported
from ..guards.sources import FixedObjectSource, ItemSource
from ..shapes.fake import is_symbolic
from ..variables import identity, operators, patterns
from ..variables.base import Variable
from ..variables.builder import wrap
from ..variables.builtins import BuiltinVariable
from ..variables.cells import Cell, CellVariable
from ..variables.constants import NULL, GuardedOnUseConstant, IteratorVariable, NullVariable, constant
from ..variables.containers import (
    DictVariable,
    ListVariable,
    SequenceVariable,
    SetVariable,
    SliceVariable,
    TupleVariable,
    dict_key,
    iterate,
)
from ..variables.contexts import ContextEnterVariable, GradModeContextVariable
from ..variables.exceptions import CallerExceptionVariable, HandlerEntryVariable, raise_new
from ..variables.functions import NestedFunctionVariable
from ..variables.generators import GeneratorVariable, Yielded, send_into
from ..variables.global_contexts import GlobalContextVariable
from ..variables.tensor import TensorMethodVariable, TensorVariable
from ..variables.user_classes import SuperVariable, UserClassVariable, class_variable
from .break_rendering import BreakSite, Rendered, Rendering, Slot, result
from .exceptions import TracedException, exception_value, handler_for, matches
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


def _peeks(template: str, reads: int, helper: Callable[..., object] | None = None) -> Rendering:
    """`___r = <template>` over the top `reads` entries, which stay on the stack below the result;
    `{fn}` names `helper` in the generated code."""

    def render(site: BreakSite, inst: dis.Instruction) -> Rendered:
        fn = site.bind(helper, "match") if helper is not None else ""
        expr = template.format(*site.values[len(site.values) - reads :], fn=fn)
        return [f"___r = {expr}"], [(None, site.next_offset, [*site.slots, result()])]

    return render


def _jumps_if(test: str) -> Rendering:
    """A conditional jump popping its operand (`{0}`): the resume at the target when `test` holds."""

    def render(site: BreakSite, inst: dis.Instruction) -> Rendered:
        line = f"___c = {test.format(site.values[-1])}"
        return [line], [("___c", inst.argval, site.rest(1)), (None, site.next_offset, site.rest(1))]

    return render


# -- no-ops -------------------------------------------------------------------------------------


@op("NOP", "RESUME", "CACHE", "EXTENDED_ARG", "MAKE_CELL", "COPY_FREE_VARS")
@op("NOT_TAKEN", min_ver=(3, 14))
@op("PRECALL", max_ver=(3, 11))
def _nop(frame: Frame, inst: dis.Instruction) -> None:
    return None


# -- stack --------------------------------------------------------------------------------------


@op("POP_TOP")
def _pop_top(frame: Frame, inst: dis.Instruction) -> None:
    frame.pop()


@op("PUSH_NULL")
def _push_null(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(NULL)


@op("COPY")
def _copy(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(frame.stack[-inst.arg])


@op("SWAP")
def _swap(frame: Frame, inst: dis.Instruction) -> None:
    frame.stack[-1], frame.stack[-inst.arg] = frame.stack[-inst.arg], frame.stack[-1]


# -- loads and stores ---------------------------------------------------------------------------


@op("LOAD_CONST")
@op("LOAD_SMALL_INT", min_ver=(3, 14))
def _load_const(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(constant(inst.argval))


# LOAD_COMMON_CONSTANT's argument indexes a table of the interpreter's (CPython's
# `opcode._common_constants`); 3.15 appended to it.
_COMMON_CONSTANTS_314 = (AssertionError, NotImplementedError, tuple, all, any)
_COMMON_CONSTANTS_315 = (*_COMMON_CONSTANTS_314, list, set, None, "", True, False, -1)


def _load_common_constant(table: tuple) -> Handler:
    def load_common_constant(frame: Frame, inst: dis.Instruction) -> None:
        frame.push(wrap(frame, table[inst.arg], None))

    return load_common_constant


op("LOAD_COMMON_CONSTANT", min_ver=(3, 14), max_ver=(3, 14))(_load_common_constant(_COMMON_CONSTANTS_314))
op("LOAD_COMMON_CONSTANT", min_ver=(3, 15))(_load_common_constant(_COMMON_CONSTANTS_315))


@op("LOAD_FAST", max_ver=(3, 12))
@op("LOAD_FAST_CHECK", min_ver=(3, 12))
def _load_fast(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(frame.load_local(inst.argval))


@op("LOAD_FAST", min_ver=(3, 13))
@op("LOAD_FAST_BORROW", min_ver=(3, 14))
def _load_fast_or_cell(frame: Frame, inst: dis.Instruction) -> None:
    """From 3.13 the compiler writes LOAD_CLOSURE as a LOAD_FAST of the cell's slot, which
    pushes the cell itself."""
    if inst.argval in frame.code.co_cellvars or inst.argval in frame.code.co_freevars:
        _load_closure(frame, inst)
    else:
        _load_fast(frame, inst)


@op("LOAD_FAST_AND_CLEAR", min_ver=(3, 12))
def _load_fast_and_clear(frame: Frame, inst: dis.Instruction) -> None:
    if inst.argval in frame.locals:
        value = frame.load_local(inst.argval)
        del frame.locals[inst.argval]
        frame.push(value)
    else:
        frame.push(NULL)


@op("LOAD_FAST_LOAD_FAST", min_ver=(3, 13))
@op("LOAD_FAST_BORROW_LOAD_FAST_BORROW", min_ver=(3, 14))
def _load_fast_load_fast(frame: Frame, inst: dis.Instruction) -> None:
    first, second = inst.argval
    frame.push(frame.load_local(first))
    frame.push(frame.load_local(second))


def _store_local(frame: Frame, name: str, value: Variable) -> None:
    if isinstance(value, NullVariable):
        frame.locals.pop(name, None)  # restoring an unbound comprehension variable (3.12+)
    else:
        frame.locals[name] = value


@op("STORE_FAST")
def _store_fast(frame: Frame, inst: dis.Instruction) -> None:
    _store_local(frame, inst.argval, frame.pop())


@op("STORE_FAST_LOAD_FAST", min_ver=(3, 13))
def _store_fast_load_fast(frame: Frame, inst: dis.Instruction) -> None:
    stored, loaded = inst.argval
    _store_local(frame, stored, frame.pop())
    frame.push(frame.load_local(loaded))


@op("STORE_FAST_STORE_FAST", min_ver=(3, 13))
def _store_fast_store_fast(frame: Frame, inst: dis.Instruction) -> None:
    first, second = inst.argval  # the top of the stack goes to the first name
    _store_local(frame, first, frame.pop())
    _store_local(frame, second, frame.pop())


@op("DELETE_FAST")
def _delete_fast(frame: Frame, inst: dis.Instruction) -> None:
    frame.locals.pop(inst.argval, None)


# Where the NULL of a call sits: below the callable on 3.11 and 3.12 ([NULL, callable, args]),
# above it from 3.13 ([callable, NULL, args]). Instructions that push a callable with its NULL
# (LOAD_GLOBAL, LOAD_ATTR, LOAD_SUPER_ATTR with the low bit set) have one row per layout.


def _null_below(frame: Frame, value: Variable, with_null: bool) -> None:
    if with_null:
        frame.push(NULL)
    frame.push(value)


def _null_above(frame: Frame, value: Variable, with_null: bool) -> None:
    frame.push(value)
    if with_null:
        frame.push(NULL)


PushCallable = Callable[["Frame", Variable, bool], None]


def _load_global(push: PushCallable) -> Handler:
    def load_global(frame: Frame, inst: dis.Instruction) -> None:
        push(frame, frame.load_global(inst.argval), bool(inst.arg & 1))

    return load_global


op("LOAD_GLOBAL", max_ver=(3, 12))(_load_global(_null_below))
op("LOAD_GLOBAL", min_ver=(3, 13))(_load_global(_null_above))


def _store_global_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    return [f"{site.globals_expr()}[{inst.argval!r}] = {site.values[-1]}"], [(None, site.next_offset, site.rest(1))]


@op("STORE_GLOBAL", eager=_store_global_eager)
def _store_global(frame: Frame, inst: dis.Instruction) -> None:
    value = frame.pop()
    frame.output.side_effects.global_written(frame.f_globals, inst.argval, value)
    frame.output.global_cache[(id(frame.f_globals), inst.argval)] = value


@op("LOAD_DEREF")
@op("LOAD_CLASSDEREF", max_ver=(3, 11))
def _load_deref(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(frame.load_cell(inst.argval))


@op("STORE_DEREF")
def _store_deref(frame: Frame, inst: dis.Instruction) -> None:
    cell = frame.cells.get(inst.argval)
    if cell is None:
        frame.cells[inst.argval] = cell = Cell()
        cell.owner = (frame.code, inst.argval)
    cell.write(frame, frame.pop())


@op("DELETE_DEREF")
def _delete_deref(frame: Frame, inst: dis.Instruction) -> None:
    cell = frame.cells.get(inst.argval)
    if cell is None or cell.real is not None:
        raise Unsupported(f"deleting closure variable {inst.argval!r}")
    cell.contents = None


@op("LOAD_CLOSURE", max_ver=(3, 12))
def _load_closure(frame: Frame, inst: dis.Instruction) -> None:
    cell = frame.cells.get(inst.argval)
    if cell is None:
        frame.cells[inst.argval] = cell = Cell()
        cell.owner = (frame.code, inst.argval)
    cell.captured = True
    frame.push(CellVariable(cell))


def _loads_attr(pushes_null: Callable[[dis.Instruction], bool], null_below: bool = True) -> Rendering:
    """`___r = obj.name`, pushing a NULL below (or above) the result where the instruction does."""

    def render(site: BreakSite, inst: dis.Instruction) -> Rendered:
        pushed = [result()]
        if pushes_null(inst):
            pushed = [Slot(NULL_STACK_ENTRY), result()] if null_below else [result(), Slot(NULL_STACK_ENTRY)]
        return [f"___r = {site.values[-1]}.{inst.argval}"], [(None, site.next_offset, [*site.rest(1), *pushed])]

    return render


def _method_bit(inst: dis.Instruction) -> bool:
    return bool(inst.arg & 1)


def _attribute(frame: Frame, obj: Variable, name: str) -> Variable:
    """`obj.name`; a built container's `__class__` is its class (`x.__class__(items)` builds one
    of the same kind, a named tuple's too)."""
    if name == "__class__" and isinstance(obj, (SequenceVariable, DictVariable, SetVariable)):
        cls = obj.python_type()
        return BuiltinVariable(cls) if cls in (tuple, list, dict, set, frozenset) else class_variable(cls)
    return obj.getattr(frame, name)


def _load_attr(push: PushCallable) -> Handler:
    def load_attr(frame: Frame, inst: dis.Instruction) -> None:
        obj = frame.pop()
        push(frame, _attribute(frame, obj, inst.argval), _method_bit(inst))

    return load_attr


op("LOAD_ATTR", min_ver=(3, 12), max_ver=(3, 12), eager=_loads_attr(_method_bit))(_load_attr(_null_below))
op("LOAD_ATTR", min_ver=(3, 13), eager=_loads_attr(_method_bit, null_below=False))(_load_attr(_null_above))


@op("LOAD_ATTR", max_ver=(3, 11), eager=_loads_attr(lambda inst: False))
def _load_attr_311(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(_attribute(frame, frame.pop(), inst.argval))


@op("LOAD_METHOD", max_ver=(3, 11), eager=_loads_attr(lambda inst: True))
def _load_method(frame: Frame, inst: dis.Instruction) -> None:
    obj = frame.pop()
    frame.push(NULL)
    frame.push(_attribute(frame, obj, inst.argval))


@op("STORE_ATTR", eager=_performs("{1}.{argval} = {0}", 2))
def _store_attr(frame: Frame, inst: dis.Instruction) -> None:
    obj = frame.pop()
    value = frame.pop()
    obj.setattr(frame, inst.argval, value)


_SYS_MODULES = FixedObjectSource(sys.modules, "sys.modules")


@op("IMPORT_NAME")
def _import_name(frame: Frame, inst: dis.Instruction) -> None:
    """`import m` of a module that is already imported: no code runs, so it is just a lookup."""
    fromlist = frame.pop().as_constant()
    level = frame.pop().as_constant()
    name = inst.argval
    absolute = importlib.util.resolve_name("." * level + name, frame.f_globals.get("__package__")) if level else name
    if absolute not in sys.modules:
        raise Unsupported(f"import of {absolute}, which is not imported yet (importing runs its code)")
    found = absolute if fromlist or level else absolute.partition(".")[0]
    # read where the statement reads it, so what the trace takes from it is guarded
    frame.push(wrap(frame, sys.modules[found], ItemSource(_SYS_MODULES, found)))


@op("IMPORT_FROM")
def _import_from(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(frame.stack[-1].getattr(frame, inst.argval))


@op("DELETE_ATTR")
def _delete_attr(frame: Frame, inst: dis.Instruction) -> None:
    frame.pop().delattr(frame, inst.argval)


def _load_super_attr(push: PushCallable) -> Handler:
    def load_super_attr(frame: Frame, inst: dis.Instruction) -> None:
        obj = frame.pop()
        cls = frame.pop()
        frame.pop()  # the global `super`
        push(frame, SuperVariable(cls.as_constant(), obj).getattr(frame, inst.argval), _method_bit(inst))

    return load_super_attr


op("LOAD_SUPER_ATTR", min_ver=(3, 12), max_ver=(3, 12))(_load_super_attr(_null_below))
op("LOAD_SUPER_ATTR", min_ver=(3, 13))(_load_super_attr(_null_above))


@op("BINARY_SUBSCR", max_ver=(3, 13), eager=_assigns("{0}[{1}]", 2))
def _binary_subscr(frame: Frame, inst: dis.Instruction) -> None:
    key = frame.pop()
    container = frame.pop()
    frame.push(container.getitem(frame, key))


@op("BINARY_SLICE", min_ver=(3, 12), eager=_assigns("{0}[{1}:{2}]", 3))
def _binary_slice(frame: Frame, inst: dis.Instruction) -> None:
    end, start = frame.pop(), frame.pop()
    container = frame.pop()
    frame.push(container.getitem(frame, _make_slice([start, end])))


@op("STORE_SUBSCR", eager=_performs("{1}[{2}] = {0}", 3))
def _store_subscr(frame: Frame, inst: dis.Instruction) -> None:
    key = frame.pop()
    container = frame.pop()
    value = frame.pop()
    _setitem(frame, container, key, value)


@op("STORE_SLICE", min_ver=(3, 12), eager=_performs("{1}[{2}:{3}] = {0}", 4))
def _store_slice(frame: Frame, inst: dis.Instruction) -> None:
    end, start = frame.pop(), frame.pop()
    container = frame.pop()
    value = frame.pop()
    _setitem(frame, container, _make_slice([start, end]), value)


def _setitem(frame: Frame, container: Variable, key: Variable, value: Variable) -> None:
    container.setitem(frame, key, value)  # a tensor records it in the graph


@op("DELETE_SUBSCR", eager=_performs("del {0}[{1}]", 2))
def _delete_subscr(frame: Frame, inst: dis.Instruction) -> None:
    key = frame.pop()
    container = frame.pop()
    container.delitem(frame, key)


@op("BUILD_SLICE")
def _build_slice(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(_make_slice(frame.popn(inst.arg)))


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


def _compare_to_bool_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    """3.13+: argument bit 16 makes COMPARE_OP convert its result to bool (the jump after it
    then takes bools only)."""
    lines, continuations = _operator_eager(site, inst)
    if inst.arg & 16:
        lines.append("___r = bool(___r)")
    return lines, continuations


@op("BINARY_OP", max_ver=(3, 13), eager=_operator_eager)
def _binary_op(frame: Frame, inst: dis.Instruction) -> None:
    b = frame.pop()
    a = frame.pop()
    frame.push(operators.binary(frame, operators.BINARY_OPS[inst.arg], a, b))


_NB_SUBSCR = 26  # 3.14+: BINARY_OP's subscript form, `a[b]` (BINARY_SUBSCR before)


def _binary_op_or_subscript_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    if inst.arg == _NB_SUBSCR:
        return _assigns("{0}[{1}]", 2)(site, inst)
    return _operator_eager(site, inst)


@op("BINARY_OP", min_ver=(3, 14), eager=_binary_op_or_subscript_eager)
def _binary_op_or_subscript(frame: Frame, inst: dis.Instruction) -> None:
    if inst.arg == _NB_SUBSCR:
        _binary_subscr(frame, inst)
    else:
        _binary_op(frame, inst)


@op("COMPARE_OP", max_ver=(3, 12), eager=_operator_eager)
@op("COMPARE_OP", min_ver=(3, 13), eager=_compare_to_bool_eager)
def _compare_op(frame: Frame, inst: dis.Instruction) -> None:
    b = frame.pop()
    a = frame.pop()
    frame.push(operators.binary(frame, operators.COMPARE_OPS[inst.argval], a, b))


def _is_or_contains_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    word = {"IS_OP": "is", "CONTAINS_OP": "in"}[inst.opname]
    test = f"not {word}" if inst.opname == "CONTAINS_OP" and inst.arg else f"{word} not" if inst.arg else word
    values = site.values
    return [f"___r = {values[-2]} {test} {values[-1]}"], [(None, site.next_offset, [*site.rest(2), result()])]


@op("IS_OP", eager=_is_or_contains_eager)
def _is_op(frame: Frame, inst: dis.Instruction) -> None:
    b = frame.pop()
    a = frame.pop()
    same = identity.is_same(frame, a, b)
    frame.push(constant(same != bool(inst.arg)))


@op("CONTAINS_OP", eager=_is_or_contains_eager)
def _contains_op(frame: Frame, inst: dis.Instruction) -> None:
    container = frame.pop()
    item = frame.pop()
    frame.push(constant(operators.contains(frame, item, container) != bool(inst.arg)))


@op("UNARY_NEGATIVE", eager=_assigns("-{0}", 1))
def _unary_negative(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(operators.unary(frame, operator.neg, frame.pop()))


@op("UNARY_POSITIVE", max_ver=(3, 11), eager=_assigns("+{0}", 1))
def _unary_positive(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(operators.unary(frame, operator.pos, frame.pop()))


@op("UNARY_INVERT", eager=_assigns("~{0}", 1))
def _unary_invert(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(operators.unary(frame, operator.invert, frame.pop()))


@op("TO_BOOL", min_ver=(3, 13), eager=_assigns("bool({0})", 1))
def _to_bool(frame: Frame, inst: dis.Instruction) -> None:
    value = frame.pop()
    then = frame.instructions[frame.ip] if frame.ip < len(frame.instructions) else None
    if then is not None and then.opname == "POP_JUMP_IF_TRUE" and _asserted_in_graph(frame, value, frame.ip + 1):
        frame.push(constant(True))  # an `assert` on a tensor: the jump then skips the failing branch
        return
    frame.push(constant(value.truth(frame)))


@op("UNARY_NOT", eager=_assigns("not {0}", 1))
def _unary_not(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(operators.unary(frame, operator.not_, frame.pop()))


@op("CALL_INTRINSIC_1", min_ver=(3, 12))
def _call_intrinsic_1(frame: Frame, inst: dis.Instruction) -> None:
    if inst.argval == "INTRINSIC_UNARY_POSITIVE" or inst.arg == 5:
        frame.push(operators.unary(frame, operator.pos, frame.pop()))
    elif inst.argval == "INTRINSIC_LIST_TO_TUPLE" or inst.arg == 6:
        frame.push(TupleVariable(frame.pop().unpack(frame)))
    elif inst.argval == "INTRINSIC_STOPITERATION_ERROR" or inst.arg == 3:
        raise TracedException(frame.pop(), reraise=True)  # a generator's StopIteration guard: as is
    else:
        raise Unsupported(f"CALL_INTRINSIC_1 {inst.argrepr}")


# -- containers ---------------------------------------------------------------------------------


@op("BUILD_TUPLE")
def _build_tuple(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(TupleVariable(frame.popn(inst.arg)))


@op("BUILD_LIST")
def _build_list(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(ListVariable(frame.popn(inst.arg)))


@op("BUILD_MAP")
def _build_map(frame: Frame, inst: dis.Instruction) -> None:
    flat = frame.popn(2 * inst.arg)
    frame.push(DictVariable({dict_key(flat[i], frame): flat[i + 1] for i in range(0, len(flat), 2)}))


@op("BUILD_CONST_KEY_MAP", max_ver=(3, 13))
def _build_const_key_map(frame: Frame, inst: dis.Instruction) -> None:
    keys = frame.pop().as_constant()
    values = frame.popn(inst.arg)
    frame.push(DictVariable(dict(zip(keys, values))))


@op("BUILD_SET")
def _build_set(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(SetVariable.from_items(frame, frame.popn(inst.arg)))


@op("SET_ADD")
def _set_add(frame: Frame, inst: dis.Instruction) -> None:
    value = frame.pop()
    frame.stack[-inst.arg].call_method(frame, "add", [value], {})


@op("SET_UPDATE")
def _set_update(frame: Frame, inst: dis.Instruction) -> None:
    value = frame.pop()
    frame.stack[-inst.arg].call_method(frame, "update", [value], {})


def _building(frame: Frame, depth: int, kind: type[H]) -> H:
    """The container a comprehension or display builds, `depth` entries down the stack.

    In a resume function it is an argument (the list built so far), so its changes go through the
    container's own methods, which record them as side effects to replay.
    """
    target = frame.stack[-depth]
    if not isinstance(target, kind):
        raise Unsupported(f"{kind.__name__} expected {depth} entries down the stack, found {target.describe()}")
    return target


@op("LIST_APPEND")
def _list_append(frame: Frame, inst: dis.Instruction) -> None:
    value = frame.pop()
    _building(frame, inst.arg, ListVariable).call_method(frame, "append", [value], {})


@op("LIST_EXTEND")
def _list_extend(frame: Frame, inst: dis.Instruction) -> None:
    value = frame.pop()
    _building(frame, inst.arg, ListVariable).call_method(frame, "extend", [value], {})


@op("MAP_ADD")
def _map_add(frame: Frame, inst: dis.Instruction) -> None:
    value = frame.pop()
    key = frame.pop()
    _building(frame, inst.arg, DictVariable).setitem(frame, key, value)


@op("DICT_UPDATE", "DICT_MERGE")
def _dict_update(frame: Frame, inst: dis.Instruction) -> None:
    value = frame.pop()
    target = _building(frame, inst.arg, DictVariable)
    if isinstance(value, DictVariable):
        target.call_method(frame, "update", [value], {})
        return
    # any other mapping, as CPython merges it: its keys(), then each key looked up with [ ]
    kind = value.python_type()
    if not hasattr(kind, "keys"):
        raise raise_new(frame, TypeError, f"argument after ** must be a mapping, not {kind.__name__}")
    for key in value.call_method(frame, "keys", [], {}).unpack(frame):
        target.setitem(frame, key, value.getitem(frame, key))


@op("LIST_TO_TUPLE", max_ver=(3, 11))
def _list_to_tuple(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(TupleVariable(frame.pop().unpack(frame)))


def _unpack_sequence_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    names = [f"___r{i}" for i in range(inst.arg)]
    lines = [f"{', '.join(names)}{',' if inst.arg == 1 else ''} = {site.values[-1]}"]
    return lines, [(None, site.next_offset, [*site.rest(1), *[Slot(VALUE_STACK_ENTRY, n) for n in reversed(names)]])]


@op("UNPACK_SEQUENCE", eager=_unpack_sequence_eager)
def _unpack_sequence(frame: Frame, inst: dis.Instruction) -> None:
    items = frame.pop().unpack(frame)
    if len(items) != inst.arg:
        raise Unsupported(f"unpacking {len(items)} values into {inst.arg} names")
    frame.stack.extend(reversed(items))


@op("UNPACK_EX")
def _unpack_ex(frame: Frame, inst: dis.Instruction) -> None:
    before, after = inst.arg & 0xFF, inst.arg >> 8
    items = frame.pop().unpack(frame)
    if len(items) < before + after:
        raise Unsupported(f"unpacking {len(items)} values into at least {before + after} names")
    star = ListVariable(items[before : len(items) - after])
    frame.stack.extend(reversed([*items[:before], star, *items[len(items) - after :]]))


# An f-string field: its conversion (!s, !r, !a: 1, 2, 3) then `format` with its spec. One
# instruction up to 3.12 (FORMAT_VALUE); CONVERT_VALUE then FORMAT_SIMPLE / FORMAT_WITH_SPEC from 3.13.
_CONVERSIONS = {1: str, 2: repr, 3: ascii}
_CONVERSION_TEMPLATES = {0: "{0}", 1: "str({0})", 2: "repr({0})", 3: "ascii({0})"}


def _as_text(frame: Frame, value: Variable, conversion: int) -> Variable:
    """`str(value)` (conversion 0 or 1) or `repr(value)` (2) of a value that is not a constant, as
    the builtins work it out (a Python `__str__` inlined, a set subclass's text); for conversion
    0, only where its class formats as `object.__format__` does, by its `str()`."""
    if conversion == 0 and getattr(value.python_type(), "__format__", None) is not object.__format__:
        raise Unsupported(f"f-string formatting of {value.describe()}")
    if conversion == 3:
        raise Unsupported(f"ascii() of {value.describe()} in an f-string")
    return frame.wrap(repr if conversion == 2 else str, None).call(frame, [value], {})


def _formatted(frame: Frame, value: Variable, conversion: int, spec: Variable | None) -> Variable:
    if not value.is_constant() and (spec is None or spec.is_constant() and spec.as_constant() == ""):
        value, conversion = _as_text(frame, value, conversion), 0
    if not value.is_constant() or (spec is not None and not spec.is_constant()):
        raise Unsupported(f"f-string formatting of {value.describe()}")
    v = value.as_constant()
    if conversion:
        v = _CONVERSIONS[conversion](v)
    return constant(format(v, "" if spec is None else spec.as_constant()))


def _format_value_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    values = site.values
    has_spec = bool(inst.arg & 0x04)
    value = values[-2] if has_spec else values[-1]
    conversion = _CONVERSION_TEMPLATES[inst.arg & 0x03]
    spec = values[-1] if has_spec else "''"
    popped = 2 if has_spec else 1
    line = f"___r = format({conversion.format(value)}, {spec})"
    return [line], [(None, site.next_offset, [*site.rest(popped), result()])]


@op("FORMAT_VALUE", max_ver=(3, 12), eager=_format_value_eager)
def _format_value(frame: Frame, inst: dis.Instruction) -> None:
    spec = frame.pop() if inst.arg & 0x04 else None
    frame.push(_formatted(frame, frame.pop(), inst.arg & 0x03, spec))


def _convert_value_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    return _assigns(_CONVERSION_TEMPLATES[inst.arg], 1)(site, inst)


@op("CONVERT_VALUE", min_ver=(3, 13), eager=_convert_value_eager)
def _convert_value(frame: Frame, inst: dis.Instruction) -> None:
    value = frame.pop()
    if not value.is_constant():
        value = _as_text(frame, value, inst.arg)
        if not value.is_constant():
            raise Unsupported(f"f-string conversion of {value.describe()}")
        frame.push(value)
        return
    frame.push(constant(_CONVERSIONS[inst.arg](value.as_constant())))


@op("FORMAT_SIMPLE", min_ver=(3, 13), eager=_assigns("format({0})", 1))
def _format_simple(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(_formatted(frame, frame.pop(), 0, None))


@op("FORMAT_WITH_SPEC", min_ver=(3, 13), eager=_assigns("format({0}, {1})", 2))
def _format_with_spec(frame: Frame, inst: dis.Instruction) -> None:
    spec = frame.pop()
    frame.push(_formatted(frame, frame.pop(), 0, spec))


@op("BUILD_STRING")
def _build_string(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(constant("".join(p.as_constant() for p in frame.popn(inst.arg))))


# -- calls --------------------------------------------------------------------------------------


@op("KW_NAMES", max_ver=(3, 12))
def _kw_names(frame: Frame, inst: dis.Instruction) -> None:
    frame.kw_names = frame.code.co_consts[inst.arg]


def _reads_number_from_data(callee: Variable, args: list[Variable]) -> bool:
    """`t.item()`, `t.tolist()`, `int(t)`, `float(t)`: the call's result is Python numbers read
    from a tensor, new on every call."""
    if isinstance(callee, TensorMethodVariable):
        return callee.name in ("item", "tolist") and not args
    if isinstance(callee, BuiltinVariable) and callee.fn in (int, float):
        return len(args) == 1 and isinstance(args[0], TensorVariable)
    return False


def _callee_and_args(pair: list[Variable], args: list[Variable]) -> tuple[int, list[int]]:
    """Which of the two entries under a call's arguments is the callable, and the positions (in
    `pair + args`) of its arguments.

    The two are a callable and a NULL (the NULL below it on 3.11 and 3.12, above it from 3.13),
    or a method and its self in that order: without the NULL, the callable comes first either way.
    """
    kept = [i for i, var in enumerate(pair) if not isinstance(var, NullVariable)]
    return kept[0], [*kept[1:], *range(2, 2 + len(args))]


def _render_call(site: BreakSite, argc: int, kw_names: tuple[str, ...], extra: int) -> Rendered:
    """`___r = fn(a, k=v)` for a call of `argc` arguments (keywords last) with `extra` more
    entries above them (CALL_KW's names)."""
    stack, values = site.frame.stack, site.values
    start = len(stack) - extra - argc - 2
    entries, exprs = stack[start : len(stack) - extra], values[start : len(values) - extra]
    callee, arg_positions = _callee_and_args(entries[:2], entries[2:])
    args = [exprs[i] for i in arg_positions]
    dynamic = _reads_number_from_data(entries[callee], [entries[i] for i in arg_positions])
    split = len(args) - len(kw_names)
    rendered = [*args[:split], *[f"{k}={v}" for k, v in zip(kw_names, args[split:])]]
    line = f"___r = {site.callable_expr(entries[callee])}({', '.join(rendered)})"
    return [line], [(None, site.next_offset, [*site.rest(argc + 2 + extra), result(dynamic)])]


def _perform_call(frame: Frame, argc: int, kw_names: tuple[str, ...]) -> None:
    entries = frame.popn(argc + 2)
    callee, arg_positions = _callee_and_args(entries[:2], entries[2:])
    args = [entries[i] for i in arg_positions]
    split = len(args) - len(kw_names)
    frame.calling = (frame.current, entries[callee])
    frame.push(entries[callee].call(frame, args[:split], dict(zip(kw_names, args[split:]))))


def _call_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    return _render_call(site, inst.arg, site.frame.kw_names, 0)


@op("CALL", eager=_call_eager)
def _call(frame: Frame, inst: dis.Instruction) -> None:
    kw_names, frame.kw_names = frame.kw_names, ()
    _perform_call(frame, inst.arg, kw_names)


def _call_kw_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    return _render_call(site, inst.arg, site.frame.stack[-1].as_constant(), 1)


@op("CALL_KW", min_ver=(3, 13), eager=_call_kw_eager)
def _call_kw(frame: Frame, inst: dis.Instruction) -> None:
    """3.13+: the keyword names are a constant tuple on top of the stack (no KW_NAMES)."""
    kw_names = frame.pop().as_constant()
    _perform_call(frame, inst.arg, kw_names)


def _kwargs_entry(inst: dis.Instruction) -> bool:
    """Whether CALL_FUNCTION_EX has a kwargs entry on the stack: up to 3.13 where its argument's
    bit 1 says so; from 3.14 (no argument) always, a NULL when the call has no **kwargs."""
    return inst.arg is None or bool(inst.arg & 1)


def _has_kwargs(frame: Frame, inst: dis.Instruction) -> bool:
    return _kwargs_entry(inst) and not isinstance(frame.stack[-1], NullVariable)


def _call_function_ex_eager(null_below: bool) -> Rendering:
    """`___r = fn(*args, **kwargs)`; the callable's NULL is below it (3.11, 3.12, where present)
    or above it (3.13+)."""

    def render(site: BreakSite, inst: dis.Instruction) -> Rendered:
        values, slots = site.values, site.slots
        has_kwargs = _has_kwargs(site.frame, inst)
        n = 2 + _kwargs_entry(inst)
        call_args = f"*{values[1 - n]}" + (f", **{values[-1]}" if has_kwargs else "")
        if null_below:
            fn = site.callable_expr(site.frame.stack[-n])
            consumed = n + (len(slots) > n and slots[-n - 1].kind is NULL_STACK_ENTRY)
        else:
            fn = site.callable_expr(site.frame.stack[-n - 1])
            consumed = n + 1
        return [f"___r = {fn}({call_args})"], [(None, site.next_offset, [*site.rest(consumed), result()])]

    return render


def _call_function_ex(null_below: bool) -> Handler:
    def call_function_ex(frame: Frame, inst: dis.Instruction) -> None:
        kwargs_var = DictVariable({})
        if _has_kwargs(frame, inst):
            kwargs_var = frame.pop()
        elif _kwargs_entry(inst):
            frame.pop()  # the NULL standing for no **kwargs
        args_var = frame.pop()
        if null_below:
            fn = frame.pop()
            if frame.stack and isinstance(frame.stack[-1], NullVariable):
                frame.pop()
        else:
            frame.pop()  # the NULL
            fn = frame.pop()
        if not isinstance(kwargs_var, DictVariable):
            raise Unsupported(f"**kwargs of {kwargs_var.describe()}")
        if isinstance(args_var, NullVariable):
            args_var = TupleVariable([])
        frame.calling = (frame.current, fn)
        frame.push(fn.call(frame, args_var.unpack(frame), dict(kwargs_var.items)))

    return call_function_ex


op("CALL_FUNCTION_EX", max_ver=(3, 12), eager=_call_function_ex_eager(True))(_call_function_ex(True))
op("CALL_FUNCTION_EX", min_ver=(3, 13), eager=_call_function_ex_eager(False))(_call_function_ex(False))


# A function's optional parts, by the flag naming them in MAKE_FUNCTION's argument (up to 3.12)
# and in SET_FUNCTION_ATTRIBUTE's (3.13+), in the order the compiler pushes them.
_FUNCTION_PARTS = {0x10: "annotate", 0x08: "closure", 0x04: "annotations", 0x02: "kwdefaults", 0x01: "defaults"}


def _with_function_part(frame: Frame, fn: Variable, flag: int, value: Variable) -> NestedFunctionVariable:
    """The function `fn` made by MAKE_FUNCTION with one optional part set."""
    if not isinstance(fn, NestedFunctionVariable):
        raise Unsupported(f"setting {_FUNCTION_PARTS.get(flag, flag)} of {fn.describe()}")
    if flag == 0x08:
        assert isinstance(value, TupleVariable)
        fn.closure = tuple(c.cell for c in value.items if isinstance(c, CellVariable))
    elif flag == 0x02:
        assert isinstance(value, DictVariable)
        fn.kwdefaults = dict(value.items)
    elif flag == 0x01:
        fn.defaults = tuple(value.unpack(frame))
    elif flag == 0x04:
        fn.annotations = value
    elif flag == 0x10:
        fn.annotate = value
    else:
        raise Unsupported(f"function attribute flag {flag:#x}")
    return fn


def _new_function(frame: Frame, code: Variable) -> NestedFunctionVariable:
    return NestedFunctionVariable(code.as_constant(), frame.f_globals, (), {}, None)


@op("MAKE_FUNCTION", max_ver=(3, 12))
def _make_function_with_parts(frame: Frame, inst: dis.Instruction) -> None:
    fn = _new_function(frame, frame.pop())
    for flag in _FUNCTION_PARTS:
        if inst.arg & flag:
            _with_function_part(frame, fn, flag, frame.pop())
    frame.push(fn)


@op("MAKE_FUNCTION", min_ver=(3, 13))
def _make_function(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(_new_function(frame, frame.pop()))


@op("SET_FUNCTION_ATTRIBUTE", min_ver=(3, 13))
def _set_function_attribute(frame: Frame, inst: dis.Instruction) -> None:
    fn = frame.pop()
    frame.push(_with_function_part(frame, fn, inst.arg, frame.pop()))


@op("RETURN_VALUE")
def _return_value(frame: Frame, inst: dis.Instruction) -> None:
    frame.return_value = frame.pop()


@op("RETURN_CONST", min_ver=(3, 12), max_ver=(3, 13))
def _return_const(frame: Frame, inst: dis.Instruction) -> None:
    frame.return_value = constant(inst.argval)


# -- control flow -------------------------------------------------------------------------------


@op("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
@op("JUMP", min_ver=(3, 12))
def _jump(frame: Frame, inst: dis.Instruction) -> None:
    frame.jump_to(inst.argval)


def _is_none(frame: Frame, v: Variable) -> bool:
    """`v is None` for the jumps of `if x is None` (guarded like the `is` operator)."""
    if isinstance(v, GuardedOnUseConstant):
        # an int, float, str or bool argument: `is None` needs no guard on its value
        frame.output.guards.not_identical(v.source, None)
        return False
    if v.is_constant():
        return v.as_constant() is None
    return identity.is_same(frame, v, constant(None))


@op("POP_JUMP_IF_TRUE", min_ver=(3, 12), eager=_jumps_if("bool({0})"))
@op("POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE", max_ver=(3, 11), eager=_jumps_if("bool({0})"))
def _pop_jump_if_true(frame: Frame, inst: dis.Instruction) -> None:
    value = frame.pop()
    if _asserted_in_graph(frame, value, frame.ip) or value.truth(frame):
        frame.jump_to(inst.argval)


def _loads_assertion_error(inst: dis.Instruction) -> bool:
    """`LOAD_ASSERTION_ERROR`, or 3.14's `LOAD_COMMON_CONSTANT` of AssertionError."""
    if inst.opname == "LOAD_COMMON_CONSTANT":
        return inst.argval is AssertionError
    return inst.opname == "LOAD_ASSERTION_ERROR"


def _asserted_in_graph(frame: Frame, value: Variable, failing: int) -> bool:
    """`assert t` / `assert t, "message"` on a one-element tensor, whose failing branch starts at
    instruction `failing`: recorded as `torch._assert_async(t, message)`, as torch.compile does
    (it raises when the graph runs; a RuntimeError, not eager's AssertionError). Other values,
    and messages computed at run time: False, the branch is decided as any other; so is an assert
    inside a `try` or `with` block of any frame traced (a handler there could catch eager's
    AssertionError)."""
    if not isinstance(value, TensorVariable) or is_symbolic(value.fake.numel()) or value.fake.numel() != 1:
        return False
    caller: Frame | None = frame
    while caller is not None:
        if caller.current is not None and handler_for(caller.code, caller.current.offset) is not None:
            return False
        caller = caller.parent
    instructions = frame.instructions
    if failing < len(instructions) and instructions[failing].opname == "NOT_TAKEN":  # 3.14+
        failing += 1
    following = instructions[failing : failing + 2]
    if len(following) < 2 or not _loads_assertion_error(following[0]):
        return False
    if following[1].opname == "RAISE_VARARGS":
        message = "assertion error"
    elif following[1].opname == "LOAD_CONST" and isinstance(following[1].argval, str):
        message = following[1].argval
    else:
        return False
    frame.output.call("call_function", torch._assert_async, [value, constant(message)], {}, "assert")
    return True


@op("POP_JUMP_IF_FALSE", min_ver=(3, 12), eager=_jumps_if("not {0}"))
@op("POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE", max_ver=(3, 11), eager=_jumps_if("not {0}"))
def _pop_jump_if_false(frame: Frame, inst: dis.Instruction) -> None:
    if not frame.pop().truth(frame):
        frame.jump_to(inst.argval)


@op("POP_JUMP_IF_NONE", min_ver=(3, 12), eager=_jumps_if("{0} is None"))
@op("POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE", max_ver=(3, 11), eager=_jumps_if("{0} is None"))
def _pop_jump_if_none(frame: Frame, inst: dis.Instruction) -> None:
    if _is_none(frame, frame.pop()):
        frame.jump_to(inst.argval)


@op("POP_JUMP_IF_NOT_NONE", min_ver=(3, 12), eager=_jumps_if("{0} is not None"))
@op(
    "POP_JUMP_FORWARD_IF_NOT_NONE",
    "POP_JUMP_BACKWARD_IF_NOT_NONE",
    max_ver=(3, 11),
    eager=_jumps_if("{0} is not None"),
)
def _pop_jump_if_not_none(frame: Frame, inst: dis.Instruction) -> None:
    if not _is_none(frame, frame.pop()):
        frame.jump_to(inst.argval)


def _jump_or_pop_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    test = "" if inst.opname == "JUMP_IF_TRUE_OR_POP" else "not "
    line = f"___c = {test}{site.values[-1]}"
    return [line], [("___c", inst.argval, site.slots), (None, site.next_offset, site.rest(1))]


@op("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP", max_ver=(3, 11), eager=_jump_or_pop_eager)
def _jump_or_pop(frame: Frame, inst: dis.Instruction) -> None:
    value = frame.stack[-1]
    if value.truth(frame) == (inst.opname == "JUMP_IF_TRUE_OR_POP"):
        frame.jump_to(inst.argval)
    else:
        frame.pop()


@op("GET_ITER", max_ver=(3, 14), eager=_assigns("iter({0})", 1))
def _get_iter(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(iterate(frame, frame.pop()))


# From 3.15 a loop keeps two entries: the iterator and an index (for a list or tuple iterated in
# place) or NULL. The trace always iterates an iterator, with NULL beside it.


def _get_iter_eager_315(site: BreakSite, inst: dis.Instruction) -> Rendered:
    lines, [(condition, offset, stack)] = _assigns("iter({0})", 1)(site, inst)
    return lines, [(condition, offset, [*stack, Slot(NULL_STACK_ENTRY)])]


@op("GET_ITER", min_ver=(3, 15), eager=_get_iter_eager_315)
def _get_iter_315(frame: Frame, inst: dis.Instruction) -> None:
    """An argument other than 0 is `yield from`'s form (GET_YIELD_FROM_ITER before 3.15)."""
    if inst.arg:
        _get_yield_from_iter(frame, inst)
    else:
        _get_iter(frame, inst)
    frame.push(NULL)


def _next_item(frame: Frame, entries: int) -> Variable | None:
    """FOR_ITER's step: the next item pushed (the item), or the exhausted iterator's `entries`
    popped (None)."""
    iterator = frame.stack[-entries]
    if not isinstance(iterator, IteratorVariable):
        raise Unsupported(f"for loop over {iterator.describe()}")
    item = iterator.next(frame)
    if item is not None:
        frame.push(item)
        return item
    frame.popn(entries)
    return None


_END = object()  # what `next(it, ___END)` returns for an exhausted iterator at a break


def _after_loop(frame: Frame, target: int, skipped: tuple[str, ...]) -> int:
    """The index where an exhausted FOR_ITER continues: its target, past the loop-end
    instructions `skipped` that CPython steps over there (END_FOR on 3.12, END_FOR and POP_TOP
    on 3.13)."""
    index = frame.index_of_offset[target]
    for opname in skipped:
        if frame.instructions[index].opname != opname:
            break
        index += 1
    return index


def _for_iter_eager(skipped: tuple[str, ...], entries: int = 1) -> Rendering:
    """`___r = next(it, ___END)`, resuming after the loop when the iterator is exhausted."""

    def render(site: BreakSite, inst: dis.Instruction) -> Rendered:
        exhausted = site.frame.instructions[_after_loop(site.frame, inst.argval, skipped)].offset
        site.namespace["___END"] = _END
        lines = [f"___r = next({site.values[-entries]}, ___END)"]
        return lines, [
            ("___r is ___END", exhausted, site.rest(entries)),
            (None, site.next_offset, [*site.slots, result()]),
        ]

    return render


def _for_iter(skipped: tuple[str, ...], entries: int = 1) -> Handler:
    def for_iter(frame: Frame, inst: dis.Instruction) -> None:
        if _next_item(frame, entries) is None:
            frame.ip = _after_loop(frame, inst.argval, skipped)

    return for_iter


op("FOR_ITER", max_ver=(3, 11), eager=_for_iter_eager(()))(_for_iter(()))
op("FOR_ITER", min_ver=(3, 12), max_ver=(3, 12), eager=_for_iter_eager(("END_FOR",)))(_for_iter(("END_FOR",)))
op("FOR_ITER", min_ver=(3, 13), max_ver=(3, 13), eager=_for_iter_eager(("END_FOR", "POP_TOP")))(
    _for_iter(("END_FOR", "POP_TOP"))
)
# from 3.14 an exhausted iterator is left for the POP_ITER after the END_FOR: popping it and
# stepping over both is the same
_AFTER_LOOP_314 = ("END_FOR", "POP_ITER")
op("FOR_ITER", min_ver=(3, 14), max_ver=(3, 14), eager=_for_iter_eager(_AFTER_LOOP_314))(_for_iter(_AFTER_LOOP_314))
op("FOR_ITER", min_ver=(3, 15), eager=_for_iter_eager(_AFTER_LOOP_314, 2))(_for_iter(_AFTER_LOOP_314, 2))


@op("END_FOR", min_ver=(3, 12), max_ver=(3, 12))
def _end_for_312(frame: Frame, inst: dis.Instruction) -> None:
    frame.popn(2)  # the last item and the iterator


@op("END_FOR", min_ver=(3, 13))
@op("POP_ITER", min_ver=(3, 14), max_ver=(3, 14))
def _end_for(frame: Frame, inst: dis.Instruction) -> None:
    frame.pop()  # the last item (a POP_TOP / POP_ITER after it pops the iterator)


@op("POP_ITER", min_ver=(3, 15))
def _pop_iter_315(frame: Frame, inst: dis.Instruction) -> None:
    frame.popn(2)  # the iterator and its index or NULL


def _before_with_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    if isinstance(site.frame.stack[-1], GlobalContextVariable):
        # its state is part of the graph before; entering it between graphs is not modelled
        raise Unsupported(f"`with` on {site.frame.stack[-1].describe()} entered outside the graph")
    lines = [f"___x = {site.values[-1]}", "___r = type(___x).__enter__(___x)"]
    exit_slot = Slot(VALUE_STACK_ENTRY, "___MethodType(type(___x).__exit__, ___x)")
    site.namespace["___MethodType"] = types.MethodType
    return lines, [(None, site.next_offset, [*site.rest(1), exit_slot, result()])]


def _special_method(frame: Frame, context: Variable, name: str) -> Variable:
    """`__enter__` / `__exit__` of a context manager written in Python (looked up on the class)."""
    try:
        return context.getattr(frame, name)
    except Unsupported as e:
        raise Unsupported(f"`with` on {context.describe()}: {e.reason}", kind=e.kind) from e


@op("BEFORE_WITH", max_ver=(3, 13), eager=_before_with_eager)
def _before_with(frame: Frame, inst: dis.Instruction) -> None:
    context = frame.pop()
    if isinstance(context, GradModeContextVariable):
        frame.push(context.enter(frame))
        frame.push(constant(None))
        return
    exit_method = _special_method(frame, context, "__exit__")
    enter_method = _special_method(frame, context, "__enter__")
    frame.push(exit_method)
    frame.push(enter_method.call(frame, [], {}))


def _exit_call_eager(site: BreakSite, exit_method: str, *leading: str) -> Rendered:
    """WITH_EXCEPT_START for real: `exit_method(*leading, type, value, traceback)` of the
    exception on top of the stack; the result is pushed above it."""
    exc = site.values[-1]
    args = ", ".join([*leading, f"type({exc})", exc, f"{exc}.__traceback__"])
    return [f"___r = {exit_method}({args})"], [(None, site.next_offset, [*site.slots, result()])]


def _with_except_start_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    """3.11-3.13: the bound `__exit__` sits four entries under the exception."""
    return _exit_call_eager(site, site.values[-4])


def _with_except_start_eager_314(site: BreakSite, inst: dis.Instruction) -> Rendered:
    """3.14+: `__exit__` and its self (or a NULL) sit five and four entries under the exception."""
    if site.slots[-4].kind is NULL_STACK_ENTRY:
        return _exit_call_eager(site, site.values[-5])
    return _exit_call_eager(site, site.values[-5], site.values[-4])


# 3.14+: `with` is `COPY 1; LOAD_SPECIAL __exit__; SWAP 2; SWAP 3; LOAD_SPECIAL __enter__; CALL 0`,
# each LOAD_SPECIAL pushing a callable and its self or NULL (the method bound here, and NULL).
_SPECIAL_METHODS = ("__enter__", "__exit__", "__aenter__", "__aexit__")


def _load_special_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    name = _SPECIAL_METHODS[inst.arg]
    site.namespace["___MethodType"] = types.MethodType
    lines = [f"___x = {site.values[-1]}", f"___r = ___MethodType(type(___x).{name}, ___x)"]
    return lines, [(None, site.next_offset, [*site.rest(1), result(), Slot(NULL_STACK_ENTRY)])]


@op("LOAD_SPECIAL", min_ver=(3, 14), eager=_load_special_eager)
def _load_special(frame: Frame, inst: dis.Instruction) -> None:
    """A grad-mode context switches at its `__exit__` lookup, which comes first; nothing is
    traced between that and the `__enter__` call."""
    context = frame.pop()
    name = _SPECIAL_METHODS[inst.arg]
    if isinstance(context, GradModeContextVariable):
        method = context.enter(frame) if name == "__exit__" else ContextEnterVariable(context)
    else:
        method = _special_method(frame, context, name)
    _null_above(frame, method, True)


def _call_exit(frame: Frame, pair: list[Variable]) -> None:
    """WITH_EXCEPT_START: call the `__exit__` (with its self, or a NULL) found under the
    exception on top of the stack."""
    value = frame.stack[-1]
    callee, positions = _callee_and_args(pair, [])
    exc_args = [UserClassVariable(value.python_type()), value, constant(None)]
    frame.push(pair[callee].call(frame, [*(pair[i] for i in positions), *exc_args], {}))


@op("WITH_EXCEPT_START", max_ver=(3, 13), eager=_with_except_start_eager)
def _with_except_start(frame: Frame, inst: dis.Instruction) -> None:
    _call_exit(frame, [frame.stack[-4], NULL])


@op("WITH_EXCEPT_START", min_ver=(3, 14), eager=_with_except_start_eager_314)
def _with_except_start_314(frame: Frame, inst: dis.Instruction) -> None:
    _call_exit(frame, frame.stack[-5:-3])


@op("LOAD_BUILD_CLASS")
def _load_build_class(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(BuiltinVariable(builtins.__build_class__))  # its call is modelled (class_statements.py)


@op("LOAD_ASSERTION_ERROR", max_ver=(3, 13))
def _load_assertion_error(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(constant(AssertionError))


def _raise_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    if inst.arg == 0:  # inside a handler: the break writer runs this line handling its exception
        return ["raise"], []
    if inst.arg not in (1, 2):
        raise Unsupported(f"a graph break at {inst.opname} is not supported")
    cause = f" from {site.values[-1]}" if inst.arg == 2 else ""
    return [f"raise {site.values[-inst.arg]}{cause}"], []


@op("RAISE_VARARGS", eager=_raise_eager)
def _raise(frame: Frame, inst: dis.Instruction) -> None:
    if inst.arg == 0:
        handled = frame.handled_exception()
        if handled.is_constant() and handled.as_constant() is None:  # none, here or in the caller
            raise raise_new(frame, RuntimeError, "No active exception to reraise")
        if isinstance(handled, CallerExceptionVariable):
            raise Unsupported("bare raise of the exception the caller is handling")
        raise TracedException(handled, reraise=True)
    cause = frame.pop() if inst.arg == 2 else None
    exc = exception_value(frame, frame.pop())
    if cause is not None:  # `raise X from Y`
        if not (cause.is_constant() and cause.as_constant() is None):
            cause = exception_value(frame, cause)
        exc.attrs.items["__cause__"] = cause
        exc.attrs.items["__suppress_context__"] = constant(True)
    raise TracedException(exc)


def _reraise_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    """An exception a handler resume function received leaves the frame, as RERAISE lets it: its
    `__context__` and `__traceback__` kept. A `raise` statement would chain it to the exception
    the generated code is handling (the caller's, when the compiled function was called in an
    `except` block) and add the generated code's frame; a bare `raise` does neither, so the
    exception is raised, caught, restored and raised again bare."""
    exc = site.values[-1]
    return [
        f"___tb, ___ctx = {exc}.__traceback__, {exc}.__context__",
        "try:",
        f"    raise {exc}",
        "except BaseException:",
        f"    {exc}.__traceback__, {exc}.__context__ = ___tb, ___ctx",
        "    raise",
    ], []


@op("RERAISE", eager=_reraise_eager)
def _reraise(frame: Frame, inst: dis.Instruction) -> None:
    raise TracedException(frame.pop(), reraise=True)


@op("PUSH_EXC_INFO")
def _push_exc_info(frame: Frame, inst: dis.Instruction) -> None:
    value = frame.pop()
    frame.push(HandlerEntryVariable(frame.handled[-1] if frame.handled else constant(None), value))
    frame.handled.append(value)
    frame.push(value)


@op("POP_EXCEPT")
def _pop_except(frame: Frame, inst: dis.Instruction) -> None:
    frame.pop()
    if frame.handled:
        frame.handled.pop()


@op("CHECK_EXC_MATCH")
def _check_exc_match(frame: Frame, inst: dis.Instruction) -> None:
    match = frame.pop()
    frame.push(constant(matches(frame.stack[-1], match)))


# -- generators ---------------------------------------------------------------------------------


@op("RETURN_GENERATOR")
def _return_generator(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(constant(None))  # the generator already runs lazily: act as its first resume


@op("GET_YIELD_FROM_ITER", max_ver=(3, 14))
def _get_yield_from_iter(frame: Frame, inst: dis.Instruction) -> None:
    if not isinstance(frame.stack[-1], GeneratorVariable):
        frame.push(iterate(frame, frame.pop()))


@op("SEND", max_ver=(3, 11))
def _send_311(frame: Frame, inst: dis.Instruction) -> None:
    """Yielded: the item replaces the sent value. Exhausted: the receiver and the sent value are
    replaced by the return value, and the loop is left."""
    item, returned = send_into(frame, frame.stack[-2], frame.pop())
    if item is None:
        frame.pop()
        frame.push(returned)
        frame.jump_to(inst.argval)
    else:
        frame.push(item)


def _send(entries: int) -> Handler:
    """As on 3.11, but an exhausted receiver stays below its return value for END_SEND. The
    receiver is `entries` entries (1; 2 from 3.15, with its NULL) under the sent value."""

    def send(frame: Frame, inst: dis.Instruction) -> None:
        item, returned = send_into(frame, frame.stack[-1 - entries], frame.pop())
        frame.push(returned if item is None else item)
        if item is None:
            frame.jump_to(inst.argval)

    return send


def _end_send(entries: int) -> Handler:
    def end_send(frame: Frame, inst: dis.Instruction) -> None:
        del frame.stack[-1 - entries : -1]

    return end_send


op("SEND", min_ver=(3, 12), max_ver=(3, 14))(_send(1))
op("SEND", min_ver=(3, 15))(_send(2))
op("END_SEND", min_ver=(3, 12), max_ver=(3, 14))(_end_send(1))
op("END_SEND", min_ver=(3, 15))(_end_send(2))


@op("YIELD_VALUE")
def _yield_value(frame: Frame, inst: dis.Instruction) -> None:
    value = frame.pop()
    frame.push(constant(None))  # what `next()` sends in when the generator resumes
    raise Yielded(value)


# -- structural pattern matching (`match`) ------------------------------------------------------


@op("MATCH_MAPPING", eager=_peeks("{fn}(type({0}))", 1, patterns.is_mapping_type))
def _match_mapping(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(constant(patterns.is_mapping_type(frame.stack[-1].python_type())))


@op("MATCH_SEQUENCE", eager=_peeks("{fn}(type({0}))", 1, patterns.is_sequence_type))
def _match_sequence(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(constant(patterns.is_sequence_type(frame.stack[-1].python_type())))


@op("GET_LEN", eager=_peeks("len({0})", 1))
def _get_len(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(BuiltinVariable(len).call(frame, [frame.stack[-1]], {}))


@op("MATCH_KEYS", eager=_peeks("{fn}({0}, {1})", 2, patterns.eager_match_keys))
def _match_keys(frame: Frame, inst: dis.Instruction) -> None:
    frame.push(patterns.match_keys(frame, frame.stack[-2], frame.stack[-1]))


def _match_class_eager(site: BreakSite, inst: dis.Instruction) -> Rendered:
    subject, cls, names = site.values[-3:]
    fn = site.bind(patterns.eager_match_class, "match")
    return [f"___r = {fn}({subject}, {cls}, {inst.arg}, {names})"], [
        (None, site.next_offset, [*site.rest(3), result()])
    ]


@op("MATCH_CLASS", eager=_match_class_eager)
def _match_class(frame: Frame, inst: dis.Instruction) -> None:
    names = frame.pop().as_constant()
    cls = frame.pop()
    subject = frame.pop()
    frame.push(patterns.match_class(frame, subject, cls, inst.arg, names))
