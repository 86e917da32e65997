"""Resume functions: the original bytecode entered at a graph break's next instruction.

Each is built once per (code, offset, stack layout, live locals) and wrapped by an entry wrapper
with the frame's backend, so it is compiled on its first call and cached like any function.
"""

from __future__ import annotations

import types
import weakref
from typing import Any

from .. import process_state
from ..bytecode.fingerprint import code_fingerprint
from ..bytecode.instructions import decoded
from ..bytecode.resume_code import (
    SlotKind,
    build_resume_code,
    original_offsets,
    resume_code_name,
    takes_argument,
)
from ..code_tables import CodeTable
from ..guards.pyfunc import make_function, with_closure
from ..marks import mark_disabled
from .runtime import Runtime, remember_maker

# None of these keeps a code object alive: an entry goes when the code it is about dies, and a
# dispatcher when no transformed code calls it any more.
# code -> (offset, stack kinds, live locals) -> resume code
_codes: CodeTable[dict[tuple, types.CodeType]] = CodeTable()
_wrappers: weakref.WeakValueDictionary[tuple, Any] = weakref.WeakValueDictionary()
# resume code -> source names of its arguments that are symbolic from the first compile
_dynamic: CodeTable[set[str]] = CodeTable()
# resume code -> the code it continues
_origins: CodeTable[weakref.ref] = CodeTable()
_offset_maps: CodeTable[dict[int, int] | None] = CodeTable()
# resume code -> its key in `_codes` (offset, stack kinds, live locals, shares cells: `made_with`)
_keys: CodeTable[tuple] = CodeTable()
# (resume codes, options) -> the chain function made of them (`nested_chain`)
_chain_functions: weakref.WeakValueDictionary[tuple, types.FunctionType] = weakref.WeakValueDictionary()
# resume code -> its name in logs and reports (`__resume_at_48_f`; its co_name is the original's)
_names: CodeTable[str] = CodeTable()


def resume_code(
    code: types.CodeType, offset: int, kinds: tuple[SlotKind, ...], live: tuple[str, ...], shares_cells: bool = False
) -> types.CodeType:
    key = (offset, kinds, live, shares_cells)
    built = _codes.get(code)
    found = None if built is None else built.get(key)
    if found is None:
        found = build_resume_code(code, offset, list(kinds), list(live), cells_as_freevars=shares_cells)
        _origins[found] = weakref.ref(code)
        _names[found] = resume_code_name(code, offset)
        _keys[found] = key
        # last: an interrupt before this leaves no half-registered code
        _codes.setdefault(code, {})[key] = found
    return found


def made_with(code: types.CodeType) -> tuple | None:
    """`resume_code`'s arguments that made `code` (None for other code): generated code held
    by a persisted entry is made again from them in another process."""
    key = _keys.get(code)
    original = origin_of(code)
    return None if key is None or original is None else (original, *key)


def frame_name(code: types.CodeType) -> str:
    """How logs and reports name the frame of `code`: `__resume_at_<offset>_<name>` for resume
    code, which otherwise looks like the function it continues."""
    return _names.get(code, code.co_qualname)


class Origin:
    """Where a frame's instructions come from: itself, or (for a resume function) the original
    code, with its offsets translated so breaks in resume functions resume the original."""

    def __init__(self, fn: types.FunctionType) -> None:
        code = fn.__code__
        original = origin_of(code)
        self.fn = fn
        self.resume_code = code
        self.offsets: dict[int, int] | None = None
        if original is not None:
            if code not in _offset_maps:
                _offset_maps[code] = original_offsets(code, original)
            self.offsets = _offset_maps[code]
            if self.offsets is None:
                raise NotImplementedError(f"{code.co_name} cannot be mapped back to {original.co_name}")
            # a resume function sharing the frame's cells has them before the original closure
            closure = (
                fn.__closure__[len(fn.__closure__) - len(original.co_freevars) :] if original.co_freevars else None
            )
            self.fn = types.FunctionType(original, fn.__globals__, original.co_name, None, closure)

    @property
    def code(self) -> types.CodeType:
        return self.fn.__code__

    def offset(self, offset: int) -> int:
        if self.offsets is None:
            return offset
        if offset not in self.offsets:
            # an offset computed past a call may land on an EXTENDED_ARG prefix of the next one
            offset = decoded(self.resume_code).at(offset).offset
        return self.offsets[offset]


