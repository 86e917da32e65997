"""Symbolic execution of one code object: the frame state and the instruction loop.

A `Frame` holds what CPython's frame would hold (value stack, locals, cells, instruction
pointer) but every value is a tracker. Opcode handlers live in `opcodes.py`, selected per Python
version. Calls of user functions are inlined by running a child `Frame` over the callee's code
that shares this frame's `OutputGraph`, so one graph spans the whole call tree.
"""

from __future__ import annotations

import linecache
import traceback
import types
import weakref
from typing import Any

from .. import config
from ..bytecode.instructions import Instr, decoded
from ..errors import BreakKind, FullgraphBreak, Unsupported
from ..graph.output_graph import OutputGraph
from ..guards.sources import AttrSource, FixedObjectSource, GlobalSource, ItemSource, Source
from ..marks import errors_on_graph_break
from ..variables.base import Variable
from ..variables.builder import class_member_of, instantiate, wrap, wrap_trusted_member
from ..variables.cells import Cell, LazyValue
from ..variables.compile_regions import call_region, is_region
from ..variables.constants import constant
from ..variables.exceptions import CallerExceptionVariable, caller_exception, raise_python_error
from ..variables.frame_objects import NNModuleVariable
from ..variables.functions import NestedFunctionVariable, UserFunctionVariable, UserMethodVariable
from ..variables.generators import GeneratorVariable, needs_close, unclosed_refusal
from ..variables.trace_rules import is_trusted_module
from .binding import bind_arguments, binding_error
from .exceptions import TracedException, uncaught, unwind_to_handler
from .opcodes import handlers_for_running_python

# the callables whose call returns what the inlined function returns, nothing done around it
_PLAIN_CALLS = (UserFunctionVariable, UserMethodVariable, NestedFunctionVariable)
# the instructions whose whole effect is one call of an object's own hook, its result dropped
_STORES = {"STORE_ATTR": "__setattr__", "STORE_SUBSCR": "__setitem__"}


