"""Sources: how to reach a value from the frame being compiled (DESIGN decision 5).

A source renders to a Python expression that is valid inside the generated guard and transformed
functions. Those functions take the same parameters as the compiled function, so a local is
reached by its own name; globals through the module's globals dict bound as `___g<N>`; closure
cells through `___cells`; a class met while tracing through the class itself (`ClassSource`).
`name()` is the human form used in logs and error messages (`L['x']`, `G['cfg'].depth`,
`L['self'].layers[3].weight`).
"""

from __future__ import annotations

import ast
import gc
import math
import types
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from .. import function_mode_stack
from .pyfunc import python_name


class Source:
    """Base class: a path from the frame to a value."""

    def expr(self, globals_names: GlobalsNamer) -> str:
        """The expression, written out in full (derived sources apply themselves to their
        parent's expression)."""
        parent = self.base()
        assert parent is not None, f"{type(self).__name__} must define expr()"
        return self.apply(parent.expr(globals_names), globals_names)

    def apply(self, parent_expr: str, globals_names: GlobalsNamer) -> str:
        """For a derived source: the expression reaching it from its parent's, `parent_expr`
        followed by `suffix()` unless the source says otherwise."""
        return parent_expr + self.suffix(globals_names)

    def suffix(self, globals_names: GlobalsNamer) -> str:
        """For a derived source: the text that reaches it from its parent's value (objects it
        names, such as a class used as a dict key, are bound through `globals_names`)."""
        raise NotImplementedError

    def name(self) -> str:
        raise NotImplementedError

    def torch_name(self) -> str:
        """The name torch.compile gives the value (what its settings listing sources by name,
        `torch.compiler.config.dynamic_sources`, are written in): `name()` with the frame's
        closure cells as locals, globals as `G[...]` and module members through the tables
        holding them (`L['self']._modules['fc']._parameters['weight']`)."""
        parent = self.base()
        if parent is None:
            return self.name()
        return self.name().replace(parent.name(), parent.torch_name(), 1)

    def base(self) -> Source | None:
        return None

    # each evaluation makes a new object, which every use in one run must share: generated code
    # evaluates it once, into a local (`SourceRenderer`)
    made_anew = False

    def depth(self) -> int:
        b = self.base()
        return 0 if b is None else 1 + b.depth()

    def root(self) -> Source:
        b = self.base()
        return self if b is None else b.root()

    def __repr__(self) -> str:
        return self.name()

    def __getstate__(self) -> dict[str, Any]:
        # a kept hash is of this process's string hashing: never written out
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}


def _derived(cls: type) -> type:
    """`cls` as a frozen dataclass whose hash, the whole path's (its parents' included), is taken
    once: guards and lowering look sources up in dicts all along their paths."""
    cls = dataclass(frozen=True)(cls)
    path_hash = cls.__hash__

    def __hash__(self: Source) -> int:
        found = self.__dict__.get("_hash")
        if found is None:
            found = path_hash(self)
            object.__setattr__(self, "_hash", found)
        return found

    cls.__hash__ = __hash__  # type: ignore[method-assign]
    return cls


class GlobalsNamer:
    """Gives each distinct globals dict (or class, or other fixed object) a short name (`___g0`,
    `___g1`) in generated code."""

    def __init__(self) -> None:
        self.dicts: dict[int, tuple[str, Any]] = {}

    def name_for(self, globals_dict: Any) -> str:
        entry = self.dicts.get(id(globals_dict))
        if entry is None:
            entry = (f"___g{len(self.dicts)}", globals_dict)
            self.dicts[id(globals_dict)] = entry
        return entry[0]

    def bindings(self) -> dict[str, Any]:
        return {name: d for name, d in self.dicts.values()}


@dataclass(frozen=True)
class LocalSource(Source):
    local_name: str

    def expr(self, globals_names: GlobalsNamer) -> str:
        return python_name(self.local_name)

    def name(self) -> str:
        return f"L[{self.local_name!r}]"


