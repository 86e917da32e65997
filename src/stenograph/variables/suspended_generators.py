"""Generators suspended at a `yield`, rebuilt as real generators (returned, or live at a break).

The real generator runs the body's resume code (`bytecode.resume_code`), made into a generator
function over the generator function's globals and closure: called with the traced frame's
stack and locals it makes a generator, which is advanced once. Its prologue rebuilds the frame
and jumps to the very YIELD_VALUE the traced body stopped at, which yields a placeholder (dropped)
and leaves it suspended there, inside the same `try` and `with` blocks, with the `yield from`
receiver under it: what the caller then sends, throws or closes meets the body exactly where
eager's generator would have it, and the rest of the body runs as plain Python (uncompiled, as
the body of a generator made outside compiled code). The body's own cells go to it as they are,
shared with the functions rebuilt around them.

Refused (the frame then runs eagerly): a body suspended inside an `except` or `finally` block
(the exception it handles is frame state that cannot be handed over), an iterator in its state
that is rebuilt as a copy of its items while it reads a container that can still change (or is
due to raise), and values that cannot be rebuilt at all.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from ..bytecode.resume_code import NULL_STACK_ENTRY, VALUE_STACK_ENTRY, build_resume_code
from ..errors import Unsupported
from .base import Variable
from .cells import Cell, LazyValue
from .constants import IteratorVariable, NullVariable

if TYPE_CHECKING:
    from .generators import GeneratorVariable

_HINT = "the frame runs eagerly; return the generator before calling next() on it, or a list of its items"


def rebuild_suspended(generator: GeneratorVariable, rebuild: Any) -> str:
    """The expression of a real generator suspended where `generator`'s traced body is, built
    once (`rebuild` is `graph.codegen.Reconstructor`)."""
    frame = generator.frame
    at = frame.current
    if generator.rebuilding:
        raise Unsupported(f"{generator.describe()} refers to itself from its own frame, and cannot be rebuilt")
    if at is None or at.opname != "YIELD_VALUE" or generator.running:
        raise Unsupported(f"{generator.describe()} is running, and cannot be rebuilt", hint=_HINT)
    if frame.handled:
        raise Unsupported(
            f"{generator.describe()} is suspended inside an except/finally block, handling an exception "
            "that cannot be handed over to a rebuilt generator",
            hint=_HINT,
        )
    return rebuild.build_once(generator, lambda: _resumed_call(generator, rebuild, at.offset))


def _resumed_call(generator: GeneratorVariable, rebuild: Any, offset: int) -> str:
    """The call of `resumed_generator` making it: the resume code at its yield (`offset`), its
    function, its own cells, then the stack and locals of its frame (guarding against a frame
    that holds the generator itself, which no call can be given)."""
    frame = generator.frame
    code = frame.code
    generator.rebuilding = True
    try:
        # the own cells first: a function of the body rebuilt from here on shares them
        rebuild.shared_cells.update(id(frame.cells[name]) for name in code.co_cellvars)
        cells = [_own_cell(rebuild, frame.cells[name]) for name in code.co_cellvars]
        kinds, arguments = [], []
        for var in frame.stack[:-1]:  # the last entry is where the value sent in goes
            if isinstance(var, NullVariable):
                kinds.append(NULL_STACK_ENTRY)
            else:
                kinds.append(VALUE_STACK_ENTRY)
                arguments.append(_value(rebuild, var, generator))
        kinds.append(VALUE_STACK_ENTRY)  # what YIELD_VALUE yields again, when it is primed
        arguments.append("None")
        live = []
        for name in code.co_varnames:
            value = frame.locals.get(name)
            if name in code.co_cellvars or value is None or isinstance(value, NullVariable):
                continue  # a cell (in the closure) or unbound (it stays unbound)
            live.append(name)
            arguments.append(_value(rebuild, value, generator))
        try:
            resume = build_resume_code(code, offset, kinds, live, cells_as_freevars=bool(cells))
        except NotImplementedError as e:
            raise Unsupported(f"{generator.describe()} cannot be resumed where it stopped: {e}", hint=_HINT) from e
        maker = rebuild.expr(generator.maker)
        helper = rebuild.writer.bind(resumed_generator, "fn")
        own_cells = "".join(c + ", " for c in cells)
        return f"{helper}({rebuild.writer.bind(resume, 'code')}, {maker}, ({own_cells}), {', '.join(arguments)})"
    finally:
        generator.rebuilding = False


def _own_cell(rebuild: Any, cell: Cell) -> str:
    """A new cell standing for a cell of the body (shared with the functions rebuilt around it),
    holding its current value; left empty where the variable is unbound."""
    if cell.real is not None:
        raise Unsupported("a generator's own cell that exists outside the trace")
    name = rebuild.new_cell(cell)
    if isinstance(cell.contents, LazyValue):
        rebuild.writer.post.append(f"{name}.cell_contents = {rebuild.writer.source(cell.contents.source)}")
    elif cell.contents is not None:
        rebuild.writer.post.append(f"{name}.cell_contents = {rebuild.expr(cell.contents)}")
    return name


def _value(rebuild: Any, var: Variable | LazyValue, generator: GeneratorVariable) -> str:
    """A value of the body's frame, rebuilt; an iterator only where the rebuilt one goes on as
    the traced one would (`IteratorVariable.rebuilt_faithfully`)."""
    if isinstance(var, LazyValue):
        return rebuild.writer.source(var.source)
    if isinstance(var, IteratorVariable) and not var.rebuilt_faithfully():
        iterated = var.iterated()
        over = f"over {iterated.describe()}, which can still change" if iterated is not None else "due to raise"
        raise Unsupported(
            f"{generator.describe()} holds an iterator {over}; rebuilt, it would be a copy of its items",
            hint=_HINT,
        )
    return rebuild.expr(var)


def resumed_generator(
    code: types.CodeType, maker: types.FunctionType, cells: tuple, *arguments: object
) -> types.GeneratorType:
    """(run time) A generator of `maker`'s running `code` (its resume code) over `arguments`,
    advanced to the yield it rebuilds (the value it yields there is dropped); `cells` are the
    body's own cells, before `maker`'s closure."""
    closure = cells + (maker.__closure__ or ())
    function = types.FunctionType(code, maker.__globals__, maker.__name__, None, closure or None)
    function.__qualname__ = maker.__qualname__  # the generator takes its names from its function
    generator = function(*arguments)
    next(generator)
    return generator
