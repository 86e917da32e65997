"""Graph breaks: the transformed function of a frame whose trace stopped at an instruction it
cannot capture.

It runs the graph of everything before the instruction, replays side effects, rebuilds the
frame's value stack and locals as real Python values, performs the one instruction eagerly, and
tail-calls a *resume function* — the original bytecode entered at the next instruction, taking
the stack and the locals as arguments — through an entry wrapper, so the rest of the function is
captured, guarded and cached like any frame (DESIGN decision 2). A branch on a tensor becomes an
`if` choosing between two resume functions. When the instruction lies inside a `try` (or `with`)
block and raises, the handler's resume function continues with the exception, as CPython would.
"""

from __future__ import annotations

import dis
import functools
import types
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch

from .. import torch_flags
from ..bytecode.instructions import exception_entries
from ..bytecode.resume_code import (
    HANDLED_EXCEPTION,
    ITERATOR_FROM_TUPLE,
    NULL_STACK_ENTRY,
    REENTERED_CONTEXT,
    VALUE_STACK_ENTRY,
    LastiStackEntry,
    only_with_blocks,
    stack_arg_name,
    takes_argument,
)
from ..errors import Unsupported
from ..interpreter.break_rendering import BreakSite, Rendered, Slot
from ..interpreter.opcodes import renderings_for_running_python
from ..marks import eager_frame_of
from ..variables.base import Variable
from ..variables.builtins import BuiltinVariable
from ..variables.cells import LazyValue, RealCellVariable
from ..variables.constants import IteratorVariable, NullVariable
from ..variables.containers import DictVariable, SequenceVariable, SetVariable
from ..variables.contexts import ContextExitVariable, GradModeFunctionVariable
from ..variables.exceptions import HandlerEntryVariable, LastiVariable
from ..variables.frame_objects import NNModuleVariable
from ..variables.functions import NestedFunctionVariable, PartialVariable, UserFunctionVariable, UserMethodVariable
from ..variables.global_contexts import (
    ContextDecoratedFunctionVariable,
    GlobalContextMethod,
    GlobalContextVariable,
    close_in_graph,
)
from ..variables.new_modules import NewModuleObjectVariable
from ..variables.symbolic import SymNodeVariable
from ..variables.trace_rules import compiles_as_own_frame, skipped_with_callees_compiled
from .codegen import CodeWriter, GraphCompiler, Reconstructor, finish
from .eager_warnings import warn_at
from .resume import Origin, nested_resume_function, resume_code, resume_function
from .runtime import Runtime

if TYPE_CHECKING:
    from ..interpreter.frame import Frame


