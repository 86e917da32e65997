"""Turning generated Python source into functions with the compiled function's signature.

Guard functions and transformed functions take exactly the parameters of the function they
replace, so CPython binds the call's arguments once, in C, and the generated code reads locals by
their own names. Closure cells come in as a leading positional-only `___cells` argument.
The source is registered with `linecache` so tracebacks and `inspect` show it.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import linecache
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
    if present_as is None:
        filename = f"<stenograph {label} #{next(_counter)}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
        exec(compile(text, filename, "exec"), namespace)
    else:
        filename, line, shown_name = present_as
        tree = ast.parse(text)
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
