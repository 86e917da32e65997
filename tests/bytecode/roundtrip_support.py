"""Helpers shared by the bytecode tests: code-object corpora, equivalence checks, rebuilding
functions from round-tripped code and patching them into real modules."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import sys
import types
from pathlib import Path

from stenograph.bytecode import decoded, roundtrip
from stenograph.bytecode.linetable import line_table_is_valid

FIXTURES = Path(__file__).parent / "fixtures"

#: The real modules whose every code object is round-tripped.
CORPUS_MODULES = [
    "json",
    "json.decoder",
    "json.encoder",
    "json.scanner",
    "argparse",
    "collections",
    "functools",
    "torch.nn.modules.linear",
    "torch.nn.modules.conv",
    "torch.nn.modules.batchnorm",
    "torch.nn.modules.activation",
]


def load_fixture(name: str) -> types.ModuleType:
    """Import tests/bytecode/fixtures/<name>.py under a unique module name."""
    modname = f"_stenograph_bytecode_fixture_{name}"
    if modname in sys.modules:
        return sys.modules[modname]
    spec = importlib.util.spec_from_file_location(modname, FIXTURES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    spec.loader.exec_module(module)
    return module


def iter_code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from iter_code_objects(const)


def module_code_objects(modname: str) -> list[types.CodeType]:
    """Every code object of a module's source: module body, classes, functions, nested code."""
    module = importlib.import_module(modname)
    path = module.__file__
    source = Path(path).read_text(encoding="utf-8")
    top = compile(source, path, "exec", dont_inherit=True)
    return list(iter_code_objects(top))


def _norm(value: object) -> object:
    if isinstance(value, types.CodeType):
        return ("<code>", value.co_qualname)
    if isinstance(value, float) and math.isnan(value):
        return ("<nan>",)
    if isinstance(value, tuple):
        return tuple(_norm(v) for v in value)
    return value


def instruction_signature(code: types.CodeType) -> list[tuple]:
    return [(i.opname, _norm(i.argval)) for i in decoded(code)]


def handler_signature(code: types.CodeType) -> list[tuple | None]:
    """For each instruction (by index): (handler instruction index, depth, lasti) or None."""
    dec = decoded(code)
    out = []
    for instr in dec:
        entry = dec.handler_at(instr.offset)
        if entry is None:
            out.append(None)
        else:
            out.append((dec.index_of_offset[entry.target], entry.depth, entry.lasti))
    return out


