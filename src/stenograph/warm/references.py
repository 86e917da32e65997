"""Pickling what a compile made, with every live object written as a way to find it again.

A guard set and a transformed function's namespace refer to objects of this process: module
globals dicts, classes, functions, code objects, closure cells, the entry layer's wrappers and
the backend's compiled graph. None of them can be trusted from disk. `dumps` writes each as a
reference (pickle's persistent ids): a module by name, a function by module, qualified name and
the fingerprint of its code, a code object by file, name, line and fingerprint, a cell by the
function that owns it, an entry-layer wrapper by the call that made it. `loads` finds each one in
the live process and refuses (`Unresolved`) when what it finds is not what was compiled: a
function whose code changed, a module not loaded, a class that moved.

Objects with no way back (a tensor held by generated code, a function made inside another and
found nowhere else) make `dumps` raise `NotPersistable`: that entry is simply not stored.
"""

from __future__ import annotations

import builtins
import importlib
import io
import pickle
import sys
import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch

from .. import process_state
from ..bytecode.fingerprint import code_fingerprint
from ..graph.resume import made_with
from ..graph.runtime import maker_of
from ..guards import native


class NotPersistable(Exception):
    """An object a compile used that another process could not find again."""


class Unresolved(Exception):
    """A reference that does not lead to the object compiled against in this process."""


class Context:
    """What references resolve against in the loading process: the cache's backend, the maker
    functions by name, and the compiled graphs by index."""

    def __init__(self, backend: Any, makers: dict[str, Callable[..., Any]], graphs: list[Any]) -> None:
        self.backend = backend
        self.makers = makers
        self.graphs = graphs
        # module name -> code fingerprint -> its functions, read once per load (a module's
        # contents may change between loads, never during one)
        self.functions_by_code: dict[str, dict[str, list[types.FunctionType]]] = {}