@dataclass(frozen=True, eq=False)
class GlobalSource(Source):
    """A name in a module's globals dict (the frame's own or an inlined function's)."""

    global_name: str
    globals_dict: dict

    def expr(self, globals_names: GlobalsNamer) -> str:
        return f"{globals_names.name_for(self.globals_dict)}[{self.global_name!r}]"

    def name(self) -> str:
        module = self.globals_dict.get("__name__", "?")
        return f"G[{self.global_name!r}]" if module == "__main__" else f"{module}.{self.global_name}"

    def torch_name(self) -> str:
        return f"G[{self.global_name!r}]"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, GlobalSource)
            and other.global_name == self.global_name
            and other.globals_dict is self.globals_dict
        )

    def __hash__(self) -> int:
        return hash((self.global_name, id(self.globals_dict)))


@dataclass(frozen=True, eq=False)
class ClassSource(Source):
    """A class the trace looked into, reached as itself.

    Its identity is fixed by other guards (the type guard of an instance, the identity guard of
    a global); what this source adds is a way to guard the class's own attributes (`Cfg.k`,
    `Op.go`) once per class, however many instances or names led to it.
    """

    cls: type

    def expr(self, globals_names: GlobalsNamer) -> str:
        return globals_names.name_for(self.cls)

    def name(self) -> str:
        return f"{self.cls.__module__}.{self.cls.__qualname__}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClassSource) and other.cls is self.cls

    def __hash__(self) -> int:
        return hash(("class", id(self.cls)))


@dataclass(frozen=True)
class ClosureSource(Source):
    """The contents of cell `index` of the compiled function's closure."""

    index: int
    var_name: str

    def expr(self, globals_names: GlobalsNamer) -> str:
        return f"___cells[{self.index}].cell_contents"

    def name(self) -> str:
        return f"closure[{self.var_name!r}]"

    def torch_name(self) -> str:
        return f"L[{self.var_name!r}]"


@dataclass(frozen=True, eq=False)
class FixedObjectSource(Source):
    """One particular object, bound into the generated code by identity: the closure cell of a
    function that is reached without a path of its own (a method found on an object's class),
    whose identity the guards on that path already fix."""

    obj: object
    label: str

    def expr(self, globals_names: GlobalsNamer) -> str:
        return globals_names.name_for(self.obj)  # type: ignore[arg-type]

    def name(self) -> str:
        return f"<{self.label}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FixedObjectSource) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


@dataclass(frozen=True)
class FunctionModeSource(Source):
    """Entry `index` (bottom first) of torch's function-mode stack, as the compiled code's call
    finds it: a TorchFunctionMode whose handler the trace inlined (the stack's classes are
    guarded before anything is read through it)."""

    index: int

    def expr(self, globals_names: GlobalsNamer) -> str:
        return f"{globals_names.name_for(function_mode_stack.program_entry)}({self.index})"

    def name(self) -> str:
        return f"torch_function_mode_stack[{self.index}]"


@_derived
class AttrSource(Source):
    parent: Source
    attr: str

    def base(self) -> Source:
        return self.parent

    def suffix(self, globals_names: GlobalsNamer) -> str:
        return f".{self.attr}"

    def name(self) -> str:
        return f"{self.parent.name()}.{self.attr}"


@_derived
class InstanceDictSource(Source):
    """The instance `__dict__` of the object at `parent` as `object.__getattribute__` finds it:
    what a read through `object`'s lookup sees (`super().__getattribute__(name)` inside a class's
    own `__getattribute__`). Written `obj.__dict__` it would run that class's lookup again, about
    a microsecond for a HuggingFace config."""

    parent: Source

    def base(self) -> Source:
        return self.parent

    def apply(self, parent_expr: str, globals_names: GlobalsNamer) -> str:
        return f"{globals_names.name_for(object.__getattribute__)}({parent_expr}, '__dict__')"

    def name(self) -> str:
        return f"{self.parent.name()}.__dict__"


# keys written into generated code as their repr; others (classes, dtypes, tuples holding them)
# are bound by name
_WRITTEN_KEYS = (int, bool, str, bytes, type(None))


def written_key(key: object) -> bool:
    """Whether `repr(key)` is an expression giving the key back in generated code (not for an
    enum member, a torch.device, nan)."""
    if type(key) is float:
        return math.isfinite(key)
    if type(key) in (tuple, frozenset):
        return all(written_key(k) for k in key)  # type: ignore[attr-defined]
    return type(key) in _WRITTEN_KEYS


