"""Turning generated Python source into functions with the compiled function's signature.

Guard functions and transformed functions take exactly the parameters of the function they
replace, so CPython binds the call's arguments once, in C, and the generated code reads locals by
their own names. Closure cells come in as a leading positional-only `___cells` argument.
The source is registered with `linecache` so tracebacks and `inspect` show it.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import itertools
import linecache
import re
import types
from typing import Any

from .. import deferred_release

CO_VARARGS = inspect.CO_VARARGS
CO_VARKEYWORDS = inspect.CO_VARKEYWORDS

_counter = itertools.count()


def python_name(name: str) -> str:
    """A local's name as generated Python can spell it.

    Comprehensions and generator expressions compile to functions whose iterator parameter is
    named `.0`, which is no identifier; generated code calls it `___dot0`.
    """
    return name if name.isidentifier() else "___dot" + name.lstrip(".")


# globals generated code calls: builtins (`type(v)`, `len(v)`) and the modules shape guards
# print (`torch.sym_float(...)`, `math.floor(...)`)
_BUILTIN_NAMES = frozenset(dir(builtins))
_MODULES_CALLED = frozenset({"torch", "math"})
_GLOBALS_CALLED = _BUILTIN_NAMES | _MODULES_CALLED
_SPELLED = "___v_"
_PARAMETER_NAMES = re.compile(r"[A-Za-z_]\w*")


def _respell_hidden_globals(fn: ast.FunctionDef) -> None:
    """A parameter named like a global the body calls (`type`, `len`; a local `type` of
    dataclasses' own code) would hide it: its own uses are spelled `___v_<name>` instead,
    and `_own_names` gives the compiled parameter its name back, so arguments bind by keyword
    as before. Generated code never calls a local by its bare name."""
    arguments = fn.args
    params = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    params += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    calls: dict[int, str] = {}  # id of each Name node naming the global being called -> the name
    for node in ast.walk(fn):
        called = node.func if isinstance(node, ast.Call) else None
        if isinstance(called, ast.Attribute) and isinstance(called.value, ast.Name):
            if called.value.id in _MODULES_CALLED:
                calls[id(called.value)] = called.value.id
        elif isinstance(called, ast.Name) and called.id in _BUILTIN_NAMES:
            calls[id(called)] = called.id
    hidden = {a.arg for a in params} & set(calls.values())
    if not hidden:
        return
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id in hidden and id(node) not in calls:
            node.id = _SPELLED + node.id
    for argument in params:
        if argument.arg in hidden:
            argument.arg = _SPELLED + argument.arg


def _own_names(code: types.CodeType) -> types.CodeType:
    """`code` with its parameters' names as the user spelled them (`_respell_hidden_globals`):
    names only label the slots the bytecode uses, and keyword arguments bind by them."""
    names = tuple(n[len(_SPELLED) :] if n.startswith(_SPELLED) else n for n in code.co_varnames)
    return code if names == code.co_varnames else code.replace(co_varnames=names)


def parameter_list(code: types.CodeType) -> str:
    """The parameter list of `code` as Python text (no defaults; those are attached afterwards)."""
    names = tuple(python_name(n) for n in code.co_varnames)
    n_pos = code.co_argcount
    n_kwonly = code.co_kwonlyargcount
    params: list[str] = []
    posonly = list(names[: code.co_posonlyargcount])
    if code.co_freevars:
        posonly.insert(0, "___cells")
    if posonly:
        params += posonly
        params.append("/")
    params += names[code.co_posonlyargcount : n_pos]
    index = n_pos + n_kwonly
    if code.co_flags & CO_VARARGS:
        params.append("*" + names[index])
        index += 1
    elif n_kwonly:
        params.append("*")
    params += names[n_pos : n_pos + n_kwonly]
    if code.co_flags & CO_VARKEYWORDS:
        params.append("**" + names[index])
    return ", ".join(params)


def with_closure(fn: types.FunctionType, closure: tuple | None) -> types.FunctionType:
    """`fn` (code, globals, name, defaults) over other cells."""
    made = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    made.__kwdefaults__ = fn.__kwdefaults__
    return made


def signature_only(fn: types.FunctionType) -> types.FunctionType:
    """`fn` with empty cells: what a cache entry keeps to bind arguments like `fn`, without
    keeping the values `fn`'s closure captured alive."""
    if not fn.__closure__:
        return fn
    return with_closure(fn, tuple(types.CellType() for _ in fn.__closure__))


def make_function(
    name: str,
    params: str,
    body: list[str],
    namespace: dict[str, Any],
    *,
    like: types.FunctionType | None,
    label: str,
    present_as: tuple[str, int, str] | None = None,
) -> types.FunctionType:
    """Compile `def name(params): body` with `namespace` as its globals.

    `like` supplies defaults and keyword defaults so argument binding matches the original.
    `label` names the generated file in tracebacks, e.g. "guard for f at model.py:12".
    `present_as` = (filename, line, function name): the code claims to be the user's function at
    that line instead, so tracebacks, `logging`'s caller lookup and profilers point at the
    user's code (the generated text stays in `__stenograph_source__`).
    """
    # what makes it again, in another process (`warm/`), given its namespace (its globals)
    made = (name, params, tuple(body), label, present_as)
    lines = [f"def {name}({params}):"] + ["    " + line for line in body]
    text = "\n".join(lines) + "\n"
    # parsed only when a parameter is named like a global the body may call (rare; large guard
    # functions compile faster from text)
    source: str | ast.Module = text
    if not _GLOBALS_CALLED.isdisjoint(_PARAMETER_NAMES.findall(params)):
        source = ast.parse(text)
        _respell_hidden_globals(source.body[0])  # type: ignore[arg-type]
    if present_as is None:
        filename = f"<stenograph {label} #{next(_counter)}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
        exec(compile(source, filename, "exec"), namespace)
    else:
        filename, line, shown_name = present_as
        tree = source if isinstance(source, ast.Module) else ast.parse(text)
        tree.body[0].name = name = shown_name
        # every instruction spans the whole line: a traceback shows the line without markers
        # under part of it (which would point at the generated code's columns)
        width = len(linecache.getline(filename, line).rstrip("\r\n").encode())
        for node in ast.walk(tree):
            if "lineno" in node._attributes:
                node.lineno = node.end_lineno = line
                node.col_offset, node.end_col_offset = 0, width
        exec(compile(tree, filename, "exec"), namespace)
    fn = namespace[name]
    fn.__code__ = _own_names(fn.__code__)
    if present_as is None:
        # the text goes with the function: a dropped function leaves no linecache entry behind
        deferred_release.when_freed(fn, linecache.cache.pop, filename, None)
    if like is not None:
        fn.__defaults__ = like.__defaults__
        fn.__kwdefaults__ = like.__kwdefaults__
        fn.__qualname__ = like.__qualname__  # a call with wrong arguments names the user's function
    fn.__stenograph_source__ = text
    fn.__stenograph_made__ = made
    return fn