def lines_per_unit(code: types.CodeType) -> list[int | None]:
    """The line of every code unit, as `co_lines()` (CPython's own line lookup) reports it."""
    out: list[int | None] = []
    for start, end, line in code.co_lines():
        out += [line] * ((end - start) // 2)
    return out


# 3.14+ flags a docstring in co_consts[0]; before, a string there is the docstring
_HAS_DOCSTRING = getattr(inspect, "CO_HAS_DOCSTRING", None)


def docstring_of(code: types.CodeType) -> str | None:
    first = code.co_consts[0] if code.co_consts else None
    if _HAS_DOCSTRING is not None and not code.co_flags & _HAS_DOCSTRING:
        return None
    return first if isinstance(first, str) else None


def equivalence_problems(orig: types.CodeType, new: types.CodeType) -> list[str]:
    """Differences between two code objects that would change behaviour (empty if none)."""
    problems = []
    if instruction_signature(orig) != instruction_signature(new):
        problems.append("instructions")
    if handler_signature(orig) != handler_signature(new):
        problems.append("exception table")
    if [i.positions for i in decoded(orig)] != [i.positions for i in decoded(new)]:
        problems.append("positions")
    if not line_table_is_valid(new):
        problems.append("line table")
    elif lines_per_unit(orig) != lines_per_unit(new):
        problems.append("co_lines")
    for attr in (
        "co_argcount",
        "co_posonlyargcount",
        "co_kwonlyargcount",
        "co_flags",
        "co_name",
        "co_qualname",
        "co_filename",
        "co_firstlineno",
        "co_cellvars",
        "co_freevars",
    ):
        if getattr(orig, attr) != getattr(new, attr):
            problems.append(attr)
    nargs = orig.co_argcount + orig.co_kwonlyargcount
    nargs += bool(orig.co_flags & inspect.CO_VARARGS) + bool(orig.co_flags & inspect.CO_VARKEYWORDS)
    if orig.co_varnames[:nargs] != new.co_varnames[:nargs]:
        problems.append("argument names")
    if not set(new.co_varnames) <= set(orig.co_varnames):
        problems.append("co_varnames")
    if docstring_of(orig) != docstring_of(new):
        problems.append("docstring")
    if new.co_stacksize < orig.co_stacksize:
        problems.append(f"stacksize {orig.co_stacksize} -> {new.co_stacksize}")
    return problems


def rebuild_function(fn: types.FunctionType) -> types.FunctionType:
    """The same function with its code (and all nested code) disassembled and reassembled."""
    new = types.FunctionType(
        roundtrip(fn.__code__, recursive=True),
        fn.__globals__,
        fn.__name__,
        fn.__defaults__,
        fn.__closure__,
    )
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    new.__annotations__ = fn.__annotations__
    new.__dict__.update(fn.__dict__)
    return new


def _rebuild_attr(value: object, codes: set) -> object | None:
    def rebuilt(fn: types.FunctionType) -> types.FunctionType:
        new = rebuild_function(fn)
        codes.update(iter_code_objects(new.__code__))
        return new

    if isinstance(value, types.FunctionType):
        return rebuilt(value)
    if isinstance(value, staticmethod) and isinstance(value.__func__, types.FunctionType):
        return staticmethod(rebuilt(value.__func__))
    if isinstance(value, classmethod) and isinstance(value.__func__, types.FunctionType):
        return classmethod(rebuilt(value.__func__))
    if isinstance(value, property):
        parts = [rebuilt(f) if isinstance(f, types.FunctionType) else f for f in (value.fget, value.fset, value.fdel)]
        return property(*parts, doc=value.__doc__)
    return None


def patch_module(monkeypatch, module: types.ModuleType) -> set[types.CodeType]:
    """Replace every function and method defined in `module` by its rebuilt twin.

    Returns the rebuilt code objects (nested ones included), to check they actually ran.
    """
    codes: set[types.CodeType] = set()
    path = module.__file__
    for name, value in list(vars(module).items()):
        if isinstance(value, types.FunctionType) and value.__code__.co_filename == path:
            monkeypatch.setattr(module, name, _rebuild_attr(value, codes))
        elif isinstance(value, type) and value.__module__ == module.__name__:
            for attr, member in list(vars(value).items()):
                func = getattr(member, "__func__", member)
                fget = getattr(member, "fget", None)
                code = getattr(func, "__code__", None) or getattr(fget, "__code__", None)
                if code is None or code.co_filename != path:
                    continue
                replacement = _rebuild_attr(member, codes)
                if replacement is not None:
                    monkeypatch.setattr(value, attr, replacement)
    return codes


class CodeRecorder:
    """Records the code objects of Python calls made while active (sys.setprofile)."""

    def __init__(self) -> None:
        self.codes: set[types.CodeType] = set()

    def _profile(self, frame, event, arg) -> None:
        if event == "call":
            self.codes.add(frame.f_code)

    def __enter__(self) -> CodeRecorder:
        self._previous = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(self._previous)


def outcome(fn, *args, **kwargs) -> tuple:
    """Call `fn` and describe what happened, comparable across original and rebuilt code."""
    try:
        result = fn(*args, **kwargs)
    except Exception as exc:
        return ("raised", type(exc).__name__, str(exc))
    if inspect.isgenerator(result):
        return ("generator", drive_generator(result))
    if inspect.iscoroutine(result):
        return ("coroutine", drive_coroutine(result))
    return ("returned", result)


def drive_generator(gen) -> list:
    """Exercise next/send/throw/close on a generator and record everything it produced."""
    trace = []
    try:
        trace.append(("next", next(gen)))
        trace.append(("send", gen.send(10)))
        trace.append(("throw", gen.throw(KeyError("k"))))
        trace.extend(("next", v) for v in gen)
    except StopIteration as stop:
        trace.append(("stop", stop.value))
    except Exception as exc:
        trace.append(("raised", type(exc).__name__, str(exc)))
    gen.close()
    return trace


def drive_coroutine(coro) -> list:
    trace = []
    try:
        value = coro.send(None)
        while True:
            trace.append(("yielded", value))
            value = coro.send(value)
    except StopIteration as stop:
        trace.append(("returned", stop.value))
    except Exception as exc:
        trace.append(("raised", type(exc).__name__, str(exc)))
    return trace
