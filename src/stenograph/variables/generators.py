"""Generators (generator functions and generator expressions) called while tracing.

The generator's body runs as a child frame that is resumed on each `next()` and stops at each
`yield`, so its code interleaves with the consumer's exactly as in CPython (side effects and
short-circuiting `any()` included). Returned, or live at a graph break, a generator whose body
has not started is made again by calling its function with the arguments it was bound to, a
finished one is a finished generator of that function, and one suspended at a `yield` is a real
generator suspended at that `yield` (`suspended_generators`). One that yields more than
`MOST_ITEMS` values, however they are taken (`list()`, a `for` loop, `next()`), is taken for an
endless one and refused, as torch.compile refuses it, rather than traced forever.
"""

from __future__ import annotations

import builtins
import inspect
import types
from typing import TYPE_CHECKING, Any

from ..bytecode.instructions import Instr, decoded, exception_entries
from ..errors import BreakKind, Unsupported
from .base import Variable
from .constants import MOST_ITEMS, BoundMethodVariable, IteratorVariable, constant
from .exceptions import TracedException, raise_new
from .suspended_generators import rebuild_suspended

if TYPE_CHECKING:
    from ..interpreter.frame import Frame


class Yielded(Exception):
    """Raised by YIELD_VALUE to suspend the generator's frame (not an error)."""

    def __init__(self, value: Variable) -> None:
        super().__init__("yield")
        self.value = value