def resume_function(
    fn: types.FunctionType,
    offset: int,
    kinds: tuple[SlotKind, ...],
    live: tuple[str, ...],
    backend: Any,
    backend_name: str,
    runtime: Runtime,
    compiled: bool = True,
    dynamic: tuple[str, ...] = (),
    compile_dynamic: bool | None = None,
    shares_cells: bool = False,
) -> Any:
    """What a graph break tail-calls: the guarded dispatcher of `fn`'s resume function at
    `offset` (created once, `runtime.resume_dispatcher`), or the plain resume function when not
    `compiled` (exception handlers: an exceptional path is not worth a compilation). Either
    takes the arguments as one tuple (`entry.Continue`).

    For code with free variables the tuple has the closure first, so the result serves every
    closure of the code and keeps none alive. With `shares_cells` the resume code takes the
    frame's cell variables as free variables too (their cells first in that closure), so that
    functions made before the break and the code after it keep sharing them.

    `dynamic` names arguments (`__stack0`, a local) holding Python numbers read from tensor
    data (`.item()`, `.tolist()`) or symbolic in the breaking frame: they are graph inputs of
    the resume function from its first compile, not constants that each new value recompiles.
    `compile_dynamic` is the breaking frame's `compile(dynamic=...)` setting, which the resume
    function compiles with too.
    """
    code = resume_code(fn.__code__, offset, kinds, live, shares_cells)
    if dynamic:
        _dynamic.setdefault(code, set()).update(f"L[{name!r}]" for name in dynamic)
    # the code tells `shares_cells` apart; functions made from one code over other globals resume
    # over their own
    key = (id(code), id(fn.__globals__), id(backend), compiled, compile_dynamic)
    found = _wrappers.get(key)
    if found is None:
        # fresh cells: the cached function must not keep the breaking call's closure alive
        cells = tuple(types.CellType() for _ in code.co_freevars) if code.co_freevars else None
        resume = types.FunctionType(code, fn.__globals__, code.co_name, None, cells)
        if compiled:
            found = runtime.resume_dispatcher(resume, backend, backend_name, compile_dynamic)
        else:
            found = _with_cells(resume) if code.co_freevars else _plain(resume)
        _wrappers[key] = found
        # by the code it continues and its globals: another process makes it again from those
        made = (fn.__code__, fn.__globals__, offset, kinds, live, backend, backend_name, compiled, dynamic)
        remember_maker(found, "resume", made, {"compile_dynamic": compile_dynamic, "shares_cells": shares_cells})
    return found


# a nested break's chain link (`nested_resume_function`): code, globals, offset, stack kinds, live
# locals, context exits, shares cells, takes the callee's result
Link = tuple[types.CodeType, dict, int, tuple[SlotKind, ...], tuple[str, ...], tuple[int, ...], bool, bool]


def nested_resume_function(
    links: tuple[Link, ...],
    backend: Any,
    backend_name: str,
    runtime: Runtime,
    dynamic: tuple[int, ...] = (),
    compile_dynamic: bool | None = None,
    present_as: tuple[str, int, str] | None = None,
    eager_first: bool = False,
) -> Any:
    """What a nested graph break tail-calls: the dispatcher of a function that runs a chain of
    resume functions, each returning into the next. `links`, innermost frame first, are each
    frame's (code, globals, offset, stack kinds, live locals, context exits, shares cells, takes
    the callee's result): the innermost one resumes after the break, each caller after its call,
    with the callee's result on top of its stack (its last kind), or, after a STORE_ATTR or
    STORE_SUBSCR that ran the object's own hook, with nothing added. Context exits are the
    positions among a link's arguments of the `__exit__`s of the grad-mode `with` blocks its
    frame is in: until the link runs (its code then leaves them itself), an exception leaves them
    here, as the blocks would.

    The chain takes every link's arguments in that order, less the results, as one tuple; it is
    compiled as one frame, so the resumed callers' code joins the callee's in one graph, as the
    trace before the break had them in one. `dynamic`: positions of arguments symbolic from the
    first compile (`resume_function`'s `dynamic`). `eager_first`: the innermost link runs as
    plain Python, its callees compiled (the break was `step_unsupported()`): the chain's trace
    breaks at its call.

    A link whose code has free or cell variables (a link that shares cells takes its cell
    variables as free variables, `build_resume_code`'s `cells_as_freevars`) is a function the
    break makes around the cells and passes first, one per such link, in order:
    its own globals, and the cells traced as the closure of a function passed in."""
    chain = nested_chain(links, present_as, eager_first)
    # by id: a key holding the chain (and through it the frames' globals) would keep the
    # dispatcher alive for as long as the table; the dispatcher holds the chain, so the id stays its
    key = ("nested", id(chain), id(backend), compile_dynamic)
    found = _wrappers.get(key)
    if found is not None:
        return found
    if dynamic:
        _dynamic.setdefault(chain.__code__, set()).update(f"L['___a{i}']" for i in dynamic)
    found = runtime.resume_dispatcher(chain, backend, backend_name, compile_dynamic)
    _wrappers[key] = found
    remember_maker(
        found,
        "nested_resume",
        (links, backend, backend_name, dynamic),
        {"compile_dynamic": compile_dynamic, "present_as": present_as, "eager_first": eager_first},
    )
    return found