@_derived
class ItemSource(Source):
    """`parent[key]` for a constant key (int or str), e.g. a tuple element or dict value; a key
    hashed by identity (a class) is bound by name."""

    parent: Source
    key: object

    def base(self) -> Source:
        return self.parent

    def suffix(self, globals_names: GlobalsNamer) -> str:
        if written_key(self.key):
            return f"[{self.key!r}]"
        return f"[{globals_names.name_for(self.key)}]"

    def name(self) -> str:
        return f"{self.parent.name()}[{self.key!r}]"


@_derived
class OptimizerStateSource(Source):
    """The state an optimizer keeps for one parameter: `opt.state.get(p)`, where `parent` reaches
    `opt.state` (a dict keyed by the parameters themselves) and `param` reaches the parameter.

    `.get` rather than `[...]`: `opt.state` is a defaultdict, and a guard reading a missing entry
    must fail, not create it.
    """

    parent: Source
    param: Source

    def base(self) -> Source:
        return self.parent

    def suffix(self, globals_names: GlobalsNamer) -> str:
        return f".get({self.param.expr(globals_names)})"

    def name(self) -> str:
        return f"{self.parent.name()}[{self.param.name()}]"


# where nn.Module keeps its parameters, buffers and submodules, by name
MODULE_TABLES = ("_parameters", "_buffers", "_modules")


@_derived
class ModuleMemberSource(Source):
    """A parameter, buffer or submodule of an nn.Module, read from its dict directly.

    `nn.Module.__getattr__` is slow; the generated code reads `m._parameters['weight']` instead,
    which is what `m.weight` resolves to when nothing shadows it (guards check that).
    """

    parent: Source
    table: str  # "_parameters", "_buffers" or "_modules"
    key: str

    def base(self) -> Source:
        return self.parent

    def suffix(self, globals_names: GlobalsNamer) -> str:
        return f".{self.table}[{self.key!r}]"

    def name(self) -> str:
        return f"{self.parent.name()}.{self.key}"

    def torch_name(self) -> str:
        return f"{self.parent.torch_name()}.{self.table}[{self.key!r}]"


class SourceRenderer:
    """Renders sources as expressions, binding every intermediate object to a local once."""

    def __init__(self, namer: GlobalsNamer) -> None:
        self.namer = namer
        self.bound: dict[Source, str] = {}

    def render(self, source: Source, lines: list[str]) -> str:
        """Expression for `source`; emits assignments into `lines` for its ancestors (and for
        itself, where each evaluation makes a new object)."""
        if source.made_anew:
            return self._bind(source, lines)
        return self._expression(source, lines)

    def _expression(self, source: Source, lines: list[str]) -> str:
        parent = source.base()
        if parent is None:
            return source.expr(self.namer)
        return source.apply(self._bind(parent, lines), self.namer)

    def bind(self, source: Source, lines: list[str]) -> str:
        """A local holding `source`'s value (assigned on first use)."""
        return self._bind(source, lines)

    def _bind(self, source: Source, lines: list[str]) -> str:
        if isinstance(source, (LocalSource, ClassSource)):
            return source.expr(self.namer)  # already a plain name
        name = self.bound.get(source)
        if name is None:
            expr = self._expression(source, lines)
            name = f"___v{len(self.bound)}"
            lines.append(f"{name} = {expr}")
            self.bound[source] = name
        return name


@dataclass(frozen=True)
class FreshCallSource(Source):
    """What calling `fn` gives, called anew by each run of the compiled code (the numbers a
    frame draws from Python's `random`): a graph input no guard reads. `label` names it."""

    fn: Any
    label: str

    def expr(self, globals_names: GlobalsNamer) -> str:
        return f"{globals_names.name_for(self.fn)}()"

    def name(self) -> str:
        return self.label


@_derived
class NewParameterSource(Source):
    """`torch.nn.Parameter(parent, requires_grad)`, made by the compiled code before its graph on
    each call (a parameter the frame creates from a tensor it reads; `index` tells apart those of
    one trace): a graph input no guard reads, sharing the tensor's storage as eager's does."""

    parent: Source
    requires_grad: bool
    index: int  # the how-manyth the trace makes: each call of `Parameter` makes another
    made_anew = True

    def base(self) -> Source:
        return self.parent

    def apply(self, parent_expr: str, globals_names: GlobalsNamer) -> str:
        return f"{globals_names.name_for(torch.nn.Parameter)}({parent_expr}, {self.requires_grad})"

    def name(self) -> str:
        return f"Parameter#{self.index}({self.parent.name()}, requires_grad={self.requires_grad})"