class BreakWriter:
    """Builds the transformed function of a frame that breaks at `frame.instructions[index]`."""

    def __init__(
        self,
        frame: Frame,
        index: int,
        fn: types.FunctionType,
        backend: Any,
        backend_name: str,
        runtime: Runtime,
        *,
        compile_callees: bool = True,
        compile_resume: bool = True,
        callers: Sequence[Frame] = (),
        root_fn: types.FunctionType | None = None,
    ) -> None:
        self.frame = frame
        # False: a function called at the break runs as plain Python (`Unsupported.eager_callee`)
        self.compile_callees = compile_callees
        # False: the code after the break runs as plain Python (`Unsupported.rest_eager`)
        self.compile_resume = compile_resume
        self.inst = frame.instructions[index]
        # a resume function that breaks again is resumed from the original code
        try:
            self.origin = Origin(fn)
        except NotImplementedError as e:
            raise Unsupported(str(e)) from e
        self.next_offset = frame.instructions[index + 1].offset if index + 1 < len(frame.instructions) else None
        self.fn = fn
        # a nested break (`config.nested_graph_breaks`): `frame` is an inlined call's, and the
        # frames that called it, innermost first, are resumed after their calls in turn; the
        # transformed function is the compiled frame's (`root_fn`)
        self.root_fn = root_fn if root_fn is not None else fn
        try:
            self.callers = [(caller, Origin(caller.function or self.root_fn)) for caller in callers]
        except NotImplementedError as e:
            raise Unsupported(str(e)) from e
        # each caller's (frame, origin, stack slots, live locals), as `build` rebuilds them
        self.caller_states: list[tuple[Frame, Origin, list[Slot], list[tuple[str, str]]]] = []
        self.backend = backend
        self.backend_name = backend_name
        # compile(dynamic=...): the functions this break hands over compile with the same setting
        policy = frame.output.policy
        self.dynamic_setting = policy.dynamic if policy is not None else None
        self.runtime = runtime
        self.writer = CodeWriter()
        self.rebuild = Reconstructor(self.writer)
        self.writer.namespace["___Continue"] = runtime.continue_class
        self.dynamic_locals: set[tuple[int, str]] = set()  # (id of frame, name): symbolic numbers
        self.shares_cells = self._shares_cells()
        sharing = [(self.frame, self.origin)] if self.shares_cells else []
        if self.callers:  # each frame of a chain hands its cells themselves to its link
            self.shares_cells = bool(self.origin.code.co_cellvars)
            sharing = [(self.frame, self.origin), *self.callers]
        for sharer, origin in sharing:
            cells = (sharer.cells[name] for name in origin.code.co_cellvars)
            self.rebuild.shared_cells.update(id(c) for c in cells if c.real is None)
        # a chain's links' closure cells (cell variables, then free variables), by id of frame
        self.link_cells: dict[int, list[str]] = {}
        # inference-mode / autocast managers entered around the eager part, outermost first
        self.reentered: list[tuple[GlobalContextVariable, str]] = []

    # -- the frame state ---------------------------------------------------------------------

    def stack_slots(self) -> list[Slot]:
        slots = []
        for var in self.frame.stack:
            if isinstance(var, NullVariable):
                slots.append(Slot(NULL_STACK_ENTRY))
            elif isinstance(var, LastiVariable):
                slots.append(Slot(LastiStackEntry(self.origin.offset(var.offset))))
            elif isinstance(var, HandlerEntryVariable):
                slots.append(Slot(HANDLED_EXCEPTION, self._evaluate(var.exception)))
            elif isinstance(var, (ContextExitVariable, GlobalContextMethod)) and var.called:
                # left already (a `with` block's exception exit): only popped from here on
                slots.append(Slot(VALUE_STACK_ENTRY, "None"))
            elif isinstance(var, ContextExitVariable):
                slots.append(Slot(VALUE_STACK_ENTRY, self._enter_context(var), context_exit=True))
            elif isinstance(var, GlobalContextMethod):
                if self.callers:
                    raise Unsupported(f"{var.describe()} open at a nested graph break")
                slots.append(Slot(REENTERED_CONTEXT, self._enter_global_context(var)))
            elif isinstance(var, IteratorVariable) and var.on_stack_as_tuple_iterator:
                items = var.items[var.index :]
                as_range = _as_range(items)
                if as_range is not None:
                    slots.append(Slot(ITERATOR_FROM_TUPLE, repr(as_range)))
                else:
                    slots.append(Slot(ITERATOR_FROM_TUPLE, f"({''.join(self.rebuild.expr(i) + ', ' for i in items)})"))
            else:
                slots.append(Slot(VALUE_STACK_ENTRY, self._evaluate(var), _is_dynamic_number(var)))
        return slots

    def _evaluate(self, var: Variable) -> str:
        expr = self.rebuild.expr(var)
        if expr.isidentifier():
            return expr
        name = self.writer.temp("s")
        self.writer.post.append(f"{name} = {expr}")
        return name

    def _while_handling(self, exception: Variable, lines: list[str]) -> list[str]:
        """The eager lines run inside an `except` block handling `exception`, as in the frame:
        `sys.exc_info()`, `traceback.print_exc()` and the chaining of what they raise see it. Its
        traceback and `__context__` are left as they were (raising it again adds the generated
        code's frame, and chains it to the exception the caller handles, if any)."""
        handled = self._evaluate(exception)
        return [
            f"___tb, ___ctx = {handled}.__traceback__, {handled}.__context__",
            "try:",
            f"    raise {handled}",
            "except BaseException:",
            f"    {handled}.__traceback__, {handled}.__context__ = ___tb, ___ctx",
            *["    " + line for line in lines],
        ]

    def _grad_mode_before_open_contexts(self) -> bool:
        """The real grad mode the eager part starts from: the mode before the outermost grad or
        inference-mode context still open at the break (it is re-entered for real), else the
        traced mode."""
        stacks = [caller.stack for caller, _ in reversed(self.callers)] + [self.frame.stack]
        for var in (var for stack in stacks for var in stack):
            if _open_grad_context(var):
                return var.previous
            if isinstance(var, GlobalContextMethod) and not var.called:
                return var.context.grad_before
        return torch.is_grad_enabled()

    def _enter_context(self, exit_var: ContextExitVariable) -> str:
        """Re-enter, for real, a grad-mode context the trace had entered; its `__exit__` goes on."""
        context = exit_var.context
        name = self.writer.temp("ctx")
        cls = self.writer.bind(context.cls, "cls")
        args = ", ".join(repr(a) for a in context.args)
        self.writer.post.append(f"{name} = {cls}({args})")
        self.writer.post.append(f"{name}.__enter__()")
        return f"{name}.__exit__"

    def _enter_global_context(self, method: GlobalContextMethod) -> str:
        """Enter, for real, an inference-mode or autocast context open at the break; it is left
        after the eager part (`_leave_global_contexts`) and the resume function gets the manager,
        which its prologue enters again, so that its graph records the context's exit."""
        if not method.is_open_exit(self.frame.output):
            raise Unsupported(f"{method.describe()} on the stack at a graph break")
        name = self._evaluate(method.context)
        self.writer.post.append(f"{name}.__enter__()")
        self.reentered.append((method.context, name))
        return name

    def _refuse_contexts_off_the_stack(self) -> None:
        """Every open inference-mode or autocast context must be one whose `__exit__` is on the
        stack (a `with` block): one entered by a bare `__enter__()` call would not be entered
        again around the eager part and in the resume function."""
        entered = [context for context, _ in self.reentered]
        open_contexts = self.frame.output.open_contexts
        if len(entered) != len(open_contexts) or any(a is not b for a, b in zip(entered, open_contexts)):
            raise Unsupported("a graph break with an inference-mode or autocast context entered without `with`")

    def _leave_global_contexts(self) -> list[str]:
        """Leave, innermost first, the contexts `_enter_global_context` entered (grad-mode
        contexts stay entered: the resume function gets their `__exit__`)."""
        return [f"{name}.__exit__(None, None, None)" for _, name in reversed(self.reentered)]

    def _refuse_shared_iterators(self) -> None:
        """Iterators cross a break as tuples of their remaining items, one per reference: an
        iterator reachable twice (a loop over the local `it`, or `it2 = it`) would then be two
        iterators, each advanced on its own. A loop over a list, dict or set that the code after
        the break can still reach would no longer see that code's changes to it, and an iterator
        due to raise (`zip(strict=True)` of unequal lengths, a dict that changed size) would not
        raise. Such a frame runs eagerly instead."""
        seen: set[int] = set()
        values = [*self.frame.stack, *self.frame.locals.values()]
        for caller, _ in self.callers:
            values += [*caller.stack, *caller.locals.values()]
        values += [c.contents for c in self.frame.cells.values() if isinstance(c.contents, Variable)]
        reachable = _containers_within([v for v in values if not isinstance(v, IteratorVariable)])
        for var in values:
            if not isinstance(var, IteratorVariable):
                continue
            if id(var) in seen:
                raise Unsupported(
                    "an iterator reachable by two names (e.g. a loop over a local iterator) cannot cross a graph break",
                    hint="the frame runs eagerly; loop over the iterable itself",
                )
            seen.add(id(var))
            iterated = var.iterated()
            if var.may_raise():
                raise Unsupported("an iterator about to raise cannot cross a break", hint="the frame runs eagerly")
            if iterated is not None and (iterated.source is not None or id(iterated) in reachable):
                raise Unsupported(
                    f"a loop over {iterated.describe()}, which the code after the graph break can change, "
                    "cannot cross the break",
                    hint="the frame runs eagerly; loop over a copy (`list(...)`) to keep the graphs",
                )

    def _shares_cells(self) -> bool:
        """Whether the resume function receives the frame's cells themselves (as free variables)
        rather than their values in fresh cells: where a function made before the break closes
        over a cell that the frame assigns again (a copy would go stale), and in a resume
        function that already shares them (its closure has that layout)."""
        cellvars = self.origin.code.co_cellvars
        if not cellvars:
            return False
        if cellvars[0] in self.frame.code.co_freevars:
            return True
        cells = [self.frame.cells.get(name) for name in cellvars]
        return any(c is not None and c.captured and not c.copy_is_safe() for c in cells)

    def shared_closure(self) -> str:
        """With `shares_cells`, the resume function's closure: a cell for each cell variable of
        the original code (a new one, given the variable's value, or the running resume
        function's own), then the original closure."""
        return "(" + "".join(c + ", " for c in self.closure_cells(self.frame, self.origin)) + ")"

    def closure_cells(self, frame: Frame, origin: Origin) -> list[str]:
        """The cells of `frame` a resume function sharing them receives (`shared_closure`)."""
        code = origin.code
        cells = []
        for name in code.co_cellvars + code.co_freevars:
            cell = frame.cells[name]
            if cell.real is not None:
                cells.append(self.rebuild.expr(RealCellVariable(cell, cell.root_index)))
                continue
            expr = self.rebuild.new_cell(cell)
            if isinstance(cell.contents, LazyValue):
                self.writer.post.append(f"{expr}.cell_contents = {self.writer.source(cell.contents.source)}")
            elif cell.contents is not None:
                self.writer.post.append(f"{expr}.cell_contents = {self._evaluate(cell.contents)}")
            cells.append(expr)
        return cells

    def live_locals(self, frame: Frame | None = None, origin: Origin | None = None) -> list[tuple[str, str]]:
        """(name, expression) of the live locals of the breaking frame (or of a caller of it)."""
        frame = frame or self.frame
        code = (origin or self.origin).code
        live = []
        shares = self.shares_cells if frame is self.frame else bool(code.co_cellvars)
        for name in dict.fromkeys(code.co_varnames + code.co_cellvars):
            if shares and name in code.co_cellvars:
                continue  # in the closure (`shared_closure`)
            value = frame.locals.get(name)
            if value is None and name in code.co_cellvars and name in frame.cells:
                value = frame.cells[name].contents  # a cell's value; the resume code makes a fresh cell
            if value is None or isinstance(value, NullVariable):
                continue
            if isinstance(value, LazyValue):
                live.append((name, self.writer.source(value.source)))
            else:
                live.append((name, self._evaluate(value)))
                if _is_dynamic_number(value):
                    self.dynamic_locals.add((id(frame), name))
        return live

    def caller_slots(self, caller: Frame) -> list[Slot]:
        """A caller's stack under the call it is in (a nested break): values, and the `__exit__`
        of each grad-mode `with` block it is in, whose context is entered again; no loop or `try`
        block of a caller is open there (`frame_compiler`)."""
        if caller.handled:
            raise Unsupported("a nested graph break under an except block of a caller")
        slots = []
        for var in caller.stack:
            if isinstance(var, NullVariable):
                slots.append(Slot(NULL_STACK_ENTRY))
            elif _open_grad_context(var):
                slots.append(Slot(VALUE_STACK_ENTRY, self._enter_context(var), context_exit=True))
            elif isinstance(var, (LastiVariable, HandlerEntryVariable, ContextExitVariable, GlobalContextMethod)):
                raise Unsupported(f"{var.describe()} on a caller's stack at a nested graph break")
            elif isinstance(var, IteratorVariable):
                raise Unsupported("an iterator on a caller's stack at a nested graph break")
            else:
                slots.append(Slot(VALUE_STACK_ENTRY, self._evaluate(var), _is_dynamic_number(var)))
        return slots

    # -- resume calls ------------------------------------------------------------------------

    def resume_call(
        self, offset: int, slots: list[Slot], live: list[tuple[str, str]], closure: str | None, handler: bool = False
    ) -> str:
        """`return ___Continue(<resume at offset>, (stack..., locals...))`. `offset` is in the
        frame's own code; a `handler` offset is in the original code, and its resume function
        runs uncompiled. `closure`: the expression of the shared closure (`shares_cells`)."""
        kinds = tuple(s.kind for s in slots)
        names = tuple(name for name, _ in live)
        dynamic = tuple(stack_arg_name(i) for i, s in enumerate(slots) if s.dynamic and takes_argument(s.kind))
        dynamic += tuple(name for name in names if (id(self.frame), name) in self.dynamic_locals)
        origin = self.origin
        target_offset = offset if handler else origin.offset(offset)
        if self.callers:
            assert not handler, "a nested break's handler goes through _nested_resume_call (handler_call)"
            return self._nested_resume_call(target_offset, slots, live)
        try:
            resume = resume_function(
                origin.fn,
                target_offset,
                kinds,
                names,
                self.backend,
                self.backend_name,
                self.runtime,
                compiled=self.compile_resume,
                dynamic=dynamic,
                compile_dynamic=self.dynamic_setting,
                shares_cells=self.shares_cells,
            )
        except NotImplementedError as e:
            raise Unsupported(f"cannot resume there: {e}") from e
        target = self.writer.bind(resume, "resume")
        args = [s.expr for s in slots if takes_argument(s.kind)] + [expr for _, expr in live]
        if closure is not None:
            args.insert(0, closure)
        elif origin.code.co_freevars:
            args.insert(0, "___cells")  # the closure of the function that broke (resume_function)
        return f"return ___Continue({target}, ({''.join(a + ', ' for a in args)}))"

    def _nested_resume_call(
        self, offset: int, slots: list[Slot], live: list[tuple[str, str]], eager_first: bool = False
    ) -> str:
        """`return ___Continue(<chain>, (args...))` for a nested break: the chain of resume
        functions (`nested_resume_function`) continues the breaking frame at `offset` (in the
        original code), then each caller after its call. `eager_first`: the breaking frame's
        part runs as plain Python (`step_unsupported()`, or its exception handler)."""
        links: list[tuple] = []
        args: list[str] = []
        dynamic: list[int] = []
        made: list[str] = []  # the functions of the links with cells (`nested_resume_function`)

        def add(frame: Frame, origin: Origin, at: int, link_slots: list[Slot], link_live: list, result: bool) -> None:
            kinds = tuple(s.kind for s in link_slots) + ((VALUE_STACK_ENTRY,) if result else ())
            names = tuple(name for name, _ in link_live)
            passed = [s for s in link_slots if takes_argument(s.kind)]
            exits = tuple(i for i, s in enumerate(passed) if s.context_exit)
            shares = bool(origin.code.co_cellvars)
            links.append((origin.code, origin.fn.__globals__, at, kinds, names, exits, shares, result))
            cells = self.link_cells.get(id(frame))
            if cells is not None:  # the link's function, made around the cells it shares
                code = resume_code(origin.code, at, kinds, names, shares)
                parts = [self.writer.bind(code, "code"), self.writer.bind(origin.fn.__globals__, "globals")]
                closure = "(" + "".join(c + ", " for c in cells) + ")"
                function = self.writer.bind(types.FunctionType, "FunctionType")
                made.append(f"{function}({parts[0]}, {parts[1]}, {code.co_name!r}, None, {closure})")
            for s in passed:
                if s.dynamic:
                    dynamic.append(len(args))
                args.append(s.expr)
            for name, expr in link_live:
                if (id(frame), name) in self.dynamic_locals:
                    dynamic.append(len(args))
                args.append(expr)

        add(self.frame, self.origin, offset, slots, live, False)
        callee = self.frame
        for caller, origin, caller_slots, caller_live in self.caller_states:
            after = origin.offset(caller.instructions[caller.ip].offset)
            # after a STORE_ATTR/STORE_SUBSCR that ran a hook, nothing goes on the stack
            add(caller, origin, after, caller_slots, caller_live, not callee.result_discarded)
            callee = caller
        root = self.callers[-1][0]
        try:
            resume = nested_resume_function(
                tuple(links),
                self.backend,
                self.backend_name,
                self.runtime,
                tuple(dynamic),
                self.dynamic_setting,
                present_as=(root.code.co_filename, root.line, root.code.co_name),
                eager_first=eager_first or not self.compile_resume,
            )
        except NotImplementedError as e:
            raise Unsupported(f"cannot resume there: {e}") from e
        args = made + args
        target = self.writer.bind(resume, "resume")
        return f"return ___Continue({target}, ({''.join(a + ', ' for a in args)}))"

    def handler_call(self, slots: list[Slot], live: list[tuple[str, str]], closure: str | None) -> list[str] | None:
        """The `except` clause sending an exception raised by the eager instruction to the
        frame's own handler, when the instruction is inside a try or with block (having left the
        re-entered contexts, which the handler's resume function enters again)."""
        offset = self.origin.offset(self.inst.offset)
        if self.callers and only_with_blocks(self.origin.code, offset):
            return None  # grad-mode blocks only: left by the eager part's `except` (`_open_exits`)
        for entry in exception_entries(self.origin.code):
            if entry.start <= offset < entry.end:
                handler_slots = list(slots[: entry.depth])
                if entry.lasti:
                    handler_slots.append(Slot(LastiStackEntry(offset)))
                handler_slots.append(Slot(VALUE_STACK_ENTRY, "___e"))
                if self.callers:  # the handler runs as plain Python, then the callers resume
                    call = self._nested_resume_call(entry.target, handler_slots, live, eager_first=True)
                else:
                    call = self.resume_call(entry.target, handler_slots, live, closure, handler=True)
                leave = self._leave_global_contexts()
                return ["except BaseException as ___e:", *("    " + line for line in [*leave, call])]
        return None

    # -- the instruction ---------------------------------------------------------------------

    def callable_expr(self, var: Variable) -> str:
        """A callable at the break: user functions and modules go through entry wrappers, so
        they are compiled as frames of their own."""
        runtime = self.runtime
        callee = getattr(var, "fn", None)
        compile_callee = self.compile_callees and compiles_as_own_frame(callee)
        if isinstance(var, UserFunctionVariable) and compile_callee and var.fn.__closure__ and var.source is not None:
            # guards match such a function by its code: call the one this call has, with its cells
            # bound as a method, not a partial: calling it is a plain Python call, which takes no
            # C stack (a partial's does; a recursion through it would run out of that first)
            closure_caller = runtime.closure_caller(var.fn, self.backend, self.backend_name, self.dynamic_setting)
            caller = self.writer.bind(closure_caller, "call")
            bound = self.writer.temp("m")
            self.writer.post.append(f"{bound} = ___MethodType({caller}, {self._evaluate(var)})")
            self.writer.namespace["___MethodType"] = types.MethodType
            return bound
        # `nested`: these wrappers raise the recursion limit by their own frame (`recursion`)
        if isinstance(var, UserFunctionVariable) and compile_callee:
            wrapped = runtime.entry_wrapper(
                var.fn, self.backend, self.backend_name, False, self.dynamic_setting, nested=True
            )
            return self.writer.bind(wrapped, "call")
        if isinstance(var, UserMethodVariable) and compile_callee:
            wrapped = runtime.entry_wrapper(
                var.fn, self.backend, self.backend_name, False, self.dynamic_setting, nested=True
            )
            name = self.writer.bind(wrapped, "call")
            bound = self.writer.temp("m")
            self.writer.post.append(f"{bound} = ___MethodType({name}, {self._evaluate(var.self_var)})")
            self.writer.namespace["___MethodType"] = types.MethodType
            return bound
        if (
            isinstance(var, UserFunctionVariable)
            and self.compile_callees
            and (eager_frame_of(callee) is not None or skipped_with_callees_compiled(callee))
        ):
            # `disable(f, recursive=False)`, torch's untraced Python: f runs eagerly, the
            # functions it calls compiled
            router = runtime.callee_router(self.backend, self.backend_name, self.dynamic_setting)
            return f"{self.writer.bind(router, 'route')}({self._evaluate(var)})"
        if isinstance(var, NestedFunctionVariable):
            wrap = self.writer.bind(runtime.entry_wrapper, "entry_wrapper")
            backend = self.writer.bind(self.backend, "backend")
            # each call wraps a new function object; this code keeps their shared cache alive
            self.writer.bind(runtime.cache_for(var.code, var.globals_dict, self.backend, self.backend_name), "cache")
            return (
                f"{wrap}({self._evaluate(var)}, {backend}, {self.backend_name!r}, False, {self.dynamic_setting},"
                " nested=True)"
            )
        if isinstance(var, PartialVariable) and self.compile_callees and all(k.isidentifier() for k in var.kwargs):
            # `partial(f, a)(x)`: f called through what compiles it, with the stored arguments
            partial = self.writer.bind(functools.partial, "partial")
            parts = [self.callable_expr(var.fn), *(self._evaluate(a) for a in var.args)]
            parts += [f"{k}={self._evaluate(v)}" for k, v in var.kwargs.items()]
            return f"{partial}({', '.join(parts)})"
        if isinstance(var, (GradModeFunctionVariable, ContextDecoratedFunctionVariable)):
            # `torch.no_grad()(f)(x)`: the context's decorator around what compiles f, so f's code
            # after a break inside it is compiled too, in the mode the decorator sets
            return f"{self._evaluate(var.context)}({self.callable_expr(var.fn)})"
        if callee is warnings.warn:
            line = self.inst.positions.lineno if self.inst.positions is not None else self.frame.line
            where = (self.frame.code.co_filename, line, self.frame.f_globals)
            return self.writer.bind(functools.partial(warn_at, *where), "warn")
        if isinstance(var, BuiltinVariable) and var.fn is globals:
            return f"(lambda: {self.writer.namer.name_for(self.frame.f_globals)})"
        if isinstance(var, BuiltinVariable) and var.fn in (locals, vars):
            raise Unsupported(f"{var.fn.__name__}() would see the generated code's variables")
        if isinstance(var, BuiltinVariable) and var.fn is super and self.inst.arg == 0:
            # it reads the calling frame's `__class__` cell and first argument
            raise Unsupported("super() without arguments would see the generated code's frame")
        if isinstance(var, (NNModuleVariable, NewModuleObjectVariable)):
            module_caller = runtime.module_caller(self.backend, self.backend_name, self.dynamic_setting)
            caller = self.writer.bind(module_caller, "modcall")
            module = self._evaluate(var)
            bound = self.writer.temp("m")
            self.writer.post.append(f"{bound} = ___MethodType({caller}, {module})")
            self.writer.namespace["___MethodType"] = types.MethodType
            return bound
        return self._evaluate(var)

    def build(self, compile_graph: GraphCompiler, input_sources: list, label: str) -> types.FunctionType:
        frame = self.frame
        traced_grad_mode = torch.is_grad_enabled()
        flags = {**torch_flags.current(), torch_flags.GRAD: self._grad_mode_before_open_contexts()}
        self.rebuild.set_flags(flags, frame.output)
        self._refuse_shared_iterators()
        # the contexts open at the break are entered again outermost first: the callers' first
        caller_slots = {id(caller): self.caller_slots(caller) for caller, _ in reversed(self.callers)}
        slots = self.stack_slots()
        self._refuse_contexts_off_the_stack()
        entered = [*slots, *(s for stack in caller_slots.values() for s in stack)]
        if any(s.kind is REENTERED_CONTEXT or s.context_exit for s in entered):
            # the contexts entered leave the innermost one's mode; the code may have switched it
            # since (a `set_grad_enabled` statement, a grad block left on its exception path)
            setter = self.writer.bind(torch._C._set_grad_enabled, "set_grad")
            self.writer.post.append(f"{setter}({traced_grad_mode})")
        live = self.live_locals()
        closure = self.shared_closure() if self.shares_cells and not self.callers else None
        for linked, origin in [(frame, self.origin), *self.callers] if self.callers else []:
            if origin.code.co_cellvars or origin.code.co_freevars:
                self.link_cells[id(linked)] = self.closure_cells(linked, origin)
        self.caller_states = [
            (caller, origin, caller_slots[id(caller)], self.live_locals(caller, origin))
            for caller, origin in self.callers
        ]
        if frame.output.side_effects:  # take values read from inputs before the replay changes them
            slots = self._pinned(slots)
            live = [(name, self.rebuild.pin(expr)) for name, expr in live]
            self.caller_states = [
                (caller, origin, self._pinned(caller_slots), [(n, self.rebuild.pin(e)) for n, e in caller_live])
                for caller, origin, caller_slots, caller_live in self.caller_states
            ]
        self.rebuild.replay(frame.output.side_effects)
        eager, continuations = self.instruction(slots)
        if eager and frame.handled:
            if self.callers:
                raise Unsupported("a nested graph break inside an except block")
            eager = self._while_handling(frame.handled[-1], eager)
        tail = self.writer.tail
        handler = self.handler_call(slots, live, closure) if eager else None
        exits = self._open_exits(slots) if self.callers and handler is None else []
        if eager and exits:
            # the `with` blocks open in the frames at a nested break are left as the exception
            # from the eager part leaves them (grad-mode contexts: their mode restored)
            tail.append("try:")
            tail.extend("    " + line for line in eager)
            tail.append("except BaseException:")
            tail.extend(f"    {exit_}(None, None, None)" for exit_ in exits)
            tail.append("    raise")
        elif handler is not None:
            tail.append("try:")
            tail.extend("    " + line for line in eager)
            tail.extend(handler)
        elif eager and self.reentered:
            raise Unsupported("a graph break inside an inference-mode or autocast block but outside its handler")
        else:
            tail.extend(eager)
        tail.extend(self._leave_global_contexts())
        for condition, offset, new_slots in continuations:
            call = self.resume_call(offset, new_slots, live, closure)
            if condition is None:
                tail.append(call)
            else:
                tail.append(f"if {condition}:")
                tail.append("    " + call)
        line = frame.line if frame.current is None else _line_of(self.inst, frame.line)
        code = frame.code
        if self.callers:  # the transformed function is the compiled frame's, at its call
            root = self.callers[-1][0]
            code, line = root.code, root.line
        close_in_graph(frame.output)
        return finish(self.writer, self.rebuild, input_sources, compile_graph, code, self.root_fn, label, line)

    def _open_exits(self, slots: list[Slot]) -> list[str]:
        """The `__exit__`s of the grad-mode contexts open at a nested break, innermost first:
        the breaking frame's, then each caller's."""
        stacks = [slots, *(caller_slots for _, _, caller_slots, _ in self.caller_states)]
        return [s.expr for stack in stacks for s in reversed(stack) if s.context_exit]

    def _pinned(self, slots: list[Slot]) -> list[Slot]:
        return [replace(s, expr=self.rebuild.pin(s.expr)) if s.expr else s for s in slots]

    def instruction(self, slots: list[Slot]) -> Rendered:
        """(eager lines, [(condition, resume offset, stack)]) for the break instruction, as its
        opcode's registered rendering writes them (`interpreter/opcodes.py`)."""
        inst = self.inst
        rendering = renderings_for_running_python().get(inst.opname)
        if rendering is None:
            raise Unsupported(f"a graph break at {inst.opname} is not supported")
        site = BreakSite(
            frame=self.frame,
            slots=slots,
            next_offset=self.next_offset,
            callable_expr=self.callable_expr,
            bind=self.writer.bind,
            namespace=self.writer.namespace,
            globals_expr=lambda: self.writer.namer.name_for(self.frame.f_globals),
        )
        return rendering(site, inst)