class _Persister(pickle.Pickler):
    def __init__(self, file: io.BytesIO, backend: Any, graphs: dict[int, int], named: dict[int, Any]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.backend = backend
        self.graphs = graphs
        # id(object) -> the reference to use for it: a cell's owner, say, and the process's own
        # objects (`_process_references`)
        self.named = {**_process_references(), **named}

    def persistent_id(self, obj: Any) -> Any:  # noqa: C901 - one case per kind of reference
        key = id(obj)
        if key in self.graphs:
            return ("graph", self.graphs[key])
        if key in self.named:
            return self.named[key]
        if obj is self.backend:
            return ("backend",)
        kind = type(obj)
        if kind is type and obj in _UNNAMED_TYPES:
            return ("type", *_UNNAMED_TYPES[obj])
        if kind is types.ModuleType or (isinstance(obj, types.ModuleType) and sys.modules.get(obj.__name__) is obj):
            return ("module", obj.__name__)  # a module object of its own class too (`torch._VF`)
        if kind is dict and (module_name := _module_of_globals(obj)) is not None:
            return ("globals", module_name)
        if kind is types.CodeType:
            made_code = made_with(obj)
            if made_code is not None:  # resume code: made again from the code it continues
                return ("made", "resume_code", made_code, {})
            return ("code", obj.co_filename, obj.co_qualname, obj.co_firstlineno, code_fingerprint(obj))
        if kind is types.CellType:
            raise NotPersistable("a closure cell whose function is not known")
        if kind is weakref.ref:
            target = obj()
            if target is None:
                raise NotPersistable("a weak reference whose object died")
            return ("weakref", target)
        made = maker_of(obj)
        if made is not None:
            return ("made", *made)
        if kind is types.FunctionType:
            return _function_reference(obj)
        if kind is property:
            if obj.fget is None:
                raise NotPersistable("a property without a getter")
            return ("property", obj.fget, obj.fset, obj.fdel)
        if isinstance(obj, torch.Tensor):
            raise NotPersistable(f"a tensor ({tuple(obj.shape)}) held by generated code")
        if kind is types.MappingProxyType:
            raise NotPersistable("a class __dict__ whose class is not known")
        return None


# the interpreter's own tables that guards may hold (`sys.modules['torch'] is ...`): referenced as
# `sys`'s attributes, never pickled with what they hold
_SYS_STATE = ("modules", "path", "meta_path", "path_hooks", "path_importer_cache")


def _process_references() -> dict[int, tuple]:
    """References by id for objects that pickling by value would get wrong: `sys`'s import
    tables, and what `sys.modules` holds under another name than the object's own `__name__`
    (stand-ins that are not modules, as Cython's shadow of `cython.dataclasses`, whose
    `__getattr__` would run on a half-made object when read back; modules registered under
    another key, as scipy's `uarray._uarray`), named by that key. All stay alive while a dump
    runs, so their ids are theirs."""
    found: dict[int, tuple] = {
        id(m): ("module", name)
        for name, m in list(sys.modules.items())
        if m is not None and getattr(m, "__name__", None) != name  # None: an import blocked on purpose
    }
    found.update({id(getattr(sys, name)): ("sys", name) for name in _SYS_STATE})
    return found


# builtin classes pickle cannot name (`builtins.function`, `builtins.bytes_iterator` do not
# exist): by a module global that holds them, in `types` or `collections.abc`'s implementation
_UNNAMED_TYPES: dict[type, tuple[str, str]] = {
    t: (module_name, name)
    for module_name in ("_collections_abc", "types")  # the first calls itself "collections.abc"
    for name, t in vars(sys.modules[module_name]).items()
    if isinstance(t, type) and t.__module__ == "builtins" and getattr(builtins, t.__name__, None) is not t
}


def _module_of_globals(value: dict) -> str | None:
    """The name under which `sys.modules` holds the module whose globals `value` is: its
    `__name__`, or for a module that names itself after another (`_collections_abc` calls itself
    "collections.abc") the key it was imported under."""
    name = value.get("__name__")
    if isinstance(name, str) and getattr(sys.modules.get(name), "__dict__", None) is value:
        return name
    if not isinstance(name, str) or name not in sys.modules:
        return None
    return next((key for key, module in list(sys.modules.items()) if getattr(module, "__dict__", None) is value), None)


def _function_reference(fn: types.FunctionType) -> tuple:
    """A function by module, qualified name and code: found by its name or, for one a decorator
    made (its name is its wrapped function's), by its code among the module's functions."""
    module = getattr(fn, "__module__", None)
    if not isinstance(module, str):
        raise NotPersistable(f"function {fn.__qualname__} has no module")
    named = sys.modules.get(module)
    if named is not None and _by_qualname(named, fn.__qualname__) is not fn:
        # not where its name says (`_collections_abc`'s functions say "collections.abc"): in
        # the module whose globals it has, where there is one
        module = _module_of_globals(fn.__globals__) or module
    return ("function", module, fn.__qualname__, code_fingerprint(fn.__code__))


def dumps(obj: Any, backend: Any, graphs: dict[int, int], named: dict[int, Any] | None = None) -> bytes:
    """`obj` pickled with references for live objects; `graphs` maps the id of each compiled
    graph held to its index in the entry's artifacts, `named` gives references for objects the
    pickler cannot name itself (a cell, by its owner). Raises `NotPersistable`."""
    buffer = io.BytesIO()
    try:
        _Persister(buffer, backend, graphs, named or {}).dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise NotPersistable(f"{type(e).__name__}: {e}") from e
    return buffer.getvalue()


class _Resolver(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, context: Context) -> None:
        super().__init__(file)
        self.context = context

    def persistent_load(self, pid: Any) -> Any:
        kind, *rest = pid
        if kind == "graph":
            return self.context.graphs[rest[0]]
        if kind == "backend":
            return self.context.backend
        if kind == "module":
            return _module(rest[0])
        if kind == "sys":
            return getattr(sys, rest[0])
        if kind == "type":
            module, name = rest
            return getattr(_module(module), name)
        if kind == "globals":
            return _module(rest[0]).__dict__
        if kind == "code":
            return find_code(*rest)
        if kind == "function":
            return find_function(*rest, self.context.functions_by_code)
        if kind == "weakref":
            return weakref.ref(rest[0])
        if kind == "cell":
            owner, index = rest
            return owner.__closure__[index]
        if kind == "property":
            return find_property(*rest)
        if kind == "classdict":
            return rest[0].__dict__
        if kind == "codeof":
            return rest[0].__code__
        if kind == "made":
            maker, args, kwargs = rest
            return self.context.makers[maker](*args, **kwargs)
        raise Unresolved(f"unknown reference kind {kind!r}")

    def find_class(self, module: str, name: str) -> Any:
        try:
            return super().find_class(module, name)
        except (ImportError, AttributeError) as e:
            raise Unresolved(f"{module}.{name}: {e}") from e


def loads(data: bytes, context: Context) -> Any:
    """The object `dumps` wrote, its references found in this process. Raises `Unresolved`."""
    try:
        return _Resolver(io.BytesIO(data), context).load()
    except Unresolved:
        raise
    except Exception as e:  # a damaged or foreign pickle: never trusted, never fatal
        raise Unresolved(f"unreadable entry ({type(e).__name__}: {e})") from e


def _module(name: str) -> types.ModuleType:
    module = sys.modules.get(name)
    if module is None and name.startswith(native.MODULE_PREFIX):
        return _native_checks(name)
    if module is None:
        try:
            module = importlib.import_module(name)
        except Exception as e:
            raise Unresolved(f"module {name} cannot be imported: {e}") from e
    return module


def _native_checks(name: str) -> types.ModuleType:
    """The native guard checks an entry's guards call: not importable by name (loaded from their
    build cache), so loaded as a compile would load them, and only the same build."""
    try:
        module = native.checks_module()
    except Exception as e:  # native_guards=True here and no extension: the entry is not usable
        raise Unresolved(f"native guard checks {name}: {e}") from e
    if module is None or module.__name__ != name:
        raise Unresolved(f"native guard checks {name} are not available in this process")
    return module


def find_function(
    module_name: str, qualname: str, fingerprint: str, by_code: dict[str, dict[str, list[types.FunctionType]]]
) -> types.FunctionType:
    """The live function `module.qualname` if its code is the one compiled against; else the
    one function of the module with that code (a function a decorator wrapped, found through
    its wrapper). `by_code` keeps each module's functions by fingerprint for the rest of the load."""
    module = _module(module_name)
    found = _by_qualname(module, qualname)
    if isinstance(found, types.FunctionType) and code_fingerprint(found.__code__) == fingerprint:
        return found
    index = by_code.get(module_name)
    if index is None:
        index = by_code[module_name] = {}
        for function in _reachable_functions(module):
            index.setdefault(code_fingerprint(function.__code__), []).append(function)
    matches = index.get(fingerprint, [])  # each function once: the walk skips what it saw
    if len(matches) != 1:
        what = "no function" if not matches else f"{len(matches)} functions"
        raise Unresolved(f"{module_name}.{qualname}: {what} with the compiled code")
    return matches[0]


def find_property(fget: types.FunctionType, fset: Any, fdel: Any) -> property:
    """The live property made of these (live) functions: on the class its getter was defined
    in, under any name (a property is checked by identity, so a copy would never match)."""
    owner_name, _, _ = fget.__qualname__.rpartition(".")
    owner = _by_qualname(_module(fget.__module__), owner_name) if owner_name else None
    for value in vars(owner).values() if isinstance(owner, type) else ():
        if isinstance(value, property) and (value.fget, value.fset, value.fdel) == (fget, fset, fdel):
            return value
    raise Unresolved(f"no property of {fget.__module__}.{owner_name} made of the compiled functions")


def _by_qualname(module: types.ModuleType, qualname: str) -> Any:
    """`module.a.b.c` read as the class dicts hold it (a staticmethod's function, not a bound
    method), None where a part is missing or local to a function."""
    obj: Any = module
    for part in qualname.split("."):
        if part == "<locals>":
            return None
        if isinstance(obj, type):
            obj = obj.__dict__.get(part)
        else:
            obj = getattr(obj, "__dict__", {}).get(part)
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        if obj is None:
            return None
    return obj


def _reachable_functions(module: types.ModuleType) -> Iterator[types.FunctionType]:
    """Functions of a module's globals and of its classes' dicts (properties' accessors, static
    and class methods included), with the functions their closures hold and `__wrapped__`."""
    seen: set[int] = set()
    pending: list[Any] = list(vars(module).values())
    while pending:
        obj = pending.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, type) and obj.__module__ == module.__name__:
            pending.extend(obj.__dict__.values())
        elif isinstance(obj, (staticmethod, classmethod)):
            pending.append(obj.__func__)
        elif isinstance(obj, property):
            pending.extend(f for f in (obj.fget, obj.fset, obj.fdel) if f is not None)
        elif isinstance(obj, types.FunctionType) and obj.__module__ == module.__name__:
            yield obj
            for cell in obj.__closure__ or ():
                try:
                    pending.append(cell.cell_contents)
                except ValueError:
                    pass
            wrapped = obj.__dict__.get("__wrapped__")
            if wrapped is not None:
                pending.append(wrapped)