@_derived
class ArrayTensorSource(Source):
    """The tensor sharing the memory of the NumPy array at `parent`, made by `fn` on each read
    (None where torch cannot share it, which fails the tensor guard): how a graph takes an array."""

    parent: Source
    fn: Any

    def base(self) -> Source:
        return self.parent

    def apply(self, parent_expr: str, globals_names: GlobalsNamer) -> str:
        return f"{globals_names.name_for(self.fn)}({parent_expr})"

    def name(self) -> str:
        return f"tensor_of({self.parent.name()})"


def iterator_rest(iterator: Any) -> tuple:
    """The items a list, tuple or range iterator has left, read from its `__reduce__` (its
    sequence and position) without advancing it; () once it is exhausted."""
    state = iterator.__reduce__()
    sequence = state[1][0]
    return tuple(sequence[state[2] :]) if len(state) > 2 else ()


def count_state(counter: Any) -> tuple | None:
    """An `itertools.count`'s next value and step, read from its repr without advancing it
    (`count(5)`, `count(5, 2)`); None unless both are ints or floats."""
    text = repr(counter)
    try:
        parts = ast.literal_eval(f"({text[len('count(') : -1]},)")
    except (ValueError, SyntaxError):
        return None
    start, step = (*parts, 1) if len(parts) == 1 else parts
    if not all(type(part) in (int, float) for part in (start, step)):
        return None
    return start, step


@_derived
class AppliedSource(Source):
    """What the module-level function `fn` answers for the object at `parent`, read without
    changing it: the items an iterator has left (`iterator_rest`), a count's state
    (`count_state`), a weak container's entries (`weak_entries`)."""

    parent: Source
    fn: Any

    def base(self) -> Source:
        return self.parent

    def apply(self, parent_expr: str, globals_names: GlobalsNamer) -> str:
        return f"{globals_names.name_for(self.fn)}({parent_expr})"

    def name(self) -> str:
        return f"{self.fn.__name__}({self.parent.name()})"


@_derived
class IterationItemSource(Source):
    """The `index`-th item met iterating the dict or set at `parent` (`part` ""), or the dict's
    values (`part` "values"): `list(parent)[index]`. Reaches tensors keying a dict, and their
    values, which no constant key names; the guards fix the container's builtin type, hence
    its order of iteration."""

    parent: Source
    index: int
    part: str = ""

    def base(self) -> Source:
        return self.parent

    def apply(self, parent_expr: str, globals_names: GlobalsNamer) -> str:
        iterated = f"{parent_expr}.{self.part}()" if self.part else parent_expr
        return f"list({iterated})[{self.index}]"

    def name(self) -> str:
        iterated = f"{self.parent.name()}.{self.part}()" if self.part else self.parent.name()
        return f"list({iterated})[{self.index}]"


def proxied_mapping(proxy: Any) -> Any:
    """The mapping a `types.MappingProxyType` reads (its one referent; Python has no attribute
    for it), None for anything else."""
    return gc.get_referents(proxy)[0] if type(proxy) is types.MappingProxyType else None


@_derived
class ProxiedMappingSource(Source):
    """The mapping a mappingproxy (`parent`) reads: a proxy passed in is traced as a read-only
    view of that dict, guarded through this path."""

    parent: Source

    def base(self) -> Source:
        return self.parent

    def apply(self, parent_expr: str, globals_names: GlobalsNamer) -> str:
        return f"{globals_names.name_for(proxied_mapping)}({parent_expr})"

    def name(self) -> str:
        return f"{self.parent.name()}.<mapping>"


def weak_entries(container: Any) -> tuple:
    """What a `weakref.WeakSet` holds (its members) or a weak dictionary holds (its `(key,
    value)` pairs), in the order iterating it gives, living entries only."""
    return tuple(container) if isinstance(container, weakref.WeakSet) else tuple(container.items())


@_derived
class WeakrefTargetSource(Source):
    """What a weak reference (`parent`) points to: `parent()`."""

    parent: Source

    def base(self) -> Source:
        return self.parent

    def suffix(self, globals_names: GlobalsNamer) -> str:
        return "()"

    def name(self) -> str:
        return f"{self.parent.name()}()"