def nested_chain(
    links: tuple[tuple, ...], present_as: tuple[str, int, str] | None = None, eager_first: bool = False
) -> types.FunctionType:
    """The chain function of `nested_resume_function` (made once per links and options)."""
    codes = tuple(
        resume_code(code, offset, kinds, live, shares) for (code, _, offset, kinds, live, _, shares, _) in links
    )
    # the globals by id, for the same reason as `nested_resume_function`'s key (the chain holds them)
    key = (codes, tuple(id(link[1]) for link in links), present_as, eager_first)
    chain = _chain_functions.get(key)
    if chain is None:
        # named as the compiled frame's module: its calls are traced by the rules of that code
        namespace: dict[str, Any] = {"__name__": links[-1][1].get("__name__", "__main__")}
        chain = _chain_function(codes, links, namespace, present_as, eager_first)
        remember_maker(chain, "nested_chain", (links, present_as, eager_first), {})
        _dynamic[chain.__code__] = set()  # `dynamic_arguments` of the chain
        _chain_functions[key] = chain
    return chain


def resume_link(code: types.CodeType, globals_dict: dict, eager: bool = False) -> types.FunctionType:
    """A chain's link without cells: the function of resume code `code` over the frame's
    globals; `eager` disables it with `recursive=False` (`step_unsupported()`)."""
    link = types.FunctionType(code, globals_dict, code.co_name)
    if eager:
        mark_disabled(link, "the code after step_unsupported() runs eagerly", eager_frame=link)
    remember_maker(link, "resume_link", (code, globals_dict, eager), {})
    return link


def _chain_function(
    codes: tuple[types.CodeType, ...],
    links: tuple[tuple, ...],
    namespace: dict[str, Any],
    present_as: tuple[str, int, str] | None,
    eager_first: bool,
) -> types.FunctionType:
    """The chain `nested_resume_function` describes. A link without free variables is a global
    of its namespace; one with free variables is passed in, made by the break around the cells
    it is to share (its parameter `___f<link>`, before the links' arguments)."""
    made: list[str] = []
    params: list[str] = []
    calls: list[str] = []
    exits: list[list[str]] = []  # each link's open contexts' `__exit__`s, innermost first
    for i, (code, (_, globals_dict, _, kinds, _, link_exits, _, takes_result)) in enumerate(zip(codes, links)):
        # named by what the link runs: chains written alike around other links are other code
        # (`code_tables`), and another process's persisted entries of one are not the other's
        tag = code_fingerprint(code)
        if code.co_freevars:
            if eager_first and i == 0:
                raise NotImplementedError("code run eagerly after step_unsupported() with closure cells")
            callee = f"___f{i}_{tag}"
            made.append(callee)
        else:
            callee = f"___resume{i}_{tag}"
            namespace[callee] = resume_link(code, globals_dict, eager_first and i == 0)
        own = [f"___a{len(params) + j}" for j in range(code.co_argcount - takes_result)]
        params += own
        exits.append([own[j] for j in reversed(link_exits)])
        if takes_result:  # the callee's result goes on top of the stack, under the locals
            on_stack = sum(1 for kind in kinds[:-1] if takes_argument(kind))
            own.insert(on_stack, "___v")
        calls.append(f"{callee}({', '.join(own)})")
    body: list[str] = []
    for i, call in enumerate(calls[:-1]):
        waiting = [exit_ for later in exits[i + 1 :] for exit_ in later]
        if not waiting:
            body.append(f"___v = {call}")
            continue
        body += ["try:", f"    ___v = {call}", "except BaseException:"]
        body += [f"    {exit_}(None, None, None)" for exit_ in waiting] + ["    raise"]
    body.append(f"return {calls[-1]}")
    return make_function(
        "___nested_resume",
        ", ".join(made + params),
        body,
        namespace,
        like=None,
        label="nested resume",
        present_as=present_as,
    )


def _plain(resume: types.FunctionType) -> Any:
    """The plain resume function, called as `Continue` calls a dispatcher: the arguments as one
    tuple, one frame above the resume code (`Continue.run` counts it)."""

    def call(args: tuple) -> Any:
        return resume(*args)

    return call


def _with_cells(resume: types.FunctionType) -> Any:
    """The plain resume function of closure code, called with the closure first."""

    def call(args: tuple) -> Any:
        return with_closure(resume, args[0])(*args[1:])

    return call


def origin_of(code: types.CodeType) -> types.CodeType | None:
    """The code a resume function's code continues (None for any other code)."""
    ref = _origins.get(code)
    return None if ref is None else ref()


def dynamic_arguments(code: types.CodeType) -> set[str]:
    """The source names `resume_function` was told are dynamic for this resume code (a live set:
    a later break resuming at the same place may add to it)."""
    if code in _origins:
        return _dynamic.setdefault(code, set())
    return _dynamic.get(code, set())  # a chain's (`nested_chain`), or none


process_state.register_containers(
    "graph.resume", _codes, _dynamic, _wrappers, _origins, _offset_maps, _names, _keys, _chain_functions
)