class Frame:
    """One symbolically executing frame (the compiled one or an inlined callee)."""

    def __init__(
        self,
        code: types.CodeType,
        f_globals: dict[str, Any],
        local_values: dict[str, Variable | LazyValue],
        cells: dict[str, Cell],
        output: OutputGraph,
        parent: Frame | None = None,
        stop_index: int | None = None,
        stop_path: tuple[tuple[types.CodeType, int], ...] | None = None,
    ) -> None:
        self.code = code
        self.f_globals = f_globals
        self.locals = local_values
        self.cells = cells
        self.output = output
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1
        self.stack: list[Variable] = []
        decoding = decoded(code)  # cached per code object, shared with the bytecode layer
        self.instructions = decoding.instructions
        self.index_of_offset = decoding.index_of_offset
        self.ip = 0
        self.current: Instr | None = None
        self.line = code.co_firstlineno
        self.kw_names: tuple[str, ...] = ()
        # (call instruction, its callable) of the call running: a frame it inlines was called
        # directly where it runs that callable's code (`called_directly`), as eager's stack has it
        self.calling: tuple[Instr, Variable] | None = None
        self.called_directly = False
        self.return_value: Variable | None = None
        # exceptions being handled (`except` blocks entered), innermost last, for a bare `raise`
        self.handled: list[Variable] = []
        # id of each exception tracker -> index of the instruction where it entered this frame
        self.raised_at: dict[int, int] = {}
        # one tracking Cell per real closure cell, shared by every inlined call in the trace (the
        # compiled function's own closure included: a function it calls may share a cell with it)
        if parent is None:
            self.tracked_cells: dict[int, Cell] = {id(c.real): c for c in cells.values() if c.real is not None}
        else:
            self.tracked_cells = parent.tracked_cells
        # every generator created in the trace (checked when the trace ends)
        self.generators: list[Any] = [] if parent is None else parent.generators
        self.handlers = handlers_for_running_python()
        self.trusted = is_trusted_module(f_globals.get("__name__", ""))
        # the instruction before which to stop (the second trace of a frame with a graph break)
        self.stop_index = stop_index
        # a nested graph break's second trace: (code, instruction index) of each frame from the
        # compiled one to the one that stops (`NestedStop`), on every frame on that way
        self.stop_path = stop_path
        # an inlined call's function and the callable its caller called (`resumable`)
        self.function: types.FunctionType | None = None
        self.callee: Variable | None = None
        # a `__setattr__`/`__setitem__` its caller's STORE_ATTR/STORE_SUBSCR ran: the caller drops
        # what it returns, so a nested break inside resumes the caller after that instruction
        self.result_discarded = False
        # the compiled frame of a nested break's second trace: the inlined frame that stopped
        self.stopped_inside: Frame | None = None
        # instruction index -> the user stack there, as FX nodes' `stack_trace` (stack_trace())
        self._stack_traces: dict[int, str] = {}

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> Variable | None:
        """Execute until RETURN (the returned tracker) or until `stop_index` (None)."""
        handlers = self.handlers
        instructions = self.instructions
        stop = self.stop_index
        active = self.output.active
        caller = active.frame  # a generator's frame resumes under whichever frame advanced it
        active.frame = self
        try:
            while self.return_value is None:
                if self.ip == stop:
                    break
                inst = instructions[self.ip]
                self.current = inst
                self.ip += 1
                if inst.positions is not None and inst.positions.lineno is not None:
                    self.line = inst.positions.lineno
                handler = handlers.get(inst.opname)
                if handler is None:
                    raise Unsupported(
                        f"instruction {inst.opname} is not supported yet",
                        hint="please report it; the frame runs eagerly meanwhile",
                    )
                try:
                    handler(self, inst)
                except TracedException as exc:
                    self._chain(exc)
                    self.raised_at.setdefault(id(exc.value), self.ip - 1)
                    if not unwind_to_handler(self, exc):
                        raise
            if self.ip == stop and self.parent is not None:
                raise NestedStop(self)
        except NestedStop as stopped:
            if self.parent is not None:
                raise
            self.stopped_inside = stopped.frame
        except TracedException as exc:
            if self.parent is not None:
                raise
            e = uncaught(exc)
            self._annotate(e)
            # where the exception entered this frame: run from there eagerly, the frame's own
            # handlers (cleanup, `except` bodies that re-raise it) run after it as they would
            e.break_index = self.raised_at.get(id(exc.value), self.ip - 1)
            raise e from None
        except Unsupported as e:
            self._annotate(e)
            e.frame_path.append((self.code, self.ip - 1, self.resumable()))
            if e.error_on_break is None:  # the innermost frame: the contexts it is in are open
                e.error_on_break = errors_on_graph_break()
            if self.parent is None and e.break_index is None and not (isinstance(e, FullgraphBreak) or e.whole_frame):
                e.break_index = self.ip - 1
            raise
        finally:
            active.frame = caller
            if self.parent is None:
                # the list, shared by every frame of the trace, holds generators that hold their
                # frames: emptied, the trace is freed without waiting for a garbage collection
                generators = list(self.generators)
                self.generators.clear()
        if self.parent is None:
            unclosed = [generator for generator in generators if needs_close(generator)]
            if self.return_value is None and unclosed:
                raise unclosed_refusal(unclosed[0])  # stopped at a break: resumed code holds it longer
            self.output.unclosed_generators = unclosed  # checked once the returned value is rebuilt
        return self.return_value

    def _chain(self, exc: TracedException) -> None:
        """Where an exception is raised (the first frame to see it), it records the exception
        being handled there as its `__context__`, as CPython does: the caller's when no traced
        frame handles one."""
        if exc.chained:
            return
        exc.chained = True
        attrs = exc.value.attrs
        if attrs is None:
            return
        context = self.handled_exception()
        if context is not exc.value:
            attrs.items["__context__"] = context
            _cut_context_cycle(context, exc.value)

    def handled_exception(self) -> Variable:
        """What `sys.exc_info()[1]` answers here: the innermost exception a traced frame is
        handling, else the caller's: None, guarded, when the call that compiles handles none;
        unknown while tracing when it handles one or is not known."""
        frame: Frame | None = self
        while frame is not None and not frame.handled:
            frame = frame.parent
        if frame is not None:
            return frame.handled[-1]
        if self.output.caller_handles is False:
            self.output.guards.state_query(caller_exception, "the caller's handled exception", None)
            return constant(None)
        return CallerExceptionVariable()

    def throw_in(self, exc: TracedException) -> bool:
        """A suspended generator's frame: `exc` raised at the `yield` it stopped at
        (`generator.throw`); whether a handler of its code takes it (the frame then resumes
        there)."""
        self._chain(exc)
        return unwind_to_handler(self, exc)

    def stack_trace(self) -> str:
        """The user stack at the running instruction, outermost call first, in the format of
        Python's tracebacks (with column markers), as torch.compile writes `stack_trace`."""
        index = self.ip
        text = self._stack_traces.get(index)
        if text is None:
            outer = self.parent.stack_trace() if self.parent is not None else ""
            text = self._stack_traces[index] = outer + _frame_line(self.code, self.current)
        return text

    def _annotate(self, e: Unsupported) -> None:
        filename = self.code.co_filename
        text = linecache.getline(filename, self.line).rstrip()
        e.user_stack.append((filename, self.line, self.code.co_name, text))
        if not e.location:
            e.location = f"{filename}:{self.line}"
            e.source_line = text
            if not e.instruction and self.current is not None:
                e.instruction = self.current.opname

    def jump_to(self, offset: int) -> None:
        self.ip = self.index_of_offset[offset]

    # -- stack helpers -------------------------------------------------------------------------

    def push(self, value: Variable) -> None:
        self.stack.append(value)

    def pop(self) -> Variable:
        return self.stack.pop()

    def popn(self, n: int) -> list[Variable]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    # -- names ---------------------------------------------------------------------------------

    def load_local(self, name: str) -> Variable:
        value = self.locals.get(name)
        if value is None:
            raise Unsupported(f"local variable {name!r} is read before assignment")
        if isinstance(value, LazyValue):
            value = wrap(self, value.value, value.source)
            self.locals[name] = value
        return value

    def load_cell(self, name: str) -> Variable:
        cell = self.cells[name]
        if cell.contents is None:
            raise Unsupported(f"free variable {name!r} is read before assignment")
        if isinstance(cell.contents, LazyValue):
            cell.contents = wrap(self, cell.contents.value, cell.contents.source)
        return cell.contents

    def load_global(self, name: str) -> Variable:
        cache_key = (id(self.f_globals), name)
        cached = self.output.global_cache.get(cache_key)
        if cached is not None:
            return cached
        if name in self.f_globals and self.trusted:
            var = wrap_trusted_member(self, self.f_globals[name], self.f_globals, name)
        elif name in self.f_globals:
            var = wrap(self, self.f_globals[name], GlobalSource(name, self.f_globals))
        else:
            builtins = self.f_globals.get("__builtins__", __builtins__)
            table = builtins if isinstance(builtins, dict) else builtins.__dict__
            if name not in table:
                raise Unsupported(f"name {name!r} is not defined")
            # guarded like a global: a builtin can be patched (`builtins.print = ...`), and a
            # module global of the same name, defined later, would hide it
            if not self.trusted:
                module = self.f_globals.get("__name__", "?")
                where = FixedObjectSource(self.f_globals, f"globals of {module}")
                self.output.guards.key_absent(where, name, f"{module} has no global {name!r}")
            var = wrap(self, table[name], GlobalSource(name, table))
        self.output.global_cache[cache_key] = var
        return var

    # -- what trackers ask of the frame they are handed --------------------------------------------
    # the trackers' modules lie below the builder, which imports them: they reach it through here

    def root_reference(self) -> weakref.ref[Frame]:
        """A weak reference to the frame being compiled, for trackers that wrap values later,
        maybe after the inlined call that made them returned. Weak: a tracker holding its frame
        would make a cycle, and a given-up trace would keep the objects it read alive until the
        next garbage collection."""
        root = self
        while root.parent is not None:
            root = root.parent
        return weakref.ref(root)

    def wrap(self, value: Any, source: Source | None, *, module_attribute: bool = False) -> Variable:
        """The tracker for `value` read through `source` (`builder.wrap`: guarded through it)."""
        return wrap(self, value, source, module_attribute=module_attribute)

    def wrap_trusted_member(self, value: Any, namespace: dict, name: str) -> Variable:
        """`namespace[name]` of a trusted module (`builder.wrap_trusted_member`)."""
        return wrap_trusted_member(self, value, namespace, name)

    def instantiate(self, cls: type, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        """`cls(*args, **kwargs)` called by the traced code (`builder.instantiate`)."""
        return instantiate(self, cls, args, kwargs)

    def class_member(self, obj: Variable, cls: type, name: str) -> Variable:
        """`obj.name` as class `cls` defines it (`builder.class_member_of`)."""
        return class_member_of(self, obj, cls, name)

    def new_exception(self, cls: type[BaseException], args: tuple) -> Variable:
        """The exception `cls(*args)` the traced program makes, for constant `args`."""
        return instantiate(self, cls, [constant(a) for a in args], {})

    # -- calls ---------------------------------------------------------------------------------

    def inline_call(
        self,
        fn: types.FunctionType,
        args: list[Variable],
        kwargs: dict[str, Variable],
        *,
        closure: tuple[Any, ...] | None,
        fn_source: Source | None = None,
        defaults: tuple[tuple[Variable, ...], dict[str, Variable]] | None = None,
        maker: Variable | None = None,
    ) -> Variable:
        """Run `fn`'s bytecode in a child frame sharing this graph; its return value (a
        `nested_compile_region` wrapper: its body, as a subgraph). A generator function's call
        gives a generator instead, which `maker` (the tracker of the function made in the
        frame that `fn` stands for, if any) rebuilds while its body has not started."""
        if not isinstance(fn, types.FunctionType):  # a C accessor (a pybind11 property's getter)
            raise Unsupported(f"call of {getattr(fn, '__qualname__', fn)!r}, which is not Python code")
        if is_region(fn):
            return call_region(self, fn, fn_source, args, kwargs)
        code = fn.__code__
        if self.depth + 1 > config.inline_depth_limit:
            refusal = Unsupported(f"inlining deeper than config.inline_depth_limit ({config.inline_depth_limit})")
            refusal.breaks_inside_loops = True  # the call is compiled as a frame of its own there
            raise refusal
        if code.co_flags & (0x80 | 0x100 | 0x200):  # coroutine / async
            raise Unsupported(
                f"call to coroutine or async generator function {code.co_qualname}", kind=BreakKind.GENERATOR
            )
        if defaults is None:
            defaults = self._wrap_defaults(fn, fn_source)
        try:
            bound = bind_arguments(code, args, kwargs, defaults[0], defaults[1], code.co_qualname)
        except Unsupported:  # the arguments do not fit: CPython's TypeError, raised at the call
            error = binding_error(code, len(defaults[0]), list(defaults[1]), len(args), list(kwargs))
            if error is None:
                raise
            raise_python_error(self, error)
        cells: dict[str, Cell] = {}
        for name in code.co_cellvars:
            cells[name] = Cell(bound.pop(name, None))
            cells[name].owner = (code, name)
        if code.co_freevars:
            if closure is None:
                closure = self._wrap_closure(fn, fn_source)
            for name, cell in zip(code.co_freevars, closure):
                cells[name] = cell
        child = Frame(code, fn.__globals__, dict(bound), cells, self.output, parent=self)
        if code.co_flags & 0x20:  # a generator: its body runs as it is iterated (under its next())
            if code in self.output.eager_generators:
                raise Unsupported(
                    f"generator {code.co_qualname} has a graph break in its body; it runs eagerly",
                    kind=BreakKind.GENERATOR,
                )
            if closure is None:  # a function that exists: itself, with the closure it has
                maker = UserFunctionVariable(fn, fn_source)
            generator = GeneratorVariable(child, maker)
            self.generators.append(generator)
            return generator
        if self.calling is not None and self.calling[0] is self.current:
            callee = self.calling[1]
            child.called_directly = code is getattr(
                getattr(callee, "fn", None), "__code__", getattr(callee, "code", None)
            )
            child.function, child.callee = fn, callee
            self._follow_stop_path(child)
        elif self.current is not None and _STORES.get(self.current.opname) == code.co_name:
            child.function, child.result_discarded = fn, True
            self._follow_stop_path(child)
        return child.run()

    def resumable(self) -> bool:
        """Whether this inlined frame's caller receives exactly what it returns (a plain call of
        its function, or of a module whose forward it is) or drops it (a hook a store ran): a
        nested graph break inside it can then resume the caller after the call (`graph/breaks.py`).
        Asked when a break passes."""
        if self.result_discarded:
            return True
        callee = self.callee
        if callee is None:
            return False
        if self.called_directly and type(callee) in _PLAIN_CALLS:
            return True
        return isinstance(callee, NNModuleVariable) and callee.forwards_to(self.code)

    def _follow_stop_path(self, child: Frame) -> None:
        """A nested break's second trace: the child stops where the first trace broke, if this
        call is the one on the way there."""
        path = self.stop_path
        if path is None or child.depth >= len(path) or self.ip - 1 != path[self.depth][1]:
            return
        if child.code is not path[child.depth][0]:
            return
        child.stop_path = path
        if child.depth == len(path) - 1:
            child.stop_index = path[-1][1]

    def _wrap_defaults(
        self, fn: types.FunctionType, fn_source: Source | None
    ) -> tuple[tuple[Variable, ...], dict[str, Variable]]:
        # a function reached without a source (a method found on a class, a dataclass's
        # `__init__`) is its own source for its defaults: a literal one can be reassigned too
        # (`__defaults__`, or the class redefined in another process with a warm cache)
        base = fn_source or FixedObjectSource(fn, f"function {fn.__qualname__}")
        positional = tuple(
            wrap(self, value, ItemSource(AttrSource(base, "__defaults__"), i))
            for i, value in enumerate(fn.__defaults__ or ())
        )
        keyword = {
            name: wrap(self, value, ItemSource(AttrSource(base, "__kwdefaults__"), name))
            for name, value in (fn.__kwdefaults__ or {}).items()
        }
        return positional, keyword

    def _wrap_closure(self, fn: types.FunctionType, fn_source: Source | None) -> tuple[Cell, ...]:
        cells = []
        for i, cell in enumerate(fn.__closure__ or ()):
            known = self.tracked_cells.get(id(cell))
            if known is not None and known.real is cell:
                cells.append(known)
                continue
            try:
                value = cell.cell_contents
            except ValueError:
                cells.append(Cell(None, cell))
                continue
            if fn_source is not None:
                cell_source = ItemSource(AttrSource(fn_source, "__closure__"), i)
                cells.append(Cell(LazyValue(value, AttrSource(cell_source, "cell_contents")), cell, cell_source))
            else:
                # no path to the function (a method found on a class): the cell itself is the
                # source, so its contents are guarded and changes to them replayed on each call
                name = fn.__code__.co_freevars[i]
                contents = AttrSource(FixedObjectSource(cell, f"cell {name} of {fn.__qualname__}"), "cell_contents")
                self.output.guards.closure_cell(cell, fn, i)
                cells.append(Cell(LazyValue(value, contents), cell))
            self.tracked_cells[id(cell)] = cells[-1]
        return tuple(cells)


class NestedStop(BaseException):
    """Raised by an inlined frame that reached the instruction a nested break's second trace
    stops at; the compiled frame catches it (`Frame.stopped_inside`). A BaseException: nothing
    between them may take it for an error of the traced code."""

    def __init__(self, frame: Frame) -> None:
        super().__init__(frame.code.co_qualname)
        self.frame = frame


def _frame_line(code: types.CodeType, inst: Instr | None) -> str:
    """One traceback entry (`  File "f.py", line 3, in fn` and the source line) for `inst`."""
    positions = inst.positions if inst is not None else None
    line = positions.lineno if positions is not None and positions.lineno is not None else code.co_firstlineno
    summary = traceback.FrameSummary(
        code.co_filename,
        line,
        code.co_name,
        end_lineno=positions.end_lineno if positions is not None else None,
        colno=positions.col_offset if positions is not None else None,
        end_colno=positions.end_col_offset if positions is not None else None,
    )
    return "".join(traceback.StackSummary.from_list([summary]).format())


def _cut_context_cycle(context: Variable, raised: Variable) -> None:
    """CPython's rule: where `raised` already lies on the `__context__` chain of its new context,
    the link to it is cut (set to None), so the chain never loops."""
    seen: set[int] = set()
    link = context
    while id(link) not in seen:
        seen.add(id(link))
        attrs = link.attrs
        following = attrs.items.get("__context__") if attrs is not None else None
        if following is None:
            return
        if following is raised:
            attrs.items["__context__"] = constant(None)
            return
        link = following