# filename -> (qualname, first line) -> code objects, per module file found (fingerprints are
# taken only of the candidates a reference names: most of a file's code is never asked for)
_code_index: dict[str, dict[tuple[str, int], list[types.CodeType]]] = {}
process_state.register_containers("warm.code_index", _code_index, memo=True)


def find_code(filename: str, qualname: str, firstlineno: int, fingerprint: str) -> types.CodeType:
    """The live code object compiled from `filename` under that name, line and fingerprint:
    among the code of the module loaded from the file (its functions, its classes' methods and
    the code nested in theirs)."""
    found = _code_with(_code_index.get(filename, {}), qualname, firstlineno, fingerprint)
    if found is None:  # not indexed yet, or the module's code changed since
        index = _code_index[filename] = _index_file(filename)
        found = _code_with(index, qualname, firstlineno, fingerprint)
    if found is None:
        raise Unresolved(f"no code {qualname} at {filename}:{firstlineno} as compiled (changed or not loaded)")
    return found


def _code_with(
    index: dict[tuple[str, int], list[types.CodeType]], qualname: str, firstlineno: int, fingerprint: str
) -> types.CodeType | None:
    for code in index.get((qualname, firstlineno), ()):
        if code_fingerprint(code) == fingerprint:
            return code
    return None


def _index_file(filename: str) -> dict[tuple[str, int], list[types.CodeType]]:
    index: dict[tuple[str, int], list[types.CodeType]] = {}
    seen: set[int] = set()
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) != filename:
            continue
        pending = [f.__code__ for f in _reachable_functions(module)]
        while pending:
            code = pending.pop()
            if id(code) in seen:
                continue
            seen.add(id(code))
            index.setdefault((code.co_qualname, code.co_firstlineno), []).append(code)
            pending.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return index