def _open_grad_context(var: Variable) -> bool:
    """The `__exit__` of a grad-mode context the frame is inside, entered again at the break."""
    return isinstance(var, ContextExitVariable) and not var.called


def _is_dynamic_number(var: Variable) -> bool:
    """A symbolic int or float of the breaking frame: it stays symbolic in the resume function."""
    return isinstance(var, SymNodeVariable) and var.python_type() in (int, float)


def _as_range(items: list[Variable]) -> range | None:
    """The remaining items of a loop over a range, as a range again (a short value to pass and
    to guard, instead of a tuple of every remaining number)."""
    if len(items) < 2 or not all(i.is_constant() and type(i.as_constant()) is int for i in items):
        return None
    values = [i.as_constant() for i in items]
    step = values[1] - values[0]
    if step == 0 or any(b - a != step for a, b in zip(values, values[1:])):
        return None
    return range(values[0], values[-1] + step, step)


def _line_of(inst: dis.Instruction, default: int) -> int:
    positions = inst.positions
    return positions.lineno if positions is not None and positions.lineno is not None else default


def can_break_at(inst: dis.Instruction) -> bool:
    """Whether the instruction's opcode has an eager rendering (it can break the graph)."""
    return inst.opname in renderings_for_running_python()


def _containers_within(values: list[Variable]) -> set[int]:
    """ids of the lists, dicts and sets among `values` and inside their tuples, lists and dicts."""
    found: set[int] = set()
    pending = list(values)
    while pending:
        var = pending.pop()
        if id(var) in found:
            continue
        if isinstance(var, (SequenceVariable, DictVariable, SetVariable)):
            found.add(id(var))
        if isinstance(var, SequenceVariable):
            pending.extend(var.items)
        elif isinstance(var, DictVariable):
            pending.extend(var.known_values())
        elif isinstance(var, SetVariable):
            pending.extend(var.members.values())
    return found