class GeneratorVariable(IteratorVariable):
    """A generator object whose frame runs lazily."""

    has_length_hint = False

    def __init__(self, frame: Frame, maker: Variable | None = None) -> None:
        self.frame = frame
        self.maker = maker  # the generator function, when it can be made again at run time
        self.done = False
        self.index = 0
        self.failure = None
        self.returned: Variable = constant(None)  # the body's return value, once done
        self.running = False  # its body is executing (resumed from inside itself: an error)
        self.yields = 0  # values yielded so far (at most MOST_ITEMS)
        self.rebuilding = False  # being rebuilt (a generator reachable from its own frame)

    def describe(self) -> str:
        return f"generator {self.frame.code.co_qualname}"

    def python_type(self) -> type:
        return types.GeneratorType

    @property
    def items(self) -> list[Variable]:  # type: ignore[override]
        raise Unsupported(f"{self.describe()} is live at a graph break and cannot be rebuilt")

    # on the stack at a break, it is rebuilt as itself (`reconstruct`), not as a tuple's iterator
    on_stack_as_tuple_iterator = False

    def reconstruct(self, rebuild: Any) -> str:
        """A real generator in the same state, made once: before its body starts, the call of its
        function with the arguments bound to its parameters (nothing of the body has run, so
        eagerly that call made the same generator); once it has finished (returned, raised or
        closed), such a call closed before it starts, which CPython marks finished without
        running any of the body; suspended at a `yield`, one of its body's resume code advanced
        to that yield (`suspended_generators`)."""
        if self.maker is None:
            raise Unsupported(f"{self.describe()} of a function that cannot be rebuilt")
        if self.frame.current is not None and not self.done:
            return rebuild_suspended(self, rebuild)
        function = rebuild.expr(self.maker)
        if self.done:
            return rebuild.build_once(self, lambda: f"{rebuild.writer.bind(finished_generator, 'fn')}({function})")
        return rebuild.build_once(self, lambda: f"{function}({self._bound_arguments(rebuild)})")

    def _bound_arguments(self, rebuild: Any) -> str:
        """The arguments of a call binding the body's parameters to the values they hold now
        (positional ones by position, keyword-only ones by name, then `*args` and `**kwargs`)."""
        code = self.frame.code
        positional = code.co_varnames[: code.co_argcount]
        keyword = code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
        rest = code.co_argcount + code.co_kwonlyargcount
        parts = [rebuild.expr(self._parameter(name)) for name in positional]
        parts += [f"{name}={rebuild.expr(self._parameter(name))}" for name in keyword]
        if code.co_flags & inspect.CO_VARARGS:
            parts.append(f"*{rebuild.expr(self._parameter(code.co_varnames[rest]))}")
            rest += 1
        if code.co_flags & inspect.CO_VARKEYWORDS:
            parts.append(f"**{rebuild.expr(self._parameter(code.co_varnames[rest]))}")
        return ", ".join(parts)

    def _parameter(self, name: str) -> Variable:
        """The value bound to parameter `name` (a cell's content where a nested function of the
        body closes over it)."""
        if name in self.frame.cells:
            contents = self.frame.cells[name].contents
            if not isinstance(contents, Variable):
                raise Unsupported(f"parameter {name!r} of {self.describe()} has no value to rebuild it with")
            return contents
        return self.frame.locals[name]

    def next(self, frame: Frame) -> Variable | None:
        return self.send(frame, constant(None))

    def send(self, frame: Frame, value: Variable) -> Variable | None:
        """Resume the body with `value` as the result of the `yield` it stopped at; the next
        yielded value, or None once the body returned (its value is then `returned`)."""
        if self.running:
            raise raise_new(frame, ValueError, "generator already executing")
        if self.done:
            return None
        started = self.frame.current is not None
        if not started and not (value.is_constant() and value.as_constant() is None):
            raise raise_new(frame, TypeError, "can't send non-None value to a just-started generator")
        if started:
            self.frame.stack[-1] = value  # YIELD_VALUE left a placeholder for what is sent in
        return self._resume(frame)

    def throw(self, frame: Frame, exc: TracedException) -> Variable | None:
        """`generator.throw(exc)`: `exc` raised at the `yield` the body stopped at; the next
        yielded value, or None once the body returned. Raised in the caller where the body
        does not catch it, or had not started or has finished (as CPython)."""
        if self.running:
            raise raise_new(frame, ValueError, "generator already executing")
        if self.done or self.frame.current is None or not self.frame.throw_in(exc):
            self.done = True
            raise exc
        return self._resume(frame)

    def _resume(self, frame: Frame) -> Variable | None:
        self.running = True
        try:
            returned = self.frame.run()
        except Yielded as y:
            item = y.value
        except Unsupported as e:
            if e.generator_code is None:
                e.generator_code = self.frame.code
            raise
        except TracedException as e:
            self.done = True  # an exception ends the generator
            if issubclass(e.value.python_type(), StopIteration):
                raise _stop_iteration_error(frame, e.value) from None
            raise
        else:
            self.done = True
            self.returned = returned if returned is not None else constant(None)
            return None
        finally:
            self.running = False
        self.yields += 1
        if self.yields > MOST_ITEMS:
            endless = Unsupported(
                f"{self.describe()} yielded more than {MOST_ITEMS} values while traced;"
                " it may be an infinite generator",
                hint="eagerly, consuming an endless generator whole never finishes either",
                kind=BreakKind.GENERATOR,
            )
            endless.generator_code = self.frame.code
            raise endless
        return item

    def finished_value(self) -> Variable:
        return self.returned

    def rebuilt_faithfully(self) -> bool:
        return True  # or it cannot be rebuilt at all (`reconstruct`)

    def getattr(self, frame: Frame, name: str) -> Variable:
        if name in ("send", "__next__", "close", "throw"):
            return BoundMethodVariable(self, name)
        return super().getattr(frame, name)

    def call_method(self, frame: Frame, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if name == "throw" and not kwargs and 1 <= len(args) <= 3:
            item = self.throw(frame, _thrown(frame, args))
            if item is None:
                raise self.stop(frame)
            return item
        if kwargs or len(args) != (name == "send"):
            raise Unsupported(f"generator.{name}() with these arguments")
        if name == "close":
            if self.frame.current is not None and not self.done:
                raise Unsupported(f"closing {self.describe()} while it is suspended (GeneratorExit is not modelled)")
            self.done = True
            return constant(None)
        item = self.send(frame, args[0] if args else constant(None))
        if item is None:
            raise self.stop(frame)
        return item


def finished_generator(function: types.FunctionType) -> types.GeneratorType:
    """A finished generator of generator function `function`: called with placeholder
    arguments and closed before it starts, so none of its body runs (run time)."""
    code = function.__code__
    keyword = code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
    generator = function(*[None] * code.co_argcount, **dict.fromkeys(keyword))
    generator.close()
    return generator


def _thrown(frame: Frame, args: list[Variable]) -> TracedException:
    """The exception `generator.throw(value)` / `throw(type[, value[, traceback]])` raises: the
    instance given, or the class called (with the value as its argument, when it is not one)."""
    first = args[0]
    value = args[1] if len(args) > 1 else constant(None)
    if not first.is_constant() or not isinstance(first.as_constant(), type):
        if len(args) > 1 and not (value.is_constant() and value.as_constant() is None):
            raise raise_new(frame, TypeError, "instance exception may not have a separate value")
        return TracedException(first)
    cls = first.as_constant()
    if not issubclass(cls, BaseException):
        raise raise_new(frame, TypeError, "exceptions must be classes or instances deriving from BaseException")
    if value.is_constant() and value.as_constant() is None:
        return TracedException(frame.instantiate(cls, [], {}))
    if issubclass(value.python_type(), cls):
        return TracedException(value)
    return TracedException(frame.instantiate(cls, [value], {}))


def _stop_iteration_error(frame: Frame, stop: Variable) -> TracedException:
    """PEP 479: a StopIteration leaving a generator's body becomes a RuntimeError caused by it."""
    error = raise_new(frame, RuntimeError, "generator raised StopIteration")
    error.value.attrs.items.update({"__cause__": stop, "__context__": stop, "__suppress_context__": constant(True)})
    return error


def _is_stop_iteration_guard(code: types.CodeType, target: int) -> bool:
    """3.12 wraps every generator body in a handler turning StopIteration into RuntimeError."""
    inst = decoded(code).at(target)
    return inst.opname == "CALL_INTRINSIC_1" and inst.argrepr == "INTRINSIC_STOPITERATION_ERROR"


def has_cleanup(code: types.CodeType, f_globals: dict | None = None) -> bool:
    """Whether a generator's code has a `try` or `with` block whose handler runs code when the
    generator is closed (`_closing_runs_code`); names in `except` clauses are read from
    `f_globals` when given, else only builtins are known."""
    return any(_closing_runs_code(code, e.start, f_globals or {}) for e in exception_entries(code))


def unclosed_refusal(generator: GeneratorVariable) -> Unsupported:
    """The trace ends (return or graph break) with `generator` suspended inside a `try` or
    `with` block and not handed on as itself: eagerly, dropping it runs its `finally` /
    `__exit__` at the moment the last reference goes, which neither the trace nor code resumed
    after a break (it holds references longer) can place. The frame runs eagerly instead."""
    return Unsupported(
        f"generator {generator.frame.code.co_qualname} is left suspended inside a try/with block, "
        "whose cleanup runs when it is dropped",
        hint="the frame runs eagerly; exhaust the generator, return it, or move the cleanup out of it",
    )


def needs_close(generator: GeneratorVariable) -> bool:
    """Whether closing (or dropping) the generator now would run code of its own: it started, did
    not finish, and is suspended where a handler of its code would run code for the GeneratorExit
    that closing throws in (a `finally`, a `with` block's exit, an `except` clause catching it)."""
    frame = generator.frame
    if generator.done or frame.current is None:
        return False
    return _closing_runs_code(frame.code, frame.current.offset, frame.f_globals)


def _closing_runs_code(code: types.CodeType, offset: int, f_globals: dict) -> bool:
    """Whether GeneratorExit raised at `offset` runs code of the generator's own on its way out.

    It passes through, running nothing, 3.12's StopIteration guard, the handler that pops a
    finished `except` block (COPY 3, POP_EXCEPT, RERAISE), and `except` clauses that only test it
    against classes it is not an instance of (`except IndexError:`, as `Sequence.__iter__` has)
    and re-raise it. Anything else (a `finally`, a `with` block's exit, a bare `except`, an
    `except BaseException`, a class it cannot read) counts as code."""
    instructions = decoded(code)
    for _ in range(len(instructions)):  # each step moves to an enclosing handler
        entry = instructions.handler_at(offset)
        if entry is None or _is_stop_iteration_guard(code, entry.target):
            return False
        reraise = _reraise_when_unmatched(code, entry.target, f_globals)
        if reraise is None:
            return True
        offset = reraise
    return True


_POP_JUMPS_IF_FALSE = ("POP_JUMP_IF_FALSE", "POP_JUMP_FORWARD_IF_FALSE")


def _reraise_when_unmatched(code: types.CodeType, target: int, f_globals: dict) -> int | None:
    """The offset of the RERAISE that GeneratorExit, entering the handler at `target`, reaches
    without running user code; None where it may run some."""
    instructions = decoded(code)
    inst = instructions.at(target)
    if inst.opname == "COPY":  # COPY 3, POP_EXCEPT, RERAISE 1: leaving an `except` block
        after = instructions.next(inst)
        reraise = instructions.next(after) if after is not None else None
        if after is not None and after.opname == "POP_EXCEPT" and reraise is not None and reraise.opname == "RERAISE":
            return reraise.offset
        return None
    if inst.opname != "PUSH_EXC_INFO":
        return None
    clause = instructions.next(inst)
    while clause is not None and clause.opname != "RERAISE":
        stack: list = []
        while clause is not None and clause.opname != "CHECK_EXC_MATCH":
            if not _push_clause_operand(stack, clause, f_globals):
                return None
            clause = instructions.next(clause)
        jump = instructions.next(clause) if clause is not None else None
        if jump is None or jump.opname not in _POP_JUMPS_IF_FALSE or len(stack) != 1 or _catches_exit(stack[0]):
            return None
        clause = instructions.at(jump.target)
    return clause.offset if clause is not None else None


def _push_clause_operand(stack: list, inst: Instr, f_globals: dict) -> bool:
    """Evaluate one instruction of an `except` clause's class expression (a global, a module's
    attribute, a tuple of them); False where it is anything else."""
    if inst.opname == "LOAD_GLOBAL":
        name = str(inst.argval)
        value = f_globals.get(name, getattr(builtins, name, _UNKNOWN))
    elif inst.opname == "LOAD_ATTR" and stack and isinstance(stack[-1], types.ModuleType):
        value = vars(stack.pop()).get(str(inst.argval), _UNKNOWN)
    elif inst.opname == "BUILD_TUPLE" and inst.arg is not None and len(stack) >= inst.arg:
        value = tuple(stack[len(stack) - inst.arg :])
        del stack[len(stack) - inst.arg :]
    else:
        return False
    stack.append(value)
    return value is not _UNKNOWN


_UNKNOWN = object()


def _catches_exit(classes: object) -> bool:
    """Whether `except classes:` catches GeneratorExit (or may: anything not a class)."""
    members = classes if isinstance(classes, tuple) else (classes,)
    return not all(isinstance(c, type) for c in members) or any(issubclass(GeneratorExit, c) for c in members)


def send_into(frame: Frame, receiver: Variable, value: Variable) -> tuple[Variable | None, Variable]:
    """One step of `yield from receiver` (SEND): (the item it yields, None), or (None, the value it
    returned) once it is exhausted."""
    if isinstance(receiver, GeneratorVariable):
        item = receiver.send(frame, value)
    elif isinstance(receiver, IteratorVariable) and value.is_constant() and value.as_constant() is None:
        item = receiver.next(frame)
    else:
        raise Unsupported(f"sending a value into {receiver.describe()}")
    if item is None:
        return None, receiver.finished_value()
    return item, value
